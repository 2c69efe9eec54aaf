"""A directory this process cannot write to, for the caches' tests: ``chmod`` for a user, and for root (whom modes
do not stop) the file system's immutable attribute (``chattr +i``); where neither holds, the test is skipped."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[Path]:
    """``directory`` (made if missing) read-only for the duration, writable again afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    root = os.geteuid() == 0
    if root:
        made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"root cannot make {directory} read-only here (chattr: {made.stderr.strip()})")
    else:
        directory.chmod(0o555)
    try:
        with pytest.raises(OSError), tempfile.NamedTemporaryFile(dir=directory):
            pass
        yield directory
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        else:
            directory.chmod(0o755)
