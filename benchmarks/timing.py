"""Times a search can trust: the same search started from the profiler widget's thread and from the main thread, on
an idle machine and while a spinning process per core keeps the machine busy.

Writes benchmarks/results/timing.json. The program is notebook 03's (a 32×64 by 64×64 matmul, ReLU and a SiLU-like
gate: about 0.04 ms a run), searched with its default runner (``ll.LocalRunner()``: a measuring process, early abort
at 3x the best) ``REPEATS`` times from each thread, alternately, 2 generations of 6 and the same seed each time. Per
machine state and thread:

- ``initial_ms``: the median over the searches of the initial (most-fused) genome's time, the one genome every search
  measures, and ``initial_spread_ms``: the fastest and slowest trial of the searches' measurements of it;
- ``best_ms``: the median over the searches of their best time;
- ``slow_share``: the share of candidates that early abort ended.

``widget_vs_main`` is the widget's ``initial_ms`` over the main thread's (target, issue 33: at most 1.10 idle and
busy). Ratios against torch eager and ``torch.compile`` for one call of the same program, in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, median_ms, write_result  # noqa: E402
from tests.helpers.busy import spinning  # noqa: E402

REPEATS = 5
SEARCH = {"generations": 2, "generation_size": 6, "seed": 0}
TARGET = 1.10


def program():
    import luminal_lab as ll

    g = ll.Graph()
    x, w = g.tensor((32, 64), name="x"), g.tensor((64, 64), name="w")
    hidden = (x @ w).relu()
    (hidden * hidden.sigmoid()).output("y")
    comp = ll.compile(g)
    comp.egraph.saturate()
    return comp


def search(comp, widget: bool):
    """One search from the main thread, or launched from the profiler widget (its background thread)."""
    if not widget:
        return comp.search(**SEARCH, progress=False)
    profiler = comp.profiler(**SEARCH)
    profiler.launch()
    return profiler.wait(timeout=300)


def summary(results: list) -> dict:
    initial = [r.initial for r in results]
    candidates = [c for r in results for c in r.history]
    return {"initial_ms": round(statistics.median(c.seconds for c in initial) * 1e3, 4),
            "initial_spread_ms": [round(min(c.spread[0] for c in initial) * 1e3, 4),
                                  round(max(c.spread[1] for c in initial) * 1e3, 4)],
            "best_ms": round(statistics.median(r.best.seconds for r in results) * 1e3, 4),
            "slow_share": round(sum(c.outcome == "slow" for c in candidates) / len(candidates), 3),
            "searches": len(results)}


def torch_times() -> dict:
    torch.manual_seed(0)
    x, w = torch.randn(32, 64), torch.randn(64, 64)

    def eager(x, w):
        hidden = torch.relu(x @ w)
        return hidden * torch.sigmoid(hidden)

    compiled = torch.compile(eager)
    return {"eager_ms": median_ms(lambda: eager(x, w), 500), "inductor_ms": median_ms(lambda: compiled(x, w), 500)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "timing.json")
    args = parser.parse_args()
    comp = program()
    reference = torch_times()
    result: dict = {"repeats": REPEATS, "search": SEARCH, "target": TARGET, **{k: round(v, 4) for k, v in
                                                                              reference.items()}}
    for state in ("idle", "busy"):
        found: dict[str, list] = {"main": [], "widget": []}
        with spinning(state == "busy"):
            start = time.perf_counter()
            for _ in range(REPEATS):
                for thread in found:
                    found[thread].append(search(comp, thread == "widget"))
            seconds = time.perf_counter() - start
        main, widget = summary(found["main"]), summary(found["widget"])
        ratio = widget["initial_ms"] / main["initial_ms"]
        result[state] = {"main": main, "widget": widget, "widget_vs_main": round(ratio, 3),
                         "meets_target": ratio <= TARGET, "seconds": round(seconds, 1),
                         "best_vs_eager": round(reference["eager_ms"] / main["best_ms"], 3),
                         "best_vs_inductor": round(reference["inductor_ms"] / main["best_ms"], 3)}
    comp.egraph.close()
    write_result(args.out, result)


if __name__ == "__main__":
    main()
