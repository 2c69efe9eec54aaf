"""The CPU code generator on its own: shape-tracker reads lowered to a ``Loop`` (``codegen.cpu_loop``), sources
written for its operands (``codegen.cpu``), compiled with numba and called as ``Loop`` states, against numpy and the
tracker's own index and validity expressions (what the CUDA kernels compute)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

from luminal_lab.codegen.cpu import elementwise_source, reduce_source, region_source
from luminal_lab.codegen.cpu_loop import SEGMENT, Loop, Operand, Stride, meta_names
from luminal_lab.codegen.reads import Gathered, Nested, Strided, lower
from luminal_lab.core.dtypes import DType
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.llir.regions import RegionBody

_modules = itertools.count()


def compiled(source: str, directory: Path):
    """The ``kernel`` of a generated source, imported from a file as the kernel cache does."""
    path = directory / f"kernel_{next(_modules)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def expected(tracker: ShapeTracker, buffer: np.ndarray, bindings: dict[str, int] | None = None) -> np.ndarray:
    """What ``tracker`` reads from ``buffer``, element by element from its index and validity expressions."""
    dims = tuple(int(d.evaluate(bindings or {})) for d in tracker.dims)
    z = np.arange(int(np.prod(dims)), dtype=np.int64)
    index = np.broadcast_to(np.asarray(tracker.index_expr().evaluate(bindings or {}, z), np.int64), z.shape)
    valid = np.broadcast_to(np.asarray(tracker.valid_expr().evaluate(bindings or {}, z)) != 0, z.shape)
    return np.where(valid, buffer.reshape(-1)[np.where(valid, index, 0)], 0).reshape(dims)


def strided(tracker: ShapeTracker, buffer: np.ndarray, bindings: dict[str, int] | None = None) -> Strided:
    read = lower(tracker, bindings or {}, buffer.size, 0)
    assert isinstance(read, Strided)
    return read


def run_elementwise(op: str, trackers: list[ShapeTracker], buffers: list[np.ndarray], tmp_path: Path,
                    bindings: dict[str, int] | None = None) -> tuple[Loop, np.ndarray]:
    reads = [strided(t, b, bindings) for t, b in zip(trackers, buffers)]
    out = np.full(reads[0].shape, np.nan, np.float32)
    loop = Loop.over(out.shape, reads)
    kernel = compiled(elementwise_source(op, DType.F32, DType.F32, loop.operands, loop.rank, False), tmp_path)
    kernel(*loop.arguments(out, buffers))
    return loop, out


X = ShapeTracker.contiguous((6, 5))
READS = {  # a read of a (5, 6) buffer in the shape (6, 5), by its innermost stride
    Stride.CONTIGUOUS: ShapeTracker.contiguous((30,)).reshape((6, 5)),
    Stride.BROADCAST: ShapeTracker.contiguous((6, 5)).slice(1, 3, 4).broadcast_to((6, 5)),  # column 3, every row
    Stride.STRIDED: ShapeTracker.contiguous((5, 6)).permute((1, 0)),
}


@pytest.mark.parametrize("stride", list(Stride))
def test_an_add_reads_a_contiguous_broadcast_or_strided_operand(stride: Stride, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(30).astype(np.float32), rng.standard_normal(30).astype(np.float32)
    loop, out = run_elementwise("Add", [X, READS[stride]], [x, y], tmp_path)
    assert loop.operands == (Operand(Stride.CONTIGUOUS), Operand(stride))
    np.testing.assert_array_equal(out, x.reshape(6, 5) + expected(READS[stride], y))


def test_a_padded_operand_reads_its_box_and_zeros_around_it(tmp_path: Path) -> None:
    """A concat's padded halves, in segments longer than ``SEGMENT`` along the row: each read in place, 0 outside."""
    rows, n = 3, SEGMENT + 300
    left = ShapeTracker.contiguous((rows, n)).pad(1, 0, 200)
    right = ShapeTracker.contiguous((rows, 200)).pad(1, n, 0)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(rows * n).astype(np.float32), rng.standard_normal(rows * 200).astype(np.float32)
    loop, out = run_elementwise("Add", [left, right], [a, b], tmp_path)
    assert loop.operands == (Operand(Stride.CONTIGUOUS, padded=True),) * 2
    np.testing.assert_array_equal(out, np.concatenate([a.reshape(rows, n), b.reshape(rows, 200)], 1))


