"""The kernel cache: generated CPU kernel sources -> compiled numba dispatchers.

Kernels are cached by source: in process, and on disk as importable modules named by the
hash of their source (numba's ``cache=True`` stores the machine code beside them), in
``~/.cache/luminal_lab/kernels`` or ``$LUMINAL_LAB_KERNEL_CACHE``, so a new process starts warm.
``CacheStats`` counts what was compiled and what was loaded, and the seconds each took.

A module is written to a temporary file and renamed into place, so a concurrent process (or one killed while
writing) never leaves a module cut short; one on disk that is not its kernel's source (another version's, or cut
short by another writer) is discarded with numba's machine code of it, as is machine code numba cannot load, and
the kernel is compiled again. In a directory this process cannot write, kernels are compiled into a temporary
directory for this process (and those it starts) alone, and the first line of a warning says why.

numba compiles one kernel at a time under a process-wide lock, most of a second each, so a new
plan's kernels are compiled side by side in worker processes (``compile_all``): each worker
compiles its share into the disk cache (the longest sources handed out first), which this process then loads
from; ``start_workers`` starts them ahead of that, for a compile that will need them. There are as many
workers as cores this process may use, or ``$LUMINAL_LAB_COMPILE_WORKERS`` (1: everything in process).
Workers are fresh interpreters (``compile_worker``), not forks: they import nothing of the caller's.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import hashlib
import importlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numba
import numpy as np
from numba.core.ccallback import CFunc

from ..core.arguments import write_error
from ..core.phases import phase

CACHE_ENV = "LUMINAL_LAB_KERNEL_CACHE"
WORKERS_ENV = "LUMINAL_LAB_COMPILE_WORKERS"
Request = tuple[str, tuple]  # a kernel's source and the numba types of its arguments


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


_ARRAY_TYPES: dict[tuple, Any] = {}


def signature_of(args: Sequence[Any]) -> tuple:
    """The numba types of a kernel's arguments (``numba.typeof``; an array's worked out once per dtype, rank and
    layout, as a plan's hundreds of arguments repeat a few)."""
    types = []
    for a in args:
        if isinstance(a, np.ndarray):
            flags = a.flags
            key = (a.dtype, a.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned)
            if key not in _ARRAY_TYPES:
                _ARRAY_TYPES[key] = numba.typeof(a)
            types.append(_ARRAY_TYPES[key])
        else:
            types.append(numba.typeof(a))
    return tuple(types)


def entry_point(function: Any, args: Sequence[Any]) -> Callable:
    """What calls ``function`` (a dispatcher compiled for the types of ``args``) on arguments of those types without
    numba's dispatch: the compiled overload's entry point, which unboxes them as those types unchecked. Anything
    else (a listing pass's stand-in) is returned as it is."""
    overloads = getattr(function, "overloads", None)
    return function if overloads is None else overloads[signature_of(args)].entry_point


