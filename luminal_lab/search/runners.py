"""Runners: where a search's candidates are built and measured.

A search's caller hands the runner a ``Job`` (the inputs, weights, bindings and reference outputs, the device,
the trials and the memory budget); the search then hands it each candidate's LLIR: ``build`` starts compiling its
kernels ahead and ``measure`` runs it, checks it against the reference and times it, returning a ``Measurement``
(data only: outcome, reason, seconds, per-kernel seconds, and which worker measured it).

``measure_job`` is the measurement itself, wherever it runs: the candidate's plan is built (its kernels compiled
or loaded) and run once; then a candidate whose fastest of ``WARM_RUNS`` warm runs is slower than ``slow`` times the
best so far stops there (``slow``: early abort, unchecked: a candidate that slow is never kept). Not the first run:
it pays for first touches of memory (3 to 30 times a tiny program's median), and on a busy machine any single run may
wait a scheduler tick (4 ms) or several for a core. Else its outputs are compared with the reference, and ``trials``
timed runs follow one warm-up, none started past the search's deadline once one is done, so a budget holds to within
one timed run; the candidate's time is their median, with the fastest and slowest beside it.

- ``InProcessRunner``: the serial search, in the caller's process, with no early abort unless asked.
- ``LocalRunner`` (the default): builders, compile workers at the lowest priority, compile the next candidates'
  kernels into the disk kernel cache while a measuring process (``serve``) runs the current one under a time
  limit. A candidate that crashes the measuring process, hangs past the limit or exhausts its memory is recorded
  as ``error`` or ``timeout`` with the reason; a new measuring process takes the next candidate, and the search,
  and the caller, go on. Deadlines are ``time.monotonic()`` values, one clock for every process of a machine.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.util
import json
import os
import platform
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import LuminalError, Refused
from ..core.pipes import reap, receive, send
from ..llir.llir import LLIR
from ..runtime import load, new_runtime
from .search import Measurement, compare

SLOW = 3.0  # early abort: a candidate whose warm runs are all slower than this many times the best so far ends
WARM_RUNS = 3  # the warm runs early abort judges by


@dataclass
class Job:
    """What every candidate of one search is measured on."""

    device: str
    inputs: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    bindings: dict[str, int]
    expected: list[np.ndarray]
    trials: int = 10
    memory_budget: int | None = None


def measure_job(job: Job, llir: LLIR, best: float | None, deadline: float | None, slow: float | None,
                worker: str) -> Measurement:
    """Run, check and time ``llir`` for ``job`` (see the module docstring)."""
    try:
        runtime = new_runtime(llir, job.device, job.memory_budget)
        runtime.prepare(job.weights, job.bindings)
        outputs = runtime.run(job.inputs, job.weights, job.bindings)
        if slow is not None and best is not None:
            warm = runtime.fastest(job.inputs, job.weights, job.bindings, WARM_RUNS, enough=slow * best)
            if warm > slow * best:
                return Measurement("slow", f"its fastest of {WARM_RUNS} warm runs took {warm * 1e3:.3f} ms, over "
                                           f"{slow:g}x the best so far ({best * 1e3:.3f} ms)", warm, worker=worker)
    except Refused as refused:
        return Measurement("refused", str(refused), worker=worker)
    except MemoryError as error:  # over the memory budget, or an allocation failed: refused
        return Measurement("refused", str(error) or type(error).__name__, worker=worker)
    except Exception as error:  # a candidate that fails is recorded, never fatal
        return Measurement("error", f"{type(error).__name__}: {error}", worker=worker)
    outcome, reason = compare(outputs, job.expected)
    if outcome != "ok":
        return Measurement(outcome, reason, worker=worker)
    profile = runtime.profile(job.inputs, job.weights, job.bindings, warmup=1, trials=job.trials, until=deadline)
    cut = (f"the search's budget ran out after {profile.trials} of {job.trials} trials"
           if profile.trials < job.trials else None)
    return Measurement("ok", cut, profile.total, dict(profile.kernels), worker, profile.spread)


class Runner(ABC):
    """Builds and measures a search's candidates (see the module docstring)."""

    job: Job | None = None

    def start(self, job: Job) -> None:
        """Take the job every following candidate is measured on (a runner measures one search at a time)."""
        if self.job is not None:
            raise LuminalError(f"{type(self).__name__}.start: this runner is measuring another search; give each "
                               "search that runs at the same time its own runner")
        self.job = job

    @abstractmethod
    def build(self, llir: LLIR) -> None:
        """Start compiling ``llir``'s kernels ahead of its measurement (or leave it to ``measure``)."""

    @abstractmethod
    def measure(self, llir: LLIR, best: float | None, deadline: float | None) -> Measurement:
        """Run, check and time ``llir``: ``best`` is the fastest time so far (for early abort), ``deadline`` the
        search's budget as a ``time.monotonic()`` value."""

    def measure_all(self, llirs: Sequence[LLIR], best: Callable[[], float | None],
                    deadline: float | None) -> Iterator[Measurement]:
        """The measurements of ``llirs``, in order, each as it is asked for (``best()``: the fastest time then).
        Here one at a time; a runner with several workers measures ahead."""
        for llir in llirs:
            yield self.measure(llir, best(), deadline)

    def finish(self) -> None:
        """The search is over: its job is dropped (a runner keeps its processes for the next one)."""
        self.job = None


