"""Arrays across the boundary: torch tensors to numpy and back, bf16 included (numpy has no bf16; ml_dtypes does)."""

from __future__ import annotations

import functools

import numpy as np

from . import dtypes as dt


def to_numpy(value) -> np.ndarray:
    """A numpy view of a CPU tensor (a copy of a CUDA one; bf16 through ml_dtypes), or the array itself."""
    if isinstance(value, np.ndarray):
        return value
    if value.dtype is _torch().bfloat16:
        return value.detach().contiguous().view(_torch().int16).numpy(force=True).view(dt.bf16.numpy)
    return value.numpy(force=True)  # detached, on the CPU


def to_torch(array: np.ndarray):
    """A torch tensor over ``array``'s data (bf16 through ml_dtypes)."""
    torch = _torch()
    if type(array) is not np.ndarray or not array.flags.c_contiguous:
        array = np.array(array, order="C", copy=None)  # keeps 0-d arrays 0-d
    if array.dtype == _BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


_BF16 = dt.bf16.numpy


@functools.cache
def _torch():
    """torch, imported on first use (the stages before the frontend run without it)."""
    import torch

    return torch
