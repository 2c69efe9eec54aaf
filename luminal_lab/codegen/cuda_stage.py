"""The CUDA stage: the CUDA C generated for one LLIR, kernel by kernel; ``comp.cuda``.

One ``CudaKernel`` per LLIR kernel that writes a buffer (``llir_sources``): each fused
region is a single ``k_region`` kernel at its ``FusionEnd``; a library matmul (cuBLAS) has a
comment for its source and nothing to compile. Kernels compile to PTX lazily,
the first time their status is asked for (the summary asks for all of them); a compiler
failure is kept and shown, never raised. ``luminal_lab.codegen.cuda_view`` draws the stage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.errors import CudaCompileError, LuminalError
from ..core.stage import Stage
from ..core.symbolic import Expr
from ..llir.llir import LLIR
from ..llir.regions import Region, find_regions
from .cuda import llir_sources
from .cuda_c import CudaKernel
from .ptx import compile_ptx

_STORE = re.compile(r"\bout\[[^\]]+\] = ")  # a line that writes the kernel's output buffer


def _defines(local: str) -> re.Pattern[str]:
    """Matches the line that declares a region local (``const float t2 = ...``)."""
    return re.compile(rf"^\s*const [\w ]+ {local} = ")


@dataclass(frozen=True)
class Compilation:
    """How compiling one kernel went: its PTX, else the compiler's log (``failed``) or why nothing could compile."""

    ptx: str | None
    log: str = ""
    failed: bool = False
    library: str = ""

    @property
    def ok(self) -> bool:
        return self.ptx is not None or bool(self.library)

    @property
    def status(self) -> str:
        """``compiled (N lines of PTX)``, ``library call (...)``, ``compile error:`` and the log, or
        ``not compiled:`` and why."""
        if self.library:
            return f"library call ({self.library}): nothing to compile"
        if self.ptx is not None:
            return f"compiled ({len(self.ptx.splitlines())} lines of PTX)"
        return f"{'compile error' if self.failed else 'not compiled'}:\n{self.log}"


@dataclass(repr=False)  # a stage's repr is its summary
class CudaStage(Stage):
    """The generated CUDA of ``llir`` for ``arch``: ``kernels`` in launch order, fused ``regions`` by end kernel id."""

    llir: LLIR
    arch: str = "sm_90"
    kernels: list[CudaKernel] = field(init=False)
    regions: dict[int, Region] = field(init=False)
    _compiled: dict[int, Compilation] = field(init=False, default_factory=dict)  # by written LLIR kernel id

    name = "cuda"
    view_module = "luminal_lab.codegen.cuda_view"

    def __post_init__(self) -> None:
        self.kernels = llir_sources(self.llir)
        self.regions = {region.end: region for region in find_regions(self.llir)}

    def region(self, kernel: CudaKernel) -> Region | None:
        """The fused region ``kernel`` runs, or None for a plain kernel."""
        return self.regions.get(kernel.writes)

    def region_ops(self, kernel: CudaKernel) -> list[str]:
        """The ops of ``kernel``'s fused region in the order it runs them; empty for a plain kernel."""
        region = self.region(kernel)
        return region.op_names(self.llir) if region else []

    def llir_kernels(self, kernel: CudaKernel) -> list[int]:
        """The LLIR kernel ids ``kernel`` implements: its own, or its region's end, fused ops and starts."""
        region = self.region(kernel)
        return [kernel.writes] if region is None else sorted({region.end, *region.ops, *region.starts})

    def source_lines(self, kernel: CudaKernel, llir_kernel: int) -> list[int]:
        """The 1-based lines of ``kernel``'s source that compute LLIR kernel ``llir_kernel``: in a fused region the
        line defining a start's ``x{j}`` or a fused op's ``t{i}``; for the kernel it writes (a region's end, or a
        plain kernel's op) the lines that store to ``out``. Empty when ``kernel`` does not implement it."""
        region = self.region(kernel)
        if region is not None and llir_kernel in region.starts:
            pattern = _defines(f"x{region.starts.index(llir_kernel)}")
        elif region is not None and llir_kernel in region.ops:
            pattern = _defines(f"t{region.ops.index(llir_kernel)}")
        elif llir_kernel == kernel.writes:
            pattern = _STORE
        else:
            return []
        return [number for number, line in enumerate(kernel.source.splitlines(), 1) if pattern.search(line)]

    def launch(self, kernel: CudaKernel, bindings: dict[str, int] | None = None) -> tuple[Expr, Expr]:
        """``(grid, block)`` with the dims in ``bindings`` substituted: numbers once every dim is bound."""
        grid, block = kernel.launch_exprs()
        bound = {name: value for name, value in (bindings or {}).items() if name in kernel.dyn}
        return (grid.substitute(**bound), block.substitute(**bound)) if bound else (grid, block)

    def compilation(self, kernel: CudaKernel) -> Compilation:
        """``kernel`` compiled to PTX for ``arch`` (on the first call; then remembered)."""
        if kernel.writes not in self._compiled and kernel.library:
            call = "torch.mm" if kernel.library == "cublas" else "the op itself"  # a matmul, or an opaque op
            self._compiled[kernel.writes] = Compilation(None, library=f"{kernel.library} through {call}")
        if kernel.writes not in self._compiled:
            try:
                result = Compilation(compile_ptx(kernel.source, self.arch))
            except CudaCompileError as error:
                result = Compilation(None, error.log, failed=True)
            except (LuminalError, OSError) as error:  # no NVRTC and no nvcc, or NVRTC itself failed
                result = Compilation(None, str(error))
            self._compiled[kernel.writes] = result
        return self._compiled[kernel.writes]

    def status(self, kernel: CudaKernel) -> str:
        """``kernel``'s compile status (see ``Compilation.status``)."""
        return self.compilation(kernel).status

    def _repr_html_(self) -> str:
        return self._view().to_html(self)

    def __len__(self) -> int:
        return len(self.kernels)

    def __iter__(self):
        return iter(self.kernels)

    def __getitem__(self, index: int) -> CudaKernel:
        return self.kernels[index]
