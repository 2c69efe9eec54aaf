"""How a GraphTensor is made: ``TensorBase`` (a node's output seen through a shape tracker, with the primitive, view,
constant and axis every kind of op builds on), Python scalars lifted to constants as torch does, and ``high_level``,
which tags a high-level op's nodes. The graph's creation ops (inputs, ``constant``, ``arange``, ``iota``) are Graph's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union

from ..core import dtypes as dt
from ..core.dtypes import DType
from ..core.errors import ArgumentError, ShapeError
from ..core.ops import Op
from ..core.shape_tracker import ShapeTracker, format_shape
from ..core.symbolic import Expr

if TYPE_CHECKING:
    from .graph import Graph, Node
    from .tensor import GraphTensor

Scalar = float | int | bool
TensorLike = Union["GraphTensor", Scalar]


def _graph_of(values) -> Graph | None:
    for value in values:
        if isinstance(value, TensorBase):
            return value.graph
        if isinstance(value, (list, tuple)):
            found = _graph_of(value)
            if found is not None:
                return found
    return None


def high_level(fn: Callable) -> Callable:
    """Tag the nodes a high-level op creates with its name (the outermost op's name wins)."""

    @functools.wraps(fn)
    def tagged(*args, **kwargs):
        graph = _graph_of(args)
        if graph is None:
            return fn(*args, **kwargs)
        with graph.origin(fn.__name__):
            return fn(*args, **kwargs)

    return tagged


class TensorBase:
    """A value in a ``Graph``: a node's output seen through a shape tracker (``GraphTensor`` adds the ops)."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __init__(self, graph: Graph, node: Node, tracker: ShapeTracker):
        self.graph = graph
        self.node = node
        self.tracker = tracker

    @property
    def shape(self) -> tuple[Expr, ...]:
        return self.tracker.dims

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return self.tracker.rank

    def __repr__(self) -> str:
        return f"<GraphTensor {format_shape(self.shape)} {self.dtype.value} from {self.node.label}>"

    def __bool__(self) -> bool:
        raise TypeError("a GraphTensor has no truth value while the graph is being built; use ll.where")

    def output(self, name: str) -> GraphTensor:
        """Mark this value as a graph output called ``name``; returns self for chaining."""
        self.graph.mark_output(self, name)
        return self

    def _view(self, tracker: ShapeTracker) -> GraphTensor:
        return type(self)(self.graph, self.node, tracker)

    def _apply(self, op: Op, *others: GraphTensor, arg=None) -> GraphTensor:
        node = self.graph.add_op(op, (self, *others), arg)
        return type(self)(self.graph, node, ShapeTracker.contiguous(node.shape))

    def _scalar(self, value: Scalar | Expr, dtype: DType | None = None) -> GraphTensor:
        return self.graph.constant(value, dtype or self.dtype)

    def _index_scalar(self, value: Expr) -> int | GraphTensor:
        """A size as an operand of index arithmetic: a Python int, or an i32 constant when symbolic."""
        return value.value if value.is_num else self._scalar(value, dt.i32)

    def _axis(self, axis: int) -> int:
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise ArgumentError(f"axis={axis!r}: expected an int, an axis of shape {format_shape(self.shape)}")
        if not -max(self.ndim, 1) <= axis < max(self.ndim, 1):
            raise ShapeError(f"axis {axis} is out of range for shape {format_shape(self.shape)}")
        return axis % max(self.ndim, 1)

    def _axes(self, axes: int | Sequence[int] | None) -> list[int]:
        """Axes as sorted non-negative ints; a 0-dim tensor takes axis 0 or -1 as torch does, meaning none."""
        if axes is None:
            return list(range(self.ndim))
        found = sorted({self._axis(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])})
        return found if self.ndim else []


def _as_tensor(value: TensorLike, like: GraphTensor) -> GraphTensor:
    if isinstance(value, TensorBase):
        if value.graph is not like.graph:
            raise ShapeError("operands belong to different graphs")
        return value
    if isinstance(value, bool):
        return like.graph.constant(value, dt.bool_)
    if isinstance(value, (int, Expr)):  # an Expr: a symbolic size, evaluated when the graph runs
        return like.graph.constant(value, dt.i64 if like.dtype == dt.bool_ else like.dtype)
    if isinstance(value, float):
        return like.graph.constant(value, like.dtype if like.dtype.is_float else dt.f32)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a tensor operand")


def _binary_operands(a: TensorLike, b: TensorLike) -> tuple[GraphTensor, GraphTensor]:
    """Lift Python scalars to constants typed after the tensor operand (torch's scalar rules)."""
    if isinstance(a, TensorBase):
        return a, _as_tensor(b, a)
    if isinstance(b, TensorBase):
        return _as_tensor(a, b), b
    raise TypeError("at least one operand must be a GraphTensor")
