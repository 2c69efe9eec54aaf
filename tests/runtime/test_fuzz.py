"""Fuzzing: random HLIR graphs x random genomes; every viable genome's kernels compute what
the reference runtime computes. CI runs a bounded number; benchmarks/fuzz.py runs thousands."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from tests.helpers.fuzz import check_genomes, graphs


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_every_viable_genome_matches_the_reference(case) -> None:
    graph, inputs = case
    counts = check_genomes(graph, inputs)
    assert counts["ok"] >= 1  # random genomes are built to be viable
