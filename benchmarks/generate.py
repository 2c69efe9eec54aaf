"""Greedy generation with a KV cache: a 2-layer Llama (a ``transformers`` config, d=256, grouped-query attention,
random weights, the library's defaults) through torch eager, inductor and luminal_lab, measured in one run.

Writes benchmarks/results/generate.json. ``model.forward`` is compiled (inductor: ``torch.compile(dynamic=True)``;
luminal_lab: ``torch.compile(backend="luminal_lab")`` with its default options), a prompt of ``PROMPT`` tokens is
prefilled into a ``DynamicCache``, then ``STEPS`` tokens are decoded one at a time, greedily. Each backend runs in two
fresh processes, one after another in the order eager, inductor, luminal_lab and back (``common.there_and_back``):
its first with empty caches, its second from the caches the first filled. Each process times its first generation,
then ``ROUNDS`` warm ones; the warm figures pool both processes':

- ``first_generation_s``: the first whole generation, compilation (and luminal_lab's search) included, with empty
  caches; ``first_generation_warm_caches_s``: the same in the second process (None with ``--once``);
- ``compile_s``: what that first generation took beyond a warm one (the compile-and-search time);
- ``warm_up_s``: then, ``WARMUP`` prefills and the background work they start (luminal_lab's native functions of its
  hot plans, built by a worker at nice 19), waited for before the warm generations, in the first process;
- ``ttft_ms``: the prefill of a warm generation (time to first token, compilation excluded), the median of all;
- ``decode_tokens_per_s``: decode steps per second of a warm generation (the median of all), and ``step_ms``, each
  step's median time;
- ``programs``: how many programs luminal_lab compiled for the whole generation (prefill and decode);
- ``tokens_match_eager``: whether the generated tokens, first and warm, equal eager's.

Processes run minutes apart, and this machine's speed drifts by tens of percent over minutes (and by as much within
seconds), so the warm figures are also measured in one more fresh process holding all three models (``interleaved``):
after each's first generation and warm-up, ``ROUNDS`` rounds each generate once with every backend in turn (each
backend's median decode counts), then ``PREFILLS`` rounds each prefill once with every backend, in an order shuffled
each round (a backend that always ran after another's generation would always meet that one's caches), and each
backend's median prefill counts, with its quartiles (``ttft_quartiles_ms``); last each backend generates ``FRESH``
steps further than before, and those steps, at cache lengths never run in the process, give
``fresh_decode_tokens_per_s`` (the warm generations repeat their lengths; a user's next prompt does not), with each of
those steps' milliseconds and the pauses of any full garbage collection among them (``fresh_full_collections_ms``).

Ratios against eager and inductor: above 1, luminal_lab is faster (``interleaved_*``: from the one process).
"""

from __future__ import annotations

import contextlib
import gc
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import devices_to_measure, in_fresh_process, there_and_back, write_result  # noqa: E402

CONFIG = {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "vocab_size": 1024, "max_position_embeddings": 128}
PROMPT, STEPS, ROUNDS, PREFILLS = 64, 32, 5, 40
FRESH = 16  # decode steps at cache lengths the process has not run before (``interleaved``)
# prefills before the warm figures, past the calls after which luminal_lab builds a hot plan's native function in the
# background: 64 ready calls of a static program (``calls.HOT_CALLS``), 8 runs of a dynamic one at one binding
# (``native.HOT_RUNS``)
WARMUP = 80
BACKENDS = ("eager", "inductor", "luminal_lab")


