"""``where`` as a select: the e-graph offers a ``Select`` kernel op beside the Gather that ``where`` lowers to, reading
the condition and both operands where they are; it runs exactly (inf, NaN, every dtype), fuses into regions (the masked
scores of attention into their softmax's row), and its CUDA compiles with NVRTC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.codegen.cuda import llir_sources
from luminal_lab.codegen.ptx import compile_ptx
from luminal_lab.core.ops import IN_REGION
from luminal_lab.llir.regions import find_regions
from tests.helpers.models import LlamaBlock, llama_inputs

DTYPES = {ll.f32: torch.float32, ll.f64: torch.float64, ll.f16: torch.float16, ll.bf16: torch.bfloat16,
          ll.i32: torch.int32}
SPECIAL = [math.inf, -math.inf, math.nan, -0.0, 1.5, -2.25]


def _where_graph(dtype=ll.f32, condition_dtype=ll.bool) -> ll.Graph:
    """``where(c, a, b)`` over ``[4, 6]``: ``c`` broadcast from ``[4, 1]``, ``a`` a full tensor, ``b`` a row."""
    g = ll.Graph()
    c = g.tensor((4, 1), name="c", dtype=condition_dtype)
    a = g.tensor((4, 6), name="a", dtype=dtype)
    b = g.tensor((6,), name="b", dtype=dtype)
    ll.where(c, a, b).output("y")
    return g


def _values(dtype: torch.dtype, condition: torch.dtype = torch.bool) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(4, 6, generator=generator) * 10
    b = torch.tensor(SPECIAL)
    if dtype.is_floating_point:
        a[1, :] = torch.tensor(SPECIAL[::-1])
    return {"c": torch.tensor([[True], [False], [True], [False]]).to(condition), "a": a.to(dtype), "b": b.to(dtype)}


def _computing(llir) -> list[str]:
    return [k.op for k in llir.kernels if k.op not in ("Input", "Constant", "Output", *IN_REGION)]


def _same(got: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal bit for bit, NaN included (a select moves values, it computes nothing)."""
    assert got.dtype == expected.dtype
    assert got.view(torch.uint8).tolist() == expected.contiguous().view(torch.uint8).tolist()


@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: d.value)
def test_where_runs_as_one_select_reading_its_inputs_where_they_are(dtype) -> None:
    """The smallest genome runs ``where`` as one Select kernel, reading the three inputs themselves (the copies and
    the int condition that the Gather reads are gone) through broadcast views; its values are torch's, bit for bit."""
    comp = ll.compile(_where_graph(dtype))
    comp.genome = comp.choice_space().smallest_genome()
    llir = comp.llir()
    assert _computing(llir) == ["Select"]
    (select,) = [k for k in llir.kernels if k.op == "Select"]
    assert [llir.kernels[source].arg for source, _ in select.sources] == ["c", "a", "b"]
    assert [tuple(map(str, view.strides)) for _, view in select.sources] == [("z", "0"), ("6*z", "z"), ("0", "z")]
    values = _values(DTYPES[dtype])
    _same(comp.run(**values), torch.where(values["c"], values["a"], values["b"]))


def test_the_gather_stays_a_choice_and_agrees() -> None:
    """The select is an alternative in the Gather's e-class: without it the genome runs the Gather over the copies'
    concat, with the same values (up to the sign of zero: the concat adds its padding's +0.0 to -0.0)."""
    comp = ll.compile(_where_graph())
    space = comp.choice_space()
    kernels = [{space.kernel_of(n).op for n in options if n.op == "Op"} for options in space.options]
    assert sum({"KernelGather", "KernelSelect"} <= ops for ops in kernels) == 1
    comp.genome = space.smallest_genome(without=("Select",))
    assert "Gather" in _computing(comp.llir()) and "Select" not in _computing(comp.llir())
    values = _values(torch.float32)
    expected = torch.where(values["c"], values["a"], values["b"])
    torch.testing.assert_close(comp.run(**values), expected, rtol=0, atol=0, equal_nan=True)


def test_a_symbolic_size_keeps_the_gather_and_copies_only_what_it_must() -> None:
    """Over ``[s, 6]`` the select rule does not apply (it checks the concat holds ``2n`` for a number ``n``): the
    Gather runs, copying only ``b``, a broadcast row (``a`` is laid out already), and agrees with torch."""
    g = ll.Graph()
    c, a = g.tensor(("s", 6), name="c", dtype=ll.bool), g.tensor(("s", 6), name="a")
    b = g.tensor((6,), name="b")
    ll.where(c, a, b).output("y")
    comp = ll.compile(g)
    comp.genome = comp.choice_space().smallest_genome()
    assert "Select" not in _computing(comp.llir())
    assert [n.sources[0][0].arg for n in comp.graph.live_nodes() if n.op == ll.Op.CAST and n.arg == ll.f32] == ["b"]
    generator = torch.Generator().manual_seed(2)
    values = {"c": torch.rand(5, 6, generator=generator) > 0.5, "a": torch.randn(5, 6, generator=generator),
              "b": torch.tensor(SPECIAL)}
    expected = torch.where(values["c"], values["a"], values["b"])
    torch.testing.assert_close(comp.run(**values), expected, rtol=0, atol=0, equal_nan=True)


