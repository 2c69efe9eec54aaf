"""A search that goes on behind a program's calls (``Compiled.search_in_background``).

The torch.compile backend runs a new program's most-fused genome at its first call and searches meanwhile, as JITs
tier their code (``BackendOptions.background``). The search is ``Compiled.search`` run in a thread of this process (its
candidates built and measured in the runner's processes, as any search's); when it ends its best genome is the
program's, which the next call takes (the ready calls made for the genome before are then no longer current).
``SearchState`` is what a notebook sees of it: running, done, stopped or failed, the candidates measured so far and the
best of them, and the error that ended it; ``watch`` calls back on each candidate and at the end (the workbench's search
tab follows it so). A search still running at exit is stopped.
"""

from __future__ import annotations

import atexit
import html
import threading
import time
import weakref
from collections.abc import Callable

from ..search.search import Candidate, SearchResult


class SearchState:
    """The state of one background search: ``status`` (``running``, ``done``, ``stopped`` or ``failed``), ``candidates``
    measured so far, ``best`` of them, ``result`` once done, ``error`` once failed."""

    def __init__(self) -> None:
        self.status = "running"
        self.candidates: list[Candidate] = []
        self.result: SearchResult | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchers: list[Callable[[SearchState], None]] = []

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def best(self) -> Candidate | None:
        """The fastest candidate measured ``ok`` so far."""
        timed = [c for c in self.candidates if c.outcome == "ok"]
        return min(timed, key=lambda c: c.seconds) if timed else None

    @property
    def seconds(self) -> float:
        """How long it has run (or ran)."""
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    def start(self, search: Callable[[Callable[[Candidate], None], threading.Event], SearchResult]) -> None:
        """Run ``search(on_candidate, stop)`` in a thread of its own."""
        self._thread = threading.Thread(target=self._run, args=(search,), name="luminal_lab search", daemon=True)
        _RUNNING.add(self)
        self._thread.start()

    def watch(self, callback: Callable[[SearchState], None]) -> None:
        """Call ``callback(self)`` (in the search's thread) after each candidate measured and when the search ends (at
        once, where it has ended already)."""
        self._watchers.append(callback)
        if not self.running:
            callback(self)

    def _changed(self) -> None:
        for callback in list(self._watchers):
            callback(self)

    def _measured(self, candidate: Candidate) -> None:
        self.candidates.append(candidate)
        self._changed()

    def _run(self, search: Callable[[Callable[[Candidate], None], threading.Event], SearchResult]) -> None:
        try:
            self.result = search(self._measured, self.stopping)
            self.status = "stopped" if self.result.interrupted else "done"
        except BaseException as error:  # what ended it is shown (``error``), never raised into a later call
            self.error, self.status = error, "failed"
        self.ended = time.monotonic()
        self._changed()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the search to end (at most ``timeout`` seconds); True once it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def stop(self, timeout: float | None = None) -> None:
        """Ask the search to stop after the candidate it is measuring, and wait for it."""
        self.stopping.set()
        self.wait(timeout)

    def __repr__(self) -> str:
        best = self.best
        fastest = f", best {best.seconds * 1e3:.3f} ms" if best is not None else ""
        error = f": {type(self.error).__name__}: {self.error}" if self.error is not None else ""
        return (f"<SearchState {self.status}{error}: {len(self.candidates)} candidates measured{fastest}, "
                f"{self.seconds:.1f} s>")

    def rows(self) -> list[dict]:
        """The candidates measured so far as data: index, generation, outcome, ms (None unless timed) and reason."""
        return [{"index": c.index, "generation": c.generation, "outcome": c.outcome,
                 "ms": None if c.seconds is None else c.seconds * 1e3, "reason": c.reason or ""}
                for c in list(self.candidates)]

    def _repr_html_(self) -> str:
        cells = ((str(r["index"]), str(r["generation"]), r["outcome"], "" if r["ms"] is None else f"{r['ms']:.3f}",
                  r["reason"]) for r in self.rows())
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in cells)
        return (f"<p>{html.escape(repr(self))}</p><table><tr><th>#</th><th>generation</th><th>outcome</th><th>ms</th>"
                f"<th>reason</th></tr>{rows}</table>")


_RUNNING: weakref.WeakSet[SearchState] = weakref.WeakSet()


@atexit.register
def stop_all(timeout: float = 10.0) -> None:
    """Stop the searches still running, each waited for at most ``timeout`` seconds (at exit, and between tests)."""
    for state in list(_RUNNING):
        if state.running:
            state.stop(timeout)
