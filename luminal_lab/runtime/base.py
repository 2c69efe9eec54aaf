"""What every runtime shares: a plan per binding, inputs and weights copied in, a run, a profile.

A ``Runtime`` runs one LLIR. For each binding of the symbolic dimensions it builds a ``Plan``
once (``_build``, the device's own part): buffers, resolved reads, compiled kernels, and the
steps that launch them in order. A call copies every input into its ``Slot`` and each weight
only when it is first seen or the caller passes a different array (a weight's slot is the runtime's, shared by
all its plans; the CPU runtime reads both in place where its kernels can, ``cpu``), checking dtype and shape
first (``DTypeBoundaryError``, ``ShapeError``; nothing is cast), runs the steps and reads the
outputs back as fresh arrays in ``llir.outputs`` order. ``profile`` times whole runs by wall
clock (``Profile.call``), the kernels back to back (``Profile.total``, what a search ranks by) and
each kernel on its own (``_time_steps``), on the CPU's clock or with CUDA events on a GPU, and
writes the per-kernel medians into ``llir.times``. ``cpu.CPURuntime`` and ``cuda.CUDARuntime`` subclass it.

Before a plan allocates anything, its kernels' buffers are checked against a memory budget (by
default ``MEMORY_FRACTION`` of the device's free memory, ``_free_memory``): a genome that would
materialise a huge intermediate (a matmul's broadcast product, say) raises ``MemoryBudgetError``
naming the buffer, and so does an allocation that fails anyway.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import os
import statistics
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from ..core.dtypes import DType
from ..core.errors import DTypeBoundaryError, LuminalError, MemoryBudgetError, ShapeError
from ..core.ops import IN_REGION
from ..core.phases import phase
from ..core.plans import PlanCache
from ..core.shape_tracker import format_shape
from ..core.symbolic import evaluator
from ..llir.llir import LLIR, Kernel

Step = Callable[[], None]
MEMORY_FRACTION = 0.5  # of the device's free memory a plan's buffers may take, by default


def host_memory_available() -> int:
    """Bytes of host memory available now: what the kernel reports (``MemAvailable``), else the free pages."""
    with contextlib.suppress(OSError), open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def format_bytes(count: float) -> str:
    """``count`` bytes in B, KiB, MiB, GiB or TiB, three significant digits."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024:
            return f"{count:.3g} {unit}"
        count /= 1024
    return f"{count:.3g} TiB"


@dataclass
class Slot:
    """Where an input or a weight is copied: its name, the plan's buffer, and the dtype and shape it must have.

    A weight's slot remembers the caller's array it last copied (``bound``): it copies again only for another one.
    """

    name: str
    buffer: Any
    dtype: DType
    shape: tuple[int, ...]
    bound: Any = None


@dataclass
class Plan:
    """What one binding of the symbolic dimensions runs: the slots of the inputs and weights, and the
    ``(kernel id, step)`` pairs in order."""

    inputs: list[Slot] = field(default_factory=list)
    weights: list[Slot] = field(default_factory=list)
    steps: list[tuple[int, Step]] = field(default_factory=list)
    bound: tuple[int, list] = (-1, [])  # the runtime's weight fills, and the weight arrays, at the last binding

    @functools.cached_property
    def weight_names(self) -> list[str]:
        """The weights' names, in ``weights`` order (read once the plan is built)."""
        return [slot.name for slot in self.weights]


@dataclass
class Profile:
    """Median seconds per kernel id (each kernel call timed on its own), of all kernels run back to back (``total``,
    on the device's clock: CUDA events on a GPU), and of a whole call (``call``: copies in and out included);
    ``spread``: the fastest and slowest trial of ``total``. ``back_to_back`` (when asked for) is the seconds per run
    of ``trials`` runs of the kernels launched back to back between two timestamps: a GPU's launches then queue
    behind its work, as torch's kernels are timed, where ``total`` counts the host's first launch in each run."""

    kernels: dict[int, float]
    total: float
    trials: int
    kernel_ops: dict[int, str] = field(default_factory=dict)
    call: float = 0.0
    spread: tuple[float, float] = (0.0, 0.0)
    back_to_back: float | None = None

    @property
    def copies(self) -> float:
        """Seconds a call spends beyond its kernels: copies in and out, and the call's own overhead."""
        return max(self.call - self.total, 0.0)

    def hot_spots(self, n: int = 10) -> list[tuple[int, str, float]]:
        """The ``n`` slowest kernels as ``(kernel id, op, seconds)``."""
        ranked = sorted(self.kernels.items(), key=lambda item: -item[1])[:n]
        return [(kid, self.kernel_ops.get(kid, ""), seconds) for kid, seconds in ranked]

    def __repr__(self) -> str:
        return (f"<Profile {len(self.kernels)} kernels, {self.total * 1e3:.3f} ms of kernels per run, "
                f"{self.call * 1e3:.3f} ms per call (median of {self.trials})>")


