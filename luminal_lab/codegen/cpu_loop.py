"""How a CPU loop kernel reads its operands: shape-tracker reads lowered to numbers at a binding, and ``Loop``, the
contract between the CPU runtime and the sources of ``codegen.cpu``.

``lower`` turns a tracker's read at one binding of the symbolic dimensions into a ``Strided`` read of the buffer itself
(padded where its valid elements form one box), a ``Nested`` one (strided axes copied into a compact scratch first) or
a ``Gathered`` one (through precomputed indexes). The runtime makes the scratches; a loop kernel's ``Strided`` reads
become one ``Loop``, whose docstring states what the kernel is called with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..core.dtypes import DType
from ..core.errors import LuminalError
from ..core.shape_tracker import Axis, ShapeTracker
from ..core.symbolic import Expr

SEGMENT = 1024  # the most elements a segment of a loop with padded operands runs: as many as its zeros hold
Box = tuple[tuple[int, int], ...]  # per axis, the first valid index and the one past the last
_HALF = (DType.F16.numpy, DType.BF16.numpy)


def kernel_array(array: np.ndarray) -> np.ndarray:
    """What a kernel receives for ``array``: f16/bf16 as their uint16 bits."""
    return array.view(np.uint16) if array.dtype in _HALF else array


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides, in elements, of a row-major array of ``shape``."""
    strides, inner = [], 1
    for d in reversed(shape):
        strides.append(inner)
        inner *= d
    return tuple(reversed(strides))


class Stride(Enum):
    """An operand's step along a loop's innermost axis, which its source is specialised for: LLVM vectorises only
    loops over rows it knows are contiguous, which numba's strided arrays never are."""

    CONTIGUOUS = "contiguous"  # 1: read through a contiguous row
    BROADCAST = "broadcast"  # 0: read once
    STRIDED = "strided"  # any other

    @classmethod
    def of(cls, step: int) -> Stride:
        return cls.CONTIGUOUS if step == 1 else cls.BROADCAST if step == 0 else cls.STRIDED


@dataclass(frozen=True)
class Operand:
    """What a loop kernel's source knows of one operand: its innermost ``stride``, and whether it is ``padded`` (read
    inside its box, 0 elsewhere)."""

    stride: Stride
    padded: bool = False


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
    """A read of a contiguous scratch of shape ``compact`` (1 along the axes read at one element), read in ``shape``
    at ``strides``, into which the strided read ``nest`` of the buffer is copied first."""

    nest: Strided
    shape: tuple[int, ...]
    compact: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Gathered:
    """A read of a contiguous scratch as ``Nested``, whose element ``i`` is gathered from the buffer's ``index[i]``, or
    is 0 where ``valid`` is false (None: valid everywhere)."""

    index: np.ndarray
    valid: np.ndarray | None
    shape: tuple[int, ...]
    compact: tuple[int, ...]
    strides: tuple[int, ...]


def lower(tracker: ShapeTracker, axes: list[Axis] | None, bindings: Mapping[str, int], size: int,
          source: int) -> Strided | Nested | Gathered:
    """How ``tracker`` reads kernel ``source``'s buffer of ``size`` elements at ``bindings``.

    Each axis adds ``stride(z)`` to the flat index where ``mask(z)`` holds, so the first of these that fits is taken:
    ``Strided`` (every axis steps evenly over one run of valid positions), ``Nested``, ``Gathered``. ``axes`` are the
    tracker's ``boxed_strides()``: given, the strided or padded read comes from their expressions at the binding alone
    (a generation plans each new length); None, every read is found from the index and validity of every element.
    """
    dims = tuple(_int(d, bindings) for d in tracker.dims)
    if 0 in dims:
        return Strided(0, dims, (0,) * len(dims))
    if axes is not None:
        return _boxed(dims, axes, bindings, size, source)
    positions, valids = [], []
    for d, stride, mask in zip(dims, tracker.strides, tracker.masks):
        z = np.arange(d, dtype=np.int64)
        positions.append(np.broadcast_to(np.asarray(stride.evaluate(bindings, z), np.int64), (d,)))
        valids.append(np.broadcast_to(np.asarray(mask.evaluate(bindings, z)) != 0, (d,)))
    return (_strided(dims, positions, valids, size, source) or _nested(dims, positions, valids, size, source)
            or _gathered(dims, positions, valids, size, source))


def _int(expr: Expr, bindings: Mapping[str, int]) -> int:
    return int(expr.evaluate(bindings))


def _blank(dims: tuple[int, ...]) -> Strided:
    """A padded read whose box is empty: nothing but padding."""
    return Strided(0, dims, (0,) * len(dims), ((0, 0),) * len(dims))


