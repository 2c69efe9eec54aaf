"""The CUDA stage: summary line, JSON envelope, HTML listing, lazy compilation and how failures show."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace

import pytest

import luminal_lab as ll
from luminal_lab.codegen import cuda_stage
from luminal_lab.codegen.cuda import llir_sources
from luminal_lab.codegen.cuda_stage import CudaStage
from luminal_lab.codegen.ptx import _nvrtc
from luminal_lab.core.errors import CudaCompileError
from luminal_lab.core.stage import SCHEMA_VERSION, STAGE_MIME
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR
from luminal_lab.llir.regions import find_regions
from tests.helpers.fused import plain_reductions

needs_compiler = pytest.mark.skipif(_nvrtc() is None and not os.path.exists("/usr/local/cuda/bin/nvcc")
                                    and shutil.which("nvcc") is None, reason="neither NVRTC nor nvcc available")
BROKEN = 'extern "C" __global__ void k_add(float *out) { out[0] = undefined_name; }\n'


def fused_llir(graph: ll.Graph) -> LLIR:
    """The LLIR of the first random genome that fuses a region."""
    comp = ll.compile(graph)
    try:
        space = comp.choice_space()
        for seed in range(8):
            llir = extract(space.random_genome(seed))
            if any(k.op == "FusionEnd" for k in llir.kernels):
                return llir
    finally:
        comp.egraph.close()
    raise AssertionError("no random genome fused anything")


def sin_sqrt_sum() -> ll.Graph:
    """``y = sqrt(sin(a + b))`` (fusable), ``y`` and its row sums as outputs."""
    g = ll.Graph()
    a, b = g.tensor((4, 8), "a"), g.tensor((4, 8), "b")
    y = (a + b).sin().sqrt()
    y.output("y")
    y.sum(-1).output("s")
    return g


@pytest.fixture(scope="module")
def llir() -> LLIR:
    """``sin_sqrt_sum`` with ``y`` fused and its row sums a plain kernel reading the region."""
    comp = ll.compile(sin_sqrt_sum())
    try:
        return extract(plain_reductions(comp.choice_space().fused_genome()))
    finally:
        comp.egraph.close()


@pytest.fixture(scope="module")
def symbolic() -> LLIR:
    g = ll.Graph()
    a, b = g.tensor(("s", 8), "a"), g.tensor(("s", 8), "b")
    (a + b).sin().sqrt().output("y")
    return fused_llir(g)


def _failing(error: Exception):
    def compile_ptx(source: str, arch: str = "sm_90") -> str:
        raise error
    return compile_ptx


@needs_compiler
def test_summary_counts_kernels_regions_and_compiled(llir: LLIR) -> None:
    stage = CudaStage(llir)
    n = len(llir_sources(llir))
    regions = len(find_regions(llir))
    word = "region" if regions == 1 else "regions"
    assert stage.summary() == f"CUDA: {n} kernels ({regions} fused {word}), {n} compiled to sm_90 PTX"
    assert repr(stage) == stage.summary() == CudaStage(llir).summary()
    assert CudaStage(llir, arch="sm_80").summary().endswith("compiled to sm_80 PTX")


@needs_compiler
def test_to_json_nodes_edges_and_links(llir: LLIR) -> None:
    stage = CudaStage(llir)
    data = stage.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["stage"] == "cuda" and data["schema"] == SCHEMA_VERSION and data["summary"] == stage.summary()
    kernels = llir_sources(llir)
    nodes = data["nodes"]
    assert len(nodes) == len(kernels) == len(stage)
    assert [n["id"] for n in nodes] == [f"cu{k.writes}" for k in kernels]
    assert [n["source"] for n in nodes] == [k.source for k in kernels]
    by_id = {k.id: k for k in llir.kernels}
    regions = {r.end: r for r in find_regions(llir)}
    links = data["links"]["llir"]
    assert set(links) == {n["id"] for n in nodes}
    labels = []
    for node, kernel in zip(nodes, kernels):
        assert node["compiled"] and node["status"].startswith("compiled (")
        assert node["status"].endswith(" lines of PTX)")
        assert node["reads"] == [f"k{r}" for r in kernel.reads] and node["writes"] == f"k{kernel.writes}"
        assert (node["grid"], node["block"]) == kernel.launch()
        region = regions.get(kernel.writes)
        if region is None:
            assert not node["fused"] and node["region"] == [] and node["label"] == kernel.name
            assert links[node["id"]] == [node["writes"]]
        else:
            assert node["fused"] and node["name"] == "k_region" and by_id[kernel.writes].op == "FusionEnd"
            assert node["region"] == region.op_names(llir) == ["Add", "Sin", "Sqrt"]
            labels.append(node["label"])
            assert links[node["id"]] == [f"k{i}" for i in sorted({region.end, *region.ops, *region.starts})]
    assert labels == ["k_region [Add, Sin, Sqrt]"]
    ids = {n["id"] for n in nodes}
    assert data["edges"] and all(e["source"] in ids and e["target"] in ids for e in data["edges"])
    assert data["meta"]["counts"] == {"kernels": len(kernels), "regions": len(regions), "compiled": len(kernels),
                                      "library": 0, "failed": 0, "not_compiled": 0}
    bundle = stage._repr_mimebundle_()
    assert set(bundle) == {"text/plain", STAGE_MIME} and stage.to_svg() is None


def test_a_row_region_is_one_k_row_region_node() -> None:
    """The most-fused genome also fuses the row sums (recomputing y inside): a ``k_row_region`` node, a thread per row
    (rows of 8 are too short to share among lanes), linked to its region's kernels."""
    comp = ll.compile(sin_sqrt_sum())
    try:
        llir = extract(comp.choice_space().fused_genome())
    finally:
        comp.egraph.close()
    stage = CudaStage(llir)
    nodes = stage.to_json()["nodes"]
    assert [(n["name"], n["label"], (n["grid"], n["block"])) for n in nodes] == [
        ("k_region", "k_region [Add, Sin, Sqrt]", (1, 32)),
        ("k_row_region", "k_row_region [Add, Sin, Sqrt, SumReduce]", (1, 256))]
    row = find_regions(llir)[1]
    assert stage.to_json()["links"]["llir"][nodes[1]["id"]] == [f"k{i}" for i in row.kernels()]


