"""Tuning records: every candidate a search measured, kept in an SQLite database that later searches and processes
(and, exported, other machines) start from.

A record holds the program key (``program_key``: a SHA-256 of the e-graph's egglog program and rulesets, the input
signature, the device and the library version, so a record never serves another e-graph), the genome as its choices
(e-class id -> e-node id) and hash, the device, the seconds it measured, its outcome (``search.OUTCOMES``, or
``unmeasured`` for a genome chosen without measuring) and reason, the library version, the machine and when. The
database is ``tuning.sqlite`` in ``$LUMINAL_LAB_GENOME_CACHE`` (else ``~/.cache/luminal_lab``) unless given; it
runs in WAL mode and every write is one transaction, so several processes record into it at once, and a process
killed while writing leaves the records as they were before that write. A database that is damaged (cut short,
overwritten) or of another version (other columns) is discarded and started again, with a warning; in a directory
this process cannot write, nothing is recorded or read, and the first line of a warning says why.

``best`` is the torch.compile genome cache: the fastest ``ok`` genome of a key (else the latest unmeasured one) that
rebuilds in the program's choice space with the same hash. A search resumes from ``fastest`` (the best few, measured
again) and passes over what ``measured`` lists (every genome measured on this machine). ``export``/``import_`` move
records between machines as JSON lines; what is read back is data (JSON, SQLite), never unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import itertools
import json
import os
import platform
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from ..core.arguments import write_error
from ..core.storage import CACHE_ENV as CACHE_ENV
from ..core.storage import directory_of
from ..core.version import __version__
from ..llir.genome import ChoiceSpace, Genome
from .search import Candidate

T = TypeVar("T")
UNMEASURED = "unmeasured"
FIELDS = ("key", "hash", "choices", "device", "seconds", "outcome", "reason", "version", "machine", "recorded")
_TABLE = f"CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, {', '.join(FIELDS)})"
_INDEX = "CREATE INDEX IF NOT EXISTS records_by_key ON records (key, outcome, seconds)"
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")  # sqlite's names of a damaged file (cut short, overwritten)


class _Stale(Exception):
    """The database holds a records table of another version (other columns)."""


def program_key(program: str, rulesets: Iterable[str], signature: Iterable, device: str, version: str) -> str:
    """The key of a program's records: a hex SHA-256 of everything that decides its genomes and their speed."""
    text = json.dumps([program, list(rulesets), [str(s) for s in signature], device, version])
    return hashlib.sha256(text.encode()).hexdigest()


