"""Plans by binding of the symbolic dimensions: what every runtime builds once per set of sizes.

A runtime (the reference runtime, the CPU and CUDA runtimes) turns a program into a *plan* for
one binding of its symbolic dimensions (``{"s": 10}``): buffers allocated, views resolved,
kernels compiled. ``PlanCache`` builds each plan on first use and keeps it, keyed by the sorted
``(dimension, size)`` pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

P = TypeVar("P")
BindingKey = tuple[tuple[str, int], ...]


class PlanCache(dict[BindingKey, P]):
    """Plans by sorted ``(dimension, size)`` pairs; ``plan(bindings)`` builds one with ``build`` on first use."""

    def __init__(self, build: Callable[[dict[str, int]], P]) -> None:
        super().__init__()
        self._build = build

    def plan(self, bindings: Mapping[str, int] | None = None) -> P:
        """The plan for ``bindings`` (no symbolic dimensions: ``None`` or ``{}``)."""
        bindings = dict(bindings or {})
        key = tuple(sorted(bindings.items()))
        if key not in self:
            self[key] = self._build(bindings)
        return self[key]
