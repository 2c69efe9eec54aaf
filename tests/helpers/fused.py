"""A small fused program for the cross-stage tests (provenance, report, workbench): ``sin_sqrt_sum`` compiled
with the genome that fuses most except that its row sum stays a plain kernel (so the stages hold both a region
and a plain kernel), and what its stages are known to hold."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import luminal_lab as ll
from luminal_lab.compiler.compiled import Compiled
from luminal_lab.compiler.provenance import Provenance
from luminal_lab.llir.genome import Genome

# The LLIR of that genome of ``sin_sqrt_sum``: one region (k1 ... k7) and a row sum (k9). The HLIR is
# h0 = Input a, h1 = Input b, h2 = Add, h3 = Sin, h4 = Sqrt, h5 = Output y, h6 = SumReduce, h7 = Output s; the
# region's fused ops mirror h2 (k4 FusedAdd), h3 (k5 FusedSin) and h4 (k6 FusedSqrt, whose value k7 writes).
LAYOUT = [("k0", "Input"), ("k1", "FusionStart"), ("k2", "Input"), ("k3", "FusionStart"), ("k4", "FusedAdd"),
          ("k5", "FusedSin"), ("k6", "FusedSqrt"), ("k7", "FusionEnd"), ("k8", "Output"), ("k9", "SumReduce"),
          ("k10", "Output")]
REGION = ["k1", "k3", "k4", "k5", "k6", "k7"]
COMPUTED = {"h2": ("Add", "k4"), "h3": ("Sin", "k5"), "h4": ("Sqrt", "k6")}  # HLIR op -> its fused LLIR kernel
# The region's CUDA source (cu7): the line defining each fused kernel's local, and the store FusionEnd makes.
LINES = {"k4": (10, "const float t0 = (float)((x0 + x1));"), "k5": (11, "const float t1 = (float)(sinf(t0));"),
         "k6": (12, "const float t2 = (float)(sqrtf(t1));"), "k7": (13, "out[z] = (float)(t2);")}


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

    def eclasses_of_hlir(self, node: str) -> list[str]:
        """The IR e-classes holding HLIR ``node`` (from the e-graph stage's JSON), in its order."""
        nodes = self.provenance.envelopes["egraph"]["nodes"]
        return [n["id"] for n in nodes if n["kind"] == "eclass" and n["sort"] == "IR" and node in n["hlir"]]

    def eclasses_computing(self, op: str) -> list[str]:
        """The IR e-classes with an e-node of ``op``, ``Kernel<op>`` or ``Fused<op>`` (the HLIR op, the kernel op
        lowered from it, the fused ops mirroring that kernel op), in the e-graph stage's order: read from the
        e-nodes, not from the HLIR provenance."""
        labels = {op, f"Kernel{op}", f"Fused{op}"}
        nodes = self.provenance.envelopes["egraph"]["nodes"]
        ir = {n["id"] for n in nodes if n["kind"] == "eclass" and n["sort"] == "IR"}
        found = {n["eclass"] for n in nodes if n["kind"] == "enode" and n["eclass"] in ir and n["label"] in labels}
        return self.in_egraph_order(found)

    def in_egraph_order(self, eclasses) -> list[str]:
        order = self.provenance.ids("egraph")
        return sorted(set(eclasses), key=order.index)


def sin_sqrt_sum(g: ll.Graph) -> None:
    """``y = sqrt(sin(a + b))`` (fusable) and its row sums ``s``."""
    a, b = g.tensor((4, 8), name="a"), g.tensor((4, 8), name="b")
    y = (a + b).sin().sqrt()
    y.output("y")
    y.sum(-1).output("s")


def plain_reductions(genome: Genome) -> Genome:
    """``genome`` with every e-class that ends a region but can run a plain reduction kernel picking the kernel."""
    space, picks = genome.space, list(genome.picks)
    for i, options in enumerate(space.options):
        kinds = [getattr(space.kernel_of(n), "op", None) if n.op == "Op" else None for n in options]
        plain = [k for k, kind in enumerate(kinds) if kind in ("KernelSumReduce", "KernelMaxReduce")]
        if options and kinds[picks[i]] == "FusionEnd" and plain:
            picks[i] = plain[0]
    return space.genome(picks)


def compile_fused(build=sin_sqrt_sum) -> Iterator[Fused]:
    """Compile the graph ``build`` makes, with the genome that fuses most but keeps reductions plain kernels;
    closes the e-graph afterwards."""
    g = ll.Graph()
    build(g)
    comp = ll.compile(g)
    try:
        genome = plain_reductions(comp.choice_space().fused_genome())
        yield Fused(comp, genome, Provenance(comp.stages(genome)))
    finally:
        comp.egraph.close()
