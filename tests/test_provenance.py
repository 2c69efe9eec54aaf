"""The cross-stage map: counterparts of a node in every other stage, and the CUDA lines behind them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import luminal_lab as ll
from luminal_lab.compiled import Compiled
from luminal_lab.cuda_stage import CudaStage
from luminal_lab.genome import Genome
from luminal_lab.provenance import STAGES, Provenance, pipeline

# The LLIR of the fused genome of ``sin_sqrt_sum``: one region (k1 ... k7) and a row sum (k9).
LAYOUT = [("k0", "Input"), ("k1", "FusionStart"), ("k2", "Input"), ("k3", "FusionStart"), ("k4", "FusedAdd"),
          ("k5", "FusedSin"), ("k6", "FusedSqrt"), ("k7", "FusionEnd"), ("k8", "Output"), ("k9", "SumReduce"),
          ("k10", "Output")]
REGION = ["k1", "k3", "k4", "k5", "k6", "k7"]


@dataclass
class Fused:
    """A compiled graph, its genome with a fused region, and that genome's provenance."""

    comp: Compiled
    genome: Genome
    provenance: Provenance

    def eclass(self, *kernels: str) -> list[str]:
        """The e-classes of LLIR kernels (egglog numbers them, so tests look them up)."""
        by_id = {f"k{k.id}": k.eclass for k in self.provenance.stages["llir"].kernels}
        return [by_id[k] for k in kernels]

    def eclass_of_hlir(self, node: str) -> str:
        """The IR e-class holding HLIR ``node`` (from the e-graph stage's JSON)."""
        nodes = self.provenance.envelopes["egraph"]["nodes"]
        return next(n["id"] for n in nodes if n["kind"] == "eclass" and n["sort"] == "IR" and node in n["hlir"])


def sin_sqrt_sum(g: ll.Graph) -> None:
    """``y = sqrt(sin(a + b))`` (fusable) and its row sums ``s``."""
    a, b = g.tensor((4, 8), name="a"), g.tensor((4, 8), name="b")
    y = (a + b).sin().sqrt()
    y.output("y")
    y.sum(-1).output("s")


def compile_fused(build=sin_sqrt_sum) -> Iterator[Fused]:
    """Compile the graph ``build`` makes, with the genome that fuses most; closes the e-graph afterwards."""
    g = ll.Graph()
    build(g)
    comp = ll.compile(g)
    try:
        genome = comp.choice_space().fused_genome()
        yield Fused(comp, genome, Provenance.of(comp, genome))
    finally:
        comp.egraph.close()


@pytest.fixture(scope="module")
def fused() -> Iterator[Fused]:
    yield from compile_fused()


def test_pipeline_uses_the_given_genome(fused: Fused) -> None:
    stages = pipeline(fused.comp, fused.genome)
    assert list(stages) == list(STAGES) == list(fused.provenance.stages)
    llir = fused.provenance.stages["llir"]
    assert llir.genome_hash == fused.genome.hash != fused.comp.genome.hash
    assert [(f"k{k.id}", k.op) for k in llir.kernels] == LAYOUT
    assert fused.provenance.ids("regions") == ["r0"]
    assert fused.provenance.ids("cuda") == ["cu7", "cu9"]
    assert fused.provenance.ids("hlir") == [f"h{i}" for i in range(8)]


def test_cuda_region_kernel_maps_to_every_stage(fused: Fused) -> None:
    assert fused.provenance.counterparts("cuda", "cu7") == {
        "hlir": ["h4"],  # only the FusionEnd keeps an HLIR node: the fused e-classes hold none
        "egraph": sorted(fused.eclass(*REGION), key=fused.provenance.ids("egraph").index),
        "llir": REGION,
        "regions": ["r0"],
    }


def test_region_and_its_cuda_kernel_correspond(fused: Fused) -> None:
    from_region = fused.provenance.counterparts("regions", "r0")
    assert from_region["cuda"] == ["cu7"]
    assert from_region["llir"] == REGION
    assert from_region["hlir"] == ["h4"]
    assert from_region["egraph"] == fused.provenance.counterparts("cuda", "cu7")["egraph"]


def test_plain_cuda_kernel(fused: Fused) -> None:
    assert fused.provenance.counterparts("cuda", "cu9") == {
        "hlir": ["h6"], "egraph": fused.eclass("k9"), "llir": ["k9"], "regions": []}


def test_hlir_node_through_eclass_to_region_and_cuda(fused: Fused) -> None:
    assert fused.eclass_of_hlir("h4") == fused.eclass("k7")[0]
    assert fused.provenance.counterparts("hlir", "h4") == {
        "egraph": fused.eclass("k7"), "llir": ["k7"], "regions": ["r0"], "cuda": ["cu7"]}
    assert fused.provenance.counterparts("hlir", "h6") == {
        "egraph": fused.eclass("k9"), "llir": ["k9"], "regions": [], "cuda": ["cu9"]}


def test_inputs_and_outputs_have_no_cuda_kernel(fused: Fused) -> None:
    assert fused.provenance.counterparts("hlir", "h0") == {
        "egraph": fused.eclass("k0"), "llir": ["k0"], "regions": [], "cuda": []}
    assert fused.provenance.counterparts("hlir", "h5") == {
        "egraph": fused.eclass("k8"), "llir": ["k8"], "regions": [], "cuda": []}


def test_hlir_node_computed_only_inside_a_region_stops_at_its_eclass(fused: Fused) -> None:
    # Add (h2) runs as the region's FusedAdd, whose e-class the fusion rules made without HLIR provenance
    assert fused.provenance.counterparts("hlir", "h2") == {
        "egraph": [fused.eclass_of_hlir("h2")], "llir": [], "regions": [], "cuda": []}


