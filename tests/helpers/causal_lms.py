"""``transformers`` causal language models as a new user builds them: tiny configs, seeded random weights, no
downloads, and transformers' defaults otherwise (``use_cache=True``, the default attention implementation, sdpa),
for the KV-cache and generation tests.

Each builder returns the model in eval mode, its weights drawn under its own seed (the global RNG is left as it
was). ``prompt`` gives seeded token ids; ``cache_tensors`` flattens a cache to its keys and values, layer by layer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

VOCAB = 128
PROMPT = 6
# token ids inside the vocabulary (a config's defaults, e.g. GPT-2's 50256, lie outside it); no end-of-sequence
# token, so that generation runs for as many tokens as asked
SPECIAL = {"bos_token_id": 1, "eos_token_id": None, "pad_token_id": 0}


def _seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build().eval()


def _built(model_class: str, config_class: str, **config) -> nn.Module:
    import transformers

    made = getattr(transformers, config_class)(vocab_size=VOCAB, **SPECIAL, **config)
    return _seeded(lambda: getattr(transformers, model_class)(made), 0)


def llama() -> nn.Module:
    return _built("LlamaForCausalLM", "LlamaConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def qwen2() -> nn.Module:
    return _built("Qwen2ForCausalLM", "Qwen2Config", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def mistral(sliding_window: int | None = 4096) -> nn.Module:
    return _built("MistralForCausalLM", "MistralConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  sliding_window=sliding_window)


def gemma() -> nn.Module:
    return _built("GemmaForCausalLM", "GemmaConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=1, head_dim=8, max_position_embeddings=64)


def phi() -> nn.Module:
    return _built("PhiForCausalLM", "PhiConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=64)


def gpt2() -> nn.Module:
    return _built("GPT2LMHeadModel", "GPT2Config", n_embd=32, n_layer=2, n_head=4, n_positions=64)


def gpt_neox() -> nn.Module:
    return _built("GPTNeoXForCausalLM", "GPTNeoXConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=64)


# mixtures of experts: four experts, two per token (transformers' grouped_mm experts, its default)
_EXPERTS = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 64, "num_experts_per_tok": 2}


def mixtral() -> nn.Module:
    return _built("MixtralForCausalLM", "MixtralConfig", intermediate_size=64, num_local_experts=4, **_EXPERTS)


def qwen2_moe() -> nn.Module:
    return _built("Qwen2MoeForCausalLM", "Qwen2MoeConfig", intermediate_size=64, moe_intermediate_size=16,
                  shared_expert_intermediate_size=32, num_experts=4, **_EXPERTS)


def qwen3_moe() -> nn.Module:
    return _built("Qwen3MoeForCausalLM", "Qwen3MoeConfig", intermediate_size=64, moe_intermediate_size=16,
                  num_experts=4, head_dim=8, **_EXPERTS)


MIXTURES: dict[str, Callable[[], nn.Module]] = {"mixtral": mixtral, "qwen2_moe": qwen2_moe, "qwen3_moe": qwen3_moe}

CAUSAL_LMS: dict[str, Callable[[], nn.Module]] = {
    "llama": llama,
    "qwen2": qwen2,
    "mistral": mistral,
    "gemma": gemma,
    "phi": phi,
    "gpt2": gpt2,
    "gpt_neox": gpt_neox,
}


def prompt(batch: int = 1, length: int = PROMPT, seed: int = 1) -> torch.Tensor:
    """Seeded token ids, clear of the special ids."""
    return torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def cache_tensors(cache) -> list[torch.Tensor]:
    """The keys and values a ``transformers`` cache holds, layer by layer."""
    return [tensor for layer in cache.layers for tensor in (layer.keys, layer.values)]


class CachedStep(nn.Module):
    """One forward of a causal LM on tensors only, for ``ll.compile``: the token ids and what its cache holds (keys
    and values, layer by layer; none for a prefill) in, the logits and what the cache holds after the step out. The
    cache is transformers' ``DynamicCache``, filled from the tensors given."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, *cached: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for layer, (keys, values) in enumerate(zip(cached[::2], cached[1::2], strict=True)):
            cache.update(keys, values, layer)
        out = self.model(input_ids, cache=cache)
        return (out.logits, *cache_tensors(out.past_key_values))


def greedy_through_programs(model: nn.Module, ids: torch.Tensor, new_tokens: int) -> tuple[list[int], list]:
    """Greedy generation with ``ll.compile``'s programs as a user writes it: one for the prompt, and one decode step
    compiled on the cache by keyword (``cache=``) with its length symbolic, called for every token after the first.
    Returns the new tokens and the two programs."""
    import luminal_lab as ll

    with torch.no_grad():
        prefill = ll.compile(model, (ids,))
        out = prefill(ids)
        token = out.logits[:, -1:].argmax(-1)
        lengths = torch.export.ShapesCollection()
        for tensor in cache_tensors(out.past_key_values):
            lengths[tensor] = {2: torch.export.Dim.AUTO}
        step = ll.compile(model, (token,), example_kwargs={"cache": out.past_key_values},
                          dynamic_shapes=lengths.dynamic_shapes(model, (token,), {"cache": out.past_key_values}))
        tokens = [int(token)]
        for _ in range(new_tokens - 1):
            out = step(token, cache=out.past_key_values)
            token = out.logits[:, -1:].argmax(-1)
            tokens.append(int(token))
    return tokens, [prefill, step]
