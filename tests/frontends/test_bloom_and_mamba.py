"""Two architectures that once failed whole: BLOOM (its ALiBi attention; a region reading rows of another length was
built and refused at run time) and Mamba (the selective scan of transformers' reference path, whose steps read the
first row of a value a region computed, sliced). Both from small configs with the library's defaults, through
``torch.compile`` with no wrapper, as eager: BLOOM's forward and greedy generation, Mamba's forward."""

from __future__ import annotations

import pytest
import torch

import luminal_lab as ll
from tests.helpers.causal_lms import _built, prompt
from tests.helpers.generation import greedy_matches_eager

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
STRICT = {"strict": True}  # a graph that could not compile raises, rather than running in torch


def bloom() -> torch.nn.Module:
    return _built("BloomForCausalLM", "BloomConfig", hidden_size=64, n_layer=2, n_head=8)


def mamba() -> torch.nn.Module:
    return _built("MambaForCausalLM", "MambaConfig", hidden_size=32, state_size=8, num_hidden_layers=2)


@pytest.mark.parametrize("build", [bloom, mamba])
def test_the_forward_matches_eager(build) -> None:
    model, ids = build(), prompt(batch=2, length=7)
    with torch.no_grad():
        expected = model(ids).logits
        got = torch.compile(model, backend="luminal_lab", options=STRICT)(ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert ll.programs(model)


def test_bloom_generates_greedily_as_eager() -> None:
    greedy_matches_eager(bloom(), prompt(), 16)
