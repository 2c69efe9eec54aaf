"""The compiled llama-style block on the CPU runtime against torch eager and torch.compile, measured in one run.

Writes benchmarks/results/compiled_runtime.json:
- the compiled block (d=256, seq=64) after a short search, and its most-fused genome (row regions
  included: its norms and attention rows), each through ``comp.run``, against torch eager and
  torch.compile (inductor) on the CPU (target: not slower than eager, ratio >= 1.0), with the
  search's per-kernel hot spots and the regions of each genome;
- extraction time per genome (target under 5 ms);
- compile time (e-graph, saturation, extraction, kernels) with a cold and a warm kernel cache,
  each in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import median_ms, write_result  # noqa: E402
from luminal_lab.llir.genome import extract  # noqa: E402
from tests.helpers.models import LlamaBlock, llama_inputs  # noqa: E402

CONFIG = {"d_model": 256, "heads": 4, "d_ff": 688, "seq": 64}




def build() -> tuple[torch.nn.Module, tuple, ll.Compiled]:
    model = LlamaBlock(CONFIG["d_model"], CONFIG["heads"], CONFIG["d_ff"], CONFIG["seq"]).eval()
    inputs = llama_inputs(1, CONFIG["seq"], CONFIG["d_model"])
    return model, inputs, ll.compile(model, inputs)


def time_to_first_run() -> None:
    """Run in a child process: seconds from ll.compile to the first compiled result."""
    _, inputs, comp = build()
    start = time.perf_counter()
    comp.run(*inputs)
    print(json.dumps({"seconds": time.perf_counter() - start}))


def compile_seconds(cache: str) -> float:
    env = dict(os.environ, LUMINAL_LAB_KERNEL_CACHE=cache)
    done = subprocess.run([sys.executable, __file__, "--first-run"], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--generation-size", type=int, default=20)
    parser.add_argument("--first-run", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "compiled_runtime.json")
    args = parser.parse_args()
    if args.first_run:
        time_to_first_run()
        return {}

    with tempfile.TemporaryDirectory() as cache:
        cold = compile_seconds(cache)
        warm = compile_seconds(cache)

    model, inputs, comp = build()
    space = comp.choice_space()
    genomes = [space.random_genome(seed) for seed in range(50)]
    start = time.perf_counter()
    for genome in genomes:
        extract(genome)
    extraction_ms = (time.perf_counter() - start) / len(genomes) * 1e3

    fused = ll.compile(model, inputs)
    fused.genome = fused.choice_space().fused_genome()
    result = comp.search(generations=args.generations, generation_size=args.generation_size, seed=0,
                         progress=False)
    with torch.no_grad():
        expected = model(*inputs)
        got = comp.run(*inputs)
        torch.testing.assert_close(fused.run(*inputs), expected, rtol=1e-4, atol=1e-5)
        inductor = torch.compile(model)
        inductor(*inputs)
        variants = {"eager": lambda: model(*inputs), "inductor": lambda: inductor(*inputs),
                    "searched": lambda: comp.run(*inputs), "fused": lambda: fused.run(*inputs)}
        # interleaved rounds, the best median of each variant, so drifting load hits all alike
        rounds = [{name: median_ms(fn) for name, fn in variants.items()} for _ in range(5)]
        best = {name: min(r[name] for r in rounds) for name in variants}
        eager, compiled = best["eager"], best["searched"]
    profile = comp.profile()
    ratio = eager / compiled
    report = {
        "benchmark": "compiled_llama_block_cpu",
        "config": {**CONFIG, "batch": 1, "dtype": "f32", "generations": args.generations,
                   "generation_size": args.generation_size},
        "torch_eager_ms": round(eager, 4),
        "inductor_ms": round(best["inductor"], 4),
        "compiled_ms": round(compiled, 4),
        "speedup_vs_eager": round(ratio, 3),
        "speedup_vs_inductor": round(best["inductor"] / compiled, 3),
        "fused_genome_ms": round(best["fused"], 4),
        "fused_vs_eager": round(eager / best["fused"], 3),
        "fused_vs_inductor": round(best["inductor"] / best["fused"], 3),
        "regions": {"searched": [r.op_names(comp.llir()) for r in comp.regions],
                    "fused": [r.op_names(fused.llir()) for r in fused.regions]},
        "target_speedup": 1.0,
        "meets_target": ratio >= 1.0,
        "max_abs_error_vs_eager": float((got - expected).abs().max()),
        "search": {"candidates": len(result.history), "outcomes": dict(result.outcomes()),
                   "initial_ms": round(result.initial.seconds * 1e3, 4),
                   "best_ms": round(result.best.seconds * 1e3, 4)},
        "kernels": len(comp.llir().kernels),
        "profile_total_ms": round(profile.total * 1e3, 4),
        "hot_spots_ms": [[f"k{kid}", op, round(s * 1e3, 4)] for kid, op, s in profile.hot_spots(8)],
        "extraction_ms_per_genome": round(extraction_ms, 3),
        "target_extraction_ms": 5.0,
        "compile_seconds_cold_cache": round(cold, 2),
        "compile_seconds_warm_cache": round(warm, 2),
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__},
    }
    write_result(args.out, report)
    return report


if __name__ == "__main__":
    main()