def test_launch_symbolic_and_bound(symbolic: LLIR) -> None:
    stage = CudaStage(symbolic)
    (kernel,) = [k for k in stage if stage.region(k) is not None]
    grid, block = stage.launch(kernel)
    assert kernel.dyn == ("s",) and "s" in str(grid) and "s" in str(block)
    bound = stage.launch(kernel, {"s": 1000, "unused": 3})
    assert all(e.is_num for e in bound)
    assert tuple(e.value for e in bound) == kernel.launch({"s": 1000}) == (32, 256)


def test_compiles_lazily_once(llir: LLIR, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cuda_stage, "compile_ptx", lambda source, arch: calls.append(source) or ".entry k(\n")
    stage = CudaStage(llir)
    assert calls == []
    stage.summary()
    stage.to_json()
    assert sorted(calls) == sorted(k.source for k in stage)
    assert stage.status(stage[0]) == "compiled (1 lines of PTX)"


def test_compile_error_is_shown_not_raised(llir: LLIR, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_stage, "compile_ptx", _failing(CudaCompileError("kernel.cu(5): error: <boom>", "src")))
    stage = CudaStage(llir)
    n = len(stage)
    assert stage.summary() == stage.summary().split(",")[0] + f", 0 compiled to sm_90 PTX, {n} failed"
    assert stage.status(stage[0]) == "compile error:\nkernel.cu(5): error: <boom>"
    data = stage.to_json()
    assert all(not node["compiled"] and "<boom>" in node["status"] for node in data["nodes"])
    assert data["meta"]["counts"]["failed"] == n
    page = stage._repr_html_()
    assert "&lt;boom&gt;" in page and "<boom>" not in page


def test_missing_compiler_is_shown(llir: LLIR, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_stage, "compile_ptx", _failing(FileNotFoundError("no nvcc")))
    stage = CudaStage(llir)
    assert stage.summary().endswith(f", 0 compiled to sm_90 PTX, {len(stage)} not compiled")
    assert stage.status(stage[0]) == "not compiled:\nno nvcc"


@needs_compiler
def test_real_compiler_log_for_a_bad_source(llir: LLIR) -> None:
    stage = CudaStage(llir)
    stage.kernels[0] = replace(stage.kernels[0], source=BROKEN)
    status = stage.status(stage[0])
    assert status.startswith("compile error:\n") and "undefined_name" in status
    assert stage.summary().endswith(f", {len(stage) - 1} compiled to sm_90 PTX, 1 failed")
    assert "undefined_name" in stage.to_json()["nodes"][0]["status"]


@needs_compiler
def test_html_lists_launch_status_and_highlighted_source(llir: LLIR, monkeypatch: pytest.MonkeyPatch) -> None:
    stage = CudaStage(llir)
    page = stage._repr_html_()
    assert stage.summary() in page
    for kernel in stage:
        grid, block = kernel.launch()
        at = page.index(f'id="cu{kernel.writes}"')
        assert page.index(f"grid {grid} × block {block}", at) < page.index("lines of PTX)", at) < \
            page.index("__global__", at)
    assert "k_region [Add, Sin, Sqrt]" in page
    pytest.importorskip("pygments")
    assert page.count('<span style="color: #') > 10 * len(stage)  # Pygments' inline styles
    monkeypatch.setitem(sys.modules, "pygments", None)  # as if not installed
    plain = stage._repr_html_()
    assert plain.count('<pre style="margin:0">#include &lt;cuda_fp16.h&gt;') == len(stage)
    assert '<span style="color: #' not in plain


def test_a_library_matmul_is_listed_not_compiled() -> None:
    """The default genome runs a contraction through cuBLAS: a kernel whose source says so and whose status is a
    library call, counted apart from the compiled kernels; the tiled implementation compiles instead."""
    g = ll.Graph()
    (g.tensor((7, 5), "a") @ g.tensor((5, 6), "b")).relu().output("y")
    comp = ll.compile(g)
    stage = comp.cuda
    (matmul,) = (k for k in stage.kernels if k.library)
    assert matmul.library == "cublas" and matmul.source.startswith("// k") and "torch.mm" in matmul.source
    assert stage.status(matmul) == "library call (cublas through torch.mm): nothing to compile"
    assert stage.compilation(matmul).ok and not stage.compilation(matmul).failed
    assert repr(stage).endswith(f"{len(stage.kernels) - 1} compiled to sm_90 PTX, 1 library call")
    space = comp.choice_space()
    eclass = next(k.eclass for k in comp.llir().kernels if k.op == "Matmul")
    tiled = next(a for a in space.alternatives(space.fused_genome(), eclass)
                 if any(k.op == "MatmulTiled" for k in extract(a).kernels))
    comp.genome = tiled
    assert not any(k.library for k in comp.cuda.kernels)
    assert any(k.name == "k_matmul_tiled" for k in comp.cuda.kernels)
