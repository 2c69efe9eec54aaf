"""Saturated e-graphs kept on disk: a later process compiling the same program reads one instead of saturating.

An entry is one JSON file, ``egraphs/<key>.json`` in the directory of the tuning records (``core.storage``). The key
is a SHA-256 of the library version, the e-graph's egglog program (schema, rules and graph), the rulesets of its
schedule and the saturation's budgets. The entry holds the commands that saturated it (the egglog worker replays them
where the e-graph is stepped further), its step reports and egglog's serialized e-graph, from which the snapshot is
read. Only saturated e-graphs are kept: where a budget stopped one depends on the machine. An entry is written whole
or not at all; one that does not parse, or is not an entry of this version, is discarded; where the directory cannot
be written nothing is kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.storage import read_json, write_json
from ..core.version import __version__

FORMAT = 1  # the entries' layout: an entry of another is discarded


@dataclass(frozen=True)
class Saved:
    """A saturated e-graph: the commands that ran after its graph, its step reports (as dicts) and egglog's serialized
    e-graph."""

    commands: list[str]
    history: list[dict]
    serialized: str


def key(program: str, rulesets: Iterable[str], budgets: Iterable[float]) -> str:
    """The key of an e-graph's saturation: everything that decides what it holds."""
    text = json.dumps([FORMAT, __version__, program, list(rulesets), list(budgets)])
    return hashlib.sha256(text.encode()).hexdigest()


def path(directory: Path, of: str) -> Path:
    return directory / "egraphs" / f"{of}.json"


def load(directory: Path, of: str) -> Saved | None:
    """The saturated e-graph kept under key ``of`` in ``directory``, or None (none kept, or a discarded entry)."""
    entry = path(directory, of)
    data = read_json(entry)
    if data is None:
        return None
    fields = ("format", "key", "commands", "history", "serialized")
    if not isinstance(data, dict) or sorted(data) != sorted(fields) or data["format"] != FORMAT or data["key"] != of:
        entry.unlink(missing_ok=True)
        return None
    return Saved(data["commands"], data["history"], data["serialized"])


def store(directory: Path, of: str, saved: Saved) -> bool:
    """Keep ``saved`` under key ``of`` in ``directory``; False where it cannot be written."""
    return write_json(path(directory, of), {"format": FORMAT, "key": of, "commands": saved.commands,
                                            "history": saved.history, "serialized": saved.serialized})
