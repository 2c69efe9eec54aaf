"""A rolled program runs as the unrolled one: the same results, every copy running the kernels the genome picked
for the one layer the e-graph holds; its stages show the layer once, ×copies; torch models roll through both
``ll.compile`` and ``torch.compile``."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch import nn

import luminal_lab as ll
from luminal_lab.compiler.provenance import Provenance
from luminal_lab.core.ids import hlir_id, kernel_id
from luminal_lab.core.stage import STAGE_MIME
from tests.helpers.models import LlamaBlock, llama_inputs
from tests.helpers.stacks import D, pairs, running_total, stack

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


def test_search_measures_the_rolled_programs_genomes_on_every_copy() -> None:
    comp = ll.compile(stack(3))
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(2))
    result = comp.search(generations=1, generation_size=2, trials=1, inputs=(x,), progress=False)
    ok = [c for c in result.history if c.outcome == "ok"]
    assert ok, [c.reason for c in result.history]  # each candidate is unrolled, so it matches the reference
    assert comp.llir().copies == 3 and comp.genome is result.best.genome
    torch.testing.assert_close(comp(x), comp.run_reference(x), rtol=1e-5, atol=1e-5)
