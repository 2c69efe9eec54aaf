"""Fused regions of an LLIR: which marker kernels form one region, and the body it runs.

A region is everything a ``FusionEnd`` reaches through fused ops, down to the
``FusionStart`` markers where it reads outside kernels. Each region runs as one kernel:
every start reads its source through its own view, the fused ops run on values in
topological order, the end writes once. A fused op reached from two ends is computed by
both regions (it has no buffer to share). A region computes element by element in row-major
order: a fused op reads its operands contiguously but may do so in another shape of as many
elements (a reshape), so a start's view is over its own shape, which need not be the end's.

A *row region* holds reductions (``FusedSumReduce``/``FusedMaxReduce``, all of one out shape, its
*rows*): each of its values has the rows' shape (or that and a trailing 1) and is computed once
per row, or the rows' shape and an extent ``n`` and is computed along the row; a reduction turns
a value along the row into one per row, and an op reading a per-row value along the row
broadcasts it. Its kernel runs row by row: one pass along the row per reduction, then the end.

``RegionBody`` is that kernel in position-named form, the input of both code generators:
starts are ``x0, x1, ...`` and op results ``t0, t1, ...`` in order, so regions that do the
same work have the same body (and the same generated source) whatever their kernel ids.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..core.dtypes import DType
from ..core.errors import LuminalError
from ..core.ops import FUSED_OPS, REDUCE_KERNELS
from ..core.shape_tracker import ShapeTracker, format_shape, numel
from ..core.stage import Stage
from ..core.symbolic import Expr
from .llir import LLIR, Kernel


@dataclass(frozen=True)
class RegionBody:
    """A region's work by position: ``inputs[j]`` is ``(source kernel id, view, dtype)`` of ``x{j}``;
    ``steps[i]`` is ``(op, operand names)`` computing ``t{i}``; the last step's value is the result."""

    inputs: tuple[tuple[int, ShapeTracker, DType], ...]
    steps: tuple[tuple[str, tuple[str, ...]], ...]
    shape: tuple[Expr, ...]
    dtype: DType
    rows: tuple[Expr, ...] | None = None  # a row region's rows; None for an elementwise region
    extents: tuple[Expr | None, ...] = ()  # a row region's inputs, then steps: None once per row, else along the row

    @property
    def result(self) -> str:
        return f"t{len(self.steps) - 1}"

    def extent(self, name: str) -> Expr | None:
        """How far along the row value ``name`` (``x{j}`` or ``t{i}``) runs; None for once per row."""
        index = int(name[1:])
        return self.extents[index if name[0] == "x" else len(self.inputs) + index]

    def needs(self, name: str, known: Collection[str] = ()) -> list[int]:
        """The steps computed along the row that value ``name`` depends on, itself included, in order: what a pass
        along the row computes for it (per-row values, reductions included, are computed outside passes, and the
        ``known`` values are at hand)."""
        found: set[int] = set()
        stack = [name]
        while stack:
            current = stack.pop()
            if current[0] != "t" or current in known or self.extent(current) is None or int(current[1:]) in found:
                continue
            found.add(int(current[1:]))
            stack.extend(self.steps[int(current[1:])][1])
        return sorted(found)

    @property
    def lengths(self) -> list[Expr]:
        """A row region's distinct extents along the row, in order of first use (the end's last)."""
        return list(dict.fromkeys(e for e in (*self.extents, self.extent(self.result)) if e is not None))

    def reads(self, name: str, known: Collection[str] = ()) -> list[int]:
        """The inputs (by position) a pass along the row computing value ``name`` reads (the ``known`` values at
        hand)."""
        names = [n for i in self.needs(name, known) for n in self.steps[i][1]] + [name]
        return sorted({int(n[1:]) for n in names if n[0] == "x"})

    def row_order(self) -> list[int]:
        """The steps a row kernel computes outside its passes, in order: each reduction (a pass along the row), and
        each per-row step as soon as its operands are known."""
        known = {f"x{j}" for j in range(len(self.inputs)) if self.extent(f"x{j}") is None}
        order: list[int] = []

        def per_row() -> None:
            for i, (op, names) in enumerate(self.steps):
                if (f"t{i}" not in known and op not in REDUCE_KERNELS and self.extent(f"t{i}") is None
                        and all(n in known for n in names)):
                    order.append(i)
                    known.add(f"t{i}")

        per_row()
        for i, (op, _) in enumerate(self.steps):
            if op in REDUCE_KERNELS:
                order.append(i)
                known.add(f"t{i}")
                per_row()
        return order


