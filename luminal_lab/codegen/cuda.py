"""CUDA C code generation for LLIR kernels, and compilation to PTX (NVRTC, else nvcc).

Each kernel op becomes one ``extern "C" __global__`` function of the form
``void k_<op>(T *out, const S0 *in0, ..., const long long *dyn)``: ``dyn`` holds the values
of the symbolic dims the kernel uses (``CudaKernel.dyn`` names them, in order; a dim whose
name is taken by a local of the kernel is called ``dyn_<name>`` in C). Each input is read
through its view's index expression, guarded by the view's validity mask (padding reads 0).
f16/bf16 compute in float and convert on store; bool computes in int; i8, u8 and i16 compute in
their own C type, so each op's value wraps to it. Reductions run one block per output element
(warp shuffles, then shared memory across warps). A contraction runs
as the implementation its genome picked: ``Matmul`` through cuBLAS (a library ``CudaKernel``,
nothing generated), ``MatmulTiled`` and ``MatmulTensorCore`` as ``cuda_matmul`` writes them.

A ``GatherMatmul`` runs a thread per output element, reading each row's expert matrix in place.

A fused region (``FusionStart`` ... ``FusionEnd`` markers) becomes one elementwise kernel
``k_region``, written from its position-named ``RegionBody``: ``in{j}`` is read through
``x{j}``'s view into the local ``x{j}``, step ``i`` computes the local ``t{i}`` and the last
step is stored once. Identical regions therefore give identical source. A row region (one with
reductions) becomes ``k_row_region``, scheduled by ``RowSchedule``: a block per row, or a warp per
row where its end is ``FusionEnd warp``; inputs read in several passes along short enough rows are
held in registers, and each reduction combines its lanes with warp shuffles.

No GPU is needed (nor used) here: the generated code is checked by compiling it to PTX
only; nothing in this module runs a kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.dtypes import DType
from ..core.errors import LuminalError
from ..core.ops import BINARY_KERNELS, IN_REGION, REDUCE_KERNELS, TERNARY_KERNELS, UNARY_KERNELS
from ..core.shape_tracker import ShapeTracker, format_shape, numel
from ..core.symbolic import Expr, ceil_div, max_, min_, mul
from ..llir.llir import LLIR, Kernel
from ..llir.regions import Region, RegionBody, find_regions
from .cuda_c import (
    BLOCK,
    CudaKernel,
    Writer,
    binary,
    compute_type,
    convert,
    literal,
    lowest,
    select,
    source_dtypes,
    store,
    unary,
)
from .cuda_matmul import mma_source, tiled_source


def kernel_source(kernel: Kernel, llir: LLIR) -> CudaKernel:
    """CUDA C for one LLIR kernel (any op but ``Input``; ``Output`` becomes a strided copy)."""
    op, out = kernel.op, kernel.dtype
    dtypes = source_dtypes(kernel, llir)
    views = [view for _, view in kernel.sources]
    reads = tuple(sid for sid, _ in kernel.sources)
    w = Writer()
    n_expr = numel(kernel.shape)
    name = "k_" + re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()
    if op == "Matmul":
        return _library_matmul(kernel, name, reads)
    if op == "MatmulTiled":
        return tiled_source(kernel, llir)
    if op == "MatmulTensorCore":
        return mma_source(kernel, llir)
    if op == "Opaque":
        source = f"// k{kernel.id}: {kernel.arg.name} through torch, on views of the plan's buffers\n"
        return CudaKernel(name, source, n_expr, (), reads, kernel.id, library="torch")
    if op == "GatherMatmul":
        return _gather_matmul_source(kernel, name, dtypes, reads, w)
    if op in REDUCE_KERNELS:
        return _reduce_source(kernel, name, dtypes, views, reads, w)
    if op in ("Scatter", "ScatterAdd"):
        return _scatter_source(kernel, name, dtypes, views, reads, w)
    n = w.c(n_expr)
    if op in UNARY_KERNELS:
        value = unary(op, out, w.read(dtypes[0], "in0", views[0], "z"))
    elif op in BINARY_KERNELS:
        a, b = (w.read(d, f"in{i}", v, "z") for i, (d, v) in enumerate(zip(dtypes, views)))
        value = binary(op, dtypes[0], a, b)
    elif op in TERNARY_KERNELS:
        value = select(*(w.read(d, f"in{i}", v, "z") for i, (d, v) in enumerate(zip(dtypes, views))))
    elif op in ("Cast", "Output"):
        value = convert(w.read(dtypes[0], "in0", views[0], "z"), dtypes[0], out)
    elif op == "Constant":
        arg = kernel.arg
        value = f"({compute_type(out)})({w.c(arg)})" if isinstance(arg, Expr) else literal(arg, out)
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
                 dtypes: list[DType], reads: tuple[int, ...], w: Writer) -> CudaKernel:
    prefix, dyn = w.header(name, kernel.dtype, dtypes)
    lines = [prefix, f"  const long long n = {n};",
             "  long long z = blockIdx.x * (long long)blockDim.x + threadIdx.x;", "  if (z >= n) return;",
             *body, f"  out[z] = {store(kernel.dtype, value)};", "}", ""]
    return CudaKernel(name, "\n".join(lines), n_expr, dyn, reads, kernel.id)


def _combine(op: str, dtype: DType, a: str, b: str) -> str:
    if op == "SumReduce":
        return f"{a} + {b}"
    if dtype.is_float:  # NaN wins, as np.max
        return f"(({a}) != ({a}) || ({a}) > ({b})) ? ({a}) : ({b})"
    return f"(({a}) > ({b})) ? ({a}) : ({b})"


def _reduce_source(kernel: Kernel, name: str, dtypes: list[DType], views: list[ShapeTracker], reads: tuple[int, ...],
                   w: Writer) -> CudaKernel:
    """One block per output element, its threads striding over the reduced (last) axis of the view, then warp
    shuffles and shared memory across warps, computed in the compute type."""
    op, out = kernel.op, kernel.dtype
    ctype = compute_type(out)
    init = lowest(out) if op == "MaxReduce" else f"({ctype})0"
    n_expr, length = numel(kernel.shape), views[0].dims[-1]
    n, m = w.c(n_expr), w.c(length)
    value = convert(w.read(dtypes[0], "in0", views[0], "zi"), dtypes[0], out)
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
        f"    if (lane == 0) out[o] = {store(out, 'acc')};", "  }", "}", ""]
    prefix, dyn = w.header(name, out, dtypes)
    # block: a multiple of 32 threads (full-warp shuffles), at most BLOCK, no more than the reduced length needs
    block = max_(32, min_(BLOCK, mul(ceil_div(length, 32), 32)))
    return CudaKernel(name, prefix + "\n" + "\n".join(lines), n_expr, dyn, reads, kernel.id,
                      per_output_block=True, block_threads=block)


def _gather_matmul_source(kernel: Kernel, name: str, dtypes: list[DType], reads: tuple[int, ...],
                          w: Writer) -> CudaKernel:
    """A thread per output element, summing over the contracted extent: ``a`` (``in0``) at the contraction point
    ``p``, times the data (``in2``) at ``within(q) + rows[q] * scale`` for the gather position ``q = b(p)`` (the rows:
    ``in1``), 0 outside the data (``GatheredRead``)."""
    (_, a), (_, rows), (_, data) = kernel.sources
    read, out = kernel.arg, kernel.dtype
    ctype = compute_type(out)
    n_expr = numel(kernel.shape)
    n, m = w.c(n_expr), w.c(a.dims[-1])
    b_valid = read.b.valid_expr()
    inside = "" if b_valid.is_num and b_valid.value == 1 else f"({w.c(b_valid, 'p')}) && "
    lines = [f"  const long long n = {n};", f"  const long long m = {m};", f"  const long long size = "
             f"{w.c(data.n_elements)};", "  long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
             "  if (o >= n) return;", f"  {ctype} acc = ({ctype})0;", "  for (long long k = 0; k < m; ++k) {",
             "    long long p = o * m + k;", f"    long long q = {w.c(read.b.index_expr(), 'p')};",
             f"    long long pos = (long long)({w.c(read.within, 'q')}) + (long long)"
             f"({w.read(dtypes[1], 'in1', rows, 'q')}) * (long long)({w.c(read.scale)});",
             f"    {ctype} x = {convert(w.read(dtypes[0], 'in0', a, 'p'), dtypes[0], out)};",
             f"    {ctype} y = ({inside}pos >= 0 && pos < size) ? "
             f"{convert(w.read(dtypes[2], 'in2', data, 'pos'), dtypes[2], out)} : ({ctype})0;",
             "    acc += x * y;", "  }", f"  out[o] = {store(out, 'acc')};", "}", ""]
    prefix, dyn = w.header(name, out, dtypes)
    return CudaKernel(name, prefix + "\n" + "\n".join(lines), n_expr, dyn, reads, kernel.id)


def _library_matmul(kernel: Kernel, name: str, reads: tuple[int, ...]) -> CudaKernel:
    """A contraction run by cuBLAS (``torch.mm``, or ``torch.bmm`` with a batch, on the plan's buffers): nothing to
    generate; the source says what is called."""
    (_, a), (_, b) = kernel.sources
    source = (f"// k{kernel.id}: cuBLAS through torch.mm (torch.bmm with a batch) on views of the plan's buffers, "
              "read in place or through a scratch\n"
              f"// out{format_shape(kernel.shape)} = sum over the last dim of in0 * in1, both read over "
              f"{format_shape(a.dims)}\n// in0 strides {format_shape(a.strides)}\n// in1 strides "
              f"{format_shape(b.strides)}\n")
    return CudaKernel(name, source, numel(kernel.shape), (), reads, kernel.id, library="cublas")


def _scatter_source(kernel: Kernel, name: str, dtypes: list[DType], views: list[ShapeTracker],
                    reads: tuple[int, ...], w: Writer) -> CudaKernel:
    """One block: copy ``dest`` with a block-stride loop, sync, then write ``src`` at the indexes (``ScatterAdd``:
    add it there atomically, in the dtypes CUDA has an ``atomicAdd`` for)."""
    out = kernel.dtype
    if kernel.op == "ScatterAdd" and out not in ATOMIC_ADD:
        raise LuminalError(f"ScatterAdd k{kernel.id}: CUDA has no atomicAdd for {out.value} (it has one for "
                           f"{', '.join(d.value for d in ATOMIC_ADD)})")
    n_expr = numel(kernel.shape)
    n, count = w.c(n_expr), w.c(views[1].n_elements)
    dest = convert(w.read(dtypes[0], "in0", views[0], "z"), dtypes[0], out)
    index = w.read(dtypes[1], "in1", views[1], "z")
    src = convert(w.read(dtypes[2], "in2", views[2], "z"), dtypes[2], out)
    lines = [f"  const long long n = {n};", f"  const long long m = {count};",
             "  for (long long z = threadIdx.x; z < n; z += blockDim.x) {",
             f"    out[z] = {store(out, dest)};", "  }", "  __syncthreads();",
             "  for (long long z = threadIdx.x; z < m; z += blockDim.x) {",
             f"    long long idx = (long long)({index});",
             f"    if (idx >= 0 && idx < n) {_scatter_write(kernel.op, out, store(out, src))}", "  }", "}", ""]
    prefix, dyn = w.header(name, out, dtypes)
    return CudaKernel(name, prefix + "\n" + "\n".join(lines), Expr.num(1), dyn, reads, kernel.id,
                      block_threads=Expr.num(BLOCK))


# the storage types of atomicAdd, by dtype: i64 adds as unsigned (two's complement: the same bits)
ATOMIC_ADD = {DType.F32: "float", DType.F64: "double", DType.F16: "__half", DType.BF16: "__nv_bfloat16",
              DType.I32: "int", DType.I64: "unsigned long long"}


def _scatter_write(op: str, out: DType, value: str) -> str:
    if op == "Scatter":
        return f"out[idx] = {value};"
    kind = ATOMIC_ADD[out]
    return f"atomicAdd(({kind} *)&out[idx], ({kind})({value}));"


def region_source(region: Region, llir: LLIR) -> CudaKernel:
    """``k_region``: a fused region as one elementwise kernel that writes its ``FusionEnd`` and reads its starts'
    sources (``in{j}`` for ``x{j}``). Generated from the region's body alone: identical regions, identical source."""
    body = region.body(llir)
    w = Writer()
    n_expr = numel(body.shape)
    n = w.c(n_expr)
    lines = [f"  const {compute_type(d)} x{j} = {w.read(d, f'in{j}', view, 'z')};"
             for j, (_, view, d) in enumerate(body.inputs)]
    lines += [_step(body, i, "  ") for i in range(len(body.steps))]
    end = next(k for k in llir.kernels if k.id == region.end)
    return _elementwise(end, "k_region", n, n_expr, lines, body.result, [d for _, _, d in body.inputs],
                        tuple(sid for sid, _, _ in body.inputs), w)


def _step(body: RegionBody, i: int, indent: str) -> str:
    """The statement computing a region's step ``i`` as the local ``t{i}``."""
    op, names = body.steps[i]
    if op in UNARY_KERNELS:
        value = unary(op, body.dtype, *names)
    elif op in TERNARY_KERNELS:
        value = select(*names)
    else:
        value = binary(op, body.dtype, *names)
    return f"{indent}const {compute_type(body.dtype)} t{i} = {convert(value, body.dtype, body.dtype)};"


def _block_reduce(op: str, dtype: DType, result: str) -> list[str]:
    """Each thread's ``acc`` reduced by warp shuffles, then across warps in shared memory, into ``result`` for the
    whole block."""
    init = lowest(dtype) if op == "MaxReduce" else f"({compute_type(dtype)})0"
    shuffle = ["for (int off = 16; off > 0; off >>= 1) {",
               f"  {compute_type(dtype)} other = __shfl_down_sync(0xffffffffu, acc, off);",
               f"  acc = {_combine(op, dtype, 'acc', 'other')};", "}"]
    return [*(f"  {line}" for line in shuffle), "  if (lane == 0) partial[warp] = acc;", "  __syncthreads();",
            "  if (warp == 0) {", f"    acc = lane < nw ? partial[lane] : {init};",
            *(f"    {line}" for line in shuffle), "    if (lane == 0) partial[0] = acc;", "  }", "  __syncthreads();",
            f"  {result} = partial[0];", "  __syncthreads();"]


WARPS_PER_BLOCK = 8  # rows per block where a warp runs each row
SHORT_ROW = 16  # rows no longer than this (every length a constant) run a thread each: too short to share
MAX_HELD = 32  # most elements of one input a thread keeps in registers along a row
SHARED_BYTES = 48 * 1024  # the most static shared memory a block may hold rows in


def steady_inputs(body: RegionBody) -> frozenset[int]:
    """The inputs read along the row that are the same all along it (stride 0 there): read once per row."""
    return frozenset(j for j, (_, view, _) in enumerate(body.inputs)
                     if body.extent(f"x{j}") is not None and view.strides[-1] == 0 and view.masks[-1] == 1)


def _passes(body: RegionBody) -> list[str]:
    """The values computed along the row in a pass of their own: each reduction's operand, and the end."""
    passes = [names[0] for op, names in body.steps if op in REDUCE_KERNELS and body.extent(names[0]) is not None]
    return passes + ([body.result] if body.extent(body.result) is not None else [])


def multi_pass_inputs(body: RegionBody) -> frozenset[int]:
    """The inputs read along the row (and not steady) in more than one pass: those worth holding."""
    steady = steady_inputs(body)
    read_in = [j for name in _passes(body) for j in body.reads(name)
               if body.extent(f"x{j}") is not None and j not in steady]
    return frozenset(j for j in read_in if read_in.count(j) > 1)


@dataclass(frozen=True)
class RowSchedule:
    """How ``k_row_region`` maps a row region's rows to threads. ``lanes`` threads share a row: a warp (``warp``,
    ``WARPS_PER_BLOCK`` rows per block) or the whole block of ``block`` threads (one row per block); or, where every
    row is at most ``SHORT_ROW`` long (a pairwise ``maximum`` reduces rows of 2), one thread runs each row alone
    (``thread``: ``lanes`` 1, ``block`` rows per block, no shuffles), whatever the genome asked for. Lane ``t`` of
    a row visits its elements ``t, t + lanes, ...``; ``held[k]``, for ``body.lengths[k]``, is how many of them a
    lane keeps for each input read in more than one pass (0: re-read in each pass, as where the length or the block
    is symbolic). A lane keeps them in registers where it holds at most ``MAX_HELD``, else in shared memory
    (``shared[k]``) while the block's held rows fit in ``SHARED_BYTES``: lane ``t`` keeps element ``k`` at
    ``k * lanes + t`` of its row's part, so each lane reads back only what it wrote (no barrier)."""

    warp: bool
    lanes: Expr
    block: Expr
    held: tuple[int, ...]
    shared: tuple[bool, ...]

    @classmethod
    def of(cls, body: RegionBody, warp: bool = False) -> RowSchedule:
        longest = max_(*body.lengths) if body.lengths else Expr.num(1)
        if all(length.is_num and length.value <= SHORT_ROW for length in body.lengths):
            warp, lanes, block = False, Expr.num(1), Expr.num(BLOCK)
        elif warp:
            lanes, block = Expr.num(32), Expr.num(32 * WARPS_PER_BLOCK)
        else:
            lanes = block = max_(32, min_(BLOCK, mul(ceil_div(longest, 32), 32)))
        held, shared, free = [], [], SHARED_BYTES
        multi = multi_pass_inputs(body)
        for length in body.lengths:
            n = -(-length.value // lanes.value) if length.is_num and lanes.is_num else 0
            size = (n * lanes.value * (WARPS_PER_BLOCK if warp else 1)
                    * sum(_compute_bytes(d) for j, (_, _, d) in enumerate(body.inputs)
                          if j in multi and body.extent(f"x{j}") == length)) if n else 0
            in_shared = n > MAX_HELD and size <= free
            free -= size if in_shared else 0
            held.append(n if n <= MAX_HELD or in_shared else 0)
            shared.append(in_shared)
        return cls(warp, lanes, block, tuple(held), tuple(shared))

    @property
    def thread(self) -> bool:
        """Whether each thread runs a row alone."""
        return self.lanes == Expr.num(1)

    @property
    def rows_per_block(self) -> int:
        return self.block.value if self.thread else WARPS_PER_BLOCK if self.warp else 1

    def grid(self, rows: Expr) -> Expr:
        return ceil_div(rows, self.rows_per_block)

    def row(self, block: int, thread: int) -> tuple[int, int]:
        """The row (counted over the launch: past the last for a warp of the last block) and the lane of ``thread``
        in ``block``."""
        if self.thread:
            return block * self.block.value + thread, 0
        if self.warp:
            return block * WARPS_PER_BLOCK + thread // 32, thread % 32
        return block, thread


def _compute_bytes(dtype: DType) -> int:
    return 8 if compute_type(dtype) in ("double", "long long") else 4


def row_region_source(body: RegionBody, end: int, warp: bool = False) -> CudaKernel:
    """``k_row_region``: a row region (the body of the region ending at kernel ``end``) scheduled as
    ``RowSchedule.of(body, warp)``. Per-row inputs are read at the row index ``o``; inputs read along the row in more
    than one pass are loaded once into registers or shared memory where the schedule holds them; in
    ``body.row_order()``, each
    reduction is a pass along the row in which each lane reduces its elements (what it reads computed there), then
    the row's lanes combine (warp shuffles, and across warps shared memory), and each per-row step is computed
    once its operands are known; the end is stored along the row by the lanes, or once per row. An input that
    does not change along the row (stride 0 there) is read once per row, at the row's first element."""
    dtype, w, schedule = body.dtype, Writer(), RowSchedule.of(body, warp)
    warp = schedule.warp
    ctype = compute_type(dtype)
    dtypes = [d for _, _, d in body.inputs]
    lanes = str(schedule.lanes.value) if schedule.lanes.is_num else "blockDim.x"
    lines = [f"  const long long ext{k} = {w.c(e)};" for k, e in enumerate(body.lengths)]
    if schedule.thread:
        lines += [f"  const long long o = (long long)blockIdx.x * {schedule.block.value} + threadIdx.x;",
                  f"  if (o >= {w.c(numel(body.rows))}) return;", "  const int t = 0;"]
    elif warp:
        lines += ["  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;",
                  f"  const long long o = (long long)blockIdx.x * {WARPS_PER_BLOCK} + warp;",
                  f"  if (o >= {w.c(numel(body.rows))}) return;  // a whole warp: its shuffles stay full",
                  "  const int t = lane;"]
    else:
        lines += ["  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;",
                  "  const long long o = blockIdx.x;", "  const int t = threadIdx.x, nw = (blockDim.x + 31) >> 5;",
                  f"  __shared__ {ctype} partial[32];"]
    lines += [f"  const {compute_type(d)} x{j} = {w.read(d, f'in{j}', view, 'o')};"
              for j, (_, view, d) in enumerate(body.inputs) if body.extent(f"x{j}") is None]
    steady = steady_inputs(body)
    lines += [f"  const {compute_type(dtypes[j])} x{j} = {w.read(dtypes[j], f'in{j}', body.inputs[j][1], z)};"
              for j in sorted(steady) for z in [f"(o * ext{body.lengths.index(body.extent(f'x{j}'))})"]]
    held = {j for j in multi_pass_inputs(body) if schedule.held[body.lengths.index(body.extent(f"x{j}"))]}
    slot: dict[int, str] = {}  # held input -> its element k of this lane

    def loop(length: int, inner: list[str]) -> list[str]:
        """``inner`` for each element ``z`` (row ``o``, position ``r``) a lane visits along rows of ``ext{length}``."""
        guard = [f"    const long long z = o * ext{length} + r;", *(f"  {line}" for line in inner)]
        if schedule.held[length]:
            unroll = [] if schedule.shared[length] else ["  #pragma unroll"]
            return [*unroll, f"  for (int k = 0; k < {schedule.held[length]}; ++k) {{",
                    f"    const long long r = t + (long long)k * {lanes};", f"    if (r < ext{length}) {{",
                    *(f"  {line}" for line in guard), "    }", "  }"]
        return [f"  for (long long r = t; r < ext{length}; r += {lanes}) {{", *guard, "  }"]

    for j in sorted(held):
        length = body.lengths.index(body.extent(f"x{j}"))
        n, ctype_j = schedule.held[length], compute_type(dtypes[j])
        if schedule.shared[length]:  # this row's part of the block's array; lane t at k * lanes + t
            part = f"{n} * {lanes}"
            lines += [f"  __shared__ {ctype_j} hs{j}[{schedule.rows_per_block} * {part}];",
                      f"  {ctype_j}* h{j} = hs{j} + {'warp' if warp else '0'} * {part};"]
            slot[j] = f"h{j}[k * {lanes} + t]"
        else:
            lines.append(f"  {ctype_j} h{j}[{n}];")
            slot[j] = f"h{j}[k]"
        lines += loop(length, [f"  {slot[j]} = {w.read(dtypes[j], f'in{j}', body.inputs[j][1], 'z')};"])

    def along(name: str, inner: list[str]) -> list[str]:
        """A pass along ``name``'s row: what computes ``name`` at ``z``, then ``inner``."""
        reads = [f"  const {compute_type(dtypes[j])} x{j} = "
                 + (f"{slot[j]};" if j in held else f"{w.read(dtypes[j], f'in{j}', body.inputs[j][1], 'z')};")
                 for j in body.reads(name) if body.extent(f"x{j}") is not None and j not in steady]
        steps = [_step(body, i, "  ") for i in body.needs(name)]
        return loop(body.lengths.index(body.extent(name)), [*reads, *steps, *inner])

    for i in body.row_order():
        op, names = body.steps[i]
        if op not in REDUCE_KERNELS:
            lines.append(_step(body, i, "  "))
        elif body.extent(names[0]) is None:  # a row of length 1
            lines.append(f"  const {ctype} t{i} = {names[0]};")
        else:
            init = lowest(dtype) if op == "MaxReduce" else f"({ctype})0"
            if schedule.thread:  # the row's one lane holds the result
                lanes_combine = [f"  t{i} = acc;"]
            elif warp:  # every lane ends with the warp's value
                lanes_combine = [*_warp_reduce(op, dtype), f"  t{i} = acc;"]
            else:
                lanes_combine = _block_reduce(op, dtype, f"t{i}")
            lines += [f"  {ctype} t{i};", f"  {{ {ctype} acc = {init};",
                      *along(names[0], [f"  acc = {_combine(op, dtype, 'acc', names[0])};"]), *lanes_combine, "  }"]
    if body.extent(body.result) is None:
        lines += [f"  if (t == 0) out[o] = {store(dtype, body.result)};"]
    else:
        lines += along(body.result, [f"  out[z] = {store(dtype, body.result)};"])
    prefix, dyn = w.header("k_row_region", dtype, dtypes)
    return CudaKernel("k_row_region", "\n".join([prefix, *lines, "}", ""]), schedule.grid(numel(body.rows)), dyn,
                      tuple(sid for sid, _, _ in body.inputs), end, per_output_block=True,
                      block_threads=schedule.block)


def _warp_reduce(op: str, dtype: DType) -> list[str]:
    """Each lane's ``acc`` combined across its warp by butterfly shuffles: every lane ends with the warp's value."""
    return ["  for (int off = 16; off > 0; off >>= 1) {",
            f"    const {compute_type(dtype)} other = __shfl_xor_sync(0xffffffffu, acc, off);",
            f"    acc = {_combine(op, dtype, 'acc', 'other')};", "  }"]


def llir_sources(llir: LLIR) -> list[CudaKernel]:
    """A ``CudaKernel`` per kernel that has a buffer to write, in kernel order: one per fused region (at its
    ``FusionEnd``) and per other kernel but ``Input`` and contiguous-read ``Output``; region markers have none."""
    regions = {region.end: region for region in find_regions(llir)}
    kernels = []
    for kernel in llir.kernels:
        if kernel.op in ("Input", *IN_REGION) or (kernel.op == "Output" and kernel.sources[0][1].is_contiguous):
            continue
        if kernel.op == "FusionEnd":
            body = regions[kernel.id].body(llir)
            kernels.append(region_source(regions[kernel.id], llir) if body.rows is None
                           else row_region_source(body, kernel.id, warp=kernel.arg == "warp"))
        else:
            kernels.append(kernel_source(kernel, llir))
    return kernels
