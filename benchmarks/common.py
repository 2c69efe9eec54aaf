"""What every benchmark script shares: timing a callable, and writing its JSON result."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def median_ms(fn: Callable[[], object], repeats: int = 50, warmup: int = 3) -> float:
    """Median wall time of ``fn`` in milliseconds, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def write_result(path: Path, result: dict, show: bool = True) -> None:
    """Write ``result`` as JSON to ``path`` (folders made as needed) and print it (unless not ``show``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    path.write_text(text)
    if show:
        print(text, end="")
