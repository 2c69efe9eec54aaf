"""The exhaustive sweeps (PyTorch's OpInfo ops, with and without gradients; fuzzed graphs) and the fixed slice of them
that ``make test`` runs, so that the suite fits CI's time. ``make test-all`` (``LUMINAL_LAB_SWEEPS=all``) runs them
whole, as an issue's resolution needs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")
WHOLE = os.environ.get("LUMINAL_LAB_SWEEPS") == "all"
EVERY = 3  # the slice: every third item of a sweep, from the first


def sliced(items: Sequence[T]) -> list[T]:
    """``items`` whole under ``make test-all``, else every ``EVERY``-th (the same ones on every run)."""
    return list(items) if WHOLE else list(items)[::EVERY]


def examples(count: int) -> int:
    """How many of ``count`` generated examples a sweep runs (``count`` under ``make test-all``)."""
    return count if WHOLE else max(1, count // EVERY)