def test_a_padded_strided_and_broadcast_operand(tmp_path: Path) -> None:
    """Padding around a transposed read, and around a column read once per row: the box per axis, 0 elsewhere."""
    transposed = ShapeTracker.contiguous((4, 3)).permute((1, 0)).pad(0, 1, 2).pad(1, 2, 1)  # (6, 7)
    column = ShapeTracker.contiguous((3, 1)).broadcast_to((3, 7)).pad(0, 2, 1)  # (6, 7)
    a, b = np.arange(12, dtype=np.float32) + 1, np.arange(3, dtype=np.float32) + 100
    loop, out = run_elementwise("Mul", [transposed, column], [a, b], tmp_path)
    assert loop.operands == (Operand(Stride.STRIDED, padded=True), Operand(Stride.BROADCAST, padded=True))
    np.testing.assert_array_equal(out, expected(transposed, a) * expected(column, b))
    assert out[0].tolist() == [0] * 7 and out[2, 0] == 0 and out[2, 3] != 0


def test_meta_holds_each_number_under_its_name() -> None:
    """``meta`` is laid out as ``meta_names`` says: offset, strides, a padded operand's box, then the lengths."""
    padded = Strided(-3, (4, 5), (5, 1), ((1, 3), (0, 5)))
    broadcast = Strided(7, (4, 5), (1, 0))
    loop = Loop.over((4, 5), [broadcast, padded])
    assert loop.dims == (4, 5) and loop.rank == 2
    assert loop.operands == (Operand(Stride.BROADCAST), Operand(Stride.CONTIGUOUS, padded=True))
    named = dict(zip(meta_names(loop.operands, 2), loop.meta().tolist(), strict=True))
    assert named == {"o0": 7, "s0_0": 1, "s0_1": 0, "o1": -3, "s1_0": 5, "s1_1": 1,
                     "l1_0": 1, "h1_0": 3, "l1_1": 0, "h1_1": 5}
    merged = Loop.over((4, 5), [Strided(2, (4, 5), (5, 1))])  # the two axes step alike: one axis of 20
    assert merged.dims == (20,) and merged.meta().tolist() == [2, 1]
    rows = Loop.over((3, 6), [Strided(1, (3, 6), (6, 1)), Strided(0, (3, 6), (1, 0))], [6, 4])  # a row region's
    named = dict(zip(meta_names(rows.operands, 2, 2), rows.meta().tolist(), strict=True))
    assert named == {"o0": 1, "s0_0": 6, "s0_1": 1, "o1": 0, "s1_0": 1, "s1_1": 0, "n0": 6, "n1": 4}



def test_a_loop_is_built_once_for_its_shape_and_reads() -> None:
    """A plan for a new length builds again only the loops whose reads changed: the same shape and reads give the same
    loop (and meta array), another read or the reducing form another."""
    reads = [Strided(0, (6, 8), (8, 1)), Strided(3, (6, 8), (1, 6))]
    loop = Loop.over((6, 8), reads)
    again = Loop.over((6, 8), tuple(reads))
    assert again is loop and again.meta() is loop.meta()
    longer = Loop.over((6, 9), [Strided(0, (6, 9), (9, 1)), Strided(3, (6, 9), (1, 6))])
    assert longer is not loop and longer.meta().tolist() == [0, 9, 1, 3, 1, 6]
    reduced = Loop.reducing((6,), reads)
    assert reduced is not loop and reduced.dims == (6, 8) and reduced.out == (6,) and reduced.lengths == (8,)


@pytest.mark.parametrize("op", ["SumReduce", "MaxReduce"])
@pytest.mark.parametrize("transposed", [False, True])
def test_a_reduction_along_a_contiguous_or_strided_axis(op: str, transposed: bool, tmp_path: Path) -> None:
    tracker = ShapeTracker.contiguous((7, 9))
    if transposed:
        tracker = ShapeTracker.contiguous((9, 7)).permute((1, 0))
    buffer = np.random.default_rng(2).standard_normal(63).astype(np.float32)
    loop = Loop.reducing((7,), [strided(tracker, buffer)])
    assert loop.operands[0].stride == (Stride.STRIDED if transposed else Stride.CONTIGUOUS)
    assert loop.lengths == (9,)
    out = np.full(7, np.nan, np.float32)
    compiled(reduce_source(op, DType.F32, loop.operands, loop.rank, False), tmp_path)(*loop.arguments(out, [buffer]))
    values = expected(tracker, buffer)
    np.testing.assert_allclose(out, values.sum(-1) if op == "SumReduce" else values.max(-1), rtol=1e-6)


def test_dot_products_of_a_row_and_a_column_read(tmp_path: Path) -> None:
    a, b = np.arange(12, dtype=np.float32), np.arange(20, dtype=np.float32) / 7
    lhs = ShapeTracker.contiguous((3, 4)).expand_dim(1, 5)  # [m, n, k]
    rhs = ShapeTracker.contiguous((4, 5)).permute((1, 0)).expand_dim(0, 3)
    loop = Loop.reducing((3, 5), [strided(lhs, a), strided(rhs, b)])
    assert loop.operands == (Operand(Stride.CONTIGUOUS), Operand(Stride.STRIDED))
    out = np.zeros((3, 5), np.float32)
    kernel = compiled(reduce_source("SumReduce", DType.F32, loop.operands, loop.rank, False), tmp_path)
    kernel(*loop.arguments(out, [a, b]))
    np.testing.assert_allclose(out, a.reshape(3, 4) @ b.reshape(4, 5), rtol=1e-6)


