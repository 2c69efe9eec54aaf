"""The CPU runtime (numba kernels generated from an LLIR) against the reference runtime.

Until genome extraction exists, LLIRs come from HLIR graphs converted one node to one kernel
(``llir_of``, tests/helpers/llir.py). Kernels are cached in pytest's cache directory (or
``$LUMINAL_LAB_KERNEL_CACHE`` when set), so a second run of this file starts warm and nothing is
written to the home directory.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.codegen.reads import lower
from luminal_lab.core.arrays import to_numpy
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.hlir.graph import Graph
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR, Kernel
from luminal_lab.llir.regions import find_regions
from luminal_lab.runtime.cache import CACHE_ENV, WORKERS_ENV, KernelCache, compile_workers, kernel_cache
from luminal_lab.runtime.cpu import (
    PARALLEL_THRESHOLD,
    REBIND_BYTES,
    SERIAL_MATMUL,
    CPURuntime,
    _Launch,
    _Listing,
    _Matmul,
    _Planner,
    pack,
)
from tests.helpers.llir import llir_of
from tests.helpers.models import MLP, LlamaBlock, SelfAttentionBlock, attention_inputs, llama_inputs, mlp_inputs
from tests.helpers.op_cases import CASES, Case, case_graph, index_ops_graph
from tests.helpers.read_only import read_only

ROOT = Path(__file__).resolve().parents[2]
# (atol, rtol) against the reference: the kernels sum in another order and carry their own exp2/log2/sin
# (within 2 ulp), and f16/bf16 round after every op, so one differently rounded intermediate moves a result
# by an ulp of the storage type
TOLERANCE = {ll.f32: (2e-5, 2e-5), ll.f64: (1e-12, 1e-12), ll.f16: (4e-3, 4e-3), ll.bf16: (3e-2, 3e-2)}


def assert_matches(got: np.ndarray, expected: np.ndarray, dtype: ll.DType, scale: float = 1.0, what: str = "") -> None:
    assert got.dtype == expected.dtype, what
    assert got.shape == expected.shape, what
    if not dtype.is_float:
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    atol, rtol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), atol=atol * scale,
                               rtol=rtol * scale, equal_nan=True, err_msg=what)


def check_graph(graph: Graph, inputs: Mapping[str, np.ndarray], bindings: Mapping[str, int] | None = None,
                scale: float = 1.0, runtime: CPURuntime | None = None) -> list[np.ndarray]:
    """Run ``graph`` on the CPU runtime and the reference; every output must agree."""
    runtime = runtime or CPURuntime(llir_of(graph))
    got = runtime.run(inputs, graph.weights, bindings)
    expected = ll.ReferenceRuntime(graph).run(inputs, bindings)
    assert len(got) == len(expected)
    for (name, want), have in zip(expected.items(), got):
        assert_matches(have, want, graph.outputs[name].dtype, scale, name)
    return got


# ---- every op of the tensor API ---------------------------------------------------------


CASE_PARAMS = [pytest.param(case, dtype, transposed, id=f"{case.name}-{str(dtype).split('.')[1]}{'-T' * transposed}")
               for case in CASES for dtype in case.dtypes for transposed in (False, True)
               if not transposed or any(len(s) >= 2 for s in case.shapes)]


@pytest.mark.parametrize(("case", "dtype", "transposed"), CASE_PARAMS)
def test_op_matches_reference(case: Case, dtype: torch.dtype, transposed: bool) -> None:
    graph, inputs = case_graph(case, dtype, transposed)
    check_graph(graph, inputs, scale=case.scale)


# ---- graphs beyond single ops -------------------------------------------------------------


def test_symbolic_dimension_at_two_sizes_keeps_one_plan_each() -> None:
    g = ll.Graph()
    x, w = g.tensor(("s", 4), name="x"), g.tensor((4, 3), name="w")
    y = (x @ w).softmax(0)
    (y.mean(0, keepdim=True) + x.sum(-1, keepdim=True)[:, :1]).output("y")
    x.cumsum(0).output("running")
    x.pad([(1, 1), (0, 0)]).output("padded")
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((4, 3), np.float32)
    for s in (3, 7, 3):
        inputs = {"x": rng.standard_normal((s, 4), np.float32), "w": weights}
        got = check_graph(g, inputs, {"s": s}, runtime=runtime)
        assert got[2].shape == (s + 2, 4)
    assert len(runtime.plans) == 2


@pytest.mark.usefixtures("rebind_any_size")
def test_a_plan_for_another_length_takes_the_steps_its_length_leaves_alone() -> None:
    """Plans of lengths in one bucket lay the arena out alike, so the plan of a new length builds only the steps the
    length reaches (the cache's concat, the scores) and takes the others as an earlier plan built them; every output
    equals the reference, also as plans alternate and an input that a shared step reads in place moves to other
    memory in between (the shared step's binders follow it), and at a length in another bucket."""
    g = ll.Graph()
    cache, new, w = g.tensor((2, "s", 8), name="cache"), g.tensor((2, 1, 8), name="new"), g.tensor((8, 8), name="w")
    keys = ll.concat([cache, new], 1)  # a KV cache's concat
    keys.output("keys")
    ((new @ w).exp() @ keys.permute((0, 2, 1))).softmax(-1).output("scores")
    (w.exp() * 2.0).sum(0).output("w_sums")  # of no length
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(3)
    ws = [rng.standard_normal((8, 8), np.float32) for _ in range(2)]
    new_rows = rng.standard_normal((2, 1, 8), np.float32)
    for s, w_value in ((65, ws[0]), (66, ws[1]), (65, ws[0]), (67, ws[0]), (66, ws[1]), (65, ws[1]), (90, ws[0])):
        check_graph(g, {"cache": rng.standard_normal((2, s, 8), np.float32), "new": new_rows, "w": w_value},
                    {"s": s}, runtime=runtime)
    steps = {s: dict(runtime.plan({"s": s}).steps) for s in (65, 66, 67)}
    kernels = {k.id: k for k in runtime.llir.kernels}
    sources = {kernels[kid].sources[0][0]: name for kid, name in zip(runtime.llir.outputs, ("keys", "scores", "w"))}
    shared = {kid for kid, step in steps[65].items() if steps[66].get(kid) is step}
    assert shared and shared == {kid for kid, step in steps[65].items() if steps[67].get(kid) is step}
    assert {sources[kid] for kid in shared if kid in sources} == {"w"}  # the length's concat and scores: built anew
    assert runtime.plan({"s": 66}).in_place["w"].bound is ws[1]


def test_a_plan_in_a_bucket_planned_before_starts_from_the_last_plan_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan of a new length in a bucket planned before starts from that bucket's last plan (``_Record``): it looks
    up only the steps of the kernels whose symbols changed, and takes the others as they are; after the arena grew for
    another bucket, that record is of memory no longer used, so the next plan there is planned in full. Every output
    equals the reference."""
    g = ll.Graph()
    cache, new, w = g.tensor((2, "s", 8), name="cache"), g.tensor((2, 1, 8), name="new"), g.tensor((8, 8), name="w")
    keys = ll.concat([cache, new], 1)
    keys.output("keys")
    ((new @ w).exp() @ keys.permute((0, 2, 1))).softmax(-1).output("scores")
    (w.exp() * 2.0).sum(0).output("w_sums")
    runtime = CPURuntime(llir_of(g))
    looked_up: list[int] = []
    key = _Planner._key
    monkeypatch.setattr(_Planner, "_key", lambda planner, kernel: looked_up.append(kernel.id) or key(planner, kernel))
    rng = np.random.default_rng(5)
    w_value, new_rows = rng.standard_normal((8, 8), np.float32), rng.standard_normal((2, 1, 8), np.float32)
    counts = {}
    for s in (65, 66, 300, 67, 68):  # 300: another bucket, for which the arena grows
        looked_up.clear()
        check_graph(g, {"cache": rng.standard_normal((2, s, 8), np.float32), "new": new_rows, "w": w_value},
                    {"s": s}, runtime=runtime)
        counts[s] = set(looked_up)
    kernels = {k.id: k for k in runtime.llir.kernels}
    keyed = {kid for kid in counts[65] if kernels[kid].op not in ("Input", "Output", "Constant", "Iota")}
    of_length = {kid for kid in keyed if "s" in runtime.step_inputs(kernels[kid], kernels)[0]}
    assert of_length and keyed - of_length  # the concat and scores, and w's steps
    assert counts[65] >= keyed and counts[300] >= keyed and counts[67] >= keyed  # planned in full
    assert counts[66] & keyed == of_length and counts[68] & keyed == of_length


def test_a_weight_of_symbolic_shape_is_each_plans_own_in_a_bucket_planned_before() -> None:
    """A weight whose shape names a symbol (a cache handed over as a weight) gets a buffer and a slot of each plan's
    own also where the plan starts from the bucket's last one: every output equals the reference."""
    g = ll.Graph()
    cache, w = g.tensor(("s", 8), name="cache"), g.tensor((8, 8), name="w")
    (cache @ w).exp().output("out")
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(6)
    w_value = rng.standard_normal((8, 8), np.float32)
    for s in (65, 66, 67, 66):
        cache_value = rng.standard_normal((s, 8), np.float32)
        (got,) = runtime.run({}, {"w": w_value, "cache": cache_value}, {"s": s})
        (want,) = ll.ReferenceRuntime(g).run({"cache": cache_value, "w": w_value}, {"s": s}).values()
        assert_matches(got, want, ll.DType.F32, 1.0, "out")
        assert [slot.name for slot in runtime.plan({"s": s}).weights].count("cache") == 1


def test_a_plan_that_copies_what_another_rebinds_holds_their_shared_steps_to_its_buffers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that copies an input in and an output out, taking steps from a plan that reads that input in place and
    writes that output straight, points those steps back at its own buffers on each run (``CPUPlan.pinned``)."""
    g = ll.Graph()
    x, w = g.tensor(("s", 8), name="x"), g.tensor((8, 8), name="w")
    (x * 2.0).output("doubled")
    (w.exp() * 2.0).output("w2")  # of no length: its steps are shared
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(4)
    ws = [rng.standard_normal((8, 8), np.float32) for _ in range(3)]
    monkeypatch.setattr("luminal_lab.runtime.cpu.REBIND_BYTES", 0)
    check_graph(g, {"x": np.ones((65, 8), np.float32), "w": ws[0]}, {"s": 65}, runtime=runtime)
    monkeypatch.setattr("luminal_lab.runtime.cpu.REBIND_BYTES", 1 << 40)
    for s, w_value in ((66, ws[1]), (65, ws[2]), (66, ws[0])):
        check_graph(g, {"x": np.ones((s, 8), np.float32), "w": w_value}, {"s": s}, runtime=runtime)
    first, second = runtime.plan({"s": 65}), runtime.plan({"s": 66})
    assert set(first.in_place) == {"x", "w"} and not second.in_place and not second.direct
    # x's, doubled's, w's and w2's buffers, each held to itself: another plan may take the steps kept for them
    assert sorted(place.buffer.shape for place in second.pinned) == [(8, 8), (8, 8), (66, 8), (66, 8)]


def test_a_plan_reads_boxed_views_from_their_expressions_as_from_every_index() -> None:
    """A strided or padded read is lowered from the tracker's expressions at the binding alone (``lower``, for a
    tracker with ``boxed_strides``): at every size it is the read found from the index of every element (``lower``
    without ``boxed``), and only reads of another kind (a nest, a gather) are left to the latter."""
    g = ll.Graph()
    cache, new = g.tensor((2, "s", 8), name="cache"), g.tensor((2, 1, 8), name="new")
    keys = ll.concat([cache, new], 1)  # a KV cache's concat: pads of a symbolic length
    keys.output("keys")
    (keys.permute((1, 0, 2))[:, :, 1::2] * 2).output("sliced")
    (keys.sum(-1, keepdim=True) + keys[:, :1]).output("rows")
    (keys.permute((1, 0, 2)).reshape((keys.shape[1], 16)) + 1).output("nested")  # a transpose, then a merge: a nest
    runtime = CPURuntime(llir_of(g))
    kinds: Counter[str] = Counter()
    for size in (1, 4, 9):
        planner = _Planner(runtime, {"s": size}, _Listing(runtime.cache))
        planner._allocate()
        for kernel in runtime.llir.kernels:
            for source, tracker in kernel.sources:
                flat = planner.buffers[source].reshape(-1)
                resolved = lower(tracker, {"s": size}, flat.size, source, boxed=False)
                if tracker.boxed_strides() is None:
                    kinds["resolved"] += 1
                    continue
                boxed = lower(tracker, {"s": size}, flat.size, source)
                kinds["boxed" if boxed.box is None else "padded"] += 1
                assert boxed == resolved, (kernel, tracker)
    assert kinds["boxed"] and kinds["padded"] and kinds["resolved"]
    inputs = {"cache": np.arange(2 * 9 * 8, dtype=np.float32).reshape(2, 9, 8), "new": np.ones((2, 1, 8), np.float32)}
    check_graph(g, inputs, {"s": 9}, runtime=runtime)


def test_embedding_gather_scatter_and_iota() -> None:
    rng = np.random.default_rng(1)
    g = index_ops_graph()
    g.arange(5, start=2, step=3).output("ints")
    (g.arange(4, dtype=ll.f32) * 0.5).output("floats")
    inputs = {"w": rng.standard_normal((10, 4), np.float32), "ids": rng.integers(0, 10, (2, 3)),
              "x": rng.standard_normal((3, 10), np.float32), "index": rng.integers(0, 3, (2, 5)),
              "src": rng.standard_normal((2, 5), np.float32), "block": rng.standard_normal((3, 3), np.float32)}
    got = check_graph(g, inputs)
    np.testing.assert_array_equal(got[7], np.arange(2, 17, 3, dtype=np.int32))


@pytest.mark.parametrize("op", ["Gather", "Scatter", "ScatterAdd"])
def test_out_of_range_index_is_a_clear_error(op: str) -> None:
    g = ll.Graph()
    w, i = g.tensor((4, 2), "w"), g.tensor((3,), "ids", ll.i64)
    if op == "Gather":
        ll.embedding(i, w).output("rows")
    elif op == "Scatter":
        w.reshape(8).scatter(0, i, 1.0).output("scattered")
    else:
        w.reshape(8).scatter_add(0, i, w.reshape(8)[:3]).output("added")
    runtime = CPURuntime(llir_of(g))
    inputs = {"w": np.zeros((4, 2), np.float32), "ids": np.array([0, 1, 2])}
    runtime.run(inputs)
    for bad in (8, -1):
        inputs["ids"] = np.array([0, bad, 1])
        with pytest.raises(IndexError, match=rf"{op} k\d+ \(HLIR h\d+\): index -?\d+ is out of range"):
            runtime.run(inputs)


def test_only_a_plan_with_numpy_steps_silences_numpy_and_overflows_warn_of_nothing() -> None:
    """numba's kernels (an f32 scatter-add's among them) raise no floating-point warnings, so a plan of them runs
    outside numpy's error state; an f16 scatter-add (numpy's ``add.at``) runs inside it: an overflow in either warns of
    nothing, as the reference."""
    kernels = ll.Graph()
    w, ids = kernels.tensor((3,), "w"), kernels.tensor((3,), "ids", ll.i64)
    (w * 4.0).output("scaled")
    w.scatter_add(0, ids, w).output("added")
    g = ll.Graph()
    h = g.tensor((3,), "h", ll.f16)
    h.scatter_add(0, g.tensor((3,), "ids", ll.i64), h).output("added")
    inputs = {"w": np.full(3, 3e38, np.float32), "ids": np.array([0, 0, 2])}
    half = {"h": np.full(3, 6e4, np.float16), "ids": inputs["ids"]}
    loops, numpy_steps = CPURuntime(llir_of(kernels)), CPURuntime(llir_of(g))
    assert not loops.plan().warns and numpy_steps.plan().warns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled, added = loops.run(inputs)
        (added_half,) = numpy_steps.run(half)
    np.testing.assert_array_equal(scaled, np.full(3, np.inf, np.float32))
    np.testing.assert_array_equal(added, np.array([np.inf, 3e38, np.inf], np.float32))
    np.testing.assert_array_equal(added_half, np.array([np.inf, 6e4, np.inf], np.float16))
    check_graph(kernels, inputs)
    check_graph(g, half)


def test_inf_and_nan_propagate_like_the_reference() -> None:
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -2.0, 3.5, 1e-40], np.float32)
    g = ll.Graph()
    t = g.tensor((8,), "x")
    t.relu().output("relu")
    t.exp().output("exp")
    t.log().output("log")
    t.sqrt().output("sqrt")
    t.reciprocal().output("recip")
    t.sin().output("sin")
    t.sigmoid().output("sigmoid")
    ll.maximum(t, 0.0).output("max")
    t.max().output("max_all")
    t.sum().output("sum_all")
    t.fmod(0.0).output("fmod_zero")
    (t < 1.0).output("less")
    t.reshape(2, 4).max(1).output("row_max")
    ll.concat([t, t], 0).output("cat")
    check_graph(g, {"x": x})


def test_integer_ops_wrap_and_divide_like_the_reference() -> None:
    big = np.iinfo(np.int32).max
    x = np.array([big, -big - 1, 7, -7, 5, 0], np.int32)
    y = np.array([2, -1, 3, 3, 0, -2], np.int32)
    g = ll.Graph()
    a, b = g.tensor((6,), "a", ll.i32), g.tensor((6,), "b", ll.i32)
    (a + b).output("add")
    (a * b).output("mul")
    a.fmod(b).output("fmod")
    a.sum().output("sum")
    a.cast(ll.f32).output("to_float")
    a.cast(ll.bool).output("to_bool")
    check_graph(g, {"a": x, "b": y})


@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16, ll.f64])
def test_exp_kernel(dtype: ll.DType) -> None:
    """``Exp`` is not an HLIR op (extraction recognises it): a hand-built LLIR against numpy's e**x."""
    x = np.concatenate([np.linspace(-110, 100, 4001), [np.inf, -np.inf, np.nan, 0.0]]).astype(dtype.numpy)
    (n,) = x.shape
    contiguous = ShapeTracker.contiguous((n,))
    llir = LLIR([Kernel(0, "Input", (), (ll.Expr.num(n),), dtype, "x"),
                 Kernel(1, "Exp", ((0, contiguous),), (ll.Expr.num(n),), dtype),
                 Kernel(2, "Output", ((1, contiguous),), (ll.Expr.num(n),), dtype, 0)], [2])
    (got,) = CPURuntime(llir).run({"x": x})
    compute = dtype.compute_numpy
    with np.errstate(over="ignore"):
        expected = np.exp(x.astype(compute)).astype(dtype.numpy)
    assert_matches(got, expected, dtype, what="exp")


