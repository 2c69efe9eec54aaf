"""A contraction's GPU implementations: which the e-graph offers, that each compiles and assembles, and that
each tiling computes the reference's result when its CPU twin runs it (``tests/helpers/matmul_twin.py``).

No GPU here: ``ptxas`` assembles the PTX (checking the inline ``mma.sync`` NVRTC passes through), and the twins
run the kernels' tiling and index arithmetic with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import luminal_lab as ll
from luminal_lab.codegen.cuda import kernel_source, llir_sources
from luminal_lab.codegen.ptx import _find_ptxas, _nvrtc, assemble, compile_ptx
from luminal_lab.core.dtypes import DType
from luminal_lab.core.errors import CudaCompileError
from luminal_lab.core.ops import GPU_KERNELS
from luminal_lab.core.tiling import MMA_TILINGS, TILINGS
from luminal_lab.llir.genome import extract
from luminal_lab.runtime import foreign_kernels
from tests.helpers import matmul_twin

needs_nvrtc = pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (pip's nvidia-cuda-nvrtc) is not installed")
needs_ptxas = pytest.mark.skipif(_find_ptxas() is None, reason="no ptxas (pip's nvidia-cuda-nvcc)")
BINDINGS = {"n": 50}


def _graph(case: str, dtype: DType) -> ll.Graph:
    g = ll.Graph()
    if case == "matrix":  # sizes that no tile divides
        (g.tensor((70, 37), "a", dtype) @ g.tensor((37, 50), "b", dtype)).output("y")
    elif case == "batched-transposed":  # b read along its rows: a transposed view, batch dims on both
        a, b = g.tensor((2, 3, 33, 21), "a", dtype), g.tensor((2, 3, 45, 21), "b", dtype)
        (a @ b.transpose(-1, -2)).output("y")
    elif case == "broadcast-symbolic":  # a batched, b shared across the batch; a symbolic column count
        (g.tensor((2, 40, 19), "a", dtype) @ g.tensor((19, "n"), "b", dtype)).output("y")
    elif case == "sliced":  # views with offsets: a column slice of a and a row slice of b
        a, b = g.tensor((20, 48), "a", dtype), g.tensor((60, 9), "b", dtype)
        (a[:, 5:41] @ b[10:46]).output("y")
    return g


def _inputs(graph: ll.Graph, dtype: DType) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {name: rng.uniform(-1, 1, tuple(int(d.evaluate(BINDINGS)) for d in t.node.shape)).astype(dtype.numpy)
            for name, t in graph.inputs.items()}


def test_the_e_graph_offers_every_tiling_for_row_by_column_products() -> None:
    """f32 row-by-column: the library call, each ``TILINGS`` entry and each ``MMA_TILINGS`` entry (tf32)."""
    _, llirs = matmul_twin.implementations(_graph("matrix", ll.f32))
    assert set(llirs) == {"Matmul", *(f"MatmulTiled {t.name}" for t in TILINGS),
                          *(f"MatmulTensorCore {t.name}" for t in MMA_TILINGS)}
    _, ints = matmul_twin.implementations(_graph("matrix", ll.i32))
    assert set(ints) == {"Matmul", *(f"MatmulTiled {t.name}" for t in TILINGS)}  # no tensor cores for integers


@pytest.mark.parametrize("build", ["dot-rows", "vector-matrix"])
def test_contractions_that_are_not_row_by_column_keep_the_library_call_only(build: str) -> None:
    g = ll.Graph()
    if build == "dot-rows":  # a and b both vary along every output dim: no matrix to tile
        a, b = g.tensor((6, 7, 5), "a"), g.tensor((6, 7, 5), "b")
        (a * b).sum(-1).output("y")
    else:  # a matrix times a vector, as a broadcast product: a rank-1 output, no rows and columns to tile
        (g.tensor((5,), "a") * g.tensor((4, 5), "b")).sum(-1).output("y")
    comp = ll.compile(g)
    space = comp.choice_space()
    kinds = {getattr(space.kernel_of(n), "op", None) for options in space.options for n in options if n.op == "Op"}
    assert not kinds & {f"Kernel{op}" for op in GPU_KERNELS}
    if build == "vector-matrix":
        assert "KernelMatmul" in kinds


def test_default_genomes_and_cpu_searches_use_the_library_call() -> None:
    """Default genomes never pick a GPU tiling, and a CPU search never tries one; a genome that picks one still runs
    on the CPU (as the library call) and matches the reference."""
    graph = _graph("matrix", ll.f32)
    comp, llirs = matmul_twin.implementations(graph)
    space = comp.choice_space()
    for genome in (space.fused_genome(), space.smallest_genome(), space.unfused_genome()):
        assert not {k.op for k in extract(genome).kernels} & set(GPU_KERNELS)
    assert foreign_kernels("cpu") == frozenset(GPU_KERNELS) and foreign_kernels("cuda") == frozenset()
    result = comp.search(generations=2, generation_size=6, seed=3, progress=False, trials=1)
    tried = {k.op for c in result.history if c.genome is not None and c.outcome != "refused"
             for k in extract(c.genome).kernels}
    assert "Matmul" in tried and not tried & set(GPU_KERNELS)
    inputs = _inputs(graph, DType.F32)
    (expected,) = ll.ReferenceRuntime(graph).run(inputs).values()
    llir = llirs[f"MatmulTiled {TILINGS[1].name}"]
    from luminal_lab.runtime.cpu import CPURuntime

    (got,) = CPURuntime(llir).run(inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


CASES = ("matrix", "batched-transposed", "broadcast-symbolic", "sliced")


@needs_nvrtc
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16])
def test_every_tiling_computes_the_reference_on_its_cpu_twin(case: str, dtype: DType) -> None:
    """Each generated implementation compiles (NVRTC) and, run by its numpy twin (same tiles, same guards, same
    offsets, the same lanes' fragments), gives the reference's result: rows, columns and depths no tile divides,
    batch dims, transposed and sliced views, a symbolic dim."""
    graph = _graph(case, dtype)
    _, llirs = matmul_twin.implementations(graph)
    inputs = _inputs(graph, dtype)
    (expected,) = ll.ReferenceRuntime(graph).run(inputs, BINDINGS).values()
    expected = expected.astype(np.float32).reshape(-1)
    checked = 0
    for label, llir in sorted(llirs.items()):
        (kernel,) = (k for k in llir.kernels if k.op.startswith("Matmul"))
        source = kernel_source(kernel, llir)
        if kernel.op == "Matmul":
            assert source.library == "cublas"
            continue
        assert f".entry {source.name}(" in compile_ptx(source.source)
        by_id = {k.id: k for k in llir.kernels}
        buffers = [inputs[by_id[sid].arg].reshape(-1) for sid, _ in kernel.sources]
        if kernel.op == "MatmulTiled":
            got = matmul_twin.tiled(kernel, source, buffers, BINDINGS)
            tolerance = 1e-5 if dtype == ll.f32 else 2e-2
        else:
            got = matmul_twin.tensor_core(kernel, source, buffers, BINDINGS, dtype)
            tolerance = 2e-2  # tf32 for f32: 10 mantissa bits
        got = got.astype(dtype.numpy).astype(np.float32)  # the kernel stores in the output dtype
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance, err_msg=label)
        checked += 1
    assert checked == len(TILINGS) + len(MMA_TILINGS)


@needs_nvrtc
@needs_ptxas
@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16, ll.f64, ll.i32])
def test_every_variant_assembles_without_spills(dtype: DType) -> None:
    """``ptxas`` assembles each implementation for sm_90 (the inline tensor-core PTX included) with no register
    spills."""
    _, llirs = matmul_twin.implementations(_graph("broadcast-symbolic", dtype))
    for label, llir in llirs.items():
        for source in llir_sources(llir):
            if source.library:
                continue
            report = assemble(compile_ptx(source.source))
            assert "0 bytes spill stores" in report, (label, report)


@needs_nvrtc
@needs_ptxas
def test_wrong_inline_ptx_is_caught_by_assembling() -> None:
    """NVRTC passes ``asm`` through unread; assembling catches a wrong instruction (the mma shape m16n16k16)."""
    _, llirs = matmul_twin.implementations(_graph("matrix", ll.f16))
    llir = llirs[f"MatmulTensorCore {MMA_TILINGS[0].name}"]
    (source,) = (s for s in llir_sources(llir) if s.name == "k_matmul_tensor_core")
    wrong = source.source.replace("m16n8k16", "m16n16k16")
    with pytest.raises(CudaCompileError, match=r"m16n16k16|mma"):
        assemble(compile_ptx(wrong))
