"""Compile time against depth: a Llama (a ``transformers`` config, d=256, s=64, random weights) of 1, 2, 4 and 8
layers, with loop rolling (the default) and without, measured in one run.

Writes benchmarks/results/scaling.json, per depth and per mode (``rolled``, ``unrolled``):

- ``hlir_nodes`` of the program and ``compiled_nodes`` of the graph the e-graph is built from (the rolled one);
- ``export_s`` (torch.export and translation), ``saturate_s``, ``eclasses``, ``enodes`` and the egglog worker's
  ``worker_peak_mib``;
- ``extract_ms``: the median time to make the LLIR of a genome (extraction, and unrolling when rolled), over
  random genomes;
- ``search_s``: a short measured search (1 generation of 4 children, 3 trials each), kernels compiled included;
- ``compile_and_search_s``: export, saturation and search together;
- ``run_ms`` of the search's best genome, eager torch's and ``torch.compile``'s (inductor) ``eager_ms`` and
  ``inductor_ms`` on the same input, the ratios ``vs_eager`` and ``vs_inductor`` (> 1: luminal_lab is faster) and the
  largest difference from eager.

``ratios`` compares the deepest rolled model with the 1-layer one: the targets are compile and search within 1.5×
and e-nodes within 1.5×.

Each row is measured in a fresh process with an empty kernel cache (``LUMINAL_LAB_KERNEL_CACHE`` in a temporary
folder), so every depth pays its kernels' compilation as a user's first compile does, and no row reuses another's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import luminal_lab as ll  # noqa: E402
from benchmarks.common import RESULTS, median_ms, write_result  # noqa: E402
from benchmarks.torch_compile import CONFIG, SEQ  # noqa: E402


class Hidden(torch.nn.Module):
    """A ``LlamaModel`` returning its last hidden state (a tensor, for ``ll.compile``)."""

    def __init__(self, layers: int):
        super().__init__()
        from transformers import LlamaConfig, LlamaModel

        torch.manual_seed(0)
        config = LlamaConfig(**{**CONFIG, "num_hidden_layers": layers}, use_cache=False)
        config._attn_implementation = "eager"
        self.model = LlamaModel(config).eval()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def measure(layers: int, rolling: bool, genomes: int) -> dict:
    model = Hidden(layers)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids)
        start = time.perf_counter()
        comp = ll.compile(model, (ids,), rolling=rolling)
        export_s = time.perf_counter() - start
        start = time.perf_counter()
        comp.egraph.saturate()
        saturate_s = time.perf_counter() - start
        snapshot = comp.egraph.snapshot
        space = comp.choice_space()
        times = []
        for seed in range(genomes):
            genome = space.random_genome(seed)
            start = time.perf_counter()
            comp.llir(genome)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        result = comp.search(generations=1, generation_size=4, trials=3, progress=False)
        search_s = time.perf_counter() - start
        got = comp(ids)
        run_ms = median_ms(lambda: comp(ids), repeats=10, warmup=1)
        eager_ms = median_ms(lambda: model(ids), repeats=10, warmup=1)
        inductor = torch.compile(model)
        inductor(ids)
        inductor_ms = median_ms(lambda: inductor(ids), repeats=10, warmup=1)
    peak = comp.egraph.worker_peak_memory
    row = {
        "layers": layers, "rolled": comp.rolling is not None,
        "copies": comp.rolling.copies if comp.rolling else 1,
        "hlir_nodes": len(comp.graph.nodes), "compiled_nodes": len(comp.compiled_graph.nodes),
        "export_s": round(export_s, 2), "saturate_s": round(saturate_s, 2),
        "eclasses": snapshot.n_eclasses, "enodes": snapshot.n_enodes,
        "worker_peak_mib": round(peak / 2**20) if peak else None,
        "extract_ms": round(statistics.median(times) * 1e3, 1),
        "search_s": round(search_s, 2), "candidates": len(result.history),
        "compile_and_search_s": round(export_s + saturate_s + search_s, 2),
        "kernels": len(comp.llir().kernels),
        "run_ms": round(run_ms, 3), "eager_ms": round(eager_ms, 3), "inductor_ms": round(inductor_ms, 3),
        "vs_eager": round(eager_ms / run_ms, 3), "vs_inductor": round(inductor_ms / run_ms, 3),
        "max_abs_diff": float((got - expected).abs().max()),
    }
    comp.egraph.close()
    return row


def measure_fresh(layers: int, rolling: bool, genomes: int) -> dict:
    """``measure`` in a new process with an empty kernel cache."""
    with tempfile.TemporaryDirectory() as cache:
        done = subprocess.run([sys.executable, __file__, "--row", str(layers), "rolled" if rolling else "unrolled",
                               "--genomes", str(genomes)], env={**os.environ, "LUMINAL_LAB_KERNEL_CACHE": cache},
                              stdout=subprocess.PIPE, text=True, check=True)
    row = json.loads(done.stdout.splitlines()[-1])
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--unrolled-up-to", type=int, default=8, help="measure without rolling up to this depth")
    parser.add_argument("--genomes", type=int, default=5, help="random genomes timed for extract_ms")
    parser.add_argument("--out", type=Path, default=RESULTS / "scaling.json")
    parser.add_argument("--row", nargs=2, metavar=("LAYERS", "MODE"), help=argparse.SUPPRESS)  # one row, as JSON
    args = parser.parse_args()
    if args.row:
        print(json.dumps(measure(int(args.row[0]), args.row[1] == "rolled", args.genomes)))
        return
    rows = [measure_fresh(n, True, args.genomes) for n in args.layers]
    rows += [measure_fresh(n, False, args.genomes) for n in args.layers if 1 < n <= args.unrolled_up_to]  # 1: as is
    rolled = {r["layers"]: r for r in rows if r["rolled"] or r["layers"] == 1}
    first, deepest = rolled[min(rolled)], rolled[max(rolled)]
    ratios = {
        "layers": [first["layers"], deepest["layers"]],
        "compile_and_search": round(deepest["compile_and_search_s"] / first["compile_and_search_s"], 2),
        "enodes": round(deepest["enodes"] / first["enodes"], 2),
        "target": "<= 1.5 for both",
    }
    write_result(args.out, {"benchmark": "scaling", "model": {**CONFIG, "seq": SEQ}, "rows": rows, "ratios": ratios})


if __name__ == "__main__":
    main()
