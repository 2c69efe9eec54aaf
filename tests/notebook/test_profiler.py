"""The genome profiler widget: a background search shown live, Stop, candidates' stages, devices, errors."""

from __future__ import annotations

import html
import io
import os
import re
import time

import numpy as np
import pytest
from matplotlib.collections import LineCollection

import luminal_lab as ll
from luminal_lab.codegen.cuda_stage import CudaStage
from luminal_lab.llir.regions import Regions
from luminal_lab.notebook.profiler import TABS, GenomeProfiler
from luminal_lab.runtime.cuda import cuda_unavailable_reason
from luminal_lab.search.search import OUTCOMES, Candidate


@pytest.fixture(scope="module")
def comp():
    g = ll.Graph()
    a = g.tensor((8, 16), name="a")
    b = g.tensor((8, 16), name="b")
    ((a + b).sin() * b).sqrt().output("y")
    compiled = ll.compile(g)
    yield compiled
    compiled.egraph.close()


def test_a_launched_search_is_shown_live_and_in_full(comp) -> None:
    profiler = comp.profiler(generations=1, generation_size=4, mutations=2, seed=1)
    assert isinstance(profiler, GenomeProfiler) and profiler.status_text == "ready"
    assert (profiler.generations_input.value, profiler.size_input.value, profiler.mutations_input.value,
            profiler.seed_input.value, profiler.device_input.value) == (1, 4, 2, 1, "cpu")
    counted = []
    profiler.progress.observe(lambda change: counted.append(change["new"]), names="value")
    profiler.launch()
    assert profiler.running and profiler.launch_button.disabled and not profiler.stop_button.disabled
    result = profiler.wait(60)

    assert result is comp.last_search and profiler.result is result and not result.interrupted
    history = profiler.history
    assert [c.hash for c in history] == [c.hash for c in result.history] and len(history) >= 2
    assert counted == list(range(1, len(history) + 1))  # the bar moved with each candidate, as it came
    assert profiler.progress.value == profiler.progress.max == len(history)
    assert profiler.outcome_counts == result.outcomes()
    curve = profiler.best_curve
    assert curve == sorted(curve, reverse=True) and curve[-1] == result.best.seconds
    assert len(curve) == len(history) - result.initial.index  # one point per candidate from the first viable one
    assert profiler.status_text.startswith("done:") and f"{len(history)} candidates" in profiler.status_text
    assert f"best {result.best.seconds * 1e3:.3f} ms" in profiler.status_text
    assert profiler.plot_png.startswith(b"\x89PNG") and profiler.plot_view.value == profiler.plot_png
    figure = profiler.figure()
    figure.savefig(io.BytesIO(), format="png")  # laid out: the ticks are placed
    counted_axes = [a.xaxis for a in figure.axes[:2]] + [figure.axes[2].yaxis]  # candidates, generation colours
    assert all(float(t).is_integer() for axis in counted_axes for t in axis.get_ticklocs()), "whole-number ticks"
    timed = [c for c in history if c.outcome == "ok"]
    bars = [c for c in figure.axes[0].collections if isinstance(c, LineCollection)]  # fastest to slowest trial
    assert len(bars) == 1 and [tuple(s[:, 1]) for s in bars[0].get_segments()] == \
        [(c.spread[0] * 1e3, c.spread[1] * 1e3) for c in timed]
    table = profiler.outcomes_view.value
    assert all(f">{o}</td>" in table for o in OUTCOMES) and f">{result.outcomes()['ok']}</td>" in table
    # the ranking: viable candidates by median, each with its fastest and slowest trial
    ranked = sorted(timed, key=lambda c: c.seconds)
    rows = re.findall(r"<tr><td>(\d+)</td><td>#(\d+)</td><td>\d+</td>((?:<td[^>]*>[\d.]+</td>){3})</tr>",
                      profiler.ranking_view.value)
    assert [(int(rank), int(index)) for rank, index, _ in rows] == [(k + 1, c.index) for k, c in enumerate(ranked)]
    for (_, _, cells), c in zip(rows, ranked, strict=True):
        median, fastest, slowest = map(float, re.findall(r">([\d.]+)<", cells))
        assert (median, fastest, slowest) == tuple(round(t * 1e3, 3) for t in (c.seconds, *c.spread))
        assert fastest <= median <= slowest
    assert [value for _, value in profiler.selector.options] == [c.index for c in history]
    assert profiler.selector.options[0][0].startswith("#0 gen 0 ")
    first = history[result.initial.index]
    assert f"{first.seconds * 1e3:.3f} ms ({first.spread[0] * 1e3:.3f}-{first.spread[1] * 1e3:.3f}) ok" in \
        profiler.selector.options[first.index][0]
    assert not profiler.launch_button.disabled and profiler.stop_button.disabled

    best = result.best
    other = next(c for c in history if c.hash != best.hash)
    profiler.select(other.index)
    assert profiler.selected is other and profiler.selector.value == other.index
    profiler.select(best.index)
    llir = comp.llir(best.genome)
    shown = profiler.selected_html
    assert html.escape(llir.summary()) in shown["LLIR"] and "<svg" in shown["LLIR"]
    assert html.escape(Regions.of(llir).summary()) in shown["Regions"]
    assert html.escape(CudaStage(llir).summary()) in shown["CUDA"]
    assert [view.value for view in profiler.tab_views] == [shown[tab] for tab in TABS]
    # the default runner measured it, in its own process
    assert best.worker.endswith(f" pid {comp_pid_of(best)}") and f"measured by {best.worker}" in shown["LLIR"]


