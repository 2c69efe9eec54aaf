"""Every high-level op of the tensor API against PyTorch eager, through the reference runtime
(``run_reference``: these check the decompositions; compiled kernels are checked against the
reference in tests/runtime/test_cpu.py and tests/runtime/test_fuzz.py; the cases are in
tests/helpers/op_cases.py).

Each case runs on broadcasting shapes, and again on non-contiguous views (inputs declared
transposed and transposed back inside the graph), in every dtype where the op makes sense.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import luminal_lab as ll
from luminal_lab.core.dtypes import from_torch
from tests.helpers.op_cases import CASES, INTS, Case, index_ops_graph, random_tensor

TOLERANCE = {  # (atol, rtol) by dtype
    torch.float32: (2e-5, 2e-5),
    torch.float64: (1e-6, 1e-6),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (4e-2, 3e-2),
}


def _check(case: Case, dtype: torch.dtype, transposed: bool) -> None:
    generator = torch.Generator().manual_seed(hash(case.name) % 2**31)
    inputs = [random_tensor(s, dtype, case.low, case.high, generator) for s in case.shapes]
    if transposed:  # store rank>=2 inputs transposed; the graph transposes them back (a strided read)
        stored = [x.transpose(-1, -2).contiguous() if x.ndim >= 2 else x for x in inputs]
    else:
        stored = inputs
    g = ll.Graph()
    tensors = []
    for i, x in enumerate(stored):
        t = g.tensor(tuple(x.shape), name=f"x{i}", dtype=from_torch(dtype))
        tensors.append(t.transpose(-1, -2) if transposed and x.ndim >= 2 else t)
    result = case.ll_fn(*tensors)
    result.output("out")
    got = ll.compile(g).run_reference(*stored)
    expected = case.torch_fn(*inputs)
    assert got.dtype == expected.dtype, f"{case.name}: dtype {got.dtype} != torch's {expected.dtype}"
    assert tuple(got.shape) == tuple(expected.shape)
    if not expected.dtype.is_floating_point:
        assert torch.equal(got, expected), f"{case.name}: {got} != {expected}"
        return
    atol, rtol = TOLERANCE[expected.dtype]
    torch.testing.assert_close(got, expected, atol=atol * case.scale, rtol=rtol * case.scale, equal_nan=True)


PARAMS = [pytest.param(case, dtype, id=f"{case.name}-{str(dtype).split('.')[1]}")
          for case in CASES for dtype in case.dtypes]


@pytest.mark.parametrize(("case", "dtype"), PARAMS)
def test_matches_torch(case: Case, dtype: torch.dtype) -> None:
    _check(case, dtype, transposed=False)


@pytest.mark.parametrize(("case", "dtype"), [p for p in PARAMS if any(len(s) >= 2 for s in p.values[0].shapes)])
def test_matches_torch_on_non_contiguous_views(case: Case, dtype: torch.dtype) -> None:
    _check(case, dtype, transposed=True)


def test_embedding_take_gather_scatter_and_scatter_add() -> None:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(10, 4, generator=generator)
    ids = torch.randint(0, 10, (2, 3), generator=generator)
    x = torch.randn(3, 10, generator=generator)
    index = torch.randint(0, 3, (2, 5), generator=generator)
    src = torch.randn(2, 5, generator=generator)
    block = torch.randn(3, 3, generator=generator)
    g = index_ops_graph()
    out = ll.compile(g).run_reference(weight, ids, x, index, src, block)
    torch.testing.assert_close(out[0], F.embedding(ids, weight))
    torch.testing.assert_close(out[1], torch.from_numpy(np.take(x.numpy(), ids.numpy(), axis=1)))
    torch.testing.assert_close(out[2], x.gather(0, index))
    torch.testing.assert_close(out[3], x.scatter(0, index[:, :1], src))
    torch.testing.assert_close(out[4], x.slice_scatter(block.T, dim=1, start=1, end=4))
    torch.testing.assert_close(out[5], x.scatter(1, index[:1, :2], 7.0))
    torch.testing.assert_close(out[6], x.scatter_add(0, index, src))


def test_a_unit_step_slice_scatter_is_a_concat_and_a_strided_one_a_scatter() -> None:
    """``slice_scatter`` with step 1 (a slice's gradient, ``slice_backward``) joins the parts around the slice with
    the source, pads and adds that fuse; a strided one scatters to the slice's positions."""
    generator = torch.Generator().manual_seed(0)
    x, unit, strided = (torch.randn(*shape, generator=generator) for shape in ((3, 10), (3, 3), (3, 3)))
    g = ll.Graph()
    xs, us, ss = g.tensor((3, 10), "x"), g.tensor((3, 3), "u"), g.tensor((3, 3), "s")
    xs.slice_scatter(us, axis=1, start=1, stop=4).output("unit")
    xs.slice_scatter(ss, axis=1, start=1, stop=7, step=2).output("strided")
    xs.slice_scatter(us, axis=1, start=7).output("end")
    assert sum(node.op == ll.Op.SCATTER for node in g.nodes) == 1
    out = ll.compile(g).run_reference(x, unit, strided)
    torch.testing.assert_close(out[0], x.slice_scatter(unit, dim=1, start=1, end=4))
    torch.testing.assert_close(out[1], x.slice_scatter(strided, dim=1, start=1, end=7, step=2))
    torch.testing.assert_close(out[2], x.slice_scatter(unit, dim=1, start=7))


def test_gather_out_of_range_is_a_clear_error() -> None:
    g = ll.Graph()
    w, i = g.tensor((4, 2), "w"), g.tensor((3,), "ids", ll.i64)
    ll.embedding(i, w).output("rows")
    with pytest.raises(IndexError, match="out of range"):
        ll.compile(g).run_reference(torch.zeros(4, 2), torch.tensor([0, 4, 1]))


def test_arange_and_iota() -> None:
    g = ll.Graph()
    g.arange(5, start=2, step=3).output("ints")
    (g.arange(4, dtype=ll.f32) * 0.5).output("floats")
    ints, floats = ll.compile(g).run_reference()
    assert torch.equal(ints, torch.arange(2, 17, 3, dtype=torch.int32))
    assert torch.equal(floats, torch.arange(4, dtype=torch.float32) * 0.5)


def test_inf_and_nan_propagate_like_torch() -> None:
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -2.0])
    g = ll.Graph()
    t = g.tensor((5,), "x")
    t.relu().output("relu")
    t.exp().output("exp")
    ll.maximum(t, 0.0).output("max")
    ll.concat([t, t], 0).output("cat")
    t.sigmoid().output("sigmoid")
    got = ll.compile(g).run_reference(x)
    expected = (x.relu(), x.exp(), torch.maximum(x, torch.tensor(0.0)), torch.cat([x, x]), x.sigmoid())
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, equal_nan=True)


