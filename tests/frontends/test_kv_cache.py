"""transformers' causal LMs with their defaults (``use_cache=True``, sdpa attention) through ``ll.compile``: a prefill
(the cache empty) and a decode step (the cache holding the prefill's keys and values), the logits and what the cache
holds checked against eager PyTorch. Through ``torch.compile`` the same models generate in test_generation.py, which
checks the cache after the last step."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

import luminal_lab as ll
from tests.helpers.causal_lms import CAUSAL_LMS, CachedStep, prompt

TOL = {"atol": 1e-4, "rtol": 1e-4}
# the most-fused genome, unmeasured: these tests check what the programs compute, not the search
FUSED = {"generations": 0}


def assert_all_close(got: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], what: str) -> None:
    assert len(got) == len(expected), f"{what}: {len(got)} tensors, eager has {len(expected)}"
    for position, (a, b) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(a, b, **TOL, msg=lambda m, p=position: f"{what}, tensor {p}: {m}")


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
