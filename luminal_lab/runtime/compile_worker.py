"""A kernel-compiling worker of the kernel cache (``luminal_lab.runtime.cache``): ``python -m
luminal_lab.runtime.compile_worker`` reads one JSON request a line (a cache directory, a kernel's source and its
argument types, arrays as ``cache.array_type`` reads them), compiles it into that directory's disk cache and answers
one line: ``ok``, or ``error`` and what went wrong. An argument, when given, is the niceness it runs at (the search's
builders run at 19, beside a measurement)."""

from __future__ import annotations

import json
import os
import signal
import sys

from .cache import KernelCache, array_type


def main() -> None:
    # Ctrl-C (a notebook's "interrupt kernel", or its shutdown) reaches the whole process group: exit at once, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    if len(sys.argv) > 1 and int(sys.argv[1]):
        os.nice(int(sys.argv[1]))
    for line in sys.stdin:
        request = json.loads(line)
        try:
            cache = KernelCache(request["directory"])
            cache.compile_signature(cache.function(request["source"]),
                                    tuple(array_type(t) for t in request["signature"]))
            answer = "ok"
        except Exception as error:  # the caller compiles the kernel itself, and meets the error there
            answer = f"error {type(error).__name__}: {error}".replace("\n", " ")
        try:
            print(answer, flush=True)
        except BrokenPipeError:  # the caller stopped listening (a search's builders closed): nothing to answer
            os._exit(0)


if __name__ == "__main__":
    main()
