"""The CPU runtime's gathered contraction (``GatherMatmul``): each row of a mixture of experts times its own expert's
matrix, read in place from the weight, never copied per row.

The kernel's ``b`` at a point of the contraction is a position ``q`` in the layout of the gather it replaces, whose
index is ``q % L + rows[q // L] * L`` (``take`` along the first axis: ``L`` is the size of one expert's matrix). At a
binding ``plan`` splits the contraction's axes by how ``q`` steps along them: by whole rows of the gather (those pick
the expert) or within one row (those walk one expert's matrix, which must step evenly through the data's view, so that
each expert's matrix is a strided view of the data). Each call then reads the rows' values and runs one BLAS product
per expert that some row picks, over the rows that pick it. A layout that does not split so (a gather along another
axis, several axes of rows) gathers ``b`` on each call through the same index arithmetic, each row's matrix copied,
and contracts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..codegen.reads import Strided, lower
from ..core.errors import LuminalError
from ..core.symbolic import Expr
from ..hlir.contraction import Contraction, contract
from ..llir.llir import GatheredRead, Kernel


class _OtherLayout(LuminalError):
    """A ``GatherMatmul`` whose read does not split into rows that each pick one matrix."""


def _refuse(kernel: Kernel, why: str) -> _OtherLayout:
    return _OtherLayout(f"GatherMatmul k{kernel.id}: {why}")


@dataclass
class GatheredProduct:
    """One call's work: per expert that some row picks, those rows of ``lhs`` times that expert's matrix, arranged
    into ``out``."""

    out: np.ndarray  # the kernel's buffer, shaped as the contraction's other axes
    lhs: np.ndarray  # a, compacted to [batch, rows, k] (a view; reshaped on each call)
    picks: np.ndarray  # each matmul row's expert, read from the rows' buffer (a fancy index, taken on each call)
    rows: np.ndarray  # the rows' values, one per row of the gather (a view of their buffer)
    matrices: list[np.ndarray]  # per expert, its matrix compacted to [batch, k, cols] (views of the data)
    contraction: Contraction
    compute: Any

    def __call__(self) -> None:
        count, m, k, n = self.contraction.matmul_shape
        lhs = np.ascontiguousarray(self.lhs, self.compute).reshape(count, m, k)
        product = np.zeros((count, m, n), self.compute)
        picks = self.rows[self.picks]
        for expert in np.unique(picks):
            if 0 <= expert < len(self.matrices):  # any other pick reads outside the data: 0, as the gather's
                chosen = np.flatnonzero(picks == expert)
                rhs = self.matrices[expert].astype(self.compute, copy=False).reshape(count, k, n)
                product[:, chosen] = np.matmul(lhs[:, chosen], rhs)
        np.copyto(self.out, self.contraction.arrange(product), casting="unsafe")


@dataclass
class GatheredPerRow:
    """Any other layout: ``b`` gathered on each call through the kernel's index arithmetic (each row's matrix
    copied, as the per-row form does), then one contraction."""

    out: np.ndarray
    a: np.ndarray  # over the contraction
    rows: np.ndarray  # over the gather's index shape
    data: np.ndarray  # over its own shape
    row_at: tuple[np.ndarray, ...]  # per point of the contraction, where its row's value is in ``rows``
    within: np.ndarray  # per point of the contraction, the iota's value
    scale: int
    compute: Any

    def __call__(self) -> None:
        position = self.within + self.rows[self.row_at].astype(np.int64) * self.scale
        inside = (position >= 0) & (position < self.data.size)
        picked = self.data[np.unravel_index(np.where(inside, position, 0), self.data.shape)]
        b = np.where(inside, picked, 0).astype(self.compute, copy=False)
        np.copyto(self.out, contract(self.a.astype(self.compute, copy=False), b, self.a.ndim - 1), casting="unsafe")


def plan(kernel: Kernel, out: np.ndarray, a: np.ndarray, rows: np.ndarray, data: np.ndarray,
         bindings: dict[str, int]) -> GatheredProduct | GatheredPerRow:
    """The step computing ``kernel`` into ``out`` from numpy views of its sources: ``a`` over the contraction, ``rows``
    over the gather's index shape, ``data`` over its own shape (``GatheredRead``): one product per expert where the
    read splits into rows that each pick a matrix, else the gather per row."""
    try:
        return _per_expert(kernel, out, a, rows, data, bindings)
    except _OtherLayout:
        read: GatheredRead = kernel.arg
        points = np.arange(a.size, dtype=np.int64)
        q = np.broadcast_to(np.asarray(read.b.index_expr().evaluate(bindings, points), np.int64), points.shape)
        within = np.broadcast_to(np.asarray(read.within.evaluate(bindings, q), np.int64), points.shape)
        row_at = np.unravel_index(q, rows.shape)
        return GatheredPerRow(out.reshape(a.shape[:-1]), a, rows, data, tuple(i.reshape(a.shape) for i in row_at),
                              within.reshape(a.shape), int(read.scale.evaluate(bindings)), kernel.dtype.compute_numpy)


def _per_expert(kernel: Kernel, out: np.ndarray, a: np.ndarray, rows: np.ndarray, data: np.ndarray,
                bindings: dict[str, int]) -> GatheredProduct:
    read: GatheredRead = kernel.arg
    if read.within != Expr.z() % read.scale:
        raise _refuse(kernel, f"its gather's iota {read.within} is not z % {read.scale}")
    length = int(read.scale.evaluate(bindings))
    if math.prod(rows.shape[1:]) != length or math.prod(data.shape[1:]) != length or data.ndim < 2 or a.size == 0:
        raise _refuse(kernel, f"rows of {length} do not match its index {rows.shape} and data {data.shape}")
    if any(s != 0 and d > 1 for s, d in zip(rows.strides[1:], rows.shape[1:])):
        raise _refuse(kernel, "its rows vary within a row of the gather")
    b = lower(read.b, bindings, math.prod(rows.shape), kernel.id)
    if not isinstance(b, Strided) or b.box is not None:
        raise _refuse(kernel, "its b is no strided read of the gather")
    shape = a.shape
    by_row = [s % length == 0 or d == 1 for s, d in zip(b.strides, shape)]  # steps by whole rows (or not at all)
    first_row, first_within = divmod(b.offset, length)
    inside = [i for i in range(len(shape)) if not by_row[i]]
    if first_within or any(b.strides[i] < 0 for i in inside) or \
            sum((shape[i] - 1) * b.strides[i] for i in inside) >= length:
        raise _refuse(kernel, "its b does not walk one row of the gather from its start")
    strides = [0] * len(shape)
    for i, step in zip(inside, _matrix_steps(data, [shape[i] for i in inside], [b.strides[i] for i in inside],
                                             kernel)):
        strides[i] = step * data.itemsize
    experts = [as_strided(data[e:e + 1], shape, strides) for e in range(data.shape[0])]
    contraction = Contraction.of(a, experts[0], len(shape) - 1) if experts else None
    if contraction is None:
        raise _refuse(kernel, "its b does not vary along the contracted axis")
    if any(by_row[i] and b.strides[i] and shape[i] > 1 and i not in contraction.rows for i in range(len(shape))):
        raise _refuse(kernel, "its rows pick matrices along an axis a does not vary on")
    # each matmul row's row of the gather
    picks = np.full([shape[i] for i in contraction.rows], first_row, np.int64)
    for position, i in enumerate(contraction.rows):
        along = np.arange(shape[i]) * (b.strides[i] // length if by_row[i] else 0)
        picks = picks + along.reshape([-1 if j == position else 1 for j in range(picks.ndim)])
    (_, _), (index, order) = contraction.compaction()
    lhs, _ = contraction.compact_operands(a, experts[0])
    return GatheredProduct(out.reshape([shape[i] for i in contraction.others]), lhs, picks.reshape(-1),
                           rows[(slice(None),) + (0,) * (rows.ndim - 1)], [e[index].transpose(order) for e in experts],
                           contraction, kernel.dtype.compute_numpy)


def _matrix_steps(data: np.ndarray, dims: list[int], steps: list[int], kernel: Kernel) -> list[int]:
    """In elements of ``data``, how each axis that walks within a row of the gather steps through the data's view:
    the row's positions ``sum(index * steps)`` in one expert's matrix (row-major over ``data.shape[1:]``), read through
    that matrix's strides, must step evenly."""
    matrix = data[0]
    grid = np.zeros([max(d, 1) for d in dims], np.int64)
    for axis, (d, step) in enumerate(zip(dims, steps)):
        grid = grid + (np.arange(d) * step).reshape([-1 if j == axis else 1 for j in range(len(dims))])
    offsets = sum(c * (s // data.itemsize) for c, s in zip(np.unravel_index(grid, matrix.shape), matrix.strides))
    result = [int(np.take(offsets, 1, axis).reshape(-1)[0]) if d > 1 else 0 for axis, d in enumerate(dims)]
    expected = np.zeros_like(offsets)
    for axis, (d, step) in enumerate(zip(dims, result)):
        expected = expected + (np.arange(d) * step).reshape([-1 if j == axis else 1 for j in range(len(dims))])
    if not np.array_equal(offsets, expected):
        raise _refuse(kernel, "one matrix of its data is no strided view")
    return result
