"""The cross-stage map: counterparts of a node in every other stage, and the CUDA lines behind them."""

from __future__ import annotations

import json

import pytest

import luminal_lab as ll
from luminal_lab.codegen.cuda_stage import CudaStage
from luminal_lab.compiler.provenance import STAGES
from luminal_lab.core.stage import SCHEMA_VERSION, STAGE_MIME
from tests.helpers.fused import COMPUTED, LAYOUT, LINES, REGION, Fused, compile_fused


def test_pipeline_uses_the_given_genome(fused: Fused) -> None:
    stages = fused.comp.stages(fused.genome)
    assert list(stages) == list(STAGES) == list(fused.provenance.stages)
    llir = fused.provenance.stages["llir"]
    assert llir.genome_hash == fused.genome.hash != fused.comp.genome.hash
    assert [(f"k{k.id}", k.op) for k in llir.kernels] == LAYOUT
    assert fused.provenance.ids("regions") == ["r0"]
    assert fused.provenance.ids("cuda") == ["cu7", "cu9"]
    assert fused.provenance.ids("hlir") == [f"h{i}" for i in range(8)]


def test_cuda_region_kernel_maps_to_every_stage(fused: Fused) -> None:
    computed = [e for op in ("Add", "Sin", "Sqrt") for e in fused.eclasses_computing(op)]
    assert fused.provenance.counterparts("cuda", "cu7") == {
        "hlir": ["h2", "h3", "h4"],  # Add, Sin, Sqrt: the fused ops carry them; the inputs are only read
        # the region's own e-classes, and through its HLIR nodes every e-class computing Add, Sin or Sqrt (the
        # original ones and the fused alternatives of other regions)
        "egraph": fused.in_egraph_order([*fused.eclass(*REGION), *computed]),
        "llir": REGION,
        "regions": ["r0"],
    }


def test_region_and_its_cuda_kernel_correspond(fused: Fused) -> None:
    from_region = fused.provenance.counterparts("regions", "r0")
    assert from_region["cuda"] == ["cu7"]
    assert from_region["llir"] == REGION
    assert from_region["hlir"] == ["h2", "h3", "h4"]
    assert from_region["egraph"] == fused.provenance.counterparts("cuda", "cu7")["egraph"]


def test_plain_cuda_kernel(fused: Fused) -> None:
    # its own e-class and, through h6, the e-classes of the fused row sums that the genome did not pick
    summing = fused.eclasses_computing("SumReduce")
    assert fused.eclass("k9")[0] in summing and len(summing) > 1
    assert fused.provenance.counterparts("cuda", "cu9") == {
        "hlir": ["h6"], "egraph": summing, "llir": ["k9"], "regions": []}


def test_fused_eclasses_carry_the_hlir_node_of_the_op_they_mirror(fused: Fused) -> None:
    for node, (op, kernel) in COMPUTED.items():
        assert fused.eclasses_of_hlir(node) == fused.eclasses_computing(op), node
        assert len(fused.eclasses_of_hlir(node)) > 1, node  # the original e-class and at least one fused one
        assert fused.eclass(kernel)[0] in fused.eclasses_of_hlir(node), node
    for start in ("k1", "k3"):  # a FusionStart only reads its input: no HLIR node
        assert fused.provenance.counterparts("llir", start)["hlir"] == []


def test_hlir_node_through_eclass_to_region_and_cuda(fused: Fused) -> None:
    # Sqrt (h4): its FusedSqrt (k6) and the FusionEnd (k7) in Sqrt's own e-class, which writes the region's result
    sqrt = fused.eclasses_computing("Sqrt")
    assert set(fused.eclass("k6", "k7")) <= set(sqrt)
    assert fused.provenance.counterparts("hlir", "h4") == {
        "egraph": sqrt, "llir": ["k6", "k7"], "regions": ["r0"], "cuda": ["cu7"]}
    assert fused.provenance.counterparts("hlir", "h6") == {
        "egraph": fused.eclasses_computing("SumReduce"), "llir": ["k9"], "regions": [], "cuda": ["cu9"]}


def test_inputs_and_outputs_have_no_cuda_kernel(fused: Fused) -> None:
    assert fused.provenance.counterparts("hlir", "h0") == {
        "egraph": fused.eclass("k0"), "llir": ["k0"], "regions": [], "cuda": []}
    assert fused.provenance.counterparts("hlir", "h5") == {
        "egraph": fused.eclass("k8"), "llir": ["k8"], "regions": [], "cuda": []}


