"""Generated CUDA compiles to PTX (NVRTC, else nvcc) for every kernel of op, fuzz and model LLIRs,
and for the fused regions of random genomes.

No GPU here: nothing runs, the check is that NVRTC accepts each source and emits its entry.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import luminal_lab as ll
from luminal_lab.codegen.cuda import kernel_source, llir_sources, region_source
from luminal_lab.codegen.cuda_c import CudaKernel
from luminal_lab.codegen.ptx import compile_ptx
from luminal_lab.core.dtypes import DType, from_torch
from luminal_lab.core.errors import CudaCompileError
from luminal_lab.core.ops import IN_REGION
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR
from luminal_lab.llir.regions import find_regions
from tests.helpers.fuzz import Case, graphs
from tests.helpers.models import MLP, LlamaBlock, llama_inputs, mlp_inputs
from tests.helpers.nvrtc import compile_kernels, needs_a_cuda_compiler
from tests.helpers.op_cases import CASES

pytestmark = needs_a_cuda_compiler

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
    return _check_kernels(llir_sources(llir))


def _check_kernels(kernels: list[CudaKernel]) -> list[CudaKernel]:
    COMPILED.update(k.source for k in compile_kernels(kernels) if not k.library)
    return kernels


def _add_case(g: ll.Graph, case, dtype: torch.dtype, transposed: bool) -> None:
    """The graph test_ops' ``_check`` builds for ``case``, added to ``g`` (inputs and output named after the case,
    nodes tagged with its name)."""
    with g.origin(case.name):
        tensors = []
        for i, shape in enumerate(case.shapes):
            stored = tuple(shape[:-2]) + (shape[-1], shape[-2]) if transposed and len(shape) >= 2 else tuple(shape)
            t = g.tensor(stored, name=f"{case.name}_x{i}", dtype=from_torch(dtype))
            tensors.append(t.transpose(-1, -2) if transposed and len(shape) >= 2 else t)
        case.ll_fn(*tensors).output(case.name)


SELECTED = [c for c in CASES if c.name in OP_CASES or c.name in EXTRA_NAMES]
PARAMS = [pytest.param(c, d, id=f"{c.name}-{str(d).split('.')[1]}") for c in SELECTED for d in c.dtypes]


@functools.cache
def _op_case_kernels(dtype: torch.dtype) -> dict[str, list[CudaKernel]]:
    """The kernels of every selected case in ``dtype``, by case. The cases are built side by side in one graph and
    lowered by one e-graph, not one each: a case's kernels are those its nodes lowered to, each with the source it
    has when the case is built alone (but a library call's comment names its own kernel id, and a constant two cases
    share is listed under one of them)."""
    g = ll.Graph()
    for case in SELECTED:
        if dtype in case.dtypes:
            _add_case(g, case, dtype, transposed=case.name in OP_CASES)
    llir = _llir(g)
    hlir = {k.id: k.hlir for k in llir.kernels}
    by_case = defaultdict(list)
    for kernel in llir_sources(llir):
        for name in {g.nodes[h].origin for h in hlir[kernel.writes]}:
            by_case[name].append(kernel)
    return by_case


@pytest.mark.parametrize(("case", "dtype"), PARAMS)
def test_op_cases_compile(case, dtype: torch.dtype) -> None:
    kernels = _op_case_kernels(dtype)[case.name]
    assert kernels, f"{case.name} lowered to no kernel"
    _check_kernels(kernels)


@settings(max_examples=15, suppress_health_check=list(HealthCheck), derandomize=True)
@given(graphs())
def test_fuzz_graphs_compile(case: Case) -> None:
    _check_all(_llir(case.graph))


@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_models_compile(name: str) -> None:
    model, inputs = (MLP(16, 32, 8), mlp_inputs(2, 16)) if name == "mlp" else \
        (LlamaBlock(32, 2, 64, 8), llama_inputs(1, 8, 32))
    comp = ll.compile(model.eval(), inputs)
    try:
        llir = comp.llir()
    finally:
        comp.egraph.close()
    names = {k.name for k in _check_all(llir)}
    assert "k_matmul" in names  # the linear layers, as contractions
    assert name == "mlp" or "k_sum_reduce" in names  # the norms' and softmax's sums


def test_every_op_and_dtype_pair_compiles() -> None:
    """Unary ops in every float dtype, casts between every pair (a float to a narrow int through i32)."""
    g = ll.Graph()
    for dtype in (ll.f32, ll.f16, ll.bf16, ll.f64):
        x = g.tensor((3, 5), f"x_{dtype.value}", dtype=dtype)
        for i, y in enumerate((x.log2(), x.exp2(), x.sin(), x.sqrt(), x.reciprocal(), x.exp(), x.fmod(x), x.max(-1))):
            y.output(f"u{i}_{dtype.value}")
    dtypes = (ll.f32, ll.f16, ll.bf16, ll.i8, ll.u8, ll.i16, ll.i32, ll.i64, ll.f64, ll.bool)
    for source in dtypes:
        x = g.tensor((4, 3), f"c_{source.value}", dtype=source)
        for target in dtypes:
            if target != source:
                x.cast(target).output(f"cast_{source.value}_{target.value}")
    kernels = _check_all(_llir(g))
    names = {k.name for k in kernels}
    assert {"k_log2", "k_exp2", "k_sin", "k_sqrt", "k_recip", "k_mod", "k_cast", "k_max_reduce"} <= names
    assert "out[z] = (signed char)((signed char)((int)(" in "".join(k.source for k in kernels)  # f32 -> i8 wraps


def test_scatter_add_compiles_to_an_atomic_add_in_every_dtype_cuda_adds() -> None:
    """``ScatterAdd`` adds with ``atomicAdd`` (positions that repeat add up across threads); a dtype CUDA has no
    atomicAdd for is refused by name at code generation."""
    g = ll.Graph()
    index = g.tensor((6,), "index", ll.i64)
    for dtype in (ll.f32, ll.f16, ll.bf16, ll.f64, ll.i32, ll.i64):
        x = g.tensor((4,), f"x_{dtype.value}", dtype=dtype)
        x.scatter_add(0, index, g.tensor((6,), f"v_{dtype.value}", dtype=dtype)).output(f"added_{dtype.value}")
    kernels = [k for k in _check_all(_llir(g)) if k.name == "k_scatter_add"]
    assert len(kernels) == 6 and all("atomicAdd(" in k.source for k in kernels)
    g = ll.Graph()
    x, index = g.tensor((4,), "x", ll.i8), g.tensor((2,), "index", ll.i64)
    x.scatter_add(0, index, g.tensor((2,), "v", ll.i8)).output("added")
    with pytest.raises(ll.LuminalError, match=r"^ScatterAdd k\d+: CUDA has no atomicAdd for i8"):
        llir_sources(_llir(g))


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


# ---- fused regions -------------------------------------------------------------------------------
def fused_llirs(graph: ll.Graph, seeds: int = 8) -> list[LLIR]:
    """The distinct LLIRs of random genomes 0..seeds-1 that contain fused regions."""
    comp = ll.compile(graph)
    try:
        space = comp.choice_space()
        llirs = {}
        for seed in range(seeds):
            genome = space.random_genome(seed)
            llirs.setdefault(genome.hash, extract(genome))
    finally:
        comp.egraph.close()
    fused = [llir for llir in llirs.values() if any(k.op == "FusionEnd" for k in llir.kernels)]
    assert fused, "no random genome fused anything"
    return fused


def _check_regions(llir: LLIR) -> list[CudaKernel]:
    """Compile every kernel of ``llir``; one ``k_region`` per ``FusionEnd``, reading its starts' sources in
    x-order, and no kernel for a ``FusionStart`` or ``Fused*`` marker. Returns the region kernels."""
    kernels = _check_all(llir)
    by_id = {k.id: k for k in llir.kernels}
    working = [k.id for k in llir.kernels if k.op not in ("Input", *IN_REGION)
               and not (k.op == "Output" and k.sources[0][1].is_contiguous)]
    assert [k.writes for k in kernels] == working
    regions = {region.end: region for region in find_regions(llir)}
    fused = [k for k in kernels if k.name == "k_region"]
    assert sorted(k.writes for k in fused) == sorted(regions) == [k.id for k in llir.kernels if k.op == "FusionEnd"]
    for kernel in fused:
        assert kernel.reads == tuple(by_id[start].sources[0][0] for start in regions[kernel.writes].starts)
        assert kernel.source.count("out[z] = ") == 1
    return fused


def _chain(g: ll.Graph, dtype: DType) -> None:
    """``(a + b).sin().sqrt()`` with ``a`` read transposed and ``b`` padded."""
    a, b = g.tensor((8, 4), "a", dtype=dtype), g.tensor((4, 6), "b", dtype=dtype)
    (a.transpose(0, 1) + b.pad(((0, 0), (1, 1)))).sin().sqrt().output("y")


def _silu(g: ll.Graph, dtype: DType) -> None:
    x = g.tensor((4, 8), "x", dtype=dtype)
    (x * (1 + (-x).exp()).reciprocal()).output("y")


def _diamond(g: ll.Graph, dtype: DType) -> None:
    a, b = g.tensor((4, 8), "a", dtype=dtype), g.tensor((4, 8), "b", dtype=dtype)
    s = a + b
    (s.sin() * s.exp()).output("y")


def _integer(g: ll.Graph, dtype: DType) -> None:
    a, b, c = (g.tensor((4, 8), name, dtype=dtype) for name in "abc")
    ((a + b) * c + a).output("y")


REGION_GRAPHS = {"chain": (_chain, {"Add", "Sin", "Sqrt"}), "silu": (_silu, {"Mul", "Add", "Recip"}),
                 "diamond": (_diamond, {"Add", "Sin", "Mul"}), "integer": (_integer, {"Add", "Mul"})}
FLOATS = (ll.f32, ll.f16, ll.bf16)
REGION_PARAMS = [pytest.param(name, dtype, id=f"{name}-{dtype.value}")
                 for name in ("chain", "silu", "diamond") for dtype in FLOATS] + \
                [pytest.param("integer", dtype, id=f"integer-{dtype.value}")
                 for dtype in (ll.i8, ll.u8, ll.i16, ll.i32, ll.i64, ll.bool)]


@pytest.mark.parametrize(("name", "dtype"), REGION_PARAMS)
def test_regions_compile(name: str, dtype: DType) -> None:
    build, expected = REGION_GRAPHS[name]
    g = ll.Graph()
    build(g, dtype)
    ops: set[str] = set()
    for llir in fused_llirs(g):
        for kernel in _check_regions(llir):
            assert f"{dtype.c_type} *__restrict__ out" in kernel.source
            ops.update(op for region in find_regions(llir) if region.end == kernel.writes
                       for op in region.op_names(llir))
    assert expected <= ops


def test_identical_regions_give_identical_source() -> None:
    """Regions with the same body (whatever their kernel ids or genome) share one source."""
    g = ll.Graph()
    a, b, c, d = (g.tensor((4, 8), name) for name in "abcd")
    (a + b).sin().sqrt().output("y")
    (c + d).sin().sqrt().output("z")
    sources: dict[tuple, set[str]] = {}
    twins = 0
    for llir in fused_llirs(g):
        by_end = {k.writes: k for k in _check_regions(llir)}
        seen: dict[str, int] = {}
        for region in find_regions(llir):
            body = region.body(llir)
            source = region_source(region, llir).source
            assert source == by_end[region.end].source
            reads = tuple((view, dtype) for _, view, dtype in body.inputs)  # the body without kernel ids
            sources.setdefault((body.steps, reads, body.shape, body.dtype), set()).add(source)
            twins += source in seen
            seen[source] = region.end
    assert twins >= 1
    assert all(len(found) == 1 for found in sources.values())


def test_region_dims_named_like_locals() -> None:
    """Symbolic dims called like the kernel's locals (``x0``, ``n``) are renamed in C, not confused with them."""
    g = ll.Graph()
    a, b = g.tensor(("x0", "n"), "a"), g.tensor(("x0", "n"), "b")
    (a + b).sin().sqrt().output("y")
    for llir in fused_llirs(g, seeds=3):
        for kernel in _check_regions(llir):
            assert kernel.dyn == ("n", "x0")
            assert "const long long dyn_n = dyn[0];" in kernel.source
            assert "const long long dyn_x0 = dyn[1];" in kernel.source
            assert kernel.launch({"n": 100, "x0": 3}) == (2, 256)
            assert kernel.dyn_values({"n": 100, "x0": 3}) == [100, 3]


def test_report_distinct_sources() -> None:
    """Runs last in file order: at least a few dozen distinct kernels were compiled."""
    print(f"\n{len(COMPILED)} distinct CUDA kernels compiled")
    assert len(COMPILED) >= 20
