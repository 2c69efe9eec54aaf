"""Fused regions against unfused kernels, torch eager and torch.compile (inductor), measured in one run.

Writes benchmarks/results/fusion.json. For ``(a+b).sin().sqrt()`` and a SiLU-gated chain
``silu(a) * b`` on 2^22 f32 elements:

- ``fused_ms``: the most-fused genome's kernels (one region), inputs already in place;
- ``unfused_ms``: the smallest genome without regions, likewise;
- ``fused_call_ms``: the fused genome through ``CPURuntime.run`` (copying inputs in and the
  output out, as a call does);
- ``eager_ms`` and ``inductor_ms``: the same function in torch eager and ``torch.compile``.

Ratios are ``other / fused`` (above 1: the fused region is faster); the target is
``vs_inductor >= 1.0`` on the CPU. ``copy_fraction`` is the fused kernels' effective
bandwidth (bytes read and written once) over a parallel copy's (torch ``copy_`` of one
2^22 f32 tensor).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import RESULTS, median_ms, write_result  # noqa: E402
from luminal_lab.compiled import to_numpy  # noqa: E402
from luminal_lab.cpu_runtime import CPURuntime  # noqa: E402
from luminal_lab.genome import extract  # noqa: E402
from luminal_lab.regions import find_regions  # noqa: E402

SHAPE = (2048, 2048)  # 2^22 elements


def add_sin_sqrt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).sin().sqrt()


def silu_gated(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(a) * b


def kernels_only(runtime: CPURuntime, arrays: dict) -> float:
    """Median ms of the plan's steps alone (inputs copied in once before)."""
    runtime.run(arrays)
    steps = [step for _, step in runtime.plan().steps]

    def run_steps() -> None:
        for step in steps:
            step()
    return median_ms(run_steps, repeats=30)


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
    result = {
        "regions": [r.op_names(fused) for r in regions],
        "fused_ms": kernels_only(fused_runtime, arrays),
        "unfused_ms": kernels_only(unfused_runtime, arrays),
        "fused_call_ms": median_ms(lambda: fused_runtime.run(arrays), repeats=30),
        "eager_ms": median_ms(lambda: fn(*inputs), repeats=30),
        "inductor_ms": median_ms(lambda: inductor(*inputs), repeats=30),
    }
    for other in ("unfused", "eager", "inductor"):
        result[f"vs_{other}"] = result[f"{other}_ms"] / result["fused_ms"]
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
              "cases": cases, "target": "vs_inductor >= 1.0 for each case"}
    write_result(RESULTS / "fusion.json", result)
    return result


if __name__ == "__main__":
    main()
