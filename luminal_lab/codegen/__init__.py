"""Code generation: every LLIR kernel and fused region as source for a device.

``reads`` lowers a shape tracker's read at a binding to strides (else a nest or a gather); ``cpu`` writes the numba
loop nests the CPU runtime compiles over a ``cpu_loop.Loop`` of such reads, calling ``cpu_math`` (vectorisable float32
transcendentals, f16/bf16 bit conversions); ``cuda`` writes CUDA C from the building blocks in ``cuda_c``, with
``cuda_matmul`` writing a contraction's tiled and tensor-core kernels; ``ptx`` compiles it to PTX (NVRTC, else nvcc)
and assembles that with ptxas; ``cuda_stage`` is ``comp.cuda``, drawn by ``cuda_view``.
"""

from .cuda import llir_sources
from .cuda_c import CudaKernel
from .cuda_stage import CudaStage
from .ptx import compile_ptx

__all__ = ["CudaKernel", "CudaStage", "compile_ptx", "llir_sources"]
