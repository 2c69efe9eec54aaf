"""egglog in a worker process, so a runaway iteration can never take the notebook kernel down.

The worker holds one ``egglog.bindings.EGraph`` and answers requests sent as pickled,
length-prefixed messages over its stdin/stdout. It runs under an address-space limit
(``RLIMIT_AS``): an iteration that outgrows it kills the worker, not the caller.

``EgglogWorker`` (the caller's side) keeps a log of every command that succeeded. When
the worker dies (memory) or overruns a deadline (it is killed), a new worker replays the
log, so the e-graph is back in its last good state and stays usable.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import EgglogError

_HEADER = struct.Struct("!Q")


def _send(stream, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exactly(stream, count: int) -> bytes:
    chunks, remaining = [], count
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise EOFError("the egglog worker closed its pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _receive(stream) -> Any:
    (length,) = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    return pickle.loads(_read_exactly(stream, length))


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


def serve() -> None:
    """The worker process: answer requests on stdin until told to exit or the pipe closes."""
    import resource

    from egglog import bindings

    limit = int(os.environ.get("LUMINAL_LAB_EGGLOG_MEMORY", "0"))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may reach the pipe
    egraph = bindings.EGraph()
    while True:
        try:
            request, payload = _receive(stdin)
        except EOFError:
            return
        try:
            if request == "run":
                reply = [_describe(o) for o in egraph.run_program(*egraph.parse_program(payload))]
            elif request == "serialize":
                reply = egraph.serialize([], **payload).to_json()
            elif request == "exit":
                return
            else:
                raise ValueError(f"unknown request {request!r}")
            _send(stdout, ("ok", reply))
        except bindings.EggSmolError as error:
            _send(stdout, ("egglog", str(error)))
        except MemoryError:
            _send(stdout, ("memory", "the egglog worker ran out of its memory budget"))
            return


# ---- the caller's side -------------------------------------------------------------------------
class WorkerDied(Exception):
    """The worker stopped (out of memory, killed at a deadline); ``reason`` says which."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass
class EgglogWorker:
    """A handle on an egglog worker process: run text, serialize, survive crashes by replay."""

    memory_limit: int
    log: list[str] = field(default_factory=list)
    restarts: int = 0
    _process: subprocess.Popen | None = None

    def _start(self) -> None:
        env = dict(os.environ, LUMINAL_LAB_EGGLOG_MEMORY=str(self.memory_limit))
        self._process = subprocess.Popen([sys.executable, "-c", "from luminal_lab.egraph.worker import serve; serve()"],
                                         stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process and self._process.poll() is None else None

    def peak_memory(self) -> int | None:
        """The worker's peak resident memory in bytes (Linux), while it runs."""
        if self.pid is None:
            return None
        try:
            with open(f"/proc/{self.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def _request(self, request: str, payload: Any, deadline: float | None) -> Any:
        if self._process is None or self._process.poll() is not None:
            self._start()
            self._replay()
        process = self._process
        try:
            _send(process.stdin, (request, payload))
            if deadline is not None:
                ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    self._kill()
                    raise WorkerDied("timeout")
            status, reply = _receive(process.stdout)
        except (EOFError, BrokenPipeError):
            self._kill()
            raise WorkerDied("memory") from None
        if status == "egglog":
            raise EgglogError(reply)
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
        for text in self.log:
            _send(self._process.stdin, ("run", text))
            status, reply = _receive(self._process.stdout)
            if status != "ok":
                raise EgglogError(f"replaying the e-graph's history failed: {reply}")

    def restart(self) -> None:
        """A fresh worker in the last good state (used after a deadline or memory stop)."""
        self._kill()
        self.restarts += 1
        self._start()
        self._replay()

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._process is not None:
            self._process.wait()
            for stream in (self._process.stdin, self._process.stdout):
                stream.close()
        self._process = None

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                _send(self._process.stdin, ("exit", None))
                self._process.wait(timeout=5)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to clean up with
            pass
