"""Where compiling takes its time: the pipeline's phases, timed in this process.

``phase(name)`` times a block as one phase; a phase inside another counts as its own, not its parent's (its time is
taken out of the parent's), so the totals add up to the time spent in any of them. Phases run in any thread; each
thread nests and counts its own. ``totals()`` gives the seconds of each phase so far in the calling thread (a search
behind the calls, in a thread of its own, is not the first call's time). The pipeline's phases:
``export`` (torch.export and the core aten decompositions), ``translation`` (aten to HLIR), ``rolling``,
``saturation`` (the e-graph built and saturated, or read from disk), ``extraction`` (the genomes' choices and the
LLIR of a genome), ``planning`` (a runtime's plan for a binding, its kernels' code generated), ``kernel compilation``,
``search`` (one that the first call waits for), ``backend`` (the rest of the torch.compile backend's work when dynamo
hands it a graph) and ``run`` (a call of dynamo's past its fast path: its program found or compiled, then run).
``benchmarks/compile.py`` draws them for a first call.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

_local = threading.local()  # .stack: this thread's open phases, each [name, time charged from]; .totals: its seconds


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` (its nested phases' time left out)."""
    stack = _local.__dict__.setdefault("stack", [])
    now = time.perf_counter()
    if stack:
        _charge(stack[-1], now)
    stack.append([name, now])
    try:
        yield
    finally:
        _charge(stack.pop(), time.perf_counter())
        if stack:
            stack[-1][1] = time.perf_counter()


def _charge(entry: list, now: float) -> None:
    name, since = entry
    spent = _local.__dict__.setdefault("totals", {})
    spent[name] = spent.get(name, 0.0) + now - since
    entry[1] = now


def totals() -> dict[str, float]:
    """Seconds per phase so far in the calling thread."""
    return dict(_local.__dict__.get("totals", {}))
