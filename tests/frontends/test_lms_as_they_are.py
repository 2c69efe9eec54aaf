"""``ll.compile`` on a ``transformers`` causal LM as the user has it, with no wrapper: the model's cache classes are
registered with torch's pytree (``frontends/export.py``), so the program returns the model's own output type with
its cache (which the model's next call accepts), and takes a cache among its inputs."""

from __future__ import annotations

import pytest
import torch

import luminal_lab as ll
from tests.helpers.causal_lms import CAUSAL_LMS, PROMPT, cache_tensors, gpt2, prompt

NEXT = prompt(length=1, seed=2)


@pytest.mark.parametrize("name", CAUSAL_LMS)
def test_a_causal_lm_compiles_as_it_is_and_returns_its_output_and_cache(name: str) -> None:
    model, ids = CAUSAL_LMS[name](), prompt()
    comp = ll.compile(model, (ids,))
    with torch.no_grad():
        got, expected = comp(ids), model(ids)
        assert type(got) is type(expected) and type(got.past_key_values) is type(expected.past_key_values)
        torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)
        for ours, theirs in zip(cache_tensors(got.past_key_values), cache_tensors(expected.past_key_values),
                                strict=True):
            torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
        # the cache it returned is one the model's next call takes
        torch.testing.assert_close(model(NEXT, cache=got.past_key_values).logits,
                                   model(NEXT, cache=expected.past_key_values).logits, atol=1e-5, rtol=1e-5)


def test_a_cache_passed_in_is_an_input() -> None:
    """GPT-2's ``forward(input_ids, cache)``: a decode step compiled on a cache, called with another of its shapes."""
    model, ids = gpt2(), prompt()
    with torch.no_grad():
        comp = ll.compile(model, (NEXT, model(ids).past_key_values))
        got = comp(NEXT, model(prompt(seed=3)).past_key_values)
        expected = model(NEXT, cache=model(prompt(seed=3)).past_key_values)
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)
    assert got.past_key_values.get_seq_length() == PROMPT + 1
    for ours, theirs in zip(cache_tensors(got.past_key_values), cache_tensors(expected.past_key_values), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
