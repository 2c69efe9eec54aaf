"""Time to search: the serial in-process search against the runners, on the llama block and 1024³ and 4096³ matmuls.

Writes benchmarks/results/search.json. Each search runs in a fresh process with empty kernel and genome caches (so
kernels compile cold, and nothing resumes from records), after ``ll.compile`` (not timed):

- ``serial``: ``ll.InProcessRunner()``: one process (``LUMINAL_LAB_COMPILE_WORKERS=1``), no early abort, kernels
  compiled as each candidate is measured;
- ``local``: ``ll.LocalRunner(builders=2)``: builders compile ahead, early abort at 3x the best so far;
- ``ray``: ``ll.RayRunner()`` on a local Ray cluster (this machine's CPUs, on the loopback).

Per search: ``search_s`` (the whole ``comp.search`` call), ``best_ms`` (its best candidate as the search timed it),
``best_profiled_ms`` (that genome profiled again afterwards, in process, over 50 runs: the fastest of many noisy
times is biased low, so searches are compared on this) and ``best_vs_overall`` (that over the lowest of the
workload's searches), the outcomes, and ``reach_s``: seconds from the search's start until it had measured a
candidate within 5% of its best.
``reach_speedup`` is serial's ``reach_s`` over the local runner's: above 1, the runner got there sooner. Each
workload also has torch eager's and ``torch.compile``'s time for one call, and the best genome's ratio to them
(above 1, luminal_lab's best is faster).

Targets (issue 32): on the llama block the local runner reaches the best at least 2x sooner than the serial search;
the 1024³ matmul search (1 generation of 6, budget 20 s) finishes within 22 s; the 4096³ one (budget 120 s) within
125 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, in_fresh_process, median_ms, write_result  # noqa: E402

LLAMA = {"d_model": 128, "heads": 4, "d_ff": 344, "seq": 32}
WORKLOADS = {  # name: the search's settings, the runners to time, its target in seconds (None: reach_speedup)
    "llama_block": ({"generations": 2, "generation_size": 8, "trials": 5}, ("serial", "local", "ray"), None),
    "matmul_1024": ({"generations": 1, "generation_size": 6, "budget": 20.0}, ("serial", "local", "ray"), 22.0),
    "matmul_4096": ({"generations": 1, "generation_size": 6, "budget": 120.0}, ("local",), 125.0),
}
WITHIN = 1.05  # "reaching the best": a candidate within 5% of it


def program(workload: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The workload as a torch module and its inputs (seeded)."""
    torch.manual_seed(0)
    if workload == "llama_block":
        from tests.helpers.models import LlamaBlock, llama_inputs

        model = LlamaBlock(LLAMA["d_model"], LLAMA["heads"], LLAMA["d_ff"], LLAMA["seq"]).eval()
        return model, llama_inputs(1, LLAMA["seq"], LLAMA["d_model"])
    size = int(workload.rsplit("_", 1)[1])

    class Matmul(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a @ b

    return Matmul().eval(), (torch.randn(size, size), torch.randn(size, size))


def runner_of(name: str):
    import luminal_lab as ll

    if name == "serial":
        return ll.InProcessRunner()
    if name == "local":
        return ll.LocalRunner(builders=2)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray's import: its servers on the loopback
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    return ll.RayRunner()


def measure(workload: str, runner_name: str) -> dict:
    """In a fresh process: compile, then time one search, noting when each candidate was measured."""
    if runner_name == "serial":
        os.environ["LUMINAL_LAB_COMPILE_WORKERS"] = "1"  # one process: no compile workers either
    import luminal_lab as ll

    model, inputs = program(workload)
    comp = ll.compile(model, inputs)
    settings = WORKLOADS[workload][0]
    runner = runner_of(runner_name)
    found: list[tuple[float, str, float | None]] = []
    start = time.perf_counter()
    result = comp.search(**settings, seed=0, progress=False, runner=runner,
                         on_candidate=lambda c: found.append((time.perf_counter() - start, c.outcome, c.seconds)))
    seconds = time.perf_counter() - start
    trials = 50 if result.best.seconds < 0.01 else 5
    profiled = comp.profile(result.best.genome, inputs=inputs, trials=trials).total
    return {"search_s": seconds, "best_ms": result.best.seconds * 1e3, "best_profiled_ms": profiled * 1e3,
            "candidates": len(result.history),
            "outcomes": dict(result.outcomes()),
            "found": [[at, outcome, None if s is None else s * 1e3] for at, outcome, s in found]}


def torch_times(workload: str) -> dict:
    """torch eager's and inductor's median time for one call, in this process."""
    model, inputs = program(workload)
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(*inputs)
        repeats = 5 if workload == "matmul_4096" else 30
        return {"eager_ms": median_ms(lambda: model(*inputs), repeats),
                "inductor_ms": median_ms(lambda: compiled(*inputs), repeats)}


def summary(workload: str, searches: dict[str, dict], torch_ms: dict) -> dict:
    best = min(s["best_profiled_ms"] for s in searches.values())
    for search in searches.values():
        own = search["best_ms"]
        found = search.pop("found")
        search["reach_s"] = next(at for at, outcome, ms in found if outcome == "ok" and ms <= own * WITHIN)
        search["best_vs_overall"] = search["best_profiled_ms"] / best
    out = {"settings": WORKLOADS[workload][0], "best_ms": best, **torch_ms,
           "best_vs_eager": torch_ms["eager_ms"] / best, "best_vs_inductor": torch_ms["inductor_ms"] / best,
           "searches": searches}
    target = WORKLOADS[workload][2]
    if target is None:
        serial, local = searches["serial"], searches["local"]
        out["reach_speedup"] = serial["reach_s"] / local["reach_s"]
        out["target"] = "local reaches its best >= 2x sooner than serial, and that best profiles within 5% of serial's"
        out["target_met"] = (out["reach_speedup"] >= 2
                             and local["best_profiled_ms"] <= serial["best_profiled_ms"] * WITHIN)
    else:
        out["target"] = f"the local runner's search finishes within {target:g} s"
        out["target_met"] = searches["local"]["search_s"] <= target
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "search.json")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return
    results = {"cpu": os.cpu_count(), "workloads": {}}
    for workload in args.workloads:
        searches = {name: in_fresh_process(__file__, [workload, name]) for name in WORKLOADS[workload][1]}
        results["workloads"][workload] = summary(workload, searches, torch_times(workload))
        write_result(args.out, results, show=False)
    write_result(args.out, results)


if __name__ == "__main__":
    main()
