"""One training step (forward with the LM loss, backward, AdamW) of a 2-layer Llama (a ``transformers`` config,
d=256, grouped-query attention, random weights, the library's defaults) through torch eager, inductor and luminal_lab,
measured in one run.

Writes benchmarks/results/train.json. The model is compiled (inductor: ``torch.compile(model)``; luminal_lab:
``torch.compile(model, backend="luminal_lab")`` with its default options, which compile the forward and the backward
and search each) and trained on one batch of ``BATCH`` sequences of ``SEQUENCE`` tokens for ``1 + STEPS`` steps. Each
backend runs in two fresh processes, one after another in the order eager, inductor, luminal_lab and back
(``common.there_and_back``): its first with empty caches, its second from the caches the first filled; the warm steps
pool both processes':

- ``first_step_s``: the first step, compilation (and luminal_lab's search of both programs) included, with empty
  caches; ``first_step_warm_caches_s``: the same in the second process (None with ``--once``);
- ``compile_s``: what that first step took beyond a warm one;
- ``step_ms``: the median warm step;
- ``losses``: every step's loss, and ``losses_match_eager``: whether those of both processes stay within 1e-3
  relative of eager's;
- ``programs``: how many programs luminal_lab compiled (the forward and the backward).

Ratios against eager and inductor: above 1, luminal_lab is faster.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import devices_to_measure, there_and_back, write_result  # noqa: E402
from benchmarks.generate import CONFIG  # noqa: E402

BATCH, SEQUENCE, STEPS = 4, 64, 10
BACKENDS = ("eager", "inductor", "luminal_lab")


def measure(backend: str, device: str) -> dict:
    """In this process: the first step (compilation included), then ``STEPS`` warm ones."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).train().to(device)
    ids = torch.randint(0, CONFIG["vocab_size"], (BATCH, SEQUENCE), generator=torch.Generator().manual_seed(1))
    ids = ids.to(device)
    run = model
    if backend == "inductor":
        run = torch.compile(model)
    elif backend == "luminal_lab":
        run = torch.compile(model, backend="luminal_lab")
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    losses, seconds = [], []
    for _ in range(1 + STEPS):
        start = time.perf_counter()
        optimiser.zero_grad(set_to_none=True)
        loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        optimiser.step()
        sync()
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
    figures = {"losses": losses, "first_step_s": seconds[0], "steps": seconds[1:]}
    if backend == "luminal_lab":
        import luminal_lab as ll

        figures["programs"] = len(ll.programs(run))
    return figures


def summary(runs: list[dict], reference: list[float]) -> dict:
    """One backend's figures from its processes (``common.there_and_back``): their warm steps pooled."""
    first = runs[0]
    step = statistics.median(seconds for run in runs for seconds in run["steps"])
    figures = {"first_step_s": first["first_step_s"], "compile_s": first["first_step_s"] - step,
               "first_step_warm_caches_s": runs[-1]["first_step_s"] if len(runs) > 1 else None,
               "step_ms": step * 1e3, "losses": first["losses"],
               "losses_match_eager": all(abs(a - b) <= 1e-3 * abs(b) for run in runs
                                         for a, b in zip(run["losses"], reference, strict=True))}
    if "programs" in first:
        figures["programs"] = first["programs"]
    return figures


def main() -> dict:
    options = devices_to_measure(__file__, __doc__.splitlines()[0], measure)
    if options is None:
        return {}
    args, devices = options
    result: dict = {"model": {"family": "LlamaForCausalLM (transformers)", **CONFIG}, "batch": BATCH,
                    "sequence": SEQUENCE, "steps": STEPS, "optimiser": "AdamW(lr=1e-3)", "torch": torch.__version__,
                    "devices": {}}
    for device in devices:
        runs = there_and_back(__file__, BACKENDS, device, args.once)
        figures = {backend: summary(runs[backend], runs["eager"][0]["losses"]) for backend in BACKENDS}
        eager, inductor, ours = figures["eager"], figures["inductor"], figures["luminal_lab"]
        ours["step_vs_eager"] = eager["step_ms"] / ours["step_ms"]
        ours["step_vs_inductor"] = inductor["step_ms"] / ours["step_ms"]
        ours["compile_vs_inductor"] = inductor["compile_s"] / ours["compile_s"]
        result["devices"][device] = figures
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
