"""Fuzz at scale: random HLIR graphs x random genomes against the reference runtime.

Writes benchmarks/results/fuzz.json with the number of graphs, genome runs, refusals and
mismatches (a mismatch is a bug; its graph and genome are printed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import write_result  # noqa: E402
from tests.helpers.fuzz import check_genomes, graphs  # noqa: E402


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", type=int, default=600)
    parser.add_argument("--genomes", type=int, default=10, help="genomes per graph")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz.json")
    args = parser.parse_args()
    totals = {"graphs": 0, "genome_runs": 0, "refused": 0, "mismatches": 0}
    failures: list[str] = []

    @settings(max_examples=args.graphs, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(graphs())
    def run(case) -> None:
        graph, inputs = case
        totals["graphs"] += 1
        try:
            counts = check_genomes(graph, inputs, genomes=args.genomes, seed=totals["graphs"])
        except AssertionError as mismatch:
            totals["mismatches"] += 1
            failures.append(str(mismatch)[:2000])
            return
        totals["genome_runs"] += counts["ok"]
        totals["refused"] += counts["refused"]

    start = time.perf_counter()
    run()
    result = {"benchmark": "fuzz_genomes_vs_reference", **totals, "seconds": round(time.perf_counter() - start, 1),
              "failures": failures[:10]}
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
