"""The workbench widget: its panes, selection through Python, the text fallback, and its view in Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import luminal_lab as ll
from luminal_lab.compiler.provenance import STAGES, TITLES
from luminal_lab.notebook.assets import NO_PICTURE
from luminal_lab.notebook.report import script_json
from luminal_lab.notebook.workbench import Workbench
from tests.helpers.dom import dump_dom, needs_chromium, node_ids
from tests.helpers.fused import LAYOUT, REGION, Fused

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


@pytest.fixture
def bench(fused: Fused) -> Workbench:
    return Workbench(fused.comp, fused.genome)


def test_one_pane_per_stage(fused: Fused, bench: Workbench) -> None:
    assert [p["stage"] for p in bench.panes] == list(STAGES)
    assert [p["title"] for p in bench.panes] == [TITLES[s] for s in STAGES]
    assert bench.summaries == [fused.provenance.envelopes[s]["summary"] for s in STAGES]
    assert [p["targets"] for p in bench.panes] == [fused.provenance.drawn(s) for s in STAGES]
    cuda = bench.panes[-1]
    stage = fused.provenance.stages["cuda"]
    assert cuda["svg"] is None and cuda["note"] == ""
    assert cuda["kernels"] == [
        {"id": "cu7", "label": "k_region [Add, Sin, Sqrt]", "lines": stage.kernels[0].source.splitlines()},
        {"id": "cu9", "label": "k_sum_reduce", "lines": stage.kernels[1].source.splitlines()}]
    assert bench.selected == bench.highlighted == bench.cuda_lines == {}


@needs_dot
def test_pictures_carry_the_stage_ids(bench: Workbench) -> None:
    for pane in bench.panes[:-1]:
        assert pane["svg"].startswith("<svg") and pane["note"] == "", pane["stage"]
    hlir, llir = bench.panes[0]["svg"], bench.panes[2]["svg"]
    assert all(f'id="h{i}"' in hlir for i in range(8))
    assert all(f'id="{k}"' in llir for k, _ in LAYOUT) and 'id="r0"' in llir


def test_pane_without_a_picture_has_a_note(fused: Fused, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(fused.provenance.stages["llir"]), "to_svg", lambda self: None)
    bench = Workbench(fused.comp, fused.genome)
    llir = bench.panes[2]
    assert (llir["svg"], llir["note"]) == (None, NO_PICTURE)


def test_select_highlights_counterparts_and_cuda_lines(fused: Fused, bench: Workbench) -> None:
    # Sqrt (h4): its FusedSqrt (k6, t2 on line 12) and the FusionEnd (k7, the store on line 13)
    assert bench.select("hlir", "h4") == {"hlir": ["h4"], "egraph": fused.eclasses_computing("Sqrt"),
                                          "llir": ["k6", "k7"], "regions": ["r0"], "cuda": ["cu7"]}
    assert bench.selected == {"stage": "hlir", "id": "h4"}
    assert bench.cuda_lines == {"cu7": [12, 13]}
    # FusedSin (k5) computes Sin (h3): t1 on line 11
    assert bench.select("llir", "k5") == {"hlir": ["h3"], "egraph": fused.eclasses_computing("Sin"), "llir": ["k5"],
                                          "regions": ["r0"], "cuda": ["cu7"]}
    assert bench.cuda_lines == {"cu7": [11]}


def test_a_click_sets_selected_and_python_answers(fused: Fused, bench: Workbench) -> None:
    bench.selected = {"stage": "cuda", "id": "cu7"}  # what the view sends on a click
    assert bench.highlighted == {"hlir": ["h2", "h3", "h4"],
                                 "egraph": fused.provenance.counterparts("cuda", "cu7")["egraph"],
                                 "llir": REGION, "regions": ["r0"], "cuda": ["cu7"]}
    assert bench.cuda_lines == {"cu7": [8, 9, 10, 11, 12, 13]}
    bench.selected = {}
    assert bench.highlighted == bench.cuda_lines == {}


def test_unknown_stage_or_node_is_named_and_changes_nothing(bench: Workbench) -> None:
    bench.select("cuda", "cu9")
    with pytest.raises(ValueError, match="unknown stage 'ptx'"):
        bench.select("ptx", "cu9")
    with pytest.raises(ValueError, match="the regions stage has no node 'r5'"):
        bench.select("regions", "r5")
    assert bench.selected == {"stage": "cuda", "id": "cu9"}
    assert bench.cuda_lines == {"cu9": [30]}


def test_text_fallback_has_every_summary(bench: Workbench) -> None:
    data, _ = bench._repr_mimebundle_()
    assert data["text/plain"] == "\n".join(("Workbench (click a node to see its counterparts):", *bench.summaries,
                                            "Search: no search behind this program's calls"))
    assert "application/vnd.jupyter.widget-view+json" in data


def test_view_code_is_self_contained(bench: Workbench) -> None:
    esm = bench._esm
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "fetch(", "import ", "http", "eval("):
        assert banned not in esm, banned
    assert "export default { render };" in esm


def test_search_tab_follows_the_search_behind_the_calls() -> None:
    """The search tab: none at first; then the search behind the calls, followed to its end without a refresh, each
    candidate it measured, and the tuning records it left as the history."""
    g = ll.Graph()
    a = g.tensor((64,), name="a")
    (a.sin() + a).sqrt().output("y")
    comp = ll.compile(g)
    bench = Workbench(comp)
    assert bench.search == {"summary": "no search behind this program's calls", "candidates": [], "history": [],
                            "note": "0 tuning records for this program, from this process and earlier ones"}
    state = comp.search_in_background(generations=1, generation_size=3, budget=60.0)
    bench = Workbench(comp)
    assert state.wait(120)
    assert bench.search["summary"] == repr(state).strip("<>") and bench.search["summary"].startswith("SearchState done")
    assert bench.search["candidates"] == state.rows() and len(state.rows()) >= 2
    best = state.best
    assert best is not None and min(r["ms"] for r in bench.search["candidates"] if r["ms"]) == best.seconds * 1e3
    records = list(comp.tuning_records())
    assert [r["hash"] for r in bench.search["history"]] == [r["hash"] for r in records] and records
    assert "Search: SearchState done" in repr(bench)


def test_compiled_workbench_uses_the_current_genome(fused: Fused) -> None:
    bench = fused.comp.workbench()
    assert isinstance(bench, Workbench)
    assert bench.summaries[2] == fused.comp.llir().summary()


# ---- the view in a browser -------------------------------------------------------------------------
HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>{css}</style></head><body>
<div id="root"></div>
<script type="application/json" id="state">{state}</script>
<script type="module">
{esm}
const state = JSON.parse(document.getElementById("state").textContent);
const handlers = {{}};
const sent = [];
const model = {{  // the part of anywidget's model the view uses; the kernel side is the test's job
  get: (name) => state[name],
  set: (name, value) => {{ state[name] = value; }},
  save_changes: () => sent.push(state.selected),
  on: (name, f) => (handlers[name] ||= []).push(f),
  off: (name, f) => {{ handlers[name] = (handlers[name] || []).filter((g) => g !== f); }},
}};
const root = document.getElementById("root");
render({{ model, el: root }});
const hlir = root.querySelectorAll(".ll-pane")[0];
hlir.querySelector('[data-ll-node="h6"] text').dispatchEvent(new MouseEvent("click", {{ bubbles: true }}));
const cuda = root.querySelectorAll(".ll-pane")[4];
cuda.querySelector('[data-node="cu9"] .ll-line').dispatchEvent(new MouseEvent("click", {{ bubbles: true }}));
document.body.dataset.sent = JSON.stringify(sent);
document.body.dataset.ready = "1";
</script></body></html>
"""


