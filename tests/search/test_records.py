"""Tuning records (``luminal_lab.search.records``): every searched candidate kept in SQLite, the best one found again
in the program's choice space, several processes writing at once, and records moved between machines as JSON lines."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import torch

import luminal_lab as ll
from luminal_lab.search.records import FIELDS, TuningRecords
from luminal_lab.search.search import Candidate
from tests.helpers.models import MLP, mlp_inputs
from tests.helpers.read_only import read_only

ROOT = Path(__file__).resolve().parents[2]


def kernel_count(llir) -> float:
    """A cost that does not vary: fewer kernels is faster."""
    return float(len(llir.kernels))


@pytest.fixture(scope="module")
def searched():
    """An MLP's program and a seeded search of it under a fixed cost."""
    comp = ll.compile(MLP().eval(), mlp_inputs())
    result = comp.search(generations=1, generation_size=4, seed=0, cost=kernel_count, progress=False)
    yield comp, result
    comp.egraph.close()


def test_every_candidate_is_recorded_and_the_best_is_found_in_the_choice_space(searched, tmp_path: Path) -> None:
    comp, result = searched
    records = TuningRecords(tmp_path)
    assert records.add("k", "cpu", result.history) == len(result.history)
    rows = records.rows("k")
    assert [(r["hash"], r["outcome"], r["seconds"], r["reason"]) for r in rows] == \
        [(f"{c.hash:016x}", c.outcome, c.seconds, c.reason) for c in result.history]
    assert all(r["device"] == "cpu" and r["version"] == ll.__version__ and r["machine"] for r in rows)
    best = records.best("k", comp.choice_space())
    assert best is not None and best.hash == result.best.hash
    assert records.best("another key", comp.choice_space()) is None


def test_a_record_that_is_not_a_genome_of_the_space_is_skipped(searched, tmp_path: Path) -> None:
    """The fastest record's hash tampered with: it no longer rebuilds to itself, so the next fastest serves."""
    comp, result = searched
    records = TuningRecords(tmp_path)
    records.add("k", "cpu", result.history)
    ok = sorted((c for c in result.history if c.outcome == "ok"), key=lambda c: c.seconds)
    assert len(ok) >= 2
    with sqlite3.connect(records.path) as connection:
        connection.execute("UPDATE records SET hash = ? WHERE hash = ?", ("0" * 16, f"{ok[0].hash:016x}"))
    connection.close()
    second = min(c.seconds for c in ok[1:])
    assert records.best("k", comp.choice_space()).hash in {c.hash for c in ok[1:] if c.seconds == second}


def test_several_processes_record_at_once(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        from luminal_lab.search.records import TuningRecords
        from luminal_lab.search.search import Candidate
        records = TuningRecords({str(tmp_path)!r})
        for i in range(40):
            records.add("k", "cpu", [Candidate(i, 0, i, None, [], "ok", seconds=float(sys.argv[1]))])
    """)
    workers = [subprocess.Popen([sys.executable, "-c", script, str(n)], cwd=ROOT) for n in range(4)]
    assert [w.wait(timeout=120) for w in workers] == [0] * 4
    rows = TuningRecords(tmp_path).rows("k")
    assert sorted(r["seconds"] for r in rows) == sorted(float(n) for n in range(4) for _ in range(40))


def candidates(count: int, seconds: float = 1.0) -> list[Candidate]:
    return [Candidate(i, 0, i, None, [], "ok", seconds=seconds) for i in range(count)]


def _another_version(path: Path) -> None:
    path.unlink()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, key, genome, seconds)")
        connection.commit()


DAMAGE = {
    "overwritten": lambda path: path.write_bytes(b"not a database " * 300),
    "cut short": lambda path: path.write_bytes(path.read_bytes()[:path.stat().st_size // 2]),
    "another version": _another_version,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_database_is_discarded_and_started_again(damage: str, tmp_path: Path) -> None:
    TuningRecords(tmp_path).add("k", "cpu", candidates(3000))  # many pages, so that half of them is cut off
    path = tmp_path / "tuning.sqlite"
    assert not list(tmp_path.glob("tuning.sqlite-*")), "the last connection closed folds the WAL in"
    DAMAGE[damage](path)
    records = TuningRecords(tmp_path)
    with pytest.warns(UserWarning, match=rf"^luminal_lab: discarded the tuning records {re.escape(str(path))}: "):
        assert records.rows("k") == []
    records.add("k", "cpu", candidates(2, seconds=2.0))
    assert [(r["hash"], r["seconds"]) for r in records.rows("k")] == [("0000000000000000", 2.0),
                                                                       ("0000000000000001", 2.0)]


def test_a_writer_killed_while_writing_leaves_every_whole_transaction(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        from luminal_lab.search.records import TuningRecords
        from luminal_lab.search.search import Candidate
        records = TuningRecords({str(tmp_path)!r})
        for n in range(10**6):
            records.add("k", "cpu", [Candidate(i, 0, i, None, [], "ok", seconds=float(n)) for i in range(500)])
            print(n, flush=True)
    """)
    writer = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    for _ in range(3):  # three transactions in, then killed in the middle of the next ones
        writer.stdout.readline()
    writer.kill()
    writer.wait(timeout=60)
    records = TuningRecords(tmp_path)
    rows = records.rows("k")
    counts = Counter(r["seconds"] for r in rows)
    assert len(counts) >= 3 and set(counts.values()) == {500}, "each transaction is there whole, or not at all"
    records.add("k", "cpu", candidates(1, seconds=-1.0))
    assert len(records.rows("k")) == len(rows) + 1


