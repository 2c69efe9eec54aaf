"""Measured search: history, outcomes, determinism, interruption, budget; the best genome runs."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.core.errors import SearchStopped
from luminal_lab.egraph.worker import MAX_IDLE, idle_pids
from luminal_lab.llir.genome import extract
from luminal_lab.search.runners import Runner
from luminal_lab.search.search import OUTCOMES, Measurement, compare, search
from tests.helpers.models import LlamaBlock, llama_inputs


@pytest.fixture(scope="module")
def llama():
    model = LlamaBlock(64, 4, 128, 16).eval()
    inputs = llama_inputs(1, 16, 64)
    comp = ll.compile(model, inputs)
    yield model, inputs, comp
    comp.egraph.close()


def test_search_on_the_llama_block_keeps_the_fastest_and_records_everything(llama) -> None:
    model, inputs, comp = llama
    result = comp.search(generations=2, generation_size=8, seed=0, progress=False)
    history = result.history
    assert result.initial in history and result.initial.outcome == "ok"
    assert result.best.seconds <= result.initial.seconds
    assert result.best.seconds == min(c.seconds for c in history if c.outcome == "ok")
    hashes = [c.hash for c in history]
    assert len(set(hashes)) == len(hashes)  # no genome measured twice
    for candidate in history:
        assert candidate.outcome in OUTCOMES
        if candidate.outcome == "ok":
            assert candidate.seconds > 0 and candidate.kernel_seconds
        else:
            assert candidate.reason
        if candidate.parent is not None:
            assert candidate.parent in hashes[:candidate.index] and 1 <= len(candidate.mutations) <= 3
    assert {c.generation for c in history} == {0, 1, 2}
    # the best genome is what runs now, and it computes the model
    assert comp.genome.hash == result.best.hash
    with torch.no_grad():
        first, second = comp.run(*inputs), comp.run(*inputs)
        torch.testing.assert_close(first, model(*inputs), atol=1e-4, rtol=1e-4)
    assert torch.equal(first, second)  # weights survive the first call
    assert comp.llir().times == result.best.kernel_seconds  # the search's measurement of it
    assert "profiled" in comp.llir().summary()


def test_same_seed_same_history_under_a_fixed_cost(llama) -> None:
    _, _, comp = llama

    def kernel_count(llir) -> float:
        return float(len(llir.kernels))

    runs = [comp.search(generations=2, generation_size=6, seed=3, cost=kernel_count, trials=1, progress=False)
            for _ in range(2)]
    keys = [[(c.hash, c.parent, c.outcome, tuple(c.mutations), c.seconds) for c in r.history] for r in runs]
    assert keys[0] == keys[1]
    other = comp.search(generations=2, generation_size=6, seed=4, cost=kernel_count, trials=1, progress=False)
    assert [c.hash for c in other.history] != [c.hash for c in runs[0].history]


class Scripted(Runner):
    """A runner whose measurements ``script`` (a function of the LLIR) makes up; nothing runs."""

    def __init__(self, script):
        self.script = script

    def build(self, llir) -> None:
        """Nothing to build."""

    def measure(self, llir, best, deadline) -> Measurement:
        return self.script(llir)


def ok(llir) -> Measurement:
    return Measurement("ok", seconds=1e-3)


def test_a_candidate_may_differ_by_the_rounding_of_its_outputs_magnitudes() -> None:
    """An element that cancels (here 1, beside 1e6) may be off by what summing 1e6s in another order rounds away in
    f32, not by more; an output of ordinary magnitudes is held to the element's own tolerance."""
    expected = [np.array([1e6, -1e6, 1.0], np.float32), np.array([1.0, 2.0], np.float32)]
    assert compare([np.array([1e6, -1e6, 1.0625], np.float32), expected[1]], expected) == ("ok", None)
    assert compare([np.array([1e6, -1e6, 300.0], np.float32), expected[1]], expected)[0] == "mismatch"
    assert compare([expected[0], np.array([1.0, 2.01], np.float32)], expected) == (
        "mismatch", "output 1: 1 elements differ, up to 0.01")


def test_failing_candidates_are_recorded_never_fatal(llama) -> None:
    space = llama[2].choice_space()
    calls = {"n": 0}

    def flaky(llir) -> Measurement:
        calls["n"] += 1
        kind = calls["n"] % 3
        if kind == 1:
            return Measurement("ok", seconds=1e-3 / calls["n"])
        if kind == 2:
            return Measurement("timeout", "no result within the 60 s time limit; its measuring process was stopped")
        return Measurement("error", "the measuring process died (SIGSEGV)")

    result = search(space, Scripted(flaky), generations=1, generation_size=12, seed=0, progress=False)
    assert set(result.outcomes()) == {"ok", "timeout", "error"}
    reasons = {c.outcome: c.reason for c in result.history if c.outcome != "ok"}
    assert "time limit" in reasons["timeout"] and "SIGSEGV" in reasons["error"]
    assert all(c.seconds is None for c in result.history if c.outcome != "ok")


def test_interrupt_returns_what_was_found_and_budget_stops_early(llama) -> None:
    space = llama[2].choice_space()
    calls = {"n": 0}

    def interrupted_after_five(llir) -> Measurement:
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt
        return ok(llir)

    result = search(space, Scripted(interrupted_after_five), generations=3, generation_size=10, seed=0,
                    progress=False)
    assert result.interrupted
    assert sum(c.outcome == "ok" for c in result.history) == 5
    assert result.best.outcome == "ok"

    budgeted = search(space, Scripted(ok), generations=50,
                      generation_size=30, seed=0, budget=0.2, progress=False)
    assert not budgeted.interrupted and len(budgeted.history) < 50 * 30
    # a spent budget ends the search after the most-fused genome, before the random start of generation 0
    spent = search(space, Scripted(ok), generations=2,
                   generation_size=4, seed=0, budget=0.0, progress=False)
    assert [c.hash for c in spent.history] == [space.fused_genome().hash]


