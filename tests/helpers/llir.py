"""HLIR graphs as LLIRs without the e-graph: one kernel per live node, for the runtime tests."""

from __future__ import annotations

from luminal_lab.core.ops import REDUCE_OPS, Op
from luminal_lab.hlir.graph import Graph
from luminal_lab.llir.llir import LLIR, Kernel


def llir_of(graph: Graph, commute: bool = False) -> LLIR:
    """The HLIR as an LLIR, one kernel per live node; a reduction's source is permuted so its axis is last.
    With ``commute`` every Add and Mul takes its operands the other way round (as an extraction may)."""
    names = list(graph.outputs)
    kernels = []
    for node in graph.live_nodes():
        sources = tuple((src.id, tracker) for src, tracker in node.sources)
        if commute and node.op in (Op.ADD, Op.MUL):
            sources = sources[::-1]
        arg = node.arg
        if node.op in REDUCE_OPS:
            ((src, tracker),) = node.sources
            axes = [i for i in range(tracker.rank) if i != node.arg] + [node.arg]
            sources, arg = ((src.id, tracker.permute(axes)),), None
        elif node.op == Op.OUTPUT:
            arg = names.index(node.arg)
        kernels.append(Kernel(node.id, node.op.value, sources, node.shape, node.dtype, arg, hlir=(node.id,)))
    return LLIR(kernels, [graph.outputs[name].id for name in names])
