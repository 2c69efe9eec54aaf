"""Generated CUDA C compiled to PTX (NVRTC, else nvcc) without a GPU: nothing runs, the check is that the compiler
accepts each kernel's source and emits its entry."""

from __future__ import annotations

import os
import shutil

import pytest

from luminal_lab.codegen.cuda_c import CudaKernel
from luminal_lab.codegen.ptx import _nvrtc, compile_ptx

needs_a_cuda_compiler = pytest.mark.skipif(
    _nvrtc() is None and not os.path.exists("/usr/local/cuda/bin/nvcc") and shutil.which("nvcc") is None,
    reason="neither NVRTC nor nvcc available")


def compile_kernels(kernels: list[CudaKernel]) -> list[CudaKernel]:
    """Compile each generated kernel (a cuBLAS call has no source to compile) and check its entry and launch."""
    for kernel in kernels:
        if kernel.library:  # cuBLAS: nothing generated (tests/codegen/test_cuda_matmul.py)
            assert kernel.source.startswith("// k") and not kernel.dyn
            continue
        ptx = compile_ptx(kernel.source)
        assert f".entry {kernel.name}(" in ptx, kernel.source
        if not kernel.dyn:
            grid, block = kernel.launch({})
            assert grid >= 0 and 1 <= block <= 256
    return kernels
