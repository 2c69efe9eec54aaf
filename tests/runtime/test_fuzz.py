"""Fuzzing: random HLIR graphs x random genomes; every viable genome's kernels compute what
the reference runtime computes. CI runs a bounded number; benchmarks/fuzz.py runs thousands."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import luminal_lab as ll
from tests.helpers.fuzz import check_genomes, graphs


@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_every_viable_genome_matches_the_reference(case) -> None:
    graph, inputs = case
    counts = check_genomes(graph, inputs)
    assert counts["ok"] >= 1  # random genomes are built to be viable


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from([ll.i8, ll.u8, ll.i16]).flatmap(lambda dtype: graphs(dtype=dtype)))
def test_every_viable_genome_of_a_narrow_int_graph_matches_the_reference(case) -> None:
    """Wrapping arithmetic, reductions (sums widened to i64) and views: fused or not, each value as torch stores it."""
    graph, inputs = case
    assert check_genomes(graph, inputs)["ok"] >= 1
