"""Shape trackers: how a logical tensor is laid out over a flat buffer.

A tracker has, per dimension, a size, a stride and a validity mask. Stride and mask are
expressions in ``z``, the index along that dimension: a plain dimension has stride
``z*s``, a broadcast one stride ``0``, a sliced one ``(z + start)*s``, and a padded one a
mask such as ``z >= 2 & z < 6``. The flat offset of logical element ``z`` (row-major over
the whole tensor) substitutes ``(z / inner) % size`` for ``z`` in each dimension's stride
and sums; reading an invalid (padded) element yields 0.

Views (permute, expand, slice, pad, reshape of a compatible layout) only build a new
tracker; ``reshape`` returns ``None`` when the layout cannot be reshaped without a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .errors import ShapeError
from .symbolic import Expr, ExprLike, add, and_, as_expr, div, gte, lt, max_, min_, mod, mul

Z = Expr.z()
ONE = Expr.num(1)
LINEAR_POINTS = 64  # indexes of a dimension whose stride ``_linear`` may check one by one


def format_shape(dims: Sequence[Expr]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def numel(dims: Sequence[Expr]) -> Expr:
    return mul(*dims) if dims else ONE


@dataclass(frozen=True)
class Axis:
    """One dimension of a boxed tracker: its stride is ``z*step + offset`` and it is valid where
    ``low <= z < high`` (``None``: no bound on that side)."""

    step: Expr
    offset: Expr
    low: Expr | None
    high: Expr | None


def _linear(expr: Expr, size: Expr | None = None) -> tuple[Expr, Expr] | None:
    """``(step, offset)`` when ``expr`` is ``z*step + offset`` with neither in ``z``, else None. Given the ``size`` of
    the dimension ``z`` indexes, a number of at most ``LINEAR_POINTS``, it is enough that ``expr`` has that form's
    value at each index: over ``z < 2``, ``(z/2)*a + (z%2)*b`` is ``z*b`` (two heads of a grouped-query cache)."""
    offset = expr.substitute(z=0)
    step = add(expr.substitute(z=1), mul(-1, offset))
    if step.has_z:
        return None
    if add(mul(Z, step), offset) == expr:
        return step, offset
    if size is None or not size.is_num or size.value > LINEAR_POINTS:
        return None
    linear = all(expr.substitute(z=k) == add(offset, mul(k, step)) for k in range(2, size.value))
    return (step, offset) if linear else None


def _run(mask: Expr) -> tuple[Expr | None, Expr | None] | None:
    """``(low, high)`` when ``mask`` holds exactly where ``low <= z < high`` (a bound None where there is none): 1,
    or comparisons of ``±z`` plus a ``z``-free term with 0, and-ed; else None."""
    if mask == 1:
        return None, None
    low: Expr | None = None
    high: Expr | None = None
    for condition in mask.args if mask.op == "and" else (mask,):
        if condition.op not in ("gte", "lt"):
            return None
        linear = _linear(add(condition.args[0], mul(-1, condition.args[1])))  # the comparison is of this with 0
        if linear is None or not linear[0].is_num or abs(linear[0].value) != 1:
            return None
        sign, rest = linear[0].value, linear[1]
        bound = mul(-1, rest) if sign == 1 else add(rest, 1)
        if (condition.op == "gte") == (sign == 1):  # z >= -rest, or z > rest
            low = bound if low is None else max_(low, bound)
        else:  # z < -rest, or z <= rest
            high = bound if high is None else min_(high, bound)
    return low, high


@dataclass(frozen=True)
class ShapeTracker:
    """Sizes, strides (in ``z``) and masks (in ``z``) of each dimension of a view."""

    dims: tuple[Expr, ...]
    strides: tuple[Expr, ...]
    masks: tuple[Expr, ...]

    @classmethod
    def contiguous(cls, dims: Sequence[ExprLike]) -> ShapeTracker:
        dims = tuple(as_expr(d) for d in dims)
        strides = tuple(mul(Z, numel(dims[i + 1:])) for i in range(len(dims)))
        return cls(dims, strides, (ONE,) * len(dims))

    # ---- properties ---------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def n_elements(self) -> Expr:
        return numel(self.dims)

    @property
    def is_contiguous(self) -> bool:
        return self == ShapeTracker.contiguous(self.dims)

    @property
    def is_masked(self) -> bool:
        return any(m != 1 for m in self.masks)

    def linear_strides(self) -> list[tuple[Expr, Expr]] | None:
        """Per dimension ``(step, offset)`` when every stride is ``z*step + offset`` and nothing is masked."""
        if self.is_masked:
            return None
        out = [_linear(stride, dim) for dim, stride in zip(self.dims, self.strides)]
        return None if any(linear is None for linear in out) else out

    def boxed_strides(self) -> list[Axis] | None:
        """Per dimension its stride as ``z*step + offset`` and its mask as one run ``low <= z < high``, when every
        dimension has that form (a strided read, or a padded one whose valid elements form one box); else None."""
        pairs = [(_linear(stride, dim), _run(mask)) for dim, stride, mask in zip(self.dims, self.strides, self.masks)]
        if any(linear is None or run is None for linear, run in pairs):
            return None
        return [Axis(*linear, *run) for linear, run in pairs]

    def index_expr(self) -> Expr:
        """Flat buffer offset of logical element ``z``."""
        return add(*self._per_dim(self.strides)) if self.dims else Expr.num(0)

    def valid_expr(self) -> Expr:
        """1 where logical element ``z`` reads real data, 0 where it reads padding."""
        return and_(*self._per_dim(self.masks)) if self.dims else ONE

    def _per_dim(self, exprs: Sequence[Expr]) -> list[Expr]:
        parts = []
        inner = ONE
        for i in reversed(range(self.rank)):
            local = div(Z, inner) if i == 0 else mod(div(Z, inner), self.dims[i])
            parts.append(exprs[i].substitute(z=local))
            inner = mul(inner, self.dims[i])
        return parts

    # ---- views --------------------------------------------------------------------------
    def _axis(self, axis: int) -> int:
        if not -self.rank <= axis < self.rank:
            raise ShapeError(f"axis {axis} is out of range for shape {format_shape(self.dims)}")
        return axis % self.rank

    def permute(self, axes: Sequence[int]) -> ShapeTracker:
        axes = [self._axis(a) for a in axes]
        if sorted(axes) != list(range(self.rank)):
            raise ShapeError(f"permutation {tuple(axes)} does not fit shape {format_shape(self.dims)}")
        return ShapeTracker(*(tuple(seq[a] for a in axes) for seq in (self.dims, self.strides, self.masks)))

    def expand_dim(self, axis: int, size: ExprLike) -> ShapeTracker:
        """Insert a broadcast dimension (stride 0) of ``size`` before position ``axis``."""
        if not 0 <= axis <= self.rank:
            raise ShapeError(f"cannot insert a dimension at {axis} in shape {format_shape(self.dims)}")
        return ShapeTracker(
            self.dims[:axis] + (as_expr(size),) + self.dims[axis:],
            self.strides[:axis] + (Expr.num(0),) + self.strides[axis:],
            self.masks[:axis] + (ONE,) + self.masks[axis:],
        )

    def broadcast_to(self, dims: Sequence[ExprLike]) -> ShapeTracker:
        """Broadcast as numpy does: new leading dims and size-1 dims become stride-0 dims."""
        dims = tuple(as_expr(d) for d in dims)
        if len(dims) < self.rank:
            raise ShapeError(f"cannot broadcast shape {format_shape(self.dims)} to {format_shape(dims)}")
        tracker = self
        for _ in range(len(dims) - self.rank):
            tracker = tracker.expand_dim(0, 1)
        strides, masks = list(tracker.strides), list(tracker.masks)
        for i, (have, want) in enumerate(zip(tracker.dims, dims)):
            if have == want:
                continue
            if have != 1:
                raise ShapeError(f"cannot broadcast shape {format_shape(self.dims)} to {format_shape(dims)}")
            strides[i] = strides[i].substitute(z=0)
            masks[i] = masks[i].substitute(z=0)
        return ShapeTracker(dims, tuple(strides), tuple(masks))

    def slice(self, axis: int, start: ExprLike, stop: ExprLike, step: int = 1) -> ShapeTracker:
        """Elements ``start, start+step, ... < stop`` of ``axis`` (bounds already clamped)."""
        axis = self._axis(axis)
        if step < 1:
            raise ShapeError(f"slice step must be positive, got {step}")
        start, stop = as_expr(start), as_expr(stop)
        source = add(mul(Z, step), start)
        size = div(add(stop, mul(-1, start), step - 1), step)
        return self._replace_dim(axis, size, self.strides[axis].substitute(z=source),
                                 self.masks[axis].substitute(z=source))

    def pad(self, axis: int, before: ExprLike, after: ExprLike) -> ShapeTracker:
        """Add ``before`` and ``after`` elements of zeros around ``axis``."""
        axis = self._axis(axis)
        before, after = as_expr(before), as_expr(after)
        source = add(Z, mul(-1, before))
        valid = and_(gte(Z, before), lt(Z, add(before, self.dims[axis])))
        mask = and_(valid, self.masks[axis].substitute(z=source))
        return self._replace_dim(axis, add(self.dims[axis], before, after),
                                 self.strides[axis].substitute(z=source), mask)

    def _replace_dim(self, axis: int, size: Expr, stride: Expr, mask: Expr) -> ShapeTracker:
        def put(seq, value):
            return seq[:axis] + (value,) + seq[axis + 1:]

        return ShapeTracker(put(self.dims, size), put(self.strides, stride), put(self.masks, mask))

    def reshape(self, dims: Sequence[ExprLike]) -> ShapeTracker | None:
        """The same elements under new sizes, or ``None`` when that needs a contiguous copy first."""
        new_dims = tuple(as_expr(d) for d in dims)
        if numel(new_dims) != self.n_elements:
            raise ShapeError(f"cannot reshape {format_shape(self.dims)} to {format_shape(new_dims)}: "
                             "element counts differ")
        if new_dims == self.dims:
            return self
        if self.is_contiguous:
            return ShapeTracker.contiguous(new_dims)
        strides: list[Expr] = []
        masks: list[Expr] = []
        for old_group, new_group in _reshape_groups(self.dims, new_dims):
            merged = ShapeTracker(*(tuple(seq[i] for i in old_group) for seq in (self.dims, self.strides, self.masks)))
            stride, mask = merged.index_expr(), merged.valid_expr()
            if not new_group:  # size-1 dims dropped: their offset has no dim to live in
                return None
            if len(new_group) == 1:
                strides.append(stride)
                masks.append(mask)
                continue
            if mask.has_z:
                return None
            linear = _linear(stride)
            if linear is None:
                return None
            step, offset = linear
            sizes = [new_dims[j] for j in new_group]
            split = [mul(Z, step, numel(sizes[k + 1:])) for k in range(len(sizes))]
            split[0] = add(split[0], offset)
            strides.extend(split)
            masks.extend([mask] + [ONE] * (len(new_group) - 1))
        return ShapeTracker(new_dims, tuple(strides), tuple(masks))


def _reshape_groups(old: Sequence[Expr], new: Sequence[Expr]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of old and new dimensions whose sizes multiply to the same value."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        old_group, new_group = [], []
        if i < len(old):
            old_group.append(i)
            i += 1
        if j < len(new):
            new_group.append(j)
            j += 1
        while numel([old[k] for k in old_group]) != numel([new[k] for k in new_group]):
            old_size, new_size = numel([old[k] for k in old_group]), numel([new[k] for k in new_group])
            grow_old = j >= len(new) or (i < len(old) and _is_multiple(new_size, old_size))
            if grow_old and i < len(old):
                old_group.append(i)
                i += 1
            elif j < len(new):
                new_group.append(j)
                j += 1
            else:
                raise ShapeError(f"cannot reshape {format_shape(old)} to {format_shape(new)}")
        if not old_group or not new_group:
            if not groups:
                groups.append(([], []))
            groups[-1][0].extend(old_group)
            groups[-1][1].extend(new_group)
        else:
            groups.append((old_group, new_group))
    return groups


def _is_multiple(bigger: Expr, smaller: Expr) -> bool:
    """True when ``bigger`` is a larger multiple of ``smaller`` (numerically or structurally)."""
    if bigger.is_num and smaller.is_num:
        return bigger.value > smaller.value
    return bigger != smaller and mul(div(bigger, smaller), smaller) == bigger
