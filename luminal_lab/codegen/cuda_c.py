"""CUDA C building blocks: the ``CudaKernel`` record, dtype conversions, literals, the unary and
binary ops, and the ``Writer`` that renders index expressions as C and collects the symbolic dims a
kernel reads from its ``dyn`` array. ``cuda`` and ``cuda_matmul`` write kernels with them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..core.dtypes import DType, cast_path
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import Expr, ceil_div, max_, min_
from ..llir.llir import LLIR, Kernel

BLOCK = 256
HALF = (DType.F16, DType.BF16)
_RESERVED = {"z", "n", "m", "o", "r", "zi", "v", "acc", "out", "dyn", "lane", "warp", "off", "nw", "idx", "partial",
             "other", "min", "max", "k", "c", "e", "g", "i", "j", "kk", "k0", "m0", "n0", "bz", "gm", "gn", "gk", "tid",
             "tr", "tc", "ra", "rb", "rows", "cols", "depth", "tile", "tiles_m", "tiles_n", "wm", "wn", "As", "Bs",
             "fa", "fb"}
_LOCAL = re.compile(r"(in|x|t|b|ext)[0-9]+|dyn_.*")  # buffers, region, batch and extent locals, renamed dims' prefix


@dataclass(frozen=True)
class CudaKernel:
    """One generated CUDA kernel and how to launch it.

    ``threads`` is the element count (or, when ``per_output_block``, the number of blocks);
    ``reads`` are the LLIR kernel ids bound to ``in0, in1, ...``; ``writes`` the id bound to ``out``.
    ``library`` names the library call that runs the kernel instead of generated code (its ``source`` then
    says what is called, and nothing is compiled).
    """

    name: str
    source: str
    threads: Expr
    dyn: tuple[str, ...]
    reads: tuple[int, ...]
    writes: int
    per_output_block: bool = False
    block_threads: Expr | None = None  # fixed block size expression (reductions, scatter, matmul tiles)
    library: str = ""

    def launch(self, bindings: dict[str, int] | None = None) -> tuple[int, int]:
        """``(grid, block)`` for these symbolic-dim bindings; grid 0 means nothing to launch."""
        grid, block = self.launch_exprs()
        return int(grid.evaluate(bindings)), int(block.evaluate(bindings))

    def launch_exprs(self) -> tuple[Expr, Expr]:
        """``(grid, block)`` as expressions in the symbolic dims: one thread per element in blocks of ``BLOCK``,
        or ``threads`` blocks (one per output) of ``block_threads``, or one such block (none when empty)."""
        if self.block_threads is not None:
            return (self.threads if self.per_output_block else min_(self.threads, 1)), self.block_threads
        return ceil_div(self.threads, BLOCK), max_(1, min_(self.threads, BLOCK))

    def dyn_values(self, bindings: dict[str, int]) -> list[int]:
        """The ``dyn`` array to pass for these bindings."""
        return [int(bindings[name]) for name in self.dyn]


# ---- dtype helpers -----------------------------------------------------------------------------
def compute_type(dtype: DType) -> str:
    """The C type arithmetic runs in: float for f16/bf16, int for bool, else the storage type (so each op's value
    wraps to an i8, u8 or i16 where it is assigned)."""
    if dtype in HALF:
        return "float"
    if dtype == DType.BOOL:
        return "int"
    return dtype.c_type


def load(dtype: DType, text: str) -> str:
    if dtype == DType.F16:
        return f"__half2float({text})"
    if dtype == DType.BF16:
        return f"__bfloat162float({text})"
    return f"({compute_type(dtype)})({text})"


def store(dtype: DType, text: str) -> str:
    if dtype == DType.F16:
        return f"__float2half_rn((float)({text}))"
    if dtype == DType.BF16:
        return f"__float2bfloat16_rn((float)({text}))"
    if dtype == DType.BOOL:
        return f"(unsigned char)(({text}) != 0)"
    return f"({dtype.c_type})({text})"


def convert(value: str, source: DType, target: DType) -> str:
    """``value`` (in ``source``'s compute type) in ``target``'s compute type, through ``cast_path`` (so a float
    becomes an i8, u8 or i16 wrapped, not saturated as a direct conversion on the GPU would)."""
    if target == DType.BOOL:
        return f"(int)(({value}) != 0)"
    for step in cast_path(source, target):
        value = f"({compute_type(step)})({value})"
    return value


def literal(value: Any, dtype: DType) -> str:
    """A C literal of ``value`` in ``dtype``'s compute type."""
    ctype = compute_type(dtype)
    if dtype.is_float:
        x = float(value)
        if math.isnan(x):
            return "__longlong_as_double(0x7ff8000000000000LL)" if ctype == "double" else "__int_as_float(0x7fc00000)"
        if math.isinf(x):
            if ctype == "double":
                return f"{'-' if x < 0 else ''}__longlong_as_double(0x7ff0000000000000LL)"
            return f"{'-' if x < 0 else ''}__int_as_float(0x7f800000)"
        return f"({ctype})({x.hex()})"
    if dtype == DType.BOOL:
        return "1" if value else "0"
    return f"({ctype})({int(value)}LL)"


def lowest(dtype: DType) -> str:
    """``dtype``'s smallest value as a C expression in its compute type (a max-reduction's start)."""
    if dtype.is_float:
        return literal(float("-inf"), dtype)
    return f"({compute_type(dtype)})({dtype.lowest + 1}LL - 1)"  # the LL literal of -2**63 does not exist


_UNARY = {  # op -> (float, double)
    "Log2": ("log2f({})", "log2({})"),
    "Exp2": ("exp2f({})", "exp2({})"),
    "Sin": ("sinf({})", "sin({})"),
    "Sqrt": ("sqrtf({})", "sqrt({})"),
    "Recip": ("(1.0f / ({}))", "(1.0 / ({}))"),
    "Exp": ("expf({})", "exp({})"),
    "Tanh": ("tanhf({})", "tanh({})"),
}


_BINARY = {"Add": "({a} + {b})", "Mul": "({a} * {b})", "LessThan": "(int)({a} < {b})"}


def unary(op: str, dtype: DType, a: str) -> str:
    ctype = compute_type(dtype)
    if ctype in ("float", "double"):
        return _UNARY[op][ctype == "double"].format(a)
    return f"({ctype})" + _UNARY[op][1].format(f"(double)({a})")  # ints: through double


def binary(op: str, dtype: DType, a: str, b: str) -> str:
    ctype = compute_type(dtype)
    if op in _BINARY:
        return _BINARY[op].format(a=a, b=b)
    if ctype == "float":  # Mod
        return f"fmodf({a}, {b})"
    if ctype == "double":
        return f"fmod({a}, {b})"
    return f"(({b}) == 0 ? ({ctype})0 : ({a}) % ({b}))"  # C's truncated remainder; x % 0 reads 0


def select(condition: str, a: str, b: str) -> str:
    """``a`` where ``condition`` is nonzero, else ``b`` (a Select)."""
    return f"(({condition}) != 0 ? ({a}) : ({b}))"


# ---- source generation --------------------------------------------------------------------------
class Writer:
    """Collects the symbolic dims a kernel uses and renders its expressions as C."""

    def __init__(self) -> None:
        self.exprs: list[Expr] = []

    def c(self, expr: Expr, z: str = "z") -> str:
        self.exprs.append(expr)
        renamed = {v: Expr.var(c_name(v)) for v in expr.variables() if c_name(v) != v}
        return (expr.substitute(**renamed) if renamed else expr).to_c(z=z)

    def read(self, dtype: DType, buffer: str, view: ShapeTracker, z: str) -> str:
        """The value of logical element ``z`` of ``view`` over ``buffer``, in the compute type; 0 where padded."""
        index = self.c(view.index_expr(), z)
        valid = view.valid_expr()
        value = load(dtype, f"{buffer}[{index}]")
        if valid.is_num and valid.value == 1:
            return value
        return f"(({self.c(valid, z)}) ? {value} : ({compute_type(dtype)})0)"

    def header(self, name: str, out: DType, inputs: list[DType]) -> tuple[str, tuple[str, ...]]:
        """Includes, signature and ``dyn`` declarations; returns (that text, the dyn names in order)."""
        names = sorted({v for e in self.exprs for v in e.variables()})
        params = [f"{out.c_type} *__restrict__ out"]
        params += [f"const {d.c_type} *__restrict__ in{i}" for i, d in enumerate(inputs)]
        params.append("const long long *__restrict__ dyn")
        lines = ["#include <cuda_fp16.h>", "#include <cuda_bf16.h>", "",
                 f'extern "C" __global__ void {name}({", ".join(params)}) {{']
        lines += [f"  const long long {c_name(v)} = dyn[{i}];" for i, v in enumerate(names)]
        return "\n".join(lines), tuple(names)


def c_name(var: str) -> str:
    """The C name of symbolic dim ``var``: itself, or ``dyn_<var>`` where a kernel local or buffer has that name."""
    usable = re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", var) and var not in _RESERVED and not _LOCAL.fullmatch(var)
    return var if usable else f"dyn_{var}"


def source_dtypes(kernel: Kernel, llir: LLIR) -> list[DType]:
    by_id = {k.id: k for k in llir.kernels}
    return [by_id[sid].dtype for sid, _ in kernel.sources]
