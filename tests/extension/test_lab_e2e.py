"""End to end: the JupyterLab extension in headless Chromium, against a real JupyterLab.

A module fixture writes the notebooks (``tests/helpers/lab_notebooks.py``: outputs made by executing
them with nbclient, then saved), starts an isolated JupyterLab on 127.0.0.1 with a random token
(``tests/helpers/lab_server.py``) and stops it (its whole process group) afterwards. Each scenario runs
once in ``extension/ui-tests/lab.mjs`` (playwright-core driving /usr/bin/chromium), which reports
what the page showed; the tests below assert on that report:

* ``stages``: the saved outputs of every stage and of ``comp.pipeline()`` render with no kernel
  (node counts, clicks, hover, search, zoom, CUDA source, provenance links, light and dark themes);
* ``malicious``: a trusted notebook whose envelopes are full of markup executes nothing;
* ``large``: a real 5,000-node HLIR is ready within ``LARGE_READY_LIMIT_S`` with no main-thread task
  over ``LONG_TASK_LIMIT_MS``;
* ``deep``: a 2-layer Llama's stages: focus on a node shows exactly its k-hop neighbourhood, folding by
  layer / by HLIR node draws the expected groups, and clicking a group expands it;

an e-graph is drawn at its IR level (``_ir_level``: what the extension's ``irLevel`` draws) until
``select.lx-level`` asks for every e-class;
* ``workbench``: run in a live kernel, ``comp.workbench()`` and the ipywidgets render, and a click
  in the HLIR picture comes back from Python as highlights in the other stages;

and across all of them the page requested nothing off this machine.

Needs the built extension (``luminal_lab/labextension``, ``make setup``), node with playwright-core
(``extension/node_modules``) and Chromium at ``/usr/bin/chromium`` (or ``$LUMINAL_LAB_CHROMIUM``);
the test fails, never skips, when one is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from luminal_lab.compiler.provenance import Provenance
from tests.helpers.lab_notebooks import LARGE_NODES, PAYLOADS, STAGES, write_notebooks
from tests.helpers.lab_server import ROOT, Lab, labextension

pytestmark = pytest.mark.browser

EXTENSION = ROOT / "extension"
DRIVER = EXTENSION / "ui-tests" / "lab.mjs"
CHROMIUM = os.environ.get("LUMINAL_LAB_CHROMIUM", "/usr/bin/chromium")
LARGE_READY_LIMIT_S = 10.0  # the 5,000-node stage: from its output appearing to data-status="ready"
LONG_TASK_LIMIT_MS = 1000.0  # the longest main-thread task while it draws
LABEL_MIN_SCALE = 0.4  # extension/src/view.ts: below this zoom the labels are hidden
SCENARIO_DEADLINE_S = 150  # the driver gives up on a scenario after this (and reports what it saw)
SCENARIO_TIMEOUT_S = SCENARIO_DEADLINE_S + 60


def _require_tools() -> str:
    node = shutil.which("node")
    missing = []
    if node is None:
        missing.append("node (Node.js 18 or later)")
    if not (EXTENSION / "node_modules" / "playwright-core").is_dir():
        missing.append("extension/node_modules/playwright-core (cd extension && npm ci)")
    if not Path(CHROMIUM).exists():
        missing.append(f"Chromium at {CHROMIUM} (set LUMINAL_LAB_CHROMIUM)")
    if missing:
        pytest.fail("the browser test needs " + "; ".join(missing) + "; run `make setup`", pytrace=False)
    return node


class Session:
    """The running server, the notebooks' expected contents, and each scenario's report (run once)."""

    def __init__(self, lab: Lab, expected: dict[str, Any], out: Path, node: str) -> None:
        self.lab = lab
        self.expected = expected
        self.out = out
        self.node = node
        self.reports: dict[str, dict[str, Any]] = {}
        self.timings: dict[str, Any] = {}

    def plan(self, scenario: str) -> dict[str, Any]:
        if scenario == "stages":
            return {"hlir": {"click": "h5", "hover": "h6", "search": "sin"}, "cuda": {"click": self.fused_kernel()},
                    "pipeline": {"click": "h5", "follow": "cuda"}, "egraph": self.egraph_targets()}
        if scenario == "large":
            nodes = self.expected["large"][0]["nodes"]
            return {"limit_ms": LARGE_READY_LIMIT_S * 1000, "search": "Sin", "find": nodes[0]["label"]}
        if scenario == "malicious":
            return {"search": PAYLOADS[0]}
        if scenario == "workbench":
            return {"click": "h5", "op": "KernelMul"}
        if scenario == "deep":
            return {"stages": [e["stage"] for e in self.expected["deep"]],
                    "hlir": {"focus": self.hlir_focus(), "group": "layer"}, "llir": {"group": "copy 1"},
                    "egraph": {"focus": self.egraph_focus(), "group": self.egraph_group()}}
        return {}

    def deep(self, name: str) -> dict[str, Any]:
        return next(e for e in self.expected["deep"] if e["stage"] == name)

    def hlir_focus(self) -> str:
        """A node of the layer whose 1-, 2- and 3-step neighbourhoods all differ and leave nodes out."""
        hlir = self.deep("hlir")
        return next(n["id"] for n in hlir["nodes"] if n.get("layer") and n["op"] != "Input"
                    and 1 < len(_hops(hlir, n["id"], 1)) < len(_hops(hlir, n["id"], 2)) < len(_hops(hlir, n["id"], 3))
                    < len(hlir["nodes"]))

    def egraph_focus(self) -> str:
        """An e-node reading two e-classes or more at the IR level that a search for its id finds alone there
        (Enter selects it)."""
        egraph = _ir_level(self.deep("egraph"))
        reads = defaultdict(int)
        for edge in egraph["edges"]:
            reads[edge["source"]] += 1
        return next(n["id"] for n in egraph["nodes"] if n["kind"] == "enode" and reads[n["id"]] >= 2
                    and _search(egraph, n["id"]) == [n["id"]])

    def egraph_group(self) -> str:
        """The largest group of the e-graph folded by HLIR node."""
        groups = _groups(self.deep("egraph"), "hlir")
        return max(groups, key=lambda key: len(groups[key]))

    def egraph_targets(self) -> dict[str, str]:
        """An e-node of an IR e-class holding several e-nodes (reading other e-classes), and that e-class."""
        nodes = self.stage("egraph")["nodes"]
        sizes = {n["id"]: n["enodes"] for n in nodes if n["kind"] == "eclass" and n["sort"] == "IR"}
        enode = next(n for n in nodes if n["kind"] == "enode" and sizes.get(n["eclass"], 0) > 1
                     and n.get("ir", {}).get("inputs"))
        return {"enode": enode["id"], "eclass": enode["eclass"], "hidden": self.egraph_hidden()}

    def egraph_hidden(self) -> str:
        """An e-class the IR level hides that a search finds first (then its e-nodes) and finds nothing at that level."""
        envelope = self.stage("egraph")
        level = _ir_level(envelope)
        return next(n["id"] for n in envelope["nodes"] if n["kind"] == "eclass" and n["sort"] != "IR"
                    and _search(envelope, n["id"])[0] == n["id"] and not _search(level, n["id"]))

    def fused_kernel(self) -> str:
        cuda = self.stage("cuda")
        return next(n["id"] for n in cuda["nodes"] if "region" in n["label"])

    def stage(self, name: str) -> dict[str, Any]:
        return next(e for e in self.expected["stages"] if e["stage"] == name)

    def pipeline(self) -> dict[str, Any]:
        return self.stage("pipeline")

    def run(self, scenario: str) -> dict[str, Any]:
        """Run ``scenario`` in the browser (once per module); its report, or a failure with the details."""
        if scenario not in self.reports:
            command = [self.node, str(DRIVER), scenario, self.lab.base_url, self.lab.token, str(self.out),
                       json.dumps(self.plan(scenario))]
            start = time.perf_counter()
            try:
                done = subprocess.run(command, cwd=EXTENSION, capture_output=True, text=True,
                                      timeout=SCENARIO_TIMEOUT_S,
                                      env={**os.environ, "LUMINAL_LAB_E2E_DEADLINE_S": str(SCENARIO_DEADLINE_S)})
            except subprocess.TimeoutExpired as error:
                self.reports[scenario] = {"error": f"the driver ran past {SCENARIO_TIMEOUT_S} s: {error.stdout}"}
            else:
                lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
                if lines:
                    self.reports[scenario] = json.loads(lines[-1][len("RESULT "):])
                else:
                    self.reports[scenario] = {"error": f"the driver exited with {done.returncode} and no result:\n"
                                                       f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"}
            self.reports[scenario]["wall_s"] = round(time.perf_counter() - start, 2)
            print(f"\n[{scenario}] timings {json.dumps(self.reports[scenario].get('timings', {}))} "
                  f"wall {self.reports[scenario]['wall_s']} s")
        report = self.reports[scenario]
        if report.get("error"):
            facts = report.get("facts", {})
            pytest.fail(f"the {scenario} scenario failed in the browser:\n{report['error']}\n"
                        f"screenshot: {report.get('screenshot')}\nstages then: {facts.get('roots_at_error')}\n"
                        f"step: {facts.get('step')}; kernel {facts.get('kernel_status')}; "
                        f"cells then: {facts.get('cells_at_error')}\n"
                        f"console errors: {report.get('console_errors')}\npage errors: {report.get('page_errors')}\n"
                        f"server log:\n{self.lab.log_tail()}", pytrace=False)
        return report


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    labextension()  # fails with "run `make setup`" when the extension is not built
    node = _require_tools()
    home = tmp_path_factory.mktemp("lab_e2e")
    notebooks = home / "notebooks"
    notebooks.mkdir()
    server = Lab(home / "jupyter", notebooks)
    server.start()
    try:
        start = time.perf_counter()
        expected = write_notebooks(notebooks)  # while the server starts
        written = time.perf_counter() - start
        server.trust(notebooks / "malicious.ipynb")
        server.wait()
        session = Session(server, expected, home / "screenshots", node)
        session.timings.update(server_start_s=round(server.started_in, 2), notebooks_s=round(written, 2))
        print(f"\n[lab] server answered after {server.started_in:.2f} s; notebooks written in {written:.2f} s")
        yield session
    finally:
        server.stop()


def _roots(report: dict[str, Any], in_pipeline: bool) -> list[dict[str, Any]]:
    return [root for root in report["facts"]["roots"] if root["in_pipeline"] == in_pipeline]


def _ir_level(envelope: dict[str, Any]) -> dict[str, Any]:
    """What an e-graph stage draws by default (model.ts ``irLevel``): its IR e-classes and their e-nodes, an edge from
    each e-node to each distinct IR e-class of its ``ir.inputs`` (operand order), then the envelope's edges between
    two kept nodes not already joined. Another stage, or an e-graph with no IR e-class, as it is."""
    classes = {n["id"] for n in envelope["nodes"] if n.get("kind") == "eclass" and n.get("sort") == "IR"}
    if envelope["stage"] != "egraph" or not classes:
        return envelope
    nodes = [n for n in envelope["nodes"] if n["id"] in classes or (n.get("kind") == "enode" and n["eclass"] in classes)]
    kept = {n["id"] for n in nodes}
    edges = [{"id": f"{n['id']}>{i}", "source": n["id"], "target": i}
             for n in nodes for i in dict.fromkeys(n.get("ir", {}).get("inputs", [])) if i in classes]
    joined = {(e["source"], e["target"]) for e in edges}
    edges += [e for e in envelope["edges"] if e["source"] in kept and e["target"] in kept
              and (e["source"], e["target"]) not in joined]
    return {**envelope, "nodes": nodes, "edges": edges}


def _check_drawn(root: dict[str, Any], envelope: dict[str, Any], where: str) -> None:
    ids = [node["id"] for node in envelope["nodes"]]
    assert root["status"] == "ready", f"{where}: data-status is {root['status']!r}, error {root['error']!r}"
    assert root["node_count"] == len(ids), f"{where}: data-node-count {root['node_count']}, envelope has {len(ids)}"
    assert root["nodes"] == len(ids), f"{where}: {root['nodes']} g.lx-node drawn, envelope has {len(ids)} nodes"
    assert sorted(root["ids"]) == sorted(ids), f"{where}: drawn ids differ from the envelope's: {root['ids']} vs {ids}"
    assert root["labelled"] == len(ids), f"{where}: {len(ids) - root['labelled']} nodes have no <text> label"
    assert root["edges"] == len(envelope["edges"]), f"{where}: {root['edges']} path.lx-edge, envelope has " \
                                                    f"{len(envelope['edges'])} edges"
    assert root["edges_with_ends"] == root["edges"], f"{where}: edges without data-source/data-target"
    assert root["svg"] == 1 and root["viewport"] == 1, f"{where}: expected one svg.lx-graph > g.lx-viewport"


def _scale(transform: str | None) -> float | None:
    if not transform:
        return None
    match = re.search(r"scale\(\s*([-\d.e+]+)", transform) or re.search(r"matrix\(\s*([-\d.e+]+)", transform)
    return float(match.group(1)) if match else None


def _rgb(colour: str | None) -> tuple[float, float, float] | None:
    """(r, g, b) in 0..255 of a computed CSS colour: rgb()/rgba() or color(srgb r g b) (from color-mix)."""
    match = re.match(r"rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)", colour or "")
    if match:
        return tuple(float(v) for v in match.groups())
    match = re.match(r"color\(srgb\s+([\d.e-]+)\s+([\d.e-]+)\s+([\d.e-]+)", colour or "")
    return tuple(255 * float(v) for v in match.groups()) if match else None


def _contrast(a: str | None, b: str | None) -> float | None:
    """WCAG contrast ratio of two CSS colours, or None when either is not an rgb() colour."""
    ca, cb = _rgb(a), _rgb(b)
    if ca is None or cb is None:
        return None

    def luminance(c):
        lin = [v / 255 / 12.92 if v / 255 <= 0.03928 else ((v / 255 + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    la, lb = sorted((luminance(ca), luminance(cb)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


# ---- stages.ipynb: saved outputs, no kernel ------------------------------------------------------

def test_saved_stages_render_with_no_kernel(lab: Session) -> None:
    report = lab.run("stages")
    roots = _roots(report, in_pipeline=False)
    assert [root["stage"] for root in roots] == list(STAGES), f"stage outputs in order: {roots}"
    for root in roots:
        envelope = lab.stage(root["stage"])
        _check_drawn(root, _ir_level(envelope), f"{root['stage']} output")
        if root["stage"] == "egraph":
            classes = [n for n in envelope["nodes"] if n["kind"] == "eclass"]
            ir = sum(n["sort"] == "IR" for n in classes)
            assert root["summary"] == f"{envelope['summary']} | IR level: {ir} of {len(classes)} e-classes; " \
                                      "Level: All e-classes shows the rest", f"egraph: div.lx-summary {root['summary']!r}"
        else:
            assert root["summary"] == envelope["summary"], f"{root['stage']}: div.lx-summary"
        assert len(root["toolbar"]) == 6, f"{root['stage']}: toolbar has only {root['toolbar']}"
    assert report["facts"]["kernels"] == [], f"a kernel is running: {report['facts']['kernels']}"
    assert report["facts"]["sessions"] == [], f"a session was started: {report['facts']['sessions']}"
    print(f"[stages] first output ready after {report['timings']['first_ready_ms']} ms, all after "
          f"{report['timings']['all_ready_ms']} ms; kernel dialog: {report['facts'].get('kernel_dialog')!r}")


def test_pipeline_renders_every_stage(lab: Session) -> None:
    report = lab.run("stages")
    pipeline = lab.pipeline()
    roots = _roots(report, in_pipeline=True)
    assert [root["stage"] for root in roots] == [e["stage"] for e in pipeline["stages"]], \
        f"pipeline stages: {[root['stage'] for root in roots]}"
    (info,) = report["facts"]["pipelines"]
    assert [tab["stage"] for tab in info["tabs"]] == list(STAGES), f"button.lx-tab[data-stage]: {info['tabs']}"
    for tab, envelope in zip(info["tabs"], pipeline["stages"]):
        assert str(len(envelope["nodes"])) in tab["text"], \
            f"tab {tab['stage']} does not show its {len(envelope['nodes'])} nodes: {tab['text']!r}"
        size = len(envelope["nodes"])
        drawn = f"{size} node{'' if size == 1 else 's'} drawn"  # one meaning per count, said in the tooltip
        assert tab["size_title"].startswith(drawn) and tab["title"].endswith(tab["size_title"]), \
            f"tab {tab['stage']}: title {tab['title']!r}, size title {tab['size_title']!r}"
        if envelope["stage"] == "egraph":
            kinds = Counter(node.get("kind") for node in envelope["nodes"])
            assert tab["size_title"] == f"{drawn}: {kinds['eclass']} e-classes, {kinds['enode']} e-nodes", tab
        assert tab["count"] == "", f"tab {tab['stage']}: span.lx-tab-count {tab['count']!r} before any selection"
    for root, envelope in zip(roots, map(_ir_level, pipeline["stages"])):
        assert root["node_count"] == len(envelope["nodes"]), \
            f"pipeline {root['stage']}: data-node-count {root['node_count']} != {len(envelope['nodes'])}"
        if root["status"] == "ready":  # tabs not yet shown may draw lazily; every one is drawn by the click test
            _check_drawn(root, envelope, f"pipeline {root['stage']}")


def test_click_shows_details(lab: Session) -> None:
    facts = lab.run("stages")["facts"]["click"]
    node = next(n for n in lab.stage("hlir")["nodes"] if n["id"] == "h5")
    assert facts["selected"] == ["h5"], f".lx-selected after clicking h5: {facts['selected']}"
    details = facts["details"]
    assert details is not None, "no div.lx-details after a click"
    assert "h5" in details["text"] and node["label"] in details["text"], f"div.lx-details: {details['text']!r}"
    fields = {row[0].strip(): row[-1] for row in details["fields"] if row}
    assert "op" in fields and "Sin" in fields["op"], f"table.lx-fields lacks the op: {details['fields']}"


def test_hover_marks_neighbours(lab: Session) -> None:
    facts = lab.run("stages")["facts"]
    edges = lab.stage("hlir")["edges"]
    near = {e["source"] for e in edges if e["target"] == "h6"} | {e["target"] for e in edges if e["source"] == "h6"}
    incident = sorted([e["source"], e["target"]] for e in edges if "h6" in (e["source"], e["target"]))
    assert set(facts["hover"]["nodes"]) - {"h6"} == near, f".lx-neighbour nodes on hovering h6: {facts['hover']}"
    assert sorted(facts["hover"]["edges"]) == incident, f".lx-neighbour edges on hovering h6: {facts['hover']}"
    assert facts["hover_after_leave"] == 0, "neighbours stay marked after the pointer leaves"


def test_search_counts_matches(lab: Session) -> None:
    facts = lab.run("stages")["facts"]
    labelled = {n["id"] for n in lab.stage("hlir")["nodes"] if "sin" in n["label"].lower()}
    matches = set(facts["search"]["matches"])
    assert labelled <= matches, f"search 'sin': .lx-match {sorted(matches)} misses {sorted(labelled - matches)}"
    assert str(len(matches)) in facts["search"]["count_text"], \
        f"span.lx-search-count {facts['search']['count_text']!r} for {len(matches)} matches"
    assert facts["search_cleared"] == 0, "matches stay marked after the search is cleared"


def test_zoom_buttons_change_the_view(lab: Session) -> None:
    zoom = lab.run("stages")["facts"]["zoom"]
    before, zoomed_in, zoomed_out = _scale(zoom["before"]), _scale(zoom["zoomed_in"]), _scale(zoom["zoomed_out"])
    assert None not in (before, zoomed_in, zoomed_out), f"g.lx-viewport transform has no scale: {zoom}"
    assert zoomed_in > before > zoomed_out, f"zoom in/out do not scale the viewport: {zoom}"
    assert _scale(zoom["fit"]) == pytest.approx(before, rel=0.01), f"fit does not restore the fitted view: {zoom}"


def test_a_picture_in_a_cell_fits_its_output_and_answers_hover_and_click(lab: Session) -> None:
    """``comp.egraph.picture(around=..., depth=2)``, saved: shown to pan, zoom and fit, fitted to its output's width
    when opened (it is drawn wider), each e-node's hover title its Graphviz tooltip (the op and its e-class), a click
    showing that text beside the picture; the zoom buttons, Fit, 1:1 and a drag move the view."""
    facts = lab.run("stages")["facts"]["picture"]
    (saved,) = lab.expected["picture"]
    assert facts["caption"] == saved["caption"], f"span.lx-caption {facts['caption']!r}"
    assert saved["width"] > facts["output_width"], f"the picture ({saved['width']} pt) fits without fitting: {facts}"
    assert facts["width"] <= facts["output_width"] and facts["height"] <= 600, f"the picture does not fit: {facts}"
    assert facts["scale"] == pytest.approx(facts["width"] / saved["width"], rel=0.02), facts
    assert facts["titles"] and all(" in IR-" in title for title in facts["titles"]), f"g.node titles: {facts['titles']}"
    assert re.match(r"\S+ in IR-\d+.*\n[A-Z]\w*\(", facts["hovered"]), f"hover title: {facts['hovered']!r}"
    assert facts["details"].startswith(facts["hovered"].splitlines()[0]) and facts["picked"] == 1, facts["details"]
    assert facts["zoomed_in"] == pytest.approx(facts["scale"] * 1.25, rel=0.01), facts
    assert facts["fit"] == pytest.approx(facts["scale"], rel=0.01) and facts["actual"] == pytest.approx(1.0), facts
    assert facts["dragged"]["before"] != facts["dragged"]["after"], f"a drag does not pan: {facts['dragged']}"
    assert facts["scripts"] == 0


def test_cuda_details_show_source(lab: Session) -> None:
    details = lab.run("stages")["facts"]["cuda_click"]
    kernel = next(n for n in lab.stage("cuda")["nodes"] if n["id"] == lab.fused_kernel())
    lines = kernel["source"].splitlines()
    assert details is not None and details["source_lines"] == len(lines), \
        f"pre.lx-source of {kernel['id']}: {details and details['source_lines']} span.lx-line, source has {len(lines)}"


def test_pipeline_links_counterparts(lab: Session) -> None:
    facts = lab.run("stages")["facts"]["pipeline_click"]
    stages = {e["stage"]: e for e in lab.pipeline()["stages"]}
    expected = Provenance({name: _Saved(env) for name, env in stages.items()}).counterparts("hlir", "h5")
    assert facts["selected"] == ["h5"], f"pipeline hlir .lx-selected: {facts['selected']}"
    for stage, ids in expected.items():
        assert sorted(facts["linked"].get(stage, [])) == sorted(ids), \
            f"pipeline {stage}: .lx-linked {facts['linked'].get(stage)} for HLIR h5, provenance says {ids}"
    listed = {(link["stage"], link["id"]) for link in facts["details"]["links"]}
    wanted = {(stage, i) for stage, ids in expected.items() for i in ids}
    assert wanted <= listed, f"a.lx-link in the details miss {sorted(wanted - listed)}"
    counts = {tab["stage"]: tab["count"] for tab in facts["tabs"]}
    for stage, ids in expected.items():
        if ids:
            assert str(len(ids)) in (counts.get(stage) or ""), \
                f"tab {stage}: span.lx-tab-count {counts.get(stage)!r}, {len(ids)} nodes linked"
            tab = next(t for t in facts["tabs"] if t["stage"] == stage)
            nodes = f"{len(ids)} node{'' if len(ids) == 1 else 's'}"
            assert tab["count_title"] == f"{nodes} linked to the selected HLIR h5", \
                f"tab {stage}: the badge's tooltip {tab['count_title']!r}"
    # the CUDA stage lists the linked kernel's source with the lines computing h5 marked .lx-hit
    cuda_lines = lab.pipeline()["meta"]["cuda_lines"]
    hits = sorted({n for kernel in expected["cuda"] for k in expected["llir"] for n in cuda_lines[kernel].get(k, [])})
    cuda = facts["cuda_details"]
    assert cuda is not None and cuda["source_lines"] > 0, f"the linked CUDA kernel's source is not listed: {cuda}"
    assert cuda["hits"] == hits, f"CUDA .lx-hit lines {cuda['hits']} for HLIR h5, meta.cuda_lines says {hits}"


def test_pipeline_link_navigates(lab: Session) -> None:
    facts = lab.run("stages")["facts"]
    follow = facts.get("link_follow")
    assert follow is not None, f"no a.lx-link to follow: {facts['pipeline_click']['details']['links']}"
    link = follow["link"]
    assert follow["visible"] and not follow["hlir_visible"], f"the {link['stage']} tab is not the one shown: {follow}"
    assert follow["active_tab"] == [link["stage"]], f"active tab after following {link}: {follow['active_tab']}"
    assert follow["selected"] == [link["id"]], \
        f"{link['stage']} .lx-selected {follow['selected']}, the link goes to {link['id']}"
    assert link["href"] in (None, "", "#") or not link["href"].lower().startswith("javascript"), link
    if link["stage"] == "cuda":  # a kernel selected in the pipeline marks every line it computes
        lines = lab.pipeline()["meta"]["cuda_lines"][link["id"]]
        hits = sorted({n for numbers in lines.values() for n in numbers})
        assert follow["details"]["hits"] == hits, f"{link['id']}: .lx-hit {follow['details']['hits']}, expected {hits}"


def test_dark_theme_changes_colours(lab: Session) -> None:
    theme = lab.run("stages")["facts"]["theme"]
    light, dark = theme["light"], theme["dark"]
    assert light["graph_background"] != dark["graph_background"] or light["background"] != dark["background"], \
        f"the background is the same in both themes: {theme}"
    assert (light["node_fill"], light["label_fill"]) != (dark["node_fill"], dark["label_fill"]), \
        f"node colours do not follow the theme: {theme}"
    assert theme["light_again"] == light, f"back to light, colours differ: {theme}"
    for name, colours in (("light", light), ("dark", dark)):
        fill = colours["node_fill"] if _rgb(colours["node_fill"]) else colours["graph_background"]
        ratio = _contrast(colours["label_fill"], fill)
        assert ratio is not None and ratio >= 3, f"{name}: label {colours['label_fill']} on {fill}: contrast {ratio}"
    print(f"[theme] light {light}\n[theme] dark {dark}")


def test_egraph_eclasses_are_boxes_holding_their_enodes(lab: Session) -> None:
    facts = lab.run("stages")["facts"]
    envelope = _ir_level(lab.stage("egraph"))
    targets = lab.egraph_targets()
    eclasses = [n["id"] for n in envelope["nodes"] if n["kind"] == "eclass"]
    enodes = [n for n in envelope["nodes"] if n["kind"] == "enode"]
    geometry = facts["egraph_geometry"]
    assert sorted(geometry["boxes"]) == sorted(eclasses), "every e-class (and nothing else) is a g.lx-node.lx-box"
    assert geometry["box_kinds"] == ["eclass"], geometry["box_kinds"]
    assert geometry["outside"] == [] and geometry["inside"] == len(enodes), \
        f"e-nodes drawn outside their e-class's box: {geometry['outside'][:10]}"
    assert geometry["box_layer_first"], "the boxes are not drawn first (under the edges and e-nodes)"
    # clicking the e-node's pill selects it, clicking its e-class's title row selects the e-class
    click = facts["egraph_enode_click"]
    assert click["selected"] == [targets["enode"]], f"clicking e-node {targets['enode']}: {click['selected']}"
    assert targets["enode"] in click["details"]["text"], click["details"]["text"]
    click = facts["egraph_eclass_click"]
    assert click["selected"] == [targets["eclass"]], f"clicking {targets['eclass']}'s title: {click['selected']}"
    fields = {row[0].strip(): row[-1] for row in click["details"]["fields"] if row}
    assert fields.get("kind") == "eclass" and fields.get("id") == targets["eclass"], click["details"]["fields"]
    # hovering the e-node marks the e-classes it reads and the edges to them
    reads = [e for e in envelope["edges"] if e["source"] == targets["enode"]]
    hover = facts["egraph_hover"]
    assert sorted(hover["nodes"]) == sorted({e["target"] for e in reads}), f"hovering {targets['enode']}: {hover}"
    assert sorted(hover["edges"]) == sorted([e["source"], e["target"]] for e in reads), hover
    # a search for the e-class's id marks its box
    assert targets["eclass"] in facts["egraph_search"], facts["egraph_search"]


def test_egraph_draws_the_ir_level_until_asked_for_every_eclass(lab: Session) -> None:
    facts = lab.run("stages")["facts"]
    envelope = lab.stage("egraph")
    level = _ir_level(envelope)
    (root,) = [r for r in _roots(lab.run("stages"), in_pipeline=False) if r["stage"] == "egraph"]
    assert root["level"] == "ir" and facts["egraph_level"]["level"] == "ir", f"data-level {root['level']!r}"
    assert facts["egraph_level"]["options"] == ["ir", "all"], f"select.lx-level options {facts['egraph_level']}"
    assert root["node_count"] == root["nodes"] == root["drawn"] == len(level["nodes"]) < len(envelope["nodes"]), root
    assert root["edges"] == len(level["edges"]) > 0, f"{root['edges']} path.lx-edge at the IR level"
    scale = facts["egraph_level"]["scale"]
    # the most detailed view that reads at fit: the IR level, unfolded
    assert root["fold"] == facts["egraph_level"]["fold"] == "none", f"data-fold {root['fold']!r}"
    assert facts["egraph_level"]["opening_scale"] == pytest.approx(scale, abs=0.002), facts["egraph_level"]
    assert scale >= LABEL_MIN_SCALE, f"the stages e-graph fits at {scale} at the IR level: its labels are hidden"
    print(f"[stages] e-graph at the IR level: {len(level['nodes'])} of {len(envelope['nodes'])} nodes, "
          f"{len(level['edges'])} edges, fitted at scale {scale} (labels show from {LABEL_MIN_SCALE})")
    # a search for an e-class the IR level hides says so; Enter draws every e-class and selects it
    hidden = facts["egraph_hidden"]
    assert "hidden at the IR level" in hidden["count_text"], f"span.lx-search-count {hidden['count_text']!r}"
    assert hidden["level"] == "all" and hidden["selected"] == [lab.egraph_targets()["hidden"]], hidden
    again = facts["egraph_ir_again"]
    assert again["level"] == "ir" and again["nodes"] == len(level["nodes"]), again
    everything = facts["egraph_all"]
    assert everything["level"] == "all", everything
    _check_drawn(everything, envelope, "egraph, Level: All e-classes")
    assert everything["summary"] == envelope["summary"], everything["summary"]
    print(f"[stages] e-graph, Level: All e-classes: {len(envelope['nodes'])} nodes fitted at scale {everything['scale']}")
    # the IR level is about half as wide (its widest e-classes hold several e-nodes side by side), so it fits at
    # about twice the scale (Level: All e-classes is below LABEL_MIN_SCALE in the test's 1400-pixel window)
    assert scale > 1.5 * everything["scale"], f"fitted at {scale} at the IR level, {everything['scale']} with all"


class _Saved:
    """A stage read back from its saved envelope (what ``Provenance`` needs: ``to_json``)."""

    def __init__(self, envelope: dict[str, Any]) -> None:
        self.envelope = envelope

    def to_json(self) -> dict[str, Any]:
        return self.envelope


# ---- malicious.ipynb -------------------------------------------------------------------------

def test_malicious_labels_execute_nothing(lab: Session) -> None:
    report = lab.run("malicious")
    facts = report["facts"]
    assert facts["pwned"] is None, f"a payload ran: window.__pwned = {facts['pwned']}"
    assert not facts["alerts"] and not facts.get("dialogs"), f"a payload ran: {facts['alerts']}"
    assert facts["inside"] == [], f"markup from the envelopes became elements or handlers: {facts['inside'][:20]}"
    assert facts["foreign_b"] == 0, "the '\"><b>' payload became a <b> element"
    assert facts["clicks"] > 0, "no node of the malicious stages could be clicked"
    assert facts["group_clicks"] > 0 and facts["focused"] > 0, \
        f"no group (labelled by a payload) was folded and clicked, or no node focused: {facts['group_clicks']}, " \
        f"{facts['focused']}"
    text = "\n".join(facts["text"])
    for payload in PAYLOADS:
        assert payload in text, f"the payload {payload!r} is not shown as text"
    shown = facts["first_details"]["text"] if facts.get("first_details") else ""
    assert PAYLOADS[0] in shown, f"the details of the node labelled {PAYLOADS[0]!r} show {shown!r}"
    labels = facts["labels"]
    for payload in PAYLOADS:
        assert any(payload.startswith(label.rstrip("…").rstrip(".")) and label for label in labels), \
            f"no node label reads {payload!r} (labels: {labels[:12]})"
    ready = [root for root in facts["roots"] if root["stage"] in STAGES and not root["in_pipeline"]]
    assert ready and all(root["status"] == "ready" and root["node_count"] == len(PAYLOADS) for root in ready), \
        f"the malicious hlir/cuda stages: {[(r['stage'], r['status'], r['node_count']) for r in ready]}"
    assert not report["page_errors"], f"page errors: {report['page_errors']}"
    assert "malicious.ipynb is not trusted" not in lab.lab.log_path.read_text(errors="replace"), \
        "the server did not treat malicious.ipynb as trusted, so this is not the worst case"


# ---- large.ipynb -----------------------------------------------------------------------------

def test_large_stage_is_ready_in_time(lab: Session) -> None:
    report = lab.run("large")
    envelope = lab.expected["large"][0]
    count = len(envelope["nodes"])
    assert count >= LARGE_NODES, f"the large HLIR has only {count} nodes"
    (root,) = report["facts"]["roots"]
    timings = report["timings"]
    print(f"[large] {count} nodes, {len(envelope['edges'])} edges: ready {timings['draw_ms']:.0f} ms after the "
          f"output appeared (renderer's data-draw-ms {timings['renderer_draw_ms']}; {timings['ready_ms']} ms after "
          f"opening the notebook), longest task while drawing "
          f"{timings['longest_task_ms']:.0f} ms; statuses {report['facts']['statuses'][:6]}")
    assert root["status"] == "ready", f"data-status {root['status']!r}: {root['error']}"
    assert root["node_count"] == count and root["nodes"] == count, \
        f"data-node-count {root['node_count']}, {root['nodes']} g.lx-node drawn, {count} in the envelope"
    assert root["drawn"] == count, f"data-drawn {root['drawn']} != {count}"
    took = max(timings["draw_ms"], timings["renderer_draw_ms"])  # ours, and the renderer's own data-draw-ms
    assert took <= LARGE_READY_LIMIT_S * 1000, \
        f"the {count}-node stage took {took / 1000:.1f} s to be ready (limit {LARGE_READY_LIMIT_S} s)"
    assert report["facts"]["observer_error"] is None, report["facts"]["observer_error"]
    assert timings["longest_task_ms"] < LONG_TASK_LIMIT_MS, \
        f"a {timings['longest_task_ms']:.0f} ms main-thread task while drawing (limit {LONG_TASK_LIMIT_MS} ms): " \
        f"{report['facts']['long_tasks']}"
    sins = sum(1 for n in envelope["nodes"] if "sin" in n["label"].lower())
    assert report["facts"]["search"]["matches"] >= sins, f"search 'Sin': {report['facts']['search']}, {sins} labelled"
    first = envelope["nodes"][0]
    found = report["facts"]["found"]
    assert found["selected"] == [first["id"]] and first["label"] in (found["details"] or ""), \
        f"Enter in a search for {first['label']!r} selected {found['selected']}, details {found['details']!r}"
    target = report["facts"]["click_target"]
    assert target is not None, "after centring on the first node no other node is on screen to click"
    assert report["facts"]["clicked"] == [target], f"clicking {target}: .lx-selected {report['facts']['clicked']}"
    assert report["facts"]["kernels"] == [], "a kernel started for the large notebook"


# ---- deep.ipynb: focus and folding on a real model's stages ----------------------------------

def _hops(envelope: dict[str, Any], start: str, depth: int) -> set[str]:
    """Ids within ``depth`` steps of ``start``: along edges either way, and between an e-node and its e-class."""
    near: dict[str, set[str]] = defaultdict(set)
    for edge in envelope["edges"]:
        near[edge["source"]].add(edge["target"])
        near[edge["target"]].add(edge["source"])
    for node in envelope["nodes"]:
        if node.get("kind") == "enode":
            near[node["id"]].add(node["eclass"])
            near[node["eclass"]].add(node["id"])
    seen, frontier = {start}, {start}
    for _ in range(depth):
        frontier = {v for u in frontier for v in near[u]} - seen
        seen |= frontier
    return seen


def _groups(envelope: dict[str, Any], mode: str) -> dict[str, list[str]]:
    """Group key -> member ids (groups of two or more): by ``layer`` (an LLIR: ``copy N``), or by HLIR node (an
    e-graph: each e-class's ``group``, which Python computed; elsewhere the first ``hlir`` id); an e-node goes with
    its e-class."""
    links = envelope["links"].get("hlir", {})
    key: dict[str, str] = {}
    for node in envelope["nodes"]:
        if node.get("kind") == "enode":
            continue
        if mode == "layer":
            copy = node.get("copy")
            found = f"copy {copy}" if isinstance(copy, int) else "layer" if node.get("layer") else None
        elif envelope["stage"] == "egraph":
            found = node.get("group")
        else:
            hlir = links.get(node["id"], node.get("hlir") or [])
            found = min(hlir, key=lambda h: int(h[1:])) if hlir else None
        if found is not None:
            key[node["id"]] = found
    members: dict[str, list[str]] = defaultdict(list)
    for node in envelope["nodes"]:
        owner_id = node["eclass"] if node.get("kind") == "enode" else node["id"]
        if owner_id in key:
            members[key[owner_id]].append(node["id"])
    return {k: ids for k, ids in members.items() if len(ids) > 1}


def _folded_edges(envelope: dict[str, Any], groups: dict[str, list[str]]) -> tuple[int, int]:
    """(edges drawn, merged edges among them) with ``groups`` folded: an edge touching a group is merged with the
    others joining the same two ends the same way; one inside a group is not drawn."""
    group_of = {i: key for key, ids in groups.items() for i in ids}
    plain, merged = 0, set()
    for edge in envelope["edges"]:
        a, b = (group_of.get(edge[end]) for end in ("source", "target"))
        if a is None and b is None:
            plain += 1
        elif (a or edge["source"]) != (b or edge["target"]):
            merged.add((a or edge["source"], b or edge["target"]))
    return plain + len(merged), len(merged)


def _search(envelope: dict[str, Any], query: str) -> list[str]:
    """Ids of the nodes with a string field containing ``query`` (case-insensitive), as the search box finds them."""
    q = query.lower()
    return [n["id"] for n in envelope["nodes"] if any(isinstance(v, str) and q in v.lower() for v in n.values())]


def test_deep_stages_render(lab: Session) -> None:
    report = lab.run("deep")
    roots = report["facts"]["roots"]
    assert [r["stage"] for r in roots] == ["hlir", "egraph", "llir"], roots
    for root in roots:
        envelope = _ir_level(lab.deep(root["stage"]))
        assert root["status"] == "ready", f"{root['stage']}: {root}"
        if root["stage"] == "egraph":  # too tall to read unfolded at fit: it opens folded by HLIR node (IR level)
            groups = _groups(envelope, "hlir")
            assert root["fold"] == "hlir", f"the deep e-graph opened with data-fold {root['fold']!r}"
            assert root["node_count"] == len(envelope["nodes"]), root
            assert root["nodes"] == root["drawn"] == len(envelope["nodes"]) - sum(map(len, groups.values())) + len(groups), root
            assert root["edges"] == _folded_edges(envelope, groups)[0], f"egraph: {root['edges']} path.lx-edge"
            continue
        assert root["node_count"] == root["nodes"] == root["drawn"] == len(envelope["nodes"]), root
        assert root["edges"] == len(envelope["edges"]), f"{root['stage']}: {root['edges']} path.lx-edge"
    assert {o["value"]: o["disabled"] for o in report["facts"]["egraph_options"]} == \
        {"none": False, "layer": False, "hlir": False}, "the e-graph folds by layer (flagged e-classes) and HLIR"
    print(f"[deep] {[(r['stage'], r['node_count']) for r in roots]}; timings {report['timings']}")


def test_egraph_too_tall_to_read_opens_folded_by_hlir_node(lab: Session) -> None:
    report = lab.run("deep")
    opening, unfolded = report["facts"]["egraph_opening"], report["facts"]["steps"]["egraph_unfold"]
    level = _ir_level(lab.deep("egraph"))
    print(f"[deep] e-graph opened folded by HLIR node: fitted at scale {opening['scale']}, "
          f"its IR level unfolded would fit at {opening['opening_scale']} (labels show from {LABEL_MIN_SCALE})")
    assert (opening["fold"], opening["level"]) == ("hlir", "ir"), opening
    assert opening["opening_scale"] < LABEL_MIN_SCALE, f"unfolded it fits at {opening['opening_scale']}: it reads"
    assert "opened folded by HLIR node to read at fit" in opening["summary"], opening["summary"]
    assert opening["scale"] > opening["opening_scale"], opening
    # the user's choice holds: No folding draws every e-class of the IR level
    assert unfolded["fold"] == "none" and unfolded["drawn"] == unfolded["nodes"] == len(level["nodes"]), unfolded


def test_focus_shows_the_k_hop_neighbourhood(lab: Session) -> None:
    steps = lab.run("deep")["facts"]["steps"]
    hlir = lab.deep("hlir")
    focus = lab.hlir_focus()
    assert steps["hlir_select"]["focus"] is None and steps["hlir_select"]["drawn"] == len(hlir["nodes"])
    for step, depth in (("hlir_focus", 2), ("hlir_depth_3", 3), ("hlir_depth_1", 1)):
        state, near = steps[step], _hops(hlir, focus, depth)
        assert (state["focus"], state["depth"]) == (focus, depth), f"{step}: data-focus / data-focus-depth {state}"
        assert state["drawn"] == state["nodes"] == len(near), \
            f"{step}: data-drawn {state['drawn']}, {state['nodes']} g.lx-node; {len(near)} within {depth} of {focus}"
        assert set(state["ids"]) == near, f"{step}: drawn {sorted(set(state['ids']) ^ near)} differ"
        inside = sum(e["source"] in near and e["target"] in near for e in hlir["edges"])
        assert state["edges"] == inside, f"{step}: {state['edges']} edges drawn, {inside} join the neighbourhood"
    assert len({steps[s]["drawn"] for s in ("hlir_depth_1", "hlir_focus", "hlir_depth_3")}) == 3, "k changes nothing"
    everything = steps["hlir_show_all"]
    assert everything["focus"] is None and everything["drawn"] == len(hlir["nodes"]), f"show all: {everything}"
    # an e-node, one step: its e-class and the e-classes it reads
    egraph, enode = _ir_level(lab.deep("egraph")), lab.egraph_focus()
    assert steps["egraph_select"]["selected"] == enode, f"Enter in a search for {enode}: {steps['egraph_select']}"
    state, near = steps["egraph_focus"], _hops(egraph, enode, 1)
    assert (state["focus"], state["depth"]) == (enode, 1), f"e-graph focus on {enode}: {state}"
    assert set(state["ids"]) == near and state["drawn"] == len(near), \
        f"e-graph focus on {enode}: drew {state['ids']}, expected {sorted(near)}"


def test_fold_by_layer_and_expand(lab: Session) -> None:
    steps = lab.run("deep")["facts"]["steps"]
    hlir = lab.deep("hlir")
    (layer,) = _groups(hlir, "layer").values()
    copies = hlir["meta"]["layer"]["copies"]
    folded = steps["hlir_fold_layer"]
    assert folded["fold"] == "layer" and folded["groups"] == [
        {"key": "layer", "size": len(layer), "label": f"layer ×{copies} · {len(layer)} nodes"}], folded["groups"]
    assert folded["drawn"] == folded["nodes"] == len(hlir["nodes"]) - len(layer) + 1, f"folded: {folded}"
    assert not set(folded["ids"]) & set(layer), "nodes of the folded layer are drawn"
    assert (folded["edges"], folded["merged"]) == _folded_edges(hlir, {"layer": layer}), f"edges: {folded}"
    expanded = steps["hlir_expand"]
    assert expanded["drawn"] == folded["drawn"] + len(layer) - 1 and expanded["groups"] == [], f"expanded: {expanded}"
    assert expanded["expanded"] == 1 and expanded["edges"] == len(hlir["edges"]), expanded
    again = steps["hlir_fold_all"]
    assert (again["drawn"], again["groups"], again["expanded"]) == (folded["drawn"], folded["groups"], 0), again

    llir = lab.deep("llir")
    groups = _groups(llir, "layer")
    assert sorted(groups) == [f"copy {c}" for c in range(llir["meta"]["layer"]["copies"])], sorted(groups)
    folded = steps["llir_fold_layer"]
    assert sorted((g["key"], g["size"], g["label"]) for g in folded["groups"]) == \
        sorted((key, len(ids), f"{key} · {len(ids)} kernels") for key, ids in groups.items())
    assert folded["drawn"] == len(llir["nodes"]) - sum(map(len, groups.values())) + len(groups), folded
    assert (folded["edges"], folded["merged"]) == _folded_edges(llir, groups), f"edges: {folded}"
    expanded = steps["llir_expand"]
    assert expanded["drawn"] == folded["drawn"] + len(groups["copy 1"]) - 1, f"expanding copy 1: {expanded}"
    assert [g["key"] for g in expanded["groups"]] == ["copy 0"], "the other copy stays folded"
    assert set(groups["copy 1"]) <= set(expanded["ids"])


def test_egraph_fold_by_hlir_node(lab: Session) -> None:
    steps = lab.run("deep")["facts"]["steps"]
    egraph = lab.deep("egraph")  # folded after choosing Level: All e-classes
    groups = _groups(egraph, "hlir")
    folded = steps["egraph_fold_hlir"]
    assert folded["focus"] is None and folded["fold"] == "hlir", folded
    assert folded["groups_attr"] == len(folded["groups"]) == len(groups), \
        f"{len(folded['groups'])} groups drawn (data-groups {folded['groups_attr']}), {len(groups)} HLIR origins"
    assert folded["drawn"] == len(egraph["nodes"]) - sum(map(len, groups.values())) + len(groups), folded["drawn"]
    kinds = {n["id"]: n["kind"] for n in egraph["nodes"]}
    labels = {g["key"]: g["label"] for g in folded["groups"]}
    for key, ids in groups.items():
        classes = sum(kinds[i] == "eclass" for i in ids)
        assert labels.get(key) == f"{key} · {classes} e-class{'es' * (classes != 1)}", (key, labels.get(key))
    assert (folded["edges"], folded["merged"]) == _folded_edges(egraph, groups)
    key = lab.egraph_group()
    expanded = steps["egraph_expand"]
    scale = lab.run("deep")["facts"]["egraph_scale"]
    assert scale < 0.1, f"the group was clicked at zoom {scale}: not the large-graph case (nodes under a pixel tall)"
    assert expanded["drawn"] == folded["drawn"] + len(groups[key]) - 1, f"clicking group {key}: {expanded['drawn']}"
    assert len(expanded["groups"]) == len(groups) - 1 and key not in {g["key"] for g in expanded["groups"]}
    print(f"[deep] e-graph {len(egraph['nodes'])} nodes, folded by HLIR node: {folded['drawn']} drawn, "
          f"{len(groups)} groups")


# ---- workbench.ipynb: live kernel ------------------------------------------------------------

def test_workbench_widgets_render_and_round_trip(lab: Session) -> None:
    report = lab.run("workbench")
    facts = report["facts"]
    cells = facts["cells"]
    for cell in cells:
        assert not cell["errors"], f"cell {cell['source'][:60]!r} failed: {cell['errors']}"
    bench = next((c for c in cells if "workbench" in c["source"]), None)
    assert bench and bench["widgets"] >= 1, f"comp.workbench() rendered nothing: {bench}"
    for marker, button in (("stepper()", "step round"), ("inspector()", "refresh"), ("profiler(", "Launch")):
        cell = next((c for c in cells if marker in c["source"]), None)
        assert cell is not None, f"no cell showing {marker}"
        assert cell["widgets"] >= 1 and button in cell["buttons"], \
            f"{marker} did not render its widget (buttons {cell['buttons']}, text {cell['text']!r})"
    panes = facts["panes"]
    assert len(panes["panes"]) == len(STAGES), f"workbench panes: {panes}"
    assert all(p["svg"] or p["kernels"] for p in panes["panes"]), f"a pane has no picture or listing: {panes}"
    trip = facts["round_trip"]
    assert trip["clicked"] in trip["selected"], f"clicked {trip['clicked']}, .ll-selected {trip['selected']}"
    assert sum(1 for ids in trip["highlighted"][1:] if ids) >= 2, \
        f"Python's answer marked .ll-highlight in too few other panes: {trip['highlighted']}"
    assert trip["status"] == f"selected hlir {trip['clicked']}", f"status line {trip['status']!r}"
    assert trip["clicked"] == "h5", f"the HLIR Sin node h5 is not drawn in the workbench; clicked {trip['clicked']}"
    assert all(trip["highlighted"]), f"selecting the Sin node should mark every stage: {trip['highlighted']}"
    assert trip["hits"] > 0, "no CUDA source line marked .ll-hit for the Sin node"
    assert trip["tabs"][0]["linked"] == "", "the selected node's own stage has no badge, as in the pipeline"
    *stages, search = trip["tabs"]
    for tab in stages[1:]:  # the badge counts one thing, and its tooltip says what
        assert tab["linked"].isdigit() and tab["title"].startswith(f"{tab['linked']} node"), tab
        assert tab["title"].endswith(f"linked to the selected hlir {trip['clicked']}"), tab
    assert (search["text"], search["linked"]) == ("Search", None), search  # the program's search, not a stage
    _check_stepper(facts["stepper"])
    _check_inspector(facts["inspector"])
    _check_profiler(facts["profiler"])
    print(f"[workbench] kernel idle {report['timings']['kernel_idle_ms']} ms, workbench shown "
          f"{report['timings']['workbench_ms']} ms, round trip {report['timings']['round_trip_ms']} ms")


def _check_stepper(rounds: list[dict[str, Any]]) -> None:
    """After each click of "step round": the status, the table's title and the plot's last point name that round
    (its marker right above the tick of that number); every tick a whole number."""
    assert len(rounds) == 2, rounds
    for number, seen in enumerate(rounds, 1):
        assert seen["status"].startswith(f"round: step {number};"), seen["status"]
        assert seen["title"] == f"round #{number}", seen["title"]
        ticks = {label: x for label, x in seen["ticks"]}
        assert all(label.isdigit() for label in ticks), f"tick labels {list(ticks)}"
        assert len(seen["markers"]) == number + 1, f"{len(seen['markers'])} points after round {number}"
        assert abs(seen["markers"][-1] - ticks[str(number)]) < 1.5, f"last point at x {seen['markers'][-1]}, {ticks}"


def _check_inspector(seen: dict[str, Any]) -> None:
    """A search for KernelMul: every entry is whole and names its op; the e-class's rows name each e-node's op with
    its shape and dtype, never the bare ``Op``; the child and parent buttons name their e-class's op."""
    assert seen["entries"] and all("KernelMul" in entry for entry in seen["entries"]), seen["entries"]
    assert not seen["cut"], f"entries cut off: {seen['entries']}"
    ops = [row[0] for row in seen["rows"]]
    assert "KernelMul" in ops and "Op" not in ops, seen["rows"]
    assert all(re.fullmatch(r"\[[\d, ]+\] F32", row[1]) for row in seen["rows"]), seen["rows"]
    assert seen["buttons"] and all(re.fullmatch(r"\S+ · \w+", b) for b in seen["buttons"]), seen["buttons"]


def _check_profiler(seen: dict[str, Any]) -> None:
    """A search launched from the profiler: each viable candidate listed with its median and spread, and ranked by
    median, each rank's fastest trial at most its median, at most its slowest."""
    assert seen["status"].startswith("done:"), seen["status"]
    timed = [o for o in seen["options"] if o.endswith(" ok")]
    assert timed and all(re.search(r" [\d.]+ ms \([\d.]+-[\d.]+\) ok$", o) for o in timed), seen["options"]
    ranking = seen["ranking"]
    assert [int(row[0]) for row in ranking] == list(range(1, len(timed) + 1)), ranking
    medians = [float(row[3]) for row in ranking]
    assert medians == sorted(medians), ranking
    assert all(float(row[4]) <= float(row[3]) <= float(row[5]) for row in ranking), ranking


# ---- every scenario --------------------------------------------------------------------------

SCENARIOS = ("stages", "malicious", "large", "deep", "workbench")


def test_no_request_leaves_the_machine(lab: Session) -> None:
    for scenario in SCENARIOS:
        report = lab.run(scenario)
        assert report["requests"] > 0, f"{scenario}: no request was seen (is the listener working?)"
        assert report["off_machine"] == [], f"{scenario}: requests off this machine: {report['off_machine']}"


def test_no_page_errors(lab: Session) -> None:
    for scenario in SCENARIOS:
        report = lab.run(scenario)
        assert report["page_errors"] == [], f"{scenario}: uncaught errors in the page: {report['page_errors']}"
        ours = [e for e in report["console_errors"] if re.search(r"luminal|lx-|stage", e, re.IGNORECASE)]
        assert ours == [], f"{scenario}: console errors from the extension: {ours}"