def test_hlir_node_inside_a_region_reaches_its_fused_op_region_and_cuda_line(fused: Fused) -> None:
    # Add (h2) and Sin (h3) run only inside the region, as its FusedAdd (k4) and FusedSin (k5)
    hlir = {n["id"]: n["op"] for n in fused.provenance.envelopes["hlir"]["nodes"]}
    llir = dict(LAYOUT)
    source = _source(fused.provenance.stages["cuda"], "cu7")
    for node, kernel in (("h2", "k4"), ("h3", "k5")):
        op = hlir[node]
        assert (op, llir[kernel]) == (COMPUTED[node][0], f"Fused{op}")
        assert fused.provenance.counterparts("hlir", node) == {
            "egraph": fused.eclasses_computing(op), "llir": [kernel], "regions": ["r0"], "cuda": ["cu7"]}
        line, text = LINES[kernel]
        assert fused.provenance.lines("hlir", node) == {"cu7": [line]}
        assert source[line - 1].strip() == text


def test_fused_kernel_maps_to_its_region_and_cuda_kernel(fused: Fused) -> None:
    # FusedSin (k5) computes Sin (h3); through h3 it also reaches Sin's other e-classes
    assert fused.provenance.counterparts("llir", "k5") == {
        "hlir": ["h3"], "egraph": fused.eclasses_computing("Sin"), "regions": ["r0"], "cuda": ["cu7"]}
    assert fused.provenance.counterparts("egraph", fused.eclass("k5")[0]) == {
        "hlir": ["h3"], "llir": ["k5"], "regions": ["r0"], "cuda": ["cu7"]}


def test_enode_stands_for_its_eclass(fused: Fused) -> None:
    eclass = fused.eclass("k7")[0]
    enodes = [n["id"] for n in fused.provenance.envelopes["egraph"]["nodes"]
              if n["kind"] == "enode" and n["eclass"] == eclass]
    assert len(enodes) > 1
    for enode in enodes:
        assert fused.provenance.counterparts("egraph", enode) == {
            "hlir": ["h4"], "llir": ["k6", "k7"], "regions": ["r0"], "cuda": ["cu7"]}
    highlighted, lines = fused.provenance.highlight("egraph", enodes[0])
    assert highlighted == {"hlir": ["h4"], "egraph": [eclass, enodes[0]], "llir": ["k6", "k7"], "regions": ["r0"],
                           "cuda": ["cu7"]}
    assert lines == {"cu7": [12, 13]}  # t2 = sqrtf(t1), and FusionEnd's store of t2


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
                **{int(k[1:]): line for k, line in LINES.items()}}
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
    assert provenance.lines("hlir", "h4") == {"cu7": [12, 13]}  # FusedSqrt's t2, and FusionEnd's store
    assert provenance.lines("hlir", "h2") == {"cu7": [10]}  # FusedAdd's t0
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


def test_pipeline_output_holds_every_stage_and_the_cuda_lines(fused: Fused) -> None:
    fused.comp.genome = fused.genome
    output = fused.comp.pipeline()
    bundle = output._repr_mimebundle_()
    assert set(bundle) == {"text/plain", STAGE_MIME}
    envelope = bundle[STAGE_MIME]
    assert (envelope["stage"], envelope["schema"]) == ("pipeline", SCHEMA_VERSION)
    assert [stage["stage"] for stage in envelope["stages"]] == list(STAGES)
    assert envelope["stages"] == list(fused.provenance.envelopes.values())
    assert bundle["text/plain"] == envelope["summary"] == "\n".join(
        stage["summary"] for stage in envelope["stages"])
    region_lines = {k: [line] for k, (line, _) in LINES.items()}
    assert envelope["meta"]["cuda_lines"] == {"cu7": {"k1": [8], "k3": [9], **region_lines}, "cu9": {"k9": [30]}}
    json.dumps(envelope)  # plain JSON throughout


def test_pipeline_output_holds_every_nodes_counterparts_and_lines(fused: Fused) -> None:
    """The extension reads a selection's counterparts and CUDA lines from the envelope: none are left out."""
    fused.comp.genome = fused.genome
    table = fused.comp.pipeline().to_json()["meta"]["provenance"]
    provenance, checked = fused.provenance, 0
    for stage in STAGES:
        for node_id in provenance.ids(stage):
            entry = table.get(stage, {}).get(node_id, {})
            found = provenance.counterparts(stage, node_id)
            assert entry.get("counterparts", {}) == {name: ids for name, ids in found.items() if ids}, node_id
            assert entry.get("lines", {}) == provenance.lines(stage, node_id), node_id
            checked += bool(entry)
    sin = table["hlir"]["h3"]
    assert {k: sin["counterparts"][k] for k in ("llir", "regions", "cuda")} == {"llir": ["k5"], "regions": ["r0"],
                                                                               "cuda": ["cu7"]}
    assert sin["lines"] == {"cu7": [11]}
    assert checked > len(provenance.ids("hlir"))
