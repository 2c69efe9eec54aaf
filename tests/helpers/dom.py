"""Headless Chromium and a small DOM: the report and workbench pages as a browser leaves them, parsed for
the tests to read (``dump_dom``), and a skip mark for machines without Chromium."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                    reason=f"{CHROMIUM} is not installed (scripts/install-system-deps.sh installs it)")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass(eq=False)
class Element:
    tag: str
    attrs: dict[str, str]
    parent: Element | None
    text: str = ""
    children: list[Element] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def ancestor(self, tag: str) -> Element | None:
        node = self.parent
        while node is not None and node.tag != tag:
            node = node.parent
        return node

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        """Descendants with this tag and class, in document order."""
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and (cls is None or cls in child.classes):
                found.append(child)
            found.extend(child.find_all(tag, cls))
        return found


class DOM(HTMLParser):
    """Parses HTML into ``Element``s (text accumulates on every open element)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.open = self.root
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.open)
        self.open.children.append(element)
        if tag not in VOID:
            self.open = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.open))

    def handle_endtag(self, tag: str) -> None:
        node = self.open
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.open = node.parent

    def handle_data(self, data: str) -> None:
        node = self.open
        while node is not None:
            node.text += data
            node = node.parent


def dump_dom(url: str, tmp_path: Path) -> DOM:
    """The DOM headless Chromium has after loading ``url`` (its scripts run, nothing fetched)."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return DOM(done.stdout)


def sections(dom: DOM) -> dict[str, Element]:
    return {s.attrs["data-stage"]: s for s in dom.root.find_all("section", "ll-stage")}


def node_ids(section: Element, cls: str | None = None) -> set[str]:
    """The stage node ids marked on a section's elements (``data-ll-node``, set by the script), of class ``cls``."""
    return {e.attrs["data-ll-node"] for e in section.find_all(cls=cls) if "data-ll-node" in e.attrs}