def build(device: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model (seeded weights, transformers' defaults: cache on, default attention) and the prompt's token ids."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval().to(device)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, PROMPT), generator=torch.Generator().manual_seed(1))
    return model, ids.to(device)


def prefill(model: torch.nn.Module, ids: torch.Tensor, sync) -> tuple[object, torch.Tensor, float]:
    """The prompt prefilled into a new ``DynamicCache``: the cache, the first token and the seconds it took."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    start = time.perf_counter()
    logits = model(input_ids=ids, cache=cache, use_cache=True).logits
    token = logits[:, -1:].argmax(-1)
    sync()
    return cache, token, time.perf_counter() - start


def generate(model: torch.nn.Module, ids: torch.Tensor, sync,
             count: int = STEPS) -> tuple[list[int], float, list[float]]:
    """Greedy: the prefill, then ``count`` decode steps; the tokens, the prefill's seconds and each step's."""
    cache, token, first = prefill(model, ids, sync)
    tokens, steps = [int(token)], []
    for _ in range(count):
        start = time.perf_counter()
        logits = model(input_ids=token, cache=cache, use_cache=True).logits
        token = logits[:, -1:].argmax(-1)
        sync()
        steps.append(time.perf_counter() - start)
        tokens.append(int(token))
    return tokens, first, steps


def warm_up(backend: str, model: torch.nn.Module, ids: torch.Tensor, sync) -> float:
    """``WARMUP`` prefills, then (luminal_lab) the native functions they started building built: its seconds."""
    start = time.perf_counter()
    for _ in range(WARMUP):
        prefill(model, ids, sync)
    if backend == "luminal_lab":
        from luminal_lab.runtime.native import settle

        settle()
    return time.perf_counter() - start


def measure(backend: str, device: str) -> dict:
    """In this process: the first generation (compilation included), then ``ROUNDS`` warm ones, each's prefill and
    steps in seconds (``backend`` "interleaved": every backend's, ``interleaved``)."""
    if backend == "interleaved":
        return interleaved(device)
    model, ids = build(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        if backend == "inductor":
            model.forward = torch.compile(model.forward, dynamic=True)
        elif backend == "luminal_lab":
            model.forward = torch.compile(model.forward, backend="luminal_lab")
        start = time.perf_counter()
        tokens, _, _ = generate(model, ids, sync)
        first = time.perf_counter() - start
        settling = warm_up(backend, model, ids, sync)
        warm = [generate(model, ids, sync) for _ in range(ROUNDS)]
    figures = {"tokens": tokens, "first_generation_s": first, "warm_up_s": settling,
               "warm_tokens": [run[0] for run in warm],
               "prefills": [run[1] for run in warm], "steps": [run[2] for run in warm]}
    if backend == "luminal_lab":
        import luminal_lab as ll

        figures["programs"] = len(ll.programs(model.forward))
    return figures


@contextlib.contextmanager
def full_collections() -> Iterator[list[float]]:
    """The seconds of each full garbage collection while inside (a pause of tenths of a second in a process holding
    three compiled models), so that a figure it lands in can be told from the backend's own time."""
    pauses: list[float] = []
    started = [0.0]

    def watch(phase: str, info: dict) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                pauses.append(time.perf_counter() - started[0])
    gc.callbacks.append(watch)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(watch)


def interleaved(device: str) -> dict:
    """In this process: every backend's model compiled and run once, then ``ROUNDS`` rounds of one warm generation per
    backend in turn, then ``PREFILLS`` rounds of one prefill per backend in a shuffled order, then one generation per
    backend ``FRESH`` steps longer; each backend's median prefill (ms, with its quartiles), its decode rate, its rate
    over those ``FRESH`` steps at lengths it never ran before (``fresh_decode_tokens_per_s``: a real generation's
    lengths are new), and whether its tokens equal eager's."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    models, tokens = {}, {}
    with torch.no_grad():
        for backend in BACKENDS:
            model, ids = build(device)
            if backend == "inductor":
                model.forward = torch.compile(model.forward, dynamic=True)
            elif backend == "luminal_lab":
                model.forward = torch.compile(model.forward, backend="luminal_lab")
            models[backend] = model
            tokens[backend] = [generate(model, ids, sync)[0]]
        for backend, model in models.items():
            warm_up(backend, model, ids, sync)
        prefills, decodes = {b: [] for b in BACKENDS}, {b: [] for b in BACKENDS}
        for _ in range(ROUNDS):
            for backend, model in models.items():
                generated, _, steps = generate(model, ids, sync)
                tokens[backend].append(generated)
                decodes[backend].append(sum(steps))
        order, shuffle = list(BACKENDS), random.Random(0).shuffle
        for _ in range(PREFILLS):
            shuffle(order)
            for backend in order:
                prefills[backend].append(prefill(models[backend], ids, sync)[2])
        fresh, pauses = {}, {}
        for backend, model in models.items():
            with full_collections() as pauses[backend]:
                fresh[backend] = generate(model, ids, sync, STEPS + FRESH)[2][STEPS:]
    return {backend: {"ttft_ms": statistics.median(prefills[backend]) * 1e3,
                      "ttft_quartiles_ms": [q * 1e3 for q in statistics.quantiles(prefills[backend])[::2]],
                      "decode_tokens_per_s": STEPS / statistics.median(decodes[backend]),
                      "fresh_decode_tokens_per_s": FRESH / sum(fresh[backend]),
                      "fresh_step_ms": [step * 1e3 for step in fresh[backend]],
                      "fresh_full_collections_ms": [pause * 1e3 for pause in pauses[backend]],
                      "tokens_match_eager": all(t == tokens["eager"][0] for t in tokens[backend])}
            for backend in BACKENDS}


def summary(runs: list[dict], reference: list[int]) -> dict:
    """One backend's figures from its processes (``common.there_and_back``): their warm generations pooled."""
    first = runs[0]
    prefills = [prefill for run in runs for prefill in run["prefills"]]
    steps = [generation for run in runs for generation in run["steps"]]
    ttft = statistics.median(prefills)
    decode = statistics.median(sum(generation) for generation in steps)
    generated = [tokens for run in runs for tokens in (run["tokens"], *run["warm_tokens"])]
    figures = {"first_generation_s": first["first_generation_s"],
               "compile_s": first["first_generation_s"] - ttft - decode,
               "first_generation_warm_caches_s": runs[-1]["first_generation_s"] if len(runs) > 1 else None,
               "warm_up_s": first["warm_up_s"],
               "ttft_ms": ttft * 1e3, "decode_tokens_per_s": STEPS / decode,
               "step_ms": [statistics.median(generation[i] for generation in steps) * 1e3 for i in range(STEPS)],
               "tokens_match_eager": all(tokens == reference for tokens in generated)}
    if "programs" in first:
        figures["programs"] = first["programs"]
    return figures


def main() -> dict:
    options = devices_to_measure(__file__, __doc__.splitlines()[0], measure)
    if options is None:
        return {}
    args, devices = options
    result: dict = {"model": {"family": "LlamaForCausalLM (transformers)", **CONFIG}, "prompt": PROMPT,
                    "decode_steps": STEPS, "torch": torch.__version__, "devices": {}}
    for device in devices:
        runs = there_and_back(__file__, BACKENDS, device, args.once)
        reference = runs["eager"][0]["tokens"]
        figures = {backend: summary(runs[backend], reference) for backend in BACKENDS}
        eager, inductor, ours = figures["eager"], figures["inductor"], figures["luminal_lab"]
        ours["decode_vs_eager"] = ours["decode_tokens_per_s"] / eager["decode_tokens_per_s"]
        ours["decode_vs_inductor"] = ours["decode_tokens_per_s"] / inductor["decode_tokens_per_s"]
        ours["ttft_vs_eager"] = eager["ttft_ms"] / ours["ttft_ms"]
        ours["ttft_vs_inductor"] = inductor["ttft_ms"] / ours["ttft_ms"]
        ours["first_generation_vs_inductor"] = inductor["first_generation_s"] / ours["first_generation_s"]
        one = in_fresh_process(__file__, ["interleaved", device])
        for backend in BACKENDS:
            figures[backend]["interleaved"] = one[backend]
        rate = {backend: one[backend]["decode_tokens_per_s"] for backend in BACKENDS}
        ttft = {backend: one[backend]["ttft_ms"] for backend in BACKENDS}
        ours["interleaved_decode_vs_eager"] = rate["luminal_lab"] / rate["eager"]
        ours["interleaved_decode_vs_inductor"] = rate["luminal_lab"] / rate["inductor"]
        fresh = {backend: one[backend]["fresh_decode_tokens_per_s"] for backend in BACKENDS}
        ours["interleaved_fresh_decode_vs_eager"] = fresh["luminal_lab"] / fresh["eager"]
        ours["interleaved_fresh_decode_vs_inductor"] = fresh["luminal_lab"] / fresh["inductor"]
        ours["interleaved_ttft_vs_eager"] = ttft["eager"] / ttft["luminal_lab"]
        ours["interleaved_ttft_vs_inductor"] = ttft["inductor"] / ttft["luminal_lab"]
        result["devices"][device] = figures
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
