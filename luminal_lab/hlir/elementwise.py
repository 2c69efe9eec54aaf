"""GraphTensor's elementwise ops: casts, arithmetic, comparisons, logic, math, rounding, trigonometry, on operands
broadcast and promoted as torch does. Exact where they can be: ``where`` gathers from the concatenation of both
branches (an ``inf`` in the branch not taken never turns into ``nan``), ``maximum`` is a MaxReduce of a stacked pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core import dtypes as dt
from ..core.dtypes import DType
from ..core.errors import ArgumentError, DTypeError, ShapeError
from ..core.ops import LOG2_E, Op
from ..core.shape_tracker import ONE, format_shape, numel
from ..core.symbolic import Expr
from .creation import Scalar, TensorBase, TensorLike, _as_tensor, _binary_operands, high_level
from .movement import concat, stack

if TYPE_CHECKING:
    from .tensor import GraphTensor

LN_2 = 0.6931471805599453
_EXACT_INTEGERS = 2.0**23  # every float32 of this magnitude or more is an integer


class ElementwiseOps(TensorBase):
    # ---- dtype --------------------------------------------------------------------------
    def cast(self, dtype: DType) -> GraphTensor:
        if not isinstance(dtype, DType):
            raise DTypeError(f"cast: dtype={dtype!r} is not an ll dtype such as ll.f16")
        if dtype == self.dtype:
            return self
        return self._apply(Op.CAST, arg=dtype)

    def _float(self) -> GraphTensor:
        """Self, cast to f32 when it is an int or bool tensor (as torch does for math functions)."""
        return self if self.dtype.is_float else self.cast(dt.f32)

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

    def __mul__(self, other: TensorLike) -> GraphTensor:
        a, b = self._pair(other)
        return a._apply(Op.MUL, b)

    __radd__, __rmul__ = __add__, __mul__

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

    __lt__, __gt__, __le__, __ge__ = lt, gt, le, ge
    __invert__, __and__, __or__ = logical_not, logical_and, logical_or

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
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float, TensorBase)):
            raise ArgumentError(f"pow: exponent={exponent!r} is not a number or a GraphTensor")
        if isinstance(exponent, TensorBase):
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

    def __pow__(self, exponent: float | GraphTensor) -> GraphTensor:
        return self.pow(exponent)

    @high_level
    def clamp(self, min: Scalar | GraphTensor | None = None, max: Scalar | GraphTensor | None = None) -> GraphTensor:
        out = self
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out


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


@high_level
def where(condition: GraphTensor, a: TensorLike, b: TensorLike) -> GraphTensor:
    """``a`` where ``condition`` holds, else ``b``: a Gather from ``concat(b, a)``, exact for inf and nan.

    Where the size is a number, each operand is copied into the output's shape (``a`` and ``b`` always, even when
    already laid out so, and the condition as its cast to i32 from bool), so the e-graph's select rule finds each one
    behind one Cast of the output's layout and reads what that Cast reads instead (``luminal_lab.egraph.ops``). A
    symbolic size gets no select, so only what is not laid out already is copied."""
    if not isinstance(condition, TensorBase):
        raise TypeError("where needs a GraphTensor condition")
    if isinstance(a, TensorBase) or isinstance(b, TensorBase):
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


def _horner(x: GraphTensor, coefficients: Sequence[float]) -> GraphTensor:
    """The polynomial with ``coefficients`` (highest power first) at ``x``."""
    out = x * 0 + coefficients[0]
    for c in coefficients[1:]:
        out = out * x + c
    return out
