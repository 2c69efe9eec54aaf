"""The op cases of the tensor API: each high-level op with its PyTorch counterpart, input shapes, dtypes
and value range. ``tests/hlir/test_ops.py`` checks them through the reference runtime; the e-graph, CPU
runtime and CUDA codegen tests run the same cases through their stages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import luminal_lab as ll
from luminal_lab.core.arrays import to_numpy
from luminal_lab.core.dtypes import from_torch

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
NARROW_INTS = (torch.int8, torch.uint8, torch.int16)  # drawn over their whole range, so arithmetic on them wraps
INTS = (torch.int32, torch.int64, *NARROW_INTS)


@dataclass
class Case:
    name: str
    ll_fn: Callable
    torch_fn: Callable
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...] = FLOATS
    low: float = -3.0
    high: float = 3.0
    scale: float = 1.0  # tolerance multiplier for long decompositions

    def __str__(self) -> str:
        return self.name


def same(fn: Callable) -> tuple[Callable, Callable]:
    return fn, fn


CASES = [
    Case("add", *same(lambda a, b: a + b), ((3, 1, 5), (4, 1)), FLOATS + INTS),
    Case("sub", *same(lambda a, b: a - b), ((2, 3, 4), (3, 1)), FLOATS + INTS),
    Case("mul", *same(lambda a, b: a * b), ((4, 1), (1, 5)), FLOATS + INTS),
    Case("div", *same(lambda a, b: a / b), ((3, 4), (4,)), FLOATS, 0.5, 3.0),
    Case("rdiv_scalar", *same(lambda a: 2.5 / a), ((3, 4),), FLOATS, 0.5, 3.0),
    Case("neg", *same(lambda a: -a), ((3, 4),), FLOATS + INTS),
    Case("scalar_ops", *same(lambda a: (a * 3 + 1) - 2 * a), ((3, 4),), FLOATS + INTS),
    Case("exp", *same(lambda a: a.exp()), ((4, 6),)),
    Case("log", *same(lambda a: a.log()), ((4, 6),), FLOATS, 0.05, 20.0),
    Case("sin", *same(lambda a: a.sin()), ((4, 6),)),
    Case("cos", *same(lambda a: a.cos()), ((4, 6),)),
    Case("sqrt", *same(lambda a: a.sqrt()), ((4, 6),), FLOATS, 0.0, 9.0),
    Case("rsqrt", *same(lambda a: a.rsqrt()), ((4, 6),), FLOATS, 0.1, 9.0),
    Case("reciprocal", *same(lambda a: a.reciprocal()), ((4, 6),), FLOATS, 0.2, 4.0),
    Case("abs", *same(lambda a: a.abs()), ((4, 6),), FLOATS + INTS),
    Case("relu", *same(lambda a: a.relu()), ((4, 6),)),
    Case("sigmoid", *same(lambda a: a.sigmoid()), ((4, 6),), FLOATS, -8.0, 8.0),
    Case("tanh", *same(lambda a: a.tanh()), ((4, 6),), FLOATS, -5.0, 5.0),
    Case("silu", lambda a: a.silu(), F.silu, ((4, 6),)),
    Case("gelu_erf", lambda a: a.gelu(), F.gelu, ((4, 6),), FLOATS, -4.0, 4.0, 2.0),
    Case("gelu_tanh", lambda a: a.gelu("tanh"), lambda a: F.gelu(a, approximate="tanh"), ((4, 6),), scale=2.0),
    Case("pow_2", *same(lambda a: a**2), ((4, 6),)),
    Case("pow_3", *same(lambda a: a**3), ((4, 6),), FLOATS + INTS, -2.0, 2.0),
    Case("pow_neg2", *same(lambda a: a**-2), ((4, 6),), FLOATS, 0.5, 2.0),
    Case("pow_half", *same(lambda a: a**0.5), ((4, 6),), FLOATS, 0.0, 4.0),
    Case("pow_frac", *same(lambda a: a**1.7), ((4, 6),), FLOATS, 0.1, 3.0),
    Case("maximum", lambda a, b: ll.maximum(a, b), torch.maximum, ((3, 4), (1, 4)), FLOATS + INTS),
    Case("minimum", lambda a, b: ll.minimum(a, b), torch.minimum, ((3, 4), (3, 1)), FLOATS + INTS),
    Case("clamp", lambda a: a.clamp(-1, 0.5), lambda a: a.clamp(-1, 0.5), ((3, 4),)),
    Case("clamp_int", lambda a: a.clamp(-1, 1), lambda a: a.clamp(-1, 1), ((3, 4),), INTS),
    Case("lt", *same(lambda a, b: a < b), ((3, 4), (4,)), FLOATS + INTS),
    Case("gt", *same(lambda a, b: a > b), ((3, 4), (3, 1)), FLOATS + INTS),
    Case("le", *same(lambda a, b: a <= b), ((3, 4), (4,)), INTS),
    Case("ge", *same(lambda a, b: a >= b), ((3, 4), (4,)), INTS),
    Case("eq", *same(lambda a, b: a.eq(b)), ((3, 4), (4,)), INTS, -2, 2),
    Case("ne", *same(lambda a, b: a.ne(b)), ((3, 4), (4,)), INTS, -2, 2),
    Case("logic", *same(lambda a, b: (a > 0) & ~(b > 0) | (a > b)), ((3, 4), (4,))),
    Case("where", lambda c, a, b: ll.where(c > 0, a, b), lambda c, a, b: torch.where(c > 0, a, b),
         ((3, 1), (3, 4), (4,)), FLOATS + INTS),
    Case("where_inf", lambda a: ll.where(a > 0, a, float("-inf")),
         lambda a: torch.where(a > 0, a, float("-inf")), ((3, 4),)),
    Case("fmod", *same(lambda a, b: a.fmod(b)), ((3, 4), (4,)), (torch.float32, torch.float64), 0.5, 5.0),
    Case("remainder", lambda a: a.remainder(3), lambda a: a.remainder(3), ((3, 4),), INTS, -9, 9),
    Case("remainder_float", lambda a: a.remainder(1.5), lambda a: a.remainder(1.5), ((3, 4),),
         (torch.float32, torch.float64)),
    Case("cast_f32", lambda a: a.cast(ll.f32), lambda a: a.to(torch.float32), ((3, 4),), FLOATS + INTS),
    Case("cast_i32", lambda a: a.cast(ll.i32), lambda a: a.to(torch.int32), ((3, 4),), FLOATS + INTS),
    Case("sum_all", *same(lambda a: a.sum()), ((3, 4, 5),), FLOATS + INTS, scale=2.0),
    Case("sum_axes", lambda a: a.sum((0, 2)), lambda a: a.sum((0, 2)), ((3, 4, 5),), FLOATS + INTS, scale=2.0),
    Case("sum_keepdim", lambda a: a.sum(1, keepdim=True), lambda a: a.sum(1, keepdim=True), ((3, 4, 5),)),
    Case("max", lambda a: a.max(-1), lambda a: a.amax(-1), ((3, 4, 5),), FLOATS + INTS),
    Case("min", lambda a: a.min((0, 1)), lambda a: a.amin((0, 1)), ((3, 4, 5),), FLOATS + INTS),
    Case("mean", lambda a: a.mean(-1), lambda a: a.mean(-1), ((3, 4, 5),)),
    Case("var", lambda a: a.var(1), lambda a: a.var(1), ((3, 4, 5),), scale=2.0),
    Case("var_biased", lambda a: a.var((0, 2), correction=0), lambda a: a.var((0, 2), correction=0),
         ((3, 4, 5),), scale=2.0),
    Case("softmax", lambda a: a.softmax(-1), lambda a: a.softmax(-1), ((3, 4, 7),), scale=2.0),
    Case("softmax_axis0", lambda a: a.softmax(0), lambda a: a.softmax(0), ((3, 4),), scale=2.0),
    Case("log_softmax", lambda a: a.log_softmax(-1), lambda a: a.log_softmax(-1), ((3, 7),), scale=2.0),
    Case("layer_norm", lambda x, w, b: x.layer_norm(1, w, b), lambda x, w, b: F.layer_norm(x, (6,), w, b),
         ((2, 3, 6), (6,), (6,)), scale=4.0),
    Case("rms_norm", lambda x, w: x.rms_norm(w, eps=1e-6), lambda x, w: F.rms_norm(x, (6,), w, eps=1e-6),
         ((2, 3, 6), (6,)), scale=4.0),
    Case("matmul", *same(lambda a, b: a @ b), ((3, 5), (5, 4)), FLOATS + INTS, scale=2.0),
    Case("matmul_batched", *same(lambda a, b: a @ b), ((2, 3, 5), (5, 4)), FLOATS, scale=2.0),
    Case("matmul_broadcast", *same(lambda a, b: a @ b), ((2, 1, 3, 5), (4, 5, 2)), FLOATS, scale=2.0),
    Case("matvec", *same(lambda a, b: a @ b), ((3, 5), (5,)), FLOATS, scale=2.0),
    Case("vecmat", *same(lambda a, b: a @ b), ((5,), (5, 4)), FLOATS, scale=2.0),
    Case("reshape", lambda a: a.reshape(4, -1) * 2, lambda a: a.reshape(4, -1) * 2, ((2, 3, 4),), FLOATS + INTS),
    Case("permute", lambda a: a.permute(2, 0, 1) + 1, lambda a: a.permute(2, 0, 1) + 1, ((2, 3, 4),)),
    Case("transpose_reshape", lambda a: a.transpose(0, 1).reshape(3, 8),
         lambda a: a.transpose(0, 1).reshape(3, 8), ((2, 3, 4),), FLOATS + INTS),
    Case("expand", lambda a: a.expand(3, 2, 4) * 1, lambda a: a.expand(3, 2, 4) * 1, ((2, 1),)),
    Case("unsqueeze_squeeze", lambda a: a.unsqueeze(1).squeeze(1) + a.unsqueeze(0).squeeze(),
         lambda a: a.unsqueeze(1).squeeze(1) + a.unsqueeze(0).squeeze(), ((3, 4),)),
    Case("flatten", lambda a: a.flatten(1), lambda a: a.flatten(1), ((2, 3, 4),), FLOATS + INTS),
    Case("slice", lambda a: a[:, 1:3] + a[:, -2:], lambda a: a[:, 1:3] + a[:, -2:], ((3, 5),), FLOATS + INTS),
    Case("slice_step", lambda a: a[::2, 1::2], lambda a: a[::2, 1::2], ((5, 6),), FLOATS + INTS),
    Case("index_int", lambda a: a[1] * a[-1, None], lambda a: a[1] * a[-1, None], ((3, 4),)),
    Case("pad", lambda a: a.pad([(1, 2), (0, 1)]), lambda a: F.pad(a, (0, 1, 1, 2)), ((3, 4),), FLOATS + INTS),
    Case("pad_value", lambda a: a.pad([(0, 0), (2, 1)], value=-1.5), lambda a: F.pad(a, (2, 1), value=-1.5),
         ((3, 4),)),
    Case("pad_negative", lambda a: a.pad([(-1, 1), (0, -2)]), lambda a: F.pad(a, (0, -2, -1, 1)), ((3, 5),)),
    Case("pad_then_slice", lambda a: a.pad([(2, 2)])[1:6] * 2, lambda a: F.pad(a, (2, 2))[1:6] * 2, ((5,),)),
    Case("concat", lambda a, b: ll.concat([a, b, a], 1), lambda a, b: torch.cat([a, b, a], 1),
         ((2, 3), (2, 4)), FLOATS + INTS),
    Case("stack", lambda a, b: ll.stack([a, b], 0), lambda a, b: torch.stack([a, b], 0), ((2, 3), (2, 3))),
    Case("cumsum", lambda a: a.cumsum(1), lambda a: a.cumsum(1), ((3, 6),), FLOATS + INTS, scale=2.0),
    Case("cumsum_axis0", lambda a: a.cumsum(0), lambda a: a.cumsum(0), ((5, 2),), FLOATS + INTS, scale=2.0),
]


def random_tensor(shape, dtype, low, high, generator) -> torch.Tensor:
    """An input for a case: uniform in [low, high) for floats, integers in [low, high] otherwise (over the whole
    range of a narrow int)."""
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=generator, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype in NARROW_INTS:
        low, high = torch.iinfo(dtype).min, torch.iinfo(dtype).max
    return torch.randint(int(low), int(high) + 1, shape, generator=generator, dtype=dtype)


def case_graph(case: Case, dtype: torch.dtype, transposed: bool) -> tuple[ll.Graph, dict[str, np.ndarray]]:
    """The graph and inputs that tests/hlir/test_ops.py builds for ``case`` (``transposed``: each input of two or
    more dimensions given transposed, so the graph reads it through a transposing view)."""
    generator = torch.Generator().manual_seed(hash(case.name) % 2**31)
    inputs = [random_tensor(s, dtype, case.low, case.high, generator) for s in case.shapes]
    if transposed:
        inputs = [x.transpose(-1, -2).contiguous() if x.ndim >= 2 else x for x in inputs]
    g = ll.Graph()
    tensors = []
    for i, x in enumerate(inputs):
        t = g.tensor(tuple(x.shape), name=f"x{i}", dtype=from_torch(dtype))
        tensors.append(t.transpose(-1, -2) if transposed and x.ndim >= 2 else t)
    case.ll_fn(*tensors).output("out")
    return g, {f"x{i}": to_numpy(x) for i, x in enumerate(inputs)}


def index_ops_graph() -> ll.Graph:
    """Embedding, take, gather, scatter (tensor and value), scatter_add and slice_scatter over inputs
    w[10, 4], ids[2, 3] i64, x[3, 10], index[2, 5] i64, src[2, 5], block[3, 3]."""
    g = ll.Graph()
    w, i, xx = g.tensor((10, 4), "w"), g.tensor((2, 3), "ids", ll.i64), g.tensor((3, 10), "x")
    idx, s, b = g.tensor((2, 5), "index", ll.i64), g.tensor((2, 5), "src"), g.tensor((3, 3), "block")
    ll.embedding(i, w).output("embedding")
    xx.take(i, axis=1).output("take")
    xx.gather(0, idx).output("gather")
    xx.scatter(0, idx[:, :1], s).output("scatter")
    xx.slice_scatter(b.T, axis=1, start=1, stop=4).output("slice_scatter")
    xx.scatter(1, idx[:1, :2], 7.0).output("scatter_value")
    xx.scatter_add(0, idx, s).output("scatter_add")  # repeated positions add up
    return g
