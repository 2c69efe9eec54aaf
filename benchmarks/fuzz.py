"""Fuzz at scale: random HLIR graphs (tests/helpers/fuzz.py) x random genomes, each against the reference runtime.

By default 1,000 graphs x up to 10 genomes (a small graph may have fewer distinct ones: about 8 a graph on average).
A run is one genome at one binding compared with the reference: a graph with a symbolic dimension runs each genome at
three sizes, so the runs outnumber the genomes (with --seed 0: 8,137 genomes, 13,791 runs).
Writes benchmarks/results/fuzz.json after every graph (``complete`` false until the last) with the graphs, genomes,
runs, refusals, mismatches and crashes (exceptions other than ``Refused``); each failure is printed as it is found,
with the program that builds its graph, and the first ten are kept in the JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, write_result  # noqa: E402
from tests.helpers.fuzz import Case, Tally, check_genomes, graphs  # noqa: E402


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", type=int, default=1000)
    parser.add_argument("--genomes", type=int, default=10, help="genomes per graph")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis's seed: the same graphs each time")
    parser.add_argument("--out", type=Path, default=RESULTS / "fuzz.json")
    args = parser.parse_args()
    totals, counts = Tally(), {"graphs": 0, "symbolic_graphs": 0}
    start = time.perf_counter()

    def result(complete: bool) -> dict:
        seconds = time.perf_counter() - start
        return {"benchmark": "fuzz_genomes_vs_reference", "complete": complete, **counts,
                "genomes_per_graph": args.genomes, "genomes": totals.genomes, "runs": totals.runs,
                "run": "one genome at one binding of s (three for a symbolic graph), against the reference",
                "refused": totals.refused, "mismatches": totals.mismatches, "crashes": totals.crashes,
                "seconds": round(seconds, 1), "runs_per_second": round(totals.runs / seconds, 2),
                "failures": totals.failures[:10]}

    @seed(args.seed)
    @settings(max_examples=args.graphs, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(graphs())
    def run(case: Case) -> None:
        counts["graphs"] += 1
        counts["symbolic_graphs"] += len(case.runs) > 1
        tally = check_genomes(case, genomes=args.genomes, seed=counts["graphs"])
        for failure in tally.failures:
            print(f"graph {counts['graphs']}: {failure}\n", flush=True)
        totals.add(tally)
        write_result(args.out, result(complete=False), show=False)

    run()
    out = result(complete=True)
    write_result(args.out, out)
    return out


if __name__ == "__main__":
    main()
