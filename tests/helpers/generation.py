"""Greedy generation through ``torch.compile`` checked against eager: the tokens, every step's logits and the cache
at the end (``greedy_matches_eager``), for the generation tests of causal LMs."""

from __future__ import annotations

import torch
from torch import nn

import luminal_lab as ll
from tests.helpers.causal_lms import cache_tensors

FUSED = {"generations": 0}
TOL = {"atol": 1e-4, "rtol": 1e-4}
# eager's greedy choice must win by this much at every step, or a rounding difference could flip it
MARGIN = 1e-3


def greedy_matches_eager(model: nn.Module, ids: torch.Tensor, new_tokens: int, dynamic: bool | None = None,
                         **options) -> None:
    """Generate greedily, eagerly and then with the forward compiled (``dynamic`` as ``torch.compile`` takes it),
    and compare the tokens, every step's logits and what the cache holds at the end."""
    with torch.no_grad():
        eager = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, return_dict_in_generate=True,
                               output_logits=True, **options)
        top2 = torch.stack(eager.logits).topk(2, dim=-1).values
        margin = (top2[..., 0] - top2[..., 1]).min().item()
        assert margin > MARGIN, f"eager's greedy choice wins by only {margin:.2e}; pick another seed"
        model.forward = torch.compile(model.forward, backend="luminal_lab", options=FUSED, dynamic=dynamic)
        got = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, return_dict_in_generate=True,
                             output_logits=True, **options)
    assert got.sequences.shape == eager.sequences.shape == (ids.shape[0], ids.shape[1] + new_tokens)
    assert got.sequences.tolist() == eager.sequences.tolist()
    for step, (a, b) in enumerate(zip(got.logits, eager.logits, strict=True)):
        torch.testing.assert_close(a, b, **TOL, msg=lambda m, k=step: f"the logits of step {k}: {m}")
    cached, expected = cache_tensors(got.past_key_values), cache_tensors(eager.past_key_values)
    assert len(cached) == len(expected) == 2 * model.config.num_hidden_layers
    for layer, (a, b) in enumerate(zip(cached, expected, strict=True)):
        torch.testing.assert_close(a, b, **TOL, msg=lambda m, k=layer: f"the cache's tensor {k}: {m}")
    assert ll.programs(model.forward)  # luminal_lab ran it, with no fallback
