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
order on one stream, copies the outputs back and synchronises. ``run_device`` does the same on
torch tensors without the host: inputs copied on the device, outputs fresh CUDA tensors, the
plan's stream ordered after torch's current stream and before its next work. A library kernel
(a ``Matmul``: cuBLAS) is ``torch.matmul`` on torch tensors over the plan's buffers (zero-copy,
``torch.as_tensor`` on the device arrays), queued on the plan's stream. ``profile`` times the
kernels back to back and each one with CUDA events; f32 tensor-core kernels (tf32) are refused
unless torch allows tf32.

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
from ..codegen.reads import Nested, Strided, lower
from ..core.dtypes import DType, to_torch
from ..core.errors import DTypeBoundaryError, LuminalError, NoDeviceError, Refused, ShapeError
from ..core.ops import IN_REGION
from ..core.shape_tracker import ShapeTracker
from ..hlir.contraction import Contraction
from ..llir.llir import LLIR, Kernel
from .base import Plan, Runtime, Slot, Step

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


def _on(stream: Any, step: Step) -> Step:
    """``step`` with torch's work queued on ``stream`` (a torch stream over the plan's)."""
    import torch

    def run() -> None:
        with torch.cuda.stream(stream):
            step()
    return run


def _pointer(array: Any) -> int:
    """A device array's address, as the int ``cuda.core.launch`` passes as a pointer argument."""
    return int(array.__cuda_array_interface__["data"][0])


def tf32_allowed() -> bool:
    """Whether the user lets f32 matmuls run as tf32, as torch asks: ``torch.backends.cuda.matmul.allow_tf32`` (or a
    float32 matmul precision other than ``"highest"``)."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"


def _operand(flat: Any, source: int, view: ShapeTracker, bindings: Mapping[str, int]) -> tuple[Any, list[Step]]:
    """``flat`` (a torch tensor, kernel ``source``'s buffer) read through ``view`` (``codegen.reads.lower``) as a
    strided tensor, and the copies that refresh it on each call: none where the read is strided (the tensor shares
    the buffer's memory); else a scratch, filled by a strided copy (a padded read's box, a nested read) or a gather."""
    import torch

    read = lower(view, bindings, flat.numel(), source)
    if isinstance(read, Strided) and read.box is None:
        return flat.as_strided(read.shape, read.strides, read.offset), []
    if isinstance(read, Strided):  # padded: the box copied into a scratch of zeros
        scratch = flat.new_zeros(read.shape)
        if read.blank:
            return scratch, []
        inside = read.inside
        box = scratch[tuple(slice(lo, hi) for lo, hi in read.box)]
        return scratch, [functools.partial(box.copy_, flat.as_strided(inside.shape, inside.strides, inside.offset))]
    scratch = flat.new_zeros(read.compact)
    if isinstance(read, Nested):
        nest = flat.as_strided(read.nest.shape, read.nest.strides, read.nest.offset)
        refresh = functools.partial(scratch.view(nest.shape).copy_, nest)
    else:  # gathered: through its indexes, 0 where the view is padded
        index = torch.from_numpy(read.index.astype(np.int64)).to(flat.device)
        invalid = None if read.valid is None else torch.from_numpy(~read.valid).to(flat.device)

        def refresh() -> None:
            torch.index_select(flat, 0, index, out=scratch.view(-1))
            if invalid is not None:
                scratch.view(-1).masked_fill_(invalid, 0)
    return scratch.as_strided(read.scratch.shape, read.scratch.strides, read.scratch.offset), [refresh]


def _library_matmul(kernel: Kernel, tensors: dict[int, Any], bindings: Mapping[str, int]) -> Step:
    """A contraction through cuBLAS: ``torch.mm`` of the two operands (rows, k) x (k, cols), or ``torch.bmm`` with a
    batch, read in place or through scratches (``_operand``) and written into the kernel's buffer (straight into it
    where its layout allows, else through the product). Integer and bool
    contractions multiply in f64, which cuBLAS has, and come back through i64 (so a narrow int wraps, as on the
    CPU, where a direct conversion on the GPU would saturate)."""
    import torch

    (a_id, a_view), (b_id, b_view) = kernel.sources
    a, refresh_a = _operand(tensors[a_id], a_id, a_view, bindings)
    b, refresh_b = _operand(tensors[b_id], b_id, b_view, bindings)
    refreshes = refresh_a + refresh_b
    out = tensors[kernel.id].view([int(d.evaluate(bindings)) for d in kernel.shape])
    plan = Contraction(tuple(a.shape), a.stride(), b.stride(), a.dim() - 1)
    count, m, k, n = plan.matmul_shape
    compute, exact = (out.dtype, out.dtype) if out.dtype.is_floating_point else (torch.float64, torch.int64)

    (index_a, order_a), (index_b, order_b) = plan.compaction()
    lhs, rhs = a[index_a].permute(order_a), b[index_b].permute(order_b)
    if out.numel() == 0:
        return lambda: None

    batch = () if count == 1 else (count,)  # one product through torch.mm, as torch's own 2-D matmul: the batched
    multiply = torch.bmm if batch else torch.mm  # call picks slower kernels

    def product(**into: Any) -> Any:  # reshaped on each call: a reshape may copy, and the buffers change per call
        return multiply(lhs.reshape(*batch, m, k).to(compute), rhs.reshape(*batch, k, n).to(compute), **into)

    direct = [plan.others.index(i) for i in plan.batch + plan.rows + plan.cols]
    target = out.permute(direct) if out.dim() and not plan.neither else out
    if not plan.neither and compute == out.dtype and target.is_contiguous():
        target = target.view(*batch, m, n)
        return _after(refreshes, lambda: product(out=target))
    sizes, order, shape = plan.arrangement()
    return _after(refreshes, lambda: out.copy_(product().to(exact).reshape(sizes).permute(order).expand(shape)))


def _opaque(kernel: Kernel, tensors: dict[int, Any], bindings: Mapping[str, int]) -> Step:
    """A torch op run as it is (``hlir.opaque``) on views of its operands, its result copied into the kernel's
    buffer."""
    operands, refreshes = [], []
    for source, view in kernel.sources:
        operand, refresh = _operand(tensors[source], source, view, bindings)
        operands.append(operand)
        refreshes += refresh
    out = tensors[kernel.id].view([int(d.evaluate(bindings)) for d in kernel.shape])
    call = kernel.arg
    return _after(refreshes, lambda: out.copy_(call.run(operands)))


def _after(refreshes: list[Step], step: Step) -> Step:
    """``step``, after the copies that refresh its operands' scratches (none: ``step`` itself)."""
    if not refreshes:
        return step

    def run() -> None:
        for refresh in refreshes:
            refresh()
        step()
    return run


