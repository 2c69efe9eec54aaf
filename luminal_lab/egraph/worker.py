"""egglog in a worker process, so a runaway iteration can never take the notebook kernel down.

The worker holds one ``egglog.bindings.EGraph`` and answers requests sent as pickled,
length-prefixed messages over its stdin/stdout. It runs under an address-space limit
(``RLIMIT_AS``): an iteration that outgrows it kills the worker, not the caller. Its threads share
one malloc arena (``MALLOC_ARENA_MAX=1``): glibc otherwise reserves 64 MB of address space for each
arena it adds when threads contend, which happens or not with the machine's load, so the same
iteration would fit the limit on one run and not on the next.

``EgglogWorker`` (the caller's side) keeps a log of every command that succeeded. When
the worker dies (memory) or overruns a deadline (it is killed), a new worker replays the
log, so the e-graph is back in its last good state and stays usable. The replay runs under the
limit plus a quarter (``REPLAY_HEADROOM``), then the limit applies again: the log reached that
state within the limit once, but egglog matches rules on a rayon thread pool, so the address-space
peak of the same commands varies with how the threads interleave, and a state reached near the
limit may need a little more to be rebuilt. A replay that outgrows even that raises a named
``EgglogError``.

Every e-graph of a process starts from the same *base*, the schema and the rules (0.3 s of egglog's time to read),
and differs only by its graph. A worker reads a base once and saves it (egglog's ``push``); an e-graph done with its
worker (``close``) hands it back to a pool, which takes it back to the base (``pop``, then ``push`` again) for the next
e-graph. Starting a worker (a Python process importing egglog) takes about half a second more, so each start leaves a
spare, started and reading the base in the background, for the next e-graph under the same settings (``_Pool``):
compiling a graph then waits only for egglog to read the graph. Idle workers are killed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import EgglogError
from ..core.pipes import reap, receive, send

REPLAY_HEADROOM = 0.25  # a replay may use the memory limit plus this fraction of it
MAX_IDLE = 2  # idle workers the pool keeps


# ---- the worker's side -------------------------------------------------------------------------
def _describe(output) -> Any:
    """Plain-Python form of one egglog command output (picklable)."""
    from egglog import bindings

    if isinstance(output, bindings.RunScheduleOutput):
        report = output.report
        return {
            "kind": "run",
            "matches": dict(report.num_matches_per_rule),
            "seconds": {rule: t.total_seconds() for rule, t in report.search_and_apply_time_per_rule.items()},
            "updated": bool(report.updated),
            "iterations": len(report.iterations),
        }
    if isinstance(output, bindings.PrintAllFunctionsSize):
        return {"kind": "sizes", "sizes": dict(output.sizes)}
    return {"kind": "other", "text": str(output)}


def command_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level s-expression, skipping strings and ``;`` comments."""
    return _scan(text)[0]


def _scan(text: str) -> tuple[list[tuple[int, int]], int | None]:
    """``command_spans``, and where a top-level s-expression left open at the end starts."""
    spans, depth, start, in_string, i = [], 0, 0, False, 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == ";":
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, i))
        i += 1
    return spans, (start if depth > 0 else None)


def split_commands(text: str) -> list[tuple[int, str]]:
    """The text cut into one piece per top-level command: ``(lines before it, piece)``.

    A piece runs from the end of the previous command to the end of its own, so nothing is
    dropped (stray text or an unclosed command becomes a piece of its own and egglog reports
    it); it is indented so that egglog's columns stay those of the whole text.
    """
    ends = [end + 1 for _, end in command_spans(text)]
    if text[ends[-1] if ends else 0:].strip():
        ends.append(len(text))
    return [(text.count("\n", 0, start), " " * (start - text.rfind("\n", 0, start) - 1) + text[start:end])
            for start, end in zip([0, *ends], ends)]


POSITION = re.compile(r"^In (\d+):(\d+)-(?:(\d+):)?(\d+):", re.MULTILINE)  # egglog's position of a message line


