"""A rolled program runs as the unrolled one: the same results, every copy running the kernels the genome picked
for the one layer the e-graph holds; its stages show the layer once, ×copies; torch models roll through both
``ll.compile`` and ``torch.compile``."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch import nn

import luminal_lab as ll
from luminal_lab.compiler import compiled
from luminal_lab.compiler.provenance import Provenance
from luminal_lab.core.ids import hlir_id, kernel_id
from luminal_lab.core.stage import STAGE_MIME
from luminal_lab.llir.genome import extract
from luminal_lab.llir.unroll import runs, unroll
from luminal_lab.search.search import compare
from tests.helpers.models import LlamaBlock, llama_inputs
from tests.helpers.stacks import D, appending, caching, pairs, running_total, stack

GRAPHS = {"stack": lambda: stack(6), "shared": lambda: stack(4, shared=True), "pairs": pairs,
          "running_total": running_total}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_rolled_program_gives_the_unrolled_programs_results(name: str) -> None:
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(0))
    rolled = ll.compile(GRAPHS[name](), fusion=False)
    unrolled = ll.compile(GRAPHS[name](), fusion=False, rolling=False)
    assert rolled.rolling is not None and unrolled.rolling is None
    # the same kernels in the same order of work: bit for bit the unrolled program's results
    assert torch.equal(rolled(x), unrolled(x))
    torch.testing.assert_close(rolled(x), rolled.run_reference(x), rtol=1e-5, atol=1e-5)
    fused = ll.compile(GRAPHS[name]())
    fused.genome = fused.choice_space().fused_genome()
    assert fused.regions.regions, "the fused genome has regions"
    torch.testing.assert_close(fused(x), rolled.run_reference(x), rtol=1e-5, atol=1e-5)


def _without(name: str) -> ll.Graph:
    g = caching(4)
    del g.outputs[name]
    return g


@pytest.mark.parametrize("build", [lambda: caching(4), lambda: _without("values1"), lambda: _without("keys3")],
                         ids=["every layer", "one layer gives less", "the last gives less"])
def test_outputs_each_layer_gives_come_from_their_own_copy(build) -> None:
    """Each copy's own outputs (a KV cache's) are the unrolled program's, in the program's order, whichever copies
    roll."""
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(0))
    rolled, unrolled = ll.compile(build(), fusion=False), ll.compile(build(), fusion=False, rolling=False)
    assert rolled.rolling is not None
    got, expected = rolled(x), unrolled(x)
    assert len(got) == len(expected) == len(build().outputs)
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(got, rolled.run_reference(x), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_each_copy_runs_at_its_own_sizes() -> None:
    """Copies that differ by the names of their sizes (each layer's cache length) roll, and every copy's kernels run
    at its own length: called with caches of three lengths, the results are the unrolled program's."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1, D, generator=generator)
    rolled, unrolled = ll.compile(appending(3), fusion=False), ll.compile(appending(3), fusion=False, rolling=False)
    assert rolled.rolling is not None and rolled.rolling.copies == 3
    for lengths in ((5, 5, 5), (2, 7, 4)):
        pasts = [torch.randn(n, D, generator=generator) for n in lengths]
        got, expected = rolled(x, *pasts), unrolled(x, *pasts)
        assert [tuple(t.shape) for t in got[:3]] == [(n + 1, D) for n in lengths]
        for a, b in zip(got, expected, strict=True):
            assert torch.equal(a, b)


def test_the_e_graph_holds_one_layer_whatever_the_depth() -> None:
    counts = {}
    for layers in (1, 8):
        comp = ll.compile(stack(layers))
        comp.egraph.saturate()
        counts[layers] = (comp.egraph.snapshot.n_enodes, len(comp.llir().kernels))
    one, eight = counts[1], counts[8]
    assert eight[0] <= one[0] * 1.1  # the layer's e-graph, plus two loop markers
    assert eight[1] > 6 * one[1] // 2  # while the LLIR runs all eight copies


def test_a_genome_choice_in_the_layer_applies_to_every_copy() -> None:
    comp = ll.compile(stack(5))
    space = comp.choice_space()
    base = space.smallest_genome()
    layer_classes = {k.eclass for k in comp.llir(base).kernels if k.copy is not None}
    cid = next(c for c in space.classes if c in layer_classes and len(space.options[space.position[c]]) > 1
               and any(k.op == "Matmul" for k in comp.llir(base).kernels if k.eclass == c))
    for genome in space.alternatives(base, cid):
        try:
            llir = comp.llir(genome)
        except ll.Refused:
            continue
        made = [k for k in llir.kernels if k.eclass == cid]
        assert sorted(k.copy for k in made) == list(range(5))  # one kernel per copy ...
        assert len({k.op for k in made}) == 1  # ... all of the op the genome picked
        x = torch.randn(4, D)
        torch.testing.assert_close(comp.run(x), comp.run_reference(x), rtol=1e-5, atol=1e-5)
        comp.genome = genome
    assert Counter(k.copy for k in comp.llir().kernels if k.op == "Input")[None] == 1  # x; each copy's weights
    params = [k.arg for k in comp.llir().kernels if k.op == "Input" and k.copy == 3]
    assert sorted(params) == ["l3.norm", "l3.w1", "l3.w2"]


def test_the_stages_show_the_layer_once_and_link_it_to_every_copy() -> None:
    comp = ll.compile(stack(3))
    hlir = comp.hlir
    assert "layer ×3 rolled" in hlir.summary()
    envelope = hlir.to_json()
    assert envelope["meta"]["layer"]["copies"] == 3
    layer_ids = set(envelope["meta"]["layer"]["nodes"])
    assert {n["id"] for n in envelope["nodes"] if n.get("layer")} == layer_ids
    assert 'id="layer"' in hlir.to_svg()
    provenance = Provenance(comp.stages())
    mul = next(n for n in comp.compiled_graph.nodes if n.id in comp.rolling.layer and n.label == "Mul")
    kernels = provenance.counterparts("hlir", hlir_id(mul))["llir"]
    copies = {comp.llir().kernels[int(k[1:])].copy for k in kernels}
    assert copies == {0, 1, 2}
    assert comp.pipeline()._repr_mimebundle_()[STAGE_MIME]["stages"][0]["meta"]["layer"]["copies"] == 3
    assert all(kernel_id(k) in provenance.ids("llir") for k in comp.llir().kernels)
    # the LLIR lists every copy's kernels, and draws the first copy, folded, until expanded
    llir = comp.llir()
    per_copy = sum(k.copy == 0 for k in llir.kernels)
    assert Counter(k.copy for k in llir.kernels if k.copy is not None) == {0: per_copy, 1: per_copy, 2: per_copy}
    assert f"layer ×3: {per_copy} kernels per copy" in llir.summary()
    nodes = llir.to_json()["nodes"]
    assert Counter(n.get("copy") for n in nodes) == Counter(k.copy for k in llir.kernels)
    folded, expanded = llir.to_svg(), llir.expand().to_svg()
    later = [k for k in llir.kernels if k.copy == 2 and k.op != "Constant"]
    assert 'id="layer"' in folded and 'id="layer"' not in expanded
    assert all(f'id="{kernel_id(k)}"' not in folded and f'id="{kernel_id(k)}"' in expanded for k in later)
    assert llir.expand().to_json()["meta"]["layer"] == {"copies": 3, "folded": False}


def llama_stack(layers: int) -> nn.Module:
    return nn.Sequential(*[LlamaBlock(d_model=32, n_heads=4, d_ff=64, seq_len=8, seed=i) for i in range(layers)]).eval()


def test_a_llama_stack_rolls_through_ll_compile_and_torch_compile() -> None:
    model, (x,) = llama_stack(3), llama_inputs(batch=1, seq=8, d_model=32)
    with torch.no_grad():
        expected = model(x)
        comp = ll.compile(model, (x,))
        assert comp.rolling is not None and comp.rolling.copies == 3
        torch.testing.assert_close(comp(x), expected, rtol=1e-4, atol=1e-4)
        compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
        torch.testing.assert_close(compiled(x), expected, rtol=1e-4, atol=1e-4)
        (program,) = ll.programs(compiled)
        assert program.rolling is not None and program.rolling.copies == 3
        torch._dynamo.reset()
        plain = torch.compile(model, backend="luminal_lab",
                              options={"generations": 0, "cache_dir": False, "rolling": False})
        torch.testing.assert_close(plain(x), expected, rtol=1e-4, atol=1e-4)
        (program,) = ll.programs(plain)
        assert program.rolling is None


def test_runs_counts_each_rolled_kernel_as_often_as_the_unrolled_program_runs_it() -> None:
    comp = ll.compile(stack(3))
    rolled = extract(comp.choice_space().fused_genome())
    counts = runs(rolled, comp.rolling)
    markers = {k.id for k in rolled.kernels if comp.rolling.markers & set(k.hlir)}
    assert markers and all(counts[kid] == 0 for kid in markers)
    assert Counter(counts.values()).keys() == {0, 1, 3}
    assert sum(counts.values()) == len(unroll(rolled, comp.rolling).kernels)


def test_search_times_one_copy_and_checks_the_best_unrolled(monkeypatch: pytest.MonkeyPatch) -> None:
    comp = ll.compile(stack(3))
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(2))
    checked = []

    def compare_unrolled(got, expected):  # the first unrolled check fails, as a candidate off only over 3 copies would
        checked.append(len(got))
        return ("mismatch", "made to differ") if len(checked) == 1 else compare(got, expected)

    monkeypatch.setattr(compiled, "compare", compare_unrolled)
    # no early abort (the serial search): every candidate that runs is timed, so a second best is there to fall to
    result = comp.search(generations=1, generation_size=3, trials=1, inputs=(x,), progress=False,
                         runner=ll.InProcessRunner())
    ran = [c for c in result.history if c.kernel_seconds]
    assert len(ran) >= 2, [c.reason for c in result.history]
    for c in ran:  # each candidate ran the rolled graph: its loop markers were timed
        rolled = extract(c.genome)
        assert set(c.kernel_seconds) <= {k.id for k in rolled.kernels}
        assert any(comp.rolling.markers & set(rolled.kernels[kid].hlir) for kid in c.kernel_seconds)
    first = min(ran, key=lambda c: c.seconds)
    assert (first.outcome, first.reason) == ("mismatch", "unrolled: made to differ")
    assert len(checked) == 2 and comp.genome is result.best.genome and result.best is not first
    assert comp.llir().copies == 3
    torch.testing.assert_close(comp(x), comp.run_reference(x), rtol=1e-5, atol=1e-5)


