"""Element types, with their names in numpy, torch, egglog and C.

numpy has no bf16: ``ml_dtypes`` gives it, imported when a dtype's numpy form is first needed (its import takes half a
second, which a process that never needs one, an egglog worker say, does not pay)."""

from __future__ import annotations

import enum
import functools
import math

import numpy as np


class DType(enum.Enum):
    """An element type. ``value`` is the short name used in summaries (``f32``, ``i64``, ...)."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    I8 = "i8"
    U8 = "u8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    F64 = "f64"
    BOOL = "bool"

    __hash__ = object.__hash__  # members are singletons: hashed by identity in C, not by name in Python

    def __repr__(self) -> str:
        return f"ll.{self.value}"

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16, DType.F64)

    @property
    def is_int(self) -> bool:
        return self in (DType.I8, DType.U8, DType.I16, DType.I32, DType.I64)

    @property
    def numpy(self) -> np.dtype:
        try:
            return _NUMPY[self]
        except KeyError:
            return _numpy_types()[self]

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

    @property
    def lowest(self) -> float | int:
        """The smallest value: ``-inf`` for floats, 0 for bool."""
        return -math.inf if self.is_float else 0 if self == DType.BOOL else int(np.iinfo(self.numpy).min)

    @property
    def highest(self) -> float | int:
        """The largest value: ``inf`` for floats, 1 for bool."""
        return math.inf if self.is_float else 1 if self == DType.BOOL else int(np.iinfo(self.numpy).max)

    @property
    def finite(self) -> tuple[float, float]:
        """A float dtype's lowest finite value and its smallest positive normal one."""
        import ml_dtypes

        info = ml_dtypes.finfo(self.numpy)
        return float(info.min), float(info.smallest_normal)

    def wrap(self, value: int) -> int:
        """An integer as this int type stores it: wrapped modulo 2**bits into its range (torch's scalar rule)."""
        span = 1 << (8 * self.numpy.itemsize)
        return (value - self.lowest) % span + self.lowest


# each dtype's numpy dtype (by name: bf16's is ml_dtypes'), egglog constructor, C type, and rank in torch's
# type-promotion lattice (``promote``)
_TABLE = {
    DType.F32: ("float32", "F32", "float", 6),
    DType.F16: ("float16", "F16", "half", 5),
    DType.BF16: ("bfloat16", "Bf16", "__nv_bfloat16", 5),
    DType.I8: ("int8", "Int8", "signed char", 1),
    DType.U8: ("uint8", "UInt8", "unsigned char", 1),
    DType.I16: ("int16", "Int16", "short", 2),
    DType.I32: ("int32", "Int", "int", 3),
    DType.I64: ("int64", "Int64", "long long", 4),
    DType.F64: ("float64", "F64", "double", 7),
    DType.BOOL: ("bool", "Bool", "unsigned char", 0),
}
_NUMPY: dict[DType, np.dtype] = {}  # filled by ``_numpy_types`` when first needed


def _numpy_types() -> dict[DType, np.dtype]:
    """Each dtype's numpy dtype (``ml_dtypes`` imported for bf16's)."""
    if not _NUMPY:
        import ml_dtypes

        _NUMPY.update({dtype: np.dtype(ml_dtypes.bfloat16 if row[0] == "bfloat16" else row[0])
                       for dtype, row in _TABLE.items()})
    return _NUMPY


_EGGLOG = {dtype: row[1] for dtype, row in _TABLE.items()}
_C = {dtype: row[2] for dtype, row in _TABLE.items()}

f32, f16, bf16 = DType.F32, DType.F16, DType.BF16
i8, u8, i16 = DType.I8, DType.U8, DType.I16
i32, i64, f64 = DType.I32, DType.I64, DType.F64
bool_ = DType.BOOL

# torch's type-promotion lattice, restricted to our types: the higher rank wins; two types of one rank meet above
_PROMOTION_RANK = {dtype: row[3] for dtype, row in _TABLE.items()}
_MEET = {frozenset((DType.I8, DType.U8)): DType.I16, frozenset((DType.F16, DType.BF16)): DType.F32}


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary op on ``a`` and ``b`` (torch's rules for tensors of equal rank)."""
    if a == b:
        return a
    if _PROMOTION_RANK[a] == _PROMOTION_RANK[b]:
        return _MEET[frozenset((a, b))]
    return a if _PROMOTION_RANK[a] > _PROMOTION_RANK[b] else b


def cast_path(source: DType, target: DType) -> tuple[DType, ...]:
    """The types a cast from ``source`` to ``target`` converts through, ``target`` last: a float becomes an i8, u8 or
    i16 through i32 (truncated toward zero, then wrapped), as torch's CPU converts it."""
    return (DType.I32, target) if source.is_float and target in (DType.I8, DType.U8, DType.I16) else (target,)


def convert(array: np.ndarray, source: DType, target: DType, out: np.ndarray | None = None) -> np.ndarray:
    """``array`` (of ``source``) as ``target``, converted through ``cast_path``; written into ``out`` when given."""
    *through, _ = cast_path(source, target)
    for step in through:
        array = array.astype(step.numpy)
    if out is None:
        return array.astype(target.numpy, copy=False)
    np.copyto(out, array, casting="unsafe")
    return out


def from_numpy(dtype: np.dtype) -> DType:
    for ours, theirs in _numpy_types().items():
        if theirs == dtype:
            return ours
    raise TypeError(f"numpy dtype {dtype} has no luminal_lab dtype")


@functools.cache
def _torch_table() -> dict:
    import torch

    return {getattr(torch, numpy.name): dtype for dtype, numpy in _numpy_types().items()}  # torch names each as numpy


def from_torch(dtype) -> DType:
    table = _torch_table()
    if dtype not in table:
        raise TypeError(f"torch dtype {dtype} has no luminal_lab dtype")
    return table[dtype]


def to_torch(dtype: DType):
    return {ours: theirs for theirs, ours in _torch_table().items()}[dtype]
