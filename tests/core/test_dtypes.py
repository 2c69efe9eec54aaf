"""Element types against torch and numpy: names, promotion, the range of each int type and how a scalar wraps into
it, and the path a cast takes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import luminal_lab as ll
from luminal_lab.core import dtypes as dt
from luminal_lab.core.dtypes import DType

INTS = [d for d in DType if d.is_int]
C_SIZES = {"signed char": 1, "unsigned char": 1, "short": 2, "int": 4, "long long": 8}


def test_the_narrow_ints_are_exported_beside_the_others() -> None:
    assert (ll.i8, ll.u8, ll.i16) == (DType.I8, DType.U8, DType.I16)
    assert {"i8", "u8", "i16"} <= set(ll.__all__)
    assert [d.value for d in INTS] == ["i8", "u8", "i16", "i32", "i64"]
    assert not any(d.is_float for d in INTS)


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
def test_torch_and_numpy_names_round_trip(dtype: DType) -> None:
    theirs = dt.to_torch(dtype)
    assert dt.from_torch(theirs) == dtype
    assert torch.empty((), dtype=theirs).element_size() == dtype.numpy.itemsize
    if dtype != DType.BF16:  # numpy's bf16 is ml_dtypes', which torch does not know
        assert torch.from_numpy(np.zeros(1, dtype.numpy)).dtype == theirs
    assert dt.from_numpy(dtype.numpy) == dtype


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.value)
def test_int_c_types_have_the_storage_size(dtype: DType) -> None:
    assert C_SIZES[dtype.c_type] == dtype.numpy.itemsize


@pytest.mark.parametrize(("a", "b"), list(itertools.product(DType, repeat=2)), ids=lambda d: d.value)
def test_promote_is_torchs_promote_types(a: DType, b: DType) -> None:
    assert dt.promote(a, b) == dt.from_torch(torch.promote_types(dt.to_torch(a), dt.to_torch(b)))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.value)
def test_int_range_is_torchs(dtype: DType) -> None:
    info = torch.iinfo(dt.to_torch(dtype))
    assert (dtype.lowest, dtype.highest) == (info.min, info.max)


def test_float_and_bool_ranges() -> None:
    assert (DType.F16.lowest, DType.F16.highest) == (-np.inf, np.inf)
    assert (DType.BOOL.lowest, DType.BOOL.highest) == (0, 1)


@given(st.sampled_from(INTS), st.integers(-(2**63), 2**63 - 1))
def test_wrap_is_twos_complement_as_numpy_converts(dtype: DType, value: int) -> None:
    assert dtype.wrap(value) == int(np.array(value, np.int64).astype(dtype.numpy))


@pytest.mark.parametrize("dtype", [DType.I8, DType.U8, DType.I16], ids=lambda d: d.value)
def test_a_python_scalar_wraps_as_torch_converts_it(dtype: DType) -> None:
    theirs = dt.to_torch(dtype)
    for value in (-1, 300, -300, 70000, dtype.highest + 1):
        assert int(torch.zeros((), dtype=theirs) + value) == dtype.wrap(value)


def test_a_float_casts_to_a_narrow_int_through_i32() -> None:
    """Truncated toward zero, then wrapped (torch's CPU result where it defines one: the value in range)."""
    for target in (DType.I8, DType.U8, DType.I16):
        assert dt.cast_path(DType.F32, target) == (DType.I32, target)
        assert dt.cast_path(DType.BF16, target) == (DType.I32, target)
        assert dt.cast_path(DType.I64, target) == (target,)
        low, high = target.lowest, target.highest
        for source in (DType.F32, DType.F16):
            values = np.array([low, low + 0.5, -0.9, 0.9, 2.5, high - 0.5, high + 0.75]).astype(source.numpy)
            values = values[(values > low - 1) & (values < high + 1)]
            expected = torch.from_numpy(values).to(dt.to_torch(target)).numpy()
            np.testing.assert_array_equal(dt.convert(values, source, target), expected)
            out = np.empty(values.shape, target.numpy)
            assert dt.convert(values, source, target, out) is out
            np.testing.assert_array_equal(out, expected)
    assert dt.cast_path(DType.F32, DType.I64) == (DType.I64,)
    wide = np.array([300.7, -300.7, -1.5, 70000.0], np.float32)  # beyond the range: wrapped, never saturated
    assert dt.convert(wide, DType.F32, DType.I8).tolist() == [44, -44, -1, 112]
    assert dt.convert(wide, DType.F32, DType.U8).tolist() == [44, 212, 255, 112]
    assert dt.convert(wide, DType.F32, DType.I16).tolist() == [300, -300, -1, 4464]