def test_symbolic_dimension_runs_at_two_sizes() -> None:
    g = ll.Graph()
    x = g.tensor(("s", 4), name="x")
    w = g.tensor((4, 3), name="w")
    y = (x @ w).softmax(0)
    (y.mean(0, keepdim=True) + x.sum(-1, keepdim=True)[:, :1]).output("y")
    x.cumsum(0).output("running")
    comp = ll.compile(g)
    wv = torch.randn(4, 3)
    for s in (3, 7):
        xv = torch.randn(s, 4)
        got, running = comp.run_reference(xv, wv)
        expected = (xv @ wv).softmax(0)
        torch.testing.assert_close(got, expected.mean(0, keepdim=True) + xv.sum(-1, keepdim=True))
        torch.testing.assert_close(running, xv.cumsum(0))


def test_symbolic_mean_and_padding() -> None:
    g = ll.Graph()
    x = g.tensor(("b", "s"), name="x")
    x.mean(1).output("mean")
    x.pad([(0, 0), (1, 1)]).output("padded")
    x.var(1).output("var")
    comp = ll.compile(g)
    for shape in ((2, 3), (4, 9)):
        xv = torch.randn(shape)
        mean, padded, var = comp.run_reference(xv)
        torch.testing.assert_close(mean, xv.mean(1))
        torch.testing.assert_close(padded, F.pad(xv, (1, 1)))
        torch.testing.assert_close(var, xv.var(1))


def test_math_constants_are_exact_enough() -> None:
    g = ll.Graph()
    t = g.tensor((3,), "x", ll.f64)
    t.exp().log().output("roundtrip")
    (t * 0 + math.pi).cos().output("cos_pi")
    x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    roundtrip, cos_pi = ll.compile(g).run_reference(x)
    torch.testing.assert_close(roundtrip, x, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(cos_pi, torch.full((3,), -1.0, dtype=torch.float64))


EXTREMES = {  # the tensor API's op and torch's
    "min": (lambda v: v.min(), lambda v: v.min()),
    "min_axis": (lambda v: v.min(1), lambda v: v.amin(1)),
    "max_axis": (lambda v: v.max(0), lambda v: v.amax(0)),
    "minimum": (lambda v: ll.minimum(v[:1], v[1:]), lambda v: torch.minimum(v[:1], v[1:])),
    "neg": (lambda v: -v, lambda v: -v),
    "abs": (lambda v: v.abs(), lambda v: v.abs()),
    "plus_one": (lambda v: v + 1, lambda v: v + 1),
    "minus_one": (lambda v: v - 1, lambda v: v - 1),
    "times_minus_one": (lambda v: v * -1, lambda v: v * -1),
    "plus_300": (lambda v: v + 300, lambda v: v + 300),
    "clamp": (lambda v: v.clamp(-1, 1), lambda v: v.clamp(-1, 1)),
    "sum": (lambda v: v.sum(1), lambda v: v.sum(1)),
}


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: str(d).split(".")[1])
def test_ints_at_the_ends_of_their_range_behave_like_torch(dtype: torch.dtype) -> None:
    """min (the max of the complement), minimum, abs, negation and scalars at an int type's extremes, where ``-x``
    wraps: on the reference runtime and on the compiled kernels."""
    info = torch.iinfo(dtype)
    x = torch.tensor([[info.min, 0, info.max, 1], [info.max, info.min, -1 if info.min else 2, info.min + 1]],
                     dtype=dtype)
    g = ll.Graph()
    t = g.tensor((2, 4), "x", from_torch(dtype))
    for name, (ours, _) in EXTREMES.items():
        ours(t).output(name)
    expected = [theirs(x) for _, theirs in EXTREMES.values()]
    comp = ll.compile(g)
    for got in (comp.run_reference(x), comp(x)):
        for name, a, b in zip(EXTREMES, got, expected, strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b), (name, a, b)