TRANSCENDENTALS = {
    "exp2": (lambda t: t.exp2(), np.exp2, lambda rng: rng.uniform(-155, 130, 1 << 18)),
    "log2": (lambda t: t.log2(), np.log2, lambda rng: 10.0 ** rng.uniform(-45, 38.5, 1 << 18)),
    "sin": (lambda t: t.sin(), np.sin, lambda rng: np.concatenate(
        [rng.uniform(-10, 10, 1 << 17), rng.uniform(-1e6, 1e6, 1 << 16), rng.uniform(-1e9, 1e9, 1 << 10),
         *_around(np.float32(rng.integers(-600_000, 600_000, 1 << 14) * (np.pi / 2)))])),
}


def _around(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """``x`` and its float32 neighbours: where sin's argument reduction loses the most."""
    return x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))


@pytest.mark.parametrize("name", list(TRANSCENDENTALS))
def test_float32_transcendentals_within_two_ulp_on_wide_ranges(name: str) -> None:
    build, exact, sample = TRANSCENDENTALS[name]
    x = sample(np.random.default_rng(2)).astype(np.float32)
    g = ll.Graph()
    build(g.tensor(x.shape, "x")).output("y")
    (got,) = CPURuntime(llir_of(g)).run({"x": x})
    with np.errstate(all="ignore"):
        want = exact(x.astype(np.float64))
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    error = np.abs(got.astype(np.float64) - want) / ulp
    assert np.nanmax(error) <= 2.0, f"{name}: {np.nanmax(error)} ulp at x={x[np.nanargmax(error)]}"
    check_graph(g, {"x": x})


