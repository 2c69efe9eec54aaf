"""GraphTensor: the tensor API, where every high-level op decomposes into HLIR primitives. Its ops come by kind, each
kind a mixin in a module of its own: ``creation`` (the base), ``elementwise``, ``movement``, ``reduce`` and ``special``.
The package and its frontends import ``GraphTensor`` and the functions over several tensors from here.
"""

from .elementwise import ElementwiseOps, broadcast_shapes, maximum, minimum, where
from .movement import MovementOps, concat, embedding, stack
from .reduce import ReduceOps, per_axis, sort_key_less
from .special import SpecialOps

__all__ = ["GraphTensor", "broadcast_shapes", "concat", "embedding", "maximum", "minimum", "per_axis",
           "sort_key_less", "stack", "where"]


class GraphTensor(ElementwiseOps, MovementOps, ReduceOps, SpecialOps):
    """A value in a ``Graph``: a node's output seen through a shape tracker, with every op of the tensor API."""
