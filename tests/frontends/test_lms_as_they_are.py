"""``ll.compile`` on a ``transformers`` causal LM as the user has it, with no wrapper: the model's cache classes are
registered with torch's pytree (``frontends/export.py``), so the program returns the model's own output type with
its cache (which the model's next call accepts), and takes a cache among its inputs."""

from __future__ import annotations

import pytest
import torch

import luminal_lab as ll
from tests.helpers.causal_lms import CAUSAL_LMS, PROMPT, cache_tensors, gpt2, greedy_through_programs, llama, prompt

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


def test_a_cache_passed_by_keyword_is_an_input() -> None:
    """Llama's ``forward(input_ids, attention_mask, ..., cache=...)``: the cache comes by keyword, as the program is
    then called; its result and the cache it returns as eager's."""
    model, ids = llama(), prompt()
    with torch.no_grad():
        cache = model(ids).past_key_values
        comp = ll.compile(model, (NEXT,), example_kwargs={"cache": cache})
        other = model(prompt(seed=3)).past_key_values
        got = comp(NEXT, cache=other)
        expected = model(NEXT, cache=model(prompt(seed=3)).past_key_values)
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(cache_tensors(got.past_key_values), cache_tensors(expected.past_key_values), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    with pytest.raises(ll.LuminalError, match="example_kwargs"):
        ll.compile(lambda x: x + 1, (NEXT,), example_kwargs={"y": NEXT})


def test_greedy_generation_through_programs_matches_eager() -> None:
    """A prefill program and one decode program whose cache length is symbolic: 16 tokens as ``generate``'s."""
    model = llama()
    with torch.no_grad():
        eager = model.generate(prompt(), max_new_tokens=16, do_sample=False)[0, PROMPT:].tolist()
    tokens, (_, step) = greedy_through_programs(model, prompt(), 16)
    assert tokens == eager
    assert "symbolic" in step.hlir.summary()