@needs_chromium
@needs_dot
def test_view_in_chromium_paints_python_answers_and_sends_clicks(fused: Fused, bench: Workbench,
                                                                  tmp_path: Path) -> None:
    bench.select("llir", "k5")
    state = {name: getattr(bench, name) for name in ("panes", "selected", "highlighted", "cuda_lines")}
    state["search"] = {  # a search's data as search_view gives it (the Python side is tested above)
        "summary": "SearchState done: 2 candidates measured, best 0.012 ms, 1.5 s", "note": "1 tuning record",
        "candidates": [{"index": 0, "generation": 0, "outcome": "ok", "ms": 0.01234, "reason": ""},
                       {"index": 1, "generation": 1, "outcome": "error", "ms": None, "reason": "LuminalError: <b>"}],
        "history": [{"hash": "00ab", "device": "cpu", "outcome": "ok", "ms": 0.5, "machine": "here"}]}
    page = tmp_path / "workbench.html"
    page.write_text(HARNESS.format(css=bench._css, state=script_json(state), esm=bench._esm), encoding="utf-8")
    dom = dump_dom(page.as_uri(), tmp_path)
    body = dom.root.find_all("body")[0]
    assert body.attrs.get("data-ready") == "1"
    panes = dom.root.find_all("div", "ll-pane")
    assert len(panes) == 5
    assert [p.find_all("div", "ll-summary")[0].text for p in panes] == bench.summaries
    assert [("hidden" in p.attrs) for p in panes] == [False, True, True, True, True]
    tabs = [(b.text, b.attrs.get("title")) for b in dom.root.find_all("button")]
    sin = fused.eclasses_computing("Sin")  # k5's e-class and, through h3, Sin's other e-classes
    linked = " linked to the selected llir k5"  # each badge counts one thing, and its tooltip says so
    assert tabs == [("HLIR1", "1 node" + linked), (f"E-graph{len(sin)}", f"{len(sin)} nodes" + linked),
                    ("LLIR", "LLIR: click a node to see its counterparts in every stage"),  # the selection's own
                    ("Regions1", "1 node" + linked), ("CUDA1", "1 node" + linked),
                    ("Search",
                     "The program's search: the one behind its calls, and the tuning records of earlier ones")]
    (search,) = dom.root.find_all("div", "ll-search")
    assert "hidden" in search.attrs
    assert search.find_all("div", "ll-summary")[0].text == state["search"]["summary"]
    candidates, history = ([[cell.text for cell in row.find_all("td")] for row in t.find_all("tr")[1:]]
                           for t in search.find_all("table"))
    assert candidates == [["0", "0", "ok", "0.012", ""], ["1", "1", "error", "", "LuminalError: <b>"]]
    assert history == [["00ab", "cpu", "ok", "0.500", "here"]]
    assert [len(p.find_all("svg")) for p in panes] == [1, 1, 1, 1, 0]
    hlir, egraph, llir, regions, cuda = panes
    assert node_ids(hlir) == {f"h{i}" for i in range(8)}
    assert node_ids(cuda) == {"cu7", "cu9"}
    # the answer Python gave for k5, painted
    assert node_ids(hlir, "ll-highlight") == {"h3"}  # FusedSin computes Sin
    assert node_ids(egraph, "ll-highlight") == set(sin)
    assert node_ids(llir, "ll-highlight") == node_ids(regions, "ll-highlight") == {"k5", "r0"}
    assert node_ids(llir, "ll-selected") == node_ids(regions, "ll-selected") == {"k5"}
    assert node_ids(cuda, "ll-highlight") == {"cu7"}
    hits = [(line.ancestor("div").attrs["data-node"], line.attrs["data-line"]) for line in cuda.find_all(cls="ll-hit")]
    assert hits == [("cu7", "11")]
    assert dom.root.find_all("div", "ll-status")[0].text == "selected llir k5"
    # the clicks went to the model as selections Python knows
    sent = json.loads(body.attrs["data-sent"])
    assert sent == [{"stage": "hlir", "id": "h6"}, {"stage": "cuda", "id": "cu9"}]
    bench.selected = sent[0]
    assert bench.highlighted == {
        "hlir": ["h6"], "egraph": fused.eclasses_computing("SumReduce"), "llir": ["k9"], "cuda": ["cu9"]}
