"""Sort through one comparison per pair: ``_order_key`` orders float32 values as their bit patterns do (NaN
largest, -0 equal to 0), and ``sort`` matches torch's stable sort for every dtype, both directions, with ties,
NaN, infinities, signed zeros and subnormals, on the reference runtime and the compiled kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.hlir.reduce import _order_key

EDGES = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, 2.0**-126, -(2.0**-126), 1.0,
                  np.nextafter(np.float32(1), np.float32(0)), np.nextafter(np.float32(1), np.float32(2)), -1.0,
                  np.nextafter(np.float32(-1), np.float32(0)), 2.0**24, 3.4028235e38, -3.4028235e38, np.inf,
                  -np.inf, np.nan, 0.1, -0.1, 1e-40, -1e-40], dtype=np.float32)


def bit_rank(x: np.ndarray) -> np.ndarray:
    """The float32 bit pattern as a signed number: ``|x|``'s bits, negated for negative values (-0 is 0); every
    NaN one above +inf."""
    bits = (x.view(np.uint32) & 0x7FFFFFFF).astype(np.int64)
    return np.where(np.isnan(x), 255 * 2**23 + 1, np.where(np.signbit(x), -bits, bits))


@pytest.mark.parametrize("path", ["run_reference", "run"])
@pytest.mark.parametrize("values", ["edges", "random bits"])
def test_the_order_key_of_a_float32_is_its_bit_pattern_as_a_number(values: str, path: str) -> None:
    x = EDGES if values == "edges" else np.random.default_rng(0).integers(0, 2**32, 4096, dtype=np.uint32).view(
        np.float32)
    g = ll.Graph()
    _order_key(g.tensor(x.shape, "x")).output("key")
    key = getattr(ll.compile(g), path)(x=x)
    assert np.array_equal(key, bit_rank(x))


def with_ties(dtype: torch.dtype, n: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(n)
    if dtype == torch.bool:
        return torch.randint(0, 2, (3, n), generator=generator).bool()
    if not dtype.is_floating_point:
        low = 0 if dtype == torch.uint8 else -100
        return torch.randint(low, 100, (3, n), generator=generator, dtype=dtype)
    x = (torch.randn(3, n, generator=generator) * 3).round().to(dtype)  # many ties
    x[0, ::5], x[1, ::7], x[2, :4] = float("nan"), float("inf"), torch.tensor([-0.0, 0.0, -float("inf"), 1e-40])
    return x


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8,
          torch.bool]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_matches_torch_for_every_dtype_on_the_reference_runtime(dtype: torch.dtype) -> None:
    x = with_ties(dtype, 257)
    for descending in (False, True):
        for dim in (0, 1):
            fn = lambda x: torch.sort(x, dim=dim, descending=descending, stable=True)  # noqa: B023, E731
            values, indices = ll.compile(fn, (x,)).run_reference(x)
            expected = fn(x)
            torch.testing.assert_close(torch.as_tensor(values), expected.values, equal_nan=True)
            assert torch.equal(torch.as_tensor(indices), expected.indices), (descending, dim)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_sort_matches_torch_through_the_compiled_kernels(dtype: torch.dtype) -> None:
    x = with_ties(dtype, 200)
    fn = lambda x: torch.sort(x, descending=True, stable=True)  # noqa: E731
    values, indices = ll.compile(fn, (x,)).run(x)
    expected = fn(x)
    torch.testing.assert_close(torch.as_tensor(values), expected.values, equal_nan=True)
    assert torch.equal(torch.as_tensor(indices), expected.indices)
