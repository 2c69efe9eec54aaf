"""The row-fusion patterns (softmax, log_softmax, rmsnorm, layernorm, the attention row with an additive mask and with
a ``where`` mask) as graphs, the ops of each one's fused region, and inputs for them (causal masks included: ``-inf``
to add, or bool to select)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch

import luminal_lab as ll
from luminal_lab.compiler.compiled import Compiled
from luminal_lab.llir.llir import LLIR


def attention_row(scores, w, b, mask):
    """Scores, scaled and masked, then their softmax: the weights of attention rows."""
    return (scores * (1 / math.sqrt(scores.shape[-1].value)) + mask).softmax(-1)


def masked_attention_row(scores, w, b, mask):
    """Scores, scaled, set to ``-inf`` where the bool mask holds (``masked_fill``), then their softmax."""
    return ll.where(mask, float("-inf"), scores * (1 / math.sqrt(scores.shape[-1].value))).softmax(-1)


PATTERNS = {
    "softmax": lambda x, w, b, mask: x.softmax(-1),
    "log_softmax": lambda x, w, b, mask: x.log_softmax(-1),
    "rmsnorm": lambda x, w, b, mask: x.rms_norm(w),
    "layernorm": lambda x, w, b, mask: x.layer_norm(1, w, b),
    "attention": attention_row,
    "masked_attention": masked_attention_row,
}
# the ops of each pattern's one region, in kernel order (exp is exp2 of x * log2(e); division is a reciprocal)
REGION_OPS = {
    "softmax": ["MaxReduce", "Mul", "Add", "Mul", "Exp2", "SumReduce", "Recip", "Mul"],
    "log_softmax": ["MaxReduce", "Mul", "Add", "Mul", "Exp2", "SumReduce", "Log2", "Mul", "Mul", "Add"],
    "rmsnorm": ["Mul", "SumReduce", "Mul", "Add", "Sqrt", "Recip", "Mul", "Mul"],
    "layernorm": ["SumReduce", "Mul", "Mul", "Add", "Mul", "SumReduce", "Mul", "Add", "Sqrt", "Recip", "Mul", "Mul",
                  "Add"],
    "attention": ["Mul", "Add", "MaxReduce", "Mul", "Add", "Mul", "Exp2", "SumReduce", "Recip", "Mul"],
    "masked_attention": ["Mul", "Select", "MaxReduce", "Mul", "Add", "Mul", "Exp2", "SumReduce", "Recip", "Mul"],
}


def build(pattern: str, rows: int = 6, length: int = 10, dtype=ll.f32) -> ll.Graph:
    g = ll.Graph()
    x = g.tensor((rows, length), name="x", dtype=dtype)
    w = g.tensor((length,), name="w", dtype=dtype)
    b = g.tensor((length,), name="b", dtype=dtype)
    mask = g.tensor((rows, length), name="mask", dtype=ll.bool if pattern == "masked_attention" else dtype)
    PATTERNS[pattern](x, w, b, mask).output("y")
    return g


def fused(g: ll.Graph) -> tuple[Compiled, LLIR]:
    """``g`` compiled with the most-fused genome, and its LLIR."""
    comp = ll.compile(g)
    comp.genome = comp.choice_space().fused_genome()
    return comp, comp.llir()


@cache
def fused_pattern(pattern: str, rows: int = 6, length: int = 10, dtype=ll.f32) -> tuple[Compiled, LLIR]:
    """``build(pattern, ...)`` through ``fused``, once per process and its e-graph closed (the tests that share it
    only run it and read its LLIR; its genome stays set)."""
    comp, llir = fused(build(pattern, rows, length, dtype))
    comp.egraph.close()
    return comp, llir


def causal_mask(rows: int, length: int) -> np.ndarray:
    return np.triu(np.full((rows, length), -np.inf, np.float32), 1)


def causal_bool_mask(rows: int, length: int) -> torch.Tensor:
    """True where a position is masked (after its row's)."""
    return torch.from_numpy(np.triu(np.ones((rows, length), bool), 1))


def inputs(pattern: str, rows: int, length: int, dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    values = {"x": torch.randn(rows, length, generator=generator), "w": torch.randn(length, generator=generator),
              "b": torch.randn(length, generator=generator), "mask": torch.from_numpy(causal_mask(rows, length))}
    values = {name: value.to(dtype) for name, value in values.items()}
    if pattern == "masked_attention":
        values["mask"] = causal_bool_mask(rows, length)
    return values
