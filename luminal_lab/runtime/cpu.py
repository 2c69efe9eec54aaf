"""The CPU runtime: runs an LLIR with numba kernels generated from it (``luminal_lab.codegen.cpu``).

For each binding of the symbolic dimensions ``CPURuntime`` builds a plan once: it allocates the buffers (see ``base``
for inputs and weights), computes constants and iotas, makes the scratches of the reads ``codegen.reads.lower`` finds
(loop kernels read a padded read in place, other readers through a zeroed scratch), carves the other buffers from
one arena where buffers alive at no common step share memory (``pack``), compiles each loop kernel for its
``codegen.cpu_loop.Loop`` (cached by source, ``cache``; ``prange`` from ``PARALLEL_THRESHOLD`` element loads of work)
and lists the launches. Casts to or from f16 and bf16 and Scatter are numpy host ops; a contraction is one BLAS call
when its reads have rows or columns (through torch's BLAS for floats), else a loop of dot products, as is one under
``DOT_PRODUCTS`` multiply-adds or a matrix times a vector read along the matrix's rows (a decode step's linears); a row
times a matrix strided along the contracted axis (a decode step's attention probabilities times its values) sums the
matrix's rows, scaled, so that its inner loop runs along contiguous rows.
Inputs are read in place and outputs written straight into fresh arrays where every read or write of their buffers
goes through a binder and they hold at least ``REBIND_BYTES``; smaller ones are copied.

A generation binds a new length every step. The arena's layout is that of the length's bucket (``bucket``: sizes
rounded up, a few buckets per doubling), so that within a bucket every buffer stays where it was, and a plan takes
from the runtime each step that an earlier plan built for the same buffers and the same values of the symbols the step
depends on (``_Planner._key``): only the steps the length reaches are built anew. A kept step's binders are shared by
the plans taking it, and know where they point (``_Binders``).
"""

from __future__ import annotations

import functools
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..codegen import cpu as codegen
from ..codegen.cpu_loop import Loop, kernel_array
from ..codegen.reads import Gathered, Nested, Strided, contiguous_strides, lower
from ..core.dtypes import DType, convert
from ..core.errors import LuminalError, UnsupportedOpError
from ..core.ops import BINARY_KERNELS, CONTRACT_KERNELS, IN_REGION, REDUCE_KERNELS, TERNARY_KERNELS, UNARY_KERNELS
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import Expr
from ..hlir.contraction import Contraction
from ..hlir.opaque import on_arrays
from ..llir.llir import LLIR, Kernel
from ..llir.regions import RegionBody, find_regions
from . import gathered
from .base import Plan, Runtime, Slot, Step, host_memory_available
from .cache import KernelCache, Request, entry_point, kernel_cache

ALIGN = 64  # bytes: where each buffer carved from the arena starts (a cache line)
PARALLEL_THRESHOLD = 1 << 16  # element loads of work; below it numba's thread start-up costs more than it saves
# multiply-adds: below it a matmul runs on one of torch's threads (as fast idle, and on a busy machine its thread
# pool's hand-offs each wait for a core: 16 ms, not 0.01, for a 32x64 by 64x64 matmul beside a spinning process per
# core)
SERIAL_MATMUL = 1 << 18
# multiply-adds: below it a contraction runs as dot products in a loop kernel, as does a matrix-vector product whose
# matrix is read along its rows (a decode step's linear layers): a library call's dispatch costs more than such
# products, and numba's loop streams the matrix from a cold cache in about 0.6x the time of MKL's gemv
DOT_PRODUCTS = 1 << 16
# bytes: an input or output smaller than this is copied into or out of the plan's buffer; a larger one is read in place
# or written straight (its binders rebound each call, tens of microseconds: what copying about this many bytes costs)
REBIND_BYTES = 1 << 17
# elements along a row below which a row times a strided matrix runs as dot products (``_scales_rows``)
ROW_SCALED = 8
LOWERED_READS = 1 << 14  # views' reads a runtime remembers (``lowered``), the oldest forgotten first
KEPT_STEPS = 1 << 12  # steps a runtime keeps for the plans of other bindings (``_Planner._key``)
LAYOUTS = 64  # arena layouts a runtime remembers, by bucket
FIXED = 1 << 12  # constants' and iotas' buffers a runtime shares between plans
BUCKETS = 4  # per doubling of a size: a layout's bucket rounds a symbol's size up to one of these steps (``bucket``)
_HALF = (DType.F16, DType.BF16)
_EVERY_PLAN = ("Input", "Output", "Constant", "Iota")  # kernels whose steps every plan builds (``_Planner._key``)


@dataclass
class _View:
    """``read`` of the flat contiguous buffer ``flat``: kernel ``buffer``'s own, or a scratch that the ``refresh``
    steps fill first (a materialised padded read, a nested or gathered one)."""

    flat: np.ndarray
    read: Strided
    refresh: list[Step] = field(default_factory=list)
    buffer: int | None = None

    @property
    def array(self) -> np.ndarray:
        """The same read as a numpy view (of an unpadded read)."""
        item = self.flat.itemsize
        return as_strided(self.flat[self.read.offset:], self.read.shape, tuple(s * item for s in self.read.strides))


@dataclass(slots=True)
class _Launch:
    """A compiled kernel (its numba dispatcher) and the arguments it is called with; a plan rebinds some of them
    between calls, always to arrays of the same types. A call goes straight to the machine code compiled for those
    types (``entry``), without the dispatcher's typing of every argument."""

    function: Callable
    args: list
    entry: Callable = field(init=False)

    def __post_init__(self) -> None:
        self.entry = entry_point(self.function, self.args)

    def __call__(self) -> Any:
        return self.entry(*self.args)

    def binder(self, position: int, dims: tuple[int, ...] | None = None) -> Binder:
        """What puts another buffer's flat array at ``position`` (as ``dims`` when given): a partial, which a plan
        keeps as two objects where a closure is five (a new length's plan keeps dozens, and each full collection of
        the garbage collector walks them all)."""
        return functools.partial(_put_argument, self.args, position, dims)


def _put_argument(args: list, position: int, dims: tuple[int, ...] | None, flat: np.ndarray) -> None:
    """``_Launch.binder``'s: put ``flat`` (as ``dims`` when given) at ``position`` of a launch's ``args``."""
    args[position] = kernel_array(flat if dims is None else flat.reshape(dims))


@dataclass(slots=True)
class _Copy:
    """A step copying ``source`` into ``target`` (a read materialised into its scratch; a matmul's operand or
    product, cast with ``casting``)."""

    target: np.ndarray
    source: np.ndarray
    casting: str = "same_kind"

    def __call__(self) -> None:
        np.copyto(self.target, self.source, casting=self.casting)


@dataclass(slots=True)
class _Gather:
    """A gather kernel's launch, which returns whether an index was out of range: the first bad one then raises."""

    launch: _Launch
    indexes: np.ndarray
    size: int
    kernel: Kernel

    def __call__(self) -> None:
        if self.launch():
            _check_indexes(self.indexes, self.size, self.kernel)  # raises, naming the first bad index


@dataclass(slots=True)
class _Sequence:
    """Steps run as one, in order (a kernel's views' refreshes, then the kernel)."""

    steps: list[Step]

    def __call__(self) -> None:
        for step in self.steps:
            step()


@dataclass(slots=True)
class _Output:
    """An Output step: a fresh C-contiguous copy of ``array`` (what the output reads), which the caller owns, put in
    ``results`` under kernel ``kid``."""

    results: dict[int, np.ndarray]
    kid: int
    array: np.ndarray

    def __call__(self) -> None:
        self.results[self.kid] = np.array(self.array, order="C")


