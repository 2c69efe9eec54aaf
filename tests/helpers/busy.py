"""A machine kept busy: a spinning process per core, for measuring what timing does under load."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def spinning(on: bool = True) -> Iterator[None]:
    """A spinning process per core while the block runs (none when not ``on``)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)
                ] if on else []
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
