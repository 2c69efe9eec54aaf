"""Runners: a measuring process that survives crashing and hanging candidates, early abort, a budget that holds
within one timed run, builders that fill the kernel cache ahead, and searches that resume from their records."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import luminal_lab as ll
from luminal_lab.search.runners import InProcessRunner, Job, LocalRunner, default_runner
from tests.helpers.sabotage import Crash, Hang, sabotaged


def small_program() -> ll.Graph:
    g = ll.Graph()
    a, b = g.tensor((96, 96), "a"), g.tensor((96, 96), "b")
    ((a @ b).softmax(-1) * 2.0).output("y")
    return g


@pytest.fixture(scope="module")
def comp():
    compiled = ll.compile(small_program())
    yield compiled
    compiled.egraph.close()


def job_of(comp: ll.Compiled, trials: int = 3) -> Job:
    """The job ``comp.search`` hands its runner."""
    arrays, bindings = comp._profiling_inputs(None, "test")
    reference = comp._reference.run(arrays, bindings)
    return Job("cpu", arrays, dict(comp.graph.weights), bindings, [reference[n] for n in comp.graph.outputs], trials)


def test_a_candidate_that_crashes_or_hangs_the_measuring_process_is_recorded_and_the_next_one_runs(comp) -> None:
    runner = LocalRunner(builders=0, timeout=10)  # a new measuring process compiles the fine genome's kernels cold
    try:
        runner.start(job_of(comp))
        llir = comp.llir(comp.choice_space().fused_genome())
        crashed = runner.measure(sabotaged(llir, Crash()), None, None)
        assert (crashed.outcome, crashed.reason) == ("error", "the measuring process died (SIGSEGV)")
        hung = runner.measure(sabotaged(llir, Hang(60)), None, None)
        assert (hung.outcome, hung.reason) == ("timeout", "no result within the 10 s time limit; its measuring "
                                                          "process was stopped")
        fine = runner.measure(llir, None, None)
        assert fine.outcome == "ok" and fine.seconds > 0 and fine.kernel_seconds and runner.restarts == 2
        assert re.fullmatch(r".+ pid \d+", fine.worker) and fine.worker != crashed.worker
    finally:
        runner.close()


def test_a_measuring_process_imports_its_runtime_when_it_takes_the_job_before_any_time_limit_starts() -> None:
    # torch and numba took 4 s of a fresh process's first candidate, and over 10 s on a busy machine (a CI timeout)
    script = ("import sys; from luminal_lab.search.runners import Job, _taken; "
              "before = {m for m in ('torch', 'luminal_lab.runtime.cpu') if m in sys.modules}; "
              "_taken(Job('cpu', {}, {}, {}, [], 1)); "
              "print(sorted(before), sorted(m for m in ('torch', 'luminal_lab.runtime.cpu') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert found.stdout.split("\n")[-2] == "[] ['luminal_lab.runtime.cpu', 'torch']"


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt``, as in a notebook's kernel, whatever handler a library that ran earlier in
    this worker process left installed (once, in ``make test-all``, none was raised and the hanging candidate ran)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupt_stops_the_measurement_with_its_process_and_the_next_one_runs(comp, tmp_path,
                                                                                   default_sigint) -> None:
    runner = LocalRunner(builders=0)
    try:
        runner.start(job_of(comp))
        llir = comp.llir(comp.choice_space().fused_genome())
        assert runner.measure(llir, None, None).outcome == "ok"
        process = runner._process
        # Ctrl-C, as a notebook's "interrupt kernel" sends it, once the measuring process is inside a candidate that
        # would hang for a minute (a timer of one second once met a measurement that returned, on a loaded CI machine)
        started, returned = tmp_path / "hanging", threading.Event()

        def interrupt() -> None:
            while not started.exists() and not returned.wait(0.05):
                pass
            if not returned.is_set():
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            try:
                got = runner.measure(sabotaged(llir, Hang(60, str(started))), None, None)
            finally:
                returned.set()  # no interrupt after the measurement, however it ended
            pytest.fail(f"the measurement meant to be interrupted returned {got}")
        assert process.returncode == -signal.SIGKILL and runner._process is None  # stopped, by the runner
        fine = runner.measure(llir, None, None)
        assert fine.outcome == "ok" and fine.worker != f"{os.uname().nodename} pid {process.pid}"
        assert runner.restarts == 0  # an interrupt is not a crash
    finally:
        runner.close()


class Sabotaging(LocalRunner):
    """A local runner whose third candidate crashes its measuring process and fifth hangs it."""

    calls = 0

    def measure(self, llir, best, deadline):
        self.calls += 1
        sabotage = {3: Crash(), 5: Hang(60)}.get(self.calls)
        return super().measure(llir if sabotage is None else sabotaged(llir, sabotage), best, deadline)


def test_a_search_goes_on_past_crashes_and_hangs_and_records_them(comp, tmp_path) -> None:
    comp.records = ll.TuningRecords(tmp_path)
    runner = Sabotaging(timeout=5)
    try:
        result = comp.search(generations=1, generation_size=5, trials=2, progress=False, runner=runner)
    finally:
        runner.close()
    assert [c.outcome for c in result.history][2] == "error" and result.history[4].outcome == "timeout"
    assert result.best.outcome == "ok" and comp.genome.hash == result.best.hash
    recorded = [(row["hash"], row["outcome"], row["reason"]) for row in comp.tuning_records()]
    assert recorded == [(f"{c.hash:016x}", c.outcome, c.reason) for c in result.history]


def test_early_abort_and_a_budget_that_holds_within_one_timed_run(comp) -> None:
    runner = InProcessRunner(slow=3.0)
    runner.start(job_of(comp, trials=10**6))
    llir = comp.llir(comp.choice_space().fused_genome())
    slow = runner.measure(llir, 1e-9, None)
    assert slow.outcome == "slow" and slow.seconds > 3e-9
    assert re.fullmatch(r"its fastest of 3 warm runs took [\d.]+ ms, over 3x the best so far \(0\.000 ms\)",
                        slow.reason)
    cut = runner.measure(llir, None, time.monotonic() + 0.3)  # a million trials, cut by the deadline
    assert cut.outcome == "ok" and cut.spread[0] <= cut.seconds <= cut.spread[1]
    trials = int(re.fullmatch(r"the search's budget ran out after (\d+) of 1000000 trials", cut.reason)[1])
    assert 1 <= trials < 10**6


def test_builders_compile_a_candidates_kernels_before_it_is_measured(comp, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LUMINAL_LAB_KERNEL_CACHE", str(tmp_path))  # a cold cache, here and in the builders
    runner = LocalRunner(builders=2)
    try:
        runner.start(job_of(comp))
        llir = comp.llir(comp.choice_space().fused_genome())
        runner.build(llir)
        runner._builds[llir.genome_hash].result(timeout=120)
        compiled = list((tmp_path / "__pycache__").glob("lk_*.nbi"))
        sources = {p.name for p in tmp_path.glob("lk_*.py")}
        assert compiled and {p.name.split(".")[0] + ".py" for p in compiled} <= sources
        assert runner.measure(llir, None, None).outcome == "ok"
    finally:
        runner.close()


RESUMED = """
import json, sys
sys.path.insert(0, {root!r})
import luminal_lab as ll
from tests.search.test_runners import small_program
comp = ll.compile(small_program())
comp.records = ll.TuningRecords({records!r})
result = comp.search(generations=1, generation_size=4, keep_best=2, trials=2, progress=False)
print(json.dumps([[f"{{c.hash:016x}}", c.generation, c.outcome] for c in result.history]))
"""


def test_a_search_in_another_process_resumes_from_the_records(comp, tmp_path) -> None:
    comp.records = ll.TuningRecords(tmp_path)
    first = comp.search(generations=1, generation_size=4, trials=2, progress=False)
    fastest = [f"{c.hash:016x}" for c in sorted((c for c in first.history if c.outcome == "ok"),
                                                key=lambda c: c.seconds)[:2]]
    script = RESUMED.format(root=os.getcwd(), records=str(tmp_path))
    second = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                       check=True).stdout.splitlines()[-1])
    # the (up to) two fastest are measured again, first; nothing else measured before is measured again
    again = len(fastest)
    assert [h for h, _, _ in second[:again]] == fastest and {g for _, g, _ in second[:again]} == {0}
    assert not {h for h, _, _ in second[again:]} & {f"{c.hash:016x}" for c in first.history}
    rows = comp.records.rows(comp.records_key)
    assert len(rows) == len(first.history) + len(second)
    again = comp.search(generations=0, keep_best=2, trials=2, progress=False, measure_again=True)
    assert comp.choice_space().fused_genome().hash in {c.hash for c in again.history}  # asked: measured again


def test_a_runner_measures_one_search_at_a_time_and_the_default_ones_are_shared_in_turn(comp) -> None:
    job = job_of(comp)
    first = default_runner(job)
    with pytest.raises(ll.LuminalError, match=r"^LocalRunner\.start: this runner is measuring another search"):
        first.start(job)
    second = default_runner(job)  # while the first is busy (a profiler's search, say), another
    assert second is not first
    second.finish()
    first.finish()
    assert default_runner(job) is first  # idle again: taken in turn
    llir = comp.llir(comp.choice_space().fused_genome())
    assert first.measure(llir, None, None).outcome == "ok"  # each job it was sent answered, in order
    first.finish()