class KernelCache:
    """Generated kernel sources -> numba dispatchers, in memory and as modules in ``directory``."""

    _functions: ClassVar[dict[str, Any]] = {}  # source -> dispatcher, shared by every cache of the process
    _lock: ClassVar[threading.RLock] = threading.RLock()  # its threads (a search behind the calls) write and import

    def __init__(self, directory: str | os.PathLike):
        self.directory = _writable(Path(directory).expanduser().resolve())
        self.stats = CacheStats()

    def function(self, source: str):
        """The dispatcher of ``source``'s ``kernel``, importing (and first writing) its module if needed. A module on
        disk that is not ``source`` (cut short, or another version's) is discarded with its machine code and
        written again."""
        if source in self._functions:
            return self._functions[source]
        with self._lock:
            if source in self._functions:
                return self._functions[source]
            name = _module_name(source)
            path = self.directory / f"{name}.py"
            if not path.exists() or path.read_text(errors="replace") != source:
                if path.exists():
                    self._discard(name, "its module is not the kernel's source")
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(source)
                os.replace(partial, path)  # atomic: a concurrent process sees all of it or nothing
                importlib.invalidate_caches()
            if str(self.directory) not in sys.path:
                sys.path.append(str(self.directory))
            function = importlib.import_module(name).kernel
            self._functions[source] = function
            return function

    def lookup(self, source: str, args: Sequence[np.ndarray]) -> tuple[Any, Request]:
        """The dispatcher of ``source`` where it is compiled in this process for the types of ``args`` (else None),
        and the request that compiles it."""
        signature = signature_of(args)
        function = self._functions.get(source)
        return (function if function is not None and signature in function.overloads else None), (source, signature)

    @phase("kernel compilation")
    def compile_all(self, requests: Sequence[Request]) -> None:
        """Compile the kernels of ``requests`` side by side in worker processes into the disk cache (those it holds
        already are only loaded there), so that ``compile`` then loads each; with one worker, or one request, it
        compiles them here."""
        requests = list(dict.fromkeys(requests))
        cold = self._cold(requests)
        if min(compile_workers(), len(cold)) > 1:  # the longest sources first: none is left to one worker at the end
            _WORKERS.compile(self.directory, sorted(cold, key=lambda request: len(request[0]), reverse=True))
        for source, signature in requests:
            self.compile_signature(self.function(source), signature)

    def compile_ahead(self, requests: Sequence[Request], workers: _Workers) -> None:
        """Compile the kernels of ``requests`` that the disk cache lacks in ``workers``, for whoever loads them next
        (nothing is loaded here)."""
        cold = self._cold(requests)
        if cold:
            workers.compile(self.directory, cold)

    def _cold(self, requests: Sequence[Request]) -> list[Request]:
        """The requests (without repeats) that the disk cache lacks and a worker can compile (arrays only)."""
        return [(source, signature) for source, signature in dict.fromkeys(requests) if not self._on_disk(source)
                and all(isinstance(t, numba.types.Array) for t in signature)]

    def _on_disk(self, source: str) -> bool:
        """Whether numba's disk cache holds machine code of ``source`` (writing its module first)."""
        self.function(source)
        return any((self.directory / "__pycache__").glob(f"{_module_name(source)}.kernel-*.nbi"))

    @phase("kernel compilation")
    def compile(self, source: str, args: Sequence[np.ndarray]):
        """The dispatcher of ``source``, compiled (or loaded from disk) for the types of ``args``."""
        function = self.function(source)
        self.compile_signature(function, signature_of(args))
        return function

    def compile_signature(self, function: Any, signature: tuple) -> None:
        """Compile (or load from disk) ``function`` for ``signature``, counting which it was (a native program's
        ``cfunc``, of no signature, compiled or loaded when its module was imported)."""
        if isinstance(function, CFunc):
            return
        if signature not in function.overloads:
            hits = sum(function.stats.cache_hits.values())
            start = time.perf_counter()
            try:
                function.compile(signature)
            except Exception as error:  # numba's files of it cut short or unreadable: discarded, compiled again
                name = function.py_func.__module__
                if not self._machine_code(name):
                    raise
                self._discard(name, f"numba could not load it ({type(error).__name__}: {error})")
                function.compile(signature)
            seconds = time.perf_counter() - start
            if sum(function.stats.cache_hits.values()) > hits:
                self.stats.loaded += 1
                self.stats.load_seconds += seconds
            else:
                self.stats.compiled += 1
                self.stats.compile_seconds += seconds


    def _machine_code(self, name: str) -> list[Path]:
        """numba's cache files of module ``name`` (its index and machine code)."""
        return list((self.directory / "__pycache__").glob(f"{name}.kernel-*.nb[ic]"))

    def _discard(self, name: str, why: str) -> None:
        """Remove module ``name``'s machine code (a concurrent reader then compiles it again), saying why."""
        for path in self._machine_code(name):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        warnings.warn(f"luminal_lab: discarded the cached kernel {name} in {self.directory}: {why}; it is compiled "
                      "again", stacklevel=3)