def test_half_precision_bits_round_like_numpy() -> None:
    """f16/bf16 travel as uint16 bits; loads widen exactly, stores round to nearest even (NaN and inf kept)."""
    rng = np.random.default_rng(3)
    values = (rng.standard_normal(1 << 14) * 10.0 ** rng.uniform(-9, 6, 1 << 14)).astype(np.float32)
    values[:4] = [np.nan, np.inf, -np.inf, 7e4]
    g = ll.Graph()
    for dtype in (ll.f16, ll.bf16):
        t = g.tensor(values.shape, f"x_{dtype.value}", dtype)
        (t * 1.0).output(f"same_{dtype.value}")
        (t + t).output(f"double_{dtype.value}")
    with np.errstate(over="ignore"):
        inputs = {"x_f16": values.astype(np.float16), "x_bf16": values.astype(ml_dtypes.bfloat16)}
    got = CPURuntime(llir_of(g)).run(inputs)
    expected = ll.ReferenceRuntime(g).run(inputs)
    for have, want in zip(got, expected.values()):  # bit for bit
        np.testing.assert_array_equal(have.view(np.uint16), want.view(np.uint16))


def test_views_that_need_index_gathers() -> None:
    """A transposed-then-flattened view is no strided nest once sliced or padded: it is gathered by index."""
    g = ll.Graph()
    x = g.tensor((4, 6), "x")
    flat = x.T.reshape(24)
    flat.pad([(1, 2)]).output("padded")
    (flat[::5] * 2).output("sliced")
    x.T.reshape(2, 12).pad([(0, 0), (3, 0)]).output("padded_rows")
    check_graph(g, {"x": np.arange(24, dtype=np.float32).reshape(4, 6)})


# ---- padded reads -----------------------------------------------------------------------------------------------


def padded_reads(dtype: ll.DType, materialised: bool = False) -> tuple[Graph, dict[str, np.ndarray]]:
    """Outputs reading padded views (valid positions one box, zeros elsewhere) of ``a`` [6, 5], ``b`` [6, 3] and
    ``c`` [6, 8] in every layout, each through a chain of ops (so a fused genome makes regions of them), and inputs.
    With ``materialised`` also reads that take a padded view materialised: a row region (the row sums of a concat), a
    matmul and a gather."""
    g = ll.Graph()
    a, b, c = g.tensor((6, 5), "a", dtype), g.tensor((6, 3), "b", dtype), g.tensor((6, 8), "c", dtype)
    ((ll.concat([a, b], -1) + c) * c).output("innermost")  # a concat: pad and add, on the innermost axis
    ((a.pad([(2, 1), (0, 0)]) * a.pad([(0, 3), (0, 0)])) + a.pad([(1, 2), (0, 0)])).output("outer")
    ((a.pad([(1, 2), (2, 1)]) + a.pad([(2, 1), (1, 2)])) * a.pad([(0, 3), (0, 3)])).output("both_sides")
    ((a.T.pad([(1, 0), (0, 2)]) * a.T.pad([(0, 1), (2, 0)])) + c).output("strided")  # innermost stride 5
    ((b[:, :1].expand(6, 4).pad([(0, 0), (1, 3)]) + c) * c).output("broadcast")  # innermost stride 0
    ((a.pad([(0, 0), (0, 6)])[:, 5:] + c[:, :6]) * c[:, 2:]).output("blank")  # the box is empty: all padding
    (ll.concat([a, b, a], -1) * 2).output("three")
    rng = np.random.default_rng(5)
    inputs = {name: (rng.standard_normal(shape) if dtype.is_float else rng.integers(-40, 40, shape)).astype(dtype.numpy)
              for name, shape in (("a", (6, 5)), ("b", (6, 3)), ("c", (6, 8)))}
    if materialised:
        ll.concat([a, b], -1).sum(-1).output("row_sums")
        (a.pad([(0, 0), (1, 2)]) @ c.T).output("matmul")
        ll.embedding(g.tensor((4,), "ids", ll.i32), a.pad([(1, 1), (0, 3)])).output("gathered")
        inputs["ids"] = np.array([0, 7, 3, 1], np.int32)
    return g, inputs


PADDED_DTYPES = [ll.f32, ll.f64, ll.f16, ll.bf16, ll.i32]


@pytest.mark.parametrize("dtype", PADDED_DTYPES, ids=str)
def test_padded_reads_in_elementwise_kernels_match_the_reference_bit_for_bit(dtype: ll.DType) -> None:
    g, inputs = padded_reads(dtype)
    got = CPURuntime(llir_of(g)).run(inputs)
    for (name, want), have in zip(ll.ReferenceRuntime(g).run(inputs).items(), got):
        assert have.dtype == want.dtype and have.shape == want.shape, name
        np.testing.assert_array_equal(have.view(np.uint8), want.view(np.uint8), err_msg=name)


@pytest.mark.usefixtures("blas_any_size")
@pytest.mark.parametrize("dtype", PADDED_DTYPES, ids=str)
def test_padded_reads_in_fused_regions_match_the_reference(dtype: ll.DType) -> None:
    """Regions read padded starts in place; a row region (a row sum of a concat) and a matmul of one read it
    materialised."""
    g, inputs = padded_reads(dtype, materialised=True)
    comp = ll.compile(g)
    llir = extract(comp.choice_space().fused_genome())
    comp.egraph.close()
    bodies = [region.body(llir) for region in find_regions(llir)]
    padded = {"elementwise" if body.rows is None else "rows" for body in bodies
              if any(tracker.is_masked for _, tracker, _ in body.inputs)}
    assert "elementwise" in padded and ("rows" in padded or not dtype.is_float)  # no row region forms over ints
    got = CPURuntime(llir).run(inputs)
    for (name, want), have in zip(ll.ReferenceRuntime(g).run(inputs).items(), got):
        assert_matches(have, want, dtype, what=name)


