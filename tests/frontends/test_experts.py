"""Mixtures of experts: a grouped matmul (each row times its expert's matrix, ``frontends.experts``) runs as the
gathered contraction ``GatherMatmul`` that the e-graph finds beside the per-row form (the weight taken per row, then
a batched product), on the CPU and as generated CUDA whose indexing a twin checks here; and transformers' MoE models
(Mixtral, Qwen2-MoE, Qwen3-MoE, their default grouped experts) match eager as the user has them, through
``torch.compile`` (forward and greedy generation) and ``ll.compile`` (logits and cache)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.core.shape_tracker import numel
from luminal_lab.frontends.experts import grouped_rows
from luminal_lab.llir.llir import LLIR, Kernel
from tests.helpers.causal_lms import MIXTURES, cache_tensors, greedy_through_programs, prompt
from tests.helpers.generation import greedy_matches_eager

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
ROWS, K, N, EXPERTS = 7, 4, 5, 3
# cumulative rows per expert: each expert some rows; an expert with none; every row to one expert; rows past the last
OFFSETS = ([2, 4, 7], [0, 7, 7], [3, 3, 7], [2, 2, 5])


def _grouped(transposed: bool) -> ll.Compiled:
    """Rows ``x [7, 4]`` by experts ``w [3, 4, 5]`` (stored as ``[3, 5, 4]`` and read transposed, as transformers'
    experts read theirs, when ``transposed``)."""
    g = ll.Graph()
    x = g.tensor((ROWS, K), name="x")
    w = g.tensor((EXPERTS, N, K) if transposed else (EXPERTS, K, N), name="w")
    offs = g.tensor((EXPERTS,), name="offs", dtype=ll.i32)
    grouped_rows(x, w.transpose(-1, -2) if transposed else w, offs).output("y")
    return ll.compile(g)


def _expected(x: torch.Tensor, w: torch.Tensor, offs: list[int]) -> torch.Tensor:
    """transformers' fallback: each expert's rows times its matrix, rows past the last offset 0."""
    out, start = torch.zeros(ROWS, w.shape[-1]), 0
    for expert, end in enumerate(offs):
        out[start:end] = x[start:end] @ w[expert]
        start = end
    return out


def _operands(transposed: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(EXPERTS, K, N, generator=gen)
    return torch.randn(ROWS, K, generator=gen), w, w.transpose(-1, -2).contiguous() if transposed else w


def _gathered(llir: LLIR) -> Kernel:
    (kernel,) = (k for k in llir.kernels if k.op == "GatherMatmul")
    return kernel


@pytest.mark.parametrize("transposed", [False, True])
def test_each_row_times_its_experts_matrix_in_both_forms(transposed: bool) -> None:
    comp = _grouped(transposed)
    space = comp.choice_space()
    gathered, per_row = space.fused_genome(), space.fused_genome(without=("GatherMatmul",))
    x, w, stored = _operands(transposed)
    for offs in OFFSETS:
        for genome in (gathered, per_row):
            comp.genome = genome
            got = comp.run(x, stored, torch.tensor(offs, dtype=torch.int32))
            torch.testing.assert_close(got, _expected(x, w, offs), atol=1e-5, rtol=1e-5)
    # the default genomes read the weight in place: no kernel holds a matrix per row, as the per-row form's gather does
    taken = ROWS * K * N
    for genome in (gathered, space.smallest_genome()):
        llir = comp.llir(genome)
        assert _gathered(llir).sources[2][0] == llir.inputs["w"].id
        assert max(numel(k.shape).value for k in llir.kernels) < taken
    assert [k.shape for k in comp.llir(per_row).kernels if k.op == "Gather"] == [(ROWS, K, N)]


def test_the_gathered_contraction_sits_beside_the_per_row_one_in_the_egraph() -> None:
    comp = _grouped(transposed=True)
    comp.egraph.saturate()
    assert sum(step.matches.get("gathered-matmul", 0) for step in comp.egraph.history) == 1
    snapshot = comp.egraph.snapshot
    kernel = _gathered(comp.llir(comp.choice_space().fused_genome()))
    kinds = {kind.op for node in snapshot.classes[kernel.eclass].nodes if node.op == "Op"
             for kind in snapshot.classes[node.children[0]].nodes}
    assert {"KernelMatmul", "KernelGatherMatmul"} <= kinds


def test_the_cuda_kernel_compiles_and_its_twin_indexes_as_the_reference() -> None:
    """The generated kernel's index arithmetic, run with numpy over every output and contracted position: ``a`` at
    ``p``, the gather position ``q = b(p)``, the row's value at ``rows(q)``, the data at ``within(q) + row * scale``."""
    comp = _grouped(transposed=True)
    comp.genome = comp.choice_space().fused_genome()
    kernel = _gathered(comp.llir())
    (source,) = (c for c in comp.cuda if c.writes == kernel.id)
    assert source.name == "k_gather_matmul"
    assert comp.cuda.compilation(source).ok, comp.cuda.compilation(source).log
    x, w, stored = _operands(True)
    for offs in OFFSETS:
        expert = np.searchsorted(np.array(offs[:-1]), np.arange(ROWS), side="right").astype(np.int64)
        (_, a), (_, rows), (_, data) = kernel.sources
        read = kernel.arg
        p = np.arange(numel(kernel.shape).value * a.dims[-1].value)
        q = np.asarray(read.b.index_expr().evaluate({}, p))
        pos = np.asarray(read.within.evaluate({}, q)) + expert[np.asarray(rows.index_expr().evaluate({}, q))] * \
            read.scale.value
        values = stored.numpy().reshape(-1)[np.asarray(data.index_expr().evaluate({}, pos))]
        products = x.numpy().reshape(-1)[np.asarray(a.index_expr().evaluate({}, p))] * values
        twin = products.reshape(ROWS, N, K).sum(-1)
        # the kernel reads the row's expert before the mask of rows past the last offset, which the region after applies
        expected = _expected(x, w, [*offs[:-1], ROWS]).numpy()
        np.testing.assert_allclose(twin, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(MIXTURES))
