"""Fused regions against unfused kernels, torch eager and torch.compile (inductor), measured in one run.

Writes benchmarks/results/fusion.json. For ``(a+b).sin().sqrt()`` and a SiLU-gated chain
``silu(a) * b`` on 2^22 f32 elements:

- ``fused_ms``: the most-fused genome's kernels (one region), inputs already in place and
  the result left in the runtime's buffer (the Output step, a copy into a fresh array the
  caller owns, is not timed);
- ``unfused_ms``: the smallest genome without regions, likewise;
- ``fused_call_ms``: the fused genome through ``CPURuntime.run`` (inputs read in place, the
  output written straight into a fresh array, as a call does);
- ``comp_run_ms``: the same through ``comp.run`` on torch tensors (the whole call boundary);
- ``eager_ms`` and ``inductor_ms``: the same function in torch eager and ``torch.compile``.

Each figure is the median over interleaved rounds (every variant timed in turn, round after
round), so a slow spell of the machine weighs on all of them alike.

Ratios are ``other / fused`` (above 1: the fused region is faster); the targets on the CPU are
``vs_inductor >= 1.0`` for the kernels and ``call_vs_inductor >= 1.0`` (inductor over ``comp.run``)
for the whole call. ``copy_fraction`` is the fused kernels' effective bandwidth (bytes read and
written once) over a parallel copy's (torch ``copy_`` of one 2^22 f32 tensor).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import RESULTS, median_ms, write_result  # noqa: E402
from luminal_lab.core.arrays import to_numpy  # noqa: E402
from luminal_lab.llir.genome import extract  # noqa: E402
from luminal_lab.llir.regions import find_regions  # noqa: E402
from luminal_lab.runtime.cpu import CPURuntime  # noqa: E402

SHAPE = (2048, 2048)  # 2^22 elements


def add_sin_sqrt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).sin().sqrt()


def silu_gated(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(a) * b


ROUNDS, REPEATS = 10, 10


def kernels_only(runtime: CPURuntime, arrays: dict) -> Callable[[], None]:
    """The plan's kernel steps alone (inputs copied in once now; Output steps left out)."""
    runtime.run(arrays)
    outputs = {k.id for k in runtime.llir.kernels if k.op == "Output"}
    steps = [step for kernel_id, step in runtime.plan().steps if kernel_id not in outputs]

    def run_steps() -> None:
        for step in steps:
            step()
    return run_steps


def interleaved_ms(variants: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median ms of each variant over ``ROUNDS`` rounds of ``REPEATS`` calls, the variants taking turns."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, fn in variants.items():
            times[name].append(median_ms(fn, repeats=REPEATS, warmup=1))
    return {name: statistics.median(values) for name, values in times.items()}


def measure(name: str, fn, inputs: tuple[torch.Tensor, ...]) -> dict:
    comp = ll.compile(fn, inputs)
    space = comp.choice_space()
    fused, unfused = extract(space.fused_genome()), extract(space.unfused_genome())
    regions = find_regions(fused)
    arrays = {n: to_numpy(t) for n, t in zip(comp.signature.inputs, inputs)}
    fused_runtime, unfused_runtime = CPURuntime(fused), CPURuntime(unfused)
    expected = fn(*inputs)
    for runtime in (fused_runtime, unfused_runtime):
        torch.testing.assert_close(torch.from_numpy(runtime.run(arrays)[0]), expected, equal_nan=True)
    inductor = torch.compile(fn)
    inductor(*inputs)
    comp.genome = space.fused_genome()
    torch.testing.assert_close(comp.run(*inputs), expected, equal_nan=True)
    timed = interleaved_ms({"fused": kernels_only(fused_runtime, arrays),
                            "unfused": kernels_only(unfused_runtime, arrays),
                            "fused_call": lambda: fused_runtime.run(arrays), "comp_run": lambda: comp.run(*inputs),
                            "eager": lambda: fn(*inputs), "inductor": lambda: inductor(*inputs)})
    result = {"regions": [r.op_names(fused) for r in regions], **{f"{k}_ms": v for k, v in timed.items()}}
    for other in ("unfused", "eager", "inductor"):
        result[f"vs_{other}"] = result[f"{other}_ms"] / result["fused_ms"]
    result["call_vs_inductor"] = result["inductor_ms"] / result["comp_run_ms"]
    moved = (len(inputs) + 1) * inputs[0].numel() * inputs[0].element_size()
    result["fused_gb_per_s"] = moved / result["fused_ms"] / 1e6
    print(f"{name}: {result}", file=sys.stderr)
    return result


def copy_gb_per_s() -> float:
    source, target = torch.rand(SHAPE), torch.empty(SHAPE)
    ms = median_ms(lambda: target.copy_(source), repeats=50)
    return 2 * source.numel() * source.element_size() / ms / 1e6


def main() -> dict:
    generator = torch.Generator().manual_seed(0)
    inputs = tuple(torch.rand(SHAPE, generator=generator) * 2 - 1 for _ in range(2))
    copy = copy_gb_per_s()
    cases = {"add_sin_sqrt": measure("add_sin_sqrt", add_sin_sqrt, inputs),
             "silu_gated": measure("silu_gated", silu_gated, inputs)}
    for case in cases.values():
        case["copy_fraction"] = case["fused_gb_per_s"] / copy
    result = {"elements": SHAPE[0] * SHAPE[1], "threads": torch.get_num_threads(), "copy_gb_per_s": copy,
              "cases": cases, "target": "vs_inductor >= 1.0 and call_vs_inductor >= 1.0 for each case"}
    write_result(RESULTS / "fusion.json", result)
    return result


if __name__ == "__main__":
    main()
