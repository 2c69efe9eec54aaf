"""transformers' other caches through ``ll.compile`` with no wrapper: the static cache and the encoder-decoder cache
(registered with torch's pytree by transformers' own exporter helper), as inputs by keyword and as outputs of the
model's own type; and ``generate()`` going on from the cache a compiled program returned."""

from __future__ import annotations

import torch

import luminal_lab as ll
from tests.helpers.causal_lms import PROMPT, cache_tensors, llama, prompt

TOL = {"atol": 1e-5, "rtol": 1e-5}


def _same_caches(got, expected) -> None:
    assert type(got) is type(expected)
    for ours, theirs in zip(cache_tensors(got), cache_tensors(expected), strict=True):
        torch.testing.assert_close(ours, theirs, **TOL)


def test_a_static_cache_by_keyword() -> None:
    from transformers import StaticCache

    model, ids = llama(), prompt()
    fresh = lambda: StaticCache(config=model.config, max_cache_len=16)  # noqa: E731
    with torch.no_grad():
        comp = ll.compile(model, (ids,), example_kwargs={"cache": fresh()})
        got, expected = comp(ids, cache=fresh()), model(ids, cache=fresh())
    torch.testing.assert_close(got.logits, expected.logits, **TOL)
    _same_caches(got.past_key_values, expected.past_key_values)


def test_an_encoder_decoder_and_its_cache() -> None:
    """T5 with its decoder's first token by keyword: the logits and the ``EncoderDecoderCache`` as eager's, and the
    cache one the model's next decoder step takes."""
    import transformers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, decoder_start_token_id=0)).eval()
    ids, start = prompt(), torch.zeros(1, 1, dtype=torch.long)
    with torch.no_grad():
        comp = ll.compile(model, (ids,), example_kwargs={"decoder_input_ids": start})
        got, expected = comp(ids, decoder_input_ids=start), model(ids, decoder_input_ids=start)
        torch.testing.assert_close(got.logits, expected.logits, **TOL)
        assert type(got.past_key_values) is type(expected.past_key_values)
        for ours, theirs in ((got.past_key_values.self_attention_cache, expected.past_key_values.self_attention_cache),
                             (got.past_key_values.cross_attention_cache,
                              expected.past_key_values.cross_attention_cache)):
            _same_caches(ours, theirs)
        step = prompt(length=1, seed=4)
        torch.testing.assert_close(
            model(ids, decoder_input_ids=step, past_key_values=got.past_key_values).logits,
            model(ids, decoder_input_ids=step, past_key_values=expected.past_key_values).logits, **TOL)


def test_generate_goes_on_from_a_compiled_programs_cache() -> None:
    """The prompt through the program; then ``model.generate`` from its cache gives the tokens it gives from eager's."""
    model, ids = llama(), prompt()
    with torch.no_grad():
        got, expected = ll.compile(model, (ids,))(ids), model(ids)
        following = torch.cat([ids, expected.logits[:, -1:].argmax(-1)], dim=1)
        ours = model.generate(following, past_key_values=got.past_key_values, max_new_tokens=8, do_sample=False)
        theirs = model.generate(following, past_key_values=expected.past_key_values, max_new_tokens=8,
                                do_sample=False)
    assert ours.tolist() == theirs.tolist() and ours.shape[1] == PROMPT + 1 + 8
