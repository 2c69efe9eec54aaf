"""A CPU twin of the generated ``k_row_region``: its ``RowSchedule`` run with numpy, thread by thread.

The twin launches the schedule's grid, maps each thread to its row and lane (``RowSchedule.row``), and for each
row runs the body in ``body.row_order()`` as the kernel does: each lane visits the elements the kernel's loops
give it (``t, t + lanes, ...``, through the held elements' ``k`` where the schedule holds the row), reads inputs
through their views at the same flat index ``z``, reduces its elements, and the lanes' partial values are combined
in the order of the kernel's shuffles (butterfly within a warp; for a block, down-shuffles, then shared memory
across warps). Every pass counts the elements it visits and every store the element it writes; ``RowTwin.run``
checks each is visited once, so its result against the reference checks the schedule's indexing without a GPU.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from luminal_lab.codegen.cuda import SHARED_BYTES, RowSchedule, multi_pass_inputs
from luminal_lab.codegen.cuda_c import CudaKernel
from luminal_lab.core.dtypes import DType
from luminal_lab.core.ops import REDUCE_KERNELS
from luminal_lab.llir.regions import RegionBody

_UNARY = {"Log2": np.log2, "Exp2": np.exp2, "Sin": np.sin, "Sqrt": np.sqrt, "Recip": np.reciprocal, "Exp": np.exp}
_ELEMENTWISE = {**_UNARY, "Add": np.add, "Mul": np.multiply, "Select": lambda c, a, b: np.where(c != 0, a, b)}


def _combine(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel's ``_combine``: a sum, or a max in which NaN wins."""
    if op == "SumReduce":
        return a + b
    return np.where((a != a) | (a > b), a, b)


