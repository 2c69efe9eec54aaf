"""The best genome per program, kept on disk so that a later process starts with it instead of searching.

An entry is a JSON file named by its key: the SHA-256 of the e-graph's egglog program and rulesets (what decides
its e-classes and e-nodes), the input signature, the device and the library version. It holds the genome as its
choices (e-class id -> e-node id) with the genome's hash, and the seconds it measured. ``load`` rebuilds the genome
in a choice space and returns it only if every choice is an option there and the hash comes out the same, so an
entry from a different e-graph is never used. The directory is ``$LUMINAL_LAB_GENOME_CACHE`` or
``~/.cache/luminal_lab/genomes`` unless given.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..llir.genome import ChoiceSpace, Genome

CACHE_ENV = "LUMINAL_LAB_GENOME_CACHE"


def default_directory() -> Path:
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/luminal_lab/genomes").expanduser()


def program_key(program: str, rulesets: Iterable[str], signature: Iterable, device: str, version: str) -> str:
    """The key of a program's entry: a hex SHA-256 of everything that decides its genomes and their speed."""
    text = json.dumps([program, list(rulesets), [str(s) for s in signature], device, version])
    return hashlib.sha256(text.encode()).hexdigest()


class GenomeCache:
    """Best genomes by program key, as JSON files in ``directory``."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory).expanduser() if directory is not None else default_directory()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, key: str, space: ChoiceSpace) -> Genome | None:
        """The genome stored under ``key``, rebuilt in ``space``; ``None`` if there is none, it is unreadable, or it
        is not a genome of ``space``."""
        try:
            entry = json.loads(self.path(key).read_text())
            choices, stored_hash = entry["choices"], int(entry["hash"], 16)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        picks = []
        for cid, options in zip(space.classes, space.options):
            if not options:
                picks.append(0)
                continue
            ids = [node.id for node in options]
            if choices.get(cid) not in ids:
                return None
            picks.append(ids.index(choices[cid]))
        genome = space.genome(picks)
        return genome if genome.hash == stored_hash else None

    def save(self, key: str, genome: Genome, seconds: float | None = None) -> Path:
        """Store ``genome`` (and its measured ``seconds``) under ``key``; atomic, so a concurrent reader sees all of
        it or nothing."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"hash": f"{genome.hash:016x}", "seconds": seconds, "choices": genome.choices}))
        os.replace(partial, path)
        return path
