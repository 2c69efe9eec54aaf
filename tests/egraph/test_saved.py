"""Saturated e-graphs kept on disk (``egraph/saved.py``): a later compile of the same program reads the saturation
an earlier one kept, without egglog, and gets the same e-graph, genomes and results; the entry is data that a damaged
or foreign file cannot break."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import luminal_lab as ll
from luminal_lab.egraph import saved
from luminal_lab.search.records import TuningRecords


def softmax_graph() -> ll.Graph:
    g = ll.Graph()
    x = g.tensor((4, 8), "x")
    (x.softmax(-1) * 2.0).sin().output("y")
    return g


def compiled_in(directory: Path) -> ll.Compiled:
    comp = ll.compile(softmax_graph())
    comp.records = TuningRecords(directory)
    return comp


X = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list:
    """The egglog workers asked anything (a request to its process), one entry per request."""
    from luminal_lab.egraph.worker import EgglogWorker

    workers, request = [], EgglogWorker._request

    def counted(self, *args, **kwargs):
        workers.append(self)
        return request(self, *args, **kwargs)

    monkeypatch.setattr(EgglogWorker, "_request", counted)
    return workers


def entries(directory: Path) -> list[Path]:
    return sorted((directory / "egraphs").glob("*.json"))


def test_a_second_compile_reads_the_kept_saturation_without_egglog(tmp_path: Path, asked: list) -> None:
    first = compiled_in(tmp_path)
    expected = first(X)
    assert first.egraph.status == "saturated" and len(entries(tmp_path)) == 1
    second = compiled_in(tmp_path)
    got = second(X)
    egraph = second.egraph
    assert any(w is first.egraph._worker for w in asked) and not any(w is egraph._worker for w in asked)
    assert egraph.status == "saturated"
    assert [(r.label, r.matches, r.enodes_after, r.added_enodes) for r in egraph.history] == \
        [(r.label, r.matches, r.enodes_after, r.added_enodes) for r in first.egraph.history]
    assert egraph.snapshot.n_enodes == first.egraph.snapshot.n_enodes
    assert second.genome.choices == first.genome.choices
    assert [k.label for k in second.llir().kernels] == [k.label for k in first.llir().kernels]
    assert torch.equal(got, expected)
    # stepping it further replays the saturation in a worker first: a saturated e-graph does not change
    report = egraph.step()
    assert egraph._worker.pid is not None and not report.updated
    assert report.enodes_after == first.egraph.snapshot.n_enodes
    egraph.close()
    first.egraph.close()


def test_user_rules_or_no_directory_saturate_as_before_and_keep_nothing(tmp_path: Path) -> None:
    comp = compiled_in(tmp_path)
    comp.egraph.add_rules('(rule ((= ?e (Op (KernelSin ?s ?x ?o ?dt) ?ins))) ((set (dtype ?e) ?dt)) :name "mine")',
                          ruleset="mine")
    assert comp.egraph.saturate_kept(tmp_path).saturated
    assert entries(tmp_path) == []
    comp.egraph.close()
    off = ll.compile(softmax_graph())
    off.records = None  # the torch.compile option cache_dir=False: nothing kept or read
    assert torch.equal(off(X), compiled_in(tmp_path)(X))
    assert len(entries(tmp_path)) == 1  # from the second, not the first


@pytest.mark.parametrize("damage", ["cut short", "another format", "another key", "not an object"])
def test_a_damaged_or_foreign_entry_is_discarded_and_saturated_again(tmp_path: Path, damage: str,
                                                                     asked: list) -> None:
    expected = compiled_in(tmp_path)(X)
    (entry,) = entries(tmp_path)
    data = json.loads(entry.read_text())
    if damage == "cut short":
        entry.write_text(entry.read_text()[: len(entry.read_text()) // 2])
    elif damage == "another format":
        entry.write_text(json.dumps({**data, "format": saved.FORMAT + 1}))
    elif damage == "another key":
        entry.write_text(json.dumps({**data, "key": "0" * 64}))
    else:
        entry.write_text("[1, 2, 3]")
    again = compiled_in(tmp_path)
    assert torch.equal(again(X), expected)
    assert any(w is again.egraph._worker for w in asked)  # saturated again, by egglog
    kept = json.loads(entry.read_text())  # and kept again, whole
    assert (kept["commands"], kept["serialized"]) == (data["commands"], data["serialized"])
    again.egraph.close()


def test_an_unwritable_directory_keeps_nothing_and_compiles(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory would be")
    comp = compiled_in(blocked)
    assert torch.equal(comp(X), compiled_in(tmp_path)(X))
    assert comp.egraph.status == "saturated" and not (blocked / "egraphs").exists()
