"""CUDA C for a contraction's generated implementations: shared-memory tiles and tensor cores.

Both kernels see the output as a batch of ``rows x cols`` matrices (the kernel's shape
``[*batch, rows, cols]``, contiguous) and ``depth`` as the contracted extent. A block computes
one output tile: ``blockIdx.x`` counts tiles column-fastest, then rows, then batch. Each
contracted step copies an ``a`` tile and a ``b`` tile into shared memory, every element read
through ``MatmulLayout`` (its buffer offset for batch ``b{i}``, row ``gm``, column ``gn`` and
contracted index ``gk``: the views' strides with those locals for ``z``), 0 outside the matrices.

- ``tiled_source`` (``MatmulTiled``, a ``Tiling``): thread ``tid`` computes the
  ``thread_m x thread_n`` sub-tile at row ``tr * thread_m`` and column ``tc * thread_n`` of the
  block tile (``tr = tid / (block_n / thread_n)``, ``tc`` the rest), reading ``As[kk][..]`` and
  ``Bs[kk][..]`` ``vector`` elements at a time, and accumulating in the compute type.
- ``mma_source`` (``MatmulTensorCore``, an ``MmaTiling``): warp ``w`` computes the 32x32 tile at
  ``(w / (block_n / 32), w % (block_n / 32))`` as 2x4 ``mma.sync`` tiles of 16x8, in f32. Both
  shared tiles keep the contracted dim innermost (``As[row][k]``, ``Bs[col][k]``). Which elements
  a lane holds is ``FRAGMENTS`` (PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8"): per
  operand, each register element's two indices as ``g * g_mult + g_add`` and ``t * t_mult + t_add``
  for the lane's group ``g = lane / 4`` and thread in group ``t = lane % 4``: ``a`` (row, k), ``b``
  (column, k), ``c`` (row, column). f16/bf16 elements are packed two per 32-bit register, the
  first in the low half; f32 is rounded to tf32 (``cvt.rna``).

The layout, the launch geometry and the fragment table are data, so that a CPU twin can run
the same tiling with numpy (``tests/helpers/matmul_twin.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.dtypes import DType
from ..core.shape_tracker import ShapeTracker, numel
from ..core.symbolic import Expr, ceil_div, mul
from ..core.tiling import MMA_SHAPE, MmaTiling, Tiling
from ..llir.llir import LLIR, Kernel
from .cuda_c import CudaKernel, Writer, compute_type, convert, load, source_dtypes, store

# (g_mult, g_add, t_mult, t_add) of each element a lane holds, in register order (see the module docstring)
Entry = tuple[int, int, int, int]
FRAGMENTS: dict[str, dict[str, tuple[Entry, ...]]] = {
    "f16": {  # m16n8k16 (f16 and bf16): a in four registers of two values, b in two, c in four floats
        "a": ((1, 0, 2, 0), (1, 0, 2, 1), (1, 8, 2, 0), (1, 8, 2, 1), (1, 0, 2, 8), (1, 0, 2, 9), (1, 8, 2, 8),
              (1, 8, 2, 9)),
        "b": ((1, 0, 2, 0), (1, 0, 2, 1), (1, 0, 2, 8), (1, 0, 2, 9)),
        "c": ((1, 0, 2, 0), (1, 0, 2, 1), (1, 8, 2, 0), (1, 8, 2, 1)),
    },
    "tf32": {  # m16n8k8: one value per register
        "a": ((1, 0, 1, 0), (1, 8, 1, 0), (1, 0, 1, 4), (1, 8, 1, 4)),
        "b": ((1, 0, 1, 0), (1, 0, 1, 4)),
        "c": ((1, 0, 2, 0), (1, 0, 2, 1), (1, 8, 2, 0), (1, 8, 2, 1)),
    },
}
WARP_TILES = (2, 4)  # a warp's 32x32 tile in mma tiles of 16 rows by 8 columns
_BITS = {DType.F16: "__half_as_ushort", DType.BF16: "__bfloat16_as_ushort"}


def fragments(dtype: DType) -> dict[str, tuple[Entry, ...]]:
    """The fragment table of a tensor-core kernel over ``dtype``: f16 and bf16 share one, f32 runs as tf32."""
    return FRAGMENTS["tf32" if dtype == DType.F32 else "f16"]


@dataclass(frozen=True)
class MatmulLayout:
    """A row-by-column contraction's geometry: ``shape`` ``[*batch, rows, cols]``, ``depth``, and the two views over
    ``shape + [depth]`` (``a`` constant along the columns, ``b`` along the rows)."""

    shape: tuple[Expr, ...]
    depth: Expr
    a: ShapeTracker
    b: ShapeTracker

    @classmethod
    def of(cls, kernel: Kernel) -> MatmulLayout:
        (_, a), (_, b) = kernel.sources
        return cls(kernel.shape, a.dims[-1], a, b)

    @property
    def batch(self) -> tuple[Expr, ...]:
        return self.shape[:-2]

    @property
    def rows(self) -> Expr:
        return self.shape[-2]

    @property
    def cols(self) -> Expr:
        return self.shape[-1]

    def batch_locals(self) -> list[tuple[str, Expr, Expr]]:
        """``(local, inner, size)`` per batch dim: ``b{i} = (bz / inner) % size``."""
        return [(f"b{i}", numel(self.batch[i + 1:]), size) for i, size in enumerate(self.batch)]

    def a_terms(self) -> list[tuple[Expr, str]]:
        """``(stride in z, the local that stands for z)`` whose sum is the offset of ``a[b, gm, gk]`` (``"0"``: a
        dim it does not vary along)."""
        return self._terms(self.a, "gm", None)

    def b_terms(self) -> list[tuple[Expr, str]]:
        """As ``a_terms``, for ``b[b, gk, gn]``."""
        return self._terms(self.b, None, "gn")

    def _terms(self, view: ShapeTracker, row: str | None, col: str | None) -> list[tuple[Expr, str]]:
        locals_ = [f"b{i}" for i in range(len(self.batch))] + [row, col, "gk"]
        terms = [(stride, local) if local else (stride.substitute(z=0), "0")
                 for stride, local in zip(view.strides, locals_)]
        return [(stride, local) for stride, local in terms if not (stride.is_num and stride.value == 0)]

    def tiles(self, block_m: int, block_n: int) -> Expr:
        """Blocks to launch: one per output tile."""
        return mul(numel(self.batch), ceil_div(self.rows, block_m), ceil_div(self.cols, block_n))


def _offset(w: Writer, terms: list[tuple[Expr, str]]) -> str:
    return " + ".join(f"({w.c(stride, local)})" for stride, local in terms) or "0"


def _prologue(w: Writer, layout: MatmulLayout, block_m: int, block_n: int) -> list[str]:
    """The tile this block computes, and its batch indices."""
    lines = [f"  const long long rows = {w.c(layout.rows)}, cols = {w.c(layout.cols)}, depth = {w.c(layout.depth)};",
             f"  const long long tiles_m = (rows + {block_m - 1}) / {block_m}, "
             f"tiles_n = (cols + {block_n - 1}) / {block_n};",
             "  const long long tile = blockIdx.x, bz = tile / (tiles_m * tiles_n);",
             f"  const long long m0 = (tile / tiles_n) % tiles_m * {block_m}, n0 = tile % tiles_n * {block_n};"]
    lines += [f"  const long long {local} = (bz / ({w.c(inner)})) % ({w.c(size)});"
              for local, inner, size in layout.batch_locals()]
    return lines


def _tile_loads(w: Writer, layout: MatmulLayout, tiling: Tiling | MmaTiling, a_at: str, b_at: str,
                reader: dict[str, str], zero: str) -> list[str]:
    """Copy this step's ``a`` tile (``block_m x k_step``) and ``b`` tile (``k_step x block_n``) into shared memory,
    element ``i`` of each to ``a_at``/``b_at`` (over ``r`` and ``c``, its row and column in the tile), read by
    ``reader[buffer]`` (a format of ``{x}``, the loaded element); ``zero`` outside the matrices. Consecutive threads
    take consecutive elements along ``a``'s contracted dim and ``b``'s columns."""
    bm, bn, bk, threads = tiling.block_m, tiling.block_n, tiling.k_step, tiling.threads
    a_read = reader["in0"].format(x=f"in0[{_offset(w, layout.a_terms())}]")
    b_read = reader["in1"].format(x=f"in1[{_offset(w, layout.b_terms())}]")
    return [
        f"    for (int i = threadIdx.x; i < {bm * bk}; i += {threads}) {{",
        f"      const int r = i / {bk}, c = i % {bk};",
        "      const long long gm = m0 + r, gk = k0 + c;",
        f"      {a_at} = (gm < rows && gk < depth) ? {a_read} : {zero};", "    }",
        f"    for (int i = threadIdx.x; i < {bk * bn}; i += {threads}) {{",
        f"      const int r = i / {bn}, c = i % {bn};",
        "      const long long gk = k0 + r, gn = n0 + c;",
        f"      {b_at} = (gk < depth && gn < cols) ? {b_read} : {zero};", "    }",
        "    __syncthreads();"]


def _kernel(kernel: Kernel, llir: LLIR, name: str, w: Writer, body: list[str], layout: MatmulLayout,
            tiling: Tiling | MmaTiling) -> CudaKernel:
    prefix, dyn = w.header(name, kernel.dtype, source_dtypes(kernel, llir))
    return CudaKernel(name, prefix + "\n" + "\n".join(body), layout.tiles(tiling.block_m, tiling.block_n), dyn,
                      tuple(s for s, _ in kernel.sources), kernel.id, per_output_block=True,
                      block_threads=Expr.num(tiling.threads))


def tiled_source(kernel: Kernel, llir: LLIR) -> CudaKernel:
    """``k_matmul_tiled``: a ``Tiling`` of the contraction through shared memory, each thread a register tile."""
    tiling: Tiling = kernel.arg
    layout, out, w = MatmulLayout.of(kernel), kernel.dtype, Writer()
    ctype = compute_type(out)
    bm, bn, bk, tm, tn = tiling.block_m, tiling.block_n, tiling.k_step, tiling.thread_m, tiling.thread_n
    vector = tiling.vector if ctype == "float" else 1
    reader = {f"in{i}": convert(load(d, "{x}"), d, out) for i, d in enumerate(source_dtypes(kernel, llir))}
    body = [*_prologue(w, layout, bm, bn),
            f"  __shared__ __align__(16) {ctype} As[{bk}][{bm}];",
            f"  __shared__ __align__(16) {ctype} Bs[{bk}][{bn}];",
            f"  const int tr = threadIdx.x / {bn // tn}, tc = threadIdx.x % {bn // tn};",
            f"  {ctype} acc[{tm}][{tn}];",
            f"  for (int i = 0; i < {tm}; ++i) for (int j = 0; j < {tn}; ++j) acc[i][j] = 0;",
            f"  for (long long k0 = 0; k0 < depth; k0 += {bk}) {{",
            *_tile_loads(w, layout, tiling, "As[c][r]", "Bs[r][c]", reader, f"({ctype})0"),
            "#pragma unroll",
            f"    for (int kk = 0; kk < {bk}; ++kk) {{",
            f"      {ctype} ra[{tm}], rb[{tn}];",
            *_register_loads("ra", f"As[kk][tr * {tm} + i]", tm, vector),
            *_register_loads("rb", f"Bs[kk][tc * {tn} + i]", tn, vector),
            "#pragma unroll",
            f"      for (int i = 0; i < {tm}; ++i)",
            "#pragma unroll",
            f"        for (int j = 0; j < {tn}; ++j) acc[i][j] += ra[i] * rb[j];",
            "    }",
            "    __syncthreads();",
            "  }",
            f"  for (int i = 0; i < {tm}; ++i) {{",
            f"    const long long gm = m0 + tr * {tm} + i;",
            f"    for (int j = 0; j < {tn}; ++j) {{",
            f"      const long long gn = n0 + tc * {tn} + j;",
            f"      if (gm < rows && gn < cols) out[(bz * rows + gm) * cols + gn] = {store(out, 'acc[i][j]')};",
            "    }", "  }", "}", ""]
    return _kernel(kernel, llir, "k_matmul_tiled", w, body, layout, tiling)


def _register_loads(target: str, at: str, count: int, vector: int) -> list[str]:
    """``target[i] = at`` for ``i < count``, ``vector`` elements per shared-memory load (float2/float4)."""
    if vector == 1:
        return ["#pragma unroll", f"      for (int i = 0; i < {count}; ++i) {target}[i] = {at};"]
    assign = " ".join(f"{target}[i + {p}] = v.{c};" for p, c in enumerate("xyzw"[:vector]))
    return ["#pragma unroll", f"      for (int i = 0; i < {count}; i += {vector}) {{",
            f"        const float{vector} v = *reinterpret_cast<const float{vector} *>(&{at});", f"        {assign}",
            "      }"]


def mma_source(kernel: Kernel, llir: LLIR) -> CudaKernel:
    """``k_matmul_tensor_core``: an ``MmaTiling`` of the contraction on tensor cores (``mma.sync``), accumulating in
    f32."""
    tiling: MmaTiling = kernel.arg
    layout, out, w = MatmulLayout.of(kernel), kernel.dtype, Writer()
    dtype = source_dtypes(kernel, llir)[0]
    table = fragments(dtype)
    bm, bn, bk = tiling.block_m, tiling.block_n, tiling.k_step
    wide = dtype == DType.F32  # tf32: one float per register; f16/bf16: two 16-bit values per register
    element, pad = ("float", 4) if wide else ("unsigned short", 8)
    reader = {name: "{x}" if wide else _BITS[dtype] + "({x})" for name in ("in0", "in1")}
    rows_i, cols_j = WARP_TILES
    body = [*_prologue(w, layout, bm, bn),
            f"  __shared__ __align__(16) {element} As[{bm}][{bk + pad}];",
            f"  __shared__ __align__(16) {element} Bs[{bn}][{bk + pad}];",
            "  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;",
            f"  const int wm = warp / {bn // 32} * 32, wn = warp % {bn // 32} * 32;",
            f"  float acc[{rows_i}][{cols_j}][4];",
            f"  for (int i = 0; i < {rows_i}; ++i) for (int j = 0; j < {cols_j}; ++j) for (int e = 0; e < 4; ++e) "
            "acc[i][j][e] = 0;",
            f"  for (long long k0 = 0; k0 < depth; k0 += {bk}) {{",
            *_tile_loads(w, layout, tiling, "As[r][c]", "Bs[c][r]", reader, "0"),
            "#pragma unroll",
            f"    for (int kk = 0; kk < {bk}; kk += {MMA_SHAPE[dtype][2]}) {{",
            *_fragment_loads("fa", "As", rows_i, 16, "wm", table["a"], wide),
            *_fragment_loads("fb", "Bs", cols_j, 8, "wn", table["b"], wide),
            "#pragma unroll",
            f"      for (int i = 0; i < {rows_i}; ++i)",
            "#pragma unroll",
            f"        for (int j = 0; j < {cols_j}; ++j)",
            f"          {_mma_asm(dtype)}",
            "    }",
            "    __syncthreads();",
            "  }",
            f"  for (int i = 0; i < {rows_i}; ++i) for (int j = 0; j < {cols_j}; ++j) {{"]
    for e, (g_mult, g_add, t_mult, t_add) in enumerate(table["c"]):
        body += [f"    {{ const long long gm = m0 + wm + i * 16 + {g_mult} * g + {g_add}, "
                 f"gn = n0 + wn + j * 8 + {t_mult} * t + {t_add};",
                 f"      if (gm < rows && gn < cols) out[(bz * rows + gm) * cols + gn] = "
                 f"{store(out, f'acc[i][j][{e}]')}; }}"]
    body += ["  }", "}", ""]
    return _kernel(kernel, llir, "k_matmul_tensor_core", w, body, layout, tiling)


def _fragment_loads(name: str, tile: str, blocks: int, size: int, warp_offset: str, entries: tuple[Entry, ...],
                    wide: bool) -> list[str]:
    """A lane's registers of ``blocks`` mma tiles (``size`` rows of ``tile`` apart) for contracted step ``kk``:
    ``name[i][r]``, from the fragment table's ``entries``."""

    def at(entry: Entry) -> str:
        g_mult, g_add, t_mult, t_add = entry
        return f"{tile}[{warp_offset} + i * {size} + {g_mult} * g + {g_add}][kk + {t_mult} * t + {t_add}]"

    per = 1 if wide else 2
    lines = [f"      unsigned {name}[{blocks}][{len(entries) // per}];",
             "#pragma unroll", f"      for (int i = 0; i < {blocks}; ++i) {{"]
    for r in range(len(entries) // per):
        if wide:
            lines.append(f'        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"({name}[i][{r}]) : "f"({at(entries[r])}));')
        else:
            low, high = entries[2 * r], entries[2 * r + 1]
            lines.append(f"        {name}[i][{r}] = (unsigned){at(low)} | ((unsigned){at(high)} << 16);")
    lines.append("      }")
    return lines


def _mma_asm(dtype: DType) -> str:
    """One ``mma.sync`` accumulating ``fa[i] x fb[j]`` into ``acc[i][j]``."""
    kind = {DType.F16: "f16", DType.BF16: "bf16", DType.F32: "tf32"}[dtype]
    m, n, k = MMA_SHAPE[dtype]
    a_regs, b_regs = len(fragments(dtype)["a"]) // (1 if dtype == DType.F32 else 2), 2
    a = ", ".join(f"%{4 + r}" for r in range(a_regs))
    b = ", ".join(f"%{4 + a_regs + r}" for r in range(b_regs))
    inputs = ", ".join([*(f'"r"(fa[i][{r}])' for r in range(a_regs)), *(f'"r"(fb[j][{r}])' for r in range(b_regs))])
    outputs = ", ".join(f'"+f"(acc[i][j][{e}])' for e in range(4))
    return (f'asm volatile("mma.sync.aligned.m{m}n{n}k{k}.row.col.f32.{kind}.{kind}.f32 {{%0, %1, %2, %3}}, '
            f'{{{a}}}, {{{b}}}, {{%0, %1, %2, %3}};" : {outputs} : {inputs});')
