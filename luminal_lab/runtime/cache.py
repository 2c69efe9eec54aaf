"""The kernel cache: generated CPU kernel sources -> compiled numba dispatchers.

Kernels are cached by source: in process, and on disk as importable modules named by the
hash of their source (numba's ``cache=True`` stores the machine code beside them), in
``~/.cache/luminal_lab/kernels`` or ``$LUMINAL_LAB_KERNEL_CACHE``, so a new process starts warm.
``CacheStats`` counts what was compiled and what was loaded, and the seconds each took.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numba
import numpy as np

CACHE_ENV = "LUMINAL_LAB_KERNEL_CACHE"


@dataclass
class CacheStats:
    """Kernel signatures compiled in this process and loaded from the disk cache, with the seconds each took."""

    compiled: int = 0
    loaded: int = 0
    compile_seconds: float = 0.0
    load_seconds: float = 0.0

    def __repr__(self) -> str:
        return (f"<CacheStats compiled {self.compiled} ({self.compile_seconds:.2f} s), "
                f"loaded {self.loaded} ({self.load_seconds:.2f} s)>")


class KernelCache:
    """Generated kernel sources -> numba dispatchers, in memory and as modules in ``directory``."""

    _functions: ClassVar[dict[str, Any]] = {}  # source -> dispatcher, shared by every cache of the process

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser().resolve()
        self.stats = CacheStats()

    def function(self, source: str):
        """The dispatcher of ``source``'s ``kernel``, importing (and first writing) its module if needed."""
        if source in self._functions:
            return self._functions[source]
        name = "lk_" + hashlib.sha256(source.encode()).hexdigest()[:32]
        path = self.directory / f"{name}.py"
        if not path.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(source)
            os.replace(partial, path)  # atomic: a concurrent process sees all of it or nothing
            importlib.invalidate_caches()
        if str(self.directory) not in sys.path:
            sys.path.append(str(self.directory))
        function = importlib.import_module(name).kernel
        self._functions[source] = function
        return function

    def compile(self, source: str, args: Sequence[np.ndarray]):
        """The dispatcher of ``source``, compiled (or loaded from disk) for the types of ``args``."""
        function = self.function(source)
        signature = tuple(numba.typeof(a) for a in args)
        if signature not in function.overloads:
            hits = sum(function.stats.cache_hits.values())
            start = time.perf_counter()
            function.compile(signature)
            seconds = time.perf_counter() - start
            if sum(function.stats.cache_hits.values()) > hits:
                self.stats.loaded += 1
                self.stats.load_seconds += seconds
            else:
                self.stats.compiled += 1
                self.stats.compile_seconds += seconds
        return function


_caches: dict[Path, KernelCache] = {}


def kernel_cache() -> KernelCache:
    """The cache in ``$LUMINAL_LAB_KERNEL_CACHE`` (default ``~/.cache/luminal_lab/kernels``), one per directory."""
    directory = Path(os.environ.get(CACHE_ENV) or "~/.cache/luminal_lab/kernels").expanduser().resolve()
    if directory not in _caches:
        _caches[directory] = KernelCache(directory)
    return _caches[directory]
