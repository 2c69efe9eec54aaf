"""A shape tracker's read of a flat buffer at one binding of the symbolic dimensions, lowered to numbers (``lower``):
the CPU runtime reads a ``Strided`` one in place (``cpu_loop``) and fills a scratch for a ``Nested`` or ``Gathered`` one
on each call; the CUDA runtime's library matmul takes ``Strided`` ones."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.errors import LuminalError
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import Expr, evaluator

Box = tuple[tuple[int, int], ...]  # per axis, the first valid index and the one past the last
Numbers = Callable[[Mapping[str, int]], tuple[int | None, ...]]  # a tracker's numbers at a binding (``_numbers``)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides, in elements, of a row-major array of ``shape``."""
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


@dataclass(frozen=True)
class Strided:
    """A read of a flat buffer: element ``index`` is ``flat[offset + sum(index * strides)]``, or, when padded (``box``
    set), that where every axis's index lies in its box and 0 elsewhere (``offset`` is then where index 0 would be,
    which may lie outside the buffer: only the box is read)."""

    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    box: Box | None = None

    @property
    def blank(self) -> bool:
        """Whether this is a padded read with an empty box: nothing but padding."""
        return self.box is not None and not all(lo < hi for lo, hi in self.box)

    @property
    def inside(self) -> Strided:
        """A padded read's box, as an unpadded read."""
        assert self.box is not None
        return Strided(self.offset + sum(lo * s for (lo, _), s in zip(self.box, self.strides)),
                       tuple(hi - lo for lo, hi in self.box), self.strides)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def checked(self, size: int, source: int) -> Strided:
        """This read, after making sure every element it reads lies inside kernel ``source``'s ``size`` elements."""
        low = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0)
        high = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s > 0)
        if self.size and (low < 0 or high >= size):
            raise LuminalError(f"a view of k{source} reads elements {low}..{high} of its {size}")
        return self


@dataclass(frozen=True)
class Nested:
    """The read ``scratch`` of a contiguous scratch of shape ``compact`` (1 along the axes read at one element), into
    which the strided read ``nest`` of the buffer is copied first."""

    nest: Strided
    compact: tuple[int, ...]
    scratch: Strided


@dataclass(frozen=True, eq=False)
class Gathered:
    """A read of a scratch as ``Nested``, gathered from the buffer at ``index`` (0 where ``valid``, if given, is 0)."""

    index: np.ndarray
    valid: np.ndarray | None
    compact: tuple[int, ...]
    scratch: Strided


def lower(tracker: ShapeTracker, bindings: Mapping[str, int], size: int, source: int,
          boxed: bool = True) -> Strided | Nested | Gathered:
    """How ``tracker`` reads kernel ``source``'s buffer of ``size`` elements at ``bindings``: the first that fits of
    ``Strided`` (each axis steps evenly over one run of valid positions), ``Nested`` and ``Gathered``. With ``boxed``
    strides (``boxed_strides``, worked out once per tracker), from the expressions at the binding alone (a new length
    plans in milliseconds); else from the index and validity of every element."""
    numbered = _numbers(tracker) if boxed else None
    if numbered is not None:
        numbers = numbered(bindings)
        dims = numbers[:tracker.rank]
        if 0 in dims:
            return Strided(0, dims, (0,) * len(dims))
        return _boxed(dims, numbers[tracker.rank:], size, source)
    dims = tuple(_int(d, bindings) for d in tracker.dims)
    if 0 in dims:
        return Strided(0, dims, (0,) * len(dims))
    positions, valids = [], []
    for d, stride, mask in zip(dims, tracker.strides, tracker.masks):
        z = np.arange(d, dtype=np.int64)
        positions.append(np.broadcast_to(np.asarray(stride.evaluate(bindings, z), np.int64), (d,)))
        valids.append(np.broadcast_to(np.asarray(mask.evaluate(bindings, z)) != 0, (d,)))
    return (_strided(dims, positions, valids, size, source) or _nested(dims, positions, valids, size, source)
            or _gathered(dims, positions, valids, size, source))


FORMS = 1 << 14  # trackers whose boxed form ``lower`` remembers, the oldest forgotten first
_forms: dict[int, tuple[ShapeTracker, Numbers | None]] = {}


def _numbers(tracker: ShapeTracker) -> Numbers | None:
    """What gives a tracker's numbers at a binding in one call, from its boxed axes (``boxed_strides``): its dims,
    then each axis's low, high (None where unbounded), step and offset; None without a boxed form. Found once per
    tracker object, remembered by identity (hashing a tracker walks all its expressions)."""
    entry = _forms.get(id(tracker))
    if entry is None or entry[0] is not tracker:
        axes = tracker.boxed_strides()
        numbers = None if axes is None else evaluator(
            [*tracker.dims, *(e for axis in axes for e in (axis.low, axis.high, axis.step, axis.offset))])
        while len(_forms) >= FORMS:
            del _forms[next(iter(_forms))]
        entry = _forms[id(tracker)] = (tracker, numbers)
    return entry[1]


def _int(expr: Expr, bindings: Mapping[str, int]) -> int:
    return int(expr.evaluate(bindings))


def _blank(dims: tuple[int, ...]) -> Strided:
    """A padded read whose box is empty: nothing but padding."""
    return Strided(0, dims, (0,) * len(dims), ((0, 0),) * len(dims))


