"""Row regions: a reduction fused with its producers and its readers (softmax, norms, the attention row), their
structure, their numbers against the reference runtime and torch, and their CUDA compiled with NVRTC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.codegen.cpu import row_region_source
from luminal_lab.codegen.cpu_loop import Operand, Stride
from luminal_lab.codegen.cuda import llir_sources
from luminal_lab.codegen.ptx import compile_ptx
from luminal_lab.core.arrays import to_numpy
from luminal_lab.core.errors import LuminalError
from luminal_lab.core.ops import IN_REGION
from luminal_lab.llir.genome import extract
from luminal_lab.llir.regions import find_regions
from luminal_lab.runtime import foreign_kernels
from luminal_lab.runtime.cpu import CPURuntime
from tests.helpers.rows import PATTERNS, REGION_OPS, attention_row, build, causal_mask, fused, fused_pattern, inputs


# ---- structure -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_pattern_is_one_region(pattern: str) -> None:
    _comp, llir = fused_pattern(pattern)
    (region,) = find_regions(llir)
    assert region.op_names(llir) == REGION_OPS[pattern]
    computing = [k.op for k in llir.kernels if k.op not in ("Input", "Constant", "Output", *IN_REGION)]
    assert computing == ["FusionEnd"]
    body = region.body(llir)
    assert body.rows == llir.kernels[region.end].shape[:1]
    assert {body.extent(f"t{i}") for i, (op, _) in enumerate(body.steps) if op.endswith("Reduce")} == {None}


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_the_cpu_kernel_reads_back_the_exp_its_sum_pass_kept(pattern: str) -> None:
    """Softmax's exp (the attention row's too) is computed once, in the sum's pass, which stores it in ``out``; the
    end's pass reads it back rather than computing it again. Where the end needs no unary op of the last pass
    (log_softmax, the norms), nothing is kept."""
    _, llir = fused_pattern(pattern)
    (region,) = find_regions(llir)
    body = region.body(llir)
    operands = tuple(Operand(Stride.BROADCAST if body.extent(f"x{j}") is None else Stride.CONTIGUOUS)
                     for j in range(len(body.inputs)))
    source = row_region_source(body, operands, 1, parallel=False)
    kept = pattern in ("softmax", "attention", "masked_attention")
    assert ("= out[i0, j]\n" in source) == kept
    assert source.count("m.exp2f(") == (1 if "Exp2" in REGION_OPS[pattern] else 0)


def test_region_keeps_the_provenance_of_every_op() -> None:
    comp, llir = fused_pattern("softmax")
    (region,) = find_regions(llir)
    hlir = {h for kid in region.kernels() for h in llir.kernels[kid].hlir}
    computed = {n.id for n in comp.graph.live_nodes() if n.op.value not in ("Input", "Output", "Constant")}
    assert computed <= hlir


def test_rows_of_two_lengths_fuse_and_compute() -> None:
    g = ll.Graph()
    a = g.tensor((4, 6), name="a")
    c = g.tensor((4, 9), name="c")
    (a.exp().sum(-1) * c.sin().max(-1)).output("y")
    comp, llir = fused(g)
    (region,) = find_regions(llir)
    body = region.body(llir)
    assert {str(e) for e in body.extents if e is not None} == {"6", "9"}
    values = {"a": torch.randn(4, 6), "c": torch.randn(4, 9)}
    torch.testing.assert_close(comp.run(**values), values["a"].exp().sum(-1) * values["c"].sin().amax(-1))


def test_readers_with_axes_of_extent_one_are_per_row() -> None:
    """Row sums read back as ``[1, 8, 32]`` (a batch axis of 1, as in a model's residual add) are still one value
    per row of ``[8, 32]``: one region, whose numbers match and whose CUDA compiles."""
    g = ll.Graph()
    a = g.tensor((8, 32, 4), name="a")
    b = g.tensor((1, 8, 32), name="b")
    (a.sin().sum(-1).reshape((1, 8, 32)) + b).exp().output("y")
    comp, llir = fused(g)
    (region,) = find_regions(llir)
    assert region.op_names(llir) == ["Sin", "SumReduce", "Add", "Exp"]
    body = region.body(llir)
    assert [str(d) for d in body.rows] == ["8", "32"] and body.extent(body.result) is None
    values = {"a": torch.randn(8, 32, 4), "b": torch.randn(1, 8, 32)}
    torch.testing.assert_close(comp.run(**values), (values["a"].sin().sum(-1)[None] + values["b"]).exp())
    (kernel,) = [k for k in llir_sources(llir) if k.name == "k_row_region"]
    assert ".entry k_row_region" in compile_ptx(kernel.source)


def test_a_reader_off_the_rows_stays_outside() -> None:
    """A softmax over rows of 16 read back as ``[8, 512]``: the reader's elements are not along those rows, so it
    does not join the region (no region can describe it), and the numbers match."""
    g = ll.Graph()
    a = g.tensor((8, 32, 16), name="a")
    a.softmax(-1).reshape((8, 512)).sin().output("y")
    comp, llir = fused(g)
    assert [region.op_names(llir) for region in find_regions(llir)] == [REGION_OPS["softmax"]]
    values = torch.randn(8, 32, 16)
    torch.testing.assert_close(comp.run(values), values.softmax(-1).reshape(8, 512).sin())


def test_nested_reductions_stay_apart() -> None:
    """A sum of row sums reduces per-row values: no region holds both reductions."""
    g = ll.Graph()
    a = g.tensor((4, 5, 6), name="a")
    a.sum(-1).sum(-1).output("y")
    comp, llir = fused(g)
    for region in find_regions(llir):
        assert sum(op.endswith("Reduce") for op in region.op_names(llir)) <= 1
    values = torch.randn(4, 5, 6)
    torch.testing.assert_close(comp.run(values), values.sum((-1, -2)), rtol=1e-5, atol=1e-5)


def test_a_region_of_two_row_shapes_is_refused_by_its_body() -> None:
    _comp, llir = fused_pattern("softmax")
    (region,) = find_regions(llir)
    kernels = list(llir.kernels)
    total = next(k for k in kernels if k.op == "FusedSumReduce")
    kernels[total.id] = type(total)(total.id, total.op, total.sources, (ll.Expr.num(3),), total.dtype, total.arg,
                                    total.eclass, total.hlir)
    broken = type(llir)(kernels, llir.outputs)
    with pytest.raises(LuminalError, match="reduces to more than one shape"):
        region.body(broken)


# ---- numbers -------------------------------------------------------------------------------------
DTYPES = {ll.f32: (torch.float32, 1e-5), ll.f64: (torch.float64, 1e-12), ll.f16: (torch.float16, 2e-2),
          ll.bf16: (torch.bfloat16, 5e-2)}


# every dtype over rows of 7 (not a power of two) and rows of 1; f32 also over rows of 10 and of 33 (past a warp)
CASES = [(shape, dtype) for dtype in DTYPES for shape in ((5, 7), (3, 1), *(((6, 10), (2, 33)) if dtype == ll.f32
                                                                            else ()))]


@pytest.mark.parametrize(("shape", "dtype"), CASES, ids=lambda c: str(c) if isinstance(c, tuple) else c.value)
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_fused_matches_reference(pattern: str, shape: tuple[int, int], dtype) -> None:
    torch_dtype, tolerance = DTYPES[dtype]
    comp, llir = fused_pattern(pattern, *shape, dtype)
    assert any(k.op == "FusionEnd" for k in llir.kernels)
    values = inputs(pattern, *shape, torch_dtype)
    got = comp.run(**values)
    expected = comp.run_reference(**values).double()
    torch.testing.assert_close(got.double(), expected, rtol=tolerance, atol=tolerance, equal_nan=True)


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_fused_matches_torch_with_nan_rows(pattern: str) -> None:
    """A NaN poisons its own row only, in the fused kernel as in torch."""
    comp, _ = fused_pattern(pattern)
    values = inputs(pattern, 6, 10, torch.float32)
    values["x"][2, 3] = float("nan")
    x, w, b, mask = values["x"], values["w"], values["b"], values["mask"]
    expected = {"softmax": lambda: torch.softmax(x, -1), "log_softmax": lambda: torch.log_softmax(x, -1),
                "rmsnorm": lambda: torch.nn.functional.rms_norm(x, (10,), w, 1e-6),
                "layernorm": lambda: torch.nn.functional.layer_norm(x, (10,), w, b, 1e-5),
                "attention": lambda: torch.softmax(x / math.sqrt(10) + mask, -1),
                "masked_attention": lambda: torch.softmax((x / math.sqrt(10)).masked_fill(mask, -math.inf), -1),
                }[pattern]()
    got = comp.run(**values)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert torch.isnan(got).any(-1).tolist() == torch.isnan(expected).any(-1).tolist()


@pytest.mark.parametrize("pattern", ["attention", "masked_attention"])
def test_causal_attention_rows_are_masked(pattern: str) -> None:
    comp, _ = fused_pattern(pattern, 6, 6)
    values = inputs(pattern, 6, 6, torch.float32)
    weights = comp.run(**values)
    assert (weights[np.triu_indices(6, 1)] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(6))


def test_scores_of_a_matmul_stay_a_matmul() -> None:
    """q @ k^T then the attention row: the fused genome keeps the matmul and fuses all that follows it (scale, mask
    and softmax) into one region, though the scaled, masked scores also end a larger region of q·kᵀ row sums."""
    g = ll.Graph()
    q = g.tensor((6, 10), name="q")
    mask = g.tensor((6, 6), name="mask")
    attention_row(q @ q.transpose(0, 1), None, None, mask).output("y")
    comp, llir = fused(g)
    computing = [k.op for k in llir.kernels if k.op not in ("Input", "Constant", "Output", *IN_REGION)]
    assert computing == ["Matmul", "FusionEnd"]
    (region,) = find_regions(llir)
    assert region.op_names(llir) == REGION_OPS["attention"]
    values = {"q": torch.randn(6, 10), "mask": torch.from_numpy(causal_mask(6, 6))}
    expected = torch.softmax(values["q"] @ values["q"].T / math.sqrt(6) + values["mask"], -1)
    torch.testing.assert_close(comp.run(**values), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pattern", ["layernorm", "softmax"])
def test_large_rows_run_in_parallel_and_match(pattern: str) -> None:
    """Rows past the parallel threshold: the prange variant, against the unfused kernels."""
    comp, llir = fused(build(pattern, 96, 1000))
    values = inputs(pattern, 96, 1000, torch.float32)
    arrays = {name: to_numpy(value) for name, value in values.items()}
    unfused = CPURuntime(extract(comp.choice_space().unfused_genome())).run(arrays)[0]
    np.testing.assert_allclose(CPURuntime(llir).run(arrays)[0], unfused, rtol=1e-4, atol=1e-4)


# ---- CUDA ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: d.value)
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_row_regions_compile_with_nvrtc(pattern: str, dtype) -> None:
    """Rows of 7 and of 40: a thread per row (the 5 rows in one block of 256), and a block of 64 per row."""
    for length, launch in ((7, (1, 256)), (40, (5, 64))):
        _, llir = fused_pattern(pattern, 5, length, dtype)
        (kernel,) = [k for k in llir_sources(llir) if k.name == "k_row_region"]
        assert kernel.per_output_block and kernel.launch() == launch
        assert ".entry k_row_region" in compile_ptx(kernel.source)


# ---- the GPU schedule: a block or a warp per row -------------------------------------------------
def test_a_row_region_ends_either_way_and_the_cpu_leaves_the_warp_out() -> None:
    """Each row region's end has a ``FusionEndWarp`` twin: the genome picks it as ``FusionEnd warp`` (one kernel, a
    warp per row, the same numbers on the CPU); a search on the CPU leaves it out (``foreign_kernels``)."""
    comp, llir = fused(build("softmax", 20, 64))
    space = comp.choice_space()
    end = next(k for k in llir.kernels if k.op == "FusionEnd")
    assert end.arg is None and end.label == "FusionEnd"
    labels = [getattr(space.kernel_of(n), "op", None) for n in space.options[space.position[end.eclass]]]
    assert 1 < labels.count("FusionEndWarp") < labels.count("FusionEnd")  # row regions have a twin, plain ones not
    genome = space.fused_genome()
    warp = extract(space.warp_per_row(genome))
    assert [(k.id, k.op) for k in warp.kernels] == [(k.id, k.op) for k in llir.kernels]  # only the end differs
    (warp_end,) = [k for k in warp.kernels if k.op == "FusionEnd"]
    assert warp_end.label == "FusionEnd warp" and [r.op_names(warp) for r in find_regions(warp)] == [
        REGION_OPS["softmax"]]
    (kernel,) = [k for k in llir_sources(warp) if k.name == "k_row_region"]
    assert kernel.launch() == (3, 256) and "__shfl_xor_sync" in kernel.source and "partial" not in kernel.source
    values = inputs("softmax", 20, 64, torch.float32)
    arrays = {name: to_numpy(value) for name, value in values.items()}
    np.testing.assert_allclose(CPURuntime(warp).run(arrays)[0], torch.softmax(values["x"], -1).numpy(), rtol=1e-6,
                               atol=1e-7)
    cpu = foreign_kernels("cpu")
    assert "FusionEndWarp" in cpu and "FusionEndWarp" not in foreign_kernels("cuda")
    for seed in range(12):
        assert not any(k.arg == "warp" for k in extract(space.random_genome(seed, cpu)).kernels)
