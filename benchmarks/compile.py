"""The first call, cold and warm: ``torch.compile(model, backend="luminal_lab")`` with its default options against
inductor (``torch.compile(model)``), each in a fresh process, for a tiny function, the 2-layer Llama of
``generate.py``, a BERT encoder and GPT-2 small.

Writes benchmarks/results/compile.json and compile.png. Every workload's model and inputs are built before the clock
starts; its first call (under ``torch.no_grad()``, ``transformers``' defaults: the cache on) is timed in a fresh process
with empty caches in a temporary folder (``cold``: luminal_lab's kernels, tuning records and kept e-graphs, inductor's
FX graph and kernel caches), then in a second fresh process with the caches the first left (``warm``), for each
compiler. ``ratio`` is inductor's time over luminal_lab's: 1.0 or more, luminal_lab is no slower. Where luminal_lab's
time goes is its phases (``luminal_lab.core.phases``): export, translation, rolling, saturation (split by ruleset in
proportion to egglog's time per rule, where this process saturated), extraction, planning, kernel compilation, search
(none: the default search goes on behind the calls), the backend's other work and the run (``run``), and ``dynamo``,
the rest of the first call (dynamo's tracing and its guards). ``--workloads`` picks some (default: all).

    python benchmarks/compile.py [--workloads tiny llama bert gpt2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS, in_fresh_process, write_result  # noqa: E402

COMPILERS = ("luminal_lab", "inductor")
PHASES = ("dynamo", "export", "translation", "rolling", "saturation", "extraction", "planning", "kernel compilation",
          "search", "backend", "run")


def tiny() -> tuple[Callable, tuple]:
    import torch

    def add_sin(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a + b).sin()

    generator = torch.Generator().manual_seed(0)
    return add_sin, (torch.randn(64, generator=generator), torch.randn(64, generator=generator))


def llama() -> tuple[Callable, tuple]:
    from benchmarks.generate import build

    model, ids = build("cpu")
    return model, (ids,)


def bert() -> tuple[Callable, tuple]:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=1024, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, max_position_embeddings=128)
    ids = torch.randint(0, 1024, (1, 64), generator=torch.Generator().manual_seed(1))
    return BertModel(config).eval(), (ids,)


def gpt2() -> tuple[Callable, tuple]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    ids = torch.randint(0, 50257, (1, 128), generator=torch.Generator().manual_seed(1))
    return GPT2LMHeadModel(GPT2Config()).eval(), (ids,)


WORKLOADS = {"tiny": tiny, "llama": llama, "bert": bert, "gpt2": gpt2}


def first_call(workload: str, compiler: str) -> dict:
    """In a fresh process: the seconds of the first call, and (luminal_lab) its phases."""
    import torch

    import luminal_lab as ll
    from luminal_lab.core.phases import totals
    from luminal_lab.egraph.fusion import fusion_rules
    from luminal_lab.egraph.ops import default_registry

    model, inputs = WORKLOADS[workload]()
    with torch.no_grad():
        expected = model(*inputs)
        compiled = torch.compile(model, backend="luminal_lab") if compiler == "luminal_lab" else torch.compile(model)
        start = time.perf_counter()
        got = compiled(*inputs)
        seconds = time.perf_counter() - start
    first = lambda out: out if isinstance(out, torch.Tensor) else out[0]  # noqa: E731 - logits or hidden states
    result = {"seconds": seconds, "max_abs_diff": float((first(got) - first(expected)).abs().max())}
    if compiler == "luminal_lab":
        phases = totals()
        phases["dynamo"] = seconds - sum(phases.values())
        ruleset = {rule.name: rule.ruleset for rule in (*default_registry().rules(), *fusion_rules())}
        by_ruleset: dict[str, float] = {}
        for program in ll.programs(compiled):
            for report in program.egraph.history:
                for rule, spent in report.seconds.items():
                    by_ruleset[ruleset.get(rule, "user")] = by_ruleset.get(ruleset.get(rule, "user"), 0.0) + spent
        if 0 < sum(by_ruleset.values()) <= phases.get("saturation", 0.0):  # saturated here (not read from disk)
            by_ruleset["egglog's other work"] = phases["saturation"] - sum(by_ruleset.values())
        else:
            by_ruleset = {}
        result.update(phases=phases, saturation_by_ruleset=by_ruleset,
                      programs=len(ll.programs(compiled)),
                      rolled=[p.rolling.copies if p.rolling else 0 for p in ll.programs(compiled)])
    return result


def picture(results: dict, path: Path) -> None:
    """Stacked bars of luminal_lab's phases per workload, cold and warm, beside inductor's first call."""
    from matplotlib.figure import Figure

    rows = [(f"{w} {kind}", results[w][kind]) for w in results for kind in ("cold", "warm")]
    figure = Figure(figsize=(9, 0.55 * len(rows) + 1.6), layout="constrained")
    axes = figure.subplots()
    colours = dict(zip(PHASES, ("#9e9e9e", "#8c564b", "#e377c2", "#bcbd22", "#d62728", "#ff7f0e", "#2ca02c",
                                "#1f77b4", "#9467bd", "#17becf", "#7f7f7f")))
    for y, (_, figures) in enumerate(rows):
        left = 0.0
        for name in PHASES:
            spent = figures["luminal_lab_phases"].get(name, 0.0)
            axes.barh(y, spent, left=left, color=colours[name], label=name if y == 0 else None, height=0.6)
            left += spent
        axes.plot([figures["inductor_s"]], [y], marker="|", markersize=18, color="black",
                  label="inductor" if y == 0 else None)
    axes.set_yticks(range(len(rows)), [label for label, _ in rows])
    axes.invert_yaxis()
    axes.set_xlabel("first call (s): luminal_lab's phases; inductor's first call marked |")
    axes.legend(loc="lower right", fontsize="small", ncols=2)
    figure.savefig(path, dpi=110)


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--out", type=Path, default=RESULTS / "compile.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(first_call(*args.child)))
        return {}
    results: dict = {}
    for workload in args.workloads:
        figures: dict = {}
        for compiler in COMPILERS:
            with tempfile.TemporaryDirectory() as caches:
                figures[compiler] = [in_fresh_process(__file__, [workload, compiler], caches) for _ in range(2)]
        results[workload] = {}
        for kind, run in (("cold", 0), ("warm", 1)):
            ours, theirs = figures["luminal_lab"][run], figures["inductor"][run]
            results[workload][kind] = {
                "luminal_lab_s": ours["seconds"], "inductor_s": theirs["seconds"],
                "ratio": theirs["seconds"] / ours["seconds"], "luminal_lab_phases": ours["phases"],
                "saturation_by_ruleset": ours["saturation_by_ruleset"], "programs": ours["programs"],
                "rolled": ours["rolled"], "max_abs_diff": {"luminal_lab": ours["max_abs_diff"],
                                                           "inductor": theirs["max_abs_diff"]}}
    write_result(args.out, {"benchmark": "compile", "workloads": results})
    picture(results, args.out.with_suffix(".png"))
    return results


if __name__ == "__main__":
    main()