def test_a_condition_that_is_not_bool_selects_where_it_is_nonzero() -> None:
    """A float condition is cast to bool first (NaN is true, -0.0 false); the select reads that bool."""
    comp = ll.compile(_where_graph(condition_dtype=ll.f32))
    comp.genome = comp.choice_space().smallest_genome()
    assert _computing(comp.llir()) == ["Cast", "Select"]
    values = _values(torch.float32, torch.float32)
    values["c"] = torch.tensor([[math.nan], [-0.0], [2.0], [0.0]])
    _same(comp.run(**values), torch.where(values["c"].bool(), values["a"], values["b"]))


def test_a_select_fuses_with_elementwise_neighbours() -> None:
    """``where(c, a * 2, b) + 1``: the select joins the product and the sum in one region; its condition enters the
    region as its own bool start."""
    g = ll.Graph()
    c = g.tensor((4, 6), name="c", dtype=ll.bool)
    a, b = g.tensor((4, 6), name="a"), g.tensor((4, 6), name="b")
    (ll.where(c, a * 2, b) + 1).output("y")
    comp = ll.compile(g)
    comp.genome = comp.choice_space().fused_genome()
    llir = comp.llir()
    assert _computing(llir) == ["FusionEnd"]
    (region,) = find_regions(llir)
    assert region.op_names(llir) == ["Mul", "Select", "Add"]
    assert [dtype for _, _, dtype in region.body(llir).inputs if dtype == ll.bool] == [ll.bool]
    generator = torch.Generator().manual_seed(1)
    values = {"c": torch.rand(4, 6, generator=generator) > 0.5, "a": torch.randn(4, 6, generator=generator),
              "b": torch.tensor([SPECIAL] * 4)}
    expected = torch.where(values["c"], values["a"] * 2, values["b"]) + 1
    torch.testing.assert_close(comp.run(**values), expected, equal_nan=True, rtol=0, atol=0)


def test_masked_fill_then_softmax_from_torch_is_one_row_region() -> None:
    """A module's ``masked_fill(mask, -inf)`` then ``softmax`` (causal attention weights, one head of 5 rows of 7):
    one kernel, the mask selected inside the row region; fully masked positions weigh exactly 0."""
    class Weights(torch.nn.Module):
        def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return torch.softmax((scores * 0.5).masked_fill(mask, -math.inf), -1)

    scores = torch.randn(1, 2, 5, 7)
    mask = torch.from_numpy(np.triu(np.ones((5, 7), bool), 1))
    comp = ll.compile(Weights(), (scores, mask))
    comp.genome = comp.choice_space().fused_genome()
    llir = comp.llir()
    assert _computing(llir) == ["FusionEnd"]
    (region,) = find_regions(llir)
    assert "Select" in region.op_names(llir) and "MaxReduce" in region.op_names(llir)
    got = comp.run(scores, mask)
    torch.testing.assert_close(got, Weights()(scores, mask), rtol=1e-5, atol=1e-6)
    assert (got[..., torch.from_numpy(np.triu(np.ones((5, 7), bool), 1))] == 0).all()


def test_a_llama_blocks_masked_attention_row_is_one_region() -> None:
    """The block divides its scores by sqrt(d) (a reciprocal and a product) before ``masked_fill`` and softmax: one
    region of 11 ops that counts 25 by paths into its end, within ``MAX_REGION_OPS``; it matches the block."""
    model, inputs = LlamaBlock(64, 4, 128, 16).eval(), llama_inputs(1, 16, 64)
    comp = ll.compile(model, inputs)
    comp.genome = comp.choice_space().fused_genome()
    llir = comp.llir()
    assert ["Recip", "Mul", "Select", "MaxReduce", "Mul", "Add", "Mul", "Exp2", "SumReduce", "Recip", "Mul"] in [
        region.op_names(llir) for region in find_regions(llir)]
    with torch.no_grad():
        torch.testing.assert_close(comp.run(*inputs), model(*inputs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: d.value)
def test_select_kernels_compile_with_nvrtc(dtype) -> None:
    """The Select kernel and a region holding a select, in every dtype, compile to PTX."""
    comp = ll.compile(_where_graph(dtype))
    comp.genome = comp.choice_space().smallest_genome()
    (kernel,) = [k for k in llir_sources(comp.llir()) if k.name == "k_select"]
    assert ".entry k_select" in compile_ptx(kernel.source)
    g = ll.Graph()
    c = g.tensor((4, 6), name="c", dtype=ll.bool)
    a, b = g.tensor((4, 6), name="a", dtype=dtype), g.tensor((4, 6), name="b", dtype=dtype)
    (ll.where(c, a * b, b) + a).output("y")
    comp = ll.compile(g)
    comp.genome = comp.choice_space().fused_genome()
    (region,) = [k for k in llir_sources(comp.llir()) if k.name == "k_region"]
    assert ".entry k_region" in compile_ptx(region.source)
