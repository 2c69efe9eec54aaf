"""The op vocabulary every stage shares, declared once: the HLIR's primitive ops and the LLIR's kernel ops.

HLIR ops (``Op``) are the sixteen primitives plus ``Input``, ``Constant``, ``Output`` and ``Opaque`` (a torch op with no
translation, run as it is: ``luminal_lab.hlir.opaque``; its kernel's field ``node`` is the HLIR node's id); their
semantics are documented in ``luminal_lab.hlir.graph``. Every op a kernel runs is one ``KernelOp`` in ``KERNEL_OPS``:
plain data (name, HLIR op, group, dtype rule, whether it fuses, named fields with their egglog sorts) that the e-graph's
constructors and lowering rules, extraction's field reads and the backends' groups are derived from. Besides the
HLIR ops' own kernels there are ops recognised from patterns: ``Exp`` (e^x, from the exp2 chain), ``Select``
(``where``: ``a`` where its condition is nonzero, else ``b``, from the Gather over ``concat(b, a)`` that ``where``
lowers to), ``Matmul`` (a ``Mul`` feeding a ``SumReduce``; ``MatmulTiled`` and ``MatmulTensorCore`` are its
generated GPU implementations, ``luminal_lab.core.tiling``) and ``GatherMatmul`` (a ``Matmul`` whose ``b`` is a
``Gather`` at ``iota + rows * scale``, read in place: each row of a mixture of experts times its expert's matrix).
The fusion markers ``FusionStart``, ``FusionEnd``, ``FusionEndWarp`` and one ``Fused<Op>`` per fusing op (reductions
included: a row region) are ``MARKERS``.

A *view* field is ``(Strided strides)`` or ``(Masked strides masks)``; ``Group`` gives the field layouts (a reduction's
are its out shape, reduced extent, view of the kept dims, and the reduced dim's stride and mask; a contraction's views
are over the out shape with the reduced dim last, and a tiling's numbers follow). A kernel op's constructor
(``Kernel<Name>``) is its fields then its ``dtype``, unless a field already is the dtype.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from .tiling import MmaTiling, Tiling

LOG2_E = 1.4426950408889634  # exp(x) = exp2(x * LOG2_E): the tensor API's decomposition, and the e-graph's pattern


class Op(enum.Enum):
    """Primitive ops; the value is the op's name in Luminal's schema."""

    INPUT = "Input"
    CONSTANT = "Constant"
    OUTPUT = "Output"
    LOG2 = "Log2"
    EXP2 = "Exp2"
    SIN = "Sin"
    SQRT = "Sqrt"
    RECIP = "Recip"
    ADD = "Add"
    MUL = "Mul"
    MOD = "Mod"
    LESS_THAN = "LessThan"
    SUM_REDUCE = "SumReduce"
    MAX_REDUCE = "MaxReduce"
    IOTA = "Iota"
    GATHER = "Gather"
    SCATTER = "Scatter"
    SCATTER_ADD = "ScatterAdd"
    CAST = "Cast"
    OPAQUE = "Opaque"

    def __repr__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Field:
    """A constructor's field: its name (how rules and extraction read it) and its egglog sort."""

    name: str
    sort: str


def fields(spec: str) -> tuple[Field, ...]:
    """``"shape:EList x:View"`` as fields."""
    return tuple(Field(*item.split(":")) for item in spec.split())


class Group(enum.Enum):
    """A kernel op's kind; each of the first five is its field layout."""

    UNARY = "shape:EList x:View out:EList"
    BINARY = "shape:EList a:View b:View out:EList"
    TERNARY = "shape:EList cond:View a:View b:View out:EList"
    REDUCE = "shape:EList extent:Expression kept:View stride:Expression mask:Expression out:EList"
    CONTRACT = "shape:EList extent:Expression a:View b:View out:EList"
    SOURCE = "source"  # Iota, Constant
    INDEX = "index"  # Gather, Scatter, ScatterAdd
    CAST = "cast"
    GATHERED = "gathered"  # GatherMatmul
    OPAQUE = "opaque"  # a torch op run as it is


UNARY, BINARY, TERNARY, REDUCE, CONTRACT, SOURCE, INDEX, CAST, GATHERED, OPAQUE = Group
_DTYPE = Field("dtype", "DType")


@dataclass(frozen=True)
class KernelOp:
    """One op a kernel runs.

    ``dtype`` says where its output dtype comes from: ``"input0"`` / ``"input1"`` (that operand's), ``"field"`` (its
    ``dtype`` field), or a ``DType`` constructor (``"Bool"``). ``hlir`` is the HLIR op it lowers from (``None`` for an
    op recognised from a pattern); ``fuses``: it may join a fused region as ``Fused<name>``; ``gpu_only``: generated
    for a GPU only (elsewhere a contraction runs as the library call)."""

    name: str
    group: Group
    fields: tuple[Field, ...]
    dtype: str = "input0"
    hlir: Op | None = None
    fuses: bool = False
    gpu_only: bool = False

    @property
    def kernel(self) -> str:
        """The kernel op's egglog constructor."""
        return f"Kernel{self.name}"

    @property
    def kernel_fields(self) -> tuple[Field, ...]:
        return self.fields if self.dtype == "field" else (*self.fields, _DTYPE)


