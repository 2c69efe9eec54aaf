"""Measured search over genomes: every candidate is extracted, run, checked, and timed.

A search starts (generation 0) from the most-fused genome (``ChoiceSpace.fused_genome``: one kernel
per region, matmuls kept) and a viable random genome (up to 100 random tries), then runs generations
of children of the best ``keep_best`` candidates so far. Each candidate's outputs are compared
with the reference runtime's (tolerance by dtype) and checked for NaNs before its time
counts; a failing candidate is recorded with its outcome and reason, never fatal. A candidate
that would not fit the memory budget, or runs out of memory, is refused with the reason.
``budget`` (seconds) is checked before each candidate after the most-fused one, so a search ends
within about one candidate's time of it. The random choices are seeded, so the same seed and
the same measurements give the same history; pass ``cost`` (a function of the LLIR) for
measurements that do not vary.
``on_candidate`` sees each candidate as it joins the history (a live view), and setting the
``stop`` event ends the search before its next candidate, as an interrupt does.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..core.dtypes import DType
from ..core.errors import Refused, SearchStopped
from ..llir.genome import ChoiceSpace, Genome, children, extract
from ..llir.llir import LLIR

OUTCOMES = ("ok", "nan", "mismatch", "error", "refused")
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

    def __repr__(self) -> str:
        timing = f" {self.seconds * 1e3:.3f} ms" if self.seconds is not None else ""
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


Runner = Callable[[LLIR], tuple[list[np.ndarray], float, dict[int, float]]]


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


def search(space: ChoiceSpace, run: Runner, expected: list[np.ndarray], generations: int = 5,
           generation_size: int = 30, mutations: int = 3, keep_best: int = 3, budget: float | None = None,
           seed: int = 0, cost: Callable[[LLIR], float] | None = None, progress: bool = True,
           on_candidate: Callable[[Candidate], None] | None = None,
           stop: threading.Event | None = None, without: frozenset[str] = frozenset(),
           lower: Callable[[Genome], LLIR] = extract) -> SearchResult:
    """Search ``space``; ``lower`` makes a genome's LLIR (raising ``Refused``), ``run`` executes an LLIR and returns
    (outputs, seconds, per-kernel seconds). No candidate picks a kernel op in ``without`` (what the device runs only
    as another implementation).

    ``on_candidate`` is called with each candidate once it joins the history. ``stop`` is checked
    before each candidate: once set, the result so far comes back ``interrupted`` (or
    ``SearchStopped`` is raised when no viable genome was found yet)."""
    from tqdm.auto import tqdm

    rng = random.Random(seed)
    history: list[Candidate] = []
    seen: set[int] = set()
    deadline = time.monotonic() + budget if budget is not None else None

    def evaluate(genome: Genome, generation: int, parent: int | None) -> Candidate:
        """Try one genome; it joins the history once its outcome is known (not if interrupted)."""
        if stop is not None and stop.is_set():
            raise SearchStopped(f"search stopped after {len(history)} candidate(s)")
        candidate = Candidate(len(history), generation, genome.hash, parent, genome.mutations, "ok", genome=genome)
        try:
            llir = lower(genome)
            outputs, seconds, per_kernel = run(llir)
        except Refused as refused:
            candidate.outcome, candidate.reason = "refused", str(refused)
        except MemoryError as error:  # over the memory budget, or an allocation failed: refused, the search goes on
            candidate.outcome, candidate.reason = "refused", str(error) or f"{type(error).__name__}"
        except Exception as error:  # a candidate that fails is recorded, never fatal
            candidate.outcome, candidate.reason = "error", f"{type(error).__name__}: {error}"
        else:
            candidate.outcome, candidate.reason = compare(outputs, expected)
            if candidate.outcome == "ok":
                candidate.seconds = cost(llir) if cost is not None else seconds
                candidate.kernel_seconds = per_kernel
        history.append(candidate)
        if on_candidate is not None:
            on_candidate(candidate)
        return candidate

    bar = tqdm(total=generations * generation_size, desc="search", unit="genome", disable=not progress)
    interrupted = False
    initial = None
    try:
        fused = space.fused_genome(without)
        seen.add(fused.hash)
        initial = candidate if (candidate := evaluate(fused, 0, None)).outcome == "ok" else None
        for _ in range(100):
            if initial is not None and deadline is not None and time.monotonic() > deadline:
                raise TimeoutError
            genome = space.random_genome(rng.randrange(2**32), without)
            if genome.hash in seen:
                continue
            seen.add(genome.hash)
            candidate = evaluate(genome, 0, None)
            if candidate.outcome == "ok":
                initial = initial or candidate
                break
        if initial is None:
            reasons = Counter(c.outcome for c in history)
            raise Refused("no viable genome", f"100 random tries gave {dict(reasons)}; the last: {history[-1].reason}")
        for generation in range(1, generations + 1):
            parents = sorted((c for c in history if c.outcome == "ok"), key=lambda c: c.seconds)[:keep_best]
            for slot in range(generation_size):
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError
                parent = parents[slot % len(parents)]
                brood = children(parent.genome, 1, mutations, rng, seen, without)
                if not brood:
                    continue
                evaluate(brood[0], generation, parent.hash)
                bar.update(1)
                best = min(c.seconds for c in history if c.outcome == "ok")
                bar.set_postfix(best=f"{best * 1e3:.3f} ms", refused=sum(c.outcome == "refused" for c in history))
    except (KeyboardInterrupt, SearchStopped, TimeoutError) as halt:
        interrupted = not isinstance(halt, TimeoutError)
        if initial is None:
            raise
    finally:
        bar.close()
    return SearchResult(history, initial, interrupted)


def random_inputs(shapes: Mapping[str, tuple[tuple[int, ...], DType]], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs in range: floats uniform in [-1, 1], integers in [0, 2), bools at random."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, (shape, dtype) in shapes.items():
        if dtype.is_float:
            arrays[name] = rng.uniform(-1, 1, shape).astype(dtype.numpy)
        elif dtype == DType.BOOL:
            arrays[name] = rng.integers(0, 2, shape).astype(bool)
        else:
            arrays[name] = rng.integers(0, 2, shape).astype(dtype.numpy)
    return arrays
