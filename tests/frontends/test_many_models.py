"""Ten models, from torch.nn and from transformers (the causal LMs with their defaults: the cache on, sdpa
attention), compiled one after another in one process through ``torch.compile(backend="luminal_lab")``, as a user
would in a notebook, each checked against eager PyTorch and run by programs of its own.

torch.compile of a module compiles one frame around every module's call, so each model after the first is a
recompilation of that frame with new shapes: dynamo marks sizes dynamic, and the backend meets concrete, dynamic and
specialised-dynamic graphs in turn."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

import luminal_lab as ll
from tests.helpers import causal_lms, real_models
from tests.helpers.models import MLP, LlamaBlock, llama_inputs, mlp_inputs

TOL = {"atol": 1e-4, "rtol": 1e-4}


def _language_model(build: Callable[[], nn.Module]) -> Callable[[], real_models.Built]:
    return lambda: (build(), (causal_lms.prompt(batch=2),))


def _compared(output) -> list[torch.Tensor]:
    """The tensors of a model's output to compare: a language model's logits, else every tensor it returns."""
    if hasattr(output, "logits"):
        return [output.logits]
    return [output] if isinstance(output, torch.Tensor) else [t for t in output if isinstance(t, torch.Tensor)]


MODELS: dict[str, Callable[[], real_models.Built]] = {
    "mlp": lambda: (MLP().eval(), mlp_inputs()),
    "decoder_layer": real_models.decoder_layer,
    "conv1d_cnn": real_models.conv1d_cnn,
    "gpt2": _language_model(causal_lms.gpt2),
    "cnn": real_models.small_cnn,
    "llama": _language_model(causal_lms.llama),
    "encoder_layer": real_models.encoder_layer,
    "bert": real_models.bert_model,
    "llama_block": lambda: (LlamaBlock(64, 4, 128, 16).eval(), llama_inputs(2, 16, 64)),
    "qwen2": _language_model(causal_lms.qwen2),
}


def test_ten_models_one_after_another_through_torch_compile() -> None:
    torch._dynamo.reset()
    before: set[int] = set()  # the ids of the programs of the models before
    try:
        for name, build in MODELS.items():
            model, inputs = build()
            compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0})
            with torch.no_grad():
                got, expected = _compared(compiled(*inputs)), _compared(model(*inputs))
            assert len(got) == len(expected), name
            for position, (a, b) in enumerate(zip(got, expected, strict=True)):
                torch.testing.assert_close(a, b, **TOL, msg=lambda m, n=name, p=position: f"{n}, output {p}: {m}")
            mine = ll.programs(compiled)
            assert not before & {id(comp) for comp in mine}, f"{name} has another model's programs"
            before |= {id(comp) for comp in mine}
    finally:
        torch._dynamo.reset()
