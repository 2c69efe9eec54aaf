"""``k_row_region`` on the CPU: each schedule (a block or a warp per row, the row held in registers or shared memory,
or re-read; a thread per row where rows are short) run by its twin (``tests.helpers.row_twin``) against the
reference runtime, and compiled with NVRTC."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.codegen.cuda import MAX_HELD, RowSchedule, row_region_source
from luminal_lab.codegen.ptx import compile_ptx
from luminal_lab.core.arrays import to_numpy
from luminal_lab.llir.llir import LLIR
from luminal_lab.llir.regions import find_regions
from tests.helpers.row_twin import RowTwin
from tests.helpers.rows import PATTERNS, build, fused, fused_pattern, inputs

SCHEDULES = {"block": False, "warp": True}


def buffers(llir: LLIR, body, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Each region input's source buffer: a graph input's values or a constant's one value."""
    kernels = {k.id: k for k in llir.kernels}
    out = []
    for source, _, _ in body.inputs:
        kernel = kernels[source]
        assert kernel.op in ("Input", "Constant"), kernel
        out.append(values[kernel.arg] if kernel.op == "Input" else np.array([float(kernel.arg)]))
    return out


def twin(comp: ll.Compiled, llir: LLIR, warp: bool, values: dict[str, torch.Tensor],
         bindings: dict[str, int] | None = None) -> tuple[RowTwin, np.ndarray]:
    (region,) = find_regions(llir)
    body = region.body(llir)
    schedule = RowSchedule.of(body, warp)
    kernel = row_region_source(body, region.end, warp)
    arrays = {name: to_numpy(value).astype(np.float64) for name, value in values.items()}
    run = RowTwin(body, schedule, kernel, buffers(llir, body, arrays), bindings)
    return run, run.run()


