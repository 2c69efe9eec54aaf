"""The op vocabulary every stage shares: the HLIR's primitive ops and the LLIR's kernel ops.

HLIR ops (``Op``) are the sixteen primitives plus ``Input``, ``Constant`` and ``Output``; their
semantics are documented in ``luminal_lab.hlir.graph``. Kernel ops are named by strings, the
HLIR op's name (``"Add"``), ``Exp`` (e^x, recognised from the exp2 chain), ``Select`` (``where``: ``a`` where
its condition is nonzero, else ``b``, recognised from the Gather over ``concat(b, a)`` that ``where`` lowers to) or
``Matmul`` (a ``Mul`` feeding a ``SumReduce``, recognised as one contraction; ``MatmulTiled`` and
``MatmulTensorCore`` are its generated GPU implementations, ``luminal_lab.core.tiling``), plus the fusion markers:
``FusionStart``, ``FusionEnd`` and one ``Fused<Op>`` per fusable op (reductions included: a row region).
"""

from __future__ import annotations

import enum

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

    def __repr__(self) -> str:
        return self.value


UNARY_OPS = (Op.LOG2, Op.EXP2, Op.SIN, Op.SQRT, Op.RECIP)
BINARY_OPS = (Op.ADD, Op.MUL, Op.MOD, Op.LESS_THAN)
REDUCE_OPS = (Op.SUM_REDUCE, Op.MAX_REDUCE)
PRIMITIVE_OPS = (*UNARY_OPS, *BINARY_OPS, *REDUCE_OPS, Op.IOTA, Op.GATHER, Op.SCATTER, Op.SCATTER_ADD,
                 Op.CAST)


UNARY_KERNELS = ("Log2", "Exp2", "Sin", "Sqrt", "Recip", "Exp")
BINARY_KERNELS = ("Add", "Mul", "Mod", "LessThan")
TERNARY_KERNELS = ("Select",)  # (condition, a, b): a where the condition is nonzero, else b
REDUCE_KERNELS = ("SumReduce", "MaxReduce")
CONTRACT_KERNELS = ("Matmul", "MatmulTiled", "MatmulTensorCore")  # a library call, generated tiles, tensor cores
# generated for a GPU only: elsewhere the contractions run as the library call, and a row region's end marked for a
# warp per row (``FusionEndWarp``) as any other end
GPU_KERNELS = ("MatmulTiled", "MatmulTensorCore", "FusionEndWarp")
END_MARKERS = ("FusionEnd", "FusionEndWarp")  # a region's end: one block per row (or element), or one warp per row
FUSABLE_UNARY = UNARY_KERNELS
FUSABLE_BINARY = ("Add", "Mul")
FUSABLE_TERNARY = TERNARY_KERNELS
FUSABLE_REDUCE = REDUCE_KERNELS  # inside a row region (``luminal_lab.egraph.fusion``)
# kernel op -> its op
FUSED_OPS = {f"Fused{op}": op for op in (*FUSABLE_UNARY, *FUSABLE_BINARY, *FUSABLE_TERNARY, *FUSABLE_REDUCE)}
IN_REGION = ("FusionStart", *FUSED_OPS)  # kernels that compute inside a region and have no buffer of their own