def test_a_search_cost_of_a_rolled_program_sees_its_unrolled_llir() -> None:
    comp = ll.compile(stack(3))
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(3))
    result = comp.search(generations=1, generation_size=2, trials=1, inputs=(x,), progress=False,
                         cost=lambda llir: float(len(llir.kernels)))
    ok = [c for c in result.history if c.outcome == "ok"]
    assert ok and all(c.seconds == len(unroll(extract(c.genome), comp.rolling).kernels) for c in ok)
    assert all(c.seconds > len(extract(c.genome).kernels) for c in ok)


def test_a_64_layer_stack_goes_through_every_stage() -> None:
    comp = ll.compile(stack(64))
    assert comp.rolling.copies == 64 and len(comp.compiled_graph.nodes) < len(comp.graph.nodes) / 30
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(4))
    comp.genome = comp.choice_space().fused_genome()
    torch.testing.assert_close(comp(x), comp.run_reference(x), rtol=1e-4, atol=1e-4)
    llir = comp.llir()
    assert {k.copy for k in llir.kernels} == {None, *range(64)}
    provenance = Provenance(comp.stages())
    layer = [n for n in comp.compiled_graph.nodes if n.id in comp.rolling.layer]
    contraction = next(n for n in layer if n.label == "SumReduce axis=2")
    kernels = provenance.counterparts("hlir", hlir_id(contraction))["llir"]
    assert {llir.kernels[int(k[1:])].copy for k in kernels} == set(range(64))
    stages = comp.pipeline()._repr_mimebundle_()[STAGE_MIME]["stages"]
    assert [s["stage"] for s in stages] == ["hlir", "egraph", "llir", "regions", "cuda"]
    for stage in (comp.hlir, comp.egraph, llir, comp.regions):
        assert "<svg" in stage.to_svg()
