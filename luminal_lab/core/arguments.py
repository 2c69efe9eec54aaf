"""Checks on the arguments of public entry points.

Each check returns the value it accepts (numbers as plain Python numbers) or raises ``ArgumentError``, whose first
line reads ``where(name=value): expected ...``: the entry point, the argument, the value given and what it takes.
"""

from __future__ import annotations

import numbers
import os
import reprlib
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

from .errors import ArgumentError

_repr = reprlib.Repr()
_repr.maxstring, _repr.maxother = 40, 60


def fail(where: str, name: str, value: Any, expected: str) -> NoReturn:
    """Raise the ``ArgumentError`` of ``where`` given ``name=value`` where it expected ``expected``."""
    raise ArgumentError(f"{where}({name}={_repr.repr(value)}): expected {expected}")


def integer(where: str, name: str, value: Any, minimum: int | None = None) -> int:
    """``value`` as an int (a bool is not one), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or \
            (minimum is not None and value < minimum):
        fail(where, name, value, "an int" + (f" >= {minimum}" if minimum is not None else ""))
    return int(value)


def seconds(where: str, name: str, value: Any, optional: bool = False) -> float | None:
    """``value`` as a finite float >= 0, or None when ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < float("inf"):
        fail(where, name, value, "a number of seconds >= 0" + (" or None" if optional else ""))
    return float(value)


def flag(where: str, name: str, value: Any) -> bool:
    """``value``, True or False."""
    if not isinstance(value, bool):
        fail(where, name, value, "True or False")
    return value


def writable(where: str, path: Any) -> Path:
    """``path`` (a str or path) as a ``Path`` for a file to be written, its folder made if missing."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        fail(where, "path", path, "a file path (a str or pathlib.Path)")
    path = Path(path)
    if path.is_dir():
        fail(where, "path", str(path), "a file path, not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        fail(where, "path", str(path), f"a file path in a folder that can be made ({error.strerror})")
    return path


def write_error(directory: Path) -> OSError | None:
    """None when this process can create a file in ``directory``, else the error that stopped it (the probe file is
    removed)."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
            return None
    except OSError as error:
        return error


def one_of(where: str, name: str, value: Any, choices: Iterable[str]) -> str:
    """``value``, one of the strings ``choices``."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        fail(where, name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def function(where: str, name: str, value: Any) -> Callable | None:
    """``value``, a callable or None."""
    if value is not None and not callable(value):
        fail(where, name, value, "a function or None")
    return value
