"""CUDA C code generation for LLIR kernels, and compilation to PTX (NVRTC, else nvcc).

Each kernel op becomes one ``extern "C" __global__`` function of the form
``void k_<op>(T *out, const S0 *in0, ..., const long long *dyn)``: ``dyn`` holds the values
of the symbolic dims the kernel uses (``CudaKernel.dyn`` names them, in order; a dim whose
name is taken by a local of the kernel is called ``dyn_<name>`` in C). Each input is read
through its view's index expression, guarded by the view's validity mask (padding reads 0).
f16/bf16 compute in float and convert on store; bool computes in int. Reductions run one
block per output element (warp shuffles, then shared memory across warps).

A fused region (``FusionStart`` ... ``FusionEnd`` markers) becomes one elementwise kernel
``k_region``, written from its position-named ``RegionBody``: ``in{j}`` is read through
``x{j}``'s view into the local ``x{j}``, step ``i`` computes the local ``t{i}`` and the last
step is stored once. Identical regions therefore give identical source.

No GPU is needed (nor used) here: the generated code is checked by compiling it to PTX
only; nothing in this module runs a kernel.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..core.dtypes import DType
from ..core.errors import LuminalError
from ..core.ops import BINARY_KERNELS, CONTRACT_KERNELS, IN_REGION, REDUCE_KERNELS, UNARY_KERNELS
from ..core.shape_tracker import ShapeTracker, numel
from ..core.symbolic import Expr, ceil_div, max_, min_, mul
from ..llir.llir import LLIR, Kernel
from ..llir.regions import Region, find_regions

BLOCK = 256
_HALF = (DType.F16, DType.BF16)
_RESERVED = {"z", "n", "m", "o", "r", "zi", "v", "acc", "out", "dyn", "lane", "warp", "off", "nw", "idx", "partial",
             "other", "min", "max", "k"}
_LOCAL = re.compile(r"(in|x|t)[0-9]+|dyn_.*")  # buffers, region locals, and the renamed dims' own prefix


@dataclass(frozen=True)
class CudaKernel:
    """One generated CUDA kernel and how to launch it.

    ``threads`` is the element count (or, when ``per_output_block``, the number of blocks);
    ``reads`` are the LLIR kernel ids bound to ``in0, in1, ...``; ``writes`` the id bound to ``out``.
    """

    name: str
    source: str
    threads: Expr
    dyn: tuple[str, ...]
    reads: tuple[int, ...]
    writes: int
    per_output_block: bool = False
    block_threads: Expr | None = None  # fixed block size expression (reductions, scatter)

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
    """The C type arithmetic runs in: float for f16/bf16, int for bool, else the storage type."""
    if dtype in _HALF:
        return "float"
    if dtype == DType.BOOL:
        return "int"
    return dtype.c_type


def _load(dtype: DType, text: str) -> str:
    if dtype == DType.F16:
        return f"__half2float({text})"
    if dtype == DType.BF16:
        return f"__bfloat162float({text})"
    return f"({compute_type(dtype)})({text})"


def _store(dtype: DType, text: str) -> str:
    if dtype == DType.F16:
        return f"__float2half_rn((float)({text}))"
    if dtype == DType.BF16:
        return f"__float2bfloat16_rn((float)({text}))"
    if dtype == DType.BOOL:
        return f"(unsigned char)(({text}) != 0)"
    return f"({dtype.c_type})({text})"


def _convert(value: str, source: DType, target: DType) -> str:
    """``value`` (in ``source``'s compute type) in ``target``'s compute type."""
    if target == DType.BOOL:
        return f"(int)(({value}) != 0)"
    return f"({compute_type(target)})({value})"


def _literal(value: Any, dtype: DType) -> str:
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


def _lowest(dtype: DType) -> str:
    if dtype.is_float:
        return _literal(float("-inf"), dtype)
    return {DType.I32: "(int)(-2147483647 - 1)", DType.I64: "(-9223372036854775807LL - 1)", DType.BOOL: "0"}[dtype]


_UNARY_FLOAT = {"Log2": "log2f({})", "Exp2": "exp2f({})", "Sin": "sinf({})", "Sqrt": "sqrtf({})",
                "Recip": "(1.0f / ({}))", "Exp": "expf({})"}
_UNARY_DOUBLE = {"Log2": "log2({})", "Exp2": "exp2({})", "Sin": "sin({})", "Sqrt": "sqrt({})",
                 "Recip": "(1.0 / ({}))", "Exp": "exp({})"}


def _unary(op: str, dtype: DType, a: str) -> str:
    ctype = compute_type(dtype)
    if ctype == "float":
        return _UNARY_FLOAT[op].format(a)
    if ctype == "double":
        return _UNARY_DOUBLE[op].format(a)
    return f"({ctype})" + _UNARY_DOUBLE[op].format(f"(double)({a})")  # ints: through double


def _binary(op: str, dtype: DType, a: str, b: str) -> str:
    ctype = compute_type(dtype)
    if op == "Add":
        return f"({a} + {b})"
    if op == "Mul":
        return f"({a} * {b})"
    if op == "LessThan":
        return f"(int)({a} < {b})"
    if ctype == "float":  # Mod
        return f"fmodf({a}, {b})"
    if ctype == "double":
        return f"fmod({a}, {b})"
    return f"(({b}) == 0 ? ({ctype})0 : ({a}) % ({b}))"  # C's truncated remainder; x % 0 reads 0


# ---- source generation --------------------------------------------------------------------------
class _Writer:
    """Collects the symbolic dims a kernel uses and renders its expressions as C."""

    def __init__(self) -> None:
        self.exprs: list[Expr] = []

    def c(self, expr: Expr, z: str = "z") -> str:
        self.exprs.append(expr)
        renamed = {v: Expr.var(_c_name(v)) for v in expr.variables() if _c_name(v) != v}
        return (expr.substitute(**renamed) if renamed else expr).to_c(z=z)

    def read(self, dtype: DType, buffer: str, view: ShapeTracker, z: str) -> str:
        """The value of logical element ``z`` of ``view`` over ``buffer``, in the compute type; 0 where padded."""
        index = self.c(view.index_expr(), z)
        valid = view.valid_expr()
        value = _load(dtype, f"{buffer}[{index}]")
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
        lines += [f"  const long long {_c_name(v)} = dyn[{i}];" for i, v in enumerate(names)]
        return "\n".join(lines), tuple(names)


def _c_name(var: str) -> str:
    """The C name of symbolic dim ``var``: itself, or ``dyn_<var>`` where a kernel local or buffer has that name."""
    usable = re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", var) and var not in _RESERVED and not _LOCAL.fullmatch(var)
    return var if usable else f"dyn_{var}"


def _source_dtypes(kernel: Kernel, llir: LLIR) -> list[DType]:
    by_id = {k.id: k for k in llir.kernels}
    return [by_id[sid].dtype for sid, _ in kernel.sources]


def kernel_source(kernel: Kernel, llir: LLIR) -> CudaKernel:
    """CUDA C for one LLIR kernel (any op but ``Input``; ``Output`` becomes a strided copy)."""
    op, out = kernel.op, kernel.dtype
    dtypes = _source_dtypes(kernel, llir)
    views = [view for _, view in kernel.sources]
    reads = tuple(sid for sid, _ in kernel.sources)
    w = _Writer()
    n_expr = numel(kernel.shape)
    name = "k_" + re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()
    if op in REDUCE_KERNELS or op in CONTRACT_KERNELS:
        return _reduce_source(kernel, name, dtypes, views, reads, w)
    if op == "Scatter":
        return _scatter_source(kernel, name, dtypes, views, reads, w)
    n = w.c(n_expr)
    if op in UNARY_KERNELS:
        value = _unary(op, out, w.read(dtypes[0], "in0", views[0], "z"))
    elif op in BINARY_KERNELS:
        a, b = (w.read(d, f"in{i}", v, "z") for i, (d, v) in enumerate(zip(dtypes, views)))
        value = _binary(op, dtypes[0], a, b)
    elif op in ("Cast", "Output"):
        value = _convert(w.read(dtypes[0], "in0", views[0], "z"), dtypes[0], out)
    elif op == "Constant":
        arg = kernel.arg
        value = f"({compute_type(out)})({w.c(arg)})" if isinstance(arg, Expr) else _literal(arg, out)
    elif op == "Iota":
        value = f"(int)({w.c(kernel.arg[0])})"
    elif op == "Gather":
        size = w.c(views[1].n_elements)
        position = w.read(dtypes[0], "in0", views[0], "z")
        body = [f"  const long long m = {size};", f"  long long idx = (long long)({position});",
                f"  {compute_type(out)} v = (idx >= 0 && idx < m) ? {w.read(dtypes[1], 'in1', views[1], 'idx')}"
                f" : ({compute_type(out)})0;"]
        return _elementwise(kernel, name, n, n_expr, body, "v", dtypes, reads, w)
    else:
        raise LuminalError(f"no CUDA code generation for kernel op {op}")
    return _elementwise(kernel, name, n, n_expr, [], value, dtypes, reads, w)


def _elementwise(kernel: Kernel, name: str, n: str, n_expr: Expr, body: list[str], value: str,
                 dtypes: list[DType], reads: tuple[int, ...], w: _Writer) -> CudaKernel:
    prefix, dyn = w.header(name, kernel.dtype, dtypes)
    lines = [prefix, f"  const long long n = {n};",
             "  long long z = blockIdx.x * (long long)blockDim.x + threadIdx.x;", "  if (z >= n) return;",
             *body, f"  out[z] = {_store(kernel.dtype, value)};", "}", ""]
    return CudaKernel(name, "\n".join(lines), n_expr, dyn, reads, kernel.id)


def _combine(op: str, dtype: DType, a: str, b: str) -> str:
    if op == "SumReduce":
        return f"{a} + {b}"
    if dtype.is_float:  # NaN wins, as np.max
        return f"(({a}) != ({a}) || ({a}) > ({b})) ? ({a}) : ({b})"
    return f"(({a}) > ({b})) ? ({a}) : ({b})"


def _reduce_source(kernel: Kernel, name: str, dtypes: list[DType], views: list[ShapeTracker], reads: tuple[int, ...],
                   w: _Writer) -> CudaKernel:
    """One block per output element, its threads striding over the reduced (last) axis of the views, then warp
    shuffles and shared memory across warps: a sum or max of one view, or (``Matmul``) the sum of two views'
    products, computed in the compute type."""
    op, out = kernel.op, kernel.dtype
    ctype = compute_type(out)
    init = _lowest(out) if op == "MaxReduce" else f"({ctype})0"
    n_expr, length = numel(kernel.shape), views[0].dims[-1]
    n, m = w.c(n_expr), w.c(length)
    a, *b = (_convert(w.read(d, f"in{i}", v, "zi"), d, out) for i, (d, v) in enumerate(zip(dtypes, views)))
    value = f"{a} * {b[0]}" if op in CONTRACT_KERNELS else a
    op = "SumReduce" if op in CONTRACT_KERNELS else op
    lines = [
        f"  const long long n = {n};", f"  const long long m = {m};",
        "  long long o = blockIdx.x;", "  if (o >= n) return;",
        f"  {ctype} acc = {init};",
        "  for (long long r = threadIdx.x; r < m; r += blockDim.x) {",
        "    long long zi = o * m + r;", f"    {ctype} v = {value};",
        f"    acc = {_combine(op, out, 'acc', 'v')};", "  }",
        "  for (int off = 16; off > 0; off >>= 1) {",
        f"    {ctype} other = __shfl_down_sync(0xffffffffu, acc, off);",
        f"    acc = {_combine(op, out, 'acc', 'other')};", "  }",
        f"  __shared__ {ctype} partial[32];",
        "  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;",
        "  if (lane == 0) partial[warp] = acc;", "  __syncthreads();",
        "  if (warp == 0) {", "    int nw = (blockDim.x + 31) >> 5;",
        f"    acc = lane < nw ? partial[lane] : {init};",
        "    for (int off = 16; off > 0; off >>= 1) {",
        f"      {ctype} other = __shfl_down_sync(0xffffffffu, acc, off);",
        f"      acc = {_combine(op, out, 'acc', 'other')};", "    }",
        f"    if (lane == 0) out[o] = {_store(out, 'acc')};", "  }", "}", ""]
    prefix, dyn = w.header(name, out, dtypes)
    # block: a multiple of 32 threads (full-warp shuffles), at most BLOCK, no more than the reduced length needs
    block = max_(32, min_(BLOCK, mul(ceil_div(length, 32), 32)))
    return CudaKernel(name, prefix + "\n" + "\n".join(lines), n_expr, dyn, reads, kernel.id,
                      per_output_block=True, block_threads=block)


def _scatter_source(kernel: Kernel, name: str, dtypes: list[DType], views: list[ShapeTracker],
                    reads: tuple[int, ...], w: _Writer) -> CudaKernel:
    """One block: copy ``dest`` with a block-stride loop, sync, then write ``src`` at the indexes."""
    out = kernel.dtype
    n_expr = numel(kernel.shape)
    n, count = w.c(n_expr), w.c(views[1].n_elements)
    dest = _convert(w.read(dtypes[0], "in0", views[0], "z"), dtypes[0], out)
    index = w.read(dtypes[1], "in1", views[1], "z")
    src = _convert(w.read(dtypes[2], "in2", views[2], "z"), dtypes[2], out)
    lines = [f"  const long long n = {n};", f"  const long long m = {count};",
             "  for (long long z = threadIdx.x; z < n; z += blockDim.x) {",
             f"    out[z] = {_store(out, dest)};", "  }", "  __syncthreads();",
             "  for (long long z = threadIdx.x; z < m; z += blockDim.x) {",
             f"    long long idx = (long long)({index});",
             f"    if (idx >= 0 && idx < n) out[idx] = {_store(out, src)};", "  }", "}", ""]
    prefix, dyn = w.header(name, out, dtypes)
    return CudaKernel(name, prefix + "\n" + "\n".join(lines), Expr.num(1), dyn, reads, kernel.id,
                      block_threads=Expr.num(BLOCK))


def region_source(region: Region, llir: LLIR) -> CudaKernel:
    """``k_region``: a fused region as one elementwise kernel that writes its ``FusionEnd`` and reads its starts'
    sources (``in{j}`` for ``x{j}``). Generated from the region's body alone: identical regions, identical source."""
    body = region.body(llir)
    dtype, w = body.dtype, _Writer()
    n_expr = numel(body.shape)
    n = w.c(n_expr)
    lines = [f"  const {compute_type(d)} x{j} = {w.read(d, f'in{j}', view, 'z')};"
             for j, (_, view, d) in enumerate(body.inputs)]
    for i, (op, names) in enumerate(body.steps):
        value = _unary(op, dtype, *names) if op in UNARY_KERNELS else _binary(op, dtype, *names)
        lines.append(f"  const {compute_type(dtype)} t{i} = {_convert(value, dtype, dtype)};")
    end = next(k for k in llir.kernels if k.id == region.end)
    return _elementwise(end, "k_region", n, n_expr, lines, body.result, [d for _, _, d in body.inputs],
                        tuple(sid for sid, _, _ in body.inputs), w)


def llir_sources(llir: LLIR) -> list[CudaKernel]:
    """A ``CudaKernel`` per kernel that has a buffer to write, in kernel order: one per fused region (at its
    ``FusionEnd``) and per other kernel but ``Input`` and contiguous-read ``Output``; region markers have none."""
    regions = {region.end: region for region in find_regions(llir)}
    kernels = []
    for kernel in llir.kernels:
        if kernel.op in ("Input", *IN_REGION) or (kernel.op == "Output" and kernel.sources[0][1].is_contiguous):
            continue
        kernels.append(region_source(regions[kernel.id], llir) if kernel.op == "FusionEnd"
                       else kernel_source(kernel, llir))
    return kernels
