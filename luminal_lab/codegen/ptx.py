"""Compiling generated CUDA C to PTX: with NVRTC (pip's ``nvidia-cuda-nvrtc``), else with ``nvcc``.

No GPU is needed: PTX is what a driver JIT-compiles, so every generated kernel is checked by
compiling it here, on machines without one. A compiler failure raises ``CudaCompileError`` with
the compiler's log and the source; results are cached by ``(source, arch)`` in the process.
``assemble`` goes one step further, as the driver would: ``ptxas`` (pip's ``nvidia-cuda-nvcc``,
else the CUDA toolkit's) turns the PTX into machine code, which checks inline PTX (``asm``, such
as the tensor-core ``mma.sync``) that NVRTC passes through unread, and reports registers and
spills.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import subprocess
import tempfile
from typing import Any

from ..core.errors import CudaCompileError, LuminalError

_PTX_CACHE: dict[tuple[str, str], str] = {}


def _find_nvrtc() -> str | None:
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cuda_nvrtc/lib", "cu13/lib", "cu12/lib"):
            found = sorted(glob.glob(os.path.join(root, sub, "libnvrtc.so*")))
            found = [f for f in found if "builtins" not in f and "alt" not in os.path.basename(f)]
            if found:
                return found[0]
    return None


_NVRTC: Any = None


def _nvrtc() -> Any:
    global _NVRTC
    if _NVRTC is None:
        path = _find_nvrtc()
        _NVRTC = ctypes.CDLL(path) if path else False
    return _NVRTC or None


def _include_options() -> list[str]:
    return ["--include-path=/usr/local/cuda/include"] if os.path.isdir("/usr/local/cuda/include") else []


def _compile_nvrtc(lib: Any, source: str, arch: str) -> str:
    prog = ctypes.c_void_p()
    check = _checker(lib)
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None), "create")
    try:
        options = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}", "--std=c++17", *_include_options()]
        array = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(prog, len(options), array)
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise CudaCompileError(log.value.decode(errors="replace"), source)
        size = ctypes.c_size_t()
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "PTX size")
        ptx = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, ptx), "PTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _checker(lib: Any):
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(status: int, what: str) -> None:
        if status != 0:
            raise LuminalError(f"NVRTC {what}: {lib.nvrtcGetErrorString(status).decode()}")
    return check


def _compile_nvcc(source: str, arch: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cu, ptx = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.ptx")
        with open(cu, "w") as f:
            f.write(source)
        done = subprocess.run(["/usr/local/cuda/bin/nvcc", "-ptx", f"-arch={arch}", cu, "-o", ptx],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CudaCompileError(done.stderr + done.stdout, source)
        with open(ptx) as f:
            return f.read()


def _find_ptxas() -> str | None:
    try:
        import nvidia
    except ImportError:
        nvidia = None
    roots = [os.path.join(root, sub) for root in getattr(nvidia, "__path__", []) for sub in ("cu13", "cuda_nvcc")]
    for root in [*roots, "/usr/local/cuda"]:
        path = os.path.join(root, "bin", "ptxas")
        if os.access(path, os.X_OK):
            return path
    return None


def assemble(ptx: str, arch: str = "sm_90") -> str:
    """Assemble ``ptx`` for ``arch`` with ``ptxas -v`` and return its report (registers, shared memory, spills);
    raises ``CudaCompileError`` with ptxas's log when the PTX is wrong, ``LuminalError`` when there is no ptxas."""
    ptxas = _find_ptxas()
    if ptxas is None:
        raise LuminalError("no ptxas: install nvidia-cuda-nvcc (pip install 'luminal_lab[test]') or the CUDA toolkit")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, "-v", f"-arch={arch}", source, "-o", os.path.join(tmp, "kernel.cubin")],
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise CudaCompileError(done.stderr + done.stdout, ptx)
    return done.stderr + done.stdout


def compile_ptx(source: str, arch: str = "sm_90") -> str:
    """PTX for ``source`` (NVRTC from the ``nvidia-cuda-nvrtc`` wheel, else nvcc); cached by source hash."""
    key = (hashlib.sha256(source.encode()).hexdigest(), arch)
    if key not in _PTX_CACHE:
        lib = _nvrtc()
        _PTX_CACHE[key] = _compile_nvrtc(lib, source, arch) if lib is not None else _compile_nvcc(source, arch)
    return _PTX_CACHE[key]
