"""GraphTensor: the tensor API. Every high-level op decomposes into HLIR primitives.

Views (reshape, permute, expand, slice, pad, ...) only change the shape tracker. The
decompositions are exact where they can be: ``concat`` pads with zeros and adds, ``where``
gathers from the concatenation of both branches (so an ``inf`` in the branch not taken
never turns into ``nan``), ``maximum`` is a ``MaxReduce`` over a stacked pair.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union

from ..core import dtypes as dt
from ..core.dtypes import DType
from ..core.errors import ArgumentError, DTypeError, ShapeError
from ..core.ops import LOG2_E, Op
from ..core.shape_tracker import ONE, ShapeTracker, format_shape, numel
from ..core.symbolic import Expr, ExprLike, add, and_, as_expr, at_least, div, gte, lt, max_, min_, mod, mul

if TYPE_CHECKING:
    from .graph import Graph, Node

Scalar = float | int | bool
TensorLike = Union["GraphTensor", Scalar]

LN_2 = 0.6931471805599453
_EXACT_INTEGERS = 2.0**23  # every float32 of this magnitude or more is an integer


def _graph_of(values) -> Graph | None:
    for value in values:
        if isinstance(value, GraphTensor):
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


class GraphTensor:
    """A value in a ``Graph``: a node's output seen through a shape tracker."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __init__(self, graph: Graph, node: Node, tracker: ShapeTracker):
        self.graph = graph
        self.node = node
        self.tracker = tracker

    # ---- basics -------------------------------------------------------------------------
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
        return GraphTensor(self.graph, self.node, tracker)

    def _apply(self, op: Op, *others: GraphTensor, arg=None) -> GraphTensor:
        node = self.graph.add_op(op, (self, *others), arg)
        return GraphTensor(self.graph, node, ShapeTracker.contiguous(node.shape))

    def _scalar(self, value: Scalar | Expr, dtype: DType | None = None) -> GraphTensor:
        return self.graph.constant(value, dtype or self.dtype)

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

    def _float(self) -> GraphTensor:
        """Self, cast to f32 when it is an int or bool tensor (as torch does for math functions)."""
        return self if self.dtype.is_float else self.cast(dt.f32)

    # ---- dtype --------------------------------------------------------------------------
    def cast(self, dtype: DType) -> GraphTensor:
        if not isinstance(dtype, DType):
            raise DTypeError(f"cast: dtype={dtype!r} is not an ll dtype such as ll.f16")
        if dtype == self.dtype:
            return self
        return self._apply(Op.CAST, arg=dtype)

    def contiguous(self) -> GraphTensor:
        """A copy laid out row-major (a Cast to the same dtype); self when already so."""
        if self.tracker.is_contiguous:
            return self
        return self._apply(Op.CAST, arg=self.dtype)

    # ---- views --------------------------------------------------------------------------
    def reshape(self, *shape) -> GraphTensor:
        dims = list(shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
        if dims.count(-1) > 1:
            raise ShapeError(f"reshape {dims}: only one dimension may be -1")
        if -1 in dims:
            known = numel([as_expr(d) for d in dims if d != -1])
            dims[dims.index(-1)] = div(self.tracker.n_elements, known)
        tracker = self.tracker.reshape(dims)
        if tracker is None:
            tracker = self.contiguous().tracker.reshape(dims)
            return GraphTensor(self.graph, self.contiguous().node, tracker)
        return self._view(tracker)

    def as_shape(self, shape: Sequence[ExprLike]) -> GraphTensor:
        """This view with its sizes written as ``shape``, each equal to the old size at every binding (a frontend's
        spelling of a symbolic size, such as ``s - 1`` for ``min(s - 1, s)``)."""
        dims = tuple(as_expr(d) for d in shape)
        if len(dims) != self.ndim:
            raise ShapeError(f"as_shape {format_shape(dims)}: the view has shape {format_shape(self.shape)}")
        return self._view(dataclasses.replace(self.tracker, dims=dims))

    def permute(self, *axes) -> GraphTensor:
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return self._view(self.tracker.permute(axes))

    def transpose(self, a: int, b: int) -> GraphTensor:
        axes = list(range(self.ndim))
        a, b = self._axis(a), self._axis(b)
        axes[a], axes[b] = axes[b], axes[a]
        return self.permute(axes)

    @property
    def T(self) -> GraphTensor:
        return self.permute(list(reversed(range(self.ndim))))

    def unsqueeze(self, axis: int) -> GraphTensor:
        axis = axis % (self.ndim + 1)
        return self._view(self.tracker.expand_dim(axis, 1))

    def squeeze(self, axes: int | Sequence[int] | None = None) -> GraphTensor:
        drop = [a for a in self._axes(axes) if self.shape[a] == 1]
        return self.reshape([d for i, d in enumerate(self.shape) if i not in drop])

    def flatten(self, start: int = 0, end: int = -1) -> GraphTensor:
        if self.ndim == 0:
            return self.reshape(1)
        start, end = self._axis(start), self._axis(end)
        dims = self.shape[:start] + (numel(self.shape[start:end + 1]),) + self.shape[end + 1:]
        return self.reshape(dims)

    def expand(self, *shape) -> GraphTensor:
        """Broadcast to ``shape``; ``-1`` keeps a dimension as it is."""
        dims = list(shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
        offset = len(dims) - self.ndim
        dims = [self.shape[i - offset] if d == -1 else d for i, d in enumerate(dims)]
        return self.broadcast_to(dims)

    def broadcast_to(self, shape: Sequence[ExprLike]) -> GraphTensor:
        return self._view(self.tracker.broadcast_to(shape))

    def slice(self, axis: int, start: ExprLike | None = None, stop: ExprLike | None = None,
              step: int = 1) -> GraphTensor:
        """Python-style slice of one axis (negative and out-of-range bounds clamp for numeric sizes)."""
        axis = self._axis(axis)
        return self._view(self.tracker.slice(axis, *self._slice_bounds(axis, start, stop), step))

    def _slice_bounds(self, axis: int, start: ExprLike | None, stop: ExprLike | None) -> tuple[Expr, Expr]:
        size = self.shape[axis]
        start_e, stop_e = _clamp_bound(start, size, 0), _clamp_bound(stop, size, size)
        if start_e.is_num and stop_e.is_num and stop_e.value < start_e.value:
            stop_e = start_e
        return start_e, stop_e

    def pad(self, widths: Sequence[tuple[ExprLike, ExprLike]], value: Scalar = 0) -> GraphTensor:
        """numpy-style ``(before, after)`` per axis; negative widths crop; padding holds ``value``."""
        if len(widths) != self.ndim:
            raise ShapeError(f"pad needs one (before, after) pair per axis of {format_shape(self.shape)}, "
                             f"got {len(widths)}")
        tracker = self.tracker
        for axis, (before, after) in enumerate(widths):
            before, after = as_expr(before), as_expr(after)
            if (before.is_num and before.value < 0) or (after.is_num and after.value < 0):
                crop_start = -before.value if before.is_num and before.value < 0 else 0
                crop_stop = tracker.dims[axis] + after if after.is_num and after.value < 0 else tracker.dims[axis]
                tracker = tracker.slice(axis, crop_start, crop_stop)
                before = max_(before, 0)
                after = max_(after, 0)
            if before != 0 or after != 0:
                tracker = tracker.pad(axis, before, after)
        padded = self._view(tracker)
        if value == 0:
            return padded
        inside = self.graph.constant(True, dt.bool_).broadcast_to(self.shape).pad(widths)
        return where(inside, padded, value)

    def __getitem__(self, index) -> GraphTensor:
        index = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, GraphTensor) for i in index):
            if len(index) != 1:
                raise ShapeError("indexing with a tensor supports a single index on the first axis")
            return self.take(index[0], axis=0)
        if Ellipsis in index:
            at = index.index(Ellipsis)
            fill = self.ndim - (len(index) - 1 - sum(i is None for i in index))
            index = index[:at] + (slice(None),) * fill + index[at + 1:]
        out, axis, drop = self, 0, []
        for item in index:
            if item is None:
                out = out.unsqueeze(axis)
                axis += 1
            elif isinstance(item, slice):
                if item.step is not None and (not isinstance(item.step, int) or item.step < 1):
                    raise ArgumentError(f"index {item!r}: a slice's step must be an int >= 1")
                out = out.slice(axis, item.start, item.stop, item.step or 1)
                axis += 1
            elif isinstance(item, int) and not isinstance(item, bool):
                if axis >= out.ndim:
                    raise ShapeError(f"too many indices for shape {format_shape(self.shape)}")
                size = out.shape[axis]
                if size.is_num and not -size.value <= item < size.value:
                    raise ShapeError(f"index {item} is out of range for axis {axis} of shape "
                                     f"{format_shape(self.shape)}")
                position = item + size.value if item < 0 and size.is_num else item
                out = out.slice(axis, position, position + 1)
                drop.append(axis)
                axis += 1
            else:
                raise TypeError(f"unsupported index {item!r}")
        if axis > out.ndim:
            raise ShapeError(f"too many indices for shape {format_shape(self.shape)}")
        return out.squeeze(drop) if drop else out

    # ---- elementwise arithmetic ---------------------------------------------------------
    def _pair(self, other: TensorLike, result_float: bool = False) -> tuple[GraphTensor, GraphTensor]:
        a, b = _binary_operands(self, other)
        dtype = dt.promote(a.dtype, b.dtype)
        if result_float and not dtype.is_float:
            dtype = dt.f32
        shape = broadcast_shapes(a.shape, b.shape)
        return a.cast(dtype).broadcast_to(shape), b.cast(dtype).broadcast_to(shape)

    def __add__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return a._apply(Op.ADD, b)

    def __radd__(self, other: TensorLike) -> GraphTensor:
        return self + other

    def __mul__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return a._apply(Op.MUL, b)

    def __rmul__(self, other: TensorLike) -> GraphTensor:
        return self * other

    def __neg__(self) -> GraphTensor:
        return self * -1

    @high_level
    def __sub__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return a + (-b)

    @high_level
    def __rsub__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return b + (-a)

    @high_level
    def __truediv__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other, result_float=True)
        return a * b.reciprocal()

    @high_level
    def __rtruediv__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other, result_float=True)
        return b * a.reciprocal()

    def __pow__(self, exponent: float | GraphTensor) -> GraphTensor:
        return self.pow(exponent)

    def __matmul__(self, other: GraphTensor) -> GraphTensor:
        return self.matmul(other)

    def __lt__(self, other: TensorLike) -> GraphTensor:
        return self.lt(other)

    def __gt__(self, other: TensorLike) -> GraphTensor:
        return self.gt(other)

    def __le__(self, other: TensorLike) -> GraphTensor:
        return self.le(other)

    def __ge__(self, other: TensorLike) -> GraphTensor:
        return self.ge(other)

    def __invert__(self) -> GraphTensor:
        return self.logical_not()

    def __and__(self, other: TensorLike) -> GraphTensor:
        return self.logical_and(other)

    def __or__(self, other: TensorLike) -> GraphTensor:
        return self.logical_or(other)

    def fmod(self, other: TensorLike) -> GraphTensor:
        """C-style remainder (sign of the dividend), as ``torch.fmod``."""
        a, b = self._pair(other)
        return a._apply(Op.MOD, b)

    @high_level
    def remainder(self, other: TensorLike) -> GraphTensor:
        """Python-style remainder (sign of the divisor), as ``torch.remainder``."""
        a, b = self._pair(other)
        r = a.fmod(b)
        zero = a._scalar(0)
        wrong_sign = r.ne(zero) & r.lt(zero).ne(b.lt(zero))
        return where(wrong_sign, r + b, r)

    @high_level
    def div(self, other: TensorLike, rounding_mode: str | None = None) -> GraphTensor:
        """``torch.div``: true division, or rounded ``"trunc"`` / ``"floor"`` (Python's ``//``); integer operands
        divide in f64 (exact below 2^53) and keep their dtype."""
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise ArgumentError(f"div(rounding_mode={rounding_mode!r}): expected None, 'trunc' or 'floor'")
        a, b = self._pair(other)
        if not a.dtype.is_float:
            return a.cast(dt.f64).div(b.cast(dt.f64), rounding_mode).cast(a.dtype)
        mod = a.fmod(b)
        if rounding_mode == "trunc":
            q = a / b
            exact = ((a - mod) / b).round()  # the quotient of a - fmod(a, b) is an integer: undo the reciprocal's ulp
            return where(q.abs().lt(_EXACT_INTEGERS), exact, q)
        # torch's floor division: the truncated quotient, one less where the remainder's sign differs from b's
        quotient = (a - mod) / b
        quotient = where(mod.ne(0) & mod.lt(0).ne(b.lt(0)), quotient - 1, quotient)
        floored = quotient.floor()
        floored = where((quotient - floored).gt(0.5), floored + 1, floored)
        floored = where(quotient.eq(0), (a / b) * 0, floored)
        return where(b.eq(0), a / b, floored)

    # ---- comparisons and logic ----------------------------------------------------------
    def lt(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return a._apply(Op.LESS_THAN, b)

    def gt(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return b.lt(a)

    @high_level
    def isnan(self) -> GraphTensor:
        """NaN is the one value neither below +inf nor above -inf (LessThan is false with NaN)."""
        if not self.dtype.is_float:
            return self.lt(self)
        return (self.lt(math.inf) | self.gt(-math.inf)).logical_not()

    def _nan_in(self, other: TensorLike) -> GraphTensor | None:
        """Where either float operand is NaN (which IEEE comparisons treat as unordered); None for ints."""
        a, b = self._pair(other)
        if not a.dtype.is_float:
            return None
        if isinstance(other, (int, float)) and not math.isnan(other):
            return a.isnan()
        return a.isnan() | b.isnan()

    @high_level
    def le(self, other: TensorLike) -> GraphTensor:
        nan = self._nan_in(other)
        return (self.gt(other) if nan is None else self.gt(other) | nan).logical_not()

    @high_level
    def ge(self, other: TensorLike) -> GraphTensor:
        nan = self._nan_in(other)
        return (self.lt(other) if nan is None else self.lt(other) | nan).logical_not()

    @high_level
    def ne(self, other: TensorLike) -> GraphTensor:
        nan = self._nan_in(other)
        differ = self.lt(other) | self.gt(other)
        return differ if nan is None else differ | nan

    @high_level
    def eq(self, other: TensorLike) -> GraphTensor:
        return self.ne(other).logical_not()

    @high_level
    def logical_not(self) -> GraphTensor:
        return self.cast(dt.bool_).cast(dt.i32).lt(1)

    @high_level
    def logical_and(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return (a.cast(dt.bool_).cast(dt.i32) * b.cast(dt.bool_).cast(dt.i32)).gt(0)

    @high_level
    def logical_or(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return (a.cast(dt.bool_).cast(dt.i32) + b.cast(dt.bool_).cast(dt.i32)).gt(0)

    # ---- math ---------------------------------------------------------------------------
    def log2(self) -> GraphTensor:
        return self._float()._apply(Op.LOG2)

    def exp2(self) -> GraphTensor:
        return self._float()._apply(Op.EXP2)

    def sin(self) -> GraphTensor:
        return self._float()._apply(Op.SIN)

    def sqrt(self) -> GraphTensor:
        return self._float()._apply(Op.SQRT)

    def reciprocal(self) -> GraphTensor:
        return self._float()._apply(Op.RECIP)

    @high_level
    def exp(self) -> GraphTensor:
        return (self._float() * LOG2_E).exp2()

    @high_level
    def log(self) -> GraphTensor:
        return self.log2() * LN_2

    @high_level
    def cos(self) -> GraphTensor:
        return (self._float() + math.pi / 2).sin()

    @high_level
    def rsqrt(self) -> GraphTensor:
        return self.sqrt().reciprocal()

    def square(self) -> GraphTensor:
        return self * self

    @high_level
    def abs(self) -> GraphTensor:
        return self if self.dtype == dt.u8 else maximum(self, -self)

    @high_level
    def sign(self) -> GraphTensor:
        return self.gt(0).cast(self.dtype) - self.lt(0).cast(self.dtype)

    @high_level
    def relu(self) -> GraphTensor:
        return maximum(self, 0)

    @high_level
    def sigmoid(self) -> GraphTensor:
        return (1 + (-self._float()).exp()).reciprocal()

    @high_level
    def tanh(self) -> GraphTensor:
        return 2 * (2 * self._float()).sigmoid() - 1

    @high_level
    def silu(self) -> GraphTensor:
        return self * self.sigmoid()

    @high_level
    def erf(self) -> GraphTensor:
        """Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), odd-extended."""
        x = self._float()
        ax = x.abs()
        t = (1 + 0.3275911 * ax).reciprocal()
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return x.sign() * (1 - poly * (-(ax * ax)).exp())

    @high_level
    def erfc(self) -> GraphTensor:
        """``1 - erf(x)`` without the cancellation: A&S 7.1.26's tail for ``|x|``, reflected for negative ``x``."""
        x = self._float()
        ax = x.abs()
        t = (1 + 0.3275911 * ax).reciprocal()
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        tail = poly * (-(ax * ax)).exp()
        return where(x.lt(0), 2 - tail, tail)

    @high_level
    def erfinv(self) -> GraphTensor:
        """Inverse error function: Giles' single-precision polynomials in ``w = -log(1 - x²)``."""
        x = self._float()
        w = -((1 - x) * (1 + x)).log()
        central, tail = w - 2.5, w.sqrt() - 3
        p = _horner(central, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941))
        q = _horner(tail, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                           -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))
        out = where(w.lt(5), p, q) * x
        return where(x.abs().eq(1), x * math.inf, out)

    # ---- rounding -----------------------------------------------------------------------
    @high_level
    def trunc(self) -> GraphTensor:
        """Round toward zero: ``x - fmod(x, 1)``; values of 2^23 and beyond (and inf, nan) are integers already."""
        if not self.dtype.is_float:
            return self
        return where(self.abs().lt(_EXACT_INTEGERS), self - self.fmod(1), self)

    @high_level
    def floor(self) -> GraphTensor:
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return where(t.gt(self), t - 1, t)

    @high_level
    def ceil(self) -> GraphTensor:
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return where(t.lt(self), t + 1, t)

    @high_level
    def round(self, decimals: int = 0) -> GraphTensor:
        """Round half to even (``torch.round``); with ``decimals``, of ``x * 10**decimals`` scaled back."""
        if not self.dtype.is_float:
            return self
        if decimals:
            scale = 10.0 ** abs(decimals)
            scaled = self * scale if decimals > 0 else self * (1 / scale)
            return scaled.round() * (1 / scale) if decimals > 0 else scaled.round() * scale
        f = self.floor()
        d = self - f  # exact below 2^23
        odd = f.fmod(2).ne(0)
        up = d.gt(0.5) | (d.eq(0.5) & odd)
        return where(self.abs().lt(_EXACT_INTEGERS), where(up, f + 1, f), self)

    def frac(self) -> GraphTensor:
        return self - self.trunc()

    # ---- trigonometric and hyperbolic ---------------------------------------------------
    @high_level
    def tan(self) -> GraphTensor:
        """``sin(x) / cos(x)``, computed in f64 for f32 inputs (so the shifted sine that is ``cos`` stays exact
        enough near the poles)."""
        x = self._float()
        wide = x.cast(dt.f64) if x.dtype != dt.f64 else x
        return (wide.sin() / wide.cos()).cast(x.dtype)

    @high_level
    def atan(self) -> GraphTensor:
        """Arctangent: reduced to ``|t| <= tan(pi/8)`` (by ``pi/2 - atan(1/x)`` and ``pi/4 + atan((x-1)/(x+1))``),
        then an odd minimax polynomial, accurate to a few float32 ulps."""
        x = self._float()
        a = x.abs()
        big, mid = a.gt(2.414213562373095), a.gt(0.4142135623730950)
        t = where(big, -a.reciprocal(), where(mid, (a - 1) / (a + 1), a))
        offset = where(big, math.pi / 2, where(mid, math.pi / 4, 0.0))
        z = t * t
        poly = _horner(z, (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)) * z * t + t
        return where(x.lt(0), -(offset + poly), offset + poly)

    @high_level
    def atan2(self, other: TensorLike) -> GraphTensor:
        """``torch.atan2(self, other)``: the angle of ``(other, self)``, from the atan of the smaller ratio."""
        y, x = self._pair(other, result_float=True)
        ay, ax = y.abs(), x.abs()
        high, low = maximum(ay, ax), minimum(ay, ax)
        ratio = where(high.eq(0), 0.0, where(high.eq(math.inf) & low.eq(math.inf), 1.0, low / high))
        angle = ratio.atan()
        angle = where(ay.gt(ax), math.pi / 2 - angle, angle)
        angle = where(x.lt(0), math.pi - angle, angle)
        return where(y.lt(0), -angle, angle)

    @high_level
    def asin(self) -> GraphTensor:
        x = self._float()
        return x.atan2(((1 - x) * (1 + x)).sqrt())

    @high_level
    def acos(self) -> GraphTensor:
        x = self._float()
        return ((1 - x) * (1 + x)).sqrt().atan2(x)

    @high_level
    def sinh(self) -> GraphTensor:
        x = self._float()
        a = x.abs()
        magnitude = (a - LN_2).exp() - (-a - LN_2).exp()
        return where(x.lt(0), -magnitude, magnitude)

    @high_level
    def cosh(self) -> GraphTensor:
        a = self._float().abs()
        return (a - LN_2).exp() + (-a - LN_2).exp()

    @high_level
    def asinh(self) -> GraphTensor:
        x = self._float()
        a = x.abs()
        magnitude = where(a.gt(1e18), a.log() + LN_2, (a + (a * a + 1).sqrt()).log())
        return where(x.lt(0), -magnitude, magnitude)

    @high_level
    def acosh(self) -> GraphTensor:
        x = self._float()
        return where(x.gt(1e18), x.log() + LN_2, (x + ((x - 1) * (x + 1)).sqrt()).log())

    @high_level
    def atanh(self) -> GraphTensor:
        x = self._float()
        return ((1 + x) / (1 - x)).log() * 0.5

    # ---- more functions of one or two values ---------------------------------------------
    @high_level
    def log10(self) -> GraphTensor:
        return self.log2() * math.log10(2)

    @high_level
    def hypot(self, other: TensorLike) -> GraphTensor:
        """``sqrt(a² + b²)`` scaled by the larger magnitude, so it neither overflows nor underflows early."""
        a, b = self._pair(other, result_float=True)
        high, low = maximum(a.abs(), b.abs()), minimum(a.abs(), b.abs())
        ratio = low / high
        scaled = high * (1 + ratio * ratio).sqrt()
        return where(high.eq(0), 0.0, where(high.eq(math.inf), high, scaled))

    @high_level
    def signbit(self) -> GraphTensor:
        """Whether the sign bit is set: negative, or a zero whose reciprocal is ``-inf`` (``-0.0``)."""
        if not self.dtype.is_float:
            return self.lt(0)
        return self.lt(0) | (self.eq(0) & self.reciprocal().lt(0))

    @high_level
    def copysign(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other, result_float=True)
        return where(b.signbit(), -a.abs(), a.abs())

    def _ignoring_nan(self, other: TensorLike, pick) -> GraphTensor:
        """``pick(a, b)``, or the other operand where one of them is NaN."""
        a, b = self._pair(other)
        if not a.dtype.is_float:
            return pick(a, b)
        return where(a.isnan(), b, where(b.isnan(), a, pick(a, b)))

    @high_level
    def fmax(self, other: TensorLike) -> GraphTensor:
        """Elementwise maximum that ignores a NaN operand (``torch.fmax``)."""
        return self._ignoring_nan(other, maximum)

    @high_level
    def fmin(self, other: TensorLike) -> GraphTensor:
        """Elementwise minimum that ignores a NaN operand (``torch.fmin``)."""
        return self._ignoring_nan(other, minimum)

    @high_level
    def nextafter(self, other: TensorLike) -> GraphTensor:
        """The next float32 after self toward ``other``: one unit in the last place of self's binade (half that
        when stepping down from a power of two; 2⁻¹⁴⁹ among subnormals)."""
        a, b = self._pair(other)
        if a.dtype != dt.f32:
            raise DTypeError(f"nextafter is implemented for f32, got {a.dtype.value}")
        mantissa, exponent = a.frexp()
        e = exponent.cast(dt.f32)
        away = b.gt(a).ne(a.lt(0))  # the step grows |a|
        power_of_two = mantissa.abs().eq(0.5)
        step = where(away | power_of_two.logical_not(), e - 24, e - 25)
        step = maximum(step, -149.0).exp2()
        moved = where(b.gt(a), a + step, a - step)
        moved = where(a.eq(0), where(b.gt(0), 2.0**-149, -(2.0**-149)), moved)
        return where(a.eq(b), b, where(a.isnan() | b.isnan(), a + b, moved))

    # ---- special functions --------------------------------------------------------------
    @high_level
    def lgamma(self) -> GraphTensor:
        """log|Γ(x)|: shifted up by 8 and Stirling's series; reflection ``log(π/|sin πx|) - lgamma(1-x)`` below 0.5."""
        x = self._float()
        reflect = x.lt(0.5)
        z = where(reflect, 1 - x, x)
        shifted, product = z + 8, z
        for k in range(1, 8):
            product = product * (z + k)
        inverse = shifted.reciprocal()
        series = inverse * _horner(inverse * inverse, (1 / 1260, -1 / 360, 1 / 12))
        positive = (shifted - 0.5) * shifted.log() - shifted + 0.5 * math.log(2 * math.pi) + series - product.log()
        sine = (x.fmod(2) * math.pi).sin().abs()
        reflected = math.log(math.pi) - sine.log() - positive
        out = where(reflect, reflected, positive)
        return where(x.eq(math.inf) | x.eq(-math.inf), math.inf, out)

    @high_level
    def digamma(self) -> GraphTensor:
        """ψ(x): shifted up by 6 and the asymptotic series; reflection ``ψ(1-x) - π/tan(πx)`` below 0.5."""
        x = self._float()
        reflect = x.lt(0.5)
        z = where(reflect, 1 - x, x)
        shift = z.reciprocal()
        for k in range(1, 6):
            shift = shift + (z + k).reciprocal()
        w = z + 6
        inverse2 = (w * w).reciprocal()
        series = w.log() - 0.5 * w.reciprocal() - inverse2 * _horner(inverse2, (1 / 252, -1 / 120, 1 / 12))
        positive = series - shift
        reduced = x.fmod(1) * math.pi  # tan has period π
        reflected = positive - math.pi * reduced.cos() / reduced.sin()
        out = where(reflect, reflected, positive)
        pole = x.lt(0.5) & x.eq(x.trunc())
        out = where(pole, where(x.eq(0), -math.inf, math.nan), out)
        return where(x.eq(math.inf), math.inf, where(x.eq(-math.inf), math.nan, out))

    @high_level
    def polygamma(self, n: int) -> GraphTensor:
        """ψ⁽ⁿ⁾(x) for n >= 1: ``(-1)^(n+1) n! ζ(n+1, x)``, the Hurwitz zeta summed directly over twenty terms, then
        Euler–Maclaurin's tail (as torch's Cephes-derived zeta; n = 0 is ``digamma``)."""
        if n == 0:
            return self.digamma()
        x = self._float()
        s = n + 1
        total = x.pow(-s)
        for k in range(1, _ZETA_TERMS):
            total = total + (x + k).pow(-s)
        w = x + _ZETA_TERMS
        tail = w.pow(1 - s) * (1 / (s - 1)) + w.pow(-s) * 0.5
        rising = 1.0
        for j, bernoulli in enumerate(_BERNOULLI, start=1):
            rising *= (s + 2 * j - 2) * ((s + 2 * j - 3) if j > 1 else 1)
            tail = tail + w.pow(-s - 2 * j + 1) * (bernoulli * rising / math.factorial(2 * j))
        return (total + tail) * ((-1) ** (n + 1) * math.factorial(n))

    @high_level
    def frexp(self) -> tuple[GraphTensor, GraphTensor]:
        """Mantissa in ``[0.5, 1)`` (signed) and i32 exponent with ``x = m * 2**e``; 0, inf and NaN keep ``e = 0``."""
        x = self._float()
        a = x.abs()
        finite = a.lt(math.inf) & a.gt(0)
        e = where(finite, a, 1.0).log2().floor() + 1
        m = x * (-e).exp2()
        for fix_up in (m.abs().ge(1), ):
            e, m = where(fix_up, e + 1, e), where(fix_up, m * 0.5, m)
        low = m.abs().lt(0.5) & finite
        e, m = where(low, e - 1, e), where(low, m * 2, m)
        return where(finite, m, x), where(finite, e, 0.0).cast(dt.i32)

    @high_level
    def i0(self, scaled: bool = False) -> GraphTensor:
        """Modified Bessel function I₀ (times ``exp(-|x|)`` when ``scaled``): its power series below 15, the
        asymptotic expansion above."""
        return _bessel_i(self._float(), 0, scaled)

    @high_level
    def i1(self, scaled: bool = False) -> GraphTensor:
        """Modified Bessel function I₁ (times ``exp(-|x|)`` when ``scaled``)."""
        x = self._float()
        magnitude = _bessel_i(x, 1, scaled)
        return where(x.lt(0), -magnitude, magnitude)

    @high_level
    def gelu(self, approximate: str = "none") -> GraphTensor:
        """GELU, exact (erf) or with ``approximate="tanh"``, as ``torch.nn.functional.gelu``."""
        x = self._float()
        if approximate == "tanh":
            inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
            return 0.5 * x * (1 + inner.tanh())
        if approximate != "none":
            raise ArgumentError(f"gelu(approximate={approximate!r}): expected 'none' or 'tanh'")
        return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())

    @high_level
    def pow(self, exponent: float | GraphTensor) -> GraphTensor:
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float, GraphTensor)):
            raise ArgumentError(f"pow: exponent={exponent!r} is not a number or a GraphTensor")
        if isinstance(exponent, GraphTensor):
            base, power = self._pair(exponent, result_float=True)
            return (power * base.log2()).exp2()
        if exponent == 0:
            return self * 0 + 1
        if float(exponent).is_integer() and abs(exponent) <= 16:
            result, square, n = None, self, int(abs(exponent))
            while n:
                if n & 1:
                    result = square if result is None else result * square
                n >>= 1
                if n:
                    square = square * square
            return result.reciprocal() if exponent < 0 else result
        if exponent == 0.5:
            return self.sqrt()
        if exponent == -0.5:
            return self.rsqrt()
        return (self.log2() * exponent).exp2()

    @high_level
    def clamp(self, min: Scalar | GraphTensor | None = None, max: Scalar | GraphTensor | None = None) -> GraphTensor:
        out = self
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out

    # ---- reductions ---------------------------------------------------------------------
    def _reduce(self, op: Op, axes, keepdim: bool) -> GraphTensor:
        axes = self._axes(axes)
        out = self.cast(dt.i64) if self.dtype == dt.bool_ else self
        for axis in reversed(axes):
            out = out._apply(op, arg=axis)
        if keepdim:
            for axis in axes:
                out = out.unsqueeze(axis)
        return out

    def sum(self, axes: int | Sequence[int] | None = None, keepdim: bool = False) -> GraphTensor:
        """Sum over ``axes`` (all when None); bool and ints sum to i64 as in torch."""
        return self._widened()._reduce(Op.SUM_REDUCE, axes, keepdim)

    def _widened(self) -> GraphTensor:
        """Self as torch sums and multiplies it up: bool and ints as i64."""
        return self if self.dtype.is_float else self.cast(dt.i64)

    def max(self, axes: int | Sequence[int] | None = None, keepdim: bool = False) -> GraphTensor:
        return self._reduce(Op.MAX_REDUCE, axes, keepdim)

    @high_level
    def min(self, axes: int | Sequence[int] | None = None, keepdim: bool = False) -> GraphTensor:
        return _reversed(_reversed(self).max(axes, keepdim))

    @high_level
    def mean(self, axes: int | Sequence[int] | None = None, keepdim: bool = False) -> GraphTensor:
        x = self._float()
        count = numel([self.shape[a] for a in self._axes(axes)])
        total = x.sum(axes, keepdim)
        if count.is_num:
            return total * (1.0 / count.value if count.value else math.nan)
        return total * x._scalar(count, dt.i32).cast(x.dtype).reciprocal()

    @high_level
    def var(self, axes: int | Sequence[int] | None = None, correction: int = 1, keepdim: bool = False) -> GraphTensor:
        x = self._float()
        centred = x - x.mean(axes, keepdim=True)
        count = numel([self.shape[a] for a in self._axes(axes)])
        total = (centred * centred).sum(axes, keepdim)
        if count.is_num:
            return total * (1.0 / (count.value - correction) if count.value > correction else math.inf)
        return total * x._scalar(count - correction, dt.i32).cast(x.dtype).reciprocal()

    @high_level
    def softmax(self, axis: int = -1) -> GraphTensor:
        x = self._float()
        shifted = x - x.max(axis, keepdim=True)
        e = shifted.exp()
        return e * e.sum(axis, keepdim=True).reciprocal()

    @high_level
    def safe_softmax(self, axis: int = -1) -> GraphTensor:
        """``softmax``, but 0 over a row that is all -inf (a query every key is masked from), as torch's
        ``_safe_softmax`` in attention. The row's max is raised to the dtype's lowest finite value and its sum to the
        smallest normal one: an ordinary row (its max finite, its sum at least 1) is computed exactly as ``softmax``,
        and a row of -inf gets ``exp(-inf) = 0`` over a sum of 0, with no select over the row's length."""
        x = self._float()
        lowest, smallest = x.dtype.finite
        e = (x - maximum(x.max(axis, keepdim=True), lowest)).exp()
        return e * maximum(e.sum(axis, keepdim=True), smallest).reciprocal()

    @high_level
    def log_softmax(self, axis: int = -1) -> GraphTensor:
        x = self._float()
        shifted = x - x.max(axis, keepdim=True)
        return shifted - shifted.exp().sum(axis, keepdim=True).log()

    @high_level
    def layer_norm(self, normalized_ndim: int = 1, weight: GraphTensor | None = None,
                   bias: GraphTensor | None = None, eps: float = 1e-5) -> GraphTensor:
        """Normalise over the last ``normalized_ndim`` axes, then scale and shift."""
        axes = list(range(self.ndim - normalized_ndim, self.ndim))
        centred = self - self.mean(axes, keepdim=True)
        out = centred * ((centred * centred).mean(axes, keepdim=True) + eps).rsqrt()
        if weight is not None:
            out = out * weight
        if bias is not None:
            out = out + bias
        return out

    @high_level
    def rms_norm(self, weight: GraphTensor | None = None, eps: float = 1e-6, normalized_ndim: int = 1) -> GraphTensor:
        axes = list(range(self.ndim - normalized_ndim, self.ndim))
        out = self * ((self * self).mean(axes, keepdim=True) + eps).rsqrt()
        return out * weight if weight is not None else out

    @high_level
    def cumsum(self, axis: int = -1) -> GraphTensor:
        """Running sum: windows of a left-padded copy, summed (exact for inf, no masks multiplied)."""
        axis = self._axis(axis)
        source = self._widened()
        if not self.ndim:
            return source
        last = source.transpose(axis, -1)
        n = last.shape[-1]
        padded = last.pad([(0, 0)] * (last.ndim - 1) + [(n - 1, 0)]).contiguous()
        batch = padded.tracker
        windows = ShapeTracker(batch.dims[:-1] + (n, n), batch.strides[:-1] + (Expr.z(), Expr.z()),
                               batch.masks[:-1] + (ONE, ONE))
        return padded._view(windows).sum(-1).transpose(axis, -1)

    @high_level
    def prod(self, axes: int | Sequence[int] | None = None, keepdim: bool = False) -> GraphTensor:
        """Product over ``axes`` (all when None): a tree of pairwise products, padded with ones to a power of two.
        bool and ints multiply to i64 as in torch."""
        out = self._widened()
        for axis in reversed(self._axes(axes)):
            n = out.shape[axis].value
            width = 1 << max(n - 1, 0).bit_length()
            if width != n:
                widths = [(0, 0)] * out.ndim
                widths[axis] = (0, width - n)
                out = out.pad(widths, 1)
            while width > 1:
                width //= 2
                out = out.slice(axis, 0, width) * out.slice(axis, width, 2 * width)
            out = out if keepdim else out.squeeze(axis)
        return out

    @high_level
    def cumprod(self, axis: int = -1) -> GraphTensor:
        """Running product: log₂(n) steps, each multiplying by a copy shifted along ``axis`` (padded with ones)."""
        return self._scan(axis, lambda a, b: a * b, 1)

    @high_level
    def cummax(self, axis: int = -1) -> tuple[GraphTensor, GraphTensor]:
        """Running maximum and the index of its last occurrence so far (NaN, once seen, stays), as torch."""
        return self._cumulative_extreme(axis, largest=True)

    @high_level
    def cummin(self, axis: int = -1) -> tuple[GraphTensor, GraphTensor]:
        return self._cumulative_extreme(axis, largest=False)

    @high_level
    def logcumsumexp(self, axis: int = -1) -> GraphTensor:
        """``log(cumsum(exp(x)))`` along ``axis``, each prefix shifted by its running maximum."""
        x = self._float()
        if not x.ndim:
            return x
        axis = x._axis(axis)
        last = x.transpose(axis, -1)
        n = last.shape[-1]
        top = last.cummax(-1)[0]
        shift = where(top.abs().eq(math.inf), 0.0, top)
        terms = where(_prefix_mask(self.graph, n), (last.unsqueeze(-2) - shift.unsqueeze(-1)).exp(), 0.0)
        return (terms.sum(-1).log() + shift).transpose(axis, -1)

    def _scan(self, axis: int, combine: Callable, identity: Scalar) -> GraphTensor:
        axis = self._axis(axis)
        out = self._widened()
        if not self.ndim:
            return out
        n = out.shape[axis].value
        shift = 1
        while shift < n:
            widths = [(0, 0)] * out.ndim
            widths[axis] = (shift, -shift)
            out = combine(out, out.pad(widths, identity))
            shift *= 2
        return out

    def _cumulative_extreme(self, axis: int, largest: bool) -> tuple[GraphTensor, GraphTensor]:
        if not self.ndim:
            return self, self.graph.constant(0, dt.i64)
        axis = self._axis(axis)
        pick = maximum if largest else minimum
        values = self._scan(axis, pick, self.dtype.lowest if largest else self.dtype.highest)
        last, top = self.transpose(axis, -1), values.transpose(axis, -1)
        n = last.shape[-1]
        positions = self.graph.arange(n, dtype=dt.i64)
        same = last.unsqueeze(-2).eq(top.unsqueeze(-1))
        if self.dtype.is_float:
            same = same | (last.unsqueeze(-2).isnan() & top.unsqueeze(-1).isnan())
        found = where(same & _prefix_mask(self.graph, n), positions, -1).max(-1)
        return values, found.transpose(axis, -1)

    @high_level
    def sort(self, axis: int = -1, descending: bool = False) -> tuple[GraphTensor, GraphTensor]:
        """Stable sort along ``axis`` (NaN sorts as the largest value): each element's rank is the count of
        elements before it in the order, ties broken by index, and the values are scattered to their ranks.
        It builds an n×n comparison per row, so it suits axes of up to a few thousand elements."""
        axis = self._axis(axis)
        last = self.transpose(axis, -1) if self.ndim else self.reshape(1)
        n = last.shape[-1]
        a, b = last.unsqueeze(-1), last.unsqueeze(-2)  # a: element i, b: element j
        ahead = sort_key_less(a, b) if descending else sort_key_less(b, a)
        earlier = self.graph.arange(n).reshape(1, n).lt(self.graph.arange(n).reshape(n, 1))
        before = ahead | (_key_equal(a, b) & earlier)
        rank = before.cast(dt.i64).sum(-1)
        values = last.scatter(-1, rank, last)
        indices = self.graph.arange(n, dtype=dt.i64).broadcast_to(last.shape)
        indices = indices.scatter(-1, rank, indices)
        if not self.ndim:
            return values.reshape(()), indices.reshape(())
        return values.transpose(axis, -1), indices.transpose(axis, -1)

    @high_level
    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> GraphTensor:
        """The diagonal of the ``(axis1, axis2)`` planes, as the last axis: a strided slice of the flattened plane."""
        flat, start, stop, step = self._diagonal_plane(offset, axis1, axis2)
        return flat.slice(-1, start, stop, step)

    @high_level
    def diagonal_scatter(self, src: GraphTensor, offset: int = 0, axis1: int = 0, axis2: int = 1) -> GraphTensor:
        """A copy of self with ``src`` written on the diagonal that ``diagonal`` reads."""
        flat, start, stop, step = self._diagonal_plane(offset, axis1, axis2)
        written = flat.slice_scatter(src, -1, start, stop, step)
        a, b = self._axis(axis1), self._axis(axis2)
        rest = [i for i in range(self.ndim) if i not in (a, b)]
        planes = written.reshape([self.shape[i] for i in rest] + [self.shape[a], self.shape[b]])
        order = rest + [a, b]
        return planes.permute([order.index(i) for i in range(self.ndim)])

    def _diagonal_plane(self, offset: int, axis1: int, axis2: int) -> tuple[GraphTensor, int, int, int]:
        a, b = self._axis(axis1), self._axis(axis2)
        if a == b:
            raise ShapeError(f"diagonal needs two different axes, got {axis1} and {axis2}")
        rows, cols = self.shape[a].value, self.shape[b].value
        rest = [i for i in range(self.ndim) if i not in (a, b)]
        flat = self.permute(rest + [a, b]).reshape([self.shape[i] for i in rest] + [rows * cols])
        start = offset if offset >= 0 else -offset * cols
        length = max(min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols), 0)
        if length == 0:
            return flat, 0, 0, 1
        return flat, start, start + (length - 1) * (cols + 1) + 1, cols + 1

    @high_level
    def unfold(self, axis: int, size: int, step: int) -> GraphTensor:
        """Windows of ``size`` every ``step`` along ``axis`` (``torch.Tensor.unfold``): the window index replaces
        the axis and the position in the window becomes a new last axis."""
        if not self.ndim:
            return self.reshape(1).broadcast_to((size,)) if size == 1 else self.reshape(1)
        axis = self._axis(axis)
        count = (self.shape[axis].value - size) // step + 1
        starts = self.graph.arange(count, step=step, dtype=dt.i64).reshape(count, 1)
        index = starts + self.graph.arange(size, dtype=dt.i64).reshape(1, size)
        windows = self.take(index, axis)
        order = [i for i in range(windows.ndim) if i != axis + 1] + [axis + 1]
        return windows.permute(order)

    # ---- matmul -------------------------------------------------------------------------
    @high_level
    def matmul(self, other: GraphTensor) -> GraphTensor:
        """``torch.matmul`` semantics (1-D operands, broadcast batch dims) as Mul + SumReduce."""
        a, b = self, other
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError("matmul needs operands of at least one dimension")
        a_vector, b_vector = a.ndim == 1, b.ndim == 1
        if a_vector:
            a = a.unsqueeze(0)
        if b_vector:
            b = b.unsqueeze(-1)
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(f"matmul: shapes {format_shape(self.shape)} and {format_shape(other.shape)} "
                             f"do not fit ({a.shape[-1]} != {b.shape[-2]})")
        dtype = dt.promote(a.dtype, b.dtype)
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        lhs = a.cast(dtype).broadcast_to(batch + (m, k)).unsqueeze(-2).broadcast_to(batch + (m, n, k))
        rhs = b.cast(dtype).broadcast_to(batch + (k, n)).transpose(-1, -2).unsqueeze(-3)
        out = (lhs * rhs.broadcast_to(batch + (m, n, k)))._reduce(Op.SUM_REDUCE, -1, keepdim=False)
        if b_vector:
            out = out.squeeze(-1)
        if a_vector:
            out = out.squeeze(-1 if b_vector else -2)
        return out

    # ---- windows: convolution and pooling ---------------------------------------------------
    def windows(self, axes: Sequence[int], kernel: Sequence[int], stride: Sequence[int] | None = None,
                dilation: Sequence[int] | None = None) -> GraphTensor:
        """Sliding windows as a view: each of ``axes`` becomes the axis of window positions (``stride[i]`` apart)
        and each window's ``kernel[i]`` elements (``dilation[i]`` apart) a new trailing axis, in order of ``axes``.

        ``x.windows([1], [3])[i, p, j] == x[i, p + j]``. The windows overlap in memory: a view of self when its
        layout is linear (nothing padded), else of a row-major copy.
        """
        axes = [self._axis(a) for a in axes]
        stride = list(stride or [1] * len(axes))
        dilation = list(dilation or [1] * len(axes))
        if not len(axes) == len(kernel) == len(stride) == len(dilation):
            raise ShapeError(f"windows: {len(axes)} axes but kernel {list(kernel)}, stride {stride}, "
                             f"dilation {dilation}")
        source = self if self.tracker.linear_strides() is not None else self.contiguous()
        linear = source.tracker.linear_strides()
        z = Expr.z()
        dims = list(source.shape)
        strides = [add(mul(z, step), offset) for step, offset in linear]
        for axis, k, s, d in zip(axes, kernel, stride, dilation):
            span = d * (k - 1) + 1
            size = dims[axis]
            if k < 1 or s < 1 or d < 1 or (size.is_num and size.value < span):
                raise ShapeError(f"windows: a window of {k} elements, stride {s}, dilation {d} does not fit axis "
                                 f"{axis} of shape {format_shape(self.shape)}")
            step, offset = linear[axis]
            dims[axis] = div(size - span, s) + 1
            strides[axis] = add(mul(z, step, s), offset)
            dims.append(as_expr(k))
            strides.append(mul(z, step, d))
        return source._view(ShapeTracker(tuple(dims), tuple(strides), (ONE,) * len(dims)))

    @high_level
    def conv(self, weight: GraphTensor, bias: GraphTensor | None = None, stride: int | Sequence[int] = 1,
             padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1) -> GraphTensor:
        """``torch.nn.functional.conv1d/2d/3d``: ``self [N, C, *spatial]``, ``weight [C_out, C / groups, *kernel]``.

        The windows of the zero-padded input (a view) against the weight: per group one batched matmul over
        channels and kernel positions, so the matmul kernels serve it.
        """
        n_spatial = weight.ndim - 2
        if n_spatial < 1 or self.ndim != n_spatial + 2:
            raise ShapeError(f"conv: input {format_shape(self.shape)} does not fit weight {format_shape(weight.shape)} "
                             "(input [N, C, *spatial], weight [C_out, C / groups, *kernel])")
        stride, padding, dilation = (per_axis(v, n_spatial, name) for v, name in
                                     ((stride, "stride"), (padding, "padding"), (dilation, "dilation")))
        (n, c), c_out = self.shape[:2], weight.shape[0]
        if c != weight.shape[1] * groups or not c_out.is_num or c_out.value % groups:
            raise ShapeError(f"conv: input {format_shape(self.shape)} and weight {format_shape(weight.shape)} do not "
                             f"fit {groups} group(s) (weight's dim 1 times groups must be the input's channels)")
        kernel = [_static(d, "conv kernel") for d in weight.shape[2:]]
        padded = self.pad([(0, 0), (0, 0)] + [(p, p) for p in padding])
        win = padded.windows(range(2, 2 + n_spatial), kernel, stride, dilation)  # [N, C, *out, *kernel]
        out_sizes = list(win.shape[2:2 + n_spatial])
        per_group = div(c, groups)
        spatial, taps = range(3, 3 + n_spatial), range(3 + n_spatial, 3 + 2 * n_spatial)
        rows = (win.reshape([n, groups, per_group, *out_sizes, *kernel]).permute([0, 1, *spatial, 2, *taps])
                .reshape([n, groups, numel(out_sizes), -1]))  # [N, groups, positions, C / groups * taps]
        columns = weight.reshape([groups, c_out.value // groups, -1]).transpose(-1, -2)
        out = (rows @ columns).transpose(-1, -2).reshape([n, c_out, *out_sizes])
        return out if bias is None else out + bias.reshape([c_out] + [1] * n_spatial)

    def _pool_windows(self, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                      dilation: Sequence[int], ceil_mode: bool, fill: Scalar) -> GraphTensor:
        """The pooling windows of the last ``len(kernel)`` axes, padded with ``fill``, as torch sizes them
        (``ceil_mode`` included): shape ``[..., *out, window elements]``."""
        lead = self.ndim - len(kernel)
        geometry = [_pool_geometry(_static(self.shape[lead + i], "pooled size"), k, s, p, d, ceil_mode)
                    for i, (k, s, p, d) in enumerate(zip(kernel, stride, padding, dilation))]
        widths = [(0, 0)] * lead + [(p, after) for p, (_, after) in zip(padding, geometry)]
        padded = self.pad(widths, fill) if any(w != (0, 0) for w in widths) else self
        win = padded.windows(range(lead, self.ndim), kernel, stride, dilation)
        for i, (out, _) in enumerate(geometry):
            win = win.slice(lead + i, 0, out)
        return win.reshape(list(win.shape[:self.ndim]) + [-1])

    @high_level
    def max_pool(self, kernel: Sequence[int], stride: Sequence[int] | None = None, padding: int | Sequence[int] = 0,
                 dilation: int | Sequence[int] = 1, ceil_mode: bool = False,
                 return_indices: bool = False) -> GraphTensor | tuple[GraphTensor, GraphTensor]:
        """``torch.nn.functional.max_pool1d/2d/3d`` over the last ``len(kernel)`` axes (stride defaults to the
        kernel; padding never wins). ``return_indices``: also the flat position in the pooled axes of each
        maximum (the first, as torch), as i64."""
        n = len(kernel)
        stride, padding, dilation = (per_axis(v, n, name) for v, name in
                                     ((stride or kernel, "stride"), (padding, "padding"), (dilation, "dilation")))
        win = self._pool_windows(kernel, stride, padding, dilation, ceil_mode, -math.inf)
        values = win.max(-1)
        if not return_indices:
            return values
        sizes = self.shape[self.ndim - n:]
        count = numel(sizes)
        positions = self.graph.arange(count, dtype=dt.i64).reshape(sizes)
        position_win = positions._pool_windows(kernel, stride, padding, dilation, ceil_mode, 0)
        first = where(win.eq(values.unsqueeze(-1)), position_win, self.graph.constant(count.value, dt.i64))
        return values, first.min(-1)

    @high_level
    def avg_pool(self, kernel: Sequence[int], stride: Sequence[int] | None = None, padding: int | Sequence[int] = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> GraphTensor:
        """``torch.nn.functional.avg_pool1d/2d/3d`` over the last ``len(kernel)`` axes: each window's sum over
        its size (counting the padding or not), or over ``divisor_override``."""
        n = len(kernel)
        stride, padding = per_axis(stride or kernel, n, "stride"), per_axis(padding, n, "padding")
        total = self._float()._pool_windows(kernel, stride, padding, [1] * n, ceil_mode, 0).sum(-1)
        return total / self._pool_divisors(kernel, stride, padding, total.shape, count_include_pad, divisor_override,
                                           total.dtype)

    def _pool_divisors(self, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                       pooled: Sequence[Expr], count_include_pad: bool, divisor_override: int | None,
                       dtype: DType) -> GraphTensor | int:
        """What average pooling divides each window's sum by, broadcastable to the ``pooled`` shape: the window's
        size (counting the padding or not), or ``divisor_override``."""
        if divisor_override:
            return divisor_override
        n, lead = len(kernel), self.ndim - len(kernel)
        z = Expr.z()
        counts = None
        for i, (k, s, p) in enumerate(zip(kernel, stride, padding)):
            size = _static(self.shape[lead + i], "pooled size")
            lo, hi = (-p, size + p) if count_include_pad else (0, size)
            start = add(mul(z, s), -p)
            along = self.graph.iota(min_(add(start, k), hi) - max_(start, lo), pooled[lead + i])
            along = along.reshape([-1] + [1] * (n - 1 - i))
            counts = along if counts is None else counts * along
        return counts.cast(dtype)

    @high_level
    def avg_pool_backward(self, grad: GraphTensor, kernel: Sequence[int], stride: Sequence[int] | None = None,
                          padding: int | Sequence[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                          divisor_override: int | None = None) -> GraphTensor:
        """The gradient by self of ``avg_pool`` (same arguments) whose output's gradient is ``grad``: each window's
        gradient over its divisor, added into every element the window read (a ``ScatterAdd`` of the windows'
        positions; windows overlap where the stride is below the kernel)."""
        n, lead = len(kernel), self.ndim - len(kernel)
        stride, padding = per_axis(stride or kernel, n, "stride"), per_axis(padding, n, "padding")
        spatial = self.shape[lead:]
        size = numel(spatial)
        # each window element's flat position among the pooled axes; padding reads position ``size``, cut off below
        positions = self.graph.arange(size, dtype=dt.i64).reshape(spatial)
        positions = positions._pool_windows(kernel, stride, padding, [1] * n, ceil_mode, size)
        share = grad / self._pool_divisors(kernel, stride, padding, grad.shape, count_include_pad, divisor_override,
                                           grad.dtype)
        return self.read_backward(positions, share.unsqueeze(-1).broadcast_to(list(share.shape) +
                                                                              [positions.shape[-1]]), n)

    @high_level
    def replication_pad_backward(self, grad: GraphTensor, padding: Sequence[int]) -> GraphTensor:
        """The gradient by self of torch's replication padding of its last ``len(padding) // 2`` axes (``padding`` as
        ``F.pad`` takes it: the last axis first, ``(before, after)`` each, a negative one cropping) whose output's
        gradient is ``grad``: each output element read the nearest element of self."""
        n = len(padding) // 2
        lead = self.ndim - n
        z = Expr.z()
        expr, inner, stride = Expr.num(0), ONE, ONE
        for i in reversed(range(n)):
            size, out = (_static(t.shape[lead + i], "padded size") for t in (self, grad))
            before = padding[2 * (n - 1 - i)]
            coordinate = min_(max_(add(mod(div(z, inner), out), -before), 0), size - 1)
            expr, inner, stride = expr + coordinate * stride, inner * out, stride * size
        return self.read_backward(self.graph.iota(expr, inner).reshape(grad.shape[lead:]), grad, n)

    @high_level
    def read_backward(self, positions: GraphTensor, grad: GraphTensor, n: int) -> GraphTensor:
        """The gradient by self of an op that reads, for each element of its output (``grad``'s shape: self's leading
        axes, then the output's ``n`` trailing ones), the element of self's last ``n`` axes at the flat position
        ``positions`` gives (broadcast to ``grad``; their element count: nothing, a padding): zeros of self's shape
        and ``grad``'s dtype with each output element's gradient added at what it read (a ``ScatterAdd``; repeated
        reads add up)."""
        lead = self.ndim - n
        size = numel(self.shape[lead:])
        rows = list(self.shape[:lead]) + [numel(grad.shape[lead:])]
        zeros = self.graph.constant(0, grad.dtype).broadcast_to(rows[:-1] + [size + 1])
        added = zeros.scatter_add(-1, positions.broadcast_to(grad.shape).reshape(rows), grad.reshape(rows))
        return added.slice(-1, 0, size).reshape(self.shape)

    @high_level
    def adaptive_avg_pool(self, output_size: Sequence[int]) -> GraphTensor:
        """``torch.nn.functional.adaptive_avg_pool1d/2d/3d`` over the last ``len(output_size)`` axes: per axis a
        matmul with the averaging matrix (``_averaging``)."""
        out = self._float()
        for i, o in enumerate(output_size):
            axis = self.ndim - len(output_size) + i
            weights = self._averaging(axis, o, out.dtype)
            out = (out.transpose(axis, -1) @ weights.T).transpose(axis, -1)
        return out

    @high_level
    def adaptive_avg_pool_backward(self, grad: GraphTensor, n: int) -> GraphTensor:
        """The gradient by self of ``adaptive_avg_pool`` over the last ``n`` axes whose output's gradient is
        ``grad``: per axis a matmul with the averaging matrix, transposed."""
        out = grad
        for axis in range(self.ndim - n, self.ndim):
            weights = self._averaging(axis, _static(grad.shape[axis], "pooled size"), grad.dtype)
            out = (out.transpose(axis, -1) @ weights).transpose(axis, -1)
        return out

    def _averaging(self, axis: int, o: int, dtype: DType) -> GraphTensor:
        """``[o, size]``: adaptive average pooling's weights along ``axis``, output ``i`` averaging elements
        ``floor(i * size / o)`` to ``ceil((i + 1) * size / o)``."""
        z = Expr.z()
        size = _static(self.shape[axis], "pooled size")
        row, column = div(z, size), mod(z, size)
        start, end = div(mul(row, size), o), div(add(mul(row, size), size + o - 1), o)
        inside = self.graph.iota(and_(gte(column, start), lt(column, end)), o * size).reshape(o, size)
        counts = self.graph.iota(div(add(mul(z, size), size + o - 1), o) - div(mul(z, size), o), o)
        return inside.cast(dtype) / counts.cast(dtype).reshape(o, 1)

    # ---- indexing -----------------------------------------------------------------------
    def _flat_positions(self, coord_shape: Sequence[Expr], skip_axis: int) -> GraphTensor:
        """i32 tensor over ``coord_shape``: the flat offset in self's logical layout of each
        coordinate, leaving out ``skip_axis`` (whose index the caller adds); none when ``coord_shape`` is empty."""
        strides = ShapeTracker.contiguous(self.shape).strides
        z = Expr.z()
        expr, inner, count = Expr.num(0), ONE, numel(coord_shape)
        for i in reversed(range(len(coord_shape)) if not (count.is_num and count.value == 0) else ()):
            if i != skip_axis:
                coordinate = mod(div(z, inner), coord_shape[i])
                expr = expr + strides[i].substitute(z=coordinate)
            inner = inner * coord_shape[i]
        return self.graph.iota(expr, count).reshape(coord_shape)

    def flat_positions(self, axis: int, index: GraphTensor) -> GraphTensor:
        """i32 tensor shaped like ``index``: the flat offset in self of ``c with c[axis] = index[c]`` for each
        coordinate ``c`` of ``index`` (the elements ``gather`` reads and ``scatter`` writes)."""
        axis = self._axis(axis)
        return self._flat_positions(index.shape, axis) + index.cast(dt.i32) * self._axis_stride(axis)

    @high_level
    def take(self, indices: GraphTensor, axis: int = 0) -> GraphTensor:
        """``numpy.take``: result shape ``shape[:axis] + indices.shape + shape[axis+1:]``."""
        axis = self._axis(axis)
        _check_indices(indices, "take")
        before, after = self.shape[:axis], self.shape[axis + 1:]
        out_shape = before + indices.shape + after
        if _is_empty(out_shape):
            return self._scalar(0).broadcast_to(out_shape)
        # an output position z splits into (before, index, after); the source offset is
        # before*size*inner + index*inner + after, with inner the size of the trailing axes
        inner = numel(after)
        z = Expr.z()
        outer = div(z, numel(indices.shape) * inner)
        base = self.graph.iota(outer * self.shape[axis] * inner + mod(z, inner), numel(out_shape)).reshape(out_shape)
        idx = indices.cast(dt.i32).reshape(tuple(indices.shape) + (1,) * len(after))
        return (base + idx * self._index_scalar(inner))._apply(Op.GATHER, self)

    @high_level
    def gather(self, axis: int, index: GraphTensor) -> GraphTensor:
        """``torch.gather``: ``out[c] = self[c with c[axis] = index[c]]``."""
        _check_indices(index, "gather")
        return self.flat_positions(axis, index)._apply(Op.GATHER, self)


    @high_level
    def scatter(self, axis: int, index: GraphTensor, src: GraphTensor | Scalar) -> GraphTensor:
        """``torch.scatter``: a copy of self with ``out[c with c[axis] = index[c]] = src[c]``."""
        _check_indices(index, "scatter")
        return self._apply(Op.SCATTER, *self._scattered(axis, index, src))

    @high_level
    def scatter_add(self, axis: int, index: GraphTensor, src: GraphTensor) -> GraphTensor:
        """``torch.scatter_add``: a copy of self with ``src[c]`` added at ``c with c[axis] = index[c]`` (positions
        that repeat add up)."""
        _check_indices(index, "scatter_add")
        return self._apply(Op.SCATTER_ADD, *self._scattered(axis, index, src))

    def _scattered(self, axis: int, index: GraphTensor, src: GraphTensor | Scalar) -> tuple[GraphTensor, GraphTensor]:
        """The flat positions a scatter writes and the values it writes there (``src`` cut to ``index``'s shape)."""
        values = _as_tensor(src, self).cast(self.dtype)
        if isinstance(src, GraphTensor):
            for ax, size in enumerate(index.shape):
                values = values.slice(ax, 0, size)
        return self.flat_positions(axis, index), values.broadcast_to(index.shape)

    @high_level
    def slice_scatter(self, src: GraphTensor, axis: int = 0, start: int | None = None,
                      stop: int | None = None, step: int = 1) -> GraphTensor:
        """A copy of self with ``self[..., start:stop:step, ...] = src`` along ``axis``: with ``step`` 1, a concat of
        the parts before and after the slice with ``src`` (pads and adds, which fuse: a slice's gradient is one pad);
        else a Scatter to the slice's positions."""
        axis = self._axis(axis)
        begin, end = self._slice_bounds(axis, start, stop)
        region = ShapeTracker.contiguous(self.shape).slice(axis, begin, end, step)
        src = src.cast(self.dtype).broadcast_to(region.dims)
        if step == 1 and self.dtype != DType.BOOL:
            parts = [self.slice(axis, None, begin), src, self.slice(axis, end, None)]
            return concat([p for p in parts if not (p.shape[axis].is_num and p.shape[axis].value == 0)], axis)
        flat = self.graph.iota(region.index_expr(), region.n_elements).reshape(region.dims)
        return self._apply(Op.SCATTER, flat, src)

    def _axis_stride(self, axis: int) -> int | GraphTensor:
        return self._index_scalar(numel(self.shape[axis + 1:]))

    def _index_scalar(self, value: Expr) -> int | GraphTensor:
        """A size as an operand of index arithmetic: a Python int, or an i32 constant when symbolic."""
        return value.value if value.is_num else self._scalar(value, dt.i32)


def per_axis(value: int | Sequence[int], n: int, name: str) -> list[int]:
    """A convolution or pooling argument for ``n`` axes: one int (or a one-element list) for all, or one each."""
    values = [value] if isinstance(value, int) else list(value)
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        raise ShapeError(f"{name} {list(values)} does not fit {n} spatial axes")
    return values


def _static(size: Expr, what: str) -> int:
    if not size.is_num:
        raise ShapeError(f"{what} {size} must be a number, not symbolic")
    return size.value


def _pool_geometry(size: int, kernel: int, stride: int, padding: int, dilation: int,
                   ceil_mode: bool) -> tuple[int, int]:
    """torch's pooled length of an axis, and the padding after it that its last window reaches."""
    span = dilation * (kernel - 1) + 1
    out = (size + 2 * padding - span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1  # the last window must start inside the input or its leading padding
    if out < 1:
        raise ShapeError(f"pooling an axis of {size} with a window of {span} (padding {padding}) leaves nothing")
    return out, max(padding, (out - 1) * stride + span - size - padding)


# ---- functions over several tensors --------------------------------------------------------
def broadcast_shapes(a: Sequence[Expr], b: Sequence[Expr]) -> tuple[Expr, ...]:
    """numpy broadcasting of two shapes; a ShapeError names both when they do not fit."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else ONE
        y = b[-i] if i <= len(b) else ONE
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(f"shapes {format_shape(a)} and {format_shape(b)} cannot be broadcast together")
    return tuple(reversed(out))


def _as_tensor(value: TensorLike, like: GraphTensor) -> GraphTensor:
    if isinstance(value, GraphTensor):
        if value.graph is not like.graph:
            raise ShapeError("operands belong to different graphs")
        return value
    if isinstance(value, bool):
        return like.graph.constant(value, dt.bool_)
    if isinstance(value, int):
        return like.graph.constant(value, dt.i64 if like.dtype == dt.bool_ else like.dtype)
    if isinstance(value, float):
        return like.graph.constant(value, like.dtype if like.dtype.is_float else dt.f32)
    if isinstance(value, Expr):  # a symbolic size, evaluated when the graph runs
        return like.graph.constant(value, dt.i64 if like.dtype == dt.bool_ else like.dtype)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a tensor operand")


def _binary_operands(a: TensorLike, b: TensorLike) -> tuple[GraphTensor, GraphTensor]:
    """Lift Python scalars to constants typed after the tensor operand (torch's scalar rules)."""
    if isinstance(a, GraphTensor):
        return a, _as_tensor(b, a)
    if isinstance(b, GraphTensor):
        return _as_tensor(a, b), b
    raise TypeError("at least one operand must be a GraphTensor")


def _check_indices(indices: GraphTensor, what: str) -> None:
    if not isinstance(indices, GraphTensor) or not indices.dtype.is_int:
        raise DTypeError(f"{what} needs an int index tensor, got "
                         f"{indices.dtype.value if isinstance(indices, GraphTensor) else type(indices).__name__}")


def _is_empty(shape: Sequence[Expr]) -> bool:
    """Whether a shape has a zero-size axis (so there is no element and no coordinate to compute)."""
    return any(d.is_num and d.value == 0 for d in shape)


def _clamp_bound(bound: ExprLike | None, size: Expr, default: ExprLike) -> Expr:
    if bound is None:
        return as_expr(default)
    if isinstance(bound, Expr):
        if not bound.is_num:
            return bound if at_least(size, bound) else min_(bound, size)  # x[:s - 1] is s - 1 long
        bound = bound.value
    if not size.is_num:
        if bound < 0:
            return size + bound if at_least(size + bound, 0) else max_(size + bound, 0)
        if bound >= 2**62 or at_least(bound, size):  # torch's "to the end" (sys.maxsize)
            return size
        return as_expr(bound) if at_least(size, bound) else min_(as_expr(bound), size)
    n = size.value
    if bound < 0:
        bound += n
    return Expr.num(min(max(bound, 0), n))


@high_level
def concat(tensors: Sequence[GraphTensor], axis: int = 0) -> GraphTensor:
    """Join along ``axis``: each operand padded with zeros into place, then added."""
    if not tensors:
        raise ShapeError("concat needs at least one tensor")
    first = tensors[0]
    axis = first._axis(axis)
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = dt.promote(dtype, t.dtype)
        if t.ndim != first.ndim or any(t.shape[i] != first.shape[i] for i in range(t.ndim) if i != axis):
            raise ShapeError(f"concat along axis {axis}: shapes {format_shape(first.shape)} and "
                             f"{format_shape(t.shape)} do not fit")
    total = sum((t.shape[axis] for t in tensors[1:]), tensors[0].shape[axis])
    out, offset = None, Expr.num(0)
    for t in tensors:
        widths = [(0, 0)] * t.ndim
        widths[axis] = (offset, total - offset - t.shape[axis])
        piece = t.cast(dtype).pad(widths)
        out = piece if out is None else out + piece
        offset = offset + t.shape[axis]
    return out


@high_level
def stack(tensors: Sequence[GraphTensor], axis: int = 0) -> GraphTensor:
    return concat([t.unsqueeze(axis) for t in tensors], axis)


@high_level
def where(condition: GraphTensor, a: TensorLike, b: TensorLike) -> GraphTensor:
    """``a`` where ``condition`` holds, else ``b``: a Gather from ``concat(b, a)``, exact for inf and nan.

    Where the size is a number, each operand is copied into the output's shape (``a`` and ``b`` always, even when
    already laid out so, and the condition as its cast to i32 from bool), so the e-graph's select rule finds each one
    behind one Cast of the output's layout and reads what that Cast reads instead (``luminal_lab.egraph.ops``). A
    symbolic size gets no select, so only what is not laid out already is copied."""
    if not isinstance(condition, GraphTensor):
        raise TypeError("where needs a GraphTensor condition")
    if isinstance(a, GraphTensor) or isinstance(b, GraphTensor):
        a, b = _binary_operands(a, b)
    a, b = _as_tensor(a, condition), _as_tensor(b, condition)
    dtype = dt.promote(a.dtype, b.dtype)
    shape = broadcast_shapes(broadcast_shapes(condition.shape, a.shape), b.shape)
    count = numel(shape)
    if count.is_num:
        flat_a, flat_b = (x.cast(dtype).broadcast_to(shape)._apply(Op.CAST, arg=dtype).reshape(count) for x in (a, b))
        picked = condition.cast(dt.bool_).broadcast_to(shape).cast(dt.i32)
    else:
        flat_a, flat_b = (x.cast(dtype).broadcast_to(shape).contiguous().reshape(count) for x in (a, b))
        picked = condition.cast(dt.bool_).cast(dt.i32).broadcast_to(shape)
    both = concat([flat_b, flat_a], 0)
    offset = condition._index_scalar(count)
    positions = condition.graph.iota(Expr.z(), count).reshape(shape)
    return (picked * offset + positions)._apply(Op.GATHER, both)


@high_level
def maximum(a: TensorLike, b: TensorLike) -> GraphTensor:
    """Elementwise maximum (nan-propagating): MaxReduce over the stacked pair."""
    a, b = _binary_operands(a, b)
    a, b = a._pair(b)
    return stack([a, b], -1).max(-1)


@high_level
def minimum(a: TensorLike, b: TensorLike) -> GraphTensor:
    a, b = _binary_operands(a, b)
    a, b = a._pair(b)  # the complement of each in the promoted type
    return _reversed(maximum(_reversed(a), _reversed(b)))


def _reversed(x: GraphTensor) -> GraphTensor:
    """``x`` through a bijection that reverses the order of its values: ``-x`` for floats, the complement ``-x - 1``
    for ints (which, unlike ``-x``, wraps for no value: not for u8, nor for the lowest of a signed int)."""
    return -x if x.dtype.is_float else x * -1 + -1


def sort_key_less(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """``a < b`` in sorting order, where NaN is the largest value."""
    if not a.dtype.is_float:
        return a.lt(b)
    return a.lt(b) | (b.isnan() & a.isnan().logical_not())


def _key_equal(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    if not a.dtype.is_float:
        return a.eq(b)
    return a.eq(b) | (a.isnan() & b.isnan())


def _prefix_mask(graph: Graph, n: Expr) -> GraphTensor:
    """``[i, j]`` is true where ``j <= i``: the elements of prefix ``i``."""
    return graph.arange(n).reshape(n, 1).lt(graph.arange(n).reshape(1, n)).logical_not()


def _horner(x: GraphTensor, coefficients: Sequence[float]) -> GraphTensor:
    """The polynomial with ``coefficients`` (highest power first) at ``x``."""
    out = x * 0 + coefficients[0]
    for c in coefficients[1:]:
        out = out * x + c
    return out


_ZETA_TERMS = 20  # terms of the Hurwitz zeta summed before its Euler–Maclaurin tail
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66)  # B₂, B₄, ... B₁₀
_BESSEL_TERMS = 40  # of the power series below |x| = 15: the last term is below 1e-9 of the sum there
_BESSEL_SWITCH = 15.0


def _bessel_i(x: GraphTensor, order: int, scaled: bool) -> GraphTensor:
    """|I_order(x)| for order 0 or 1 (times ``exp(-|x|)`` when ``scaled``)."""
    a = x.abs()
    small = where(a.lt(_BESSEL_SWITCH), a, 0.0)
    quarter = small * small * 0.25
    term = small * 0.5 if order else small * 0 + 1
    total = term
    for k in range(1, _BESSEL_TERMS):
        term = term * quarter * (1.0 / (k * (k + order)))
        total = total + term
    if scaled:
        total = total * (-small).exp()
    mu = 4.0 * order * order
    large = where(a.lt(_BESSEL_SWITCH), _BESSEL_SWITCH, a)
    inverse = (8 * large).reciprocal()
    factor, correction = 1.0, large * 0 + 1
    for k in range(1, 6):
        factor *= -(mu - (2 * k - 1) ** 2) / k
        correction = correction + factor * inverse.pow(k)
    root = (2 * math.pi * large).rsqrt() * correction
    asymptotic = root if scaled else (large * 0.5).exp() * root * (large * 0.5).exp()
    return where(a.lt(_BESSEL_SWITCH), total, asymptotic)


@high_level
def embedding(indices: GraphTensor, weight: GraphTensor) -> GraphTensor:
    """Rows of ``weight`` picked by ``indices`` (``torch.nn.functional.embedding``)."""
    return weight.take(indices, axis=0)


