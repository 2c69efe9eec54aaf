"""transformers' causal LMs with their defaults (``use_cache=True``, sdpa attention) through the backend and
``ll.compile``: a prefill (the cache empty) and a decode step (the cache holding the prefill's keys and values), the
logits and what the cache holds checked against eager PyTorch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import torch

import luminal_lab as ll
from tests.helpers.causal_lms import CAUSAL_LMS, CachedStep, cache_tensors, prompt

TOL = {"atol": 1e-4, "rtol": 1e-4}
# the most-fused genome, unmeasured: these tests check what the programs compute, not the search
FUSED = {"generations": 0}


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def assert_all_close(got: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], what: str) -> None:
    assert len(got) == len(expected), f"{what}: {len(got)} tensors, eager has {len(expected)}"
    for position, (a, b) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(a, b, **TOL, msg=lambda m, p=position: f"{what}, tensor {p}: {m}")


def _snapshot(cache) -> list[torch.Tensor]:
    return [t.clone() for t in cache_tensors(cache)]


@pytest.mark.slow
@pytest.mark.parametrize("name", CAUSAL_LMS)
def test_prefill_and_decode_with_the_cache_through_torch_compile(name: str, fresh_dynamo: None) -> None:
    model = CAUSAL_LMS[name]()
    ids = prompt()
    following = (ids[:, -1:] + 1) % model.config.vocab_size
    fast = torch.compile(model, backend="luminal_lab", options=FUSED)
    with torch.no_grad():
        eager_prefill = model(ids)
        eager_prefilled = _snapshot(eager_prefill.past_key_values)
        eager_decode = model(following, cache=eager_prefill.past_key_values)
        prefill = fast(ids)
        torch.testing.assert_close(prefill.logits, eager_prefill.logits, **TOL)
        assert_all_close(cache_tensors(prefill.past_key_values), eager_prefilled, "the cache after the prefill")
        decode = fast(following, cache=prefill.past_key_values)
    torch.testing.assert_close(decode.logits, eager_decode.logits, **TOL)
    assert_all_close(cache_tensors(decode.past_key_values), cache_tensors(eager_decode.past_key_values),
                     "the cache after the decode step")
    assert ll.programs(fast)  # luminal_lab ran it, with no fallback


@pytest.mark.slow
@pytest.mark.parametrize("name", CAUSAL_LMS)
def test_prefill_and_decode_with_the_cache_through_ll_compile(name: str) -> None:
    step = CachedStep(CAUSAL_LMS[name]())
    ids = prompt()
    following = (ids[:, -1:] + 1) % step.model.config.vocab_size
    with torch.no_grad():
        eager_prefill = step(ids)
        prefill = ll.compile(step, (ids,))(ids)
        assert_all_close(prefill, eager_prefill, "the prefill's logits and cache")
        eager_decode = step(following, *eager_prefill[1:])
        decode = ll.compile(step, (following, *eager_prefill[1:]))(following, *prefill[1:])
    assert_all_close(decode, eager_decode, "the decode step's logits and cache")
