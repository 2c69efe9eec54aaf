"""Runtimes: an LLIR's kernels run on a device, one plan per binding of the symbolic dimensions.

``base`` (``Runtime``: plans, inputs and weights, ``run``, ``profile``; ``Profile``), ``cpu``
(numba kernels from ``luminal_lab.codegen.cpu``, BLAS matmuls), ``cuda`` (the generated CUDA C
through numba-cuda on a GPU), ``cache`` (compiled CPU kernels in memory and on disk), ``native`` (a small CPU
plan as one native function, for a hot call of fixed shapes).
``new_runtime(llir, device)`` picks one (``load(device)`` imports its libraries ahead, ``start_compilers(device)``
starts its kernel compilers ahead); ``check_device``
says why a device cannot run here; ``foreign_kernels`` are what a device's search leaves out.
"""

from __future__ import annotations

from ..core.arguments import one_of
from ..core.errors import NoDeviceError
from ..core.ops import GPU_KERNELS
from ..llir.llir import LLIR
from .base import Profile, Runtime
from .cuda import CUDARuntime, cuda_unavailable_reason

DEVICES = ("cpu", "cuda")


def check_device(device: str, where: str = "new_runtime") -> None:
    """Raise unless ``device`` is one of ``DEVICES`` (``ArgumentError`` naming ``where``) and usable here
    (``NoDeviceError`` says why not)."""
    one_of(where, "device", device, DEVICES)
    if device == "cuda":
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise NoDeviceError(f"device='cuda' runs the generated CUDA C through numba-cuda, which needs a CUDA GPU: "
                                f"{reason} (the CPU runtime is device='cpu')")


def foreign_kernels(device: str) -> frozenset[str]:
    """Kernel ops ``device`` runs only as another implementation (the CPU runs the GPU tilings of a matmul as its
    library call, and a row region a warp per row as any row region), so a search there leaves them out: measuring
    them would measure nothing new."""
    return frozenset(GPU_KERNELS) if device == "cpu" else frozenset()


def new_runtime(llir: LLIR, device: str, memory_budget: int | None = None) -> Runtime:
    """The runtime of ``llir`` on ``device`` (checked with ``check_device`` first); ``memory_budget`` bytes for a
    plan's buffers (default: ``base.MEMORY_FRACTION`` of the device's free memory)."""
    check_device(device)
    if device == "cuda":
        return CUDARuntime(llir, memory_budget)
    from .cpu import CPURuntime  # numba loads on first use, not at import

    return CPURuntime(llir, memory_budget=memory_budget)


def load(device: str) -> None:
    """Import ``device``'s runtime and the libraries it calls (numba, torch), as a measuring process does when it
    takes a job, so that no candidate's time limit is spent on imports (seconds; more on a busy machine)."""
    check_device(device)
    if device == "cpu":
        from .cpu import CPURuntime

        CPURuntime.load()


def start_compilers(device: str) -> None:
    """Start what compiles ``device``'s kernels (the CPU's compile worker processes) now, for a compile that will need
    it soon, so that its start-up overlaps the caller's work (an e-graph's saturation); returns at once."""
    check_device(device)
    if device == "cpu":
        from .cache import start_workers

        start_workers()


__all__ = ["DEVICES", "CUDARuntime", "Profile", "Runtime", "check_device", "cuda_unavailable_reason", "foreign_kernels",
           "load", "new_runtime", "start_compilers"]
