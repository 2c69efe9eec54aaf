"""Fuzzing: random HLIR graphs x random genomes; every viable genome's kernels compute what
the reference runtime computes. CI runs a bounded number; benchmarks/fuzz.py runs thousands."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings

from luminal_lab.egraph import EGraph
from luminal_lab.hlir.reference import ReferenceRuntime
from luminal_lab.llir.genome import ChoiceSpace, Refused, children, extract
from luminal_lab.runtime.cpu import CPURuntime
from luminal_lab.search.search import compare

from .fuzz_graphs import graphs

GENOMES_PER_GRAPH = 6


def check_genomes(graph, inputs, genomes: int = GENOMES_PER_GRAPH, seed: int = 0) -> dict[str, int]:
    """Run ``genomes`` random genomes (and mutants of them) of ``graph``; count outcomes.
    Raises AssertionError on any viable genome that disagrees with the reference."""
    reference = ReferenceRuntime(graph).run(inputs)
    expected = [reference[name] for name in graph.outputs]
    egraph = EGraph(graph)
    counts = {"ok": 0, "refused": 0}
    try:
        egraph.saturate()
        space = ChoiceSpace(egraph.snapshot, graph)
        rng = random.Random(seed)
        tried = [space.random_genome(rng.randrange(2**32)) for _ in range(genomes // 2)]
        seen = {g.hash for g in tried}
        for parent in list(tried):
            tried.extend(children(parent, 1, 3, rng, seen))
        for genome in tried[:genomes]:
            try:
                llir = extract(genome)
            except Refused:
                counts["refused"] += 1
                continue
            outputs = CPURuntime(llir).run(inputs, graph.weights, {})
            outcome, reason = compare(outputs, expected)
            assert outcome == "ok", f"genome {genome.hash:016x}: {reason}\n{llir.kernels}"
            counts["ok"] += 1
    finally:
        egraph.close()
    return counts


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_every_viable_genome_matches_the_reference(case) -> None:
    graph, inputs = case
    counts = check_genomes(graph, inputs)
    assert counts["ok"] >= 1  # random genomes are built to be viable
