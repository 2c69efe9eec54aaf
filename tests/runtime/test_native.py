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
from luminal_lab.runtime.native import Native, build
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


def test_a_plan_with_a_library_matmul_or_a_gather_has_no_native_function() -> None:
    """A BLAS call through torch and a gather that raises on a bad index are Python's to run: no native function."""
    g = ll.Graph()
    (g.tensor((48, 64), name="a") @ g.tensor((64, 80), name="b")).output("out")
    runtime = CPURuntime(extract(ll.compile(g).choice_space().smallest_genome()))
    runtime.run({"a": np.ones((48, 64), np.float32), "b": np.ones((64, 80), np.float32)}, {})
    assert any(isinstance(step, _Matmul) for _, step in runtime.plan().steps)
    assert build(runtime, ["a", "b"]) is None
    (where,) = [c for c in CASES if c.name == "where"]
    graph, inputs = case_graph(where, torch.float32, False)
    runtime = CPURuntime(llir_of(graph))
    runtime.run(inputs, graph.weights)
    assert build(runtime, list(inputs)) is None
