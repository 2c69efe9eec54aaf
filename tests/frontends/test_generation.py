"""Greedy ``model.generate`` of transformers' causal LMs (their defaults: ``use_cache=True``, sdpa attention) with
``model.forward = torch.compile(model.forward, backend="luminal_lab")``: the same tokens as eager, the same logits at
every step (the forward with the cache on), and the same keys and values in the cache at the end, with the default
``DynamicCache``, a static cache, a sliding window shorter than the sequence, and a batch padded on the left.

A generation makes two programs (the prefill, and one with the cache's length symbolic for every decode step; the first
decode step, a recompile, runs in torch): 17 to 70 s a model for 16 tokens on two cores, most of it compiling."""

from __future__ import annotations

import pytest
import torch

import luminal_lab as ll
from luminal_lab.runtime.cuda import cuda_available, cuda_unavailable_reason
from tests.helpers.causal_lms import CAUSAL_LMS, llama, mistral, prompt
from tests.helpers.generation import greedy_matches_eager


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CAUSAL_LMS))
def test_greedy_generation_matches_eager(name: str, fresh_dynamo: None) -> None:
    model = CAUSAL_LMS[name]()
    greedy_matches_eager(model, prompt(), 16)
    programs = ll.programs(model.forward)
    assert len(programs) == 2  # the prefill, and the decode steps' dynamic program
    # each rolls its layers to one, their caches' keys and values given per copy: depth costs the e-graph nothing
    assert [p.rolling.copies if p.rolling else None for p in programs] == [model.config.num_hidden_layers] * 2


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason=f"needs a CUDA GPU: {cuda_unavailable_reason()}")
def test_greedy_generation_on_the_gpu_matches_eager(fresh_dynamo: None) -> None:
    """On a GPU dynamo's graph holds torch's CUDA attention kernel (efficient attention in f32), decomposed; the
    programs run device-resident, their tokens, logits and cache as eager's."""
    model = llama().cuda()
    greedy_matches_eager(model, prompt().cuda(), 8)
    assert len(ll.programs(model.forward)) == 2


@pytest.mark.slow
def test_greedy_generation_with_dynamic_true(fresh_dynamo: None) -> None:
    """With ``dynamic=True`` every size is symbolic from the first call, the prompt's length too; the floats dynamo
    then passes as 0-d tensors (the norms' epsilon, attention's scale), which the graph reads with ``.item()``, are
    baked into the program. The prefill and the decode steps are then two programs."""
    model = llama()
    greedy_matches_eager(model, prompt(), 16, dynamic=True)
    prefill, decode = ll.programs(model.forward)
    assert "symbolic s" in prefill.hlir.summary() and "symbolic s" in decode.hlir.summary()


@pytest.mark.slow
def test_greedy_generation_with_a_static_cache(fresh_dynamo: None) -> None:
    """The cache's tensors are updated in place (``index_copy_``), as inputs the program writes back to; every
    decode step has the same shapes, so one program serves them all."""
    greedy_matches_eager(llama(), prompt(), 16, cache_implementation="static")


@pytest.mark.slow
def test_greedy_generation_with_a_sliding_window_shorter_than_the_sequence(fresh_dynamo: None) -> None:
    greedy_matches_eager(mistral(sliding_window=4), prompt(), 8)


@pytest.mark.slow
def test_batched_greedy_generation_with_left_padding(fresh_dynamo: None) -> None:
    ids = prompt(batch=2)
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    greedy_matches_eager(llama(), ids.masked_fill(mask == 0, 0), 8, attention_mask=mask)