def shift_position(message: str, lines: int) -> str:
    """egglog's ``In L:C-[L:]C:`` prefix moved down by ``lines``."""
    def shifted(found: re.Match) -> str:
        first, col, last, end = found.groups()
        last_text = f"{int(last) + lines}:" if last else ""
        return f"In {int(first) + lines}:{col}-{last_text}{end}:"

    return POSITION.sub(shifted, message, count=1)


class _Failed(Exception):
    """A command failed; ``changed`` when earlier commands of the same text had already run."""

    def __init__(self, message: str, changed: bool):
        self.message = message
        self.changed = changed


def _run_text(egraph, text: str) -> list[Any]:
    """Parse every command, then run them in order.

    Commands are parsed and run one at a time: egglog's Python bindings copy the whole
    source text into every span they hand over, so one ``parse_program`` of a program with
    thousands of commands costs time and memory quadratic in its length (a 500-node HLIR
    graph took 6 s and 3.5 GB that way). Everything is parsed before anything runs, so a
    syntax error changes nothing.
    """
    from egglog import bindings

    pieces = split_commands(text)
    parsed = []
    for lines, piece in pieces:
        try:
            parsed.append(egraph.parse_program(piece))
        except bindings.EggSmolError as error:
            message, unclosed = str(error), _scan(piece)[1]
            if unclosed is not None and "end of file" in message:  # point at the "(" left open, not at the end
                line = piece.count("\n", 0, unclosed) + 1
                column = unclosed - piece.rfind("\n", 0, unclosed)
                message = f"In {line}:{column}-{column}: (\nparse error: this ( is never closed"
            raise _Failed(shift_position(message, lines), changed=False) from None
    outputs = []
    for index, ((lines, piece), commands) in enumerate(zip(pieces, parsed)):
        try:
            outputs.extend(_describe(o) for o in egraph.run_program(*commands))
        except bindings.EggSmolError as error:
            raise _Failed(shift_position(str(error), lines), changed=index > 0) from None
        except BaseException as error:  # a Rust panic (pyo3's PanicException), e.g. a rule added twice
            if type(error).__name__ != "PanicException":
                raise
            spans = command_spans(piece)
            line = lines + 1 + (piece[:spans[0][0]].count("\n") if spans else 0)
            raise _Failed(f"In {line}:1-1: \negglog panicked: {error}", changed=True) from None
    return outputs


@contextlib.contextmanager
def _headroom() -> Iterator[None]:
    """Rebuilding a state (the base, a replay) runs under the hard limit, then the limit applies again."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def serve() -> None:
    """The worker process: answer requests on stdin until told to exit or the pipe closes."""
    import resource
    import signal

    from egglog import bindings

    # Ctrl-C (or a notebook's "interrupt kernel", or its shutdown) reaches the whole process group: the worker
    # exits at once, without a traceback; the parent rebuilds it by replaying the history when next needed
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

    limit = int(os.environ.get("LUMINAL_LAB_EGGLOG_MEMORY", "0"))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit + int(limit * REPLAY_HEADROOM)))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may reach the pipe
    egraph = bindings.EGraph()
    while True:
        try:
            request, payload = receive(stdin)
        except EOFError:
            return
        try:
            if request == "base":  # the schema and rules every e-graph starts from, kept to come back to
                with _headroom():
                    _run_text(egraph, payload)
                    egraph.run_program(*egraph.parse_program("(push)"))
                reply = None
            elif request == "to-base":  # drop this e-graph: back to the base, kept again
                egraph.run_program(*egraph.parse_program("(pop) (push)"))
                reply = None
            elif request == "run":
                reply = _run_text(egraph, payload)
            elif request == "replay":  # the log of a dead worker
                with _headroom():
                    for text in payload:
                        _run_text(egraph, text)
                reply = None
            elif request == "serialize":
                reply = egraph.serialize([], **payload).to_json()
            else:
                raise ValueError(f"unknown request {request!r}")
            send(stdout, ("ok", reply))
        except _Failed as failed:
            send(stdout, ("egglog", (failed.message, failed.changed)))
        except MemoryError:
            send(stdout, ("memory", "the egglog worker ran out of its memory budget"))
            return


# ---- the caller's side -------------------------------------------------------------------------
class WorkerDied(Exception):
    """The worker stopped (out of memory, killed at a deadline); ``reason`` says which."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass
