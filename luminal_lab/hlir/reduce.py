"""GraphTensor's reductions: sums and maxima and what is built on them (mean, var, softmax, the norms), scans, sort,
matmul (Mul + SumReduce), and convolution and pooling (and their gradients) over the views ``windows`` makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..core import dtypes as dt
from ..core.errors import ShapeError
from ..core.ops import Op
from ..core.shape_tracker import ONE, ShapeTracker, format_shape, numel
from ..core.symbolic import Expr, add, and_, div, gte, lt, max_, min_, mod, mul
from .creation import Scalar, TensorBase, high_level
from .elementwise import _reversed, broadcast_shapes, maximum, minimum, where

if TYPE_CHECKING:
    from .graph import Graph
    from .tensor import GraphTensor


class ReduceOps(TensorBase):
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
        same = _key_equal(last.unsqueeze(-2), top.unsqueeze(-1))
        found = where(same & _prefix_mask(self.graph, n), positions, -1).max(-1)
        return values, found.transpose(axis, -1)

    @high_level
    def sort(self, axis: int = -1, descending: bool = False) -> tuple[GraphTensor, GraphTensor]:
        """Stable sort along ``axis`` (NaN sorts as the largest value): each element's rank is the count of
        elements before it in the order, ties broken by index, and the values are scattered to their ranks.
        It builds an n×n comparison per row, so it suits axes of up to several thousand elements: one comparison
        of ``order_key * 2^32 + index`` per pair for types with an ``_order_key``, a dozen ops for f64 and i64."""
        axis = self._axis(axis)
        last = self.transpose(axis, -1) if self.ndim else self.reshape(1)
        n = last.shape[-1]
        key = _order_key(last)
        if key is not None:  # (key, index) as one i64: |key| < 2^31, and an index below 2^32
            ranked = (-key if descending else key) * 2**32 + self.graph.arange(n, dtype=dt.i64)
            before = ranked.unsqueeze(-2).lt(ranked.unsqueeze(-1))  # [i, j]: element j sorts before element i
        else:
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

    __matmul__ = matmul

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
                       dtype: dt.DType) -> GraphTensor | int:
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

    def _averaging(self, axis: int, o: int, dtype: dt.DType) -> GraphTensor:
        """``[o, size]``: adaptive average pooling's weights along ``axis``, output ``i`` averaging elements
        ``floor(i * size / o)`` to ``ceil((i + 1) * size / o)``."""
        z = Expr.z()
        size = _static(self.shape[axis], "pooled size")
        row, column = div(z, size), mod(z, size)
        start, end = div(mul(row, size), o), div(add(mul(row, size), size + o - 1), o)
        inside = self.graph.iota(and_(gte(column, start), lt(column, end)), o * size).reshape(o, size)
        counts = self.graph.iota(div(add(mul(z, size), size + o - 1), o) - div(mul(z, size), o), o)
        return inside.cast(dtype) / counts.cast(dtype).reshape(o, 1)


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


def sort_key_less(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """``a < b`` in sorting order, where NaN is the largest value."""
    if not a.dtype.is_float:
        return a.lt(b)
    return a.lt(b) | (b.isnan() & a.isnan().logical_not())


_F32_INF_BITS = 255 * 2**23  # float32's +inf as an integer; its largest finite value is below


def _order_key(x: GraphTensor) -> GraphTensor | None:
    """An i64 per element, ordered as ``sort`` orders the values (NaN largest, -0 equal to 0), distinct for distinct
    values and below 2^31 in magnitude: the value for ints of up to 32 bits, and for floats of up to 32 bits the
    float32 bit pattern of ``|x|`` as a number, negated for negative ``x``; None for f64 and i64 (too wide)."""
    if x.dtype in (dt.f64, dt.i64):
        return None
    if not x.dtype.is_float:
        return x.cast(dt.i64)
    a = x.cast(dt.f64).abs()
    e = a.log2().floor()
    e = e - e.exp2().gt(a).cast(dt.f64) + (e + 1).exp2().le(a).cast(dt.f64)  # exact where log2 rounds past 2^e
    e = maximum(e, -126.0)  # zero and float32's subnormals: the smallest exponent, the mantissa is the value
    bits = (e + 126) * 2.0**23 + a * (23 - e).exp2()  # exponent field (biased, less the implicit one) + mantissa
    bits = where(x.isnan(), _F32_INF_BITS + 1, where(a.eq(math.inf), _F32_INF_BITS, bits))
    return where(x.lt(0), -bits, bits).cast(dt.i64)


def _key_equal(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    if not a.dtype.is_float:
        return a.eq(b)
    return a.eq(b) | (a.isnan() & b.isnan())


def _prefix_mask(graph: Graph, n: Expr) -> GraphTensor:
    """``[i, j]`` is true where ``j <= i``: the elements of prefix ``i``."""
    return graph.arange(n).reshape(n, 1).lt(graph.arange(n).reshape(1, n)).logical_not()