def test_cuda_without_a_gpu_is_a_clear_error(llama) -> None:
    _, inputs, comp = llama
    with pytest.raises(ll.NoDeviceError, match="CUDA GPU"):
        comp.run(*inputs, device="cuda")



def test_torch_compile_leaves_no_busy_egglog_worker() -> None:
    model = LlamaBlock(32, 2, 64, 8).eval()
    (x,) = llama_inputs(1, 8, 32)
    before = _egglog_workers()
    # searches the most-fused genome, before the first call returns
    compiled = torch.compile(model, backend="luminal_lab", options={"budget": 0.0, "background": False})
    with torch.no_grad():
        first = compiled(x)
        torch.testing.assert_close(first, model(x), atol=1e-4, rtol=1e-4)
        # the worker that built the e-graph went back to the pool: what remains holds only the schema and rules, for
        # the next e-graph (the spare, or the worker given back), no more than the pool keeps
        assert _egglog_workers() - before <= set(idle_pids()) and len(idle_pids()) <= MAX_IDLE
        assert torch.equal(compiled(x), first)


def _egglog_workers() -> set[int]:
    """Process ids of running egglog workers started by this process (not by other test runs on the machine)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline, open(f"/proc/{pid}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                if b"luminal_lab.egraph.worker" in cmdline.read() and parent == os.getpid():
                    found.add(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_on_candidate_sees_every_candidate_in_history_order(llama) -> None:
    space = llama[2].choice_space()
    seen = []
    result = search(space, Scripted(ok), generations=2,
                    generation_size=4, seed=0, progress=False, on_candidate=seen.append)
    assert seen == result.history and [c.index for c in seen] == list(range(len(seen)))
    assert {c.generation for c in seen} == {0, 1, 2}  # the initial tries too


def test_a_stop_event_ends_the_search_before_its_next_candidate(llama) -> None:
    space = llama[2].choice_space()
    stop = threading.Event()
    seen = []

    def stop_after_three(candidate) -> None:
        seen.append(candidate)
        if len(seen) == 3:
            stop.set()

    result = search(space, Scripted(ok), generations=5,
                    generation_size=10, seed=0, progress=False, on_candidate=stop_after_three, stop=stop)
    assert result.interrupted and result.history == seen and len(seen) == 3
    assert result.best.outcome == "ok"
    with pytest.raises(SearchStopped, match="after 0 candidate"):  # stopped before any viable genome
        search(space, Scripted(ok), seed=0, progress=False,
               stop=stop)


def test_genomes_over_the_memory_budget_are_refused_and_the_search_goes_on() -> None:
    g = ll.Graph()
    (g.tensor((256, 256), "a") @ g.tensor((256, 256), "b")).relu().output("c")
    comp = ll.compile(g)
    result = comp.search(generations=3, generation_size=6, seed=1, trials=1, progress=False, memory_budget=16 * 2**20)
    refused = [c for c in result.history if c.outcome == "refused"]
    assert refused and all("(Mul [256, 256, 256] f32) needs 64 MiB" in c.reason and "memory budget" in c.reason
                           for c in refused)
    assert result.best.outcome == "ok" and comp.llir().op_counts()["Matmul"] == 1


def test_search_starts_from_the_most_fused_genome_without_the_left_out_ops(llama) -> None:
    """Generation 0 begins with the most-fused genome (picking none of ``without``), then a random one."""
    space = llama[2].choice_space()
    result = search(space, Scripted(ok), generations=1,
                    generation_size=3, seed=0, progress=False)
    assert result.history[0].hash == space.fused_genome().hash == result.initial.hash
    assert result.history[1].generation == 0 and result.history[1].parent is None
    without = frozenset({"Matmul"})
    left_out = search(space, Scripted(ok), generations=1,
                      generation_size=3, seed=0, progress=False, without=without)
    assert left_out.history[0].hash == space.fused_genome(without).hash != space.fused_genome().hash
    assert all("Matmul" not in {k.op for k in extract(c.genome).kernels} for c in left_out.history)


def test_the_budget_cuts_no_measurement_before_a_viable_genome_and_a_slow_one_ends_generation_0(llama) -> None:
    space = llama[2].choice_space()
    deadlines = []

    def fused_ok_then_slow(llir) -> Measurement:  # the first is ok, every other one too slow
        return Measurement("ok", seconds=1e-3) if not deadlines[:-1] else Measurement("slow", "its warm runs took")

    class Watching(Scripted):
        def measure(self, llir, best, deadline):
            deadlines.append(deadline)
            return super().measure(llir, best, deadline)

    result = search(space, Watching(fused_ok_then_slow), generations=0, seed=0, budget=0.0, progress=False)
    assert deadlines == [None]  # the spent budget did not reach the first measurement: a search returns a genome
    deadlines.clear()
    result = search(space, Watching(fused_ok_then_slow), generations=0, seed=0, progress=False)
    # generation 0: the most-fused genome, then one random genome that ran (slow will do once one is ok)
    assert [c.outcome for c in result.history] == ["ok", "slow"]
