"""Genomes: hashing, mutation, validity with reasons, and extraction with provenance."""

from __future__ import annotations

import random

import pytest

import luminal_lab as ll
from luminal_lab.core.errors import Refused
from luminal_lab.egraph import EGraph
from luminal_lab.llir.genome import ChoiceSpace, children, extract


def softmax_graph() -> ll.Graph:
    g = ll.Graph()
    x, w = g.tensor((4, 8), "x"), g.tensor((8, 3), "w")
    (x @ w).softmax(-1).output("s")
    (x * 1.0).exp().reciprocal().reciprocal().output("r")
    return g


@pytest.fixture(scope="module")
def saturated():
    g = softmax_graph()
    eg = EGraph(g)
    eg.saturate()
    yield g, eg
    eg.close()


def test_incremental_hash_equals_hash_from_scratch(saturated) -> None:
    g, eg = saturated
    space = ChoiceSpace(eg.snapshot, g)
    assert len(space.mutable) >= 5
    rng = random.Random(7)
    genome = space.random_genome(0)
    for _ in range(50):
        genome = genome.mutate(rng.randint(1, 4), rng)
        assert genome.hash == space.genome(genome.picks).hash
    # XOR: undoing a mutation's two per-pick hashes gives the parent's hash back
    start = space.random_genome(0)
    away = start.mutate(1, random.Random(1))
    (cid, old, new), = away.mutations
    i = space.position[cid]
    assert away.hash != start.hash
    assert away.hash ^ space.hashes[i][new] ^ space.hashes[i][old] == start.hash


def test_random_genomes_are_seeded_and_viable(saturated) -> None:
    g, eg = saturated
    space = ChoiceSpace(eg.snapshot, g)
    first, again = space.random_genome(3), space.random_genome(3)
    assert first.picks == again.picks and first.hash == again.hash
    hashes = {space.random_genome(seed).hash for seed in range(20)}
    assert len(hashes) > 1
    for seed in range(20):
        llir = extract(space.random_genome(seed))
        assert [llir.kernels[i].op for i in llir.outputs] == ["Output", "Output"]


def test_children_are_unique_and_bounded(saturated) -> None:
    g, eg = saturated
    space = ChoiceSpace(eg.snapshot, g)
    parent = space.random_genome(0)
    seen = {parent.hash}
    brood = children(parent, 10, 3, random.Random(0), seen)
    assert 0 < len(brood) <= 10
    assert len({c.hash for c in brood}) == len(brood)
    assert all(c.hash in seen and c.hash != parent.hash for c in brood)
    assert all(1 <= len(c.mutations) <= 3 for c in brood)
    again = children(parent, 10, 3, random.Random(0), {parent.hash})
    assert [c.hash for c in again] == [c.hash for c in brood]


def test_a_cycle_is_refused_with_its_path(saturated) -> None:
    g, eg = saturated
    space = ChoiceSpace(eg.snapshot, g)
    # x * 1 merged the Mul into x's e-class: picking that Mul makes x read itself
    x_class = eg.eclass_of(g.inputs["x"].node).id
    i = space.position[x_class]
    ops = [n.op for n in space.options[i]]
    assert "Input" in ops and "Op" in ops
    picks = list(space.smallest_genome().picks)
    picks[i] = ops.index("Op")
    with pytest.raises(Refused, match="cycle") as refused:
        extract(space.genome(picks))
    assert refused.value.kind == "cycle" and x_class in str(refused.value)


def test_an_op_without_kernel_form_is_refused() -> None:
    g = softmax_graph()
    eg = EGraph(g)  # not stepped: only the HLIR ops exist
    try:
        space = ChoiceSpace(eg.snapshot, g)
        with pytest.raises(Refused, match="missing kernel op") as refused:
            extract(space.genome([0] * len(space.classes)))
        assert refused.value.kind == "missing kernel op"
    finally:
        eg.close()


def test_kernels_remember_their_eclass_and_hlir_nodes(saturated) -> None:
    g, eg = saturated
    llir = extract(ChoiceSpace(eg.snapshot, g).smallest_genome())
    ids = [k.id for k in llir.kernels]
    assert ids == list(range(len(ids)))
    for kernel in llir.kernels:
        assert kernel.eclass in eg.snapshot.classes
        own = set(eg.snapshot.classes[kernel.eclass].hlir)
        if kernel.op == "Matmul":  # a contraction also computes the product it replaces
            product = eg.snapshot.contracts[kernel.eclass]
            assert set(kernel.hlir) == own | set(eg.snapshot.classes[product].hlir)
            assert [n.op for n in eg.graph.nodes if n.id in set(kernel.hlir)] == [ll.Op.MUL, ll.Op.SUM_REDUCE]
        else:
            assert set(kernel.hlir) == own
        assert all(source < kernel.id for source, _ in kernel.sources)  # topological
    outputs = {node.id for node in g.outputs.values()}
    assert outputs <= {h for k in llir.kernels for h in k.hlir}
    # the exp2 chain and the contraction were recognised: the smallest genome computes e^x and x @ w in one kernel each
    assert llir.op_counts()["Exp"] >= 1 and llir.op_counts()["Exp2"] == 0
    assert llir.op_counts()["Matmul"] == 1