P = TypeVar("P", bound=Plan)


class Runtime(ABC, Generic[P]):
    """Runs an LLIR: ``run(inputs, weights, bindings)`` returns the outputs in ``llir.outputs`` order, ``profile``
    times it. Subclasses build a binding's plan (``_build``), copy a checked value into a slot (``_copy_in``),
    time one run's steps (``_time_steps``) and read the outputs back (``_collect``)."""

    device = "device"

    def __init__(self, llir: LLIR, memory_budget: int | None = None):
        self.llir = llir
        self.memory_budget = memory_budget  # bytes a plan's buffers may take; None: MEMORY_FRACTION of what is free
        self.plans: PlanCache[P] = PlanCache(self._planned)  # by sorted (dimension, size) pairs
        self._weights: dict[str, np.ndarray] = {}
        self._weight_slots: dict[str, Slot] = {}  # a weight's slot, which every plan shares
        self._fills = 0  # weights copied or bound anew, by any plan
        self._numeric = {k.id: tuple(d.value for d in k.shape) for k in llir.kernels if all(d.is_num for d in k.shape)}
        self._shapes: dict[int, Callable[[Mapping[str, int]], tuple[int, ...]]] = {}  # symbolic ones' evaluators
        self._buffered = [k for k in llir.kernels if k.op not in IN_REGION]  # the kernels with buffers
        self._fixed_bytes = {k.id: math.prod(self._numeric[k.id]) * k.dtype.numpy.itemsize
                             for k in self._buffered if k.id in self._numeric}  # their bytes where shapes are numbers

    def shape(self, kernel: Kernel, bindings: Mapping[str, int]) -> tuple[int, ...]:
        """``kernel``'s shape at ``bindings`` (a shape of numbers only found once, a symbolic one's function of the
        binding made once: ``evaluator``)."""
        numeric = self._numeric.get(kernel.id)
        if numeric is not None:
            return numeric
        shape = self._shapes.get(kernel.id)
        if shape is None:
            shape = self._shapes[kernel.id] = evaluator(kernel.shape)
        return shape(bindings)

    def weight_slot(self, name: str, dtype: DType, shape: tuple[int, ...], allocate: Callable[[], Any]) -> Slot:
        """The slot of weight ``name``, its buffer made by ``allocate`` the first time: every plan of this runtime
        shares it (a weight's shape has no symbolic dimension), so a weight is copied in once, not once per binding,
        and the plans of a generation's growing sizes all read the same memory."""
        slot = self._weight_slots.get(name)
        if slot is None:
            slot = self._weight_slots[name] = Slot(name, allocate(), dtype, shape)
        return slot

    def plan(self, bindings: Mapping[str, int] | None = None) -> P:
        """The plan for one binding of the symbolic dimensions (built, and its kernels compiled, on first use)."""
        return self.plans.plan(bindings)

    def prepare(self, weights: Mapping[str, np.ndarray], bindings: Mapping[str, int] | None = None) -> None:
        """Build the plan of ``bindings`` for these ``weights`` (its kernels compiled) ahead of the first run, so that
        the run can be timed on its own."""
        self._weights.update(weights)
        self.plan(bindings)

    def run(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
            bindings: Mapping[str, int] | None = None, checked: bool = False) -> list[np.ndarray]:
        """Run once and wait for it; weights are copied in only when first seen (or when a different array is
        passed). ``checked``: the inputs are numpy arrays whose dtypes and shapes were checked against the graph's at
        ``bindings`` (a ``Boundary``'s), so they are not checked again. Returns fresh arrays the caller owns."""
        plan = self._prepare(inputs, weights or {}, bindings, self._copy_in if checked else None)
        self._launch(plan)
        return self._collect(plan)

    def profile(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
                bindings: Mapping[str, int] | None = None, warmup: int = 2, trials: int = 10,
                until: float | None = None, back_to_back: bool = False) -> Profile:
        """Median seconds per kernel, of the kernels back to back (``_time_launch``), and per call (wall clock of
        ``run``, copies included) over ``trials`` runs after ``warmup`` runs; with ``back_to_back``, also the runs
        launched one after another (``Profile.back_to_back``). Past ``until`` (a ``time.monotonic()`` deadline) no
        further trial starts once one is done; ``Profile.trials`` says how many ran."""
        for _ in range(warmup):
            self.run(inputs, weights, bindings)
        per_kernel: dict[int, list[float]] = defaultdict(list)
        totals, calls = [], []
        for trial in range(trials):
            if trial and until is not None and time.monotonic() >= until:
                break
            start = time.perf_counter()
            self.run(inputs, weights, bindings)
            calls.append(time.perf_counter() - start)
            plan = self._prepare(inputs, weights or {}, bindings)
            totals.append(self._time_launch(plan))
            for kid, seconds in self._time_steps(plan):
                per_kernel[kid].append(seconds)
        medians = {kid: statistics.median(times) for kid, times in per_kernel.items()}
        ops = {k.id: k.op for k in self.llir.kernels}
        streamed = self._time_launch(self._prepare(inputs, weights or {}, bindings), len(totals)) if back_to_back \
            else None
        return Profile(medians, statistics.median(totals), len(totals), {kid: ops[kid] for kid in medians},
                       statistics.median(calls), (min(totals), max(totals)), streamed)

    def fastest(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
                bindings: Mapping[str, int] | None = None, runs: int = 3, enough: float = 0.0) -> float:
        """The fastest of up to ``runs`` timings of the kernels back to back (what ``Profile.total`` is the median
        of), stopping at the first at or under ``enough``. Call it after a first run: that one pays for first touches
        of memory, and on a busy machine any one run may wait a scheduler tick (4 ms) or several for a core."""
        plan = self._prepare(inputs, weights or {}, bindings)
        best = math.inf
        for _ in range(runs):
            best = min(best, self._time_launch(plan))
            if best <= enough:
                break
        return best

    def kernel_requests(self, weights: Mapping[str, np.ndarray],
                        bindings: Mapping[str, int] | None = None) -> list:
        """What a builder process would compile ahead for the plan of ``bindings``, listed without compiling (the
        CPU runtime: its numba kernels; a runtime that compiles otherwise lists nothing)."""
        return []

    def buffer_bytes(self, bindings: Mapping[str, int] | None = None) -> dict[int, int]:
        """Bytes of each kernel's buffer for ``bindings`` (kernels inside a fused region have none; scratch copies
        of views are not counted)."""
        bindings = dict(bindings or {})
        return self._fixed_bytes | {k.id: math.prod(self.shape(k, bindings)) * k.dtype.numpy.itemsize
                                    for k in self._buffered if k.id not in self._fixed_bytes}

    def _planned(self, bindings: dict[str, int]) -> P:
        """``_build``, once the buffers are known to fit the budget; a failed allocation is a ``MemoryBudgetError``."""
        sizes = self.buffer_bytes(bindings)
        total = sum(sizes.values())
        if self.memory_budget is not None:
            budget, of = self.memory_budget, ""
        else:
            free = self._free_memory()
            budget, of = int(free * MEMORY_FRACTION), f" ({MEMORY_FRACTION:.0%} of the {format_bytes(free)} free)"
        if total > budget:
            kid = max(sizes, key=sizes.__getitem__)
            kernel = next(k for k in self.llir.kernels if k.id == kid)
            raise MemoryBudgetError(
                f"k{kid} ({kernel.op} {format_shape(kernel.shape)} {kernel.dtype.value}) needs "
                f"{format_bytes(sizes[kid])}: the plan's buffers need {format_bytes(total)} in all, over the "
                f"{self.device} memory budget of {format_bytes(budget)}{of}")
        try:
            with phase("planning"):
                return self._build(bindings)
        except Exception as error:
            if self._out_of_memory(error):
                raise MemoryBudgetError(f"allocating the plan's buffers ({format_bytes(total)}) failed on the "
                                        f"{self.device}: {error}") from error
            raise

    def _out_of_memory(self, error: Exception) -> bool:
        """Whether ``error`` is the device running out of memory."""
        return isinstance(error, MemoryError)

    def _prepare(self, inputs: Mapping[str, Any], weights: Mapping[str, np.ndarray],
                 bindings: Mapping[str, int] | None, fill: Callable[[P, Slot, Any], None] | None = None) -> P:
        """The plan, with this call's inputs copied in by ``fill`` (default ``_fill``: checked host arrays) and any
        new weights by ``_fill`` (``_bind_weights``)."""
        if weights:
            self._weights.update(weights)  # before the plan: a plan built now tells weights from inputs by them
        plan = self.plan(bindings)
        fill = fill or self._fill
        for slot in plan.inputs:
            value = inputs.get(slot.name)
            if value is None:
                raise LuminalError(f"missing input {slot.name!r}; the inputs are {[s.name for s in plan.inputs]}")
            fill(plan, slot, value)
        self._bind_weights(plan)
        self._started(plan)
        return plan

    def _bind_weights(self, plan: P) -> None:
        """Bind the plan's weights to the runtime's arrays of them; a plan given the arrays it was last given, while no
        plan copied or bound a weight anew (``_fills``), checks none of them again."""
        values = list(map(self._weights.get, plan.weight_names))
        fills, last = plan.bound
        if fills != self._fills or len(last) != len(values) or not all(map(operator.is_, values, last)):
            for slot, value in zip(plan.weights, values):  # unless no weight moved anywhere since: then all hold
                if value is None:
                    raise LuminalError(f"missing weight {slot.name!r}")
                self._bind_weight(plan, slot, value)
            plan.bound = (self._fills, values)

    def _started(self, plan: P) -> None:
        """What a run does once its inputs and weights are in, before its steps (the CPU runtime: fresh arrays for
        the outputs its kernels write straight)."""

    def _bind_weight(self, plan: P, slot: Slot, value: np.ndarray) -> None:
        """Copy a weight into its slot unless it is the array copied there last."""
        if value is not slot.bound:
            self._fill(plan, slot, value)
            slot.bound = value
            self._fills += 1

    def _fill(self, plan: P, slot: Slot, value: np.ndarray) -> None:
        value = np.asarray(value)
        if value.dtype != slot.dtype.numpy:
            raise DTypeBoundaryError(f"{slot.name!r} is {value.dtype} but the LLIR declares {slot.dtype.numpy}; "
                                     "nothing is cast implicitly")
        if value.shape != slot.shape:
            raise ShapeError(f"{slot.name!r} has shape {list(value.shape)} but the plan expects {list(slot.shape)}")
        self._copy_in(plan, slot, value)

    def _launch(self, plan: P) -> None:
        for _, step in plan.steps:
            step()

    def _time_launch(self, plan: P, repeats: int = 1) -> float:
        """Seconds the plan's steps take back to back, per run of ``repeats`` runs one after another (the CPU's
        clock; a GPU runtime times them with events)."""
        start = time.perf_counter()
        for _ in range(repeats):
            self._launch(plan)
        return (time.perf_counter() - start) / repeats

    @abstractmethod
    def _free_memory(self) -> int:
        """Bytes of memory free on the device now."""

    @abstractmethod
    def _build(self, bindings: dict[str, int]) -> P:
        """The plan of one binding: buffers, slots, and the steps in order."""

    @abstractmethod
    def _copy_in(self, plan: P, slot: Slot, value: np.ndarray) -> None:
        """Copy ``value`` (checked against the slot's dtype and shape) into the slot's buffer."""

    @abstractmethod
    def _time_steps(self, plan: P) -> list[tuple[int, float]]:
        """Run the plan's steps once, each timed on its own: ``(kernel id, seconds)`` in order."""

    @abstractmethod
    def _collect(self, plan: P) -> list[np.ndarray]:
        """The outputs of the run just made, as fresh host arrays in ``llir.outputs`` order."""