def _boxed(dims: tuple[int, ...], numbers: Sequence[int | None], size: int, source: int) -> Strided:
    """The strided or padded read of a tracker whose axes are each a linear stride over one run of valid indexes,
    from their numbers at the binding (``_numbers``: low, high, step and offset per axis)."""
    box, steps, start = [], [], 0
    for axis, d in enumerate(dims):
        low, high, step, offset = numbers[4 * axis:4 * axis + 4]
        lo = 0 if low is None else min(max(low, 0), d)
        hi = d if high is None else max(min(high, d), lo)
        if lo == hi:
            return _blank(dims)
        box.append((lo, hi))
        steps.append(step if hi - lo > 1 else 0)  # as ``_strided`` finds it: a single index steps by 0
        start += offset + step * lo
    return _in_box(dims, tuple(steps), tuple(box), start, size, source)


def _strided(dims: tuple[int, ...], positions: list[np.ndarray], valids: list[np.ndarray], size: int,
             source: int) -> Strided | None:
    """A strided read, or a padded one (its valid positions one strided box); None when an axis is no run."""
    valid = [np.flatnonzero(v) for v in valids]
    if not all(b.size == 0 or b[-1] - b[0] + 1 == b.size for b in valid):
        return None
    steps = tuple(_arithmetic(p[b]) for p, b in zip(positions, valid))
    if any(step is None for step in steps):
        return None
    if any(b.size == 0 for b in valid):
        return _blank(dims)
    box = tuple((int(b[0]), int(b[-1]) + 1) for b in valid)
    return _in_box(dims, steps, box, int(sum(p[b[0]] for p, b in zip(positions, valid))), size, source)


def _in_box(dims: tuple[int, ...], steps: tuple[int, ...], box: Box, start: int, size: int, source: int) -> Strided:
    """The read stepping by ``steps`` whose box's first element is at ``start``: unpadded where the box is all of
    ``dims``, else padded; checked to lie inside the buffer."""
    if all(b == (0, d) for b, d in zip(box, dims)):
        return Strided(start, dims, steps).checked(size, source)
    read = Strided(start - sum(lo * s for (lo, _), s in zip(box, steps)), dims, steps, box)
    read.inside.checked(size, source)
    return read


def _compact(dims: tuple[int, ...], positions: list[np.ndarray],
             valids: list[np.ndarray]) -> tuple[list[bool], tuple[int, ...], Strided]:
    """Which axes read one element throughout (broadcast), the shape with those axes 1, and the read of a contiguous
    scratch of that shape with stride 0 along them."""
    constant = [bool((p == p[0]).all() and v.all()) for p, v in zip(positions, valids)]
    compact = tuple(1 if c else d for c, d in zip(constant, dims))
    strides = tuple(0 if c else s for c, s in zip(constant, contiguous_strides(compact)))
    return constant, compact, Strided(0, dims, strides)


def _nested(dims: tuple[int, ...], positions: list[np.ndarray], valids: list[np.ndarray], size: int,
            source: int) -> Nested | None:
    """Unpadded axes that each step through a few strided ones (a transpose, then a reshape): the varying axes read as
    one strided nest. None when an axis is no such nest."""
    if not all(v.all() for v in valids):
        return None
    constant, compact, scratch = _compact(dims, positions, valids)
    nests = [[(1, 0)] if c else _nest(p - p[0]) for p, c in zip(positions, constant)]
    if any(nest is None for nest in nests):
        return None
    nest = Strided(int(sum(p[0] for p in positions)), tuple(n for nest in nests for n, _ in nest),
                   tuple(s for nest in nests for _, s in nest)).checked(size, source)
    return Nested(nest, compact, scratch)


def _gathered(dims: tuple[int, ...], positions: list[np.ndarray], valids: list[np.ndarray], size: int,
              source: int) -> Gathered:
    """The varying axes gathered through precomputed indexes (0 where padded)."""
    constant, compact, scratch = _compact(dims, positions, valids)
    index = np.zeros(compact, np.int64)
    valid = np.ones(compact, bool)
    for axis, (p, v, c) in enumerate(zip(positions, valids, constant)):  # sum / and of per-axis vectors
        along = [1] * len(dims)
        along[axis] = compact[axis]
        index += (p[:1] if c else p).reshape(along)
        valid &= (v[:1] if c else v).reshape(along)
    index, valid = np.where(valid, index, 0).reshape(-1), valid.reshape(-1)
    if index.min() < 0 or index.max() >= size:
        raise LuminalError(f"a view of k{source} reads outside its {size} elements")
    return Gathered(index.astype(np.int32 if size < 2**31 else np.int64),
                    None if valid.all() else np.ascontiguousarray(valid), compact, scratch)


def _nest(positions: np.ndarray) -> list[tuple[int, int]] | None:
    """``(size, step)`` of the strided axes, outermost first, whose nest visits ``positions`` (from 0), or None.

    ``[0, 1, 2, 8, 9, 10]`` is ``[(2, 8), (3, 1)]``: a run of equal steps sets the inner axis, and the positions
    must repeat that run from each start, the starts forming a nest in turn.
    """
    step = _arithmetic(positions)
    if step is not None:
        return [(positions.size, step)]
    steps = np.diff(positions)
    width = 1 + int(np.argmax(steps != steps[0]))
    if positions.size % width:
        return None
    blocks = positions.reshape(-1, width)
    if not np.array_equal(blocks - blocks[:, :1], np.broadcast_to(blocks[0] - blocks[0, 0], blocks.shape)):
        return None
    outer = _nest(blocks[:, 0])
    return None if outer is None else [*outer, (width, int(steps[0]))]


def _arithmetic(values: np.ndarray) -> int | None:
    """The common step of an arithmetic sequence (0 for fewer than two values), or None."""
    if values.size < 2:
        return 0
    step = int(values[1] - values[0])
    return step if np.array_equal(np.diff(values), np.full(values.size - 1, step)) else None