def _writable(directory: Path) -> Path:
    """``directory`` (made if missing) when this process can write there, else a temporary directory for this process
    alone, with a warning that says why."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        error = write_error(directory)
    except OSError as failed:
        error = failed
    if error is not None:
        fallback = Path(tempfile.mkdtemp(prefix="luminal_lab-kernels-"))
        atexit.register(shutil.rmtree, fallback, ignore_errors=True)
        warnings.warn(f"luminal_lab: the kernel cache directory {directory} is not writable ({type(error).__name__}: "
                      f"{error.strerror or error}); kernels are compiled into {fallback}, for this process only",
                      stacklevel=3)
        return fallback
    return directory


_caches: dict[Path, KernelCache] = {}


def kernel_cache() -> KernelCache:
    """The cache in ``$LUMINAL_LAB_KERNEL_CACHE`` (default ``~/.cache/luminal_lab/kernels``), one per directory. When
    that directory cannot be written, the temporary one that replaces it becomes ``$LUMINAL_LAB_KERNEL_CACHE``, so the
    processes this one starts (a search's measuring process) compile into it too."""
    directory = Path(os.environ.get(CACHE_ENV) or "~/.cache/luminal_lab/kernels").expanduser().resolve()
    if directory not in _caches:
        cache = _caches[directory] = KernelCache(directory)
        if cache.directory != directory:
            _caches[cache.directory] = cache
            os.environ[CACHE_ENV] = str(cache.directory)
    return _caches[directory]


def _module_name(source: str) -> str:
    return "lk_" + hashlib.sha256(source.encode()).hexdigest()[:32]


def compile_workers() -> int:
    """How many processes compile kernels side by side: ``$LUMINAL_LAB_COMPILE_WORKERS``, else the cores this process
    may run on."""
    given = os.environ.get(WORKERS_ENV)
    if given:
        try:
            return max(int(given), 1)
        except ValueError:
            raise ValueError(f"${WORKERS_ENV} must be a whole number of worker processes, got {given!r}") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _Workers:
    """Worker processes (``python -m luminal_lab.runtime.compile_worker``) that compile kernels into the disk cache,
    ``count()`` of them at ``nice`` priority, started on first use and kept for this process's life. A request a
    worker fails on, or a worker that dies, costs only time: whoever loads that kernel compiles it."""

    def __init__(self, count: Callable[[], int], nice: int = 0) -> None:
        self.count, self.nice = count, nice
        self.processes: list[subprocess.Popen] = []

    def start(self) -> None:
        """Start the workers that are not running (each takes about two seconds to import numba before its first
        answer); returns at once."""
        while len(self.processes) < self.count():
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "luminal_lab.runtime.compile_worker", str(self.nice)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True))

    def compile(self, directory: Path, requests: Sequence[Request]) -> None:
        """Compile ``requests`` (their signatures all of arrays) side by side, one per worker at a time."""
        self.start()
        todo: queue.SimpleQueue[Request] = queue.SimpleQueue()
        for request in requests:
            todo.put(request)
        threads = [threading.Thread(target=self._drain, args=(process, directory, todo)) for process in self.processes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.processes = [process for process in self.processes if process.poll() is None]

    @staticmethod
    def _drain(process: subprocess.Popen, directory: Path, todo: queue.SimpleQueue) -> None:
        while True:
            try:
                source, signature = todo.get_nowait()
            except queue.Empty:
                return
            line = json.dumps({"directory": str(directory), "source": source,
                               "signature": [_array_type(t) for t in signature]})
            try:
                process.stdin.write(line + "\n")
                process.stdin.flush()
                if not process.stdout.readline():
                    raise OSError("the worker closed its output")
            except OSError:  # a dead worker: its requests are compiled by the caller
                process.kill()
                return


    def close(self) -> None:
        """Stop the workers (they exit at the end of their input)."""
        for process in self.processes:
            process.stdin.close()
            process.wait()
        self.processes = []


_WORKERS = _Workers(compile_workers)


def start_workers() -> None:
    """Start the processes ``compile_all`` compiles in (when there is more than one) now, ahead of a compile that will
    need them, so that their start-up overlaps the caller's work; returns at once."""
    if compile_workers() > 1:
        _WORKERS.start()


class Builders:
    """``count`` compile workers at the lowest priority (``nice`` 19, so that a measurement running beside them
    keeps its cores) that compile candidates' kernels into a cache's disk cache in the background, one candidate
    after another: ``build`` returns at once, with a future that is done when the kernels are on disk."""

    def __init__(self, count: int) -> None:
        self.workers = _Workers(lambda: count, nice=19)
        self.queue = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="luminal-build")

    def build(self, cache: KernelCache, requests: Callable[[], Sequence[Request]],
              then: Callable[[], Any] | None = None) -> concurrent.futures.Future:
        """Start compiling the kernels that ``requests()`` lists (called in the background too) and ``cache``'s disk
        cache lacks; ``then``, when given, is called in the background once they are on disk, and the future holds
        what it returns."""
        def run() -> Any:
            cache.compile_ahead(requests(), self.workers)
            return then() if then is not None else None
        return self.queue.submit(run)

    def settle(self, timeout: float | None = None) -> None:
        """Wait until every build started so far is done (``TimeoutError`` past ``timeout`` seconds)."""
        self.queue.submit(lambda: None).result(timeout)

    def close(self) -> None:
        self.queue.shutdown(wait=True, cancel_futures=True)
        self.workers.close()


def _array_type(t: Any) -> list:
    return [str(numba.np.numpy_support.as_dtype(t.dtype)), t.ndim, t.layout, t.mutable, t.aligned]


def array_type(described: list) -> Any:
    """The numba array type ``_array_type`` described: ``[dtype, ndim, layout, mutable, aligned]``."""
    dtype, ndim, layout, mutable, aligned = described
    return numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout, readonly=not mutable,
                             aligned=aligned)