def test_a_read_only_directory_records_nothing_and_the_warning_says_why(searched, tmp_path: Path) -> None:
    comp, result = searched
    with read_only(tmp_path / "records") as directory:
        records = TuningRecords(directory / "inside")  # a directory that cannot be made, then one that exists
        with pytest.warns(UserWarning) as warned:
            records.add("k", "cpu", result.history)
        inside = re.escape(str(directory / "inside"))
        assert re.fullmatch(rf"luminal_lab: the tuning records in {inside} cannot be written \(PermissionError: "
                            rf"\[Errno \d+\] .+: '{inside}'\); this process goes on without recording or reading them",
                            str(warned[0].message).splitlines()[0]), warned[0].message
        assert records.rows() == [] and records.best("k", comp.choice_space()) is None
        records = TuningRecords(directory)
        with pytest.warns(UserWarning, match=rf"^luminal_lab: the tuning records in {re.escape(str(directory))} "
                                             r"cannot be written \(OperationalError: "):
            records.add("k", "cpu", result.history)
        assert records.rows() == [] and not any(directory.iterdir())


def test_records_move_between_machines_as_json_lines(searched, tmp_path: Path) -> None:
    comp, result = searched
    here, there = tmp_path / "here", tmp_path / "there"
    TuningRecords(here).add("k", "cpu", result.history)
    exported = tmp_path / "records.jsonl"
    assert ll.export_records(exported, here) == len(result.history)
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [set(line) for line in lines] == [set(FIELDS)] * len(result.history)
    assert ll.import_records(exported, there) == len(result.history)
    assert ll.import_records(exported, there) == 0  # nothing twice
    assert TuningRecords(there).rows() == TuningRecords(here).rows()
    assert TuningRecords(there).best("k", comp.choice_space()).hash == result.best.hash
    bad = tmp_path / "bad.jsonl"
    bad.write_text(exported.read_text().splitlines()[0] + "\n{\"key\": 1}\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: not a tuning record"):
        ll.import_records(bad, there)


def test_the_backend_records_its_search_and_shows_it_as_a_table(tmp_path: Path) -> None:
    def chain(a, b):
        return (a * b + 1).sin().exp()

    compiled = torch.compile(chain, backend="luminal_lab",
                             options={"generations": 1, "generation_size": 2, "background": False,
                                      "cache_dir": tmp_path})
    a, b = torch.randn(8, 4), torch.randn(8, 4)
    torch.testing.assert_close(compiled(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(compiled)
    table = comp.tuning_records()
    assert [r["hash"] for r in table] == [f"{c.hash:016x}" for c in comp.last_search.history]
    assert "<th>outcome</th>" in table._repr_html_() and f"{len(table)} records" in repr(table)
    unrecorded = ll.compile(MLP().eval(), mlp_inputs())
    unrecorded.records = None
    with pytest.raises(ll.LuminalError, match=r"Compiled\.tuning_records: this program keeps no records"):
        unrecorded.tuning_records()


def test_a_program_shows_the_records_earlier_searches_left_before_it_searches(tmp_path: Path) -> None:
    """A second compile of a program (as in a fresh process: the records are read from disk) shows the records the
    first left before any search of its own; another device's records are apart."""
    first = ll.compile(MLP().eval(), mlp_inputs())
    first.records = TuningRecords(tmp_path)
    result = first.search(generations=0, seed=0, progress=False)
    second = ll.compile(MLP().eval(), mlp_inputs())
    second.records = TuningRecords(tmp_path)
    assert second.last_search is None
    assert [r["hash"] for r in second.tuning_records()] == [f"{c.hash:016x}" for c in result.history]
    assert [r["hash"] for r in second.tuning_records("cpu")] == [f"{c.hash:016x}" for c in result.history]
    assert len(second.tuning_records("cuda")) == 0
    fresh = ll.compile(MLP().eval(), mlp_inputs())
    fresh.records = TuningRecords(tmp_path / "elsewhere")
    assert len(fresh.tuning_records()) == 0
    for comp in (first, second, fresh):
        comp.egraph.close()


def test_a_measured_search_is_recorded_and_a_costed_one_is_not(tmp_path: Path) -> None:
    comp = ll.compile(MLP().eval(), mlp_inputs())
    comp.records = TuningRecords(tmp_path)
    comp.search(generations=0, seed=0, cost=kernel_count, progress=False)
    assert comp.records.rows() == []
    result = comp.search(generations=0, seed=0, progress=False)
    table = comp.tuning_records()
    assert [(r["hash"], r["outcome"]) for r in table] == [(f"{c.hash:016x}", c.outcome) for c in result.history]
    assert TuningRecords(tmp_path).best(comp.records_key, comp.choice_space()).hash == result.best.hash
    plot = table.plot()
    timed = sum(r["outcome"] == "ok" for r in table)
    assert repr(plot) == f"<RecordsPlot: {len(table)} records, {timed} timed>"
    assert plot._repr_mimebundle_()["image/png"].startswith(b"\x89PNG")
    assert all(float(t).is_integer() for t in plot.figure.axes[0].get_xticks()), "records are counted"
    drawn = plot.figure.axes[0].collections  # one set of dots per machine, crosses per other outcome
    assert sum(len(c.get_offsets()) for c in drawn) == len(table)
    comp.egraph.close()