def _boxed(dims: tuple[int, ...], axes: list[Axis], bindings: Mapping[str, int], size: int, source: int) -> Strided:
    """The strided or padded read of a tracker whose axes are each a linear stride over one run of valid indexes."""
    box, steps, start = [], [], 0
    for d, axis in zip(dims, axes):
        lo = 0 if axis.low is None else min(max(_int(axis.low, bindings), 0), d)
        hi = d if axis.high is None else max(min(_int(axis.high, bindings), d), lo)
        if lo == hi:
            return _blank(dims)
        step = _int(axis.step, bindings)
        box.append((lo, hi))
        steps.append(step if hi - lo > 1 else 0)  # as ``_strided`` finds it: a single index steps by 0
        start += _int(axis.offset, bindings) + step * lo
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
             valids: list[np.ndarray]) -> tuple[list[bool], tuple[int, ...], tuple[int, ...]]:
    """Which axes read one element throughout (broadcast), the shape with those axes 1, and the strides of a
    contiguous scratch of that shape read with stride 0 along them."""
    constant = [bool((p == p[0]).all() and v.all()) for p, v in zip(positions, valids)]
    compact = tuple(1 if c else d for c, d in zip(constant, dims))
    return constant, compact, tuple(0 if c else s for c, s in zip(constant, contiguous_strides(compact)))


def _nested(dims: tuple[int, ...], positions: list[np.ndarray], valids: list[np.ndarray], size: int,
            source: int) -> Nested | None:
    """Unpadded axes that each step through a few strided ones (a transpose, then a reshape): the varying axes read as
    one strided nest. None when an axis is no such nest."""
    if not all(v.all() for v in valids):
        return None
    constant, compact, strides = _compact(dims, positions, valids)
    nests = [[(1, 0)] if c else _nest(p - p[0]) for p, c in zip(positions, constant)]
    if any(nest is None for nest in nests):
        return None
    nest = Strided(int(sum(p[0] for p in positions)), tuple(n for nest in nests for n, _ in nest),
                   tuple(s for nest in nests for _, s in nest)).checked(size, source)
    return Nested(nest, dims, compact, strides)


def _gathered(dims: tuple[int, ...], positions: list[np.ndarray], valids: list[np.ndarray], size: int,
              source: int) -> Gathered:
    """The varying axes gathered through precomputed indexes (0 where padded)."""
    constant, compact, strides = _compact(dims, positions, valids)
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
                    None if valid.all() else np.ascontiguousarray(valid), dims, compact, strides)


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


@dataclass(frozen=True)
class Loop:
    """A loop kernel's index space and reads: what the CPU runtime calls a source of ``codegen.cpu`` with.

    A source is written for its ``operands`` (one ``Operand`` each) and ``rank``, so it serves every shape and stride
    with those. It is called as ``kernel(out, x0, x1, ..., meta, z...)`` (``parameters``; a take adds ``data`` last):
    ``out`` the output buffer shaped ``out``, ``x{j}`` operand ``j``'s flat buffer (f16 and bf16 travel as their uint16
    bits: ``kernel_array``), ``meta`` the int64 numbers of ``meta_names``, which the kernel reads into locals of those
    names, and ``z{j}`` zeros (``SEGMENT``, or ``dims[-1]`` if fewer) per padded operand, read outside its box.
    The loop runs over ``dims`` (size-1 axes dropped, and neighbours merged where every operand, ``out`` included,
    steps through them alike and each box stays one box): ``out``'s ``rank`` outer axes, then, when there is one more,
    the axis along a reduction or a row region's rows. Operand ``j`` reads ``x{j}`` at ``o{j}`` plus, along each axis
    ``d``, the index times ``s{j}_{d}``; a padded one only where every index ``d`` lies in ``[l{j}_{d}, h{j}_{d})``.
    ``n{e}`` are the ``lengths``: a reduction's extent, or a row region's extents along the row.
    """

    dims: tuple[int, ...]
    rank: int
    out: tuple[int, ...]
    reads: tuple[Strided, ...]  # each operand's read over ``dims``
    lengths: tuple[int, ...] = ()

    @classmethod
    def over(cls, shape: tuple[int, ...], reads: Sequence[Strided]) -> Loop:
        """An elementwise loop over ``out`` of ``shape``, each read in that shape (padded ones included)."""
        dims, merged = _collapse(shape, contiguous_strides(shape), reads)
        return cls(dims, len(dims), dims, merged)

    @classmethod
    def rows(cls, shape: tuple[int, ...], reads: Sequence[Strided], lengths: Sequence[int]) -> Loop:
        """A row region's loop over the rows of ``shape`` and then along them (its last axis, 1 where the end is per
        row), with unpadded reads of that shape (stride 0 along the row for a per-row one)."""
        dims, merged = _collapse(shape, contiguous_strides(shape), reads, keep_last=True)
        return cls(dims, len(dims) - 1, dims, merged, tuple(lengths))

    @classmethod
    def reducing(cls, shape: tuple[int, ...], reads: Sequence[Strided]) -> Loop:
        """A loop over ``out`` of ``shape`` and along the last axis of its unpadded reads, which it reduces."""
        dims, merged = _collapse(reads[0].shape, (*contiguous_strides(shape), 0), reads, keep_last=True)
        return cls(dims, len(dims) - 1, dims[:-1], merged, (dims[-1],))

    @property
    def operands(self) -> tuple[Operand, ...]:
        return tuple(Operand(Stride.of(read.strides[-1]), read.box is not None) for read in self.reads)

    def meta(self) -> np.ndarray:
        """The numbers of ``meta_names``, in its order."""
        named = {}
        for j, read in enumerate(self.reads):
            named[f"o{j}"] = read.offset
            named.update((f"s{j}_{d}", step) for d, step in enumerate(read.strides))
            for d, (lo, hi) in enumerate(read.box or ()):
                named[f"l{j}_{d}"], named[f"h{j}_{d}"] = lo, hi
        named.update((f"n{e}", length) for e, length in enumerate(self.lengths))
        return np.array([named[name] for name in meta_names(self.operands, len(self.dims), len(self.lengths))],
                        np.int64)

    def arguments(self, out: np.ndarray, flats: Sequence[np.ndarray]) -> list[np.ndarray]:
        """What the kernel is called with (before a take's ``data``): ``out``, the operands' ``flats``, ``meta``, and
        the padded operands' zeros."""
        zeros = [np.zeros(min(self.dims[-1], SEGMENT), flat.dtype)
                 for flat, read in zip(flats, self.reads, strict=True) if read.box is not None]
        return [kernel_array(out.reshape(self.out)), *map(kernel_array, flats), self.meta(), *map(kernel_array, zeros)]


