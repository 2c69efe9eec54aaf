"""Element types, with their names in numpy, torch, egglog and C."""

from __future__ import annotations

import enum
import functools

import ml_dtypes
import numpy as np


class DType(enum.Enum):
    """An element type. ``value`` is the short name used in summaries (``f32``, ``i64``, ...)."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    I32 = "i32"
    I64 = "i64"
    F64 = "f64"
    BOOL = "bool"

    def __repr__(self) -> str:
        return f"ll.{self.value}"

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16, DType.F64)

    @property
    def is_int(self) -> bool:
        return self in (DType.I32, DType.I64)

    @property
    def numpy(self) -> np.dtype:
        return _NUMPY[self]

    @property
    def egglog(self) -> str:
        """Constructor name in Luminal's egglog schema (``I64`` is egglog's own sort, hence ``Int64``)."""
        return _EGGLOG[self]

    @property
    def c_type(self) -> str:
        return _C[self]

    @property
    def compute_numpy(self) -> np.dtype:
        """The numpy type arithmetic runs in: f16 and bf16 compute in f32 and round per op, as torch's CPU does."""
        return np.dtype(np.float32) if self in (DType.F16, DType.BF16) else self.numpy


_NUMPY = {
    DType.F32: np.dtype(np.float32),
    DType.F16: np.dtype(np.float16),
    DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64),
    DType.F64: np.dtype(np.float64),
    DType.BOOL: np.dtype(np.bool_),
}
_EGGLOG = {
    DType.F32: "F32",
    DType.F16: "F16",
    DType.BF16: "Bf16",
    DType.I32: "Int",
    DType.I64: "Int64",
    DType.F64: "F64",
    DType.BOOL: "Bool",
}
_C = {
    DType.F32: "float",
    DType.F16: "half",
    DType.BF16: "__nv_bfloat16",
    DType.I32: "int",
    DType.I64: "long long",
    DType.F64: "double",
    DType.BOOL: "unsigned char",
}

f32, f16, bf16 = DType.F32, DType.F16, DType.BF16
i32, i64, f64 = DType.I32, DType.I64, DType.F64
bool_ = DType.BOOL

# torch's type-promotion lattice, restricted to our types: a higher rank wins within a kind.
_PROMOTION_RANK = {
    DType.BOOL: 0,
    DType.I32: 1,
    DType.I64: 2,
    DType.F16: 3,
    DType.BF16: 3,
    DType.F32: 4,
    DType.F64: 5,
}


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary op on ``a`` and ``b`` (torch's rules for tensors of equal rank)."""
    if a == b:
        return a
    if {a, b} == {DType.F16, DType.BF16}:
        return DType.F32
    return a if _PROMOTION_RANK[a] > _PROMOTION_RANK[b] else b


def from_numpy(dtype: np.dtype) -> DType:
    for ours, theirs in _NUMPY.items():
        if theirs == dtype:
            return ours
    raise TypeError(f"numpy dtype {dtype} has no luminal_lab dtype")


@functools.cache
def _torch_table() -> dict:
    import torch

    return {
        torch.float32: DType.F32,
        torch.float16: DType.F16,
        torch.bfloat16: DType.BF16,
        torch.int32: DType.I32,
        torch.int64: DType.I64,
        torch.float64: DType.F64,
        torch.bool: DType.BOOL,
    }


def from_torch(dtype) -> DType:
    table = _torch_table()
    if dtype not in table:
        raise TypeError(f"torch dtype {dtype} has no luminal_lab dtype")
    return table[dtype]


def to_torch(dtype: DType):
    return {ours: theirs for theirs, ours in _torch_table().items()}[dtype]
