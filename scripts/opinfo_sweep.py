"""Sweep PyTorch's OpInfo database through the PyTorch frontend: every op_db entry that supports float32 on the
CPU, its first samples translated, run on the reference runtime (or compiled and run through the generated kernels,
``--compiled``) and compared with eager torch.

Prints one line per op with its seconds, the counts per class (pass, wrong, refused with UnsupportedOpError, other
named errors, crash, torch: torch itself cannot run or export the samples) and the slowest ops, and writes them with
the op names of each class to a JSON file.

    PYTHONPATH=. python scripts/opinfo_sweep.py [--samples 3] [--out opinfo_sweep.json] [--only NAME ...] [--compiled]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from tests.helpers.opinfo import OUTCOMES, float32_ops, op_name, sweep

SLOWEST = 10  # ops listed with their seconds (every sample of the op: export, translation, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="samples per op (default 3)")
    parser.add_argument("--out", type=Path, default=Path("opinfo_sweep.json"), help="where to write the JSON")
    parser.add_argument("--only", nargs="*", help="op names (as op.name or op.name.variant) to sweep")
    parser.add_argument("--compiled", action="store_true", help="compile each sample and run its kernels")
    args = parser.parse_args(argv)
    logging.getLogger("torch").setLevel(logging.ERROR)
    ops = float32_ops()
    if args.only:
        ops = [op for op in ops if op_name(op) in args.only or op.name in args.only]
    classes: dict[str, dict[str, str]] = {kind: {} for kind in OUTCOMES}
    took: dict[str, float] = {}
    start = last = time.perf_counter()
    for name, outcome in sweep(args.samples, ops, args.compiled):
        classes[outcome.kind][name] = outcome.detail
        took[name], last = time.perf_counter() - last, time.perf_counter()
        print(f"{outcome.kind:8s} {name:48s} {took[name]:6.1f} s  {outcome.detail[:160]}", flush=True)
    counts = {kind: len(names) for kind, names in classes.items()}
    seconds = time.perf_counter() - start
    slowest = dict(sorted(took.items(), key=lambda item: -item[1])[:SLOWEST])
    print(f"\n{len(ops)} ops, {args.samples} samples each, {seconds:.0f} s: "
          + ", ".join(f"{kind} {n}" for kind, n in counts.items())
          + "\nslowest: " + ", ".join(f"{name} {s:.1f} s" for name, s in slowest.items()))
    args.out.write_text(json.dumps({"samples": args.samples, "compiled": args.compiled, "ops": len(ops),
                                    "seconds": round(seconds),
                                    "counts": counts, "slowest_seconds": {k: round(v, 2) for k, v in slowest.items()},
                                    "classes": classes}, indent=1, sort_keys=False))
    print(f"written to {args.out}")
    return 0 if counts["wrong"] == counts["crash"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
