"""A small plan as one native function (``luminal_lab.runtime.native``): the plan's own kernels, its reads' copies and
its outputs' copies in one numba cfunc, which must give what the plan's steps give, bit for bit, call after call."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.core.arrays import to_numpy
from luminal_lab.llir.genome import extract
from luminal_lab.runtime.cpu import CPURuntime, _Matmul
from luminal_lab.runtime.native import HOT_RUNS, Native, build, settle
from tests.helpers.llir import llir_of
from tests.helpers.op_cases import CASES, case_graph, random_tensor

BUILT = 600  # seconds a build may take (a cold numba compile in a worker at nice 19 on a busy machine)

# one case for each kind of step: elementwise with broadcasting, a row region, a reduction to a 0-d output, dot
# products, reads through transposing, padding and strided views (copied into scratches), concatenation, a scan;
# across the dtypes a kernel stores differently (f16 and bf16 as their bits, bool, narrow ints)
NATIVE_CASES = [
    ("add", torch.int32, True), ("add", torch.bfloat16, True), ("softmax", torch.float32, True),
    ("layer_norm", torch.float16, False), ("sum_all", torch.float64, False), ("matvec", torch.float32, True),
    ("permute", torch.float32, False), ("pad", torch.float32, True), ("slice_step", torch.int8, True),
    ("concat", torch.float32, False), ("cumsum", torch.float32, True), ("logic", torch.float32, False),
]


def _run(native: Native, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``native`` called on ``inputs``' memory, into outputs filled with garbage first."""
    outputs = [np.full(shape, 7, dtype.numpy) for shape, dtype in native.outputs]
    arrays = [np.ascontiguousarray(array) for array in inputs.values()]
    native(*[array.ctypes.data for array in arrays], *[output.ctypes.data for output in outputs])
    return outputs