def _along(shape: tuple[Expr, ...], rows: tuple[Expr, ...], what: str) -> Expr | None:
    """None where ``shape`` is one value per row (``rows`` up to axes of extent 1, such as a trailing one), else the
    extent along the row (the last axis, the others ``rows`` up to axes of extent 1): both are read in row-major
    order, where axes of extent 1 do not move the index. A region's ops may reshape (a plain region grown into a row
    region computes in row-major order too), so a shape of as many elements as the rows is per row, and one of a
    whole multiple ``n`` of them runs along rows of ``n``."""
    if _squeezed(shape) == _squeezed(rows):
        return None
    if shape and _squeezed(shape[:-1]) == _squeezed(rows):
        return shape[-1]
    count, per_row = numel(shape), numel(rows)
    if count == per_row:
        return None
    if count.is_num and per_row.is_num and per_row.value and count.value % per_row.value == 0:
        return Expr.num(count.value // per_row.value)
    raise LuminalError(f"{what} of shape {format_shape(shape)} is neither per row nor along the rows "
                       f"{format_shape(rows)}")


def _squeezed(shape: tuple[Expr, ...]) -> tuple[Expr, ...]:
    return tuple(d for d in shape if d != 1)


@dataclass(frozen=True)
class Region:
    """One fused region: its ``FusionEnd`` kernel, its fused ops (topological order) and its
    ``FusionStart`` kernels (one per distinct outside read, in order of kernel id)."""

    end: int
    ops: tuple[int, ...]
    starts: tuple[int, ...]

    def body(self, llir: LLIR, kernels: dict[int, Kernel] | None = None) -> RegionBody:
        """The region's ``RegionBody``; raises ``LuminalError`` for one that cannot run as one kernel (``kernels``: the
        LLIR's kernels by id, when the caller has them)."""
        kernels = kernels or {k.id: k for k in llir.kernels}
        names = {sid: f"x{j}" for j, sid in enumerate(self.starts)}
        names.update({oid: f"t{i}" for i, oid in enumerate(self.ops)})
        inputs = tuple((kernels[s].sources[0][0], kernels[s].sources[0][1], kernels[kernels[s].sources[0][0]].dtype)
                       for s in self.starts)
        steps = tuple((FUSED_OPS[kernels[o].op], tuple(names[src] for src, _ in kernels[o].sources))
                      for o in self.ops)
        end = kernels[self.end]
        body = RegionBody(inputs, steps, end.shape, end.dtype)
        reductions = {kernels[o].shape for o in self.ops if FUSED_OPS[kernels[o].op] in REDUCE_KERNELS}
        if not reductions:  # element by element: every value has as many elements as the end
            count = numel(end.shape)
            for k in (*self.starts, *self.ops):
                if numel(kernels[k].shape) != count:
                    raise LuminalError(f"k{k} ({kernels[k].op}) in the region of k{self.end} has "
                                       f"{format_shape(kernels[k].shape)}, not the region's {count} elements")
            return body
        if len(reductions) > 1:
            shapes = ", ".join(format_shape(shape) for shape in reductions)
            raise LuminalError(f"region of k{self.end} reduces to more than one shape: {shapes}")
        (rows,) = reductions
        extents = [_along(kernels[s].shape, rows, f"start k{s}") for s in self.starts]
        for o in self.ops:
            kernel = kernels[o]
            extent = _along(kernel.shape, rows, f"k{o} ({kernel.op})")
            operands = [extents[int(n[1:])] if n[0] == "x" else extents[len(self.starts) + int(n[1:])]
                        for n in (names[src] for src, _ in kernel.sources)]
            allowed = {None, extent} if extent is not None else {None}
            if FUSED_OPS[kernel.op] in REDUCE_KERNELS:  # rows of length 1 are values per row
                length = kernel.sources[0][1].dims[-1]
                allowed = {length, None} if length == 1 else {length}
            if not set(operands) <= allowed:
                raise LuminalError(f"k{o} ({kernel.op}) in the region of k{self.end} reads values along rows of "
                                   f"another length")
            extents.append(extent)
        _along(end.shape, rows, f"end k{self.end}")
        return RegionBody(inputs, steps, end.shape, end.dtype, rows, tuple(extents))

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
    view_module = "luminal_lab.llir.regions_view"

    @classmethod
    def of(cls, llir: LLIR) -> Regions:
        return cls(llir, find_regions(llir))

    def __len__(self) -> int:
        return len(self.regions)

    def __iter__(self):
        return iter(self.regions)

    def __getitem__(self, index: int) -> Region:
        return self.regions[index]
