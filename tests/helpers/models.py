"""Small, deterministic PyTorch models for the frontend tests and the benchmarks.

Importable with torch alone. Each model seeds its own initialisation (the global RNG is
left as it was), and each ``*_inputs`` helper returns a tuple of seeded example inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Two linear layers with a GELU between them."""

    def __init__(self, d_in: int = 32, d_hidden: int = 64, d_out: int = 16, *, seed: int = 0):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Shifted(torch.nn.Module):
    """A linear layer, a buffer it reads (``shift``) and one it counts its calls in, in place (``calls``)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.linear = torch.nn.Linear(8, 4)
        self.register_buffer("shift", torch.arange(4.0) + seed)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1.0)
        return self.linear(x).relu() + self.shift * self.calls


class SelfAttentionBlock(nn.Module):
    """Multi-head self-attention (softmax over scaled scores), then residual and LayerNorm."""

    def __init__(self, d_model: int = 32, n_heads: int = 4, *, seed: int = 0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        self.n_heads = n_heads
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.q = nn.Linear(d_model, d_model)
            self.k = nn.Linear(d_model, d_model)
            self.v = nn.Linear(d_model, d_model)
            self.o = nn.Linear(d_model, d_model)
            self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        head = d // self.n_heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.n_heads, head).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(head)
        attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        return self.norm(x + self.o(attended))


class RMSNorm(nn.Module):
    """``x * rsqrt(mean(x^2) + eps) * weight``, written with plain torch ops."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """A Llama decoder block: RMSNorm, rotary causal attention, RMSNorm, SiLU-gated MLP, residuals.

    The causal mask is a ``masked_fill`` with ``-inf`` from a registered mask buffer, or,
    with ``sdpa=True``, ``F.scaled_dot_product_attention(is_causal=True)``. The rotary
    tables are non-persistent buffers for up to ``seq_len`` positions.
    """

    def __init__(self, d_model: int = 64, n_heads: int = 4, d_ff: int = 128, seq_len: int = 16, *,
                 sdpa: bool = False, seed: int = 0):
        super().__init__()
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(f"d_model {d_model} must split into {n_heads} heads of even size")
        self.n_heads = n_heads
        self.sdpa = sdpa
        head = d_model // n_heads
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.attn_norm = RMSNorm(d_model)
            self.q = nn.Linear(d_model, d_model, bias=False)
            self.k = nn.Linear(d_model, d_model, bias=False)
            self.v = nn.Linear(d_model, d_model, bias=False)
            self.o = nn.Linear(d_model, d_model, bias=False)
            self.mlp_norm = RMSNorm(d_model)
            self.gate = nn.Linear(d_model, d_ff, bias=False)
            self.up = nn.Linear(d_model, d_ff, bias=False)
            self.down = nn.Linear(d_ff, d_model, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head, 2, dtype=torch.float32) / head))
        angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.register_buffer("causal", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1), persistent=False)

    def rotary(self, x: torch.Tensor) -> torch.Tensor:
        s = x.shape[-2]
        return x * self.cos[:s] + rotate_half(x) * self.sin[:s]

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        head = d // self.n_heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.n_heads, head).transpose(1, 2)

        q, k, v = self.rotary(heads(self.q(x))), self.rotary(heads(self.k(x))), heads(self.v(x))
        if self.sdpa:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head)
            scores = scores.masked_fill(self.causal[:s, :s], float("-inf"))
            attended = scores.softmax(-1) @ v
        return self.o(attended.transpose(1, 2).reshape(b, s, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attn_norm(x))
        normed = self.mlp_norm(h)
        return h + self.down(F.silu(self.gate(normed)) * self.up(normed))


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def mlp_inputs(batch: int = 4, d_in: int = 32, *, seed: int = 0) -> tuple[torch.Tensor]:
    """Example inputs of ``MLP``: ``(x,)`` with ``x`` of shape ``[batch, d_in]``."""
    return (_randn(batch, d_in, seed=seed),)


def attention_inputs(batch: int = 2, seq: int = 8, d_model: int = 32, *, seed: int = 0) -> tuple[torch.Tensor]:
    """Example inputs of ``SelfAttentionBlock``: ``(x,)`` of shape ``[batch, seq, d_model]``."""
    return (_randn(batch, seq, d_model, seed=seed),)


def llama_inputs(batch: int = 2, seq: int = 16, d_model: int = 64, *, seed: int = 0) -> tuple[torch.Tensor]:
    """Example inputs of ``LlamaBlock``: ``(x,)`` of shape ``[batch, seq, d_model]``."""
    return (_randn(batch, seq, d_model, seed=seed),)
