"""GraphTensor's movement ops: views (reshape, permute, expand, slice, pad, windows, ...), which only change the shape
tracker, and ops that move elements: ``concat`` (each operand padded with zeros into place, then added), ``take`` and
``gather`` (a Gather), the scatters, and ``contiguous`` (a row-major copy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core import dtypes as dt
from ..core.errors import ArgumentError, DTypeError, ShapeError
from ..core.ops import Op
from ..core.shape_tracker import ONE, ShapeTracker, format_shape, numel
from ..core.symbolic import Expr, ExprLike, add, as_expr, at_least, div, max_, min_, mod, mul
from .creation import Scalar, TensorBase, _as_tensor, high_level

if TYPE_CHECKING:
    from .tensor import GraphTensor


class MovementOps(TensorBase):
    def contiguous(self) -> GraphTensor:
        """A copy laid out row-major (a Cast to the same dtype); self when already so."""
        if self.tracker.is_contiguous:
            return self
        return self._apply(Op.CAST, arg=self.dtype)

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
            return self.contiguous()._view(tracker)
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
        from .elementwise import where  # here, as where gathers from a concat, which pads
        inside = self.graph.constant(True, dt.bool_).broadcast_to(self.shape).pad(widths)
        return where(inside, padded, value)

    def __getitem__(self, index) -> GraphTensor:
        index = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, TensorBase) for i in index):
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
        offset = mod(z, inner)
        if before:
            offset = div(z, numel(indices.shape) * inner) * self.shape[axis] * inner + offset
        base = self.graph.iota(offset, numel(out_shape)).reshape(out_shape)
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
        if isinstance(src, TensorBase):
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
        if step == 1 and self.dtype != dt.bool_:
            parts = [self.slice(axis, None, begin), src, self.slice(axis, end, None)]
            return concat([p for p in parts if not (p.shape[axis].is_num and p.shape[axis].value == 0)], axis)
        flat = self.graph.iota(region.index_expr(), region.n_elements).reshape(region.dims)
        return self._apply(Op.SCATTER, flat, src)

    def _axis_stride(self, axis: int) -> int | GraphTensor:
        return self._index_scalar(numel(self.shape[axis + 1:]))


def _check_indices(indices: GraphTensor, what: str) -> None:
    if not isinstance(indices, TensorBase) or not indices.dtype.is_int:
        raise DTypeError(f"{what} needs an int index tensor, got "
                         f"{indices.dtype.value if isinstance(indices, TensorBase) else type(indices).__name__}")


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
def embedding(indices: GraphTensor, weight: GraphTensor) -> GraphTensor:
    """Rows of ``weight`` picked by ``indices`` (``torch.nn.functional.embedding``)."""
    return weight.take(indices, axis=0)