class RowTwin:
    """``kernel`` (from ``row_region_source(body, ...)``) with ``schedule`` over ``buffers`` (each input's flat
    source, by position) for the symbolic-dim ``bindings``."""

    def __init__(self, body: RegionBody, schedule: RowSchedule, kernel: CudaKernel, buffers: list[np.ndarray],
                 bindings: dict[str, int] | None = None):
        self.body, self.schedule, self.bindings = body, schedule, bindings or {}
        self.buffers = [np.asarray(b, np.float64).reshape(-1) for b in buffers]
        self.grid, self.block = kernel.launch(self.bindings)
        self.rows = int(np.prod([int(d.evaluate(self.bindings)) for d in body.rows]))
        self.lanes = int(schedule.lanes.evaluate(self.bindings)) if not schedule.lanes.is_num else schedule.lanes.value
        self.visits: Counter = Counter()  # (reduction step, flat element) -> visits
        self.stores: Counter = Counter()

    def read(self, j: int, z: np.ndarray) -> np.ndarray:
        view = self.body.inputs[j][1]
        index = np.broadcast_to(view.index_expr().evaluate(self.bindings, z), z.shape)
        valid = np.broadcast_to(view.valid_expr().evaluate(self.bindings, z), z.shape).astype(bool)
        return np.where(valid, self.buffers[j][np.where(valid, index, 0)], 0.0)

    def length(self, name: str) -> int:
        return int(self.body.extent(name).evaluate(self.bindings))

    def elements(self, name: str, lane: int) -> np.ndarray:
        """The positions along ``name``'s row that ``lane`` visits: the held loop's ``k`` or the strided loop."""
        length, k = self.length(name), self.body.lengths.index(self.body.extent(name))
        if self.schedule.held[k]:
            assert self.schedule.held[k] * self.lanes >= length, "the held elements miss part of the row"
            return np.array([r for r in (lane + i * self.lanes for i in range(self.schedule.held[k])) if r < length],
                            np.int64)
        return np.arange(lane, length, self.lanes, dtype=np.int64)

    def values(self, name: str, o: int, r: np.ndarray, known: dict[str, float]) -> np.ndarray:
        """``name`` at positions ``r`` of row ``o`` (per-row values from ``known``)."""
        z = o * self.length(name) + r
        local: dict[str, np.ndarray] = {}
        for j in self.body.reads(name):
            if self.body.extent(f"x{j}") is not None:
                local[f"x{j}"] = self.read(j, z)
        for i in self.body.needs(name):
            op, names = self.body.steps[i]
            args = [local[n] if n in local else np.full(r.shape, known[n]) for n in names]
            local[f"t{i}"] = _ELEMENTWISE[op](*args)
        return local[name] if name in local else np.full(r.shape, known[name])

    def reduce(self, i: int, o: int, known: dict[str, float]) -> float:
        """Reduction step ``i``'s pass: each lane's elements reduced in its loop order, then the lanes combined as
        the kernel does."""
        op, (name,) = self.body.steps[i]
        init = -np.inf if op == "MaxReduce" else 0.0
        acc = np.full(self.lanes, init)
        for lane in range(self.lanes):
            r = self.elements(name, lane)
            self.visits.update((i, o * self.length(name) + int(p)) for p in r)
            values = self.values(name, o, r, known)
            if values.size:  # the lane's loop, in float64 (the order of its additions is within tolerance)
                own = values.sum() if op == "SumReduce" else np.nan if np.isnan(values).any() else values.max()
                acc[lane] = _combine(op, np.float64(init), np.float64(own))
        if self.schedule.thread:  # a row's one thread: nothing to combine
            return float(acc[0])
        if self.schedule.warp:  # butterfly: every lane ends with the warp's value
            for off in (16, 8, 4, 2, 1):
                acc = _combine(op, acc, acc[np.arange(32) ^ off])
            return float(acc[0])
        warps = -(-self.lanes // 32)
        partial = [self._shuffle_down(op, acc[32 * w:32 * w + 32])[0] for w in range(warps)]
        first = np.array([partial[lane] if lane < warps else init for lane in range(32)])
        return float(self._shuffle_down(op, first)[0])

    def check_shared(self) -> None:
        """Where a lane holds elements in shared memory, the kernel's slots (``warp * n * lanes`` for the row's part,
        then ``k * lanes + t``) give each element of each row of a block its own place inside the block's array,
        and the block's arrays fit in ``SHARED_BYTES``."""
        schedule, body = self.schedule, self.body
        total = 0
        for k, length in enumerate(body.lengths):
            if not schedule.shared[k]:
                continue
            n, extent = schedule.held[k], int(length.evaluate(self.bindings))
            size = schedule.rows_per_block * n * self.lanes
            inputs = [d for j, (_, _, d) in enumerate(body.inputs) if j in multi_pass_inputs(body)
                      and body.extent(f"x{j}") == length]
            total += size * sum(8 if d == DType.F64 else 4 for d in inputs)
            for block in range(self.grid):
                slots: dict[int, tuple[int, int]] = {}
                for thread in range(self.block):
                    row, lane = schedule.row(block, thread)
                    part = (thread // 32 if schedule.warp else 0) * n * self.lanes
                    for i in range(n):
                        if lane + i * self.lanes < extent and row < self.rows:
                            slot = part + i * self.lanes + lane
                            assert 0 <= slot < size and slot not in slots, (block, thread, i)
                            slots[slot] = (row, lane + i * self.lanes)
                assert len(set(slots.values())) == len(slots)
        assert total <= SHARED_BYTES

    @staticmethod
    def _shuffle_down(op: str, acc: np.ndarray) -> np.ndarray:
        """``__shfl_down_sync`` steps over one warp: a lane past the warp reads its own value."""
        for off in (16, 8, 4, 2, 1):
            source = np.arange(32) + off
            acc = _combine(op, acc, np.where(source < 32, acc[np.minimum(source, 31)], acc))
        return acc

    def run(self) -> np.ndarray:
        """The region's result, flat; checks that the launch covers each row once with every lane, and that each
        pass visits (and the end stores) each element once."""
        body = self.body
        lanes_of: dict[int, list[int]] = {}
        for block in range(self.grid):
            for thread in range(self.block):
                row, lane = self.schedule.row(block, thread)
                if row < self.rows:
                    lanes_of.setdefault(row, []).append(lane)
        assert sorted(lanes_of) == list(range(self.rows))
        assert all(sorted(lanes) == list(range(self.lanes)) for lanes in lanes_of.values())
        self.check_shared()
        end = body.extent(body.result)
        out = np.zeros(self.rows * (1 if end is None else self.length(body.result)))
        for o in range(self.rows):
            known = {f"x{j}": float(self.read(j, np.array([o]))[0])
                     for j in range(len(body.inputs)) if body.extent(f"x{j}") is None}
            for i in body.row_order():
                op, names = body.steps[i]
                if op not in REDUCE_KERNELS:
                    args = [np.array([known[n]]) for n in names]
                    known[f"t{i}"] = float(_ELEMENTWISE[op](*args)[0])
                elif body.extent(names[0]) is None:
                    known[f"t{i}"] = known[names[0]]
                else:
                    known[f"t{i}"] = self.reduce(i, o, known)
            if end is None:
                out[o] = known[body.result]
                self.stores[o] += 1
                continue
            for lane in range(self.lanes):
                r = self.elements(body.result, lane)
                z = o * self.length(body.result) + r
                out[z] = self.values(body.result, o, r, known)
                self.stores.update(int(p) for p in z)
        for i in {i for i, _ in self.visits}:
            counts = [count for (step, _), count in self.visits.items() if step == i]
            assert len(counts) == self.rows * self.length(body.steps[i][1][0]) and set(counts) == {1}, f"pass t{i}"
        assert len(self.stores) == out.size and set(self.stores.values()) == {1}
        return out
