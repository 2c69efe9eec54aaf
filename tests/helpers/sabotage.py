"""Candidates that take down or hang the process measuring them, as a kernel that crashes or loops would: an LLIR
carrying an object whose unpickling, in the measuring process (never here), kills that process or sleeps."""

from __future__ import annotations

import dataclasses
import os
import signal
import time

from luminal_lab.llir.llir import LLIR


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang(seconds: float, started: str | None) -> None:
    if started is not None:
        open(started, "w").close()
    time.sleep(seconds)


class Crash:
    """Unpickled, kills its process with SIGSEGV."""

    def __reduce__(self):
        return _crash, ()


class Hang:
    """Unpickled, sleeps ``seconds``, having first created the file ``started`` (if given)."""

    def __init__(self, seconds: float, started: str | None = None):
        self.seconds, self.started = seconds, started

    def __reduce__(self):
        return _hang, (self.seconds, self.started)


def sabotaged(llir: LLIR, sabotage: Crash | Hang) -> LLIR:
    """A copy of ``llir`` that carries ``sabotage`` to whoever unpickles it."""
    copy = dataclasses.replace(llir)
    copy.__dict__["sabotage"] = sabotage
    return copy
