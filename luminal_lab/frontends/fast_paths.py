"""torch's fused inference fast paths, spelled out in plain torch ops for the export to decompose.

Under ``torch.no_grad()`` in eval mode ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``
(and so ``nn.TransformerDecoderLayer``'s self-attention) call fused kernels,
``aten._native_multi_head_attention`` and ``aten._transformer_encoder_layer_fwd``, which have no
decomposition of their own. ``torch.export`` traces past them, but the graphs dynamo captures keep
them; ``DECOMPOSITIONS`` gives the export the same computation as the modules' plain path.

Masks follow the fused kernels: any nonzero (or true) entry hides a key, and mask type 1 is a
``[batch, keys]`` key padding mask.

``F.scaled_dot_product_attention`` on the CPU runs ``aten._scaled_dot_product_flash_attention_for_cpu``,
whose output is laid out as its query is; the decomposition here keeps that layout (torch's own lays it
out as ``nn.MultiheadAttention``'s query only). On a GPU, dynamo's graph holds the CUDA kernel torch picks
instead: ``_scaled_dot_product_efficient_attention`` (f32; its output laid out ``[N, L, H, E]``),
``_scaled_dot_product_flash_attention`` or ``_scaled_dot_product_cudnn_attention`` (half precision; laid out as the
query). Each is decomposed to the same math path with its output in the kernel's layout; their other outputs (the
log-sum-exp, random state, sequence bounds) serve their backward kernels alone, which the decomposition's own
gradient replaces, and are computed (the log-sum-exp) or given their shapes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def native_multi_head_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, embed_dim: int,
                                num_head: int, qkv_weight: torch.Tensor, qkv_bias: torch.Tensor,
                                proj_weight: torch.Tensor, proj_bias: torch.Tensor, mask: torch.Tensor | None = None,
                                need_weights: bool = True, average_attn_weights: bool = True,
                                mask_type: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``aten._native_multi_head_attention``: attention output and, when ``need_weights``, the attention weights
    (averaged over heads when ``average_attn_weights``)."""
    batch, length, _ = query.shape
    head = embed_dim // num_head

    def heads(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.linear(x, weight, bias).view(batch, -1, num_head, head).transpose(1, 2)

    (wq, wk, wv), (bq, bk, bv) = qkv_weight.chunk(3), qkv_bias.chunk(3)
    q, k, v = heads(query, wq, bq) / math.sqrt(head), heads(key, wk, bk), heads(value, wv, bv)
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        hidden = mask.view(batch, 1, 1, -1) if mask_type == 1 else mask
        scores = scores.masked_fill(hidden.to(torch.bool), -math.inf)
    weights = scores.softmax(-1)
    attended = (weights @ v).transpose(1, 2).reshape(batch, length, embed_dim)
    out = F.linear(attended, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, weights.mean(1) if average_attn_weights else weights


def transformer_encoder_layer_fwd(src: torch.Tensor, embed_dim: int, num_heads: int, qkv_weight: torch.Tensor,
                                  qkv_bias: torch.Tensor, proj_weight: torch.Tensor, proj_bias: torch.Tensor,
                                  use_gelu: bool, norm_first: bool, eps: float, norm_weight_1: torch.Tensor,
                                  norm_bias_1: torch.Tensor, norm_weight_2: torch.Tensor, norm_bias_2: torch.Tensor,
                                  ffn_weight_1: torch.Tensor, ffn_bias_1: torch.Tensor, ffn_weight_2: torch.Tensor,
                                  ffn_bias_2: torch.Tensor, mask: torch.Tensor | None = None,
                                  mask_type: int | None = None) -> torch.Tensor:
    """``aten._transformer_encoder_layer_fwd``: self-attention and a ReLU (or GELU) feed-forward block, each with
    a residual and a layer norm (before the block when ``norm_first``, else after the residual)."""

    def norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    def attention(x: torch.Tensor) -> torch.Tensor:
        return native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                           proj_bias, mask, False, True, mask_type)[0]

    def feed_forward(x: torch.Tensor) -> torch.Tensor:
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(hidden) if use_gelu else F.relu(hidden), ffn_weight_2, ffn_bias_2)

    if norm_first:
        x = src + attention(norm(src, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(src + attention(src), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def scaled_dot_product_flash_attention_for_cpu(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                               dropout_p: float = 0.0, is_causal: bool = False, *,
                                               attn_mask: torch.Tensor | None = None,
                                               scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten._scaled_dot_product_flash_attention_for_cpu`` as torch's math path, its output laid out as the kernel
    lays it out: as the query (``empty_like``).

    Export leaves out a ``.contiguous()`` that found the kernel's output contiguous already, so a later ``view`` needs
    that layout. torch's decomposition lays the output out as ``[L, N, H, E]``, which is the query's layout in
    ``nn.MultiheadAttention``; with transformers' ``[N, L, H, E]`` queries and a batch of more than one, GPT-2's
    ``view(-1, hidden)`` of the heads merged back then fails. The second output, which ``scaled_dot_product_attention``
    drops, is the attention weights, as in torch's decomposition, not the kernel's log-sum-exp.
    """
    _no_dropout(dropout_p)
    output, weights = _attention(_scores(query, key, attn_mask, is_causal, scale), value, attn_mask is not None)
    return _laid_out_as(output, query), weights


def scaled_dot_product_efficient_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                           attn_bias: torch.Tensor | None, compute_log_sumexp: bool,
                                           dropout_p: float = 0.0, is_causal: bool = False, *,
                                           scale: float | None = None) -> tuple[torch.Tensor, ...]:
    """``aten._scaled_dot_product_efficient_attention`` (CUDA): the output laid out ``[N, L, H, E]``, the log-sum-exp
    of each row's scores (its rows padded to a multiple of 32; none unless ``compute_log_sumexp``) and the random
    state (zeros: no dropout)."""
    _no_dropout(dropout_p)
    scores = _scores(query, key, attn_bias, is_causal, scale)
    output, _ = _attention(scores, value, attn_bias is not None)
    batch, heads, length, _ = query.shape
    if compute_log_sumexp:
        lse = F.pad(_log_sum_exp(scores), (0, -length % 32))
    else:
        lse = query.new_zeros((batch, heads, 0), dtype=torch.float32)
    seed = torch.zeros((), dtype=torch.int64, device=query.device)
    return output.transpose(1, 2).contiguous().transpose(1, 2), lse, seed, seed.clone()


def scaled_dot_product_flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                       dropout_p: float = 0.0, is_causal: bool = False,
                                       return_debug_mask: bool = False, *, scale: float | None = None) -> tuple:
    """``aten._scaled_dot_product_flash_attention`` (CUDA): the output laid out as the query, the log-sum-exp, the
    sequence lengths, the random state (zeros) and an empty debug mask."""
    _no_dropout(dropout_p)
    torch._check(not return_debug_mask, lambda: "the flash attention's debug mask is not computed")
    scores = _scores(query, key, None, is_causal, scale)
    output, _ = _attention(scores, value, False)
    seed = torch.zeros((), dtype=torch.int64, device=query.device)
    return (_laid_out_as(output, query), _log_sum_exp(scores), None, None,
            query.size(2), key.size(2), seed, seed.clone(), query.new_zeros(0))


def scaled_dot_product_cudnn_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                       attn_bias: torch.Tensor | None, compute_log_sumexp: bool,
                                       dropout_p: float = 0.0, is_causal: bool = False,
                                       return_debug_mask: bool = False, *, scale: float | None = None) -> tuple:
    """``aten._scaled_dot_product_cudnn_attention`` (CUDA): the output laid out as the query, the log-sum-exp as
    ``[N, H, L, 1]``, the sequence lengths and the random state (zeros)."""
    _no_dropout(dropout_p)
    torch._check(not return_debug_mask, lambda: "the cuDNN attention's debug mask is not computed")
    scores = _scores(query, key, attn_bias, is_causal, scale)
    output, _ = _attention(scores, value, attn_bias is not None)
    lse = _log_sum_exp(scores).unsqueeze(-1)
    seed = torch.zeros((), dtype=torch.int64, device=query.device)
    return _laid_out_as(output, query), lse, None, None, query.size(2), key.size(2), seed, seed.clone(), None


DECOMPOSITIONS = {
    aten._scaled_dot_product_flash_attention_for_cpu.default: scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_efficient_attention.default: scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_flash_attention.default: scaled_dot_product_flash_attention,
    aten._scaled_dot_product_cudnn_attention.default: scaled_dot_product_cudnn_attention,
    aten._native_multi_head_attention.default: native_multi_head_attention,
    aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer_fwd,
}


def _no_dropout(dropout_p: float) -> None:
    torch._check(dropout_p == 0.0, lambda: f"dropout probability must be zero, got {dropout_p}")


def _laid_out_as(output: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """``output`` copied into the query's layout (its axes in the query's order of strides, outermost first)."""
    order = sorted(range(query.ndim), key=lambda axis: -query.stride(axis))  # a stable sort
    back = [order.index(axis) for axis in range(query.ndim)]
    return output.permute(order).contiguous().permute(back)


def _scores(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, is_causal: bool,
            scale: float | None) -> torch.Tensor:
    """The scores ``[N, H, L, S]`` as the fused kernel computes them: ``q @ kᵀ`` scaled once (not ``q`` and ``k``
    each by the scale's root: no scaled copy of the whole cache per step), masked (``is_causal``: the lower triangle;
    a bool mask keeps its true entries, a float one is added). With grouped-query attention the query heads that
    share a key/value head are stacked along the rows and multiplied by that head as it is, not by a copy of it per
    query head."""
    batch, heads, length, size = query.shape
    kv_heads, keys = key.size(-3), key.size(-2)
    stacked = query.reshape(batch, kv_heads, heads // kv_heads * length, size)
    scores = (stacked @ key.transpose(-2, -1) * (1 / math.sqrt(size) if scale is None else scale))
    scores = scores.reshape(batch, heads, length, keys)
    if is_causal:  # torch's math path: a bias, -inf above the diagonal, added (one [L, S] select, not one per score)
        above = torch.arange(keys, device=query.device) > torch.arange(length, device=query.device).unsqueeze(-1)
        bias = torch.zeros(length, keys, dtype=scores.dtype, device=query.device).masked_fill(above, -math.inf)
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf) if mask.dtype == torch.bool else scores + mask
    return scores


def _log_sum_exp(scores: torch.Tensor) -> torch.Tensor:
    """Each row's log-sum-exp of its scores, in f32, as the fused kernels keep it for their backward."""
    return torch.logsumexp(scores.float(), -1)


def _attention(scores: torch.Tensor, value: torch.Tensor, masked: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's math path from the scores: ``_safe_softmax`` (0 over a fully masked row) where a mask is given, else
    softmax (the causal triangle hides no row's first key), and ``@ v`` (the query heads that share a value head stacked
    along the rows, as in ``_scores``); the output and the attention weights."""
    batch, heads, length, keys = scores.shape
    kv_heads = value.size(-3)
    weights = aten._safe_softmax.default(scores, -1) if masked else scores.softmax(-1)
    output = weights.reshape(batch, kv_heads, heads // kv_heads * length, keys) @ value
    return output.reshape(batch, heads, length, value.size(-1)), weights