def comp_pid_of(candidate: Candidate) -> int:
    """The process id a candidate's worker names: not this process (the measuring process)."""
    pid = int(candidate.worker.rsplit(" ", 1)[1])
    assert pid != os.getpid()
    return pid


def test_the_profiler_measures_with_the_runner_it_is_given(comp) -> None:
    profiler = comp.profiler(generations=1, generation_size=2, runner=ll.InProcessRunner())
    profiler.launch()
    result = profiler.wait(60)
    assert result.history and all(c.worker.endswith("(in process)") for c in result.history)
    with pytest.raises(ll.ArgumentError, match="runner"):
        comp.profiler(runner="ray")


def test_stop_ends_the_search_early_with_what_it_found(comp) -> None:
    # no early abort (the serial search): every candidate is timed, so the search goes on long enough to be stopped
    profiler = comp.profiler(generations=200, generation_size=30, runner=ll.InProcessRunner())
    profiler.launch()
    with pytest.raises(ll.LuminalError, match="already running"):
        profiler.launch()
    deadline = time.monotonic() + 30
    while profiler.outcome_counts["ok"] < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    profiler.stop()
    result = profiler.wait(30)
    assert result.interrupted and result.history == profiler.history
    assert 2 <= len(profiler.history) < 200 * 30 + 1 == profiler.progress.max
    assert profiler.status_text.startswith("stopped:") and profiler.progress.bar_style == "warning"
    assert profiler.selected is result.best  # the best so far is shown once the search ends
    assert not profiler.running and not profiler.launch_button.disabled


def test_a_refused_candidate_shows_its_reason(comp) -> None:
    profiler = comp.profiler()
    profiler.history = [Candidate(0, 0, 0x1234, None, [], "refused", "dead end at IR-7")]
    profiler.select(0)
    assert all("dead end at IR-7" in profiler.selected_html[tab] for tab in TABS)
    assert "#0 gen 0 refused" in profiler.tab_views[0].value


def test_an_error_in_the_search_is_shown_not_raised(comp, monkeypatch) -> None:
    def broken(**settings):
        raise ValueError("the e-graph is gone")

    monkeypatch.setattr(comp, "search", broken)
    profiler = comp.profiler()
    profiler.launch()
    assert profiler.wait(10) is None and profiler.result is None
    assert profiler.status_text == "failed after 0 candidates: ValueError: the e-graph is gone"
    assert profiler.progress.bar_style == "danger" and not profiler.launch_button.disabled


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a CUDA GPU is present")
def test_cuda_without_a_gpu_says_why_and_starts_nothing(comp) -> None:
    with pytest.raises(ll.NoDeviceError) as raised:
        comp.run(np.zeros((8, 16), np.float32), np.zeros((8, 16), np.float32), device="cuda")
    profiler = comp.profiler(device="cuda")
    assert str(raised.value) in profiler.status_text
    profiler.launch()
    assert profiler._thread is None and not profiler.running and profiler.wait(1) is None
    assert str(raised.value) in profiler.status_text and not profiler.launch_button.disabled

    chooser = comp.profiler()
    chooser.device_input.value = "cuda"
    assert str(raised.value) in chooser.status_text
    chooser.device_input.value = "cpu"
    assert chooser.status_text == "ready"