class _Idle:
    """A worker process holding nothing but its base, or about to (``pending``: requests whose replies are unread)."""

    process: subprocess.Popen
    env: dict[str, str]
    base: str
    pending: int


class _Pool:
    """Every worker process: those lent to e-graphs, and idle ones holding only their base, for the next e-graph under
    the same settings (environment and base): the spare each start leaves, and the workers e-graphs gave back. At most
    ``MAX_IDLE`` are kept idle. The pool holds each process while it runs, so an e-graph collected as garbage never
    takes its worker's pipes with it (the collector finalizes, and so closes, every file of the garbage it finds, even
    one a finalizer gave back)."""

    _lock = threading.RLock()  # an e-graph collected while the pool works gives its worker back in the same thread
    _idle: ClassVar[list[_Idle]] = []
    _lent: ClassVar[set[subprocess.Popen]] = set()

    @classmethod
    def take(cls, env: dict[str, str], base: str) -> subprocess.Popen:
        """A running worker for ``env`` that holds ``base`` and nothing else (an idle one where one is alive, else a new
        one), leaving a spare started for the next caller."""
        with cls._lock:
            taken = None
            for idle in [i for i in cls._idle if i.env == env and i.base == base]:
                cls._idle.remove(idle)
                if cls._ready(idle):
                    taken = idle
                    break
            if taken is None:
                taken = _Idle(_spawn(env), env, base, 0)
                if not cls._sent(taken, ("base", base)) or not cls._ready(taken):
                    raise WorkerDied("memory")  # the base alone outgrew the memory limit
            cls.warm(env, base)
            cls._lent.add(taken.process)
            return taken.process

    @classmethod
    def warm(cls, env: dict[str, str], base: str) -> None:
        """Start a spare for ``env`` and ``base`` (reading it in the background) unless one is idle already."""
        with cls._lock:
            if not any(i.env == env and i.base == base for i in cls._idle):
                cls._keep(_Idle(_spawn(env), env, base, 0), ("base", base))

    @classmethod
    def give(cls, process: subprocess.Popen, env: dict[str, str], base: str) -> None:
        """Take ``process`` back to its base and keep it idle (or end it where enough are idle)."""
        with cls._lock:
            cls._lent.discard(process)
            cls._keep(_Idle(process, env, base, 0), ("to-base", None))

    @classmethod
    def end(cls, process: subprocess.Popen) -> None:
        """End a lent process (it died, or ran past a deadline)."""
        with cls._lock:
            cls._lent.discard(process)
        reap(process)

    @classmethod
    def _keep(cls, idle: _Idle, request: tuple) -> None:
        """Send ``idle`` its request and keep it, ending the oldest idle worker where ``MAX_IDLE`` are kept."""
        if cls._sent(idle, request):
            cls._idle.append(idle)
            while len(cls._idle) > MAX_IDLE:
                reap(cls._idle.pop(0).process)

    @staticmethod
    def _sent(idle: _Idle, request: tuple) -> bool:
        """Send ``request`` to ``idle`` (its reply read later, by ``_ready``); False where it died (it is ended)."""
        try:
            send(idle.process.stdin, request)
        except BrokenPipeError:
            reap(idle.process)
            return False
        idle.pending += 1
        return True

    @staticmethod
    def _ready(idle: _Idle) -> bool:
        """Read ``idle``'s pending replies: True when it answered them all, else (it died, or egglog refused the
        base) it is ended, and False."""
        try:
            for _ in range(idle.pending):
                status, reply = receive(idle.process.stdout)
                if status != "ok":
                    raise EgglogError(reply[0] if status == "egglog" else reply)
        except (EOFError, BrokenPipeError):
            reap(idle.process)
            return False
        except EgglogError:
            reap(idle.process)
            raise
        idle.pending = 0
        return True

    @classmethod
    def discard(cls) -> None:
        with cls._lock:
            for process in [*(idle.process for idle in cls._idle), *cls._lent]:
                reap(process)
            cls._idle.clear()
            cls._lent.clear()


