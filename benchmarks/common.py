"""What every benchmark script shares: timing a callable, and writing its JSON result."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def median_ms(fn: Callable[[], object], repeats: int = 50, warmup: int = 3) -> float:
    """Median wall time of ``fn`` in milliseconds, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def write_result(path: Path, result: dict, show: bool = True) -> None:
    """Write ``result`` as JSON to ``path`` (folders made as needed) and print it (unless not ``show``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    path.write_text(text)
    if show:
        print(text, end="")


def in_fresh_process(script: str, args: list[str], caches: str | None = None) -> dict:
    """Run ``script --child ARGS`` in a fresh Python and return the JSON its last line prints. Its kernel, genome and
    inductor caches are under ``caches`` (a fresh temporary folder when None: everything compiles cold)."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = caches or scratch
        env = dict(os.environ, LUMINAL_LAB_KERNEL_CACHE=os.path.join(folder, "kernels"),
                   LUMINAL_LAB_GENOME_CACHE=os.path.join(folder, "genomes"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(folder, "inductor"))
        held = [kind for kind in ("kernels", "genomes", "inductor")
                if os.path.isdir(os.path.join(folder, kind)) and os.listdir(os.path.join(folder, kind))]
        start = time.perf_counter()
        done = subprocess.run([sys.executable, script, "--child", *args], env=env, capture_output=True, text=True)
    warm = f" (warm caches: {', '.join(held)})" if held else ""
    print(f"{Path(script).name} {' '.join(args)}{warm}: {time.perf_counter() - start:.1f} s in a fresh process",
          file=sys.stderr, flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(script).name} {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def there_and_back(script: str, backends: Sequence[str], device: str, once: bool = False) -> dict[str, list[dict]]:
    """Each backend measured in two fresh processes (``--child BACKEND DEVICE``), in the order of ``backends`` and
    then in reverse, so that a steady drift of the machine's speed during the run weighs on every backend alike: the
    first process of each compiles with cold caches, the second from the caches the first filled. Returns each
    backend's results, in that order (``once``: the first only)."""
    with tempfile.TemporaryDirectory() as caches:  # each backend writes only its own kinds: its first run is cold
        runs = {backend: [in_fresh_process(script, [backend, device], caches)] for backend in backends}
        for backend in () if once else reversed(backends):
            runs[backend].append(in_fresh_process(script, [backend, device], caches))
    return runs


def devices_to_measure(script: str, description: str, measure: Callable[[str, str], dict]
                       ) -> tuple[argparse.Namespace, list[str]] | None:
    """The command line of a benchmark that measures each backend in a fresh process: ``--out``, ``--devices``
    (default: the CPU, and CUDA where torch has a device) and the hidden ``--child BACKEND DEVICE``, which runs
    ``measure`` and prints its JSON. Returns the arguments and the devices left to measure on; None in a child, or
    when no device is left."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / f"{Path(script).stem}.json")
    parser.add_argument("--devices", nargs="+", choices=["cpu", "cuda"],
                        help="the devices to measure on (default: the CPU, and CUDA where a GPU is present)")
    parser.add_argument("--once", action="store_true",
                        help="where backends run there and back (generate.py, train.py), run each once: quicker, "
                             "and the machine's drift is not evened out")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return None
    import torch

    devices = [d for d in args.devices or ["cpu", "cuda"] if d == "cpu" or torch.cuda.is_available()]
    if not devices:
        print(f"{Path(script).name}: torch has no CUDA device here; nothing measured")
        return None
    return args, devices
