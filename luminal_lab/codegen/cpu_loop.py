"""``Loop``: how a CPU loop kernel reads its operands (``codegen.reads.Strided`` reads), the contract between the CPU
runtime and the sources of ``codegen.cpu``."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..core.dtypes import DType
from .reads import Strided, contiguous_strides

SEGMENT = 1024  # the most elements a segment of a loop with padded operands runs: as many as its zeros hold
LOOPS = 1 << 14  # loops remembered by their shape and reads (``Loop.over``, ``Loop.reducing``), the oldest forgotten
_HALF = (DType.F16.numpy, DType.BF16.numpy)


def kernel_array(array: np.ndarray) -> np.ndarray:
    """What a kernel receives for ``array``: f16/bf16 as their uint16 bits."""
    return array.view(np.uint16) if array.dtype in _HALF else array


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
    """What a loop kernel's source knows of an operand: its innermost ``stride``, and if ``padded`` (0 off its box)."""

    stride: Stride
    padded: bool = False


@dataclass(frozen=True)
class Loop:
    """A loop kernel's index space and reads: what the CPU runtime calls a source of ``codegen.cpu`` with.

    A source, written for ``operands`` and ``rank``, serves every shape and stride with those. It is called as
    ``kernel(out, x0, x1, ..., meta, z...)`` (``parameters``; a take adds ``data``): ``out`` the output buffer shaped
    ``out``, ``x{j}`` operand ``j``'s flat buffer (f16/bf16 as uint16 bits, ``kernel_array``), ``meta`` int64 numbers
    read into locals named by ``meta_names``, ``z{j}`` zeros (``SEGMENT``, or ``dims[-1]`` if fewer) per padded
    operand. The loop runs over ``dims`` (size-1 axes dropped, neighbours merged where every operand and ``out`` step
    through them alike and each box stays one box): ``out``'s ``rank`` outer axes, then any axis along a reduction or
    a row region's rows. ``meta`` holds, per operand ``j``, its offset ``o{j}`` and stride ``s{j}_{d}`` along each axis
    ``d``, then if padded its box ``l{j}_{d}, h{j}_{d}`` axis by axis (read only where every index lies in it); last the
    ``lengths`` ``n{e}``: a reduction's extent, or a row region's extents along the row.
    """

    dims: tuple[int, ...]
    rank: int
    out: tuple[int, ...]
    reads: tuple[Strided, ...]  # each operand's read over ``dims``
    lengths: tuple[int, ...] = ()

    @classmethod
    def over(cls, shape: tuple[int, ...], reads: Sequence[Strided], lengths: Sequence[int] | None = None) -> Loop:
        """An elementwise loop over ``out`` of ``shape``, each read in that shape (padded ones included); with
        ``lengths``, a row region's, over the rows and then along them (the last axis: 1 where the end is per row;
        reads unpadded, a per-row one with stride 0 along the row). Remembered by its arguments: a plan for a new
        length builds again only the loops whose reads depend on it."""
        return _loop(tuple(shape), tuple(reads), None if lengths is None else tuple(lengths))

    @classmethod
    def reducing(cls, shape: tuple[int, ...], reads: Sequence[Strided]) -> Loop:
        """A loop over ``out`` of ``shape`` and along the last axis of its unpadded reads, which it reduces
        (remembered, as ``over``'s)."""
        return _loop(tuple(shape), tuple(reads), None, reducing=True)

    @functools.cached_property
    def operands(self) -> tuple[Operand, ...]:
        return tuple(Operand(Stride.of(read.strides[-1]), read.box is not None) for read in self.reads)

    def meta(self) -> np.ndarray:
        """The numbers of ``meta_names``, in its order (one array per loop, which kernels only read)."""
        return self._meta

    @functools.cached_property
    def _meta(self) -> np.ndarray:
        numbers = [n for read in self.reads for n in (read.offset, *read.strides, *(b for box in read.box or ()
                                                                                       for b in box))]
        return np.array([*numbers, *self.lengths], np.int64)  # in ``meta_names``' order

    def arguments(self, out: np.ndarray, flats: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The kernel's arguments (a take adds ``data``), for ``out`` and the operands' ``flats``."""
        zeros = [np.zeros(min(self.dims[-1], SEGMENT), flat.dtype)
                 for flat, read in zip(flats, self.reads, strict=True) if read.box is not None]
        return [kernel_array(out.reshape(self.out)), *map(kernel_array, flats), self.meta(), *map(kernel_array, zeros)]


@functools.lru_cache(maxsize=LOOPS)
def _loop(shape: tuple[int, ...], reads: tuple[Strided, ...], lengths: tuple[int, ...] | None,
          reducing: bool = False) -> Loop:
    """``Loop.over`` (``reducing``: ``Loop.reducing``) of these arguments."""
    if reducing:
        dims, merged = _collapse(reads[0].shape, (*contiguous_strides(shape), 0), reads, keep_last=True)
        return Loop(dims, len(dims) - 1, dims[:-1], merged, (dims[-1],))
    rows = lengths is not None
    dims, merged = _collapse(shape, contiguous_strides(shape), reads, keep_last=rows)
    return Loop(dims, len(dims) - rows, dims, merged, lengths or ())


def meta_names(operands: Sequence[Operand], width: int, lengths: int = 0) -> list[str]:
    """The names of ``meta``'s entries in order, for loops over ``width`` axes (see ``Loop``)."""
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
