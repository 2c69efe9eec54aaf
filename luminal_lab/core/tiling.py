"""Matmul tilings: the generated GPU implementations a contraction's e-class may hold.

A contraction (``Matmul``) runs through a library by default (BLAS on the CPU, cuBLAS through
torch on a GPU). Rules in the e-graph add, beside it, one ``MatmulTiled`` e-node per ``Tiling``
and one ``MatmulTensorCore`` e-node per ``MmaTiling`` and input dtype, so that the genome chooses
the implementation and the search measures it. Each tiling is a kernel's knobs, as data:

- ``Tiling``: a block computes a ``block_m x block_n`` tile of the output, walking the contracted
  dim ``k_step`` at a time through shared memory; each of its threads computes a
  ``thread_m x thread_n`` sub-tile in registers, reading the shared tiles ``vector`` elements at a
  time (float2/float4 loads where the compute type is float).
- ``MmaTiling``: a block of ``(block_m / 32) * (block_n / 32)`` warps, each computing a 32x32 tile
  as 2x4 tensor-core tiles of 16x8 (``mma.sync``), ``k_step`` of the contracted dim at a time.
  f16 and bf16 multiply in their own precision; f32 multiplies as tf32, which runs only where
  the user allows it (``torch.backends.cuda.matmul.allow_tf32``), as torch does.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

from .dtypes import DType


@dataclass(frozen=True)
class Tiling:
    """A shared-memory tiled matmul kernel's block tile, K step, thread tile and vector width."""

    block_m: int
    block_n: int
    k_step: int
    thread_m: int
    thread_n: int
    vector: int

    def __post_init__(self) -> None:
        if self.block_m % self.thread_m or self.block_n % self.thread_n:
            raise ValueError(f"{self}: the thread tile must divide the block tile")
        if self.thread_m % self.vector or self.thread_n % self.vector:
            raise ValueError(f"{self}: the vector width must divide the thread tile")

    @property
    def threads(self) -> int:
        """Threads per block: one per thread tile of the block tile."""
        return (self.block_m // self.thread_m) * (self.block_n // self.thread_n)

    @property
    def name(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.k_step}-{self.thread_m}x{self.thread_n}"
                f"{f'-v{self.vector}' if self.vector > 1 else ''}")

    @property
    def fields(self) -> tuple[int, ...]:
        return astuple(self)


@dataclass(frozen=True)
class MmaTiling:
    """A tensor-core (``mma.sync``) matmul kernel's block tile and K step; each warp computes 32x32."""

    block_m: int
    block_n: int
    k_step: int

    def __post_init__(self) -> None:
        if self.block_m % 32 or self.block_n % 32 or self.k_step % 16:
            raise ValueError(f"{self}: block tiles are multiples of 32 and the K step of 16")

    @property
    def warps(self) -> int:
        return (self.block_m // 32) * (self.block_n // 32)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def name(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.k_step}"

    @property
    def fields(self) -> tuple[int, ...]:
        return astuple(self)


TILINGS = (
    Tiling(32, 32, 8, 2, 2, 1),
    Tiling(64, 64, 8, 4, 4, 4),
    Tiling(64, 64, 16, 8, 4, 4),
    Tiling(128, 64, 8, 8, 4, 4),
    Tiling(128, 128, 8, 8, 8, 4),
)
MMA_TILINGS = (MmaTiling(64, 64, 32), MmaTiling(128, 64, 32), MmaTiling(64, 128, 32))
MMA_DTYPES = (DType.F16, DType.BF16, DType.F32)  # f32 as tf32, where allowed
MMA_SHAPE = {DType.F16: (16, 8, 16), DType.BF16: (16, 8, 16), DType.F32: (16, 8, 8)}  # one mma.sync: m, n, k
