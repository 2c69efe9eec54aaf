"""CPU twins of the generated matmul kernels: the same tiling, run with numpy, block by block; and the LLIR of
each implementation of a graph's contraction (``implementations``).

A twin walks the tiles in the kernel's launch order, fills the shared tiles element by element
through ``MatmulLayout`` (the offsets the CUDA C computes) with the kernel's guards, and
accumulates as the kernel's threads (``tiled``) or warps and lanes (``tensor_core``, through the
``FRAGMENTS`` table, each of whose operands must cover its fragment exactly once) do. Its result
against the reference checks the kernels' tiling and index arithmetic without a GPU.
"""

from __future__ import annotations

import numpy as np

import luminal_lab as ll
from luminal_lab.codegen.cuda_c import CudaKernel
from luminal_lab.codegen.cuda_matmul import WARP_TILES, MatmulLayout, fragments
from luminal_lab.core.dtypes import DType
from luminal_lab.core.shape_tracker import numel
from luminal_lab.core.tiling import MMA_SHAPE
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR, Kernel


def implementations(graph: ll.Graph) -> tuple[ll.Compiled, dict[str, LLIR]]:
    """The compiled graph and the LLIR of each implementation of its one contraction (by kernel label: ``Matmul``,
    ``MatmulTiled 64x64x8-4x4-v4``, ...), from the fused genome."""
    comp = ll.compile(graph)
    space = comp.choice_space()
    genome = space.fused_genome()
    (matmul,) = (k for k in extract(genome).kernels if k.op == "Matmul")
    llirs = {}
    for alternative in space.alternatives(genome, matmul.eclass):
        llir = extract(alternative)
        llirs.update({k.label: llir for k in llir.kernels if k.op.startswith("Matmul")})
    return comp, llirs


def _offset(terms, values: dict[str, np.ndarray | int], bindings: dict[str, int]) -> np.ndarray:
    total = 0
    for stride, local in terms:
        total = total + stride.evaluate(bindings, np.asarray(0 if local == "0" else values[local], np.int64))
    return np.asarray(total, np.int64)


def _tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 to tf32 (10 mantissa bits), to nearest with ties away from zero, as ``cvt.rna.tf32.f32``."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return rounded.view(np.float32)


