"""Entries kept on disk (``core/storage.py``): written whole or not at all, read back as data."""

from __future__ import annotations

from pathlib import Path

from luminal_lab.core.storage import read_json, write_json


def test_data_that_is_not_json_writes_nothing(tmp_path: Path) -> None:
    entry = tmp_path / "kept" / "entry.json"
    assert not write_json(entry, {"graph": [1, 2], "arg": object()})
    assert list(entry.parent.iterdir()) == []  # neither the entry nor a partial file
    assert write_json(entry, {"graph": [1, 2]}) and read_json(entry) == {"graph": [1, 2]}


def test_an_entry_cut_short_reads_as_none_and_is_removed(tmp_path: Path) -> None:
    entry = tmp_path / "entry.json"
    entry.write_text('{"graph": [1,')
    assert read_json(entry) is None and not entry.exists()