class InProcessRunner(Runner):
    """Candidates built and measured one after another in this process (the serial search): no isolation, and no
    early abort unless ``slow`` is given."""

    def __init__(self, slow: float | None = None):
        self.slow = slow

    def build(self, llir: LLIR) -> None:
        """Nothing ahead: the serial search compiles a candidate's kernels as it measures it."""

    def measure(self, llir: LLIR, best: float | None, deadline: float | None) -> Measurement:
        return measure_job(self.job, llir, best, deadline, self.slow, f"{platform.node()} (in process)")

    def __repr__(self) -> str:
        return f"<InProcessRunner slow={self.slow}>"


class LocalRunner(Runner):
    """Builders and a measuring process on this machine (see the module docstring): ``builders`` compile workers
    build ahead (0: the measuring process compiles), ``timeout`` (seconds) limits each candidate's measurement, and
    ``slow`` is the early-abort factor (``None``: every candidate gets all its trials)."""

    def __init__(self, builders: int = 2, timeout: float = 60.0, slow: float | None = SLOW):
        if isinstance(builders, bool) or not isinstance(builders, int) or builders < 0:
            raise LuminalError(f"LocalRunner: builders must be a whole number >= 0, got {builders!r}")
        _check_limits("LocalRunner", timeout, slow)
        self.builders, self.timeout, self.slow = builders, float(timeout), slow
        self.restarts = 0  # measuring processes lost to a crash or a timeout
        self._process: subprocess.Popen | None = None
        self._sent: Job | None = None  # the job the measuring process holds
        self._unanswered = False  # whether its "ready" for that job is still to be read
        self._builders = None  # runtime.cache.Builders, once a build starts
        self._builds: dict[int, Future] = {}  # by genome hash
        _LIVE.add(self)

    def build(self, llir: LLIR) -> None:
        if not self.builders or self.job.device != "cpu":
            return  # CUDA kernels are compiled (by NVRTC) in the measuring process
        from ..runtime.cache import Builders, kernel_cache  # numba loads on first use, not at import

        if self._builders is None:
            self._builders = Builders(self.builders)
        job = self.job

        def requests() -> list:  # listed in the background too
            try:
                return new_runtime(llir, "cpu").kernel_requests(job.weights, job.bindings)
            except Exception:  # a candidate that cannot even be planned fails in its measurement, with the reason
                return []

        self._builds[llir.genome_hash] = self._builders.build(kernel_cache(), requests)

    def start(self, job: Job) -> None:
        super().start(job)
        self._ready()  # the measuring process starts (and takes the job) while the search lowers its first genomes

    def _ready(self) -> None:
        """A live measuring process, sent the job (its answer is read before the next measurement)."""
        if self._process is None or self._process.poll() is not None:
            if self.job.device == "cpu":  # a kernel directory this process cannot write is replaced before it starts
                from ..runtime.cache import kernel_cache

                kernel_cache()
            # in a session of its own: Ctrl-C (a notebook's "interrupt kernel") reaches this process, which stops it
            command = [sys.executable, "-c", "from luminal_lab.search.runners import serve; serve()"]
            self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             start_new_session=True)
            self._sent, self._unanswered = None, False
        if self._sent is not self.job:
            self._answered()  # the last job's answer first: each job sent is answered once, in order
            send(self._process.stdin, ("job", self.job))
            self._sent, self._unanswered = self.job, True

    def _answered(self) -> None:
        """Read the measuring process's answer to the last job sent, if not read yet."""
        if self._unanswered:
            self._unanswered = False
            if receive(self._process.stdout) != "ready":
                raise LuminalError("LocalRunner: the measuring process did not take the job")

    def measure(self, llir: LLIR, best: float | None, deadline: float | None) -> Measurement:
        build = self._builds.pop(llir.genome_hash, None)
        if build is not None:  # its kernels on disk first; one whose build fails compiles them as it loads them
            wait([build], timeout=None if deadline is None else max(deadline - time.monotonic(), 0.0))
        self._ready()
        process = self._process
        worker = f"{platform.node()} pid {process.pid}"
        try:
            self._answered()  # it took the job (a process that died starting reads as EOF)
            limit = self.timeout
            if deadline is not None:  # past the budget, a trial's grace (3 runs at the best time; 0.25 s at least)
                limit = min(limit, max(deadline - time.monotonic(), 0.0) + max(0.25, 3 * (best or 0.0)))
            send(process.stdin, ("measure", (llir, best, deadline, self.slow, worker)))
            ready, _, _ = select.select([process.stdout], [], [], limit)
            if ready:
                return receive(process.stdout)
        except (EOFError, BrokenPipeError):
            code = process.wait()
            self._lost()
            return Measurement("error", f"the measuring process died ({_death(code)})", worker=worker)
        except KeyboardInterrupt:  # the search is interrupted: its measurement, mid-way, goes with the process
            self._stop()
            raise
        self._lost()
        return Measurement("timeout", f"{_overran(deadline, self.timeout)}; its measuring process was stopped",
                           worker=worker)

    def finish(self) -> None:
        for build in self._builds.values():  # builds of candidates the search never reached
            build.cancel()
        self._builds.clear()
        super().finish()

    def _lost(self) -> None:
        """The measuring process crashed or overran: kill it; the next candidate starts another."""
        self.restarts += 1
        self._stop()

    def _stop(self) -> None:
        process, self._process, self._sent = self._process, None, None
        if process is not None:
            reap(process)

    def close(self) -> None:
        """Stop the measuring process and the builders (the next search starts them again)."""
        self._stop()
        if self._builders is not None:
            self._builders.close()
            self._builders = None

    def __repr__(self) -> str:
        return f"<LocalRunner builders={self.builders} timeout={self.timeout:g} s slow={self.slow}>"


