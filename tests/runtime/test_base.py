"""The runtime base every device runtime shares (``luminal_lab.runtime.base``), on a device that only records.

The CUDA runtime cannot run without a GPU, so what it inherits (plans per binding, inputs and weights
copied in and checked, profiles) is checked here through a minimal subclass, as the CPU runtime uses it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import luminal_lab as ll
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.core.symbolic import Expr
from luminal_lab.llir.llir import LLIR, Kernel
from luminal_lab.runtime.base import Plan, Runtime, Slot

DIMS = (Expr.var("s"), Expr.num(3))


def _llir() -> LLIR:
    read = ShapeTracker.contiguous(DIMS)
    return LLIR([Kernel(0, "Input", (), DIMS, ll.f32, "x"), Kernel(1, "Input", (), DIMS, ll.f32, "w"),
                 Kernel(2, "Add", ((0, read), (1, read)), DIMS, ll.f32), Kernel(3, "Output", ((2, read),), DIMS,
                                                                                   ll.f32, 0)], [3])


@dataclass
class ArrayPlan(Plan):
    out: np.ndarray | None = None


class Recorder(Runtime[ArrayPlan]):
    """Buffers are numpy arrays; the one step adds them; every plan built and every copy made is recorded."""

    def __init__(self, llir: LLIR, memory_budget: int | None = None) -> None:
        super().__init__(llir, memory_budget)
        self.built: list[dict[str, int]] = []
        self.copies: list[str] = []

    def _build(self, bindings: dict[str, int]) -> ArrayPlan:
        self.built.append(bindings)
        plan = ArrayPlan()
        for kernel in self.llir.kernels[:2]:
            shape = tuple(int(d.evaluate(bindings)) for d in kernel.shape)
            slot = Slot(kernel.arg, np.zeros(shape, np.float32), kernel.dtype, shape)
            (plan.weights if kernel.arg in self._weights else plan.inputs).append(slot)
        (x,), (w,) = plan.inputs, plan.weights
        plan.out = np.zeros_like(x.buffer)
        plan.steps = [(2, lambda: np.add(x.buffer, w.buffer, out=plan.out))]
        return plan

    def _free_memory(self) -> int:
        return 1000

    def _copy_in(self, plan: ArrayPlan, slot: Slot, value: np.ndarray) -> None:
        self.copies.append(slot.name)
        np.copyto(slot.buffer, value)

    def _time_steps(self, plan: ArrayPlan) -> list[tuple[int, float]]:
        self._launch(plan)
        return [(2, 0.25)]

    def _collect(self, plan: ArrayPlan) -> list[np.ndarray]:
        return [plan.out.copy()]


def _arrays(rows: int, value: float = 1.0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    return {"x": x}, {"w": np.full((rows, 3), value, np.float32)}


def test_one_plan_per_binding_built_on_first_use() -> None:
    runtime = Recorder(_llir())
    for rows in (2, 2, 5, 2):
        inputs, weights = _arrays(rows)
        (y,) = runtime.run(inputs, weights, {"s": rows})
        np.testing.assert_array_equal(y, inputs["x"] + 1)
    assert runtime.built == [{"s": 2}, {"s": 5}]
    assert list(runtime.plans) == [(("s", 5),), (("s", 2),)]  # least recently used first
    assert runtime.plan({"s": 5}) is runtime.plans[(("s", 5),)]


def test_inputs_are_copied_every_call_and_weights_only_when_another_array_comes() -> None:
    runtime = Recorder(_llir())
    inputs, weights = _arrays(2)
    runtime.run(inputs, weights, {"s": 2})
    runtime.run(inputs, weights, {"s": 2})
    (kept,) = runtime.run(inputs, {}, {"s": 2})  # the bound weight persists without being passed
    assert runtime.copies == ["x", "w", "x", "x"]
    np.testing.assert_array_equal(kept, inputs["x"] + 1)
    (y,) = runtime.run(inputs, _arrays(2, value=10.0)[1], {"s": 2})
    assert runtime.copies[-2:] == ["x", "w"]
    np.testing.assert_array_equal(y, inputs["x"] + 10)


def test_missing_and_mismatched_values_are_named_before_anything_is_copied() -> None:
    runtime = Recorder(_llir())
    inputs, weights = _arrays(2)
    with pytest.raises(ll.LuminalError, match=r"missing input 'x'; the inputs are \['x'\]"):
        runtime.run({}, weights, {"s": 2})
    with pytest.raises(ll.DTypeBoundaryError, match=r"'x' is float64 but the LLIR declares float32; nothing is cast"):
        runtime.run({"x": inputs["x"].astype(np.float64)}, weights, {"s": 2})
    with pytest.raises(ll.ShapeError, match=r"'x' has shape \[3, 3\] but the plan expects \[2, 3\]"):
        runtime.run({"x": np.zeros((3, 3), np.float32)}, weights, {"s": 2})
    with pytest.raises(KeyError, match="symbolic dimension 's' has no value"):
        runtime.run(inputs, weights, {})
    assert runtime.copies == []


def test_profile_takes_medians_and_leaves_the_llir_alone() -> None:
    llir = _llir()
    runtime = Recorder(llir)
    inputs, weights = _arrays(2)
    profile = runtime.profile(inputs, weights, {"s": 2}, warmup=1, trials=3)
    assert profile.kernels == {2: 0.25} == llir.timed(profile.kernels).times and llir.times == {}
    assert profile.kernel_ops == {2: "Add"} and profile.trials == 3 and profile.total > 0
    assert profile.hot_spots(1) == [(2, "Add", 0.25)]
    assert runtime.copies.count("w") == 1  # warm-up, trials and timed steps all reuse the bound weight
    assert profile.back_to_back is None


def test_profile_back_to_back_times_the_trials_launched_one_after_another() -> None:
    runtime = Recorder(_llir())
    inputs, weights = _arrays(2)
    launched: list[int] = []
    runtime.prepare(weights, {"s": 2})
    plan = runtime.plan({"s": 2})
    ((kid, add),) = plan.steps
    plan.steps = [(kid, lambda: (launched.append(kid), add()))]
    profile = runtime.profile(inputs, weights, {"s": 2}, warmup=1, trials=3)
    plain = len(launched)  # the warm-up, then each trial's run, timed run and timed steps
    assert plain == 1 + 3 * 3
    streamed = runtime.profile(inputs, weights, {"s": 2}, warmup=1, trials=3, back_to_back=True)
    assert len(launched) - plain == plain + 3 and streamed.back_to_back > 0 and profile.back_to_back is None


def test_a_plan_over_the_memory_budget_is_refused_before_anything_is_built() -> None:
    runtime = Recorder(_llir())
    inputs, weights = _arrays(20)  # four buffers of 20 x 3 f32: 960 bytes, over half of the 1000 free
    with pytest.raises(ll.MemoryBudgetError, match=r"^k0 \(Input \[s, 3\] f32\) needs 240 B: the plan's buffers "
                                                   r"need 960 B in all, over the device memory budget of 500 B "
                                                   r"\(50% of the 1e\+03 B free\)"):
        runtime.run(inputs, weights, {"s": 20})
    assert runtime.built == [] and not runtime.plans
    runtime.run(*_arrays(2), {"s": 2})  # 96 bytes fit
    assert Recorder(_llir(), memory_budget=2000).run(inputs, weights, {"s": 20})[0].shape == (20, 3)
    assert runtime.buffer_bytes({"s": 20}) == dict.fromkeys(range(4), 240)


def test_an_allocation_that_fails_anyway_is_a_memory_budget_error() -> None:
    class Failing(Recorder):
        def _build(self, bindings: dict[str, int]) -> ArrayPlan:
            raise MemoryError("Unable to allocate 1.00 TiB")

    with pytest.raises(ll.MemoryBudgetError, match=r"allocating the plan's buffers \(96 B\) failed on the device: "
                                                   r"Unable to allocate 1.00 TiB"):
        Failing(_llir()).run(*_arrays(2), {"s": 2})


def test_plans_beyond_the_limit_drop_the_least_recently_used() -> None:
    from luminal_lab.core.plans import PlanCache

    built: list[int] = []
    plans = PlanCache(lambda bindings: built.append(bindings["s"]) or [bindings["s"]], limit=2)
    for size in (3, 5, 3, 7, 3, 5):
        assert plans.plan({"s": size}) == [size]
    # 5 went when 7 came (3 was used after it), then 7 when 5 came back
    assert built == [3, 5, 7, 5] and list(plans) == [(("s", 3),), (("s", 5),)]