def meta_names(operands: Sequence[Operand], width: int, lengths: int = 0) -> list[str]:
    """The names of ``meta``'s entries in order, for loops over ``width`` axes (see ``Loop``): per operand ``j``, its
    offset ``o{j}`` and strides ``s{j}_{d}``, then, when padded, its box ``l{j}_{d}, h{j}_{d}`` axis by axis; last the
    ``lengths`` ``n{e}``."""
    names = []
    for j, operand in enumerate(operands):
        names += [f"o{j}", *(f"s{j}_{d}" for d in range(width))]
        if operand.padded:
            names += [name for d in range(width) for name in (f"l{j}_{d}", f"h{j}_{d}")]
    return names + [f"n{e}" for e in range(lengths)]


def parameters(operands: Sequence[Operand]) -> list[str]:
    """A loop kernel's parameters (see ``Loop``)."""
    return ["out", *(f"x{j}" for j in range(len(operands))), "meta",
            *(f"z{j}" for j, operand in enumerate(operands) if operand.padded)]


def _collapse(shape: Sequence[int], out: Sequence[int], reads: Sequence[Strided],
              keep_last: bool = False) -> tuple[tuple[int, ...], tuple[Strided, ...]]:
    """The same index space over fewer axes, stepped through by ``out``'s strides and each read: size-1 axes dropped,
    and neighbours merged where every one steps through them alike and every padded read's box stays one box (the
    inner axis's box whole, or the outer one's a single index). With ``keep_last`` the last axis (a reduction's or a
    row's) stays apart. At least one axis (two with ``keep_last``) remains."""
    last = len(shape) - 1
    dims: list[int] = []
    strides = [out, *(read.strides for read in reads)]
    merged: list[list[int]] = [[] for _ in strides]
    kept: list[list[tuple[int, int]] | None] = [None if read.box is None else [] for read in reads]
    padded = [(read.box, k) for read, k in zip(reads, kept) if k is not None]
    for i, size in enumerate(shape):
        if size == 1 and not (keep_last and i == last):
            continue
        inner = [s[i] for s in strides]
        if (dims and not (keep_last and i == last) and all(m[-1] == t * size for m, t in zip(merged, inner))
                and all(box[i] == (0, size) or k[-1][1] - k[-1][0] == 1 for box, k in padded)):
            dims[-1] *= size
            for m, t in zip(merged, inner):
                m[-1] = t
            for box, k in padded:
                (low, high), (lo, hi) = k[-1], box[i]
                k[-1] = (low * size + lo, (high - 1) * size + hi)
        else:
            dims.append(size)
            for m, t in zip(merged, inner):
                m.append(t)
            for box, k in padded:
                k.append(box[i])
    while len(dims) < (2 if keep_last else 1):
        dims.insert(0, 1)
        for m in merged:
            m.insert(0, 0)
        for _, k in padded:
            k.insert(0, (0, 1))
    return tuple(dims), tuple(Strided(read.offset, tuple(dims), tuple(m), None if k is None else tuple(k))
                              for read, m, k in zip(reads, merged[1:], kept))
