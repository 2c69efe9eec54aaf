"""The CUDA runtime: runs an LLIR's generated CUDA C (``luminal_lab.codegen.cuda``) on a GPU through numba-cuda.

``CUDARuntime`` is a ``base.Runtime`` like ``CPURuntime``: ``run(inputs, weights, bindings)`` returns the outputs in
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codegen.cuda import llir_sources
from ..codegen.cuda_c import CudaKernel
from ..codegen.ptx import compile_ptx
from ..core.dtypes import DType
from ..core.errors import LuminalError, NoDeviceError
from ..core.ops import IN_REGION
from ..llir.llir import LLIR
from .base import Plan, Runtime, Slot

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
class CUDAPlan(Plan):
    """A CUDA plan: besides the slots and steps, its schedule, its stream, the device buffers by kernel id and the
    ``dyn`` arrays its steps point to."""

    schedule: Schedule | None = None
    stream: Any = None  # numba-cuda Stream
    buffers: dict[int, Any] = field(default_factory=dict)  # kernel id -> flat numba device array
    keep: list[Any] = field(default_factory=list)


class CUDARuntime(Runtime[CUDAPlan]):
    """Runs an LLIR's generated CUDA on the current GPU: ``run(inputs, weights, bindings)`` returns the
    outputs in ``llir.outputs`` order; ``profile`` times each kernel with CUDA events."""

    device = "GPU"

    def __init__(self, llir: LLIR, memory_budget: int | None = None):
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise NoDeviceError(f"CUDARuntime runs generated CUDA C on a GPU through numba-cuda, and cannot here: "
                                f"{reason} (the CPU runtime is CPURuntime, device='cpu')")
        super().__init__(llir, memory_budget)
        self.kernels = llir_sources(llir)
        major, minor = _cuda().get_current_device().compute_capability
        self.arch = f"sm_{major}{minor}"

    def _free_memory(self) -> int:
        free, _ = _cuda().current_context().get_memory_info()
        return int(free)

    def _out_of_memory(self, error: Exception) -> bool:
        return isinstance(error, MemoryError) or "OUT_OF_MEMORY" in str(error)

    def _build(self, bindings: dict[str, int]) -> CUDAPlan:
        from cuda.core import LaunchConfig, Stream, launch

        layout = schedule(self.llir, bindings, self.kernels)
        cuda = _cuda()
        stream = cuda.stream()
        core_stream = Stream.from_handle(int(stream.handle))  # the same stream, as cuda.core.launch takes it
        buffers = {kid: cuda.device_array(math.prod(shape), dtype, stream=stream)
                   for kid, (shape, dtype) in layout.buffers.items()}
        by_id = {k.id: k for k in self.llir.kernels}
        plan = CUDAPlan(schedule=layout, stream=stream, buffers=buffers)
        for kid, name in layout.inputs:
            slot = Slot(name, buffers[kid], by_id[kid].dtype, layout.buffers[kid][0])
            (plan.weights if name in self._weights else plan.inputs).append(slot)
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
                 bindings: Mapping[str, int] | None) -> CUDAPlan:
        _cuda().current_context()  # makes the context current in this thread (cuda.core launches need it)
        return super()._prepare(inputs, weights, bindings)

    def _copy_in(self, plan: CUDAPlan, slot: Slot, value: np.ndarray) -> None:
        flat = np.ascontiguousarray(value).reshape(-1).view(slot.buffer.dtype)  # f16/bf16 as bits, bool as bytes
        slot.buffer.copy_to_device(flat, stream=plan.stream)

    def _time_steps(self, plan: CUDAPlan) -> list[tuple[int, float]]:
        """Each step between two CUDA events recorded around it on the plan's stream."""
        cuda = _cuda()
        events = [(cuda.event(), cuda.event()) for _ in plan.steps]
        for (_, step), (begin, end) in zip(plan.steps, events):
            begin.record(plan.stream)
            step()
            end.record(plan.stream)
        plan.stream.synchronize()
        return [(kid, cuda.event_elapsed_time(begin, end) / 1e3) for (kid, _), (begin, end) in zip(plan.steps, events)]

    def _collect(self, plan: CUDAPlan) -> list[np.ndarray]:
        copies = []
        for kid, shape, dtype in plan.schedule.outputs:
            buffer = plan.buffers[kid]
            host = np.empty(buffer.shape, buffer.dtype)
            buffer.copy_to_host(host, stream=plan.stream)
            copies.append((host, shape, dtype))
        plan.stream.synchronize()
        return [host.view(dtype.numpy).reshape(shape) for host, shape, dtype in copies]