@pytest.mark.usefixtures("rebind_any_size")
def test_padded_loop_reads_copy_nothing_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """An elementwise kernel or a region reads a padded view in place: with its inputs read in place and its
    outputs written straight into fresh arrays, a call copies nothing."""
    g, inputs = padded_reads(ll.f32)
    comp = ll.compile(g)
    space = comp.choice_space()
    runtimes = [CPURuntime(llir_of(g)), CPURuntime(extract(space.fused_genome()))]
    comp.egraph.close()
    expected = ll.ReferenceRuntime(g).run(inputs)
    copies: list[tuple[int, ...]] = []
    copyto = np.copyto

    def counted(destination: np.ndarray, *args, **kwargs) -> None:
        copies.append(destination.shape)
        copyto(destination, *args, **kwargs)

    monkeypatch.setattr(np, "copyto", counted)
    for runtime in runtimes:
        runtime.run(inputs)  # the plan is built
        copies.clear()
        for have, want in zip(runtime.run(inputs), expected.values()):
            np.testing.assert_array_equal(have, want)
        assert copies == []


def test_large_kernels_run_in_parallel_and_agree() -> None:
    rows = PARALLEL_THRESHOLD // 64
    rng = np.random.default_rng(4)
    g = ll.Graph()
    x, y = g.tensor((rows, 128), "x"), g.tensor((128,), "y")
    ids, table = g.tensor((rows,), "ids", ll.i32), g.tensor((100, 64), "table")
    (x * y).exp2().output("scaled")
    x.sum(-1).output("rows")
    x.max(0).output("columns")
    ll.embedding(ids, table).output("embedded")
    ll.concat([x, x], 0).output("stacked")  # padded reads of one axis, in parallel chunks
    x.reshape(-1).pad([(5, 3000)]).sin().output("padded_sin")
    check_graph(g, {"x": rng.standard_normal((rows, 128), np.float32), "y": rng.standard_normal(128, np.float32),
                    "ids": rng.integers(0, 100, rows, dtype=np.int32),
                    "table": rng.standard_normal((100, 64), np.float32)})