def _op(name: str, group: Group, dtype: str = "input0", layout: str = "", **flags) -> KernelOp:
    return KernelOp(name, group, fields(layout or group.value), dtype, **flags)


def _tiling_fields(tiling: type) -> str:
    return " ".join(f"{f.name}:Expression" for f in dataclasses.fields(tiling))


_SCATTER = "dest_shape:EList dest:View index_shape:EList index:View source:View out:EList"
KERNEL_OPS = (  # the HLIR ops' kernels, then the ops recognised from patterns
    *(_op(op.value, UNARY, hlir=op, fuses=True) for op in (Op.LOG2, Op.EXP2, Op.SIN, Op.SQRT, Op.RECIP)),
    _op("Add", BINARY, hlir=Op.ADD, fuses=True),
    _op("Mul", BINARY, hlir=Op.MUL, fuses=True),
    _op("Mod", BINARY, hlir=Op.MOD),
    _op("LessThan", BINARY, "Bool", hlir=Op.LESS_THAN),
    _op("SumReduce", REDUCE, hlir=Op.SUM_REDUCE, fuses=True),
    _op("MaxReduce", REDUCE, hlir=Op.MAX_REDUCE, fuses=True),
    _op("Iota", SOURCE, "Int", "expr:Expression length:Expression", hlir=Op.IOTA),
    _op("Constant", SOURCE, "field", "value:Expression dtype:DType", hlir=Op.CONSTANT),
    _op("Gather", INDEX, "input1", "index_shape:EList index:View data_shape:EList data:View out:EList",
        hlir=Op.GATHER),
    _op("Scatter", INDEX, layout=_SCATTER, hlir=Op.SCATTER),
    _op("ScatterAdd", INDEX, layout=_SCATTER, hlir=Op.SCATTER_ADD),
    _op("Cast", CAST, "field", "shape:EList x:View out:EList dtype:DType", hlir=Op.CAST),
    _op("Opaque", OPAQUE, "field", "node:Expression shape:EList dtype:DType", hlir=Op.OPAQUE),
    _op("Exp", UNARY, fuses=True),
    _op("Tanh", UNARY, fuses=True),
    _op("Select", TERNARY, "input1", fuses=True),
    _op("Matmul", CONTRACT),
    _op("MatmulTiled", CONTRACT, layout=f"{CONTRACT.value} {_tiling_fields(Tiling)}", gpu_only=True),
    _op("MatmulTensorCore", CONTRACT, layout=f"{CONTRACT.value} {_tiling_fields(MmaTiling)}", gpu_only=True),
    _op("GatherMatmul", GATHERED, layout="shape:EList extent:Expression a:View b:View index_shape:EList rows:View "
        "within:Expression scale:Expression data_shape:EList data:View out:EList"),
)
KERNELS = {op.name: op for op in KERNEL_OPS}
HLIR_KERNELS = {op.hlir: op for op in KERNEL_OPS if op.hlir is not None}  # HLIR op -> the kernel op it lowers to


def _named(group: Group, *, fusing: bool = False) -> tuple[str, ...]:
    return tuple(op.name for op in KERNEL_OPS if op.group == group and (op.fuses or not fusing))


def _hlir(group: Group) -> tuple[Op, ...]:
    return tuple(op.hlir for op in KERNEL_OPS if op.group == group and op.hlir is not None)


UNARY_OPS, BINARY_OPS, REDUCE_OPS = _hlir(UNARY), _hlir(BINARY), _hlir(REDUCE)
UNARY_KERNELS, BINARY_KERNELS, TERNARY_KERNELS = _named(UNARY), _named(BINARY), _named(TERNARY)
REDUCE_KERNELS, CONTRACT_KERNELS = _named(REDUCE), _named(CONTRACT)
FUSABLE_UNARY, FUSABLE_BINARY = _named(UNARY, fusing=True), _named(BINARY, fusing=True)
FUSABLE_TERNARY, FUSABLE_REDUCE = _named(TERNARY, fusing=True), _named(REDUCE, fusing=True)  # row regions reduce

# the fusion markers: a region's start reads an outside value through its view; every value inside, and the region's
# end (one block per row or element; ``FusionEndWarp``: a warp per row, on a GPU), has its shape, out strides and dtype
_REGION = "shape:EList out:EList dtype:DType"
MARKERS = {"FusionStart": fields("shape:EList view:View out:EList dtype:DType"), "FusionEnd": fields(_REGION),
           "FusionEndWarp": fields(_REGION), **{f"Fused{op}": fields(_REGION)
                                                for op in (*FUSABLE_UNARY, *FUSABLE_BINARY, *FUSABLE_TERNARY)},
           **{f"Fused{op}": fields("shape:EList extent:Expression out:EList dtype:DType") for op in FUSABLE_REDUCE}}
END_MARKERS = ("FusionEnd", "FusionEndWarp")
FUSED_OPS = {name: name.removeprefix("Fused") for name in MARKERS if name.startswith("Fused")}  # fused op -> its op
IN_REGION = ("FusionStart", *FUSED_OPS)  # kernels that compute inside a region and have no buffer of their own
GPU_KERNELS = (*(op.name for op in KERNEL_OPS if op.gpu_only), "FusionEndWarp")
