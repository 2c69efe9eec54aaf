"""The CUDA runtime: generated CUDA C run through numba-cuda, against the reference and the CPU runtime.

Without a GPU (or without numba-cuda) only availability, the ``NoDeviceError`` and the host-side
``schedule`` are checked; the tests marked ``gpu`` skip themselves here (no conftest needed).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

import luminal_lab as ll
from luminal_lab.codegen.cuda import llir_sources
from luminal_lab.codegen.cuda_c import CudaKernel
from luminal_lab.core.arrays import to_numpy
from luminal_lab.core.errors import Refused
from luminal_lab.core.ops import IN_REGION
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.hlir.graph import Graph
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR, Kernel
from luminal_lab.runtime.cpu import CPURuntime
from luminal_lab.runtime.cuda import CUDARuntime, cuda_available, cuda_unavailable_reason, device_dtype, schedule
from luminal_lab.search.search import compare
from tests.helpers import matmul_twin
from tests.helpers.fuzz import Case, graphs
from tests.helpers.llir import llir_of
from tests.helpers.models import MLP, mlp_inputs
from tests.helpers.rows import PATTERNS, fused_pattern
from tests.helpers.rows import inputs as row_inputs

GPU = cuda_available()
needs_gpu = pytest.mark.skipif(not GPU, reason=f"needs a CUDA GPU through numba-cuda: {cuda_unavailable_reason()}")
TOLERANCE = 1e-4


def _llir(*kernels: Kernel, outputs: list[int]) -> LLIR:
    return LLIR(list(kernels), outputs)


# ---- without a GPU --------------------------------------------------------------------------


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_no_device_is_a_clear_error() -> None:
    assert cuda_available() is False
    reason = cuda_unavailable_reason()
    assert reason
    with pytest.raises(ll.NoDeviceError, match="GPU") as raised:
        CUDARuntime(llir_of(_elementwise_graph()))
    assert reason in str(raised.value) and "\n" not in str(raised.value)
    assert isinstance(raised.value, ll.LuminalError)


def test_without_numba_cuda_nothing_raises_but_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba.cuda", None)  # as if numba-cuda were not installed
    assert cuda_available() is False
    assert "numba-cuda" in cuda_unavailable_reason() and "luminal_lab[gpu]" in cuda_unavailable_reason()
    with pytest.raises(ll.NoDeviceError, match="numba-cuda is not importable"):
        CUDARuntime(llir_of(_elementwise_graph()))


def test_the_simulator_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numba_cuda")
    from numba.cuda.core import config

    monkeypatch.setattr(config, "ENABLE_CUDASIM", 1)
    assert not cuda_available() and "simulator" in cuda_unavailable_reason()


def test_device_storage_types() -> None:
    assert device_dtype(ll.f16) == device_dtype(ll.bf16) == np.uint16
    assert device_dtype(ll.bool) == np.uint8
    assert all(device_dtype(d) == d.numpy for d in (ll.f32, ll.f64, ll.i32, ll.i64))


def _elementwise_graph() -> Graph:
    g = ll.Graph()
    x, w = g.tensor(("s", 4), name="x"), g.tensor((4, 3), name="w")
    (x @ w).softmax(0).output("y")
    (x < 0.5).output("less")
    g.arange(5, start=2).output("ints")
    (x.cast(ll.bf16) * 2.0).output("half")
    return g


def test_schedule_gives_every_read_and_write_a_buffer() -> None:
    llir = llir_of(_elementwise_graph())
    kernels = {k.id: k for k in llir.kernels}
    layout = schedule(llir, {"s": 3}, llir_sources(llir))
    assert [name for _, name in layout.inputs] == ["x", "w"]
    for launch in layout.setup + layout.launches:
        assert launch.kernel.writes in layout.buffers and all(r in layout.buffers for r in launch.kernel.reads)
        assert launch.grid >= 1 and 1 <= launch.block <= 256
        assert launch.dyn == tuple(3 for _ in launch.kernel.dyn)
    assert {kernels[launch.kernel.writes].op for launch in layout.setup} == {"Constant", "Iota"}
    assert not {kernels[launch.kernel.writes].op for launch in layout.launches} & {"Constant", "Iota", "Input"}
    for kid, (shape, dtype) in layout.buffers.items():
        assert shape == tuple(int(d.evaluate({"s": 3})) for d in kernels[kid].shape)
        assert dtype == device_dtype(kernels[kid].dtype)
    # contiguous outputs have no kernel and no buffer: each is its source's buffer, shaped as the output
    assert not any(kernels[kid].op == "Output" for kid in layout.buffers)
    assert [(shape, dtype) for _, shape, dtype in layout.outputs] == [
        ((3, 3), ll.f32), ((3, 4), ll.bool), ((5,), ll.i32), ((3, 4), ll.bf16)]
    assert [layout.buffers[kid][1] for kid, _, _ in layout.outputs] == [np.float32, np.uint8, np.int32, np.uint16]


def test_schedule_per_binding_leaves_out_empty_kernels() -> None:
    llir = llir_of(_elementwise_graph())
    kernels = llir_sources(llir)
    full, empty = schedule(llir, {"s": 5}, kernels), schedule(llir, {"s": 0}, kernels)
    assert all(launch.dyn == (5,) * len(launch.dyn) for launch in full.launches)
    assert len(empty.launches) < len(full.launches)
    assert empty.buffers.keys() == full.buffers.keys()  # empty buffers are still allocated (and read as empty)
    assert empty.outputs[0][1] == (0, 3)


def test_strided_output_gets_its_own_kernel_and_buffer() -> None:
    shape = (ll.Expr.num(2), ll.Expr.num(3))
    contiguous = ShapeTracker.contiguous(shape)
    llir = _llir(Kernel(0, "Input", (), shape, ll.f32, "x"),
                 Kernel(1, "Output", ((0, contiguous.permute([1, 0])),), shape[::-1], ll.f32, 0),
                 Kernel(2, "Output", ((0, contiguous),), shape, ll.f32, 1), outputs=[1, 2])
    layout = schedule(llir, {}, llir_sources(llir))
    assert [launch.kernel.writes for launch in layout.launches] == [1]
    assert layout.outputs == [(1, (3, 2), ll.f32), (0, (2, 3), ll.f32)]


def _random_llirs(graph: Graph, count: int, seeds: int = 20) -> list[LLIR]:
    """The LLIRs of the first ``count`` viable random genomes of ``graph``."""
    comp = ll.compile(graph)
    llirs = []
    try:
        for seed in range(seeds):
            try:
                llirs.append(comp.llir(comp.random_genome(seed)))
            except Refused:
                continue
            if len(llirs) == count:
                break
    finally:
        comp.egraph.close()
    return llirs


def _fused_llir() -> LLIR:
    """The fused genome's LLIR of ``(a + b).sin().sqrt()``: one region."""
    g = ll.Graph()
    a, b = g.tensor((4, 8), "a"), g.tensor((4, 8), "b")
    (a + b).sin().sqrt().output("out")
    comp = ll.compile(g)
    try:
        llir = extract(comp.choice_space().fused_genome())
    finally:
        comp.egraph.close()
    assert sum(k.op == "FusionEnd" for k in llir.kernels) == 1
    return llir