def test_a_loop_runs_in_parallel_by_its_work_not_its_size() -> None:
    """At half ``PARALLEL_THRESHOLD`` elements a plain sum runs on one thread, a SiLU region (an exp2 and a
    reciprocal at each element) and a softmax row region (three passes along its rows) in parallel; all agree with
    the reference."""
    n = PARALLEL_THRESHOLD // 2
    g = ll.Graph()
    x, y = g.tensor((n // 64, 64), "x"), g.tensor((n // 64, 64), "y")
    (x + y).output("sum")
    (x * (1 / (1 + (x * -1.4426950408889634).exp2()))).output("silu")
    x.softmax(-1).output("softmax")
    comp = ll.compile(g)
    comp.genome = comp.choice_space().fused_genome()
    runtime = CPURuntime(comp.llir())
    plan = runtime.plan()
    parallel = {}
    for kid, step in plan.steps:
        kernel = comp.llir().kernels[kid]
        if kernel.op in ("Add", "FusionEnd"):
            source = inspect.getsource(step.function.py_func)
            label = kernel.op if kernel.op == "Add" else "row" if "acc" in source or "key" in source else "silu"
            parallel[label] = "numba.prange" in source
    assert parallel == {"Add": False, "silu": True, "row": True}
    rng = np.random.default_rng(5)
    check_graph(g, {"x": rng.standard_normal((n // 64, 64), np.float32),
                    "y": rng.standard_normal((n // 64, 64), np.float32)})


MODELS = {
    "mlp": lambda: (MLP(32, 64, 16), mlp_inputs(4, 32)),
    "attention": lambda: (SelfAttentionBlock(32, 4), attention_inputs(2, 8, 32)),
    "llama": lambda: (LlamaBlock(64, 4, 128, 16), llama_inputs(2, 16, 64)),
}


@pytest.mark.parametrize("commute", [False, True], ids=["", "commuted"])
@pytest.mark.parametrize("name", list(MODELS))
def test_models_match_the_reference_and_torch(name: str, commute: bool) -> None:
    """Commuted operands turn each matmul around (weights first): it still lands in place, as W x transposed."""
    model, inputs = MODELS[name]()
    compiled = ll.compile(model.eval(), inputs)
    arrays = {n: to_numpy(x) for n, x in zip(compiled.signature.inputs, inputs)}
    (got,) = check_graph(compiled.graph, arrays, scale=5.0, runtime=CPURuntime(llir_of(compiled.graph, commute)))
    with torch.no_grad():
        np.testing.assert_allclose(got, model(*inputs).numpy(), atol=1e-4, rtol=1e-4)


# ---- plans, buffers and weights -------------------------------------------------------------


@pytest.fixture
def rebind_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans read inputs in place and write outputs straight whatever their size (``REBIND_BYTES`` 0), so that small
    arrays test the binders."""
    monkeypatch.setattr("luminal_lab.runtime.cpu.REBIND_BYTES", 0)


def test_inputs_and_outputs_under_rebind_bytes_are_copied_and_larger_ones_bound() -> None:
    """Rebinding a plan to the caller's arrays costs the same at any size: an input or output smaller than
    ``REBIND_BYTES`` goes through the plan's buffer (copied), one of that size or more is read in place and written
    straight into a fresh array."""
    rows = REBIND_BYTES // (4 * 32)  # a (rows, 32) f32 array holds REBIND_BYTES exactly
    g = ll.Graph()
    big, small = g.tensor((rows, 32), "big"), g.tensor((rows - 1, 32), "small")
    big.sin().output("y")
    small.cos().output("z")
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(5)
    outputs = []
    for _ in range(2):
        inputs = {"big": rng.standard_normal((rows, 32)).astype(np.float32),
                  "small": rng.standard_normal((rows - 1, 32)).astype(np.float32)}
        got = runtime.run(inputs)
        expected = ll.ReferenceRuntime(g).run(inputs)
        for value, name in zip(got, ("y", "z")):
            np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-6)
        outputs.append(got)
    plan = runtime.plan()
    assert set(plan.in_place) == {"big"}
    assert [output.buffer.shape for output in plan.direct] == [(rows, 32)]
    slots = {slot.name: slot.buffer for slot in plan.inputs}
    assert plan.in_place["big"].bound is inputs["big"]  # the caller's array read itself; the small one copied in
    assert not np.shares_memory(slots["big"], inputs["big"]) and not np.shares_memory(slots["small"], inputs["small"])
    assert all(not np.shares_memory(x, y) for x, y in zip(*outputs))  # each call's outputs are its own
    assert not any(np.shares_memory(x, buffer) for x in outputs[1] for buffer in plan.buffers.values())


def test_buffers_alive_at_no_common_step_share_the_arena() -> None:
    """``pack`` keeps buffers whose lifetimes overlap apart in the arena and lets the others share it; a plan of a
    fused llama block so packed (its regions reading at their FusionEnd) computes what torch does in less memory than
    its buffers take apart."""
    offsets, size = pack({1: 100, 2: 64, 3: 200}, {1: (0, 1), 2: (1, 2), 3: (2, 3)})
    assert offsets == {3: 0, 1: 0, 2: 256} and size == 320  # sizes rounded up to ALIGN (64 bytes)
    model, inputs = MODELS["llama"]()
    comp = ll.compile(model.eval(), inputs)
    comp.genome = comp.choice_space().fused_genome()
    with torch.no_grad():
        torch.testing.assert_close(comp.run(*inputs), model(*inputs), atol=1e-4, rtol=1e-4)
    runtime = comp._runtime(comp.genome, "cpu")
    assert find_regions(runtime.llir)
    plan, lifetimes = runtime.plan(), runtime.lifetimes()
    carved = {kid: b for kid, b in plan.buffers.items() if np.shares_memory(b, runtime._arena)}
    together = [(a, b) for a in carved for b in carved if a < b
                and lifetimes[a][0] <= lifetimes[b][1] and lifetimes[b][0] <= lifetimes[a][1]]
    assert together and not any(np.shares_memory(carved[a], carved[b]) for a, b in together)
    start = runtime._arena.ctypes.data
    used = max(b.ctypes.data + b.nbytes for b in carved.values()) - start
    assert used < sum(b.nbytes for b in carved.values()) // 2  # what is alive at once: under half of them all


def test_a_plan_launched_again_reads_the_same_inputs() -> None:
    """``profile`` and ``fastest`` launch a plan's steps again without copying its inputs in again: no buffer shares
    an input's memory, so a second launch computes what the first did."""
    g = ll.Graph()
    x = g.tensor((64,), "x")
    (((x.sin() * 2.0).exp() + 1.0).cos() * 3.0).output("y")
    runtime = CPURuntime(llir_of(g))
    inputs = {"x": np.random.default_rng(2).standard_normal(64).astype(np.float32)}
    (first,) = runtime.run(inputs)
    plan = runtime._prepare(inputs, {}, None)
    for _ in range(2):
        runtime._launch(plan)
    np.testing.assert_array_equal(runtime._collect(plan)[0], first)


def _mlp_runtime() -> tuple[Graph, CPURuntime, dict[str, np.ndarray]]:
    model, inputs = MLP(32, 64, 16), mlp_inputs(4, 32)
    graph = ll.compile(model.eval(), inputs).graph
    return graph, CPURuntime(llir_of(graph)), {"x": to_numpy(inputs[0])}


@pytest.mark.usefixtures("rebind_any_size")
def test_weights_are_bound_once_and_persist() -> None:
    graph, runtime, inputs = _mlp_runtime()
    first = runtime.run(inputs, graph.weights)
    second = runtime.run(inputs, graph.weights)
    third = runtime.run(inputs)  # the bound weights persist without being passed again
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[0], third[0])
    plan = runtime.plan()
    assert set(plan.in_place) == set(graph.weights) | {"x"}  # every read is a loop kernel's or a matmul's
    assert not any(slot.buffer.any() for slot in plan.weights)  # read where the caller keeps them: never copied
    name = next(n for n in graph.weights if n.endswith("weight"))
    graph.weights[name] = graph.weights[name] * 2  # a different array: bound anew
    rebound = runtime.run(inputs, graph.weights)[0]
    (expected,) = ll.ReferenceRuntime(graph).run(inputs).values()
    np.testing.assert_allclose(rebound, expected, atol=1e-5, rtol=1e-5)
    assert not np.allclose(rebound, first[0])


def test_buffers_are_reused_and_outputs_are_fresh() -> None:
    graph, runtime, inputs = _mlp_runtime()
    first = runtime.run(inputs, graph.weights)
    plan = runtime.plan()
    buffers = dict(plan.buffers)
    addresses = {kid: b.ctypes.data for kid, b in buffers.items()}
    second = runtime.run(inputs, graph.weights)
    assert runtime.plan() is plan
    assert all(plan.buffers[kid] is b and b.ctypes.data == addresses[kid] for kid, b in buffers.items())
    assert first[0] is not second[0] and not np.shares_memory(first[0], second[0])
    assert not any(np.shares_memory(second[0], b) for b in buffers.values())
    first[0][...] = 0  # the caller owns its outputs
    np.testing.assert_array_equal(runtime.run(inputs, graph.weights)[0], second[0])


@pytest.fixture
def blas_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Contractions of any size run as library matmuls (``DOT_PRODUCTS`` 0), so that small ones test that path."""
    monkeypatch.setattr("luminal_lab.runtime.cpu.DOT_PRODUCTS", 0)


@pytest.mark.usefixtures("blas_any_size")
def test_a_contraction_runs_as_one_matmul_and_its_decomposed_form_agrees() -> None:
    model, inputs = MLP(32, 64, 16), mlp_inputs(4, 32)
    comp = ll.compile(model.eval(), inputs)
    space = comp.choice_space()
    contracted, decomposed = extract(space.smallest_genome()), extract(space.smallest_genome(without=("Matmul",)))
    assert contracted.op_counts()["Matmul"] == 2 and not any(k.op == "Mul" and len(k.shape) == 3
                                                             for k in contracted.kernels)
    assert decomposed.op_counts()["Matmul"] == 0  # each linear layer as the broadcast product and its sum
    products = [k for k in decomposed.kernels if k.op == "Mul" and len(k.shape) == 3]
    assert len(products) == 2
    arrays = {"x": to_numpy(inputs[0])}
    expected = model(*inputs).detach().numpy()
    runtime = CPURuntime(contracted)
    (got,) = runtime.run(arrays, comp.graph.weights)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # the contraction's buffer is its result: no product is materialised
    assert {kid for kid, _ in runtime.plan().steps} == set(runtime.plan().buffers) - {
        k.id for k in contracted.kernels if k.op in ("Input", "Constant", "Iota")} | set(contracted.outputs)
    (slow,) = CPURuntime(decomposed).run(arrays, comp.graph.weights)
    np.testing.assert_allclose(slow, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("rows", "inner", "cols", "layout", "library"), [
    (1, 256, 320, "rows", False),  # a decode step's linear layer: x times W transposed, W read along its rows
    (1, 256, 320, "columns", True),  # x times W: dot products would read W down its columns
    (48, 256, 320, "rows", True),  # a prefill's: a matrix product
    (4, 16, 16, "columns", False),  # under DOT_PRODUCTS multiply-adds
], ids=["vector-rows", "vector-columns", "matrix", "tiny"])
def test_matrix_vector_products_and_tiny_contractions_run_as_dot_products(rows: int, inner: int, cols: int,
                                                                          layout: str, library: bool) -> None:
    """A matrix times a vector, the matrix read along its rows, runs as dot products in a loop kernel (numba streams
    the matrix faster than MKL's gemv), as does a contraction under ``DOT_PRODUCTS`` multiply-adds; a matrix read down
    its columns, or a matrix product, is one library matmul."""
    g = ll.Graph()
    x = g.tensor((rows, inner), "x")
    w = g.tensor((cols, inner) if layout == "rows" else (inner, cols), "w")
    (x @ (w.T if layout == "rows" else w)).output("y")
    llir = extract(ll.compile(g).choice_space().smallest_genome())
    assert llir.op_counts()["Matmul"] == 1
    rng = np.random.default_rng(6)
    inputs = {"x": rng.standard_normal((rows, inner), np.float32),
              "w": rng.standard_normal((cols, inner) if layout == "rows" else (inner, cols), np.float32)}
    runtime = CPURuntime(llir)
    (got,) = runtime.run(inputs)
    np.testing.assert_allclose(got, inputs["x"] @ (inputs["w"].T if layout == "rows" else inputs["w"]),
                               rtol=1e-4, atol=1e-4)
    steps = [step for _, step in runtime.plan().steps]
    assert [type(step).__name__ for step in steps if isinstance(step, (_Matmul, _Launch))] == \
        ["_Matmul" if library else "_Launch"]


@pytest.mark.usefixtures("blas_any_size")
def test_a_half_precision_matmul_casts_its_result_silenced_and_an_overflow_warns_of_nothing() -> None:
    """An f16 product is computed in f32 and cast back by numpy (``CPUPlan.warns``): a sum past f16's range is inf,
    with no warning."""
    g = ll.Graph()
    (g.tensor((2, 3), "a", ll.f16) @ g.tensor((3, 2), "b", ll.f16)).output("c")
    llir = extract(ll.compile(g).choice_space().smallest_genome())
    assert llir.op_counts()["Matmul"] == 1
    runtime = CPURuntime(llir)
    assert runtime.plan().warns
    inputs = {"a": np.full((2, 3), 200, np.float16), "b": np.full((3, 2), 200, np.float16)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (c,) = runtime.run(inputs)
    np.testing.assert_array_equal(c, np.full((2, 2), np.inf, np.float16))


def test_a_small_matmul_runs_on_one_torch_thread_and_leaves_the_count_as_it_was() -> None:
    """Below SERIAL_MATMUL multiply-adds torch's thread pool only waits for cores (16 ms on a busy machine)."""
    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()
    for rows, inner, cols in ((32, 64, 64), (64, 128, 128)):
        lhs, rhs = rng.standard_normal((1, rows, inner), np.float32), rng.standard_normal((1, inner, cols), np.float32)
        out = np.empty((1, rows, cols), np.float32)
        matmul = _Matmul(lhs, rhs, out)
        matmul()
        assert matmul.serial == (rows * inner * cols < SERIAL_MATMUL)
        assert torch.get_num_threads() == threads
        np.testing.assert_allclose(out, lhs @ rhs, rtol=1e-5, atol=1e-5)


def test_a_materialised_product_over_the_memory_budget_is_refused_naming_it() -> None:
    g = ll.Graph()
    (g.tensor((256, 256), "a") @ g.tensor((256, 256), "b")).output("c")
    space = ll.compile(g).choice_space()
    decomposed, contracted = (extract(space.smallest_genome(without)) for without in (("Matmul",), ()))
    arrays = {n: np.ones((256, 256), np.float32) for n in "ab"}
    budget = 16 * 2**20
    message = r"^k\d+ \(Mul \[256, 256, 256\] f32\) needs 64 MiB: the plan's buffers need 65 MiB in all, over the CPU "
    with pytest.raises(ll.MemoryBudgetError, match=message + r"memory budget of 16 MiB$"):
        CPURuntime(decomposed, memory_budget=budget).run(arrays)
    (c,) = CPURuntime(contracted, memory_budget=budget).run(arrays)
    np.testing.assert_array_equal(c, np.full((256, 256), 256, np.float32))


@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16, ll.f64, ll.i64])  # (an i32 sum casts to i64 first)
def test_contractions_without_rows_or_columns_are_dot_products(dtype: ll.DType) -> None:
    """``(x * y).sum(-1)`` is a contraction BLAS has no shape for: one loop nest of dot products, no product."""
    g = ll.Graph()
    x, y = g.tensor((5, 7), "x", dtype), g.tensor((5, 7), "y", dtype)
    (x * y).sum(-1).output("d")
    (x * x.permute((0, 1))).sum(-1).output("squares")
    comp = ll.compile(g)
    llir = extract(comp.choice_space().smallest_genome())
    assert llir.op_counts()["Matmul"] == 2 and llir.op_counts()["Mul"] == 0
    rng = np.random.default_rng(4)
    inputs = {n: (rng.uniform(-2, 2, (5, 7)) if dtype.is_float else rng.integers(-9, 9, (5, 7))).astype(dtype.numpy)
              for n in "xy"}
    got = CPURuntime(llir).run(inputs)
    expected = ll.ReferenceRuntime(g).run(inputs)
    for value, name in zip(got, ("d", "squares")):
        assert_matches(value, expected[name], dtype, what=name)


@pytest.mark.usefixtures("rebind_any_size")
def test_contiguous_inputs_are_read_in_place_and_outputs_written_straight_into_fresh_arrays() -> None:
    g = ll.Graph()
    a, b = g.tensor((64, 32), "a"), g.tensor((64, 32), "b")
    (a + b).sin().output("y")
    (a * 2.0).sum(-1).output("s")
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal((64, 32)).astype(np.float32) for n in "ab"}
    first = runtime.run(inputs)
    second = runtime.run(inputs)
    plan = runtime.plan()
    assert set(plan.in_place) == {"a", "b"} and len(plan.direct) == 2
    assert all(plan.in_place[name].bound is inputs[name] for name in "ab")  # read in place, nothing copied in
    for got, name in zip(first, ("y", "s")):
        np.testing.assert_allclose(got, ll.ReferenceRuntime(g).run(inputs)[name], rtol=1e-6, atol=1e-6)
    assert all(not np.shares_memory(x, y) for x, y in zip(first, second))  # each call's outputs are its own
    assert not any(np.shares_memory(x, buffer) for x in first for buffer in plan.buffers.values())
    # a transposed (non-contiguous) input is copied in, and the result is the same
    transposed = {"a": np.ascontiguousarray(inputs["a"].T).T, "b": inputs["b"]}
    np.testing.assert_array_equal(runtime.run(transposed)[0], first[0])
    assert plan.in_place["a"].address == plan.inputs[0].buffer.ctypes.data  # a copied in: its slot read
    assert plan.in_place["b"].bound is inputs["b"] and plan.in_place["b"].address == inputs["b"].ctypes.data


@pytest.mark.usefixtures("rebind_any_size")
def test_an_input_read_in_place_is_pointed_at_again_only_for_other_memory() -> None:
    """The array handed over last, or another view of its memory, leaves the kernels as they are (values changed in
    place are read as they are now); an array over other memory points them anew; each output is fresh memory."""
    g = ll.Graph()
    (g.tensor((64, 32), "a").exp() * 2.0).output("y")
    runtime = CPURuntime(llir_of(g))
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    runtime.run({"a": a})
    place, pointed = runtime.plan().in_place["a"], []
    (group,) = place.groups
    group.binders = [lambda flat, binders=list(group.binders): (pointed.append(flat), [b(flat) for b in binders])]
    for value in (a, a, a[...], np.copy(a), a):
        value += 0.5  # values changed in place between calls
        np.testing.assert_allclose(runtime.run({"a": value})[0], np.exp(value) * 2.0, rtol=1e-6)
    assert [np.shares_memory(flat, a) for flat in pointed] == [False, True]  # only the copy, then a again
    output = runtime.plan().direct[0]
    seen = [runtime.run({"a": a})[0] for _ in range(2)]
    assert output.address == seen[1].ctypes.data and not np.shares_memory(*seen)


@pytest.mark.usefixtures("rebind_any_size")
def test_matmul_operands_are_read_in_place_and_an_output_read_downstream_is_written_straight() -> None:
    g = ll.Graph()
    x, w = g.tensor((16, 32), "x"), g.tensor((32, 24), "w")
    h = x.matmul(w)
    h.output("h")  # an output that later kernels read too
    (h.sin() * 2.0).output("y")
    x.matmul(w.permute(1, 0).permute(1, 0)).sum(-1).output("s")  # a second read of both, through a view
    runtime = CPURuntime(llir_of(g))
    rng = np.random.default_rng(1)
    outputs = []
    for _ in range(2):
        inputs = {"x": rng.standard_normal((16, 32)).astype(np.float32),
                  "w": rng.standard_normal((32, 24)).astype(np.float32)}
        got = runtime.run(inputs)
        expected = ll.ReferenceRuntime(g).run(inputs)
        for value, name in zip(got, ("h", "y", "s")):
            assert_matches(value, expected[name], ll.f32, what=name)
        outputs.append(got)
    plan = runtime.plan()
    assert set(plan.in_place) == {"x", "w"} and len(plan.direct) == 3
    assert all(plan.in_place[name].bound is inputs[name] for name in ("x", "w"))  # read in place, nothing copied in
    h_kernel = next(k.sources[0][0] for k in runtime.llir.kernels if k.op == "Output" and k.arg == 0)
    assert any(output.buffer is plan.buffers[h_kernel] and np.shares_memory(output.bound, outputs[1][0])
               for output in plan.direct)  # h went straight into the caller's array, not through the plan's buffer
    assert not np.shares_memory(outputs[0][0], outputs[1][0])


@pytest.mark.usefixtures("rebind_any_size")
def test_weights_read_in_place_are_bound_in_every_plan() -> None:
    g = ll.Graph()
    rng = np.random.default_rng(2)
    weights = {"w": rng.standard_normal((8, 4)).astype(np.float32)}
    x, w = g.tensor(("n", 8), "x"), g.weight("w", weights["w"])
    (x.matmul(w) + 1.0).output("y")
    runtime = CPURuntime(llir_of(g))
    for size in (3, 5, 3, 7):
        if size == 7:  # a different weight array: every plan reads the new one
            weights = {"w": rng.standard_normal((8, 4)).astype(np.float32)}
        inputs = {"x": rng.standard_normal((size, 8)).astype(np.float32)}
        (got,) = runtime.run(inputs, weights, {"n": size})
        np.testing.assert_allclose(got, inputs["x"] @ weights["w"] + 1.0, rtol=1e-5, atol=1e-5)
        assert "w" in runtime.plan({"n": size}).in_place
    (got,) = runtime.run({"x": inputs["x"][:3].copy()}, weights, {"n": 3})  # the first plan, with the new weight
    np.testing.assert_allclose(got, inputs["x"][:3] @ weights["w"] + 1.0, rtol=1e-5, atol=1e-5)
    assert not runtime.plan({"n": 3}).weights[0].buffer.any()  # never copied: read where the caller keeps it
    transposed = {"w": np.asfortranarray(weights["w"] * 3)}  # not C-contiguous: copied into the slot, once
    for size in (3, 5):
        (got,) = runtime.run({"x": inputs["x"][:size].copy()}, transposed, {"n": size})
        np.testing.assert_allclose(got, inputs["x"][:size] @ transposed["w"] + 1.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(runtime.plan({"n": 3}).weights[0].buffer, transposed["w"])


def test_a_plan_given_its_last_weights_binds_none_until_another_plan_moves_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call with the weight arrays of the plan's last call binds no weight (a decode step's twenty-odd checks), unless
    some plan copied or bound a weight since: then the plan binds its own again, as another may have overwritten the
    slot they share."""
    g = ll.Graph()
    rng = np.random.default_rng(3)
    x, w = g.tensor(("n", 8), "x"), g.tensor((8, 4), "w")
    (x.matmul(w) + 1.0).output("y")
    runtime = CPURuntime(llir_of(g), memory_budget=1 << 30)
    first, second = (np.asfortranarray(rng.standard_normal((8, 4)).astype(np.float32)) for _ in range(2))  # copied
    binds = []
    original = runtime._bind_weight
    monkeypatch.setattr(runtime, "_bind_weight", lambda *args: binds.append(args[1].name) or original(*args))
    for size, weight, bound in ((3, first, ["w"]), (3, first, []), (5, second, ["w"]), (3, first, ["w"]),
                                (3, first, []), (5, second, ["w"])):
        binds.clear()
        inputs = {"x": rng.standard_normal((size, 8)).astype(np.float32)}
        (got,) = runtime.run(inputs, {"w": weight}, {"n": size})
        np.testing.assert_allclose(got, inputs["x"] @ weight + 1.0, rtol=1e-5, atol=1e-5)
        assert binds == bound, (size, binds)


def test_a_plan_for_a_new_size_lowers_only_the_views_that_depend_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CPURuntime.lowered`` remembers each view's read by the values of its own symbols: a second size re-lowers the
    views of ``n``, not those of the weight, and every size still reads what it should."""
    g = ll.Graph()
    rng = np.random.default_rng(8)
    weights = {"w": rng.standard_normal((8, 4)).astype(np.float32), "v": rng.standard_normal((4,)).astype(np.float32)}
    x, w, v = g.tensor(("n", 8), "x"), g.weight("w", weights["w"]), g.weight("v", weights["v"])
    ((x.matmul(w) + 1.0) * v).output("y")
    (w.sum(-1) * 2.0).output("z")
    runtime = CPURuntime(llir_of(g))
    lowered = []
    monkeypatch.setattr("luminal_lab.runtime.cpu.lower", lambda tracker, *rest: lowered.append(tracker) or lower(
        tracker, *rest))
    by_size = {}
    for size in (3, 5):
        lowered.clear()
        inputs = {"x": rng.standard_normal((size, 8)).astype(np.float32)}
        y, z = runtime.run(inputs, weights, {"n": size})
        np.testing.assert_allclose(y, (inputs["x"] @ weights["w"] + 1.0) * weights["v"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(z, weights["w"].sum(-1) * 2.0, rtol=1e-5, atol=1e-5)
        by_size[size] = [{name for e in (*t.dims, *t.strides, *t.masks) for name in e.variables()} for t in lowered]
    assert {frozenset(names) for names in by_size[3]} == {frozenset(), frozenset({"n"})}
    assert by_size[5] and all(names == {"n"} for names in by_size[5]) and len(by_size[5]) < len(by_size[3])
    limit = len(runtime._reads)
    monkeypatch.setattr("luminal_lab.runtime.cpu.LOWERED_READS", limit)  # full: the oldest go first
    inputs = {"x": rng.standard_normal((7, 8)).astype(np.float32)}
    y, _ = runtime.run(inputs, weights, {"n": 7})
    np.testing.assert_allclose(y, (inputs["x"] @ weights["w"] + 1.0) * weights["v"], rtol=1e-5, atol=1e-5)
    assert len(runtime._reads) == limit


def test_an_input_read_by_more_than_loop_kernels_is_copied() -> None:
    g = ll.Graph()
    a = g.tensor((8, 4), "a")
    a.sqrt().output("r")
    a.output("same")  # the output reads the input's buffer itself
    runtime = CPURuntime(llir_of(g))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    r, same = runtime.run({"a": x})
    assert runtime.plan().in_place == {} and np.array_equal(runtime.plan().inputs[0].buffer, x)
    np.testing.assert_array_equal(same, x)
    assert not np.shares_memory(same, x)
    np.testing.assert_allclose(r, np.sqrt(x))


def test_boundary_is_strict() -> None:
    graph, runtime, inputs = _mlp_runtime()
    with pytest.raises(ll.DTypeBoundaryError):
        runtime.run({"x": inputs["x"].astype(np.float64)}, graph.weights)
    with pytest.raises(ll.ShapeError):
        runtime.run({"x": inputs["x"][:2]}, graph.weights)
    with pytest.raises(ll.LuminalError, match="missing input 'x'"):
        runtime.run({}, graph.weights)


def test_unknown_op_is_named() -> None:
    shape = (ll.Expr.num(3),)
    contiguous = ShapeTracker.contiguous(shape)
    llir = LLIR([Kernel(0, "Input", (), shape, ll.f32, "x"), Kernel(1, "Frobnicate", ((0, contiguous),), shape, ll.f32),
                 Kernel(2, "Output", ((1, contiguous),), shape, ll.f32, 0)], [2])
    with pytest.raises(ll.UnsupportedOpError, match="Frobnicate"):
        CPURuntime(llir).run({"x": np.zeros(3, np.float32)})


def test_profile_times_every_kernel_and_the_run() -> None:
    graph, runtime, inputs = _mlp_runtime()
    profile = runtime.profile(inputs, graph.weights, warmup=1, trials=3)
    assert set(profile.kernels) == {kid for kid, _ in runtime.plan().steps}
    assert all(t > 0 for t in profile.kernels.values()) and profile.total > 0
    assert runtime.llir.times == {}  # the LLIR gets its times from the profile: comp.profile() passes them
    assert profile.hot_spots(2)[0][2] == max(profile.kernels.values())


# ---- the kernel cache ---------------------------------------------------------------------


def test_each_source_compiles_once_per_process() -> None:
    g = ll.Graph()
    a, b = g.tensor((5, 7), "a"), g.tensor((5, 7), "b")
    ((a + b) * (b + a)).exp2().output("y")
    inputs = {"a": np.ones((5, 7), np.float32), "b": np.ones((5, 7), np.float32)}
    runtime = CPURuntime(llir_of(g))
    runtime.run(inputs)
    steps = dict(runtime.plan().steps)
    first, second = (steps[k.id] for k in runtime.llir.kernels if k.op == "Add")
    assert first.function is second.function  # one source, one dispatcher, compiled once for both Adds
    stats = kernel_cache().stats
    before = (stats.compiled, stats.loaded)
    CPURuntime(llir_of(g)).run(inputs)  # a second runtime of the same LLIR compiles and loads nothing
    assert (stats.compiled, stats.loaded) == before


_CACHE_PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from luminal_lab import Expr, ShapeTracker, f32
    from luminal_lab.runtime.cache import kernel_cache
    from luminal_lab.runtime.cpu import CPURuntime
    from luminal_lab.llir import LLIR, Kernel
    rows, cols = (Expr.num(4),), (Expr.num(4), Expr.num(6))
    llir = LLIR([Kernel(0, "Input", (), cols, f32, "x"),
                 Kernel(1, "Exp2", ((0, ShapeTracker.contiguous(cols)),), cols, f32),
                 Kernel(2, "SumReduce", ((1, ShapeTracker.contiguous(cols)),), rows, f32),
                 Kernel(3, "Output", ((2, ShapeTracker.contiguous(rows)),), rows, f32, 0)], [3])
    (y,) = CPURuntime(llir).run({"x": np.arange(24, dtype=np.float32).reshape(4, 6) / 24})
    stats = kernel_cache().stats
    print(json.dumps({"compiled": stats.compiled, "loaded": stats.loaded, "y": y.tolist()}))
""")


def _probe(cache: Path, workers: int = 1) -> dict:
    """``_CACHE_PROBE``'s answer, run in a fresh process with ``cache`` as its kernel cache."""
    env = dict(os.environ, **{CACHE_ENV: str(cache), WORKERS_ENV: str(workers)})
    done = subprocess.run([sys.executable, "-c", _CACHE_PROBE, str(ROOT)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


def test_a_new_process_loads_kernels_from_disk(tmp_path: Path) -> None:
    cold, warm = _probe(tmp_path), _probe(tmp_path)
    assert cold["compiled"] > 0 and cold["loaded"] == 0
    assert warm["compiled"] == 0 and warm["loaded"] == cold["compiled"]
    assert warm["y"] == cold["y"]
    assert list(tmp_path.glob("lk_*.py")) and not list(tmp_path.glob("*.tmp"))


def test_worker_processes_compile_a_plans_kernels_into_the_disk_cache(tmp_path: Path) -> None:
    """With two workers, the plan's two new kernels are compiled side by side in worker processes; this process only
    loads them (and a new process too)."""
    cold, warm = _probe(tmp_path, workers=2), _probe(tmp_path, workers=2)
    assert cold["compiled"] == 0 and cold["loaded"] == 2
    assert warm["compiled"] == 0 and warm["loaded"] == 2
    assert warm["y"] == cold["y"] == pytest.approx((2 ** (np.arange(24) / 24)).reshape(4, 6).sum(1).tolist())


def test_workers_are_handed_the_longest_kernel_sources_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """So that no worker is left compiling a long kernel alone at the end; the caller then loads (here: compiles)
    each one, and the plan runs."""
    from luminal_lab.runtime import cache

    monkeypatch.setenv(WORKERS_ENV, "2")
    monkeypatch.setattr(KernelCache, "_functions", {})  # as in a process that has compiled none of them yet
    handed = []
    monkeypatch.setattr(cache._WORKERS, "compile", lambda directory, requests: handed.extend(requests))
    rows, cols = (ll.Expr.num(4),), (ll.Expr.num(4), ll.Expr.num(6))
    llir = LLIR([Kernel(0, "Input", (), cols, ll.f32, "x"),
                 Kernel(1, "Exp2", ((0, ShapeTracker.contiguous(cols)),), cols, ll.f32),
                 Kernel(2, "SumReduce", ((1, ShapeTracker.contiguous(cols)),), rows, ll.f32),
                 Kernel(3, "Output", ((2, ShapeTracker.contiguous(rows)),), rows, ll.f32, 0)], [3])
    x = np.arange(24, dtype=np.float32).reshape(4, 6) / 24
    (y,) = CPURuntime(llir, cache=KernelCache(tmp_path)).run({"x": x})
    np.testing.assert_allclose(y, (2 ** x).sum(1), rtol=1e-6)
    lengths = [len(source) for source, _ in handed]
    assert len(lengths) == 2 and lengths == sorted(lengths, reverse=True) and lengths[0] > lengths[1]


DAMAGE = {"module cut short": "lk_*.py", "numba's index cut short": "__pycache__/lk_*.nbi",
          "machine code cut short": "__pycache__/lk_*.nbc"}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_kernel_damaged_on_disk_is_discarded_and_compiled_again(damage: str, tmp_path: Path) -> None:
    """What a writer killed halfway, or another version, leaves: each damaged kernel is compiled again, once."""
    cold = _probe(tmp_path)
    damaged = sorted(tmp_path.glob(DAMAGE[damage]))
    assert len(damaged) == cold["compiled"] == 2
    for path in damaged:
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    again = _probe(tmp_path)
    assert (again["compiled"], again["loaded"], again["y"]) == (2, 0, cold["y"])
    discarded = [line for line in again["stderr"].splitlines() if "luminal_lab: discarded the cached kernel" in line]
    assert len(discarded) == 2, again["stderr"]
    whole = _probe(tmp_path)
    assert (whole["compiled"], whole["loaded"]) == (0, 2), "the cache is whole again"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_read_only_kernel_directory_compiles_into_a_temporary_one_and_warns_why(workers: int,
                                                                                  tmp_path: Path) -> None:
    with read_only(tmp_path / "kernels") as directory:
        probe = _probe(directory, workers)
        assert not any(directory.iterdir())
    assert probe["y"] == pytest.approx((2 ** (np.arange(24) / 24)).reshape(4, 6).sum(1).tolist())
    assert probe["compiled"] + probe["loaded"] == 2
    (warning,) = [line for line in probe["stderr"].splitlines() if "luminal_lab:" in line]
    assert re.search(rf"UserWarning: luminal_lab: the kernel cache directory {re.escape(str(directory))} is not "
                     r"writable \(PermissionError: .+\); kernels are compiled into /\S+luminal_lab-kernels-\S+, for "
                     r"this process only$", warning), warning


def test_a_bad_number_of_workers_is_named() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(WORKERS_ENV, "two")
        with pytest.raises(ValueError, match="LUMINAL_LAB_COMPILE_WORKERS must be a whole number"):
            compile_workers()


def test_a_compile_worker_whose_caller_stopped_listening_exits_quietly() -> None:
    """A search's builders closed mid-build leave a worker answering into a closed pipe: it exits, no traceback."""
    worker = subprocess.Popen([sys.executable, "-m", "luminal_lab.runtime.compile_worker"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    worker.stdout.close()  # the caller is gone
    _, errors = worker.communicate(b"{}\n", timeout=60)
    assert worker.returncode == 0 and b"Traceback" not in errors, errors.decode()


def test_cache_directory_comes_from_the_environment(kernel_directory: Path) -> None:
    assert kernel_cache().directory == kernel_directory
    assert isinstance(kernel_cache(), KernelCache) and kernel_cache() is kernel_cache()


def test_inputs_checked_by_a_boundary_are_copied_in_without_checking_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Compiled.run`` hands the runtime inputs its boundary checked (``checked=True``): they go straight into their
    slots, and the results are those of a checked run; a weight new to the runtime is still checked."""
    g = ll.Graph()
    x = g.tensor((4, 8), "x")
    w = g.weight("w", np.linspace(-1, 1, 8, dtype=np.float32))
    (x * w).exp().output("y")
    comp = ll.compile(g)
    x = torch.randn(4, 8)
    expected = comp.run(x)
    runtime = comp._runtime(comp.genome, "cpu")
    checks = []
    real = CPURuntime._fill
    monkeypatch.setattr(CPURuntime, "_fill", lambda self, plan, slot, value: (checks.append(slot.name),
                                                                              real(self, plan, slot, value)))
    torch.testing.assert_close(comp.run(x), expected)
    assert checks == []
    runtime.run({"x": x.numpy()})
    assert checks == ["x"]
    with pytest.raises(ll.ShapeError, match="'w' has shape"):
        runtime.run({"x": x.numpy()}, {"w": np.zeros(3, np.float32)}, checked=True)


@pytest.mark.parametrize(("dtype", "rows"), [(ll.f32, True), (ll.f64, True), (ll.f16, False)])
def test_a_row_times_a_matrix_strided_along_the_contraction_sums_scaled_rows(dtype: ll.DType, rows: bool) -> None:
    """Attention's probabilities times its values at decode (``[b, h, 1, s] @ [b, h, s, d]``, the values a cache laid
    out ``[b, s, h, d]``) and a vector times a row-major matrix: the matrix's rows scaled and summed
    (``accumulate_source``), in f32 and f64; f16, which must round its sums in f32, keeps dot products."""
    g = ll.Graph()
    probs, cache = g.tensor((1, 2, 1, 24), "p", dtype), g.tensor((1, 24, 2, 16), "v", dtype)
    (probs @ cache.permute((0, 2, 1, 3))).output("attended")
    vector, matrix = g.tensor((12,), "x", dtype), g.tensor((12, 40), "w", dtype)
    (vector @ matrix).output("y")
    llir = extract(ll.compile(g).choice_space().smallest_genome())
    runtime = CPURuntime(llir)
    rng = np.random.default_rng(8)
    inputs = {name: rng.uniform(-1, 1, shape).astype(dtype.numpy)
              for name, shape in (("p", (1, 2, 1, 24)), ("v", (1, 24, 2, 16)), ("x", (12,)), ("w", (12, 40)))}
    got = runtime.run(inputs)
    expected = ll.ReferenceRuntime(g).run(inputs)
    for value, name in zip(got, ("attended", "y")):
        assert_matches(value, expected[name], dtype, what=name)
    kernels = {k.id: k for k in llir.kernels}
    sources = [inspect.getsource(step.function.py_func) for kid, step in runtime.plan().steps
               if kernels[kid].op == "Matmul"]
    assert len(sources) == 2
    assert ["row[j] += a * r1[j]" in source for source in sources] == [rows, rows]


def test_a_strided_matrix_times_a_column_sums_scaled_rows_with_its_operands_swapped() -> None:
    """The matrix first (``W.T @ x``, W row-major: contiguous along the output, strided along the contraction): the
    loop takes its operands the other way round, and equals the reference."""
    g = ll.Graph()
    w, x = g.tensor((12, 40), "w"), g.tensor((12, 1), "x")
    (w.T @ x).output("y")
    llir = extract(ll.compile(g).choice_space().smallest_genome())
    runtime = CPURuntime(llir)
    rng = np.random.default_rng(9)
    inputs = {"w": rng.uniform(-1, 1, (12, 40)).astype(np.float32), "x": rng.uniform(-1, 1, (12, 1)).astype(np.float32)}
    (got,) = runtime.run(inputs)
    np.testing.assert_allclose(got, inputs["w"].T @ inputs["x"], rtol=1e-5, atol=1e-5)
    (step,) = [step for _, step in runtime.plan().steps if isinstance(step, _Launch)]
    assert "row[j] += a * r1[j]" in inspect.getsource(step.function.py_func)
    assert step.args[1].size == 12 and step.args[2].size == 12 * 40  # x0 the column, x1 the matrix