def test_one_source_serves_a_symbolic_dimension_at_every_size(tmp_path: Path) -> None:
    """A slice of a KV-cache-like ``(s, 8)`` buffer, padded by one row: lowered at each size from the same
    expressions, the same operands, so one compiled kernel."""
    tracker = ShapeTracker.contiguous(("s", 8)).slice(1, 1, 8, 2).pad(0, 0, 1)  # (s + 1, 4)
    kernel, sources = None, set()
    for s in (2, 5, 40):
        buffer = np.arange(s * 8, dtype=np.float32)
        read = strided(tracker, buffer, {"s": s})
        loop = Loop.over(read.shape, [read, read])
        sources.add(source := elementwise_source("Add", DType.F32, DType.F32, loop.operands, loop.rank, False))
        kernel = kernel or compiled(source, tmp_path)
        out = np.full(read.shape, np.nan, np.float32)
        kernel(*loop.arguments(out, [buffer, buffer]))
        np.testing.assert_array_equal(out, 2 * expected(tracker, buffer, {"s": s}))
        assert out[-1].tolist() == [0] * 4
    assert len(sources) == 1


def test_a_region_computes_its_steps_on_one_pass(tmp_path: Path) -> None:
    """``sqrt(sin(x0 + x1))`` of a contiguous and a broadcast read, as one loop."""
    body = RegionBody(((0, X, DType.F32), (1, READS[Stride.BROADCAST], DType.F32)),
                      (("Add", ("x0", "x1")), ("Sin", ("t0",)), ("Sqrt", ("t1",))), X.dims, DType.F32)
    x, y = np.random.default_rng(3).uniform(0, 1.5, (2, 30)).astype(np.float32)
    reads = [strided(X, x), strided(READS[Stride.BROADCAST], y)]
    loop = Loop.over((6, 5), reads)
    out = np.zeros((6, 5), np.float32)
    compiled(region_source(body, loop.operands, loop.rank, False), tmp_path)(*loop.arguments(out, [x, y]))
    np.testing.assert_allclose(out, np.sqrt(np.sin(x.reshape(6, 5) + expected(READS[Stride.BROADCAST], y))),
                               rtol=2e-6)


def test_reads_that_no_strides_describe_are_nested_or_gathered() -> None:
    """A transpose then a merge is a nest of strided axes, copied as one; a padded read merged into one axis has a
    hole in every row, so it is gathered through indexes, 0 in the holes."""
    merged = ShapeTracker.contiguous((3, 4)).permute((1, 0)).reshape((12,))
    nested = lower(merged, {}, 12, 0)
    assert isinstance(nested, Nested)
    assert (nested.nest.shape, nested.nest.strides, nested.scratch) == ((4, 3), (1, 4), Strided(0, (12,), (1,)))
    holed = ShapeTracker.contiguous((2, 2)).pad(1, 0, 1).reshape((6,))
    gathered = lower(holed, {}, 4, 0)
    assert isinstance(gathered, Gathered) and gathered.valid is not None
    values = np.arange(4, dtype=np.float32) + 1
    np.testing.assert_array_equal(np.where(gathered.valid, values[gathered.index], 0), expected(holed, values))
    assert expected(holed, values).tolist() == [1, 2, 0, 3, 4, 0]


def test_llvm_peels_no_first_iteration_off_a_kernels_row_loop() -> None:
    """Importing the helpers turns LLVM's loop peeling off: a row loop shaped as the kernels' (a row sliced out of
    a flat operand, its length read from ``meta``) keeps its first iteration, so its vector part covers a row of 64
    f32 instead of leaving the whole row to the scalar remainder. LLVM peels this loop when peeling is on."""
    import numba

    from luminal_lab.codegen import cpu_math as m

    @numba.njit(error_model="numpy", fastmath={"reassoc", "contract"})
    def row_sums(out, x0, x1, x2, meta):
        n0 = meta[0]
        for i in range(out.shape[0]):
            r0 = x0[i * 64:]
            acc = np.float32(0.0)
            for j in range(n0):
                acc += np.float32(m.exp2f(r0[j]))
            out[i] = acc

    x = np.random.default_rng(0).standard_normal(256 * 64).astype(np.float32)
    out = np.zeros(256, np.float32)
    row_sums(out, x, x, x, np.array([64]))
    np.testing.assert_allclose(out, np.exp2(x.reshape(256, 64)).sum(1), rtol=1e-5)
    (ir,) = row_sums.inspect_llvm().values()
    assert "llvm.loop.peeled.count" not in ir
