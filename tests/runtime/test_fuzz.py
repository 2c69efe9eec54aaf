"""Fuzzing: random HLIR graphs x random genomes (tests/helpers/fuzz.py); every viable genome's kernels compute what
the reference runtime computes, at each binding of a symbolic dimension, and none crashes. ``make test-all`` runs 36
graphs x up to 10 genomes (about 500 runs) and 10 narrow-int graphs, ``make test`` a third of them
(``tests.helpers.sweeps``); benchmarks/fuzz.py runs 1,000 graphs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import luminal_lab as ll
from luminal_lab.runtime.cpu import CPURuntime
from tests.helpers import fuzz
from tests.helpers.fuzz import Case, check_genomes, graphs
from tests.helpers.sweeps import examples


@settings(max_examples=examples(36), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_every_viable_genome_matches_the_reference(case: Case) -> None:
    """36 graphs (a third under ``make test``) x up to 10 genomes (about 290: a small graph has fewer distinct ones); a
    genome of a symbolic graph runs at three sizes (about 500 runs in all; 50 graphs made 700)."""
    tally = check_genomes(case, genomes=10)
    assert not tally.failures, "\n\n".join(tally.failures)
    assert tally.runs >= 1  # random genomes are built to be viable


@settings(max_examples=examples(10), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from([ll.i8, ll.u8, ll.i16]).flatmap(lambda dtype: graphs(dtype=dtype)))
def test_every_viable_genome_of_a_narrow_int_graph_matches_the_reference(case: Case) -> None:
    """Wrapping arithmetic, reductions (sums widened to i64), contractions and views: fused or not, each value as
    torch stores it."""
    tally = check_genomes(case)
    assert not tally.failures, "\n\n".join(tally.failures)
    assert tally.runs >= 1


def test_a_wrong_output_is_a_mismatch_and_an_exception_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzzer's own check: a runtime that is off by one at ``s = 2`` and raises at ``s = 3`` is counted, per
    genome, as a run that passed, a mismatch and a crash, each failure described with the program."""
    g = ll.Graph()
    x = g.tensor(("s", 3), "x0")
    (x @ x.transpose(-1, -2)).output("out")
    rng = np.random.default_rng(0)
    runs = [({"s": s}, {"x0": rng.uniform(-1, 1, (s, 3)).astype(np.float32)}) for s in (1, 2, 3)]
    case = Case(g, 'x0 = g.tensor(("s", 3), "x0", dtype)\nt0 = x0 @ x0.transpose(-1, -2)\nt0.output("out")', runs)

    class Faulty(CPURuntime):
        def run(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
                bindings: Mapping[str, int] | None = None) -> list[np.ndarray]:
            if bindings["s"] == 3:
                raise RuntimeError("faulty kernel")
            return [out + (bindings["s"] == 2) for out in super().run(inputs, weights, bindings)]

    monkeypatch.setattr(fuzz, "CPURuntime", Faulty)
    tally = fuzz.check_genomes(case, genomes=2)
    viable = tally.genomes - tally.refused
    assert viable >= 1 and tally.runs == 3 * viable
    assert tally.mismatches == tally.crashes == viable
    assert sum(f.startswith("mismatch") for f in tally.failures) == viable
    assert all("faulty kernel" in f for f in tally.failures if f.startswith("crash"))
    assert all("t0 = x0 @ x0.transpose(-1, -2)" in f for f in tally.failures)
