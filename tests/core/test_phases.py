"""Compile phases (``core/phases.py``): a nested phase's time is its own, not its parent's, and each thread counts
its own phases."""

from __future__ import annotations

import threading
import time

from luminal_lab.core.phases import phase, totals


def test_a_nested_phase_is_taken_out_of_its_parent() -> None:
    before = totals()
    with phase("test outer"):
        time.sleep(0.05)
        with phase("test inner"):
            time.sleep(0.1)
        time.sleep(0.05)
    spent = {name: seconds - before.get(name, 0.0) for name, seconds in totals().items()}
    assert 0.09 <= spent["test outer"] < 0.2 and 0.09 <= spent["test inner"] < 0.2
    assert spent["test outer"] + spent["test inner"] >= 0.19


def test_each_thread_counts_its_own_phases() -> None:
    seen = {}

    def work() -> None:
        with phase("test other thread"):
            time.sleep(0.02)
        seen.update(totals())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen["test other thread"] >= 0.02 and "test other thread" not in totals()
