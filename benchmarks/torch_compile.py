"""A 2-layer Llama (a ``transformers`` config, d=256, random weights) through ``torch.compile``, measured in one run.

Writes benchmarks/results/torch_compile.json: for torch eager, ``torch.compile`` (inductor) and
``torch.compile(backend="luminal_lab")`` with its default options (the most-fused genome, a short measured search,
the best genome cached), each on the CPU (and CUDA where a GPU is present):

- the first call (compile included) in seconds, with empty kernel and genome caches;
- the first call again in a fresh process whose caches are warm (luminal_lab then starts with the cached genome;
  eager, which has no caches, is measured once);
- the median time of a call after that, in ms, and the ratios against eager and inductor (> 1: faster);
- the largest difference from eager's output.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import devices_to_measure, in_fresh_process, median_ms, write_result  # noqa: E402

CONFIG = {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 4, "vocab_size": 1024, "max_position_embeddings": 128}
SEQ = 64


def build(device: str) -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(**CONFIG)
    config._attn_implementation = "eager"
    model = LlamaModel(config).eval().to(device)
    ids = torch.randint(0, CONFIG["vocab_size"], (1, SEQ), generator=torch.Generator().manual_seed(1))
    return model, ids.to(device)


def measure(backend: str, device: str) -> dict:
    """In this process: the first call's seconds, then the median call, of ``backend`` ("eager" or a torch.compile
    backend) on the model; with its output's largest difference from eager."""
    model, ids = build(device)

    def call(fn):
        return fn(input_ids=ids, use_cache=False).last_hidden_state

    with torch.no_grad():
        expected = call(model)
        fn = model if backend == "eager" else torch.compile(model, backend=backend)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        start = time.perf_counter()
        out = call(fn)
        sync()
        first = time.perf_counter() - start

        def timed():
            call(fn)
            sync()

        return {"first_call_s": first, "ms": median_ms(timed, repeats=30),
                "max_abs_diff": float((out - expected).abs().max())}


def main() -> dict:
    options = devices_to_measure(__file__, __doc__, measure)
    if options is None:
        return {}
    args, devices = options
    result: dict = {"model": {"family": "LlamaModel (transformers)", **CONFIG, "seq": SEQ, "batch": 1},
                    "torch": torch.__version__, "devices": {}}
    for device in devices:
        figures = {}
        for backend in ("eager", "inductor", "luminal_lab"):
            with tempfile.TemporaryDirectory() as caches:
                cold = in_fresh_process(__file__, [backend, device], caches)
                warm = cold if backend == "eager" else in_fresh_process(__file__, [backend, device], caches)
            figures[backend] = {"first_call_cold_s": cold["first_call_s"], "first_call_warm_s": warm["first_call_s"],
                                "ms": warm["ms"], "max_abs_diff": warm["max_abs_diff"]}
        ours = figures["luminal_lab"]["ms"]
        figures["luminal_lab"]["vs_eager"] = figures["eager"]["ms"] / ours
        figures["luminal_lab"]["vs_inductor"] = figures["inductor"]["ms"] / ours
        result["devices"][device] = figures
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
