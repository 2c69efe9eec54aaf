"""``(a * b).sum(axis)`` of two same-shape views as one batched matmul.

Matmul reaches the primitive ops as a broadcast ``Mul`` feeding a ``SumReduce``: ``a`` is
broadcast (stride 0) along the output columns, ``b`` along the rows. A ``Contraction``
recognises that from the strides and maps the product to ``matmul(lhs, rhs)`` with
``lhs [batch, rows, k]`` and ``rhs [batch, k, cols]`` over the un-broadcast data, so the
broadcast product is never materialised. Both runtimes use it: the reference per call,
the CPU runtime once per plan (its views then stay fixed).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np


class Contraction:
    """How ``(a * b).sum(axis)`` splits the other axes into batch, rows, cols and axes neither operand varies on."""

    def __init__(self, shape: Sequence[int], strides_a: Sequence[int], strides_b: Sequence[int], axis: int):
        self.shape = tuple(shape)
        self.axis = axis
        rank = len(self.shape)
        self.present_a = [strides_a[i] != 0 or self.shape[i] == 1 for i in range(rank)]
        self.present_b = [strides_b[i] != 0 or self.shape[i] == 1 for i in range(rank)]
        self.others = [i for i in range(rank) if i != axis]
        self.batch = [i for i in self.others if self.present_a[i] and self.present_b[i]]
        self.rows = [i for i in self.others if self.present_a[i] and not self.present_b[i]]
        self.cols = [i for i in self.others if self.present_b[i] and not self.present_a[i]]
        self.neither = [i for i in self.others if not self.present_a[i] and not self.present_b[i]]

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, axis: int) -> Contraction | None:
        """The contraction of two views, or None when an operand is broadcast along ``axis`` (not a matmul)."""
        plan = cls(a.shape, a.strides, b.strides, axis)
        return plan if plan.present_a[axis] and plan.present_b[axis] else None

    def _size(self, axes: list[int]) -> int:
        return math.prod(self.shape[i] for i in axes)

    @functools.cached_property
    def matmul_shape(self) -> tuple[int, int, int, int]:
        """``(batch, rows, k, cols)`` of the batched matmul."""
        return self._size(self.batch), self._size(self.rows), self.shape[self.axis], self._size(self.cols)

    def compaction(self) -> tuple[tuple[tuple, list[int]], tuple[tuple, list[int]]]:
        """For ``a`` and ``b``: the index that drops its broadcast axes and the permutation that then orders it as
        ``batch + rows + [axis]`` (``a``) or ``batch + [axis] + cols`` (``b``). Array-library neutral: numpy
        ``transpose`` and torch ``permute`` both take it."""

        def steps(present: list[bool], order: list[int]) -> tuple[tuple, list[int]]:
            kept = [i for i in range(len(present)) if present[i]]
            return tuple(slice(None) if p else 0 for p in present), [kept.index(i) for i in order]

        return (steps(self.present_a, self.batch + self.rows + [self.axis]),
                steps(self.present_b, self.batch + [self.axis] + self.cols))

    def compact_operands(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views of ``a`` as ``batch + rows + [axis]``, ``b`` as ``batch + [axis] + cols`` (broadcast axes dropped)."""
        (index_a, order_a), (index_b, order_b) = self.compaction()
        return a[index_a].transpose(order_a), b[index_b].transpose(order_b)

    def operands(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``lhs [batch, rows, k]`` and ``rhs [batch, k, cols]`` (copies only where a reshape needs one)."""
        count, m, k, n = self.matmul_shape
        lhs, rhs = self.compact_operands(a, b)
        return lhs.reshape(count, m, k), rhs.reshape(count, k, n)

    @property
    def result_order(self) -> list[int]:
        """The axes of the matmul product, ``batch + rows + cols + neither``."""
        return self.batch + self.rows + self.cols + self.neither

    def arrangement(self) -> tuple[list[int], list[int], list[int]]:
        """How the ``[batch, rows, cols]`` product becomes the reduction's result: the shape to reshape it to, the
        permutation then, and the shape to broadcast to (axes neither operand varies on)."""
        sizes = [self.shape[i] for i in self.batch + self.rows + self.cols] + [1] * len(self.neither)
        current = self.result_order
        return sizes, [current.index(i) for i in self.others], [self.shape[i] for i in self.others]

    def arrange(self, product: np.ndarray) -> np.ndarray:
        """The ``[batch, rows, cols]`` product as the reduction's result (the other axes in order; a view)."""
        sizes, order, shape = self.arrangement()
        return np.broadcast_to(product.reshape(sizes).transpose(order), shape)


def contract(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """``(a * b).sum(axis)`` for two same-shape views, as one batched matmul when the strides allow it."""
    plan = Contraction.of(a, b, axis)
    if plan is None or a.size == 0:  # an empty operand: nothing to index its broadcast axes at
        return np.sum(a * b, axis=axis)
    lhs, rhs = plan.operands(a, b)
    return plan.arrange(np.matmul(lhs, rhs))