def test_fused_regions_have_one_buffer_at_their_end() -> None:
    llir = _fused_llir()
    kernels = {k.id: k for k in llir.kernels}
    layout = schedule(llir, {}, llir_sources(llir))
    assert not any(kernels[kid].op in IN_REGION for kid in layout.buffers)
    ends = [launch for launch in layout.launches if kernels[launch.kernel.writes].op == "FusionEnd"]
    assert ends and all(kernels[r].op not in IN_REGION for launch in ends for r in launch.kernel.reads)


def test_schedule_refuses_reads_and_writes_without_buffers() -> None:
    llir = _fused_llir()
    start = next(k for k in llir.kernels if k.op == "FusionStart")
    writes_start = CudaKernel("k_bad", "", ll.Expr.num(1), (), (), start.id)
    with pytest.raises(ll.LuminalError, match="inside a fused region"):
        schedule(llir, {}, [writes_start])
    end = next(k for k in llir.kernels if k.op == "FusionEnd")
    reads_start = CudaKernel("k_bad", "", ll.Expr.num(1), (), (start.id,), end.id)
    with pytest.raises(ll.LuminalError, match=f"reads k{start.id} \\(FusionStart\\)"):
        schedule(llir, {}, [reads_start])


# ---- on a GPU -----------------------------------------------------------------------------------


