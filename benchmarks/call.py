"""The call path at decode sizes: a 64-element ``(a + b).sin()``, where a call costs what its Python costs.

Writes benchmarks/results/call.json: microseconds per call, in one process, of torch eager, ``torch.compile``
(inductor), ``ll.compile(...).run`` and ``torch.compile(backend="luminal_lab")``, and of dynamo's own part (a backend
returning a constant: what any backend's call pays before its own work). Each compiled function is first called until
the backend's program is hot (``HOT_CALLS`` calls, then its native function's background build awaited); then
``ROUNDS`` rounds, each calling every function ``CALLS`` times in turn, and the fastest round of each counts (the
machine's noise only ever adds). ``backend_vs_inductor`` above 1: the backend's call is the cheaper.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import write_result  # noqa: E402
from luminal_lab.compiler import dynamo  # noqa: E402
from luminal_lab.compiler.calls import HOT_CALLS  # noqa: E402

SIZE, CALLS, ROUNDS = 64, 3000, 15


def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).sin()


def main() -> dict:
    a, b = torch.randn(SIZE), torch.randn(SIZE)
    expected = f(a, b)
    constant = (expected.clone(),)
    inductor = torch.compile(f)
    backend = torch.compile(f, backend="luminal_lab")
    floor = torch.compile(lambda x, y: x + y, backend=lambda gm, example: lambda *args: constant)
    program = ll.compile(f, (a, b))
    calls = {"eager": lambda: f(a, b), "inductor": lambda: inductor(a, b), "compiled_run": lambda: program.run(a, b),
             "backend": lambda: backend(a, b), "dynamo_floor": lambda: floor(a, b)}
    for call in calls.values():
        for _ in range(HOT_CALLS + 2):
            call()
    (made,) = [p for p in dynamo._MADE if p.only is not None and p.only.program is ll.programs(backend)[0]]
    if made.only.building is not None:
        made.only.building.result(timeout=600)
    backend(a, b)  # takes the native function built
    for name in ("inductor", "compiled_run", "backend"):
        assert torch.allclose(calls[name](), expected, atol=1e-6), name
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(ROUNDS):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                call()
            best[name] = min(best[name], (time.perf_counter() - start) / CALLS)
    us = {name: round(seconds * 1e6, 2) for name, seconds in best.items()}
    return {"function": f"(a + b).sin() on {SIZE} float32 elements", "calls_per_round": CALLS, "rounds": ROUNDS,
            "native": made.only.native is not None, "us_per_call": us,
            "backend_vs_inductor": round(us["inductor"] / us["backend"], 3),
            "backend_vs_eager": round(us["eager"] / us["backend"], 3),
            "backend_beyond_dynamo_floor_us": round(us["backend"] - us["dynamo_floor"], 2),
            "inductor_beyond_dynamo_floor_us": round(us["inductor"] - us["dynamo_floor"], 2)}


if __name__ == "__main__":
    write_result(ROOT / "benchmarks" / "results" / "call.json", main())
