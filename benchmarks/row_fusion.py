"""Row regions (a reduction with its prologue and epilogue as one kernel) against unfused kernels, torch eager and
torch.compile (inductor), measured in one run.

Writes benchmarks/results/row_fusion.json. For softmax, rmsnorm and layernorm over the last axis of a
4096x1024 f32 input: ``fused_ms`` and ``unfused_ms`` (the most-fused genome and the smallest genome without
regions, kernels only, as in ``benchmarks/fusion.py``), ``comp_run_ms`` (the most-fused genome through
``comp.run`` on torch tensors), ``eager_ms`` and ``inductor_ms``, each the median over interleaved rounds;
``kernels`` counts the fused genome's kernels (the target is one). Ratios are ``other / fused``; the CPU target
is ``vs_inductor >= 1.0``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import RESULTS, write_result  # noqa: E402
from benchmarks.fusion import interleaved_ms, kernels_only  # noqa: E402
from luminal_lab.core.arrays import to_numpy  # noqa: E402
from luminal_lab.core.ops import IN_REGION  # noqa: E402
from luminal_lab.llir.genome import extract  # noqa: E402
from luminal_lab.runtime.cpu import CPURuntime  # noqa: E402

SHAPE = (4096, 1024)


def softmax(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6)


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def measure(name: str, fn, inputs: tuple[torch.Tensor, ...]) -> dict:
    comp = ll.compile(fn, inputs)
    space = comp.choice_space()
    fused, unfused = extract(space.fused_genome()), extract(space.unfused_genome())
    arrays = {n: to_numpy(t) for n, t in zip(comp.signature.inputs, inputs)}
    fused_runtime, unfused_runtime = CPURuntime(fused), CPURuntime(unfused)
    expected = fn(*inputs)
    for runtime in (fused_runtime, unfused_runtime):
        torch.testing.assert_close(torch.from_numpy(runtime.run(arrays)[0]), expected, rtol=1e-4, atol=1e-5)
    inductor = torch.compile(fn)
    inductor(*inputs)
    comp.genome = space.fused_genome()
    torch.testing.assert_close(comp.run(*inputs), expected, rtol=1e-4, atol=1e-5)
    timed = interleaved_ms({"fused": kernels_only(fused_runtime, arrays),
                            "unfused": kernels_only(unfused_runtime, arrays), "comp_run": lambda: comp.run(*inputs),
                            "eager": lambda: fn(*inputs), "inductor": lambda: inductor(*inputs)})
    computing = [k for k in fused.kernels if k.op not in ("Input", "Constant", "Output", *IN_REGION)]
    unfused_kernels = sum(k.op not in ("Input", "Constant", "Output") for k in unfused.kernels)
    result = {"kernels": len(computing), "unfused_kernels": unfused_kernels, **{f"{k}_ms": v for k, v in timed.items()}}
    for other in ("unfused", "eager", "inductor"):
        result[f"vs_{other}"] = result[f"{other}_ms"] / result["fused_ms"]
    result["call_vs_inductor"] = result["inductor_ms"] / result["comp_run_ms"]
    print(f"{name}: {result}", file=sys.stderr)
    return result


def main() -> dict:
    generator = torch.Generator().manual_seed(0)
    inputs = (torch.randn(SHAPE, generator=generator), torch.randn(SHAPE[-1:], generator=generator),
              torch.randn(SHAPE[-1:], generator=generator))
    cases = {name: measure(name, fn, inputs) for name, fn in (("softmax", softmax), ("rmsnorm", rmsnorm),
                                                             ("layernorm", layernorm))}
    result = {"shape": list(SHAPE), "threads": torch.get_num_threads(), "cases": cases,
              "target": "kernels == 1 and vs_inductor >= 1.0 for each case"}
    write_result(RESULTS / "row_fusion.json", result)
    return result


if __name__ == "__main__":
    main()
