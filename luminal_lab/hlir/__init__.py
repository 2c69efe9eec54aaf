"""The HLIR: the graph of primitive ops every model becomes, built through the tensor API.

``graph`` (``Graph``, ``Node``, the ``HLIRStage`` that ``g.hlir`` shows, the ``Signature`` a
program is called through), ``tensor`` (``GraphTensor``: ~70 high-level ops decomposed into
primitives, by kind in ``creation``, ``elementwise``, ``movement``, ``reduce`` and ``special``),
``view`` (how the HLIR stage draws itself), ``reference`` (the numpy runtime that is the ground
truth) and ``contraction`` (a broadcast multiply-and-sum as one matmul).
"""

from .graph import Graph, HLIRStage, Node, Signature
from .reference import ReferenceRuntime
from .tensor import GraphTensor

__all__ = ["Graph", "GraphTensor", "HLIRStage", "Node", "ReferenceRuntime", "Signature"]