def _graph(name: str) -> tuple[Graph, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    g = ll.Graph()
    if name == "elementwise":
        x, y = g.tensor((6, 40), "x"), g.tensor((40,), "y")
        ((x * y + 1.0).exp() * 0.5 - x.relu()).sin().output("out")
        inputs = {"x": rng.uniform(-1, 1, (6, 40)), "y": rng.uniform(-1, 1, 40)}
    elif name == "reduction":
        x = g.tensor((5, 300), "x")
        x.sum(-1).output("sum")
        x.max(0).output("max")
        x.softmax(-1).output("softmax")
        inputs = {"x": rng.uniform(-2, 2, (5, 300))}
    elif name == "matmul":
        a, b = g.tensor((3, 17, 24), "a"), g.tensor((24, 9), "b")
        (a @ b + 1.0).output("out")
        (a.transpose(-1, -2) @ a).output("gram")
        inputs = {"a": rng.uniform(-1, 1, (3, 17, 24)), "b": rng.uniform(-1, 1, (24, 9))}
    else:  # fused
        a, b = g.tensor((64, 33), "a"), g.tensor((64, 33), "b")
        (a + b).sin().sqrt().output("out")
        inputs = {"a": rng.uniform(0, 1, (64, 33)), "b": rng.uniform(0, 1, (64, 33))}
    return g, {n: x.astype(np.float32) for n, x in inputs.items()}


def _assert_close(got: list[np.ndarray], expected: list[np.ndarray], tolerance: float = TOLERANCE) -> None:
    assert len(got) == len(expected)
    for have, want in zip(got, expected):
        assert have.dtype == want.dtype and have.shape == want.shape
        np.testing.assert_allclose(have.astype(np.float64), want.astype(np.float64), atol=tolerance,
                                   rtol=tolerance, equal_nan=True)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", ["elementwise", "reduction", "matmul", "fused"])
def test_random_genomes_match_the_reference(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random genomes against the reference and the CPU runtime; one with an f32 product on tensor cores runs
    (as tf32, within a tf32 tolerance) only where torch allows tf32, and is refused where it does not."""
    graph, inputs = _graph(name)
    expected = list(ll.ReferenceRuntime(graph).run(inputs).values())
    llirs = _random_llirs(graph, 4)
    assert llirs
    for llir in llirs:
        tf32 = any(k.op == "MatmulTensorCore" and k.dtype == ll.f32 for k in llir.kernels)
        if tf32:
            monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
            with pytest.raises(Refused, match="tf32"):
                CUDARuntime(llir)
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", tf32)
        tolerance = 3e-2 if tf32 else TOLERANCE
        runtime = CUDARuntime(llir)
        got = runtime.run(inputs, graph.weights)
        _assert_close(got, expected, tolerance)
        _assert_close(got, CPURuntime(llir).run(inputs, graph.weights), tolerance)
        _assert_close(runtime.run(inputs), got)  # a second run on the same plan


@pytest.mark.gpu
@needs_gpu
def test_every_kernel_kind_and_dtype_matches_the_cpu_runtime() -> None:
    """One kernel per HLIR node: casts, half precision, bool, integer ops, gathers, scatters, Iota, symbolic dims."""
    g = _elementwise_graph()
    rng = np.random.default_rng(1)
    llir = llir_of(g)
    runtime, cpu = CUDARuntime(llir), CPURuntime(llir)
    weights = {"w": rng.uniform(-1, 1, (4, 3)).astype(np.float32)}
    for s in (3, 7):
        inputs = {"x": rng.uniform(-1, 1, (s, 4)).astype(np.float32)}
        got, want = runtime.run(inputs, weights, {"s": s}), cpu.run(inputs, weights, {"s": s})
        for have, expected in zip(got, want):
            assert have.dtype == expected.dtype and have.shape == expected.shape
            np.testing.assert_allclose(have.astype(np.float64), expected.astype(np.float64), atol=1e-2, rtol=1e-2)
    assert len(runtime.plans) == 2


@pytest.mark.gpu
@needs_gpu
def test_index_ops_and_integers() -> None:
    from tests.helpers.op_cases import index_ops_graph

    rng = np.random.default_rng(2)
    g = index_ops_graph()
    a, b = g.tensor((6,), "a", ll.i32), g.tensor((6,), "b", ll.i32)
    (a + b).output("add")
    a.fmod(b).output("fmod")
    a.sum().output("sum")
    inputs = {"w": rng.standard_normal((10, 4), np.float32), "ids": rng.integers(0, 10, (2, 3)),
              "x": rng.standard_normal((3, 10), np.float32), "index": rng.integers(0, 3, (2, 5)),
              "src": rng.standard_normal((2, 5), np.float32), "block": rng.standard_normal((3, 3), np.float32),
              "a": np.array([2**31 - 1, -7, 7, 5, 0, 3], np.int32), "b": np.array([2, 3, -3, 0, 1, 1], np.int32)}
    expected = list(ll.ReferenceRuntime(g).run(inputs).values())
    _assert_close(CUDARuntime(llir_of(g)).run(inputs), expected)


@pytest.mark.gpu
@needs_gpu
def test_mlp_matches_torch_and_binds_weights_once() -> None:
    model, inputs = MLP(32, 64, 16), mlp_inputs(4, 32)
    comp = ll.compile(model.eval(), inputs)
    try:
        runtime = CUDARuntime(comp.llir())
    finally:
        comp.egraph.close()
    arrays = {n: to_numpy(x) for n, x in zip(comp.signature.inputs, inputs)}
    (got,) = runtime.run(arrays, comp.graph.weights)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(*inputs).numpy(), atol=TOLERANCE, rtol=TOLERANCE)
    (again,) = runtime.run(arrays)  # the bound weights persist without being passed again
    np.testing.assert_array_equal(again, got)
    assert not np.shares_memory(again, got)
    with pytest.raises(ll.DTypeBoundaryError):
        runtime.run({n: x.astype(np.float64) for n, x in arrays.items()})
    with pytest.raises(ll.ShapeError):
        runtime.run({n: x[:2] for n, x in arrays.items()})
    with pytest.raises(ll.LuminalError, match="missing input"):
        runtime.run({})


@pytest.mark.gpu
@needs_gpu
def test_profile_times_every_launch_and_the_run() -> None:
    graph, inputs = _graph("matmul")
    llir = llir_of(graph)
    runtime = CUDARuntime(llir)
    profile = runtime.profile(inputs, graph.weights, warmup=1, trials=3)
    assert set(profile.kernels) == {kid for kid, _ in runtime.plan().steps}
    assert all(t > 0 for t in profile.kernels.values()) and profile.total > 0
    assert llir.times == {} and profile.trials == 3


@pytest.mark.gpu
@needs_gpu
@settings(max_examples=5, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_fuzz_graphs_match_the_reference(case: Case) -> None:
    llirs = _random_llirs(case.graph, 2)
    assert llirs
    for bindings, inputs in case.runs:
        reference = ll.ReferenceRuntime(case.graph).run(inputs, bindings)
        expected = [reference[name] for name in case.graph.outputs]
        for llir in llirs:
            outcome, reason = compare(CUDARuntime(llir).run(inputs, case.graph.weights, bindings), expected)
            assert outcome == "ok", f"{reason} at {bindings}\n{case.program}\n{llir.kernels}"


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16])
def test_every_matmul_implementation_matches_the_reference(dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """cuBLAS, every tiling and every tensor-core tiling, on sizes no tile divides; f32 on tensor cores (tf32) only
    where torch allows tf32."""
    g = ll.Graph()
    a, b = g.tensor((2, 70, 37), "a", dtype), g.tensor((37, 50), "b", dtype)
    (a @ b).output("y")
    rng = np.random.default_rng(3)
    inputs = {"a": rng.uniform(-1, 1, (2, 70, 37)).astype(dtype.numpy),
              "b": rng.uniform(-1, 1, (37, 50)).astype(dtype.numpy)}
    (expected,) = ll.ReferenceRuntime(g).run(inputs).values()
    for label, llir in matmul_twin.implementations(g)[1].items():
        tensor_cores = "TensorCore" in label  # tf32 for f32, allowed for them alone: cuBLAS's f32 stays exact
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", tensor_cores)
        (got,) = CUDARuntime(llir).run(inputs)
        tolerance = 1e-4 if dtype == ll.f32 and not tensor_cores else 3e-2
        np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32), err_msg=label,
                                   atol=tolerance, rtol=tolerance)
    if dtype == ll.f32:
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
        llir = next(llir for label, llir in matmul_twin.implementations(g)[1].items() if "TensorCore" in label)
        with pytest.raises(Refused, match="tf32"):
            CUDARuntime(llir)


@pytest.mark.gpu
@needs_gpu
def test_a_search_on_the_gpu_measures_every_candidate_and_keeps_one_that_matches_torch() -> None:
    """A measured search on the GPU, its candidates measured in the runner's process: each one runs, or is refused
    unrun (f32 on tensor cores where tf32 is off, buffers over the memory budget); none fails, mismatches or runs
    out of device memory, and the fastest runs device-resident within the tolerance of torch."""
    model, inputs = MLP(32, 64, 16).eval(), mlp_inputs(4, 32)
    comp = ll.compile(model, inputs)
    result = comp.search(generations=2, generation_size=6, device="cuda", progress=False, resume=False)
    assert set(result.outcomes()) <= {"ok", "slow", "refused"}, result.history
    assert comp.genome == result.best.genome
    with torch.no_grad():
        expected = model(*inputs)
    torch.testing.assert_close(comp.run(inputs[0].cuda(), device="cuda").cpu(), expected, atol=TOLERANCE,
                               rtol=TOLERANCE)


@pytest.mark.gpu
@needs_gpu
def test_device_resident_calls_keep_data_on_the_gpu() -> None:
    """CUDA tensors in, CUDA tensors out, ordered on torch's stream; CPU tensors are copied in once; a profile
    reports the kernels and the whole call apart."""
    model, inputs = MLP(32, 64, 16), mlp_inputs(4, 32)
    comp = ll.compile(model.eval(), inputs)
    with torch.no_grad():
        expected = model(*inputs)
    x = inputs[0].cuda()
    got = comp.run(x, device="cuda")
    assert got.is_cuda and got.device == x.device
    torch.testing.assert_close(got.cpu(), expected, atol=TOLERANCE, rtol=TOLERANCE)
    from_host = comp.run(inputs[0], device="cuda")
    assert from_host.is_cuda
    torch.testing.assert_close(from_host, got)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # work queued on another current stream is ordered with it
        y = x * 2
        twice = comp.run(y / 2, device="cuda")
    side.synchronize()
    torch.testing.assert_close(twice, got)
    profile = comp.profile(device="cuda", trials=3)
    assert 0 < profile.total <= profile.call and profile.copies >= 0


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16], ids=lambda d: d.value)
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_row_regions_run_on_the_gpu_a_block_or_a_warp_per_row(pattern: str, dtype) -> None:
    """Each row pattern as one ``k_row_region``, a block and a warp per row, on rows held in registers (31, 1000), in
    shared memory (1500) and re-read (10000), against the reference runtime."""
    torch_dtype = {ll.f32: torch.float32, ll.f16: torch.float16, ll.bf16: torch.bfloat16}[dtype]
    tolerance = 1e-4 if dtype == ll.f32 else 3e-2
    for shape in ((7, 31), (9, 1000), (2, 1500), (1, 10000)):
        comp, _ = fused_pattern(pattern, *shape, dtype)
        space = comp.choice_space()
        arrays = {name: to_numpy(value) for name, value in row_inputs(pattern, *shape, torch_dtype).items()}
        (expected,) = ll.ReferenceRuntime(comp.graph).run(arrays).values()
        for per_row, genome in (("block", comp.genome), ("warp", space.warp_per_row(comp.genome))):
            llir = extract(genome)
            assert [k.name for k in llir_sources(llir)].count("k_row_region") == 1
            (got,) = CUDARuntime(llir).run(arrays)
            np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tolerance,
                                       atol=tolerance, equal_nan=True, err_msg=f"{shape}, a {per_row} per row")
