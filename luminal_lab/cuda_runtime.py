"""The CUDA runtime: runs an LLIR's generated CUDA C (``cuda_codegen``) on a GPU through numba-cuda.

``CUDARuntime`` mirrors ``CPURuntime``: ``run(inputs, weights, bindings)`` returns the outputs in
``llir.outputs`` order and ``profile`` returns a ``Profile``. Each kernel's source is compiled to PTX
for the device's compute capability (``compile_ptx``), loaded through the numba-cuda context
(``Context.create_module_ptx``, then ``get_function``) and launched with ``cuda.core.launch``, which
is what numba-cuda launches its own kernels with; every argument is a device pointer (a Python int).

For each binding of the symbolic dimensions a plan is built once (``schedule`` is its host-side
part, testable without a GPU): a flat device array per buffer, f16/bf16 stored as their uint16
bits and bool as uint8; the ``dyn`` array of each kernel; Constant and Iota kernels run once.
Every Input, Constant, Iota and every kernel a ``CudaKernel`` writes has a buffer; kernels inside a
fused region have none, and an Output with no kernel (a contiguous read) is its source's buffer.
A run copies the inputs in (weights only when first seen or replaced), launches the kernels in
order on one stream, copies the outputs back and synchronises.

numba-cuda is optional (``pip install 'luminal_lab[gpu]'``): this module imports without it and
without a GPU; constructing a ``CUDARuntime`` then raises ``NoDeviceError`` saying why.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cpu_runtime import Profile
from .cuda_codegen import CudaKernel, compile_ptx, llir_sources
from .dtypes import DType
from .errors import DTypeBoundaryError, LuminalError, NoDeviceError, ShapeError
from .llir import IN_REGION, LLIR

SETUP_OPS = ("Constant", "Iota")  # their buffers depend on the bindings only: filled once per plan
_BITS = {DType.F16: np.dtype(np.uint16), DType.BF16: np.dtype(np.uint16), DType.BOOL: np.dtype(np.uint8)}
_INSTALL = "install it with pip install 'luminal_lab[gpu]'"


# ---- availability ---------------------------------------------------------------------


def cuda_unavailable_reason() -> str | None:
    """Why generated CUDA cannot run in this process, or None when it can. Never raises.

    Needs numba-cuda (not numba's built-in ``numba.cuda``, nor its simulator), a CUDA driver and a
    device. Unlike ``numba.cuda.is_available()`` it does not ask for NVVM: the kernels here are
    compiled by NVRTC, not by numba.
    """
    try:
        cuda = importlib.import_module("numba.cuda")
    except Exception as error:  # numba-cuda or its CUDA bindings missing or broken
        return f"numba-cuda is not importable ({_one_line(error)}); {_INSTALL}"
    if getattr(cuda, "implementation", None) != "NVIDIA":
        return f"numba.cuda is numba's built-in CUDA target, not numba-cuda; {_INSTALL}"
    try:
        from numba.cuda.core import config

        if config.ENABLE_CUDASIM:
            return "the numba CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1); it cannot run CUDA C"
        from numba.cuda.cudadrv.driver import driver

        if not driver.is_available:
            return f"the CUDA driver did not initialise: {_one_line(driver.initialization_error)}"
        if driver.get_device_count() == 0:
            return "the CUDA driver reports no device"
    except Exception as error:  # the driver failed to initialise, or a numba-cuda without these modules
        return f"the CUDA driver did not initialise: {_one_line(error)}"
    return None


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def cuda_available() -> bool:
    """Whether ``CUDARuntime`` can run here (numba-cuda, a CUDA driver and a device). Never raises."""
    return cuda_unavailable_reason() is None


# ---- the host-side schedule -----------------------------------------------------------


def device_dtype(dtype: DType) -> np.dtype:
    """How a buffer of ``dtype`` is stored on the device: f16/bf16 as their uint16 bits, bool as uint8."""
    return _BITS.get(dtype, dtype.numpy)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a plan: ``kernel`` with its grid, block and ``dyn`` values."""

    kernel: CudaKernel
    grid: int
    block: int
    dyn: tuple[int, ...]


@dataclass
class Schedule:
    """What one binding of the symbolic dimensions runs, without the device.

    ``buffers`` maps a kernel id to the shape and device dtype of its buffer; ``setup`` are the Constant
    and Iota launches (once per plan); ``launches`` run on every call, in order (kernels with nothing to
    do, grid 0, are left out); ``inputs`` are ``(Input kernel id, name)``; ``outputs`` are, in
    ``llir.outputs`` order, ``(buffer id, shape, dtype)`` of each result.
    """

    buffers: dict[int, tuple[tuple[int, ...], np.dtype]]
    setup: list[Launch]
    launches: list[Launch]
    inputs: list[tuple[int, str]]
    outputs: list[tuple[int, tuple[int, ...], DType]]


def schedule(llir: LLIR, bindings: Mapping[str, int], kernels: Sequence[CudaKernel]) -> Schedule:
    """Buffers and launches of ``kernels`` (``llir_sources(llir)``) for ``bindings``."""
    bindings = dict(bindings)
    by_id = {k.id: k for k in llir.kernels}

    def shape(kid: int) -> tuple[int, ...]:
        return tuple(int(d.evaluate(bindings)) for d in by_id[kid].shape)

    def buffer(kid: int) -> tuple[tuple[int, ...], np.dtype]:
        return shape(kid), device_dtype(by_id[kid].dtype)

    inputs = [(k.id, k.arg) for k in llir.kernels if k.op == "Input"]
    buffers = {kid: buffer(kid) for kid, _ in inputs}
    setup, launches = [], []
    for kernel in kernels:
        target = by_id[kernel.writes]
        if target.op in IN_REGION:
            raise LuminalError(f"{kernel.name} writes k{kernel.writes}, a {target.op} inside a fused region, "
                               "which has no buffer (a region's kernel writes its FusionEnd)")
        missing = [r for r in kernel.reads if r not in buffers]
        if missing:
            raise LuminalError(f"{kernel.name} (k{kernel.writes}) reads k{missing[0]} ({by_id[missing[0]].op}), "
                               "which no earlier kernel writes")
        buffers[kernel.writes] = buffer(kernel.writes)
        grid, block = kernel.launch(bindings)
        if grid > 0:
            launch = Launch(kernel, grid, block, tuple(kernel.dyn_values(bindings)))
            (setup if target.op in SETUP_OPS else launches).append(launch)
    outputs = []
    for kid in llir.outputs:
        source = kid if kid in buffers else by_id[kid].sources[0][0]  # no kernel: the source's buffer, as it is
        if source not in buffers or by_id[source].dtype != by_id[kid].dtype:
            raise LuminalError(f"output k{kid} has no kernel and cannot be k{source} ({by_id[source].op}) as it is")
        outputs.append((source, shape(kid), by_id[kid].dtype))
    return Schedule(buffers, setup, launches, inputs, outputs)


# ---- the device -----------------------------------------------------------------------

_FUNCTIONS: dict[tuple[int, str, str], Any] = {}  # (context handle, arch, source) -> numba-cuda Function


def _cuda() -> Any:
    return importlib.import_module("numba.cuda")


def _function(kernel: CudaKernel, arch: str) -> Any:
    """``kernel`` compiled to PTX for ``arch`` and loaded into the current context (once per process)."""
    context = _cuda().current_context()
    key = (int(context.handle), arch, kernel.source)
    if key not in _FUNCTIONS:
        ptx = compile_ptx(kernel.source, arch)
        try:
            _FUNCTIONS[key] = context.create_module_ptx(ptx).get_function(kernel.name)
        except Exception as error:  # the driver's JIT rejected the PTX: name what it was given
            from numba.cuda.cudadrv.driver import driver

            version = re.search(r"^\s*\.version\s+(\S+)", ptx, re.MULTILINE)
            raise LuminalError(
                f"the CUDA driver (CUDA {'.'.join(map(str, driver.get_version()))}) could not load {kernel.name} "
                f"compiled for {arch} (PTX ISA {version.group(1) if version else '?'}): {error} (a driver JIT-compiles "
                "PTX only up to the ISA of its own CUDA version)") from error
    return _FUNCTIONS[key]


def _pointer(array: Any) -> int:
    """A device array's address, as the int ``cuda.core.launch`` passes as a pointer argument."""
    return int(array.__cuda_array_interface__["data"][0])


@dataclass
class _Weight:
    name: str
    buffer: Any  # device array
    dtype: DType
    shape: tuple[int, ...]
    bound: Any = None  # the caller's array last copied in


@dataclass
class Plan:
    """One binding's device state: the stream, buffers by kernel id, the (kernel id, launch step) pairs
    in order, the inputs and weights to copy in, and what each output is copied back from."""

    schedule: Schedule
    stream: Any  # numba-cuda Stream
    buffers: dict[int, Any]  # kernel id -> flat numba device array
    inputs: list[tuple[str, Any, DType, tuple[int, ...]]]
    weights: list[_Weight]
    steps: list[tuple[int, Callable[[], None]]]
    keep: list[Any] = field(default_factory=list)  # the dyn arrays the steps point to


class CUDARuntime:
    """Runs an LLIR's generated CUDA on the current GPU: ``run(inputs, weights, bindings)`` returns the
    outputs in ``llir.outputs`` order; ``profile`` times each kernel with CUDA events."""

    def __init__(self, llir: LLIR):
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise NoDeviceError(f"CUDARuntime runs generated CUDA C on a GPU through numba-cuda, and cannot here: "
                                f"{reason} (the CPU runtime is CPURuntime, device='cpu')")
        self.llir = llir
        self.kernels = llir_sources(llir)
        major, minor = _cuda().get_current_device().compute_capability
        self.arch = f"sm_{major}{minor}"
        self._plans: dict[tuple, Plan] = {}
        self._weights: dict[str, np.ndarray] = {}

    @property
    def plans(self) -> dict[tuple, Plan]:
        """The plans built so far, by sorted ``(dimension, size)`` pairs."""
        return self._plans

    def plan(self, bindings: Mapping[str, int] | None = None) -> Plan:
        """The plan for one binding of the symbolic dimensions (built, and its kernels loaded, on first use)."""
        bindings = dict(bindings or {})
        key = tuple(sorted(bindings.items()))
        if key not in self._plans:
            self._plans[key] = self._build(schedule(self.llir, bindings, self.kernels))
        return self._plans[key]

    def _build(self, layout: Schedule) -> Plan:
        from cuda.core import LaunchConfig, Stream, launch

        cuda = _cuda()
        stream = cuda.stream()
        core_stream = Stream.from_handle(int(stream.handle))  # the same stream, as cuda.core.launch takes it
        buffers = {kid: cuda.device_array(math.prod(shape), dtype, stream=stream)
                   for kid, (shape, dtype) in layout.buffers.items()}
        by_id = {k.id: k for k in self.llir.kernels}
        plan = Plan(layout, stream, buffers, [], [], [])
        for kid, name in layout.inputs:
            entry = (buffers[kid], by_id[kid].dtype, layout.buffers[kid][0])
            if name in self._weights:
                plan.weights.append(_Weight(name, *entry))
            else:
                plan.inputs.append((name, *entry))
        no_dyn = cuda.device_array(1, np.int64, stream=stream)  # kernels without symbolic dims never read it
        plan.keep.append(no_dyn)
        steps = []
        for item in layout.setup + layout.launches:
            kernel = item.kernel
            dyn = no_dyn
            if item.dyn:
                dyn = cuda.to_device(np.array(item.dyn, np.int64), stream=stream)
                plan.keep.append(dyn)
            args = [_pointer(buffers[kernel.writes]), *(_pointer(buffers[r]) for r in kernel.reads), _pointer(dyn)]
            config = LaunchConfig(grid=item.grid, block=item.block)
            steps.append((kernel.writes, functools.partial(launch, core_stream, config,
                                                           _function(kernel, self.arch).kernel, *args)))
        for _, step in steps[:len(layout.setup)]:
            step()
        plan.steps = steps[len(layout.setup):]
        return plan

    def _prepare(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray],
                 bindings: Mapping[str, int] | None) -> Plan:
        """The plan, with this call's inputs (and any new weights) copied in on its stream."""
        _cuda().current_context()  # makes the context current in this thread (cuda.core launches need it)
        self._weights.update(weights)
        plan = self.plan(bindings)
        for name, buffer, dtype, shape in plan.inputs:
            if name not in inputs:
                raise LuminalError(f"missing input {name!r}; the inputs are {[n for n, *_ in plan.inputs]}")
            _fill(buffer, inputs[name], dtype, shape, name, plan.stream)
        for weight in plan.weights:
            value = self._weights.get(weight.name)
            if value is None:
                raise LuminalError(f"missing weight {weight.name!r}")
            if value is not weight.bound:
                _fill(weight.buffer, value, weight.dtype, weight.shape, weight.name, plan.stream)
                weight.bound = value
        return plan

    def run(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
            bindings: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Run once and wait for it; weights are copied in only when first seen (or when a different array is
        passed). Returns fresh host arrays."""
        plan = self._prepare(inputs, weights or {}, bindings)
        for _, step in plan.steps:
            step()
        return self._collect(plan)

    def profile(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
                bindings: Mapping[str, int] | None = None, warmup: int = 2, trials: int = 10) -> Profile:
        """Median seconds per kernel (between CUDA events recorded around it on the stream) and per whole run
        (wall clock of ``run``: copies in, launches, copies out) over ``trials`` runs after ``warmup`` runs;
        fills ``llir.times``."""
        cuda = _cuda()
        for _ in range(warmup):
            self.run(inputs, weights, bindings)
        plan = self.plan(bindings)
        events = [(cuda.event(), cuda.event()) for _ in plan.steps]
        per_kernel: dict[int, list[float]] = defaultdict(list)
        totals = []
        for _ in range(trials):
            start = time.perf_counter()
            self.run(inputs, weights, bindings)
            totals.append(time.perf_counter() - start)
            self._prepare(inputs, weights or {}, bindings)
            for (_, step), (begin, end) in zip(plan.steps, events):
                begin.record(plan.stream)
                step()
                end.record(plan.stream)
            plan.stream.synchronize()
            for (kid, _), (begin, end) in zip(plan.steps, events):
                per_kernel[kid].append(cuda.event_elapsed_time(begin, end) / 1e3)  # ms -> s
        medians = {kid: statistics.median(times) for kid, times in per_kernel.items()}
        self.llir.times = dict(medians)
        ops = {k.id: k.op for k in self.llir.kernels}
        return Profile(medians, statistics.median(totals), trials, {kid: ops[kid] for kid in medians})

    def _collect(self, plan: Plan) -> list[np.ndarray]:
        copies = []
        for kid, shape, dtype in plan.schedule.outputs:
            buffer = plan.buffers[kid]
            host = np.empty(buffer.shape, buffer.dtype)
            buffer.copy_to_host(host, stream=plan.stream)
            copies.append((host, shape, dtype))
        plan.stream.synchronize()
        return [host.view(dtype.numpy).reshape(shape) for host, shape, dtype in copies]


def _fill(buffer: Any, value: np.ndarray, dtype: DType, shape: tuple[int, ...], name: str, stream: Any) -> None:
    """Copy ``value`` (checked against the LLIR's dtype and the plan's shape) into a flat device buffer."""
    value = np.asarray(value)
    if value.dtype != dtype.numpy:
        raise DTypeBoundaryError(f"{name!r} is {value.dtype} but the LLIR declares {dtype.numpy}; "
                                 "nothing is cast implicitly")
    if value.shape != shape:
        raise ShapeError(f"{name!r} has shape {list(value.shape)} but the plan expects {list(shape)}")
    buffer.copy_to_device(np.ascontiguousarray(value).reshape(-1).view(buffer.dtype), stream=stream)