def _same_bits(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert [(a.dtype, a.shape) for a in got] == [(a.dtype, a.shape) for a in expected]
    for a, b in zip(got, expected):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize(("name", "dtype", "transposed"), NATIVE_CASES,
                         ids=[f"{n}-{str(d).split('.')[1]}{'-T' * t}" for n, d, t in NATIVE_CASES])
def test_a_small_plan_runs_natively_as_its_steps_do(name: str, dtype: torch.dtype, transposed: bool) -> None:
    (case,) = [c for c in CASES if c.name == name]
    assert dtype in case.dtypes
    graph, inputs = case_graph(case, dtype, transposed)
    runtime = CPURuntime(llir_of(graph))
    expected = runtime.run(inputs, graph.weights)
    native = build(runtime, list(inputs)).result(timeout=BUILT)
    assert native is not None
    assert str(native.address) not in native.source and "table[" in native.source  # addresses only in the table
    _same_bits(_run(native, inputs), expected)
    generator = torch.Generator().manual_seed(7)  # new values are copied in: nothing of the last call is kept
    again = {key: to_numpy(random_tensor(array.shape, dtype, case.low, case.high, generator))
             for key, array in inputs.items()}
    _same_bits(_run(native, again), runtime.run(again, graph.weights))


def test_a_plan_with_weights_binds_them_before_each_native_call() -> None:
    g = ll.Graph()
    weights = {"w": np.array([1, 2, 3, 4], np.float32)}
    x, w = g.tensor((3, 4), name="x"), g.weight("w", weights["w"])
    ((x * w).sum(-1)).output("out")
    runtime = CPURuntime(llir_of(g))
    data = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    runtime.run(data, weights)
    native = build(runtime, ["x"]).result(timeout=BUILT)
    for scale in (1, -2):
        changed = {"w": weights["w"] * scale}
        native.bind(changed)
        _same_bits(_run(native, data), [(data["x"] * changed["w"]).sum(-1)])


def test_library_matmuls_run_natively_as_torch_runs_them() -> None:
    """An mm reading a weight in place into an output written straight, and a bmm of a transposed operand: the
    native function calls MKL's batched gemm (torch's own) and gives torch's bits, and follows a new weight array."""
    rng = np.random.default_rng(0)
    g = ll.Graph()
    weights = {"w": rng.standard_normal((256, 1024), dtype=np.float32)}
    a, q, k = g.tensor((64, 256), name="a"), g.tensor((4, 64, 32), name="q"), g.tensor((4, 64, 32), name="k")
    (a @ g.weight("w", weights["w"])).output("y")
    (q @ k.transpose(1, 2)).output("scores")
    runtime = CPURuntime(extract(ll.compile(g).choice_space().smallest_genome()))
    inputs = {name: rng.standard_normal(shape, dtype=np.float32)
              for name, shape in (("a", (64, 256)), ("q", (4, 64, 32)), ("k", (4, 64, 32)))}
    expected = runtime.run(inputs, weights)
    plan = runtime.plan()
    matmuls = [step for _, step in plan.steps if isinstance(step, _Matmul)]
    assert len(matmuls) == 2 and not any(m.serial for m in matmuls)
    assert list(plan.in_place) == ["w"] and len(plan.direct) == 1  # read in place, written straight
    native = build(runtime, list(inputs)).result(timeout=BUILT)
    assert native is not None and native.source.count("gemm_f32(") == 2
    native.bind(weights)
    _same_bits(_run(native, inputs), expected)
    other = {"w": rng.standard_normal((256, 1024), dtype=np.float32)}
    native.bind(other)
    got = _run(native, inputs)
    _same_bits(got, runtime.run(inputs, other))  # the plan's steps, rebound meanwhile, agree
    np.testing.assert_allclose(got[0], inputs["a"] @ other["w"], rtol=1e-4, atol=1e-4)
    runtime.run(inputs, weights)  # the plan's steps bind the first array again, and the native call follows
    native.bind(weights)
    _same_bits(_run(native, inputs), expected)


def test_a_gather_runs_natively_and_its_bad_index_raises_from_the_plans_steps() -> None:
    g = ll.Graph()
    w, i = g.tensor((4, 2), "w"), g.tensor((3,), "ids", ll.i64)
    ll.embedding(i, w).output("rows")
    runtime = CPURuntime(llir_of(g))
    inputs = {"w": np.arange(8, dtype=np.float32).reshape(4, 2), "ids": np.array([3, 0, 2])}
    runtime.run(inputs)
    native = build(runtime, list(inputs)).result(timeout=BUILT)
    outputs = [np.zeros((3, 2), np.float32)]
    assert native(*[x.ctypes.data for x in inputs.values()], outputs[0].ctypes.data)
    np.testing.assert_array_equal(outputs[0], inputs["w"][[3, 0, 2]])
    inputs["ids"] = np.array([0, 4, 1])
    assert not native(*[x.ctypes.data for x in inputs.values()], outputs[0].ctypes.data)  # the caller runs the steps
    with pytest.raises(IndexError, match=r"Gather k\d+ \(HLIR h\d+\): index 8 is out of range for 8 elements"):
        runtime.run(inputs)


def test_a_matmul_on_one_thread_has_no_native_function() -> None:
    """A product under ``SERIAL_MATMUL`` multiply-adds runs with torch's threads set to one, which is Python's."""
    g = ll.Graph()
    (g.tensor((48, 64), name="a") @ g.tensor((64, 80), name="b")).output("out")
    runtime = CPURuntime(extract(ll.compile(g).choice_space().smallest_genome()))
    runtime.run({"a": np.ones((48, 64), np.float32), "b": np.ones((64, 80), np.float32)}, {})
    assert [step.serial for _, step in runtime.plan().steps if isinstance(step, _Matmul)] == [True]
    assert build(runtime, ["a", "b"]) is None


TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)


def _embedded_rows() -> ll.Compiled:
    """A program of a symbolic length ``n``: a table's rows at ``ids``, times ``x``, summed along each row."""
    g = ll.Graph()
    table = g.weight("table", TABLE)
    ids = g.tensor(("n",), "ids", ll.i64)
    x = g.tensor(("n", 4), "x")
    (ll.embedding(ids, table) * x).sum(-1).output("out")
    return ll.compile(g)