def test_a_mixture_of_experts_compiles_as_it_is(name: str) -> None:
    """``torch.compile`` on the model with no wrapper, then ``ll.compile``: the logits and the cache as eager's, each
    expert layer's two grouped products as gathered contractions."""
    model, ids = MIXTURES[name](), prompt()
    with torch.no_grad():
        expected = model(ids)
        got = torch.compile(model, backend="luminal_lab")(ids)
        torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)
        (program,) = ll.programs(model)
        assert program.llir().op_counts()["GatherMatmul"] == 2 * model.config.num_hidden_layers
        comp = ll.compile(model, (ids,))
        got = comp(ids)
        torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)
        for ours, theirs in zip(cache_tensors(got.past_key_values), cache_tensors(expected.past_key_values),
                                strict=True):
            torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(MIXTURES))
def test_a_mixture_of_experts_generates_greedily_as_eager(name: str) -> None:
    """16 tokens through ``torch.compile`` (``model.generate``), then through ``ll.compile``'s programs."""
    model = MIXTURES[name]()
    with torch.no_grad():
        eager = model.generate(prompt(), max_new_tokens=16, do_sample=False)[0, prompt().shape[1]:].tolist()
    tokens, (_, step) = greedy_through_programs(model, prompt(), 16)
    assert tokens == eager
    assert "symbolic" in step.hlir.summary() and step.llir().op_counts()["GatherMatmul"] == 4
    greedy_matches_eager(model, prompt(), 16)


def test_torchs_grouped_mm_translates_to_the_same_contraction() -> None:
    """``torch.nn.functional.grouped_mm`` (transformers' path in bf16), through ``ll.compile``, as torch's result."""
    gen = torch.Generator().manual_seed(0)  # torch's kernel takes rows of a multiple of 16 bytes
    x, w = torch.randn(ROWS, 8, generator=gen).bfloat16(), torch.randn(EXPERTS, 8, 8, generator=gen).bfloat16()
    offs = torch.tensor([2, 2, 7], dtype=torch.int32)
    comp = ll.compile(lambda x, w, offs: torch.nn.functional.grouped_mm(x, w, offs=offs), (x, w, offs))
    assert comp.llir().op_counts()["GatherMatmul"] == 1
    torch.testing.assert_close(comp(x, w, offs), torch.nn.functional.grouped_mm(x, w, offs=offs))


def test_rows_over_two_axes_gather_each_rows_matrix() -> None:
    """Experts picked over a batch of sequences (an index of two axes): a layout the per-expert products do not take,
    so the CPU gathers each row's matrix on each call, through the kernel's own index arithmetic."""
    g = ll.Graph()
    x = g.tensor((2, 3, K), name="x")
    w = g.tensor((EXPERTS, K, N), name="w")
    picks = g.tensor((2, 3), name="picks", dtype=ll.i32)
    x.unsqueeze(-2).matmul(w.take(picks, 0)).output("y")
    comp = ll.compile(g)
    comp.genome = comp.choice_space().fused_genome()
    _gathered(comp.llir())
    gen = torch.Generator().manual_seed(1)
    xs, ws = torch.randn(2, 3, K, generator=gen), torch.randn(EXPERTS, K, N, generator=gen)
    chosen = torch.tensor([[0, 2, 2], [1, 0, 2]], dtype=torch.int32)
    torch.testing.assert_close(comp.run(xs, ws, chosen), xs.unsqueeze(-2) @ ws[chosen.long()], atol=1e-5, rtol=1e-5)