class _Tiles:
    """What every tile of a launch shares: sizes, the operand buffers, and the shared-tile loads."""

    def __init__(self, kernel: Kernel, source: CudaKernel, buffers: list[np.ndarray], bindings: dict[str, int]):
        self.layout = layout = MatmulLayout.of(kernel)
        self.bindings = bindings
        self.rows, self.cols, self.depth = (int(e.evaluate(bindings)) for e in (layout.rows, layout.cols, layout.depth))
        self.batch = int(numel(layout.batch).evaluate(bindings))
        self.grid, self.block = source.launch(bindings)
        self.a, self.b = (buffer.astype(np.float32) for buffer in buffers)
        self.out = np.zeros(self.batch * self.rows * self.cols, np.float32)

    def origin(self, tile: int, block_m: int, block_n: int) -> tuple[int, int, int, dict[str, int]]:
        tiles_m, tiles_n = -(-self.rows // block_m), -(-self.cols // block_n)
        bz = tile // (tiles_m * tiles_n)
        batch = {local: (bz // int(inner.evaluate(self.bindings))) % int(size.evaluate(self.bindings))
                 for local, inner, size in self.layout.batch_locals()}
        return bz, (tile // tiles_n) % tiles_m * block_m, tile % tiles_n * block_n, batch

    def load(self, m0: int, n0: int, k0: int, block_m: int, block_n: int, k_step: int,
             batch: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """This step's tiles as ``a [row, k]`` and ``b [k, col]``, 0 outside the matrices."""
        return (self._tile(self.a, self.layout.a_terms(), batch, ("gm", m0, self.rows), ("gk", k0, self.depth), k_step,
                           block_m),
                self._tile(self.b, self.layout.b_terms(), batch, ("gk", k0, self.depth), ("gn", n0, self.cols),
                           block_n, k_step))

    def _tile(self, matrix: np.ndarray, terms, batch: dict[str, int], first: tuple[str, int, int],
              second: tuple[str, int, int], width: int, height: int) -> np.ndarray:
        """A ``height x width`` tile of ``matrix``: its two dims named, started and bounded by ``first`` and ``second``
        (``(local, origin, extent)``), read through the layout's offset ``terms``, 0 outside."""
        i = np.arange(height * width)
        (name_r, origin_r, extent_r), (name_c, origin_c, extent_c) = first, second
        r, c = i // width, i % width
        gr, gc = origin_r + r, origin_c + c
        valid = (gr < extent_r) & (gc < extent_c)
        index = _offset(terms, {**batch, name_r: gr, name_c: gc}, self.bindings)
        tile = np.zeros((height, width), np.float32)
        tile[r, c] = np.where(valid, matrix[np.where(valid, index, 0)], 0)
        return tile

    def store(self, bz: int, gm: np.ndarray, gn: np.ndarray, values: np.ndarray) -> None:
        valid = (gm < self.rows) & (gn < self.cols)
        self.out[((bz * self.rows + gm) * self.cols + gn)[valid]] = values[valid]


def tiled(kernel: Kernel, source: CudaKernel, buffers: list[np.ndarray], bindings: dict[str, int]) -> np.ndarray:
    """``k_matmul_tiled``'s flat output, computed as its blocks and threads do."""
    tiling = kernel.arg
    run = _Tiles(kernel, source, buffers, bindings)
    bm, bn, bk, tm, tn = tiling.block_m, tiling.block_n, tiling.k_step, tiling.thread_m, tiling.thread_n
    assert run.block == tiling.threads
    tid = np.arange(tiling.threads)
    tr, tc = tid // (bn // tn), tid % (bn // tn)
    rows_of = tr[:, None] * tm + np.arange(tm)[None, :]  # [thread, i]: the block-tile row of acc[i][.]
    cols_of = tc[:, None] * tn + np.arange(tn)[None, :]
    for tile in range(run.grid):
        bz, m0, n0, batch = run.origin(tile, bm, bn)
        acc = np.zeros((tiling.threads, tm, tn), np.float32)
        for k0 in range(0, run.depth, bk):
            a_tile, b_tile = run.load(m0, n0, k0, bm, bn, bk, batch)
            for kk in range(bk):
                acc += a_tile[rows_of, kk][:, :, None] * b_tile[kk, cols_of][:, None, :]
        gm = np.broadcast_to(m0 + rows_of[:, :, None], acc.shape)
        gn = np.broadcast_to(n0 + cols_of[:, None, :], acc.shape)
        run.store(bz, gm.reshape(-1), gn.reshape(-1), acc.reshape(-1))
    return run.out


def _fragment(entries, rows: int, cols: int, g: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each lane's (row, col) per register element; checks the table covers the ``rows x cols`` fragment once."""
    first = np.stack([e[0] * g + e[1] for e in entries], axis=1)  # [lane, element]
    second = np.stack([e[2] * t + e[3] for e in entries], axis=1)
    cells = sorted(zip(first.reshape(-1).tolist(), second.reshape(-1).tolist()))
    assert cells == [(r, c) for r in range(rows) for c in range(cols)], "the fragment table does not tile the fragment"
    return first, second


def tensor_core(kernel: Kernel, source: CudaKernel, buffers: list[np.ndarray], bindings: dict[str, int],
                dtype: DType) -> np.ndarray:
    """``k_matmul_tensor_core``'s flat output, computed as its warps and lanes do (tf32 rounding for f32)."""
    tiling = kernel.arg
    run = _Tiles(kernel, source, buffers, bindings)
    table = fragments(dtype)
    m, n, k = MMA_SHAPE[dtype]
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    a_rows, a_ks = _fragment(table["a"], m, k, g, t)
    b_cols, b_ks = _fragment(table["b"], n, k, g, t)
    c_rows, c_cols = _fragment(table["c"], m, n, g, t)
    rounding = _tf32 if dtype == DType.F32 else (lambda x: x)
    blocks_i, blocks_j = WARP_TILES
    assert run.block == tiling.threads
    for tile in range(run.grid):
        bz, m0, n0, batch = run.origin(tile, tiling.block_m, tiling.block_n)
        acc = np.zeros((tiling.warps, blocks_i, blocks_j, 32, 4), np.float32)
        for k0 in range(0, run.depth, tiling.k_step):
            a_tile, b_tile = run.load(m0, n0, k0, tiling.block_m, tiling.block_n, tiling.k_step, batch)
            a_tile, b_tile = rounding(a_tile), rounding(b_tile)
            for warp in range(tiling.warps):
                wm, wn = warp // (tiling.block_n // 32) * 32, warp % (tiling.block_n // 32) * 32
                for kk in range(0, tiling.k_step, k):
                    for i in range(blocks_i):
                        a = np.zeros((m, k), np.float32)  # the fragment, assembled from the lanes' registers
                        a[a_rows, a_ks] = a_tile[wm + i * m + a_rows, kk + a_ks]
                        for j in range(blocks_j):
                            b = np.zeros((k, n), np.float32)
                            b[b_ks, b_cols] = b_tile[kk + b_ks, wn + j * n + b_cols]
                            acc[warp, i, j] += (a @ b)[c_rows, c_cols]
        for warp in range(tiling.warps):
            wm, wn = warp // (tiling.block_n // 32) * 32, warp % (tiling.block_n // 32) * 32
            for i in range(blocks_i):
                for j in range(blocks_j):
                    run.store(bz, (m0 + wm + i * m + c_rows).reshape(-1), (n0 + wn + j * n + c_cols).reshape(-1),
                              acc[warp, i, j].reshape(-1))
    return run.out