@dataclass(slots=True)
class _Direct:
    """An Output step whose kernel wrote it straight into ``output``'s fresh array: that array, as ``shape``, put in
    ``results`` under kernel ``kid``."""

    results: dict[int, np.ndarray]
    kid: int
    output: _Rebound
    shape: tuple[int, ...]

    def __call__(self) -> None:
        self.results[self.kid] = self.output.bound.reshape(self.shape)


Caller = Callable[[Sequence[np.ndarray], Mapping[str, np.ndarray]], list[np.ndarray]]  # ``CPURuntime.caller``'s
Binder = Callable[[np.ndarray], None]  # given a buffer's new flat array, points one read or write of it there


class _Matmul:
    """``out = lhs @ rhs`` over ``[batch, r, c]`` arrays (``out`` contiguous) as one library call: torch's mm or bmm
    for floats (``_torch``; on one thread below ``SERIAL_MATMUL`` multiply-adds), else numpy's matmul. ``arrays`` are
    ``out, lhs, rhs``, views of the plan's buffers that ``binder`` moves to other arrays of the same layout."""

    __slots__ = ("arrays", "call", "operands", "serial", "torch")

    def __init__(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        self.arrays = [out, lhs, rhs]
        self.torch = _torch() if lhs.dtype in (np.float32, np.float64) else None
        if self.torch is None:
            self.call = lambda c, a, b: np.matmul(a, b, out=c)
        elif lhs.shape[0] == 1:
            mm = self.torch.mm
            self.call = lambda c, a, b: mm(a, b, out=c)
        else:
            bmm = self.torch.bmm
            self.call = lambda c, a, b: bmm(a, b, out=c)
        self.operands = [self._operand(x) for x in self.arrays]
        self.serial = self.torch is not None and lhs.size * rhs.shape[-1] < SERIAL_MATMUL

    def _operand(self, array: np.ndarray) -> Any:
        """What the call takes for ``array``: itself, or a torch view of it (one matrix for mm)."""
        if self.torch is None:
            return array
        return self.torch.from_numpy(array[0] if array.shape[0] == 1 else array)  # a view, no copy

    def __call__(self) -> None:
        if not self.serial:
            self.call(*self.operands)
            return
        threads = self.torch.get_num_threads()
        self.torch.set_num_threads(1)
        try:
            self.call(*self.operands)
        finally:
            self.torch.set_num_threads(threads)

    def binder(self, position: int, flat: np.ndarray) -> Binder | None:
        """What points operand ``position`` (0: out, 1: lhs, 2: rhs), a view of ``flat``, at the same place in another
        flat array; None when it is no view of ``flat``."""
        array = self.arrays[position]
        if not np.may_share_memory(array, flat):
            return None
        offset = array.__array_interface__["data"][0] - flat.__array_interface__["data"][0]
        return functools.partial(self._put_operand, position, (array.shape, array.dtype, offset, array.strides))

    def _put_operand(self, position: int, layout: tuple, other: np.ndarray) -> None:
        """Point operand ``position`` at the same place (``layout``: shape, dtype, offset, strides) in ``other``."""
        shape, dtype, offset, strides = layout
        self.operands[position] = self._operand(np.ndarray(shape, dtype, other, offset, strides))


@dataclass(slots=True)
class _Binders:
    """One step's binders of one buffer (its reads, or its write) and the address of the memory they point at now
    (first the buffer's own): a step kept for other plans (``_Built``) keeps them, so every plan taking it knows where
    they point."""

    binders: list[Binder]
    address: int

    def point(self, flat: np.ndarray, address: int) -> None:
        """Point the binders at ``flat``, whose memory starts at ``address``."""
        for bind in self.binders:
            bind(flat)
        self.address = address


@dataclass
class _Rebound:
    """A buffer that the plan's kernels read (and, for an output, write) through binders (``groups``), so that each
    call can put another array in its place: a caller's C-contiguous input or weight, read in place (any other is
    copied into ``buffer`` first), or a fresh output array for the caller to keep."""

    groups: list[_Binders]
    buffer: np.ndarray
    bound: np.ndarray | None = None  # the caller's array it holds (a weight is copied again only for another)
    address: int | None = None  # of the memory it pointed the kernels at last (which they keep alive)

    def bind(self, array: np.ndarray, held: np.ndarray | None = None) -> None:
        """Point the kernels at ``array``, holding ``held`` (default: ``array``): each group of binders is moved only
        if it points at other memory (another plan sharing the step may have moved it)."""
        self.bound = array if held is None else held
        self.address = address = array.__array_interface__["data"][0]
        flat = None
        for group in self.groups:
            if group.address != address:
                flat = array.reshape(-1) if flat is None else flat
                group.point(flat, address)

    def fresh(self) -> None:
        """A new array in the buffer's place (``bound``), for this call's kernels to write."""
        self.bind(np.empty_like(self.buffer))


@dataclass(slots=True)
class _Built:
    """A kernel's step as a plan built it, and what building it told the planner: how many of its views read each
    buffer (``uses``), its binders of each buffer's reads and of its write, and whether it computes with numpy."""

    step: Step
    uses: Counter[int]
    reads: dict[int, _Binders]
    writes: dict[int, _Binders]
    warns: bool


@dataclass
class _Record:
    """What the planner of a bucket's last plan found, from which the next plan in the bucket starts: its binding, the
    arena and offsets its buffers were carved at, the buffers with their tokens and sizes, the weights' slots and
    kernels, and the step each kernel took. The next plan finds again only the buffers whose shape or values depend on
    the binding, and takes every other kernel's step as it is where its symbols and buffers did not change."""

    bindings: dict[str, int]
    arena: np.ndarray
    offsets: dict[int, int]
    nbytes: dict[int, int]
    buffers: dict[int, np.ndarray]
    tokens: dict[int, object]
    weights: list[Slot]
    shared: set[int]
    steps: dict[int, _Built]


@dataclass
class CPUPlan(Plan):
    """A CPU plan: besides the slots and steps, the buffers by kernel id, the fresh arrays the Output steps make in a
    run, the inputs and weights read in place (by name), the outputs written straight into fresh arrays, and whether
    numpy's floating-point warnings need silencing (numba's kernels raise none)."""

    buffers: dict[int, np.ndarray] = field(default_factory=dict)
    results: dict[int, np.ndarray] = field(default_factory=dict)
    in_place: dict[str, _Rebound] = field(default_factory=dict)
    direct: list[_Rebound] = field(default_factory=list)
    pinned: list[_Rebound] = field(default_factory=list)  # buffers another plan may rebind, held to themselves here
    warns: bool = False  # whether a step computes with numpy (a cast, a scatter-add): a run silences its warnings


class CPURuntime(Runtime[CPUPlan]):
    """Runs an LLIR on the CPU: ``run(inputs, weights, bindings)`` returns the outputs in ``llir.outputs`` order."""

    device = "CPU"

    def __init__(self, llir: LLIR, cache: KernelCache | None = None, memory_budget: int | None = None):
        super().__init__(llir, memory_budget)
        self.cache = cache or kernel_cache()
        self._arena = np.zeros(0, np.uint8)
        self._bodies: dict[int, RegionBody] | None = None
        self._lifetimes: dict[int, tuple[int, int]] | None = None
        self._symbols: dict[int, tuple[ShapeTracker, tuple[str, ...]]] = {}  # by id: a tracker's own symbols
        self._reads: dict[tuple, tuple[ShapeTracker, Strided | Nested | Gathered]] = {}  # lower's, remembered
        self._step_inputs: dict[int, tuple[tuple[str, ...], tuple[int, ...]]] = {}  # by kernel id
        self._kept: dict[tuple, _Built] = {}  # steps by ``_Planner._key``, the oldest forgotten first
        self._layouts: dict[tuple, tuple[dict[int, int], dict[int, int], int]] = {}  # by bucket
        self._fixed: dict[tuple, np.ndarray] = {}  # constants' and iotas' buffers, by kernel and values
        self._records: dict[tuple, _Record] = {}  # by bucket: its last plan's (``_Record``)
        self._bound: set[int] | None = None  # kernels whose buffer depends on the binding (``bound_buffers``)

    @staticmethod
    def load() -> None:
        """Import now what the first plan would (torch, whose BLAS runs float products): a measuring process's
        first candidate is then timed for its own work."""
        _torch()

    def _free_memory(self) -> int:
        return host_memory_available()

    def _build(self, bindings: dict[str, int]) -> CPUPlan:
        """The plan; when it needs kernels not yet compiled in this process, a first pass lists them, they are
        compiled side by side (``KernelCache.compile_all``), and the plan is built again. Its new steps are kept for
        the plans of other bindings."""
        listing = _Listing(self.cache)
        planner = _Planner(self, bindings, listing)
        plan = planner.plan()
        if listing.requests:
            self.cache.compile_all(listing.requests)
            planner = _Planner(self, bindings)
            plan = planner.plan()
        for key, built in planner.built.items():
            self._remember(self._kept, key, built, KEPT_STEPS)
        self.record(bindings, planner.recorded())
        return plan

    def kernel_requests(self, weights: Mapping[str, np.ndarray],
                        bindings: Mapping[str, int] | None = None) -> list[Request]:
        """The numba compile requests of every kernel of the plan (a listing pass: its buffers are allocated, never
        touched), for another process to compile into the disk cache."""
        self._weights.update(weights)
        listing = _Listing(self.cache, every=True)
        _Planner(self, dict(bindings or {}), listing, reuse=False).plan()
        return listing.requests

    def kept(self, key: tuple) -> _Built | None:
        """The step an earlier plan built for ``key`` (``_Planner._key``), if kept."""
        return self._kept.get(key)

    def step_inputs(self, kernel: Kernel, kernels: Mapping[int, Kernel]) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The symbols that ``kernel``'s step depends on (through its shape, its views, its sources' shapes, a region's
        rows and extents) and the kernels whose buffers it touches (its own, the ones it reads), found once; ``kernels``
        are the LLIR's by id."""
        found = self._step_inputs.get(kernel.id)
        if found is None:
            body = self.region_bodies().get(kernel.id) if kernel.op == "FusionEnd" else None
            reads = [(source, tracker) for source, tracker, _ in body.inputs] if body else list(kernel.sources)
            exprs = [*kernel.shape, *(body.shape if body else ()), *(body.rows or () if body else ()),
                     *(e for e in (body.extents if body else ()) if e is not None)]
            for source, tracker in reads:
                exprs += [*kernels[source].shape, *tracker.dims, *tracker.strides, *tracker.masks]
            symbols = tuple(sorted(set().union(*(e.variables() for e in exprs))))
            found = self._step_inputs[kernel.id] = (symbols, (kernel.id, *dict.fromkeys(s for s, _ in reads)))
        return found

    @staticmethod
    def bucket_of(bindings: Mapping[str, int]) -> tuple:
        """The bucket of ``bindings``: each symbol's size rounded up (``bucket``)."""
        return tuple(sorted((name, bucket(size)) for name, size in bindings.items()))

    def record(self, bindings: Mapping[str, int], record: _Record | None = None) -> _Record | None:
        """The record of the last plan in the bucket of ``bindings``; with ``record``, that one remembered as it."""
        key = self.bucket_of(bindings)
        if record is None:
            return self._records.get(key)
        return self._remember(self._records, key, record, LAYOUTS)

    def bound_buffers(self) -> set[int]:
        """The kernels whose buffer depends on the binding: a shape naming a symbol, a constant's or an iota's values
        naming one (found once)."""
        if self._bound is None:
            exprs = {k.id: [*k.shape, *(k.arg if k.op == "Iota" else (k.arg,) if k.op == "Constant" else ())]
                     for k in self.llir.kernels}
            self._bound = {kid for kid, found in exprs.items()
                           if any(isinstance(e, Expr) and e.variables() for e in found)}
        return self._bound

    def layout(self, bindings: Mapping[str, int], nbytes: Mapping[int, int]) -> tuple[dict[int, int], int]:
        """Offsets in the arena for the carved buffers of ``nbytes`` (by kernel id) at ``bindings``, and the arena's
        size: those of the bucket of ``bindings`` (each symbol's size rounded up, ``bucket``), the same for every
        binding in it, where that bucket's buffers are each at least as large; else ``pack``'s for these sizes."""
        key = (self.bucket_of(bindings), tuple(nbytes))
        found = self._layouts.get(key)
        if found is None:
            top = {name: size for name, size in key[0]}
            kernels = {k.id: k for k in self.llir.kernels}
            room = {kid: math.prod(self.shape(kernels[kid], top)) * kernels[kid].dtype.numpy.itemsize for kid in nbytes}
            found = self._remember(self._layouts, key, (*pack(room, self.lifetimes()), room), LAYOUTS)
        offsets, size, room = found
        if all(nbytes[kid] <= room[kid] for kid in nbytes):
            return offsets, size
        return pack(nbytes, self.lifetimes())

    def fixed(self, kernel: Kernel, shape: tuple[int, ...], bindings: Mapping[str, int]) -> np.ndarray:
        """The buffer of a constant or an iota at ``bindings``, written once and shared by every plan giving it the
        same values (so that the steps reading it are kept for them)."""
        if kernel.op == "Constant":
            value = kernel.arg.evaluate(bindings) if isinstance(kernel.arg, Expr) else kernel.arg
            values = np.asarray(value, dtype=kernel.dtype.numpy)
        else:
            expr, length = kernel.arg
            n = int(length.evaluate(bindings))
            values = np.broadcast_to(expr.evaluate(bindings, np.arange(n, dtype=np.int64)), (n,)).astype(np.int32)
        key = (kernel.id, shape, values.tobytes())
        buffer = self._fixed.get(key)
        if buffer is None:
            buffer = np.empty(shape, kernel.dtype.numpy)
            buffer[...] = values
            self._remember(self._fixed, key, buffer, FIXED)
        return buffer

    @staticmethod
    def _remember(store: dict, key: tuple, value: Any, limit: int) -> Any:
        """``value`` put in ``store`` under ``key``, the oldest entries forgotten past ``limit``."""
        store.pop(key, None)
        while len(store) >= limit:
            del store[next(iter(store))]
        store[key] = value
        return value

    def region_bodies(self) -> dict[int, RegionBody]:
        """The body of each fused region of the LLIR, by its ``FusionEnd``'s id (found once for all plans)."""
        if self._bodies is None:
            self._bodies = {region.end: region.body(self.llir) for region in find_regions(self.llir)}
        return self._bodies

    def lifetimes(self) -> dict[int, tuple[int, int]]:
        """For each kernel, the positions (in kernel order) of the step that writes its buffer and of the last step
        that reads it, a fused region reading at its ``FusionEnd`` (found once for all plans): buffers alive at no
        common step share the arena's memory. An input lives from before the first step (it is copied in then) to
        after the last, so that the steps can run again on the same inputs (as ``profile`` and ``fastest`` do)."""
        if self._lifetimes is None:
            position = {k.id: i for i, k in enumerate(self.llir.kernels)}
            reads = [(src, position[k.id]) for k in self.llir.kernels if k.op not in IN_REGION for src, _ in k.sources]
            reads += [(src, position[end]) for end, body in self.region_bodies().items() for src, _, _ in body.inputs]
            last: dict[int, int] = {}
            for source, at in reads:
                last[source] = max(last.get(source, at), at)
            self._lifetimes = {k.id: (-1, len(position)) if k.op == "Input" else (i, last.get(k.id, i))
                               for i, k in enumerate(self.llir.kernels)}
        return self._lifetimes

    def lowered(self, tracker: ShapeTracker, bindings: Mapping[str, int], size: int,
                source: int) -> Strided | Nested | Gathered:
        """``lower``'s read of ``tracker`` (a view in this runtime's LLIR or region bodies) over ``size`` elements,
        remembered by the values of the tracker's own symbols: a plan for a new length lowers again only the views that
        depend on it."""
        entry = self._symbols.get(id(tracker))
        if entry is None or entry[0] is not tracker:
            exprs = (*tracker.dims, *tracker.strides, *tracker.masks)
            entry = self._symbols[id(tracker)] = (tracker, tuple(sorted(set().union(*(e.variables() for e in exprs)))))
        key = (id(tracker), source, size, tuple(bindings[name] for name in entry[1]))
        read = self._reads.get(key)
        if read is None or read[0] is not tracker:
            while len(self._reads) >= LOWERED_READS:  # a long generation binds thousands of lengths
                del self._reads[next(iter(self._reads))]
            read = self._reads[key] = (tracker, lower(tracker, bindings, size, source))
        return read[1]

    def arena(self, size: int) -> np.ndarray:
        """At least ``size`` bytes that every plan carves its rewritten buffers from (so one plan runs at a time);
        grown by half again beyond what is asked, so that plans of growing sizes go on sharing it."""
        if self._arena.size < size:
            self._arena = np.zeros(size + size // 2, np.uint8)
        return self._arena

    def _copy_in(self, plan: CPUPlan, slot: Slot, value: np.ndarray) -> None:
        """An input or weight that every kernel reads through a binder is read in place when C-contiguous, aligned and
        writeable (as the kernels were compiled for); anything else is copied into its slot."""
        place = plan.in_place.get(slot.name)
        if place is not None:
            flags = value.flags
            if flags.c_contiguous and flags.aligned and flags.writeable:
                place.bind(value)
                return
        np.copyto(slot.buffer, value)
        if place is not None:
            place.bind(slot.buffer, held=value)  # a weight is copied again only for another array

    def _bind_weight(self, plan: CPUPlan, slot: Slot, value: np.ndarray) -> None:
        """A weight this plan reads in place is bound per plan (the slot, shared by every plan, is not written);
        any other is copied into its slot as ``Runtime`` does."""
        place = plan.in_place.get(slot.name)
        if place is None:
            super()._bind_weight(plan, slot, value)
        elif place.bound is not value:
            self._fill(plan, slot, value)
            self._fills += 1

    def caller(self, names: Sequence[str], bindings: Mapping[str, int] | None = None) -> Caller:
        """``run(..., checked=True)`` for one signature of checked host arrays, given as a list in ``names`` order at
        ``bindings``: the plan and each input's slot are found once, for a caller that calls again and again with
        arrays of the same dtypes and shapes (``Compiled.run``'s ready calls)."""
        plan = self.plan(bindings)
        at = {name: position for position, name in enumerate(names)}
        missing = [slot.name for slot in plan.inputs if slot.name not in at]
        if missing:
            raise LuminalError(f"missing input(s) {missing}; the inputs are {[s.name for s in plan.inputs]}")
        fills = [(at[slot.name], slot) for slot in plan.inputs]
        copy_in = self._copy_in

        def call(arrays: Sequence[np.ndarray], weights: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            for position, slot in fills:
                copy_in(plan, slot, arrays[position])
            if plan.weights:
                self.bind_weights(plan, weights)
            self._started(plan)
            self._launch(plan)
            return self._collect(plan)
        return call

    def bind_weights(self, plan: CPUPlan, weights: Mapping[str, np.ndarray]) -> None:
        """Bind the plan's weights to ``weights`` (by name), copying in only what changed (``_bind_weights``)."""
        self._weights.update(weights)
        self._bind_weights(plan)

    def _started(self, plan: CPUPlan) -> None:
        for output in plan.direct:
            output.fresh()
        for place in plan.pinned:
            place.bind(place.buffer)

    def _launch(self, plan: CPUPlan) -> None:
        if not plan.warns:
            super()._launch(plan)
            return
        with np.errstate(all="ignore"):
            super()._launch(plan)

    def _time_steps(self, plan: CPUPlan) -> list[tuple[int, float]]:
        times = []
        clock = time.perf_counter
        with np.errstate(all="ignore"):
            for kid, step in plan.steps:
                begin = clock()
                step()
                times.append((kid, clock() - begin))
        return times

    def _collect(self, plan: CPUPlan) -> list[np.ndarray]:
        outputs = [plan.results[kid] if kid in plan.results else plan.buffers[kid].copy() for kid in self.llir.outputs]
        plan.results.clear()  # the caller owns them now
        return outputs


class _Listing:
    """A planner's kernel cache that lists what is not compiled in this process yet (``every``: every kernel), in
    place of compiling it."""

    def __init__(self, cache: KernelCache, every: bool = False) -> None:
        self.cache, self.every = cache, every
        self.requests: list[Request] = []

    def compile(self, source: str, args: Sequence[np.ndarray]):
        function, request = self.cache.lookup(source, args)
        if function is None or self.every:
            self.requests.append(request)
        return function or _not_compiled


def _not_compiled(*args: object) -> None:
    raise AssertionError("a listing pass's plan is never run")


def bucket(size: int) -> int:
    """``size`` rounded up to the top of its bucket: ``BUCKETS`` (a power of two) even steps per doubling (sizes under
    ``2 * BUCKETS`` exact), so that a bucket's buffers are at most a ``1 / BUCKETS`` part larger than needed."""
    step = 1 << max(size.bit_length() - BUCKETS.bit_length(), 0)
    return -(-size // step) * step


def pack(nbytes: Mapping[int, int], lifetimes: Mapping[int, tuple[int, int]]) -> tuple[dict[int, int], int]:
    """Offsets in one arena (multiples of ``ALIGN``) for buffers of ``nbytes`` by kernel id, and the arena's size:
    buffers whose ``lifetimes`` (first and last step, inclusive) overlap never overlap in memory, and others may. The
    largest goes first, each at the lowest offset clear of the buffers placed so far that live at the same time."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first step, last step)
    offsets = {}
    for kid in sorted(nbytes, key=lambda k: (-nbytes[k], k)):
        first, last = lifetimes[kid]
        size = -(-nbytes[kid] // ALIGN) * ALIGN
        offset = 0
        for start, end in sorted((o, e) for o, e, born, dies in placed if born <= last and first <= dies):
            if offset + size <= start:
                break
            offset = max(offset, end)
        placed.append((offset, offset + size, first, last))
        offsets[kid] = offset
    return offsets, max((end for _, end, _, _ in placed), default=0)


class _Planner:
    """Builds one plan: buffers, views, compiled kernels and the steps that run them. A step whose buffers and numbers
    a plan for an earlier binding left as they are is taken as that plan built it (``_Built``, kept by the runtime)."""

    def __init__(self, runtime: CPURuntime, bindings: dict[str, int], cache: KernelCache | _Listing | None = None,
                 reuse: bool = True):
        self.runtime = runtime
        self.llir = runtime.llir
        self.cache = cache or runtime.cache
        self.bindings = bindings
        self.reuse = reuse
        self.kernels = {k.id: k for k in self.llir.kernels}
        self.bodies = runtime.region_bodies()
        self.buffers: dict[int, np.ndarray] = {}
        self.tokens: dict[int, object] = {}  # by kernel id: what tells its buffer's memory from any other's
        # of the step being built, by kernel id: how many of its views read a buffer, the binders of those reads that
        # can move to another array, the binder of its write (loop kernels, matmuls that write straight); whether it
        # computes with numpy (a cast, a scatter-add)
        self.uses: Counter[int] = Counter()
        self.reads: dict[int, list[Binder]] = defaultdict(list)
        self.writers: dict[int, Binder] = {}
        self.warns = False
        # the plan's, from every step: views, groups of read binders, write binders, by kernel id
        self.viewed: Counter[int] = Counter()
        self.read_groups: dict[int, list[_Binders]] = defaultdict(list)
        self.write_groups: dict[int, _Binders] = {}
        self.shared_groups: set[int] = set()  # kernels whose binders include a kept step's (another plan's too)
        self.built: dict[tuple, _Built] = {}  # steps built now, kept by ``CPURuntime._build`` once the plan is final
        self.steps: dict[int, _Built] = {}  # the step each kernel with a ``_key`` took, for the next plan's record
        self.record: _Record | None = None  # the bucket's last plan's, where this plan starts from it
        self.changed: set[str] = set()  # the symbols whose sizes differ from the record's
        self.moved: set[int] = set()  # the kernels whose buffers are other memory than in the record
        self.arena, self.offsets, self.nbytes = np.zeros(0, np.uint8), {}, {}
        self.slots: list[Slot] = []  # the weights' slots the allocation found
        self.outputs: list[tuple[int, Kernel, _View]] = []  # Output steps, by position, that may write straight
        self.weight_names = set(runtime._weights)
        self.shared: set[int] = set()  # the weights' kernels, whose buffers are the runtime's slots
        self.result = CPUPlan(buffers=self.buffers)

    def size(self, expr: Expr) -> int:
        return int(expr.evaluate(self.bindings))

    def _allocate(self) -> None:
        """Every kernel's buffer: a weight's is the runtime's own slot (``Runtime.weight_slot``); constants and
        iotas, written once, are shared by the plans that give them the same values (``CPURuntime.fixed``), and a
        weight of symbolic shape gets its own; every other buffer, which each run rewrites (inputs copied in,
        kernels' outputs), is carved from the runtime's arena, the same memory for every plan, at the offsets of the
        binding's bucket (``CPURuntime.layout``), so that a generation whose sizes grow by a token a step keeps its
        buffers where they were and, with them, every step its length leaves alone. A plan in a bucket planned before
        starts from the last one's buffers (``_Record``) and finds again only those the binding reaches."""
        record = self.runtime.record(self.bindings) if self.reuse else None
        if record is not None and self._allocate_from(record):
            return
        carved: dict[int, tuple[tuple[int, ...], np.dtype]] = {}
        for kernel in self.llir.kernels:
            self._place(kernel, carved)
        nbytes = {kid: math.prod(shape) * dtype.itemsize for kid, (shape, dtype) in carved.items()}
        offsets, size = self.runtime.layout(self.bindings, nbytes)
        self._carve(carved, nbytes, offsets, self.runtime.arena(size))

    def _allocate_from(self, record: _Record) -> bool:
        """The buffers of ``record``'s plan, those depending on the binding found again: whether that bucket's layout
        and arena still hold them (else nothing is taken)."""
        bound = self.runtime.bound_buffers()
        buffers = {kid: buffer for kid, buffer in record.buffers.items() if kid not in bound}
        carved: dict[int, tuple[tuple[int, ...], np.dtype]] = {}
        for kid in bound:
            self._place(self.kernels[kid], carved)
        nbytes = record.nbytes | {kid: math.prod(shape) * dtype.itemsize for kid, (shape, dtype) in carved.items()}
        offsets, size = self.runtime.layout(self.bindings, nbytes)
        arena = self.runtime.arena(size)
        if offsets is not record.offsets or arena is not record.arena:
            self.buffers.clear()
            self.result.weights.clear()
            self.shared.clear()
            return False
        self.buffers.update(buffers)
        self.tokens.update((kid, token) for kid, token in record.tokens.items() if kid not in bound)
        self.result.weights.extend(record.weights)
        self.shared.update(record.shared)
        self._carve(carved, nbytes, offsets, arena)
        self.record = record
        self.changed = {name for name, size in self.bindings.items() if record.bindings.get(name) != size}
        self.moved = {kid for kid in bound if self.tokens.get(kid) != record.tokens.get(kid)}
        return True

    def _place(self, kernel: Kernel, carved: dict[int, tuple[tuple[int, ...], np.dtype]]) -> None:
        """``kernel``'s buffer (a weight's slot, a constant's, an iota's, a weight of symbolic shape's), or its shape
        and dtype put in ``carved`` for the arena."""
        if kernel.op in IN_REGION or kernel.op == "Output":
            return
        weight = kernel.op == "Input" and kernel.arg in self.weight_names
        if weight and all(d.is_num for d in kernel.shape):
            shape = tuple(d.value for d in kernel.shape)
            slot = self.runtime.weight_slot(kernel.arg, kernel.dtype, shape,
                                            functools.partial(np.zeros, shape, kernel.dtype.numpy))
            self.buffers[kernel.id] = slot.buffer
            self.result.weights.append(slot)
            self.shared.add(kernel.id)
            return
        shape = self.runtime.shape(kernel, self.bindings)
        if kernel.op in ("Constant", "Iota"):
            self.buffers[kernel.id] = self.runtime.fixed(kernel, shape, self.bindings)
        elif weight:
            self.buffers[kernel.id] = np.zeros(shape, kernel.dtype.numpy)
        else:
            carved[kernel.id] = (shape, kernel.dtype.numpy)

    def _carve(self, carved: Mapping[int, tuple[tuple[int, ...], np.dtype]], nbytes: Mapping[int, int],
               offsets: Mapping[int, int], arena: np.ndarray) -> None:
        """The ``carved`` buffers as views of ``arena`` at ``offsets``; every buffer's token."""
        self.arena, self.offsets, self.nbytes = arena, offsets, nbytes
        self.slots = list(self.result.weights)  # the runtime's (a weight of symbolic shape's is the plan's)
        for kid, (shape, dtype) in carved.items():
            start = offsets[kid]
            self.buffers[kid] = arena[start:start + nbytes[kid]].view(dtype).reshape(shape)
            self.tokens[kid] = (id(arena), start)
        for kid, buffer in self.buffers.items():
            self.tokens.setdefault(kid, id(buffer))  # a kept step holds its buffers: no other array has their ids

    def recorded(self) -> _Record:
        """What this plan's planner found, for the next plan of its bucket (``_Record``)."""
        return _Record(self.bindings, self.arena, self.offsets, self.nbytes, self.buffers, self.tokens,
                       self.slots, self.shared, self.steps)

    def plan(self) -> CPUPlan:
        self._allocate()
        for kernel in self.llir.kernels:
            if kernel.op in IN_REGION or kernel.id in self.shared:
                continue  # computed by its region's end; a weight's slot is the runtime's
            step = self._taken(kernel)
            if step is not None:
                self.result.steps.append((kernel.id, step))
        movable, rebound = set(), set()  # what a plan may rebind; what this one does
        for kernel in self.llir.kernels:
            if kernel.op == "Input":
                movable.add(kernel.id)
                if self._rebindable(kernel.id):
                    self.result.in_place[kernel.arg] = _Rebound(self.read_groups[kernel.id], self.buffers[kernel.id])
                    rebound.add(kernel.id)
        for position, kernel, view in self.outputs:
            movable.add(kernel.sources[0][0])
            if self._direct(position, kernel, view):
                rebound.add(kernel.sources[0][0])
        for kid in sorted((self.shared_groups & movable) - rebound):  # kept steps another plan may have moved
            groups = [*self.read_groups[kid], *([self.write_groups[kid]] if kid in self.write_groups else [])]
            self.result.pinned.append(_Rebound(groups, self.buffers[kid]))
        return self.result

    def _taken(self, kernel: Kernel) -> Step | None:
        """``kernel``'s step: a kept one whose buffers and numbers are this plan's, else one built now; what building it
        told the planner (views, binders, numpy's warnings) counted for the plan."""
        built = self._unchanged(kernel)
        keyed = built is not None
        if built is None:
            key = self._key(kernel) if self.reuse else None
            keyed = key is not None
            built = None if key is None else self.runtime.kept(key)
            if built is None:
                built = self._build_step(kernel)
                if key is not None:
                    self.built[key] = built
        if keyed:
            self.steps[kernel.id] = built
            self.shared_groups.update(built.reads)
            self.shared_groups.update(built.writes)
        viewed = self.viewed
        for kid, count in built.uses.items():  # Counter.update's checks cost more than these few additions
            viewed[kid] += count
        for kid, group in built.reads.items():
            self.read_groups[kid].append(group)
        self.write_groups.update(built.writes)
        self.result.warns |= built.warns
        return built.step

    def _unchanged(self, kernel: Kernel) -> _Built | None:
        """The step the bucket's last plan took for ``kernel`` (``_Record``) where the symbols and buffers it depends
        on are as they were then (so that its ``_key`` is the same); else None."""
        if self.record is None or kernel.op in _EVERY_PLAN:
            return None
        symbols, buffers = self.runtime.step_inputs(kernel, self.kernels)
        if self.changed.isdisjoint(symbols) and self.moved.isdisjoint(buffers):
            return self.record.steps.get(kernel.id)
        return None

    def _build_step(self, kernel: Kernel) -> _Built:
        self.uses, self.reads, self.writers, self.warns = Counter(), defaultdict(list), {}, False
        step = self._step(kernel)
        address = {kid: self.buffers[kid].__array_interface__["data"][0] for kid in {*self.reads, *self.writers}}
        return _Built(step, self.uses, {kid: _Binders(binders, address[kid]) for kid, binders in self.reads.items()},
                      {kid: _Binders([bind], address[kid]) for kid, bind in self.writers.items()}, self.warns)

    def _key(self, kernel: Kernel) -> tuple | None:
        """What a kept step of ``kernel`` must have been built for to serve this plan: the values of the symbols its
        shapes and views name, and its buffers' memory. None for the steps every plan builds (an input's slot, an
        output's fresh array, a constant's or iota's values)."""
        if kernel.op in _EVERY_PLAN:
            return None
        symbols, buffers = self.runtime.step_inputs(kernel, self.kernels)
        return (kernel.id, tuple(self.bindings[name] for name in symbols),
                tuple(self.tokens[kid] for kid in buffers))

    def _rebindable(self, kid: int, others: int = 0) -> bool:
        """Whether ``kid``'s buffer holds ``REBIND_BYTES`` or more, is read, and every view of it but ``others`` reads
        it through a binder."""
        return (self.buffers[kid].nbytes >= REBIND_BYTES and self.viewed[kid] > 0
                and sum(len(group.binders) for group in self.read_groups[kid]) == self.viewed[kid] - others)

    def _direct(self, position: int, kernel: Kernel, view: _View) -> bool:
        """Output ``kernel``, whose step is at ``position``, written straight into a fresh array of each call when
        the kernel computing it writes through a binder, the output reads its buffer as it is, and every other
        read of that buffer goes through a binder too: whether it is."""
        source = kernel.sources[0][0]
        buffer = self.buffers[source]
        array = view.array
        if (source not in self.write_groups or view.buffer != source or view.read.offset or array.size != buffer.size
                or not array.flags.c_contiguous or not self._rebindable(source, others=1)):
            return False
        output = _Rebound([self.write_groups[source], *self.read_groups[source]], buffer)
        self.result.direct.append(output)
        self.result.steps[position] = (kernel.id, _Direct(self.result.results, kernel.id, output, array.shape))
        return True

    # ---- views ----------------------------------------------------------------------
    def view(self, source: int, tracker: ShapeTracker, padded: bool = False) -> _View:
        """How to read ``source``'s buffer through ``tracker`` (``lower``): a strided read in place, a padded one too
        where the reader takes one (``padded``) and else materialised, a nested or gathered one through its scratch."""
        flat = self.buffers[source].reshape(-1)
        read = self.runtime.lowered(tracker, self.bindings, flat.size, source)
        if isinstance(read, Nested):
            inside = _View(flat, read.nest).array
            scratch = np.zeros(read.compact, flat.dtype)
            target = scratch.reshape(inside.shape)
            view = _View(scratch.reshape(-1), read.scratch, [_Copy(target, inside)])
        elif isinstance(read, Gathered):
            view = self._gathered(source, flat, read)
        elif 0 in read.shape:
            return _View(flat, read)
        elif read.blank:  # nothing but padding: no element of the source is read
            blank = Strided(0, read.shape, (0,) * len(read.shape))
            return _View(np.zeros(1, flat.dtype), blank) if padded else _materialised(_View(flat, read))
        else:
            view = _View(flat, read) if read.box is None or padded else _materialised(_View(flat, read))
        self.uses[source] += 1
        if view.flat is flat:
            view.buffer = source
        return view

    def _gathered(self, source: int, flat: np.ndarray, read: Gathered) -> _View:
        """A gathered read: its scratch, filled by a gather kernel on each call."""
        scratch = np.zeros(read.compact, flat.dtype).reshape(-1)
        args = [kernel_array(scratch), kernel_array(flat), read.index]
        if read.valid is not None:
            args += [read.valid, kernel_array(np.zeros(1, flat.dtype))]
        launch = self._launch(codegen.gather_source(read.valid is not None, scratch.size >= PARALLEL_THRESHOLD), args)
        self.reads[source].append(launch.binder(1))
        return _View(scratch, read.scratch, [launch])

    def _launch(self, source: str, args: list[np.ndarray]) -> _Launch:
        return _Launch(self.cache.compile(source, args), list(args))

    def _loop(self, kernel: Kernel, source: str, loop: Loop, views: Sequence[_View]) -> Step:
        """``source`` launched over ``loop``, writing ``kernel``'s buffer and reading ``views``: the plan may bind an
        input's array in place of its buffer, and a fresh output array in place of ``kernel``'s buffer, between
        calls."""
        args = loop.arguments(self.buffers[kernel.id], [view.flat for view in views])
        launch = self._launch(source, args)
        self.writers[kernel.id] = launch.binder(0, args[0].shape)
        for position, view in enumerate(views, 1):
            if view.buffer is not None:
                self.reads[view.buffer].append(launch.binder(position))
        return self._sequence(views, [launch])

    def _views(self, kernel: Kernel, padded: bool = False) -> list[_View]:
        return [self.view(src, tracker, padded) for src, tracker in kernel.sources]

    @staticmethod
    def _sequence(views: Sequence[_View], steps: list[Step]) -> Step:
        """One step running the views' refreshes, then ``steps``."""
        steps = [step for view in views for step in view.refresh] + steps
        return steps[0] if len(steps) == 1 else _Sequence(steps)

    # ---- steps ----------------------------------------------------------------------
    def _step(self, kernel: Kernel) -> Step | None:
        op = kernel.op
        if op == "Input":
            buffer = self.buffers[kernel.id]
            slot = Slot(kernel.arg, buffer, kernel.dtype, buffer.shape)
            (self.result.weights if kernel.arg in self.weight_names else self.result.inputs).append(slot)
            return None
        if op in ("Constant", "Iota"):  # written once (``CPURuntime.fixed``)
            return None
        if op == "Output":
            return self._output(kernel)
        if op == "GatherMatmul":
            return self._gather_matmul(kernel)
        if op == "Opaque":
            return self._opaque(kernel)
        if op in CONTRACT_KERNELS:  # the GPU tilings of a contraction run here as the library call
            return self._matmul(kernel)
        if op in UNARY_KERNELS or op in BINARY_KERNELS or op in TERNARY_KERNELS or op == "Cast":
            return self._elementwise(kernel)
        if op in REDUCE_KERNELS:
            return self._reduce(kernel)
        if op == "FusionEnd":
            return self._region(kernel)
        if op == "Gather":
            return self._gather(kernel)
        if op in ("Scatter", "ScatterAdd"):
            return self._scatter(kernel)
        raise UnsupportedOpError(op, where=f"LLIR kernel k{kernel.id} (HLIR {kernel.hlir})",
                                 detail="the CPU runtime has no implementation of it")

    def _output(self, kernel: Kernel) -> Step:
        """A fresh array per call, which the caller owns: copied from the buffer of the kernel computing it, unless
        the plan, once every kernel is planned, finds that kernel can write it straight (``_direct``)."""
        (view,) = self._views(kernel)
        self.outputs.append((len(self.result.steps), kernel, view))
        return self._sequence([view], [_Output(self.result.results, kernel.id, view.array)])

    def _elementwise(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        dtype = kernel.dtype if kernel.op in TERNARY_KERNELS else self.kernels[kernel.sources[0][0]].dtype
        host = kernel.op == "Cast" and dtype != kernel.dtype and (dtype in _HALF or kernel.dtype in _HALF)
        views = self._views(kernel, padded=not host)
        if host:
            array = views[0].array  # numpy's (and ml_dtypes') conversion, through cast_path, defines these casts
            target = kernel.dtype
            return self._sequence(views, [lambda: convert(array, dtype, target, out)])
        if out.size == 0:
            return self._sequence(views, [])
        loop = Loop.over(out.shape, [view.read for view in views])
        parallel = codegen.loop_work(out.size, [kernel.op]) >= PARALLEL_THRESHOLD
        source = codegen.elementwise_source(kernel.op, dtype, kernel.dtype, loop.operands, loop.rank, parallel)
        return self._loop(kernel, source, loop, views)

    def _region(self, end: Kernel) -> Step:
        """A fused region as one loop nest: its starts' views, read in the end's shape (its ops may reshape), in."""
        body = self.bodies[end.id]
        if body.rows is not None:
            return self._row_region(end, body)
        out = self.buffers[end.id]
        views = [_in_shape(self.view(source, tracker, padded=True), out.shape) for source, tracker, _ in body.inputs]
        if out.size == 0:
            return self._sequence(views, [])
        loop = Loop.over(out.shape, [view.read for view in views])
        parallel = codegen.region_work(body, out.size) >= PARALLEL_THRESHOLD
        source = codegen.region_source(body, loop.operands, loop.rank, parallel)
        return self._loop(end, source, loop, views)

    def _row_region(self, end: Kernel, body: RegionBody) -> Step:
        """A row region as one loop nest, each input read over the rows and then along the row (a per-row input with
        stride 0 there)."""
        out = self.buffers[end.id]
        rows = tuple(self.size(d) for d in body.rows)
        views = []
        for j, (source, tracker, _) in enumerate(body.inputs):
            extent = body.extent(f"x{j}")
            view = _in_shape(self.view(source, tracker), (*rows, 1 if extent is None else self.size(extent)))
            per_row = replace(view.read, strides=(*view.read.strides[:-1], 0))  # broadcast along the row
            views.append(view if extent is not None else replace(view, read=per_row))
        along = 1 if body.extent(body.result) is None else self.size(body.extent(body.result))
        if out.size == 0:
            return self._sequence(views, [])
        loop = Loop.over((*rows, along), [view.read for view in views], [self.size(e) for e in body.lengths])
        elements = max(int(np.prod(rows)) * along, max((view.read.size for view in views), default=0))
        parallel = codegen.region_work(body, elements) >= PARALLEL_THRESHOLD
        source = codegen.row_region_source(body, loop.operands, loop.rank, parallel)
        return self._loop(end, source, loop, views)

    def _reduce(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        (view,) = self._views(kernel)
        if kernel.op == "MaxReduce" and view.read.shape[-1] == 0:
            raise LuminalError(f"MaxReduce k{kernel.id} reduces an empty axis")
        if out.size == 0:
            return self._sequence([view], [])
        loop = Loop.reducing(out.shape, [view.read])
        parallel = view.read.size >= PARALLEL_THRESHOLD
        source = codegen.reduce_source(kernel.op, kernel.dtype, loop.operands, loop.rank, parallel)
        return self._loop(kernel, source, loop, [view])

    # ---- matmul ---------------------------------------------------------------------
    def _matmul(self, kernel: Kernel) -> Step:
        """A contraction: one BLAS matmul into the kernel's buffer when its views have rows or columns (through scratch
        copies only where BLAS needs them), else one loop nest of dot products: for a product of neither, one under
        ``DOT_PRODUCTS`` multiply-adds, and a matrix times a vector where the matrix is read along its rows."""
        out = self.buffers[kernel.id]
        a, b = self._views(kernel)
        contraction = Contraction.of(a.array, b.array, len(a.read.shape) - 1)
        if out.size == 0 or contraction is None or not (contraction.rows or contraction.cols) \
                or _dots_first(contraction, a.read, b.read):
            return self._dot_products(kernel, out, a, b)
        compute = kernel.dtype.compute_numpy
        count, m, k, n = contraction.matmul_shape
        steps: list[Step] = []
        operands = []  # each: the operand, and the view whose buffer it reads in place (None: a scratch)
        for compact, shape, view in zip(contraction.compact_operands(a.array, b.array),
                                        ((count, m, k), (count, k, n)), (a, b)):
            operand = _reshaped(compact, shape) if compact.dtype == compute else None
            if operand is None or not _blas_ready(operand):
                scratch = np.empty(compact.shape, compute)
                self.warns |= bool(compact.dtype != compute)  # a cast
                steps.append(_Copy(scratch, compact, "unsafe"))
                operand, view = scratch.reshape(shape), None
            operands.append((operand, view))
        (lhs, left_view), (rhs, right_view) = operands
        straight = self._straight(contraction, out, lhs, rhs)
        if straight is not None:  # out's transpose is rhs' @ lhs': the views swap places too
            left, right, target = straight
            matmul = _Matmul(left, right, target)
            if left is not lhs:
                left_view, right_view = right_view, left_view
            writer = matmul.binder(0, out.reshape(-1))
            if writer is not None:
                self.writers[kernel.id] = writer
        else:
            product = np.empty((count, m, n), compute)
            matmul = _Matmul(lhs, rhs, product)
            arranged = contraction.arrange(product)
            self.warns |= bool(out.dtype != compute)  # a cast
        self.warns |= matmul.torch is None  # numpy's matmul
        for position, view in ((1, left_view), (2, right_view)):
            if view is not None and view.buffer is not None:
                binder = matmul.binder(position, view.flat)
                if binder is not None:
                    self.reads[view.buffer].append(binder)
        if straight is not None:
            return self._sequence([a, b], [*steps, matmul])
        steps += [matmul, _Copy(out, arranged, "unsafe")]
        return self._sequence([a, b], steps)

    def _opaque(self, kernel: Kernel) -> Step:
        """A torch op run as it is (``hlir.opaque``) on numpy views of its operands, into the kernel's buffer."""
        out, views, call = self.buffers[kernel.id], self._views(kernel), kernel.arg
        arrays = [view.array for view in views]
        return self._sequence(views, [lambda: np.copyto(out, on_arrays(call, arrays, out.shape, kernel.dtype))])

    def _gather_matmul(self, kernel: Kernel) -> Step:
        """A gathered contraction: one BLAS product per expert its rows pick (``gathered``), in numpy."""
        views = self._views(kernel)
        self.warns = True
        return self._sequence(views, [gathered.plan(kernel, self.buffers[kernel.id], *(v.array for v in views),
                                                    self.bindings)])

    @staticmethod
    def _straight(contraction: Contraction, out: np.ndarray, lhs: np.ndarray,
                  rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(left, right, target)`` such that ``target = left @ right`` writes straight into ``out``: as
        ``lhs @ rhs`` or as its transpose; None when neither fits ``out``'s layout and dtype."""
        count, m, _, n = contraction.matmul_shape
        if contraction.neither or out.dtype != lhs.dtype:
            return None
        for left, right, axes, shape in ((lhs, rhs, contraction.rows + contraction.cols, (count, m, n)),
                                         (rhs.transpose(0, 2, 1), lhs.transpose(0, 2, 1),
                                          contraction.cols + contraction.rows, (count, n, m))):
            order = [contraction.others.index(i) for i in contraction.batch + axes]
            target = _reshaped(out.transpose(order), shape)
            if target is not None and target.flags.c_contiguous:
                return left, right, target
        return None

    def _dot_products(self, kernel: Kernel, out: np.ndarray, a: _View, b: _View) -> Step:
        """Each output element as one dot product of its two rows of the contracted axis; a row times a matrix read
        with a stride along that axis (``_scales_rows``, f32 or f64) as each output row summed from the matrix's rows,
        scaled."""
        if out.size == 0:
            return self._sequence([a, b], [])
        parallel = a.read.size >= PARALLEL_THRESHOLD
        loop, views = Loop.reducing(out.shape, [a.read, b.read]), [a, b]
        if kernel.dtype in (DType.F32, DType.F64):
            swapped = replace(loop, reads=loop.reads[::-1])  # the same axes: they merge alike for either order
            if not _scales_rows(loop) and _scales_rows(swapped):
                loop, views = swapped, [b, a]
            if _scales_rows(loop):
                return self._loop(kernel, codegen.accumulate_source(loop.rank, parallel and loop.rank > 1), loop, views)
        source = codegen.reduce_source("SumReduce", kernel.dtype, loop.operands, loop.rank, parallel)
        return self._loop(kernel, source, loop, views)

    # ---- host ops -------------------------------------------------------------------
    def _gather(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        index, data = self._views(kernel)
        flat, copy = _flat(data.array)
        loop = Loop.over(out.shape, [index.read])
        args = [*loop.arguments(out, [index.flat]), kernel_array(flat)]
        source = codegen.take_source(loop.operands[0], loop.rank, out.size >= PARALLEL_THRESHOLD)
        gather = _Gather(self._launch(source, args), index.array, flat.size, kernel)
        return self._sequence([index, data], [*copy, gather])

    def _scatter(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        views = self._views(kernel)
        dest, indexes, values = (v.array for v in views)
        flat_out = out.reshape(-1)
        add = kernel.op == "ScatterAdd"
        if kernel.dtype in _HALF or kernel.dtype == DType.BOOL:  # numpy's (and ml_dtypes') arithmetic defines these
            self.warns |= add

            def scatter() -> None:
                np.copyto(out, dest)
                _check_indexes(indexes, flat_out.size, kernel)
                if add:
                    np.add.at(flat_out, indexes.reshape(-1), values.reshape(-1))
                else:
                    flat_out[indexes.reshape(-1)] = values.reshape(-1)
            return self._sequence(views, [scatter])
        function = self.cache.compile(codegen.scatter_source(add), [flat_out, indexes.reshape(-1), values.reshape(-1)])

        def scatter_kernel() -> None:
            np.copyto(out, dest)
            if function(flat_out, indexes.reshape(-1), values.reshape(-1)):  # views, or copies of strided reads
                _check_indexes(indexes, flat_out.size, kernel)  # raises, naming the first bad index
        return self._sequence(views, [scatter_kernel])


def _in_shape(view: _View, shape: tuple[int, ...]) -> _View:
    """``view`` read in row-major order as ``shape`` (of as many elements): over the same buffer where its strides
    allow, else through a scratch copied into on each call (a padded view is materialised first)."""
    if view.read.shape == shape:
        return view
    if view.read.box is not None:
        view = _materialised(view)
    reshaped = _reshaped(view.array, shape)
    if reshaped is not None:  # the first element stays where it was, so the offset does too
        strides = tuple(s // view.flat.itemsize for s in reshaped.strides)
        return _View(view.flat, Strided(view.read.offset, shape, strides), view.refresh, view.buffer)
    array = view.array
    scratch = np.empty(shape, view.flat.dtype)
    target = scratch.reshape(view.read.shape)
    return _View(scratch.reshape(-1), Strided(0, shape, contiguous_strides(shape)),
                 [*view.refresh, _Copy(target, array)])


def _materialised(view: _View) -> _View:
    """A padded view as a zeroed scratch whose box is copied in on each call."""
    read = view.read
    scratch = np.zeros(read.shape, view.flat.dtype)
    result = _View(scratch.reshape(-1), Strided(0, read.shape, contiguous_strides(read.shape)))
    if not read.blank:
        inside = _View(view.flat, read.inside).array
        target = scratch[tuple(slice(lo, hi) for lo, hi in read.box)]
        result.refresh.append(_Copy(target, inside))
    return result


def _flat(array: np.ndarray) -> tuple[np.ndarray, list[Step]]:
    """``array`` flattened: a view when its layout allows, else a scratch copied into on each call."""
    flat = _reshaped(array, (array.size,))
    if flat is not None:
        return flat, []
    scratch = np.empty(array.size, array.dtype)
    target = scratch.reshape(array.shape)
    return scratch, [_Copy(target, array)]


def _reshaped(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``array`` reshaped without a copy, or None when that needs one."""
    try:
        return array.reshape(shape, copy=False)
    except ValueError:
        return None


def _scales_rows(loop: Loop) -> bool:
    """Whether a contraction's loop is a row times a matrix read with a stride along the contracted axis (the last):
    ``x0`` the same all along ``out``'s last axis, ``x1`` contiguous along it (at least ``ROW_SCALED`` elements),
    neither padded (``codegen.accumulate_source``)."""
    scale, matrix = loop.reads
    return (scale.box is None and matrix.box is None and loop.dims[-2] >= ROW_SCALED and scale.strides[-2] == 0
            and matrix.strides[-2] == 1 and matrix.strides[-1] != 1)


def _dots_first(contraction: Contraction, a: Strided, b: Strided) -> bool:
    """Whether dot products beat a library matmul: under ``DOT_PRODUCTS`` multiply-adds, or a matrix times a vector
    (one row or one column) with the matrix read along its rows (unit stride on the contracted axis, the last)."""
    count, m, k, n = contraction.matmul_shape
    return count * m * k * n < DOT_PRODUCTS or (m == 1 and b.strides[-1] == 1) or (n == 1 and a.strides[-1] == 1)


def _blas_ready(x: np.ndarray) -> bool:
    """Whether BLAS takes this ``[batch, r, c]`` operand as it is: rows or columns of unit stride."""
    item = x.itemsize
    _, r, c = x.shape
    s1, s2 = x.strides[1:]
    rows = (s2 == item or c == 1) and s1 % item == 0 and s1 >= c * item
    columns = (s1 == item or r == 1) and s2 % item == 0 and s2 >= r * item
    return rows or columns


def _torch():
    """torch, when installed: float products go through its BLAS (MKL), at transformer-block sizes 1.5-2x faster
    than numpy's OpenBLAS."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _check_indexes(index: np.ndarray, size: int, kernel: Kernel) -> None:
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index[(index < 0) | (index >= size)].reshape(-1)[0]
        raise IndexError(f"{kernel.op} k{kernel.id} (HLIR {', '.join(f'h{h}' for h in kernel.hlir)}): "
                         f"index {bad} is out of range for {size} elements")
