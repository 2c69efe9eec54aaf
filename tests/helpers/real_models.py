"""Real model families at small sizes, with seeded random weights and no downloads, for the frontend model tests.

Each builder returns ``(model, inputs)``: the model in eval mode, its weights drawn under its own seed (the
global RNG is left as it was), and a tuple of seeded example inputs. The ``transformers`` models are built from
configs (eager attention, no cache) and wrapped to return their first output, a tensor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

VOCAB = 96
SEQUENCE = 8

Built = tuple[nn.Module, tuple[torch.Tensor, ...]]


def _seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build().eval()


def _token_ids(batch: int = 2, seed: int = 1) -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, VOCAB, (batch, SEQUENCE), generator=torch.Generator().manual_seed(seed)),)


def _activations(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class FirstOutput(nn.Module):
    """A ``transformers`` model returning only its first output (logits or the last hidden state)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids)[0]


def llama_causal_lm() -> Built:
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                      attn_implementation="eager", use_cache=False)
    return _seeded(lambda: FirstOutput(transformers.LlamaForCausalLM(config)), 0), _token_ids()


def gpt2_model() -> Built:
    import transformers

    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=32,
                                     bos_token_id=0, eos_token_id=0, attn_implementation="eager", use_cache=False)
    return _seeded(lambda: FirstOutput(transformers.GPT2Model(config)), 0), _token_ids()


def bert_model() -> Built:
    import transformers

    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=4, max_position_embeddings=32, attn_implementation="eager",
                                     use_cache=False)
    return _seeded(lambda: FirstOutput(transformers.BertModel(config, add_pooling_layer=False)), 0), _token_ids()


def encoder_layer() -> Built:
    """``nn.TransformerEncoderLayer`` (batch first), whose fast path is ``aten._transformer_encoder_layer_fwd``."""
    build = functools.partial(nn.TransformerEncoderLayer, 32, 4, 64, dropout=0.0, batch_first=True)
    return _seeded(build, 0), (_activations(2, SEQUENCE, 32),)


def decoder_layer() -> Built:
    """``nn.TransformerDecoderLayer`` (batch first, norm first, GELU) on a target and a shorter memory."""
    build = functools.partial(nn.TransformerDecoderLayer, 32, 4, 64, dropout=0.0, activation="gelu",
                              batch_first=True, norm_first=True)
    return _seeded(build, 0), (_activations(2, SEQUENCE, 32), _activations(2, 6, 32, seed=2))


class SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` on ``(x, x, x)``, returning the output and the head-averaged weights."""

    def __init__(self, d_model: int = 32, n_heads: int = 4):
        super().__init__()
        self.attention = nn.MultiheadAttention(d_model, n_heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.attention(x, x, x)


def multihead_attention() -> Built:
    """Its fast path is ``aten._native_multi_head_attention``."""
    return _seeded(SelfAttention, 0), (_activations(2, SEQUENCE, 32),)


def small_cnn() -> Built:
    """Conv2d, BatchNorm2d (eval, non-trivial running statistics), ReLU, MaxPool2d, a strided grouped Conv2d,
    AvgPool2d, AdaptiveAvgPool2d(1) and a Linear head."""

    def build() -> nn.Module:
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.AvgPool2d(2, ceil_mode=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
        for norm in (model[1], model[5]):
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 2.0)
            norm.weight.data.uniform_(0.5, 1.5)
            norm.bias.data.uniform_(-0.5, 0.5)
        return model

    return _seeded(build, 0), (_activations(2, 3, 16, 16),)


def conv1d_cnn() -> Built:
    """Conv1d, BatchNorm1d (eval, non-trivial running statistics), ReLU, AvgPool1d (stride 1) and a Linear head over
    the flattened channels and positions, so the head fixes the input's length."""

    def build() -> nn.Module:
        model = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.BatchNorm1d(8), nn.ReLU(), nn.AvgPool1d(2, stride=1),
                              nn.Flatten(), nn.Linear(8 * (SEQUENCE - 1), 5))
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
        return model

    return _seeded(build, 0), (_activations(2, 3, SEQUENCE),)


MODELS: dict[str, Callable[[], Built]] = {
    "llama": llama_causal_lm,
    "gpt2": gpt2_model,
    "bert": bert_model,
    "encoder_layer": encoder_layer,
    "decoder_layer": decoder_layer,
    "multihead_attention": multihead_attention,
    "cnn": small_cnn,
    "conv1d_cnn": conv1d_cnn,
}
