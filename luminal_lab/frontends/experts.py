"""Mixture-of-experts ops: a grouped matmul, whose rows come sorted by expert and are each multiplied by their own
expert's matrix (``aten._grouped_mm`` of rows by experts, and transformers' ``grouped_mm_fallback``, which its MoE
layers call where torch's grouped kernel does not apply: on the CPU, or under ``torch.compile`` in f32).

``offs`` holds the cumulative row counts per expert, so row ``s`` belongs to expert ``e(s)``: the number of offsets at
or before ``s``. The product is written as each row times its expert's matrix taken from the weight (a Gather of the
weight at ``e``, then a batched contraction, one matrix per row); the e-graph finds beside it the gathered contraction
``GatherMatmul`` (``luminal_lab.egraph.ops``), which reads each row's matrix in place, so no weight is copied per row.
Rows past the last offset (expert-parallel sentinels, which one device never has) are 0, as the fallback leaves them.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core import dtypes as dt
from ..hlir.tensor import GraphTensor, where

aten = torch.ops.aten


def grouped_rows(x: GraphTensor, weight: GraphTensor, offs: GraphTensor) -> GraphTensor:
    """``x [S, K]`` by ``weight [E, K, N]``: row ``s`` times ``weight[e(s)]``, ``e(s)`` the count of ``offs`` at or
    before ``s``."""
    rows, experts = x.shape[0], weight.shape[0]
    position = x.graph.arange(rows, dtype=offs.dtype)
    # counting all but the last offset keeps every pick in range: a row past the last one picks the last expert
    before = offs.slice(0, 0, experts - 1).unsqueeze(0).le(position.unsqueeze(1))
    product = x.unsqueeze(1).matmul(weight.take(before.cast(dt.i32).sum(1), 0)).squeeze(1)
    return where(position.lt(offs.slice(0, experts - 1, experts)).unsqueeze(1), product, 0)


def _grouped_mm(cx: Any, x: GraphTensor, weight: GraphTensor, offs: GraphTensor | None = None,
                bias: GraphTensor | None = None, out_dtype: Any = None) -> GraphTensor:
    if offs is None or x.ndim != 2 or weight.ndim != 3 or bias is not None:
        raise cx.refuse("a grouped matmul other than rows (2-D) by experts (3-D) with offsets and no bias")
    return grouped_rows(x, weight, offs).cast(cx.dtype)


# by name: a library's custom op exists once that library is imported
BY_NAME = {"transformers.grouped_mm_fallback.default": _grouped_mm}
TABLE = {aten._grouped_mm.default: _grouped_mm}