def test_fused_kernel_maps_to_its_region_and_cuda_kernel(fused: Fused) -> None:
    assert fused.provenance.counterparts("llir", "k5") == {
        "hlir": [], "egraph": fused.eclass("k5"), "regions": ["r0"], "cuda": ["cu7"]}
    assert fused.provenance.counterparts("egraph", fused.eclass("k5")[0]) == {
        "hlir": [], "llir": ["k5"], "regions": ["r0"], "cuda": ["cu7"]}


def test_enode_stands_for_its_eclass(fused: Fused) -> None:
    eclass = fused.eclass("k7")[0]
    enodes = [n["id"] for n in fused.provenance.envelopes["egraph"]["nodes"]
              if n["kind"] == "enode" and n["eclass"] == eclass]
    assert len(enodes) > 1
    for enode in enodes:
        assert fused.provenance.counterparts("egraph", enode) == {
            "hlir": ["h4"], "llir": ["k7"], "regions": ["r0"], "cuda": ["cu7"]}
    highlighted, lines = fused.provenance.highlight("egraph", enodes[0])
    assert highlighted == {"hlir": ["h4"], "egraph": [eclass, enodes[0]], "llir": ["k7"], "regions": ["r0"],
                           "cuda": ["cu7"]}
    assert lines == {"cu7": [13]}


def test_correspondence_is_symmetric(fused: Fused) -> None:
    provenance = fused.provenance
    enodes = {n["id"] for n in provenance.envelopes["egraph"]["nodes"] if n["kind"] == "enode"}
    for stage in STAGES:
        for node in provenance.ids(stage):
            if node in enodes:
                continue
            for other, ids in provenance.counterparts(stage, node).items():
                for counterpart in ids:
                    assert node in provenance.counterparts(other, counterpart)[stage], (stage, node, other)


def test_unknown_stage_or_node_is_named(fused: Fused) -> None:
    with pytest.raises(ValueError, match="unknown stage 'ptx'"):
        fused.provenance.counterparts("ptx", "k1")
    with pytest.raises(ValueError, match="the llir stage has no node 'k99'"):
        fused.provenance.counterparts("llir", "k99")
    with pytest.raises(ValueError, match="no node 'h4'"):
        fused.provenance.highlight("cuda", "h4")


def test_drawn_nodes_of_each_picture(fused: Fused) -> None:
    provenance = fused.provenance
    assert provenance.drawn("hlir") == {f"h{i}": "hlir" for i in range(8)}
    llir = {k: "llir" for k, _ in LAYOUT}
    assert provenance.drawn("llir") == {**llir, "r0": "regions"}
    assert provenance.drawn("regions") == {"r0": "regions", **llir}
    assert provenance.drawn("cuda") == {"cu7": "cuda", "cu9": "cuda"}
    with pytest.raises(ValueError, match="unknown stage 'ptx'"):
        provenance.drawn("ptx")


def _source(cuda: CudaStage, kernel: str) -> list[str]:
    return next(k for k in cuda.kernels if f"cu{k.writes}" == kernel).source.splitlines()


def test_region_source_lines(fused: Fused) -> None:
    cuda = fused.provenance.stages["cuda"]
    region = cuda.kernels[0]
    source = region.source.splitlines()
    expected = {1: (8, "const float x0 = (float)(in0[z]);"), 3: (9, "const float x1 = (float)(in1[z]);"),
                4: (10, "const float t0 = (float)((x0 + x1));"), 5: (11, "const float t1 = (float)(sinf(t0));"),
                6: (12, "const float t2 = (float)(sqrtf(t1));"), 7: (13, "out[z] = (float)(t2);")}
    for llir_kernel, (line, text) in expected.items():
        assert cuda.source_lines(region, llir_kernel) == [line]
        assert source[line - 1].strip() == text
    assert cuda.source_lines(region, 9) == []
    assert cuda.source_lines(region, 0) == []


def test_lines_of_a_selection(fused: Fused) -> None:
    provenance = fused.provenance
    assert provenance.lines("cuda", "cu7") == {"cu7": [8, 9, 10, 11, 12, 13]}
    assert provenance.lines("regions", "r0") == {"cu7": [8, 9, 10, 11, 12, 13]}
    assert provenance.lines("llir", "k5") == {"cu7": [11]}
    assert provenance.lines("llir", "k3") == {"cu7": [9]}
    assert provenance.lines("hlir", "h4") == {"cu7": [13]}
    assert provenance.lines("hlir", "h0") == {}
    assert provenance.lines("cuda", "cu9") == {"cu9": [30]}
    assert _source(provenance.stages["cuda"], "cu9")[29].strip() == "if (lane == 0) out[o] = (float)(acc);"


def scatter(g: ll.Graph) -> None:
    dest, index, src = g.tensor((6,), name="d"), g.tensor((2,), name="i", dtype=ll.i32), g.tensor((2,), name="s")
    dest.scatter(0, index, src).output("y")


def test_plain_kernel_lines_are_every_store_to_out() -> None:
    for fused in compile_fused(scatter):
        cuda = fused.provenance.stages["cuda"]
        kernel = next(k for k in cuda.kernels if k.name == "k_scatter")
        lines = cuda.source_lines(kernel, kernel.writes)
        source = kernel.source.splitlines()
        assert [source[n - 1].strip().split(" = ")[0] for n in lines] == ["out[z]", "if (idx >= 0 && idx < n) out[idx]"]
        assert fused.provenance.lines("cuda", f"cu{kernel.writes}") == {f"cu{kernel.writes}": lines}