def holds(pattern: str, length: int, schedule: str) -> str:
    """Where a lane of ``schedule`` keeps its elements of ``pattern``'s row of ``length`` (f32): a warp holds up to
    ``MAX_HELD`` * 32 = 1024 in registers, a block 8192; past that, shared memory takes a row's inputs read in more
    than one pass while the block's rows fit in 48 KiB (eight rows of 1500 for a warp, one of 10000 for a block: one
    input, ``x``, but not the attention rows' two, ``x`` and the mask, added or selected), and beyond that each pass
    re-reads them."""
    limit = 1024 if schedule == "warp" else 8192
    if length <= limit:
        return "registers"
    fits = (length <= 1536 if schedule == "warp" else length <= 12288) and "attention" not in pattern
    return "shared" if fits else "re-read"


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("shape", [(300, 2), (40, 16), (7, 31), (2, 33), (9, 1000), (2, 1500), (3, 2000),
                                   (1, 10000)], ids=str)
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_twin_matches_reference(pattern: str, shape: tuple[int, int], schedule: str) -> None:
    comp, llir = fused_pattern(pattern, *shape)
    values = inputs(pattern, *shape, torch.float32)
    run, got = twin(comp, llir, SCHEDULES[schedule], values)
    expected = comp.run_reference(**values).double().numpy().reshape(-1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    per_lane = -(-shape[1] // run.lanes)
    where = holds(pattern, shape[1], schedule)
    assert run.schedule.held == ((0,) if where == "re-read" else (per_lane,))
    assert run.schedule.shared == (where == "shared",) and (where != "registers") == (per_lane > MAX_HELD)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_twin_with_symbolic_rows_and_length(schedule: str) -> None:
    """Symbolic rows and row length: the block is sized at launch, nothing is held, and the twin still matches."""
    g = ll.Graph()
    x = g.tensor(("s", "n"), name="x")
    x.softmax(-1).output("y")
    comp, llir = fused(g)
    values = {"x": torch.randn(5, 300)}
    run, got = twin(comp, llir, SCHEDULES[schedule], values, {"s": 5, "n": 300})
    assert run.schedule.held == (0,) and (run.lanes == 32 if schedule == "warp" else run.lanes == 256)
    np.testing.assert_allclose(got, values["x"].double().softmax(-1).numpy().reshape(-1), rtol=1e-6, atol=1e-7)


def test_a_warp_runs_eight_rows_to_a_block() -> None:
    _comp, llir = fused(build("softmax", 20, 64))
    (region,) = find_regions(llir)
    body = region.body(llir)
    assert row_region_source(body, region.end, warp=True).launch() == (3, 256)
    assert row_region_source(body, region.end).launch() == (20, 64)
    assert RowSchedule.of(body, warp=True).held == (2,) and RowSchedule.of(body).held == (1,)
    # x (read in every pass) is held; softmax's constants, the same all along the row, are read once per row
    source = row_region_source(body, region.end, warp=True).source
    steady = [j for j, (_, view, _) in enumerate(body.inputs) if body.extent(f"x{j}") is not None
              and view.strides[-1] == 0]
    assert steady and all(f"h{j}[" not in source and source.count(f"in{j}[") == 1 for j in steady)
    assert "h0[2];" in source


def test_short_rows_run_a_thread_each() -> None:
    """A pairwise maximum (GELU's erf takes one, ReLU is one) reduces rows of 2: each thread runs a row alone, the
    genome's warp or block notwithstanding, with no shuffles; a row of 17 is shared among lanes again."""
    g = ll.Graph()
    x = g.tensor((300, 7), name="x")
    (x.relu() * 2.0 + 1.0).output("y")
    comp, llir = fused(g)
    (region,) = find_regions(llir)
    body = region.body(llir)
    assert {length.value for length in body.lengths} == {2}
    for warp in (False, True):
        schedule, kernel = RowSchedule.of(body, warp), row_region_source(body, region.end, warp)
        assert schedule.thread and not schedule.warp and kernel.launch() == (9, 256)  # 2100 rows, 256 a block
        assert "__shfl" not in kernel.source and "__shared__" not in kernel.source
        assert ".entry k_row_region" in compile_ptx(kernel.source)
    values = {"x": torch.randn(300, 7)}
    _, got = twin(comp, llir, False, values)
    np.testing.assert_allclose(got, (values["x"].relu() * 2 + 1).double().numpy().reshape(-1))
    _, longer = fused_pattern("softmax", 3, 17)
    (region,) = find_regions(longer)
    assert not RowSchedule.of(region.body(longer)).thread


def test_a_long_row_is_held_in_shared_memory() -> None:
    """Rows of 1500 for a warp: each lane's 47 elements of x in this warp's part of the block's shared array."""
    _, llir = fused_pattern("softmax", 2, 1500)
    (region,) = find_regions(llir)
    source = row_region_source(region.body(llir), region.end, warp=True).source
    assert "__shared__ float hs0[8 * 47 * 32];" in source and "float* h0 = hs0 + warp * 47 * 32;" in source
    assert source.count("h0[k * 32 + t]") == 4  # stored once, read in the max, sum and store passes
    assert ".entry k_row_region" in compile_ptx(source)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("shape", [(300, 2), (7, 31), (3, 2000), (1, 10000)], ids=str)  # thread, registers,
# re-read, shared
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_schedules_compile_with_nvrtc(pattern: str, shape: tuple[int, int], schedule: str) -> None:
    _, llir = fused_pattern(pattern, *shape)
    (region,) = find_regions(llir)
    kernel = row_region_source(region.body(llir), region.end, SCHEDULES[schedule])
    assert ".entry k_row_region" in compile_ptx(kernel.source)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("dtype", [ll.i8, ll.u8, ll.i16], ids=lambda d: d.value)
def test_narrow_int_row_regions_compile_with_nvrtc(dtype: ll.DType, schedule: str) -> None:
    """A row's max and min (the min as the max of the complement) in the row's own type: its lowest value starts
    the max, shuffled across lanes in that type, each step's value stored in it."""
    g = ll.Graph()
    x = g.tensor((6, 40), name="x", dtype=dtype)
    ((x - x.max(-1, keepdim=True)) * (x.min(-1, keepdim=True) + 3)).output("y")
    comp, llir = fused(g)
    comp.egraph.close()
    (region,) = find_regions(llir)
    body = region.body(llir)
    assert body.dtype == dtype and [op for op, _ in body.steps].count("MaxReduce") == 2
    source = row_region_source(body, region.end, SCHEDULES[schedule]).source
    assert f"{dtype.c_type} acc = ({dtype.c_type})({dtype.lowest + 1}LL - 1);" in source
    assert ".entry k_row_region" in compile_ptx(source)
