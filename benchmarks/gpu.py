"""The GPU table: luminal_lab's generated CUDA against torch eager and ``torch.compile``, measured in one run.

Writes benchmarks/results/gpu.json. Where no CUDA GPU can run the generated code (no torch CUDA
build, no numba-cuda, no driver, no device) it prints why and exits 0 without measuring.

For each workload (f32 unless named): the most-fused genome (or, with ``--search N``, the best of N
generations measured on the GPU, ranked by kernel time); ``kernels_ms``, its kernels, ``REPEATS`` runs
back to back between two CUDA events on inputs already on the device, as torch is timed
(``Profile.back_to_back``), and ``one_run_ms``, one run between two events, which also counts the host's
launch of its first kernel (``Profile.total``); ``call_ms``, the wall time per device-resident ``comp.run`` (CUDA
tensors in and out, synchronised after ``REPEATS`` calls) and ``overhead_ms``, what the call adds to
the kernels; torch eager and ``torch.compile`` timed with CUDA events around ``REPEATS`` back-to-back
calls on device tensors. Ratios are torch / luminal_lab kernels (above 1: luminal_lab is faster).
Row workloads (softmax, rmsnorm, layernorm: one row region each) also time the same genome with its
row regions run a warp per row (``warp_per_row_ms``, back to back; the main figure runs a block per row).
f32 matmuls run without tf32 on both sides (``torch.backends.cuda.matmul.allow_tf32 = False``), so
like is compared with like, and the f32 tensor-core tilings are refused. For matmuls every
implementation the e-graph offers (cuBLAS, each tiling, each tensor-core tiling) is timed too
(``implementations_ms``). Elementwise chains also report their bandwidth against a device copy of
the same bytes.

Targets on an H100: matmul >= 0.8x torch at the same precision; MLP >= 0.9x eager; llama block
d=512 >= 1.0x eager; softmax, rmsnorm and layernorm (one kernel each) >= 1.0x eager; elementwise
chains >= 90 % of copy bandwidth; ``comp.run`` overhead <= 50 us.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import RESULTS, write_result  # noqa: E402
from luminal_lab.core.errors import Refused  # noqa: E402
from luminal_lab.llir.genome import extract  # noqa: E402
from luminal_lab.runtime import cuda_unavailable_reason  # noqa: E402
from tests.helpers.models import MLP, LlamaBlock, RMSNorm, llama_inputs  # noqa: E402

REPEATS, WARMUP = 50, 5


def add_sin_sqrt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).sin().sqrt()


def silu_gated(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(a) * b


def softmax(x: torch.Tensor) -> torch.Tensor:
    return x.softmax(-1)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def _rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=generator) * 2 - 1).to(dtype)


def workloads() -> dict[str, tuple[Callable, tuple[torch.Tensor, ...], str]]:
    """Name -> (program, CPU example inputs, kind: elementwise, rows, matmul or model)."""
    chain = (_rand(2048, 2048, seed=1), _rand(2048, 2048, seed=2))
    return {
        "add_sin_sqrt_2^22": (add_sin_sqrt, chain, "elementwise"),
        "silu_gated_2^22": (silu_gated, chain, "elementwise"),
        "softmax_4096x1024": (softmax, (_rand(4096, 1024),), "rows"),
        "rmsnorm_4096x1024": (RMSNorm(1024).eval(), (_rand(4096, 1024),), "rows"),
        "layernorm_4096x1024": (torch.nn.LayerNorm(1024).eval(), (_rand(4096, 1024),), "rows"),
        "matmul_1024_f32": (matmul, (_rand(1024, 1024, seed=1), _rand(1024, 1024, seed=2)), "matmul"),
        "matmul_4096_f32": (matmul, (_rand(4096, 4096, seed=1), _rand(4096, 4096, seed=2)), "matmul"),
        "matmul_4096_bf16": (matmul, (_rand(4096, 4096, dtype=torch.bfloat16, seed=1),
                                      _rand(4096, 4096, dtype=torch.bfloat16, seed=2)), "matmul"),
        "mlp_512x1024x4096": (MLP(1024, 4096, 1024).eval(), (_rand(512, 1024),), "model"),
        "llama_d256_s64": (LlamaBlock(256, 4, 688, 64).eval(), llama_inputs(1, 64, 256), "model"),
        "llama_d512_s128": (LlamaBlock(512, 8, 1376, 128).eval(), llama_inputs(1, 128, 512), "model"),
    }


def cuda_ms(fn: Callable[[], object]) -> float:
    """Milliseconds per call of ``fn``: CUDA events around ``REPEATS`` calls after ``WARMUP`` untimed ones."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPEATS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / REPEATS


def copy_ms(nbytes: int) -> float:
    """A device copy of ``nbytes`` (read once, written once), for the bandwidth of elementwise chains."""
    source = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    return cuda_ms(lambda: target.copy_(source))


