"""Reference runtime vs torch eager on the llama-style block (d=256, seq=64), measured in one run.

Writes benchmarks/results/reference_runtime.json. Target: the reference stays within 5x of
eager (it is the ground truth, not the fast path, but notebooks should stay snappy).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import median_ms, write_result  # noqa: E402
from tests.helpers.models import LlamaBlock, llama_inputs  # noqa: E402

TARGET_RATIO = 5.0




def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=688)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "reference_runtime.json")
    args = parser.parse_args()

    model = LlamaBlock(args.d_model, args.heads, args.d_ff, args.seq).eval()
    inputs = llama_inputs(1, args.seq, args.d_model)
    start = time.perf_counter()
    comp = ll.compile(model, inputs)
    compile_s = time.perf_counter() - start

    with torch.no_grad():
        expected = model(*inputs)
        got = comp.run_reference(*inputs)
        max_error = float((got - expected).abs().max())
        # interleave the two so drifting machine load hits both alike
        eager, reference = [], []
        for _ in range(3):
            eager.append(median_ms(lambda: model(*inputs), args.repeats))
            reference.append(median_ms(lambda: comp.run_reference(*inputs), args.repeats))
    eager_ms, reference_ms = min(eager), min(reference)
    result = {
        "benchmark": "reference_runtime_llama_block",
        "config": {"d_model": args.d_model, "seq": args.seq, "heads": args.heads, "d_ff": args.d_ff, "batch": 1,
                   "dtype": "f32", "repeats": args.repeats},
        "hlir_nodes": len(comp.graph.nodes),
        "compile_s": round(compile_s, 3),
        "torch_eager_ms": round(eager_ms, 4),
        "reference_ms": round(reference_ms, 4),
        "ratio_reference_over_eager": round(reference_ms / eager_ms, 3),
        "target_max_ratio": TARGET_RATIO,
        "meets_target": reference_ms / eager_ms <= TARGET_RATIO,
        "max_abs_error_vs_eager": max_error,
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__},
    }
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