class TuningRecords:
    """The records in ``directory``'s ``tuning.sqlite`` (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = directory_of(directory)
        self.path = self.directory / "tuning.sqlite"
        self.unwritable: str | None = None  # why the database cannot be written, once found: nothing is recorded

    def _connect(self) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_TABLE)
            columns = [row[1] for row in connection.execute("PRAGMA table_info(records)")]
            if columns != ["id", *FIELDS]:
                raise _Stale(f"its records have the columns {columns}")
            connection.execute(_INDEX)
        except BaseException:
            connection.close()
            raise
        return connection

    def _use(self, work: Callable[[sqlite3.Connection], T], nothing: T) -> T:
        """``work`` done on a connection. A damaged database, or one of another version, is discarded and made
        again; one this process cannot write gives ``nothing`` from then on, with a warning that says why."""
        try:
            return self._attempt(work, nothing)
        except (_Stale, sqlite3.DatabaseError) as error:
            if isinstance(error, sqlite3.DatabaseError) and error.sqlite_errorname not in _CORRUPT:
                raise
            warnings.warn(f"luminal_lab: discarded the tuning records {self.path}: {error}; they start again empty",
                          stacklevel=3)
            for path in (self.path, *(self.path.with_name(self.path.name + end) for end in ("-wal", "-shm"))):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            return self._attempt(work, nothing)

    def _attempt(self, work: Callable[[sqlite3.Connection], T], nothing: T) -> T:
        try:
            with contextlib.closing(self._connect()) as connection:
                return work(connection)
        except OSError as error:  # the directory cannot be made
            return self._unwritable(error, nothing)
        except sqlite3.OperationalError as error:  # read-only, or (where this process can write) locked too long
            if write_error(self.directory) is None:
                raise
            return self._unwritable(error, nothing)

    def _unwritable(self, error: Exception, nothing: T) -> T:
        if self.unwritable is None:
            self.unwritable = f"{type(error).__name__}: {error}"
            warnings.warn(f"luminal_lab: the tuning records in {self.directory} cannot be written ({self.unwritable});"
                          " this process goes on without recording or reading them", stacklevel=4)
        return nothing

    def add(self, key: str, device: str, candidates: Iterable[Candidate]) -> int:
        """Record ``candidates`` (each with its genome) under ``key``; returns how many."""
        now, machine = time.time(), platform.node()
        rows = [(key, f"{c.hash:016x}", json.dumps(c.genome.choices if c.genome is not None else {}), device,
                 c.seconds, c.outcome, c.reason, __version__, machine, now) for c in candidates]
        self._insert(rows)
        return len(rows)

    def _insert(self, rows: list[tuple]) -> None:
        """Add ``rows`` (values of ``FIELDS``) in one transaction."""
        def insert(connection: sqlite3.Connection) -> None:
            with connection:  # the transaction
                connection.executemany(f"INSERT INTO records ({', '.join(FIELDS)}) "
                                       f"VALUES ({', '.join('?' * len(FIELDS))})", rows)
        if self.unwritable is None:
            self._use(insert, None)

    def add_unmeasured(self, key: str, device: str, genome: Genome) -> None:
        """Record ``genome``, chosen for ``key`` without measuring."""
        self.add(key, device, [Candidate(0, 0, genome.hash, None, [], UNMEASURED, genome=genome)])

    def _select(self, query: str, args: tuple = ()) -> list[tuple]:
        """The rows ``query`` selects, as stored (choices as JSON text); none before anything is recorded."""
        if not self.path.exists() or self.unwritable is not None:
            return []
        return self._use(lambda connection: connection.execute(query, args).fetchall(), [])

    def rows(self, key: str | None = None) -> list[dict]:
        """The records (of ``key``, else all), oldest first, as dicts of ``FIELDS``."""
        where, args = ("WHERE key = ?", (key,)) if key is not None else ("", ())
        found = self._select(f"SELECT {', '.join(FIELDS)} FROM records {where} ORDER BY id", args)
        return [{**dict(zip(FIELDS, row, strict=True)), "choices": json.loads(row[2])} for row in found]

    def best(self, key: str, space: ChoiceSpace) -> Genome | None:
        """The fastest ``ok`` genome recorded for ``key`` (else the latest unmeasured one) that is a genome of
        ``space``; ``None`` if there is none. Candidates are read in that order and parsed one at a time."""
        return next(self._genomes(
            "SELECT hash, choices FROM records WHERE key = ? AND ((outcome = 'ok' AND seconds IS NOT NULL) "
            "OR outcome = ?) ORDER BY outcome != 'ok', seconds, CASE WHEN outcome = 'ok' THEN id ELSE -id END",
            (key, UNMEASURED), space), None)

    def fastest(self, key: str, space: ChoiceSpace, count: int, machine: str | None = None) -> list[Genome]:
        """Up to ``count`` different genomes of ``space``, the fastest ``ok`` ones recorded for ``key`` (on
        ``machine`` when given), fastest first: where a search resumes from."""
        on, args = ("AND machine = ?", (key, machine)) if machine is not None else ("", (key,))
        found: dict[int, Genome] = {}
        for genome in self._genomes(f"SELECT hash, choices FROM records WHERE key = ? AND outcome = 'ok' AND seconds "
                                    f"IS NOT NULL {on} ORDER BY seconds, id", args, space):
            found.setdefault(genome.hash, genome)
            if len(found) == count:
                break
        return list(found.values())

    def measured(self, key: str, machine: str) -> frozenset[int]:
        """The hashes of every genome measured for ``key`` on ``machine``, whatever its outcome."""
        rows = self._select("SELECT DISTINCT hash FROM records WHERE key = ? AND machine = ? AND outcome != ?",
                            (key, machine, UNMEASURED))
        return frozenset(int(stored, 16) for (stored,) in rows)

    def _genomes(self, query: str, args: tuple, space: ChoiceSpace) -> Iterator[Genome]:
        """The genomes of ``space`` among the (hash, choices) rows ``query`` selects, in order, parsed one at a
        time (a row whose choices are not a genome of ``space`` is passed over)."""
        for stored_hash, choices in self._select(query, args):
            genome = _rebuilt(json.loads(choices), stored_hash, space)
            if genome is not None:
                yield genome

    def export(self, path: str | os.PathLike) -> int:
        """Write every record to ``path`` as JSON lines; returns how many."""
        rows = self.rows()
        with open(path, "w") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
        return len(rows)

    def import_(self, path: str | os.PathLike) -> int:
        """Add the records of a JSON-lines file written by ``export`` (records already here are not added again);
        returns how many were added. A line that is not a record raises ``ValueError`` naming it."""
        incoming = []
        with open(path) as lines:
            for number, line in enumerate(lines, 1):
                try:
                    row = json.loads(line)
                    incoming.append(tuple(json.dumps(row[f]) if f == "choices" else row[f] for f in FIELDS))
                except (ValueError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}, line {number}: not a tuning record ({error})") from None
        here = set(self._select(f"SELECT {', '.join(FIELDS)} FROM records"))
        new = [row for row in incoming if row not in here]
        self._insert(new)
        return len(new)


def _rebuilt(choices: dict[str, str], stored_hash: str, space: ChoiceSpace) -> Genome | None:
    """The genome of ``choices`` in ``space``, if every choice is an option there and its hash is ``stored_hash``."""
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
    return genome if f"{genome.hash:016x}" == stored_hash else None


class RecordsTable:
    """Records as a table: ``rows`` (dicts of ``FIELDS``), shown as text or, in a notebook, HTML."""

    COLUMNS = ("hash", "device", "seconds", "outcome", "reason", "machine", "version")

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def _cells(self, row: dict) -> list[str]:
        return [f"{row[c] * 1e3:.3f} ms" if c == "seconds" and row[c] is not None else str(row[c] or "")
                for c in self.COLUMNS]

    def __repr__(self) -> str:
        lines = ["  ".join(self.COLUMNS)] + ["  ".join(self._cells(row)) for row in self.rows]
        return f"<RecordsTable, {len(self.rows)} records>\n" + "\n".join(lines)

    def plot(self) -> RecordsPlot:
        """The records in order: each measured time (ms, log scale) as a dot coloured by machine, the other outcomes
        as crosses along the bottom, and the best time so far as a line."""
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        figure = Figure(figsize=(7, 3.2), layout="constrained")
        axes = figure.add_subplot()
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # records are counted
        timed = [(i, row["seconds"] * 1e3, row["machine"]) for i, row in enumerate(self.rows)
                 if row["outcome"] == "ok" and row["seconds"] is not None]
        for machine in dict.fromkeys(m for _, _, m in timed):
            points = [(i, ms) for i, ms, m in timed if m == machine]
            axes.scatter(*zip(*points), s=16, label=machine)
        if timed:
            curve = list(itertools.accumulate((ms for _, ms, _ in timed), min))
            axes.step([i for i, _, _ in timed], curve, where="post", color="black", linewidth=1, label="best so far")
            axes.set_yscale("log")
            floor = min(ms for _, ms, _ in timed) / 2
            others = [(i, row["outcome"]) for i, row in enumerate(self.rows) if row["outcome"] != "ok"]
            for outcome in dict.fromkeys(o for _, o in others):
                axes.scatter([i for i, o in others if o == outcome], [floor] * sum(o == outcome for _, o in others),
                             marker="x", s=20, label=outcome)
        axes.set(title=f"tuning records ({len(self.rows)})", xlabel="record", ylabel="ms")
        axes.legend(fontsize="small", loc="upper right")
        ok = sum(row["outcome"] == "ok" for row in self.rows)
        return RecordsPlot(figure, f"<RecordsPlot: {len(self.rows)} records, {ok} timed>")

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in self._cells(row)) + "</tr>"
                       for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class RecordsPlot:
    """``RecordsTable.plot()``: a matplotlib ``figure`` that shows itself in a notebook as PNG."""

    def __init__(self, figure, caption: str):
        self.figure, self.caption = figure, caption

    def __repr__(self) -> str:
        return self.caption

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png")
        return {"text/plain": self.caption, "image/png": buffer.getvalue()}
