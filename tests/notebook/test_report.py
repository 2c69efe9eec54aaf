"""The self-contained HTML report: its sections, embedded JSON, offline-ness, and its script in Chromium."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import graphviz
import pytest

import luminal_lab as ll
from luminal_lab.compiler.provenance import STAGES
from luminal_lab.notebook.assets import NO_PICTURE
from luminal_lab.notebook.report import script_json, write_report
from tests.helpers.dom import DOM, dump_dom, needs_chromium, node_ids, sections
from tests.helpers.fused import LAYOUT, REGION, Fused, compile_fused

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SVG_NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
HOSTILE = "</script><script>alert(1)</script>"


def test_dom_helper_reads_text_and_classes() -> None:
    dom = DOM('<div class="a b"><span data-ll-node="x" class="ll-highlight">t<br>u</span></div>')
    assert node_ids(dom.root, "ll-highlight") == {"x"}
    assert dom.root.find_all("div", "b")[0].text == "tu"


# ---- fixtures (``fused``: tests/conftest.py) ---------------------------------------------------------
@pytest.fixture(scope="module")
def report(fused: Fused, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(fused.comp, tmp_path_factory.mktemp("report") / "report.html", fused.genome)


# ---- the file --------------------------------------------------------------------------------------
def test_script_json_cannot_close_its_tag() -> None:
    text = script_json({"label": HOSTILE, "x": "a & b > c"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"label": HOSTILE, "x": "a & b > c"}


def test_sections_summaries_and_envelopes(fused: Fused, report: Path) -> None:
    dom = DOM(report.read_text(encoding="utf-8"))
    found = sections(dom)
    assert list(found) == list(STAGES)
    for name, section in found.items():
        summary = section.find_all("p", "ll-summary")
        assert [p.text for p in summary] == [fused.provenance.envelopes[name]["summary"]]
        scripts = section.find_all("script", "ll-envelope")
        assert len(scripts) == 1 and scripts[0].attrs == {"type": "application/json", "class": "ll-envelope",
                                                          "data-stage": name}
        assert json.loads(scripts[0].text) == fused.provenance.envelopes[name]
    provenance = json.loads(next(s for s in dom.root.find_all("script") if s.attrs.get("id") == "ll-provenance").text)
    assert provenance["targets"]["regions"] == {"r0": "regions", **{k: "llir" for k, _ in LAYOUT}}
    assert provenance["selections"]["cuda"]["cu7"] == {
        "highlighted": {"hlir": ["h2", "h3", "h4"], "egraph": fused.provenance.counterparts("cuda", "cu7")["egraph"],
                        "llir": REGION, "regions": ["r0"], "cuda": ["cu7"]},
        "cuda_lines": {"cu7": [8, 9, 10, 11, 12, 13]}}
    assert set(provenance["selections"]["egraph"]) == set(fused.provenance.ids("egraph"))


@needs_dot
def test_pictures_are_inline_svg_and_cuda_is_a_listing(fused: Fused, report: Path) -> None:
    found = sections(DOM(report.read_text(encoding="utf-8")))
    for name in ("hlir", "egraph", "llir", "regions"):
        svgs = found[name].find_all("svg")
        assert len(svgs) == 1, name
        assert not found[name].find_all(cls="ll-note")
    assert not found["cuda"].find_all("svg")
    kernels = found["cuda"].find_all("div", "ll-kernel")
    assert [k.attrs["data-node"] for k in kernels] == ["cu7", "cu9"]
    cuda = fused.provenance.stages["cuda"]
    for block, kernel in zip(kernels, cuda.kernels):
        lines = block.find_all("span", "ll-line")
        assert [int(line.attrs["data-line"]) for line in lines] == list(range(1, len(lines) + 1))
        assert [line.text[len(line.attrs["data-line"]):] for line in lines] == kernel.source.splitlines()


def test_no_external_urls(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= SVG_NAMESPACES  # namespace names, never fetched
    assert "url(" not in text and "@import" not in text
    dom = DOM(text)
    every = dom.root.find_all()
    assert not [e for e in every if e.tag in ("link", "img", "iframe", "object", "embed")]
    assert not [e for e in every if {"src", "href", "xlink:href"} & set(e.attrs)]
    assert [e.attrs.get("type") for e in every if e.tag == "script"] == [*["application/json"] * 6, None]


def test_labels_cannot_break_out_of_the_json(tmp_path: Path) -> None:
    def hostile(g: ll.Graph) -> None:
        a = g.tensor((2, 3), name="a")
        a.sin().output(HOSTILE)

    for fused in compile_fused(hostile):
        path = write_report(fused.comp, tmp_path / "hostile.html", fused.genome)
        text = path.read_text(encoding="utf-8")
        dom = DOM(text)
        scripts = [e for e in dom.root.find_all() if e.tag == "script"]
        assert len(scripts) == 7  # the five envelopes, the provenance map and the page script; none injected
        hlir = json.loads(scripts[0].text)
        assert [o["name"] for o in hlir["meta"]["outputs"]] == [HOSTILE]
        assert HOSTILE in sections(dom)["hlir"].find_all("p", "ll-summary")[0].text


def test_without_graphviz_each_stage_shows_its_summary_and_a_note(fused: Fused, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(*args, **kwargs):
        raise graphviz.ExecutableNotFound(["dot"])

    monkeypatch.setattr(graphviz.Digraph, "pipe", missing)
    with pytest.warns(RuntimeWarning, match="Graphviz's `dot` is not installed"):
        path = write_report(fused.comp, tmp_path / "no-dot.html", fused.genome)
    found = sections(DOM(path.read_text(encoding="utf-8")))
    assert list(found) == list(STAGES)
    for name in ("hlir", "egraph", "llir", "regions"):
        assert not found[name].find_all("svg")
        assert [n.text for n in found[name].find_all("p", "ll-note")] == [NO_PICTURE]
        assert found[name].find_all("p", "ll-summary")[0].text == fused.provenance.envelopes[name]["summary"]
    assert [k.attrs["data-node"] for k in found["cuda"].find_all("div", "ll-kernel")] == ["cu7", "cu9"]


def test_compiled_report_writes_the_current_genome(fused: Fused, tmp_path: Path) -> None:
    path = fused.comp.report(tmp_path / "current.html")
    assert path == tmp_path / "current.html"
    found = sections(DOM(path.read_text(encoding="utf-8")))
    assert found["llir"].find_all("p", "ll-summary")[0].text == fused.comp.llir().summary()


# ---- in a browser ----------------------------------------------------------------------------------
@needs_chromium
@needs_dot
def test_report_in_chromium_marks_the_counterparts_of_a_selection(fused: Fused, report: Path, tmp_path: Path) -> None:
    dom = dump_dom(f"{report.as_uri()}#select=cuda:cu7", tmp_path)
    body = dom.root.find_all("body")[0]
    assert body.attrs.get("data-ready") == "1"  # the inline script ran to the end
    found = sections(dom)
    assert list(found) == list(STAGES)
    egraph = fused.provenance.counterparts("cuda", "cu7")["egraph"]
    # every drawn node was indexed, with the stage ids as SVG element ids
    assert node_ids(found["hlir"]) == {f"h{i}" for i in range(8)}
    assert set(egraph) <= node_ids(found["egraph"]) <= set(fused.provenance.ids("egraph"))
    assert node_ids(found["llir"]) == node_ids(found["regions"]) == {k for k, _ in LAYOUT} | {"r0"}
    assert node_ids(found["cuda"]) == {"cu7", "cu9"}
    for name in ("hlir", "llir"):
        svg = found[name].find_all("svg")[0]
        drawn = {g.attrs["id"] for g in svg.find_all("g") if "id" in g.attrs}
        assert drawn >= set(fused.provenance.ids(name))
    # what the selection marks, in every stage
    assert node_ids(found["hlir"], "ll-highlight") == {"h2", "h3", "h4"}  # Add, Sin, Sqrt: what the region computes
    assert node_ids(found["egraph"], "ll-highlight") == set(egraph)
    assert node_ids(found["llir"], "ll-highlight") == node_ids(found["regions"], "ll-highlight") == {*REGION, "r0"}
    assert node_ids(found["cuda"], "ll-highlight") == node_ids(found["cuda"], "ll-selected") == {"cu7"}
    assert not any(node_ids(found[name], "ll-selected") for name in ("hlir", "egraph", "llir", "regions"))
    hits = [(line.ancestor("div").attrs["data-node"], int(line.attrs["data-line"]))
            for line in found["cuda"].find_all("span", "ll-hit")]
    assert hits == [("cu7", n) for n in range(8, 14)]
    status = dom.root.find_all("div", "ll-status")[0].text
    assert status.startswith("selected cuda cu7: hlir h2 h3 h4 · egraph ")
    every = dom.root.find_all()
    assert not [e for e in every if {"src", "href", "xlink:href"} & set(e.attrs)]


@needs_chromium
def test_report_in_chromium_without_a_selection(report: Path, tmp_path: Path) -> None:
    dom = dump_dom(report.as_uri(), tmp_path)
    assert dom.root.find_all("body")[0].attrs.get("data-ready") == "1"
    assert not dom.root.find_all(cls="ll-highlight") and not dom.root.find_all(cls="ll-hit")
    assert dom.root.find_all("div", "ll-status")[0].text == (
        "Click a node in any stage to highlight its counterparts in the others.")