def call_ms(fn: Callable[[], object]) -> float:
    """Wall milliseconds per call of ``fn`` (synchronised after ``REPEATS`` calls): what a caller waits."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(REPEATS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / REPEATS


def implementations(comp: ll.Compiled, inputs: tuple[torch.Tensor, ...]) -> dict[str, float | str]:
    """Milliseconds of each implementation of the program's contraction (by kernel label), or why it was refused."""
    space = comp.choice_space()
    genome = space.fused_genome()
    (matmul,) = (k for k in extract(genome).kernels if k.op == "Matmul")
    times: dict[str, float | str] = {}
    for candidate in space.alternatives(genome, matmul.eclass):
        try:
            (label,) = (k.label for k in extract(candidate).kernels if k.op.startswith("Matmul"))
        except (Refused, ValueError):  # the product and its sum, or an e-node with no kernel
            continue
        try:
            times[label] = comp.profile(candidate, device="cuda", inputs=inputs, trials=10).total * 1e3
        except Refused as refused:
            times[label] = f"refused: {refused}"
    return times


def measure(name: str, program: Callable, inputs: tuple[torch.Tensor, ...], kind: str, generations: int) -> dict:
    comp = ll.compile(program, inputs)  # from the CPU module and inputs; torch runs a copy on the GPU
    module = copy.deepcopy(program).cuda() if isinstance(program, torch.nn.Module) else program
    device_inputs = tuple(t.cuda() for t in inputs)
    if generations:
        comp.search(generations=generations, generation_size=10, device="cuda", inputs=inputs, progress=False)
    else:
        comp.genome = comp.choice_space().fused_genome()
    profile = comp.profile(device="cuda", inputs=inputs, trials=REPEATS, back_to_back=True)
    kernels_ms = profile.back_to_back * 1e3  # as torch is timed: runs back to back between two events
    got = comp.run(*device_inputs, device="cuda")
    expected = module(*device_inputs)
    both_nan = got.isnan() & expected.isnan()  # sqrt of a negative sine, say: NaN on both sides agrees
    error = (got.float() - expected.float()).abs().masked_fill(both_nan, 0).max().item()
    per_call = call_ms(lambda: comp.run(*device_inputs, device="cuda"))
    eager_ms = cuda_ms(lambda: module(*device_inputs))
    compiled = torch.compile(module)
    compiled_ms = cuda_ms(lambda: compiled(*device_inputs))
    result = {"kind": kind, "kernels": len(profile.kernels), "regions": len(comp.regions),
              "kernels_ms": kernels_ms, "one_run_ms": profile.total * 1e3, "call_ms": per_call,
              "overhead_ms": per_call - kernels_ms,
              "output_on_device": got.is_cuda, "eager_ms": eager_ms, "compile_ms": compiled_ms,
              "vs_eager": eager_ms / kernels_ms, "vs_compile": compiled_ms / kernels_ms, "max_abs_error": error,
              "hot_spots": [(op, seconds * 1e3) for _, op, seconds in profile.hot_spots(5)]}
    if kind == "elementwise":
        nbytes = sum(t.numel() * t.element_size() for t in inputs) + expected.numel() * expected.element_size()
        result["copy_fraction"] = copy_ms(nbytes) / kernels_ms
    if kind == "matmul":
        result["implementations_ms"] = implementations(comp, inputs)
    if kind == "rows":  # the genome's row regions a block per row (as measured above) and a warp per row
        warp = comp.choice_space().warp_per_row(comp.genome)
        result["warp_per_row_ms"] = comp.profile(warp, device="cuda", inputs=inputs, trials=REPEATS,
                                                 back_to_back=True).back_to_back * 1e3
    comp.egraph.close()
    print(f"{name}: {result}", file=sys.stderr)
    return result


def main() -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--search", type=int, default=0, help="generations of measured search on the GPU (default: "
                                                               "the genome with the fewest kernels)")
    parser.add_argument("--only", nargs="*", help="names of the workloads to run (default: all)")
    args = parser.parse_args()
    reason = cuda_unavailable_reason() or (None if torch.cuda.is_available() else "torch has no CUDA device")
    if reason is not None:
        print(f"benchmarks/gpu.py: no GPU to measure on ({reason}); nothing measured")
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases: dict[str, dict] = {}
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "search_generations": args.search,
              "cases": cases,
              "targets": {"matmul vs torch": 0.8, "mlp vs eager": 0.9, "llama_d512 vs eager": 1.0, "rows vs eager": 1.0,
                          "elementwise copy_fraction": 0.9, "overhead_ms": 0.05}}
    for name, spec in workloads().items():
        if not args.only or name in args.only:
            cases[name] = measure(name, *spec, args.search)
            write_result(RESULTS / "gpu.json", result, show=False)  # what is measured so far, should time run out
    write_result(RESULTS / "gpu.json", result)
    return result


if __name__ == "__main__":
    main()
