"""Measured search over genomes: every candidate is extracted, built, run, checked, and timed.

A search starts (generation 0) from the genomes it resumes from (``seeds``: the best few of its tuning records, measured
again), the most-fused genome (``ChoiceSpace.fused_genome``: one kernel per region, matmuls kept) and a viable random
genome (up to 100 random tries; once one candidate is ``ok``, a ``slow`` one ran and will do), then runs generations of
children of the best ``keep_best`` candidates so far. A runner (``search.runners``) measures each candidate: its outputs
are compared with the reference (tolerance by dtype) and checked for NaNs before its time counts; a candidate that
fails, crashes, hangs, is over the memory budget or is too slow in its warm runs is recorded with its outcome and
reason, never fatal. A generation's children are all made first, so the runner builds the next ones while it measures.
``budget`` (seconds) is checked before each candidate after the first viable one and passed to the runner for those,
which starts no timed run past it: a search ends within about one timed run of it. Genomes in ``skip`` (measured before,
on this machine) are not measured again. The random choices are seeded, so the same seed and the same measurements give
the same history; pass ``cost`` (a function of the LLIR) for measurements that do not vary.
``on_candidate`` sees each candidate as it joins the history (a live view), and setting the
``stop`` event ends the search before its next candidate, as an interrupt does.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..core.dtypes import DType
from ..core.errors import Refused, SearchStopped
from ..llir.genome import ChoiceSpace, Genome, children, extract
from ..llir.llir import LLIR

if TYPE_CHECKING:
    from .runners import Runner

OUTCOMES = ("ok", "slow", "nan", "mismatch", "error", "timeout", "refused")
TOLERANCE = {  # (atol, rtol) when comparing a candidate with the reference
    DType.F64: (1e-9, 1e-9),
    DType.F32: (1e-4, 1e-4),
    DType.F16: (1e-2, 1e-2),
    DType.BF16: (5e-2, 5e-2),
}


@dataclass
class Candidate:
    """One genome tried by a search: what happened to it and how fast it was."""

    index: int
    generation: int
    hash: int
    parent: int | None
    mutations: list[tuple[str, int, int]]
    outcome: str
    reason: str | None = None
    seconds: float | None = None
    kernel_seconds: dict[int, float] = field(default_factory=dict, repr=False)
    genome: Genome | None = field(default=None, repr=False)
    worker: str | None = None  # who measured it (a runner's process, a Ray worker's machine)
    spread: tuple[float, float] | None = None  # ok: its fastest and slowest trial (``seconds`` is their median)

    def __repr__(self) -> str:
        timing = f" {self.seconds * 1e3:.3f} ms" if self.seconds is not None else ""
        if self.spread is not None:
            timing += f" (trials {self.spread[0] * 1e3:.3f}-{self.spread[1] * 1e3:.3f} ms)"
        why = f" ({self.reason})" if self.reason else ""
        return f"<Candidate #{self.index} gen {self.generation} {self.hash:016x} {self.outcome}{timing}{why}>"


@dataclass
class SearchResult:
    """Every candidate in order, the best one, and the initial one it started from."""

    history: list[Candidate]
    initial: Candidate
    interrupted: bool = False

    @property
    def best(self) -> Candidate:
        timed = [c for c in self.history if c.outcome == "ok"]
        return min(timed, key=lambda c: c.seconds)

    def outcomes(self) -> Counter:
        return Counter(c.outcome for c in self.history)

    def __repr__(self) -> str:
        counts = ", ".join(f"{o} {self.outcomes()[o]}" for o in OUTCOMES if self.outcomes()[o])
        stop = ", interrupted" if self.interrupted else ""
        return (f"<SearchResult {len(self.history)} candidates ({counts}); best {self.best.seconds * 1e3:.3f} ms, "
                f"initial {self.initial.seconds * 1e3:.3f} ms{stop}>")


@dataclass
class Measurement:
    """What measuring one candidate gave, as data (it may come from another process or machine): an outcome of
    ``OUTCOMES`` and its reason, the seconds (``ok``: the median of its trials; ``slow``: its fastest warm run), the
    per-kernel seconds, the worker that measured it and (``ok``) its fastest and slowest trial."""

    outcome: str
    reason: str | None = None
    seconds: float | None = None
    kernel_seconds: dict[int, float] = field(default_factory=dict)
    worker: str | None = None
    spread: tuple[float, float] | None = None


def compare(got: list[np.ndarray], expected: list[np.ndarray]) -> tuple[str, str | None]:
    """``ok``, ``nan`` or ``mismatch`` (with where and by how much) against the reference. A float element may differ
    by ``atol + rtol * (|expected| + the output's largest magnitude)`` (``TOLERANCE``): a genome sums in another
    order than the reference, and a sum's rounding grows with the magnitudes summed, which an element that cancels
    (a gradient, say) no longer shows."""
    for index, (a, b) in enumerate(zip(got, expected)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return "mismatch", f"output {index} is {a.dtype}{list(a.shape)}, expected {b.dtype}{list(b.shape)}"
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            x, y = a.astype(np.float64), b.astype(np.float64)
            if np.isnan(x).sum() > np.isnan(y).sum():
                return "nan", f"output {index} has NaNs the reference does not"
            atol, rtol = TOLERANCE[next(d for d in DType if d.numpy == a.dtype)]
            finite = np.abs(y[np.isfinite(y)])
            scale = float(finite.max()) if finite.size else 0.0
            close = np.isclose(x, y, atol=atol + rtol * scale, rtol=rtol, equal_nan=True)
            if not close.all():
                worst = np.nanmax(np.abs(x - y)[~close])
                return "mismatch", f"output {index}: {int((~close).sum())} elements differ, up to {worst:.3g}"
        elif not np.array_equal(a, b):
            return "mismatch", f"output {index}: {int((a != b).sum())} elements differ"
    return "ok", None


def search(space: ChoiceSpace, runner: Runner, generations: int = 5, generation_size: int = 30,
           mutations: int = 3, keep_best: int = 3, budget: float | None = None, seed: int = 0,
           cost: Callable[[LLIR], float] | None = None, progress: bool = True,
           on_candidate: Callable[[Candidate], None] | None = None, stop: threading.Event | None = None,
           without: frozenset[str] = frozenset(), lower: Callable[[Genome], LLIR] = extract,
           seeds: Sequence[Genome] = (), skip: frozenset[int] = frozenset()) -> SearchResult:
    """Search ``space``; ``lower`` makes a genome's LLIR (raising ``Refused``), ``runner`` (started on its job by
    the caller) builds and measures it. No candidate picks a kernel op in ``without`` (what the device runs only as
    another implementation).

    ``on_candidate`` is called with each candidate once it joins the history. ``stop`` is checked
    before each candidate: once set, the result so far comes back ``interrupted`` (or
    ``SearchStopped`` is raised when no viable genome was found yet)."""
    from tqdm.auto import tqdm

    rng = random.Random(seed)
    history: list[Candidate] = []
    seen: set[int] = set(skip) - {g.hash for g in seeds}
    deadline = time.monotonic() + budget if budget is not None else None

    def lowered(genome: Genome) -> LLIR | Measurement:
        """The genome's LLIR, its build started; or why it has none."""
        try:
            llir = lower(genome)
        except Refused as refused:
            return Measurement("refused", str(refused))
        except Exception as error:  # a candidate that fails is recorded, never fatal
            return Measurement("error", f"{type(error).__name__}: {error}")
        runner.build(llir)
        return llir

    def best_so_far() -> float | None:
        """The fastest time so far, for early abort (none under a cost function: its units are not seconds)."""
        timed = [c.seconds for c in history if c.outcome == "ok"]
        return min(timed) if timed and cost is None else None

    def check_stop() -> None:
        if stop is not None and stop.is_set():
            raise SearchStopped(f"search stopped after {len(history)} candidate(s)")

    def record(genome: Genome, generation: int, parent: int | None, llir: LLIR | Measurement,
               measured: Measurement) -> Candidate:
        """The candidate ``measured`` describes joins the history (a cost function sees its LLIR with the times)."""
        if measured.outcome == "ok" and isinstance(llir, LLIR) and cost is not None:
            measured.seconds = cost(llir.timed(measured.kernel_seconds))
        ok = measured.outcome == "ok"
        candidate = Candidate(len(history), generation, genome.hash, parent, genome.mutations, measured.outcome,
                              measured.reason, measured.seconds if ok else None,
                              measured.kernel_seconds if ok else {}, genome, measured.worker,
                              tuple(measured.spread) if ok and measured.spread and cost is None else None)
        history.append(candidate)
        if on_candidate is not None:
            on_candidate(candidate)
        return candidate

    def evaluate(genome: Genome, generation: int, parent: int | None) -> Candidate:
        """Lower and measure one genome (no budget cuts it before a viable genome is found: a search returns one)."""
        check_stop()
        llir = lowered(genome)
        measured = (llir if isinstance(llir, Measurement)
                    else runner.measure(llir, best_so_far(), deadline if initial is not None else None))
        return record(genome, generation, parent, llir, measured)

    def out_of_time() -> bool:
        return initial is not None and deadline is not None and time.monotonic() > deadline

    bar = tqdm(total=generations * generation_size, desc="search", unit="genome", disable=not progress)
    interrupted = False
    initial = None
    try:
        first = [*seeds, space.fused_genome(without)]  # the seeds are measured again, whatever skip says
        tries = (space.random_genome(rng.randrange(2**32), without) for _ in range(100))
        for k, genome in enumerate(itertools.chain(first, tries)):
            if out_of_time():
                raise TimeoutError
            if genome.hash in seen:
                continue
            seen.add(genome.hash)
            candidate = evaluate(genome, 0, None)
            initial = initial or (candidate if candidate.outcome == "ok" else None)
            # then up to a viable random genome (one that ran: ok, or slow beside a viable one)
            if k >= len(first) and initial is not None and candidate.outcome in ("ok", "slow"):
                break
        if initial is None:
            reasons = Counter(c.outcome for c in history)
            last = history[-1].reason if history else "every genome tried was measured before (pass measure_again)"
            raise Refused("no viable genome", f"100 random tries gave {dict(reasons)}; the last: {last}")
        for generation in range(1, generations + 1):
            parents = sorted((c for c in history if c.outcome == "ok"), key=lambda c: c.seconds)[:keep_best]
            brood = []
            for slot in range(generation_size):
                parent = parents[slot % len(parents)]
                brood += [(child, parent) for child in children(parent.genome, 1, mutations, rng, seen, without)]
            ahead = [lowered(child) for child, _ in brood]  # the runner builds them while it measures
            measurements = runner.measure_all([x for x in ahead if isinstance(x, LLIR)], best_so_far, deadline)
            try:
                for (child, parent), llir in zip(brood, ahead):
                    if out_of_time():
                        raise TimeoutError
                    check_stop()
                    measured = llir if isinstance(llir, Measurement) else next(measurements)
                    record(child, generation, parent.hash, llir, measured)
                    bar.update(1)
                    best = min(c.seconds for c in history if c.outcome == "ok")
                    bar.set_postfix(best=f"{best * 1e3:.3f} ms",
                                    refused=sum(c.outcome == "refused" for c in history))
            finally:
                measurements.close()
    except (KeyboardInterrupt, SearchStopped, TimeoutError) as halt:
        interrupted = not isinstance(halt, TimeoutError)
        if initial is None:
            raise
    finally:
        bar.close()
        runner.finish()
    return SearchResult(history, initial, interrupted)


def random_inputs(shapes: Mapping[str, tuple[tuple[int, ...], DType]], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs in range: floats uniform in [-1, 1], integers in [0, 2), bools at random."""
    rng = np.random.default_rng(seed)
    return {name: (rng.uniform(-1, 1, shape) if dtype.is_float else rng.integers(0, 2, shape)).astype(dtype.numpy)
            for name, (shape, dtype) in shapes.items()}