def _rounding(ids: np.ndarray, x: np.ndarray) -> float:
    """The most an f32 sum of a row's four products may differ from another order of it: a few ulps of its terms'
    magnitudes, which can be far above the sum's own when the terms cancel."""
    return 4 * float(np.finfo(np.float32).eps) * float(np.abs(TABLE[ids] * x).sum(-1).max())


def test_a_dynamic_programs_hot_binding_runs_natively() -> None:
    """``Compiled.run`` of a program with a symbolic length: the ``HOT_RUNS``-th run at one length builds that plan's
    native function, which the runs after at that length take (others still run the plan's steps), equal to the
    reference; a bad index there raises as before."""
    compiled = _embedded_rows()
    rng = np.random.default_rng(1)

    def check(n: int) -> None:
        given = rng.integers(0, 10, n), rng.standard_normal((n, 4), dtype=np.float32)
        np.testing.assert_allclose(to_numpy(compiled.run(*given)), to_numpy(compiled.run_reference(*given)),
                                   rtol=1e-6, atol=_rounding(*given))

    for _ in range(HOT_RUNS):
        check(5)
    check(7)
    hot = compiled._hot
    assert list(hot.natives) == [(("n", 5),)] and hot.runs == {(("n", 5),): HOT_RUNS, (("n", 7),): 1}
    settle(BUILT)  # every build started is done
    assert hot.natives[(("n", 5),)].done()
    native = hot.natives[(("n", 5),)].result()
    assert isinstance(native, Native)
    calls = []
    original = native.function
    object.__setattr__(native, "function", lambda *a: calls.append(1) or original(*a))
    for n in (5, 7, 5):
        check(n)
    assert len(calls) == 2 and hot.runs[(("n", 5),)] == HOT_RUNS  # the native runs are not the plan's
    with pytest.raises(IndexError, match=r"Gather k\d+ \(HLIR h\d+\): index \d+ is out of range"):
        compiled.run(np.array([1, 10, 2, 3, 4]), np.ones((5, 4), np.float32))


def test_a_dynamic_programs_hot_signature_of_tensors_takes_a_generated_native_call() -> None:
    """Torch tensors at a hot length: once its plan's native function is built, the next ``Compiled.run`` at that
    signature keeps a generated call of it, which the runs after take without the runtime's general path (``Hot.run``
    is not called); a tensor that is not C-contiguous, or a bad index, still takes that path, whose plan's steps read
    it or raise."""
    compiled = _embedded_rows()
    generator = torch.Generator().manual_seed(2)

    def given(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randint(0, 10, (n,), generator=generator), torch.randn(n, 4, generator=generator)

    def check(*inputs: torch.Tensor) -> None:
        got = compiled.run(*inputs)
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got, compiled.run_reference(*inputs), rtol=1e-6,
                                   atol=_rounding(*(to_numpy(t) for t in inputs)))

    for _ in range(HOT_RUNS):
        check(*given(5))
    settle(BUILT)
    hot = compiled._hot
    native = hot.natives[(("n", 5),)].result()
    calls, general = [], []
    original, run = native.function, hot.run
    object.__setattr__(native, "function", lambda *a: calls.append(1) or original(*a))
    hot.run = lambda *a: general.append(1) or run(*a)
    check(*given(5))  # the general path, natively, which then keeps the generated call
    assert len(calls) == 1 and len(general) == 1
    for _ in range(3):
        check(*given(5))
    assert len(calls) == 4 and len(general) == 1
    ids_, x_ = given(5)
    check(ids_, torch.randn(4, 5, generator=generator).t())  # not C-contiguous: the plan's steps read it
    check(ids_, x_)
    assert len(general) == 2 and len(calls) == 5
    with pytest.raises(IndexError, match=r"Gather k\d+ \(HLIR h\d+\): index \d+ is out of range"):
        compiled.run(torch.tensor([1, 10, 2, 3, 4]), x_)