def idle_pids() -> list[int]:
    """The process ids of the idle workers (holding only their base), oldest first."""
    return [i.process.pid for i in _Pool._idle if i.process.poll() is None]


def _spawn(env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-c", "from luminal_lab.egraph.worker import serve; serve()"]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)


atexit.register(_Pool.discard)


@dataclass
class EgglogWorker:
    """A handle on an egglog worker process: run text, serialize, survive crashes by replay. The process holds
    ``base`` (read once per process, see the module docstring) and then ``log``, every command that ran since."""

    memory_limit: int
    base: str = ""
    log: list[str] = field(default_factory=list)
    restarts: int = 0
    _process: subprocess.Popen | None = None

    @property
    def _env(self) -> dict[str, str]:
        return dict(os.environ, LUMINAL_LAB_EGGLOG_MEMORY=str(self.memory_limit), MALLOC_ARENA_MAX="1")

    def _start(self) -> None:
        try:
            self._process = _Pool.take(self._env, self.base)
        except WorkerDied:
            limit = self.memory_limit / 10**6
            raise EgglogError(f"starting an egglog worker ran out of memory: reading the schema and rules needed more "
                              f"than {limit * (1 + REPLAY_HEADROOM):,.0f} MB (memory_limit {limit:,.0f} MB plus "
                              f"{REPLAY_HEADROOM:.0%})") from None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process and self._process.poll() is None else None

    def peak_memory(self) -> int | None:
        """The worker's peak resident memory in bytes (Linux), while it runs."""
        if self.pid is None:
            return None
        with contextlib.suppress(OSError), open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return None

    def _request(self, request: str, payload: Any, deadline: float | None) -> Any:
        if self._process is None or self._process.poll() is not None:
            self._start()
            self._replay()
        process = self._process
        try:
            send(process.stdin, (request, payload))
            if deadline is not None:
                ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    self._kill()
                    raise WorkerDied("timeout")
            status, reply = receive(process.stdout)
        except (EOFError, BrokenPipeError):
            self._kill()
            raise WorkerDied("memory") from None
        if status == "egglog":
            message, changed = reply
            if changed:  # part of the text ran: go back to the last good state
                self.restart()
            raise EgglogError(message)
        if status == "memory":
            self._kill()
            raise WorkerDied("memory")
        return reply

    def run(self, text: str, deadline: float | None = None, record: bool = True) -> list[dict]:
        """Run egglog commands; on success they join the replay log (when ``record``)."""
        outputs = self._request("run", text, deadline)
        if record:
            self.log.append(text)
        return outputs

    def serialize(self, **options) -> str:
        return self._request("serialize", options, None)

    def _replay(self) -> None:
        if not self.log:
            return
        try:
            send(self._process.stdin, ("replay", self.log))
            status, reply = receive(self._process.stdout)
        except (EOFError, BrokenPipeError):
            status, reply = "memory", None
        if status == "memory":
            self._kill()
            limit = self.memory_limit / 10**6
            raise EgglogError(f"restoring the e-graph ran out of memory: replaying its {len(self.log)} commands needed "
                              f"more than {limit * (1 + REPLAY_HEADROOM):,.0f} MB (memory_limit {limit:,.0f} MB plus "
                              f"{REPLAY_HEADROOM:.0%}); raise memory_limit to go on from this state")
        if status != "ok":
            raise EgglogError(f"replaying the e-graph's history failed: {reply}")

    def restart(self) -> None:
        """A fresh worker in the last good state (used after a deadline or memory stop)."""
        self._kill()
        self.restarts += 1
        self._start()
        self._replay()

    def _kill(self) -> None:
        if self._process is not None:
            _Pool.end(self._process)
        self._process = None

    def close(self) -> None:
        """Give the process back to the pool, which takes it back to its base (a later request takes a worker again
        and replays ``log``)."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                _Pool.give(process, self._env, self.base)
            else:
                _Pool.end(process)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to clean up with
            self.close()
