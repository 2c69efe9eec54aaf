"""LLIR: the kernel graph a genome extracts from the e-graph.

Each ``Kernel`` is one kernel op (``KernelAdd`` -> op ``"Add"``) with the same semantics as
the HLIR op of that name (see ``luminal_lab.hlir.graph``), plus ``Exp`` (e^x, recognised from the exp2
chain). A kernel reads each source kernel's contiguous output through a ``ShapeTracker``
and writes one contiguous tensor of ``shape`` and ``dtype``. Kernels are listed in a
topological order; each remembers its e-class and the HLIR nodes behind it.

Reductions reduce the *last* axis of their source view (the e-graph keeps the reduced
dimension apart from the kept ones, so extraction puts it last). A ``Matmul`` is a
contraction: both sources are read over ``shape`` plus the reduced extent, and each output
element is the sum over that last axis of their products (a ``SumReduce`` of a ``Mul``,
without the product); batch, rows and columns follow from the two views' strides
(``luminal_lab.hlir.contraction``).

Fused regions appear as marker kernels: ``FusionStart`` reads an outside kernel through its
view, ``Fused<Op>`` kernels (``FusedSin``, ``FusedAdd``, ...) compute on values inside the
region, read contiguously, and ``FusionEnd`` writes the region's one result. Only
``FusionEnd`` has a buffer; ``luminal_lab.llir.regions`` groups the markers into regions.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.arguments import integer
from ..core.dtypes import DType
from ..core.shape_tracker import ShapeTracker, format_shape
from ..core.stage import Stage
from ..core.symbolic import Expr

if TYPE_CHECKING:
    from ..draw import Picture


@dataclass(frozen=True)
class GatheredRead:
    """How a ``GatherMatmul`` reads its ``b`` at a point ``p`` of the contraction (the out shape, the contracted extent
    last): ``q = b(p)`` is a position in the layout of the gather it replaces (its index shape, row-major), and the
    value is its data (source 2, through its view) at ``within(q) + rows[rows view at q] * scale`` (the rows: source 1),
    0 outside the data."""

    b: ShapeTracker
    within: Expr  # in z = q
    scale: Expr


@dataclass(frozen=True)
class Kernel:
    """One kernel op.

    ``arg`` by op: ``Input`` its name; ``Output`` its output index; ``Constant`` its value
    (a number or an ``Expr``); ``Iota`` ``(expr in z, length)``; ``Cast`` the target dtype;
    ``MatmulTiled`` its ``Tiling``, ``MatmulTensorCore`` its ``MmaTiling``; ``GatherMatmul`` its ``GatheredRead``
    (its sources: ``a`` over the contraction, the rows over the gather's index shape, the data over its shape);
    ``Opaque`` its ``OpaqueCall`` (a torch op run as it is);
    ``FusionEnd`` ``"warp"`` where a GPU runs
    its row region a warp per row (picked as ``FusionEndWarp``); others None.
    """

    id: int
    op: str
    sources: tuple[tuple[int, Any], ...]  # (kernel id, ShapeTracker it is read through)
    shape: tuple[Expr, ...]
    dtype: DType
    arg: Any = None
    eclass: str = ""
    hlir: tuple[int, ...] = ()
    copy: int | None = None  # in a rolled program, the layer copy it runs for (``luminal_lab.llir.unroll``)

    @property
    def label(self) -> str:
        if self.op in ("Input", "Output", "Constant"):
            return f"{self.op} {self.arg}"
        if self.op == "Cast":
            return f"Cast {self.arg.value}"
        if self.op in ("MatmulTiled", "MatmulTensorCore"):
            return f"{self.op} {self.arg.name}"
        if self.op == "Opaque":
            return f"Opaque {self.arg.name}"
        if self.op == "FusionEnd" and self.arg:
            return f"FusionEnd {self.arg}"
        return self.op

    def __repr__(self) -> str:
        return f"<Kernel k{self.id} {self.label} {format_shape(self.shape)} {self.dtype.value} from {self.eclass}>"


@dataclass(repr=False)  # a stage's repr is its summary
class LLIR(Stage):
    """A kernel graph: kernels in topological order and the output kernels in output order."""

    kernels: list[Kernel]
    outputs: list[int]
    genome_hash: int = 0
    times: dict[int, float] = field(default_factory=dict)  # median seconds per kernel id, once profiled
    fold: bool = True  # the picture draws a rolled layer's first copy only (``expand()`` draws every copy)

    name = "llir"
    view_module = "luminal_lab.llir.view"

    @property
    def copies(self) -> int:
        """How many copies of a rolled layer the kernels run (0 when none was rolled)."""
        return max((k.copy + 1 for k in self.kernels if k.copy is not None), default=0)

    def timed(self, seconds: Mapping[int, float]) -> LLIR:
        """This LLIR showing ``seconds`` per kernel id (a ``Profile``'s ``kernels``, or a search's measurement)."""
        return dataclasses.replace(self, times=dict(seconds))

    def expand(self) -> LLIR:
        """This LLIR (the same kernels and times), its picture drawing every copy of a rolled layer."""
        return dataclasses.replace(self, fold=False)

    def picture(self, around: str | None = None, depth: int = 2) -> Picture:
        """The picture (shows itself in a notebook); with ``around`` (a kernel id such as ``"k12"``), only the kernels
        within ``depth`` reads of it, drawn kernel by kernel at any size. See ``luminal_lab.llir.view``."""
        integer("LLIR.picture", "depth", depth, minimum=0)
        return self._view().picture(self, around, depth)

    @property
    def inputs(self) -> dict[str, Kernel]:
        return {k.arg: k for k in self.kernels if k.op == "Input"}

    def op_counts(self) -> Counter:
        return Counter(k.op for k in self.kernels)

