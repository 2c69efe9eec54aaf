"""Generated CUDA compiles to PTX (NVRTC, else nvcc) for every kernel of op, fuzz and model LLIRs.

No GPU here: nothing runs, the check is that NVRTC accepts each source and emits its entry.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import luminal_lab as ll
from luminal_lab.cuda_codegen import CudaCompileError, CudaKernel, _nvrtc, compile_ptx, kernel_source, llir_sources
from luminal_lab.dtypes import from_torch
from luminal_lab.llir import LLIR
from tests.fuzz_graphs import graphs
from tests.models import MLP, LlamaBlock, llama_inputs, mlp_inputs
from tests.test_ops import CASES

pytestmark = pytest.mark.skipif(_nvrtc() is None and not os.path.exists("/usr/local/cuda/bin/nvcc")
                                and shutil.which("nvcc") is None, reason="neither NVRTC nor nvcc available")

COMPILED: set[str] = set()  # distinct sources compiled in this module
OP_CASES = ("add", "mul", "div", "exp", "neg", "scalar_ops")
EXTRA_NAMES = ("sum_axes", "max", "softmax", "log", "sqrt", "sin", "where", "cumsum", "remainder", "fmod", "lt",
               "cast", "pad_value", "concat", "index_int", "matmul")


def _llir(graph: ll.Graph) -> LLIR:
    comp = ll.compile(graph)
    try:
        return comp.llir()
    finally:
        comp.egraph.close()


def _check_all(llir: LLIR) -> list[CudaKernel]:
    kernels = llir_sources(llir)
    for kernel in kernels:
        ptx = compile_ptx(kernel.source)
        assert f".entry {kernel.name}(" in ptx, kernel.source
        if not kernel.dyn:
            grid, block = kernel.launch({})
            assert grid >= 0 and 1 <= block <= 256
        COMPILED.add(kernel.source)
    return kernels


def _case_graph(case, dtype: torch.dtype, transposed: bool) -> ll.Graph:
    """The graph test_ops' ``_check`` builds for ``case``."""
    g = ll.Graph()
    tensors = []
    for i, shape in enumerate(case.shapes):
        stored = tuple(shape[:-2]) + (shape[-1], shape[-2]) if transposed and len(shape) >= 2 else tuple(shape)
        t = g.tensor(stored, name=f"x{i}", dtype=from_torch(dtype))
        tensors.append(t.transpose(-1, -2) if transposed and len(shape) >= 2 else t)
    case.ll_fn(*tensors).output("out")
    return g


SELECTED = [c for c in CASES if c.name in OP_CASES or c.name in EXTRA_NAMES]
PARAMS = [pytest.param(c, d, id=f"{c.name}-{str(d).split('.')[1]}") for c in SELECTED for d in c.dtypes]


@pytest.mark.parametrize(("case", "dtype"), PARAMS)
def test_op_cases_compile(case, dtype: torch.dtype) -> None:
    _check_all(_llir(_case_graph(case, dtype, transposed=case.name in OP_CASES)))


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(graphs())
def test_fuzz_graphs_compile(drawn) -> None:
    graph, _ = drawn
    _check_all(_llir(graph))


@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_models_compile(name: str) -> None:
    model, inputs = (MLP(16, 32, 8), mlp_inputs(2, 16)) if name == "mlp" else \
        (LlamaBlock(32, 2, 64, 8), llama_inputs(1, 8, 32))
    comp = ll.compile(model.eval(), inputs)
    try:
        llir = comp.llir()
    finally:
        comp.egraph.close()
    kernels = _check_all(llir)
    assert any(k.name == "k_sum_reduce" for k in kernels)


def test_every_op_and_dtype_pair_compiles() -> None:
    """Unary ops in every float dtype, casts between every pair, bool reductions."""
    g = ll.Graph()
    for dtype in (ll.f32, ll.f16, ll.bf16, ll.f64):
        x = g.tensor((3, 5), f"x_{dtype.value}", dtype=dtype)
        for i, y in enumerate((x.log2(), x.exp2(), x.sin(), x.sqrt(), x.reciprocal(), x.exp(), x.fmod(x), x.max(-1))):
            y.output(f"u{i}_{dtype.value}")
    dtypes = (ll.f32, ll.f16, ll.bf16, ll.i32, ll.i64, ll.f64, ll.bool)
    for source in dtypes:
        x = g.tensor((4, 3), f"c_{source.value}", dtype=source)
        for target in dtypes:
            if target != source:
                x.cast(target).output(f"cast_{source.value}_{target.value}")
    kernels = _check_all(_llir(g))
    names = {k.name for k in kernels}
    assert {"k_log2", "k_exp2", "k_sin", "k_sqrt", "k_recip", "k_mod", "k_cast", "k_max_reduce"} <= names


def test_identical_kernels_give_identical_source() -> None:
    g = ll.Graph()
    a, b = g.tensor((4, 4), "a"), g.tensor((4, 4), "b")
    a.sin().output("sa")
    b.sin().output("sb")
    llir = _llir(g)
    sins = [kernel_source(k, llir).source for k in llir.kernels if k.op == "Sin"]
    assert len(sins) == 2 and sins[0] == sins[1]


def test_symbolic_dims_read_from_dyn() -> None:
    g = ll.Graph()
    x, w = g.tensor(("s", 4), name="x"), g.tensor((4, 3), name="w")
    (x @ w).softmax(-1).output("y")
    kernels = _check_all(_llir(g))
    dynamic = [k for k in kernels if k.dyn]
    assert dynamic and all(k.dyn == ("s",) for k in dynamic)
    for k in dynamic:
        assert "const long long s = dyn[0];" in k.source
        grid, block = k.launch({"s": 1000})
        assert grid >= 1 and block >= 1
        assert k.dyn_values({"s": 1000}) == [1000]


def test_broken_source_raises_with_log() -> None:
    source = 'extern "C" __global__ void broken(float *out) { out[0] = undefined_name; }\n'
    with pytest.raises(CudaCompileError) as info:
        compile_ptx(source)
    assert "undefined_name" in info.value.log
    assert info.value.source == source


def test_report_distinct_sources() -> None:
    """Runs last in file order: at least a few dozen distinct kernels were compiled."""
    print(f"\n{len(COMPILED)} distinct CUDA kernels compiled")
    assert len(COMPILED) >= 20