@dataclass
class CUDAPlan(Plan):
    """A CUDA plan: besides the slots and steps, its schedule, its stream (and torch's handle on it), the device
    buffers by kernel id (and torch tensors over them, in their own dtypes) and the ``dyn`` arrays its steps
    point to."""

    schedule: Schedule | None = None
    stream: Any = None  # numba-cuda Stream
    torch_stream: Any = None  # torch.cuda.ExternalStream over ``stream``
    buffers: dict[int, Any] = field(default_factory=dict)  # kernel id -> flat numba device array
    tensors: dict[int, Any] = field(default_factory=dict)  # kernel id -> flat torch tensor over the same memory
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
        tf32 = [k for k in llir.kernels if k.op == "MatmulTensorCore" and k.dtype == DType.F32]
        if tf32 and not tf32_allowed():
            raise Refused("tf32 not allowed", f"k{tf32[0].id} multiplies f32 as tf32 on tensor cores, which torch "
                          "allows only with torch.backends.cuda.matmul.allow_tf32 = True")
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
        import torch
        from cuda.core import LaunchConfig, Stream, launch

        layout = schedule(self.llir, bindings, self.kernels)
        cuda = _cuda()
        stream = cuda.stream()
        core_stream = Stream.from_handle(int(stream.handle))  # the same stream, as cuda.core.launch takes it
        by_id = {k.id: k for k in self.llir.kernels}
        weights = {kid: self.weight_slot(name, by_id[kid].dtype, layout.buffers[kid][0],
                                         functools.partial(cuda.device_array, math.prod(layout.buffers[kid][0]),
                                                           layout.buffers[kid][1]))
                   for kid, name in layout.inputs
                   if name in self._weights and all(d.is_num for d in by_id[kid].shape)}  # shared by every plan
        buffers = {kid: weights[kid].buffer if kid in weights else cuda.device_array(math.prod(shape), dtype,
                                                                                     stream=stream)
                   for kid, (shape, dtype) in layout.buffers.items()}
        tensors = {kid: torch.as_tensor(buffer, device="cuda").view(to_torch(by_id[kid].dtype))
                   for kid, buffer in buffers.items()}
        plan = CUDAPlan(schedule=layout, stream=stream, torch_stream=torch.cuda.ExternalStream(int(stream.handle)),
                        buffers=buffers, tensors=tensors)
        for kid, name in layout.inputs:  # a weight of symbolic shape has a slot of this plan's own
            slot = weights.get(kid) or Slot(name, buffers[kid], by_id[kid].dtype, layout.buffers[kid][0])
            (plan.weights if name in self._weights else plan.inputs).append(slot)
        no_dyn = cuda.device_array(1, np.int64, stream=stream)  # kernels without symbolic dims never read it
        plan.keep.append(no_dyn)
        steps = []
        for item in layout.setup + layout.launches:
            kernel = item.kernel
            if kernel.library:  # its scratches made (zeroed) on the stream it runs on
                with torch.cuda.stream(plan.torch_stream):
                    library = _opaque if kernel.library == "torch" else _library_matmul
                    step = library(by_id[kernel.writes], tensors, bindings)
                steps.append((kernel.writes, _on(plan.torch_stream, step)))
                continue
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

    def _prepare(self, inputs: Mapping[str, Any], weights: Mapping[str, np.ndarray],
                 bindings: Mapping[str, int] | None, fill: Any = None) -> CUDAPlan:
        _cuda().current_context()  # makes the context current in this thread (cuda.core launches need it)
        return super()._prepare(inputs, weights, bindings, fill)

    def _copy_in(self, plan: CUDAPlan, slot: Slot, value: np.ndarray) -> None:
        flat = np.ascontiguousarray(value).reshape(-1).view(slot.buffer.dtype)  # f16/bf16 as bits, bool as bytes
        slot.buffer.copy_to_device(flat, stream=plan.stream)

    def _time_launch(self, plan: CUDAPlan, repeats: int = 1) -> float:
        """The steps back to back, ``repeats`` runs between two CUDA events on the plan's stream, per run."""
        cuda = _cuda()
        begin, end = cuda.event(), cuda.event()
        begin.record(plan.stream)
        for _ in range(repeats):
            self._launch(plan)
        end.record(plan.stream)
        end.synchronize()
        return cuda.event_elapsed_time(begin, end) / 1e3 / repeats

    def run_device(self, inputs: Mapping[str, Any], weights: Mapping[str, np.ndarray] | None = None,
                   bindings: Mapping[str, int] | None = None) -> list[Any]:
        """Run on torch tensors and return torch CUDA tensors, without a host round trip: CUDA inputs are copied on
        the device into the plan's buffers (CPU ones once from the host), the outputs are fresh CUDA tensors, and
        the work is ordered after what torch's current stream has queued and before what it queues next. Nothing
        waits for the GPU."""
        import torch

        _cuda().current_context()
        self._weights.update(weights or {})  # before the plan: it tells the weights' slots from the inputs' by name
        plan = self.plan(bindings)
        current = torch.cuda.current_stream()
        plan.torch_stream.wait_stream(current)
        with torch.cuda.stream(plan.torch_stream):
            self._prepare(inputs, weights or {}, bindings, self._fill_tensor)
            self._launch(plan)
            outputs = [plan.tensors[kid].view(shape).clone() for kid, shape, _ in plan.schedule.outputs]
        current.wait_stream(plan.torch_stream)
        for output in outputs:
            output.record_stream(current)  # allocated on the plan's stream, used on torch's
        return outputs

    def _fill_tensor(self, plan: CUDAPlan, slot: Slot, value: Any) -> None:
        """Copy a torch tensor (checked against the slot's dtype and shape) into the slot's buffer, on the device."""
        if value.dtype != to_torch(slot.dtype):
            raise DTypeBoundaryError(f"{slot.name!r} is {value.dtype} but the LLIR declares {slot.dtype.value}; "
                                     "nothing is cast implicitly")
        if tuple(value.shape) != slot.shape:
            raise ShapeError(f"{slot.name!r} has shape {list(value.shape)} but the plan expects {list(slot.shape)}")
        kid = next(k for k, name in plan.schedule.inputs if name == slot.name)
        plan.tensors[kid].view(slot.shape).copy_(value, non_blocking=True)

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
