"""Plans by binding of the symbolic dimensions: what every runtime builds once per set of sizes.

A runtime (the reference runtime, the CPU and CUDA runtimes) turns a program into a *plan* for
one binding of its symbolic dimensions (``{"s": 10}``): buffers allocated, views resolved,
kernels compiled. ``PlanCache`` builds each plan on first use and keeps it, keyed by the sorted
``(dimension, size)`` pairs; past ``MAX_PLANS`` the plan used least recently goes (a generation of
thousands of tokens binds as many cache lengths).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

P = TypeVar("P")
MAX_PLANS = 256
BindingKey = tuple[tuple[str, int], ...]


class PlanCache(dict[BindingKey, P]):
    """Plans by sorted ``(dimension, size)`` pairs, least recently used first; ``plan(bindings)`` builds one with
    ``build`` on first use, and drops the least recently used beyond ``limit``."""

    def __init__(self, build: Callable[[dict[str, int]], P], limit: int = MAX_PLANS) -> None:
        super().__init__()
        self._build = build
        self.limit = limit

    def plan(self, bindings: Mapping[str, int] | None = None) -> P:
        """The plan for ``bindings`` (no symbolic dimensions: ``None`` or ``{}``)."""
        key = tuple(sorted(bindings.items())) if bindings else ()
        plan = self.pop(key, None)
        if plan is None:
            plan = self._build(dict(bindings or {}))
            while len(self) >= self.limit:
                del self[next(iter(self))]
        self[key] = plan  # last: the most recently used
        return plan
