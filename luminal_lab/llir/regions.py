"""Fused regions of an LLIR: which marker kernels form one region, and the body it runs.

A region is everything a ``FusionEnd`` reaches through fused ops, down to the
``FusionStart`` markers where it reads outside kernels. Each region runs as one kernel:
every start reads its source through its own view, the fused ops run on values in
topological order, the end writes once. A fused op reached from two ends is computed by
both regions (it has no buffer to share). A region computes element by element in row-major
order: a fused op reads its operands contiguously but may do so in another shape of as many
elements (a reshape), so a start's view is over its own shape, which need not be the end's.

``RegionBody`` is that kernel in position-named form, the input of both code generators:
starts are ``x0, x1, ...`` and op results ``t0, t1, ...`` in order, so regions that do the
same work have the same body (and the same generated source) whatever their kernel ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.dtypes import DType
from ..core.ops import FUSED_OPS
from ..core.shape_tracker import ShapeTracker
from ..core.stage import Stage
from ..core.symbolic import Expr
from .llir import LLIR


@dataclass(frozen=True)
class RegionBody:
    """A region's work by position: ``inputs[j]`` is ``(source kernel id, view, dtype)`` of ``x{j}``;
    ``steps[i]`` is ``(op, operand names)`` computing ``t{i}``; the last step's value is the result."""

    inputs: tuple[tuple[int, ShapeTracker, DType], ...]
    steps: tuple[tuple[str, tuple[str, ...]], ...]
    shape: tuple[Expr, ...]
    dtype: DType

    @property
    def result(self) -> str:
        return f"t{len(self.steps) - 1}"


@dataclass(frozen=True)
class Region:
    """One fused region: its ``FusionEnd`` kernel, its fused ops (topological order) and its
    ``FusionStart`` kernels (one per distinct outside read, in order of kernel id)."""

    end: int
    ops: tuple[int, ...]
    starts: tuple[int, ...]

    def body(self, llir: LLIR) -> RegionBody:
        kernels = {k.id: k for k in llir.kernels}
        names = {sid: f"x{j}" for j, sid in enumerate(self.starts)}
        names.update({oid: f"t{i}" for i, oid in enumerate(self.ops)})
        inputs = tuple((kernels[s].sources[0][0], kernels[s].sources[0][1], kernels[kernels[s].sources[0][0]].dtype)
                       for s in self.starts)
        steps = tuple((FUSED_OPS[kernels[o].op], tuple(names[src] for src, _ in kernels[o].sources))
                      for o in self.ops)
        end = kernels[self.end]
        return RegionBody(inputs, steps, end.shape, end.dtype)

    def kernels(self) -> list[int]:
        """All kernel ids of the region (starts, fused ops, end), by id."""
        return sorted({*self.starts, *self.ops, self.end})

    def op_names(self, llir: LLIR) -> list[str]:
        kernels = {k.id: k for k in llir.kernels}
        return [FUSED_OPS[kernels[o].op] for o in self.ops]


def find_regions(llir: LLIR) -> list[Region]:
    """The regions of ``llir``, one per ``FusionEnd``, in kernel order."""
    kernels = {k.id: k for k in llir.kernels}
    regions = []
    for end in (k for k in llir.kernels if k.op == "FusionEnd"):
        ops, starts, stack, seen = [], [], [end.sources[0][0]], set()
        while stack:
            kid = stack.pop()
            if kid in seen:
                continue
            seen.add(kid)
            kernel = kernels[kid]
            if kernel.op == "FusionStart":
                starts.append(kid)
            elif kernel.op in FUSED_OPS:
                ops.append(kid)
                stack.extend(src for src, _ in kernel.sources)
            else:
                raise ValueError(f"region of k{end.id} reaches k{kid} ({kernel.op}) without a FusionStart")
        regions.append(Region(end.id, tuple(sorted(ops)), tuple(sorted(starts))))
    return regions


@dataclass(repr=False)  # a stage's repr is its summary
class Regions(Stage):
    """The fused regions of one LLIR; ``comp.regions``."""

    llir: LLIR
    regions: list[Region]

    name = "regions"

    @classmethod
    def of(cls, llir: LLIR) -> Regions:
        return cls(llir, find_regions(llir))

    def __len__(self) -> int:
        return len(self.regions)

    def __iter__(self):
        return iter(self.regions)

    def __getitem__(self, index: int) -> Region:
        return self.regions[index]