def _check_limits(runner: str, timeout: float, slow: float | None) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise LuminalError(f"{runner}: timeout must be a positive number of seconds, got {timeout!r}")
    if slow is not None and (isinstance(slow, bool) or not isinstance(slow, (int, float)) or slow <= 1):
        raise LuminalError(f"{runner}: slow must be a factor above 1, or None, got {slow!r}")


_LIVE: weakref.WeakSet[LocalRunner] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for runner in list(_LIVE):
        runner.close()


def _overran(deadline: float | None, timeout: float) -> str:
    """Why a measurement that gave no result in time was stopped, in words."""
    if deadline is not None and time.monotonic() >= deadline:
        return "the search's budget ran out"
    return f"no result within the {timeout:g} s time limit"


def _death(code: int) -> str:
    """How a process that exited with ``code`` ended, in words."""
    if code < 0:
        name = signal.Signals(-code).name
        return name + (", killed: out of memory?" if name == "SIGKILL" else "")
    return f"exit code {code}"


def serve() -> None:
    """The measuring process: take a job, then measure candidates until the pipe closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may reach the pipe
    job = None
    while True:
        try:
            request, payload = receive(stdin)
        except EOFError:
            return
        if request == "job":
            job = _taken(payload)
            send(stdout, "ready")
        elif request == "measure":
            llir, best, deadline, slow, worker = payload
            send(stdout, measure_job(job, llir, best, deadline, slow, worker))
        else:
            os._exit(2)


_DEFAULT: list[LocalRunner] = []
_DEFAULT_LOCK = threading.Lock()


def default_runner(job: Job) -> LocalRunner:
    """A ``LocalRunner`` started on ``job``: the first of this process's default runners that no search is using,
    else a new one (so searches one after another share a measuring process, and searches at the same time, a
    profiler's and a cell's, each get their own)."""
    with _DEFAULT_LOCK:
        runner = next((r for r in _DEFAULT if r.job is None), None)
        if runner is None:
            runner = LocalRunner()
            _DEFAULT.append(runner)
        runner.start(job)
        return runner


class RayRunner(Runner):
    """Candidates measured on a Ray cluster: one actor per GPU on GPU nodes for a CUDA search, else one per node
    holding all its CPUs, each compiling and measuring with ``measure_job`` (so its kernels are compiled on its
    machine) and answering as JSON. A generation's candidates are spread over the actors; their measurements come
    back in order, each naming the machine and process that measured it. A candidate that kills its actor, or
    outlasts ``timeout``, is recorded as ``error`` or ``timeout`` and the actor is replaced.

    ``address`` is a running cluster's (``"auto"``, ``"ray://host:10001"``); ``None`` uses the cluster this process
    already joined (``ray.init``), else starts a local one, which listens on this machine's loopback only when Ray
    was not imported before (Ray reads that setting, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, at import)."""

    def __init__(self, address: str | None = None, timeout: float = 60.0, slow: float | None = SLOW):
        if (sys.modules["ray"] is None) if "ray" in sys.modules else importlib.util.find_spec("ray") is None:
            raise LuminalError("RayRunner needs Ray, an optional extra: pip install 'luminal_lab[ray]' -c "
                               "constraints.txt (make setup installs it)")
        _check_limits("RayRunner", timeout, slow)
        self.address, self.timeout, self.slow = address, float(timeout), slow
        self._actors: list[tuple[Any, dict]] = []  # (actor, its options), for a replacement
        self._device: str | None = None
        self._job_ref = None  # the job in the cluster's object store
        self._starting: dict[int, Any] = {}  # actor slot -> the task of its replacement taking the job
        self.restarts = 0  # actors replaced after a crash or a timeout

    @property
    def _ray(self):
        if "ray" not in sys.modules and self.address is None:
            # a local cluster on the loopback only: Ray reads this (treating the machine as one node) at import
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        return ray

    def start(self, job: Job) -> None:
        super().start(job)
        ray = self._ray
        if not ray.is_initialized():
            if self.address is None:
                ray.init(include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=self.address, log_to_driver=False)
        if self._device != job.device:
            self._kill_actors()
            self._actors = [(None, options) for options in self._placements(job.device)]
            self._device = job.device
            if not self._actors:
                raise LuminalError(f"RayRunner: the cluster has no node to measure a {job.device} search on "
                                   f"({'no GPU' if job.device == 'cuda' else 'no live node'})")
        self._job_ref = ray.put(job)
        self._actors = [(self._new_actor(options) if actor is None else actor, options)
                        for actor, options in self._actors]
        ray.get([actor.start.remote(self._job_ref) for actor, _ in self._actors])
        self._starting = {}

    def _placements(self, device: str) -> list[dict]:
        """The options of each actor: one per GPU of each GPU node (CUDA), or one per live node (CPU)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        placements = []
        for node in self._ray.nodes():
            if not node["Alive"]:
                continue
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            gpus = int(node["Resources"].get("GPU", 0))
            if device == "cuda":
                placements += [{"num_gpus": 1, "num_cpus": 0, "scheduling_strategy": strategy}] * gpus
            else:  # the node's every CPU: nothing else runs there while it measures (and Ray gives BLAS them all)
                placements.append({"num_cpus": node["Resources"].get("CPU", 1), "scheduling_strategy": strategy})
        return placements

    def _new_actor(self, options: dict):
        return self._ray.remote(_RayMeasurer).options(**options).remote()

    def build(self, llir: LLIR) -> None:
        """Nothing ahead here: each actor compiles the kernels of what it measures, on its machine."""

    def measure(self, llir: LLIR, best: float | None, deadline: float | None) -> Measurement:
        return next(self.measure_all([llir], lambda: best, deadline))

    def measure_all(self, llirs: Sequence[LLIR], best: Callable[[], float | None],
                    deadline: float | None) -> Iterator[Measurement]:
        ray = self._ray
        free = list(range(len(self._actors)))
        running: dict[int, tuple[int, Any, float]] = {}  # candidate -> (actor slot, its task, when it started)
        ahead = 0
        try:
            for index in range(len(llirs)):
                while ahead < len(llirs) and free:
                    slot = free.pop(0)
                    left = None if deadline is None else deadline - time.monotonic()  # each machine its own clock
                    task = self._actors[slot][0].measure.remote(llirs[ahead], best(), left, self.slow)
                    running[ahead] = (slot, task, time.monotonic())
                    ahead += 1
                slot, task, started = running.pop(index)
                yield self._result(slot, task, started, deadline)
                free.append(slot)
        finally:
            for _, task, _ in running.values():
                ray.cancel(task)

    def _result(self, slot: int, task, started: float, deadline: float | None) -> Measurement:
        ray = self._ray
        actor, options = self._actors[slot]
        starting = self._starting.pop(slot, None)
        if starting is not None and not ray.wait([starting], timeout=0)[0]:
            # a replacement still starting: as for the local runner, the limit counts from its taking the job
            ray.wait([starting], timeout=self.timeout)
            started = time.monotonic()
        limit = self.timeout - (time.monotonic() - started)
        if deadline is not None:  # past the budget, a second's grace: a trial in flight, and the network
            limit = min(limit, deadline - time.monotonic() + 1.0)
        ready, _ = ray.wait([task], timeout=max(limit, 0.0))
        if ready:
            try:
                return Measurement(**json.loads(ray.get(task), object_hook=_int_keys))
            except ray.exceptions.RayActorError as died:
                outcome, reason = "error", f"its Ray worker died ({type(died).__name__})"
        else:
            outcome, reason = "timeout", f"{_overran(deadline, self.timeout)}; its Ray worker was stopped"
        ray.kill(actor, no_restart=True)
        self.restarts += 1
        replacement = self._new_actor(options)
        self._starting[slot] = replacement.start.remote(self._job_ref)
        self._actors[slot] = (replacement, options)
        return Measurement(outcome, reason, worker=f"ray actor {slot}")

    def _kill_actors(self) -> None:
        for actor, _ in self._actors:
            if actor is not None:
                self._ray.kill(actor, no_restart=True)
        self._actors, self._starting = [], {}

    def close(self) -> None:
        """Stop the actors (the cluster stays up)."""
        self._kill_actors()
        self._device = None

    def __repr__(self) -> str:
        return f"<RayRunner address={self.address!r} actors={len(self._actors)} timeout={self.timeout:g} s>"


class _RayMeasurer:
    """A Ray actor: holds a job, measures candidates with ``measure_job`` and answers each as JSON text."""

    def __init__(self) -> None:
        self.job: Job | None = None
        self.worker = f"{platform.node()} ray pid {os.getpid()}"

    def start(self, job: Job) -> None:
        self.job = _taken(job)

    def measure(self, llir: LLIR, best: float | None, left: float | None, slow: float | None) -> str:
        deadline = None if left is None else time.monotonic() + left
        measured = measure_job(self.job, llir, best, deadline, slow, self.worker)
        return json.dumps(dataclasses.asdict(measured))


def _taken(job: Job) -> Job:
    """``job``, taken by a measuring process: its device's libraries are imported now (``runtime.load``), before
    the first candidate's time limit starts (a device that cannot load fails each measurement, with the reason)."""
    with contextlib.suppress(Exception):
        load(job.device)
    return job


def _int_keys(found: dict) -> dict:
    """JSON's string keys of ``kernel_seconds`` back to kernel ids."""
    if "kernel_seconds" in found:
        found["kernel_seconds"] = {int(kid): seconds for kid, seconds in found["kernel_seconds"].items()}
    return found
