"""``comp.workbench()``: one widget with a tab per stage, linked by provenance.

Each tab shows a stage's summary line and picture (the CUDA tab lists each kernel's source with
line numbers). Clicking a node in any picture sets ``selected`` (``{"stage": ..., "id": ...}``);
Python answers with ``highlighted`` (stage -> ids: the node and its counterparts, see
``luminal_lab.provenance``) and ``cuda_lines`` (CUDA kernel id -> the source lines that compute
them), which the view marks. ``select(stage, id)`` does the same as a click. Everything the view
shows from data is set as text; the pictures are Graphviz's SVG, parsed as XML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from ..cuda_stage import CudaStage
from ..cuda_view import kernel_id as cuda_id
from ..cuda_view import label as cuda_label
from ..provenance import BROWSER_CSS, BROWSER_JS, NO_PICTURE, TITLES, Provenance

if TYPE_CHECKING:
    from ..compiled import Compiled
    from ..genome import Genome

_ESM = BROWSER_JS + """
function svgOf(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  return document.importNode(doc.documentElement, true);
}

function listing(kernels) {
  const box = document.createElement("div");
  for (const kernel of kernels) {
    const block = document.createElement("div");
    block.className = "ll-kernel";
    block.dataset.node = kernel.id;
    const title = document.createElement("div");
    title.textContent = `${kernel.label} (${kernel.id})`;
    const pre = document.createElement("pre");
    pre.className = "ll-source";
    kernel.lines.forEach((text, i) => {
      const line = document.createElement("span");
      line.className = "ll-line";
      line.dataset.line = String(i + 1);
      const number = document.createElement("span");
      number.className = "ll-lineno";
      number.textContent = String(i + 1);
      line.append(number, text);
      pre.append(line);
    });
    block.append(title, pre);
    box.append(block);
  }
  return box;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "ll-workbench";
  const tabs = document.createElement("div");
  tabs.className = "ll-tabs";
  const status = document.createElement("div");
  status.className = "ll-status";
  root.append(tabs, status);
  const panes = model.get("panes").map((pane) => {
    const tab = document.createElement("button");
    const box = document.createElement("div");
    box.className = "ll-pane";
    const summary = document.createElement("div");
    summary.className = "ll-summary";
    summary.textContent = pane.summary;
    const picture = document.createElement("div");
    picture.className = "ll-stage-picture";
    if (pane.svg) picture.append(svgOf(pane.svg));
    if (pane.kernels) picture.append(listing(pane.kernels));
    if (pane.note) {
      const note = document.createElement("div");
      note.className = "ll-note";
      note.textContent = pane.note;
      picture.append(note);
    }
    box.append(summary, picture);
    const nodes = llIndex(box, pane.targets);
    box.addEventListener("click", (event) => {
      const hit = llTarget(event, box, nodes, pane.targets);
      if (hit) {
        model.set("selected", hit);
        model.save_changes();
      }
    });
    tabs.append(tab);
    root.append(box);
    return { pane, tab, box, nodes };
  });
  const show = (active) => {
    for (const p of panes) {
      p.box.hidden = p !== active;
      p.tab.classList.toggle("ll-active", p === active);
    }
  };
  panes.forEach((p) => p.tab.addEventListener("click", () => show(p)));
  const paint = () => {
    const highlighted = model.get("highlighted");
    const selected = model.get("selected");
    for (const p of panes) {
      llPaint(p.nodes, p.pane.targets, highlighted, selected.stage ? selected : null);
      const count = (highlighted[p.pane.stage] || []).length;
      p.tab.textContent = count ? `${p.pane.title} (${count})` : p.pane.title;
    }
    llPaintLines(root, model.get("cuda_lines"));
    status.textContent = selected.stage
      ? `selected ${selected.stage} ${selected.id}`
      : "Click a node to see its counterparts in every stage.";
  };
  const events = ["change:selected", "change:highlighted", "change:cuda_lines"];
  events.forEach((name) => model.on(name, paint));
  show(panes[0]);
  paint();
  el.append(root);
  return () => events.forEach((name) => model.off(name, paint));
}

export default { render };
"""

_CSS = BROWSER_CSS + """
.ll-workbench { font-family: system-ui, sans-serif; font-size: 13px; }
.ll-tabs button { margin-right: 4px; padding: 3px 10px; border: 1px solid #d1d5db; background: #f9fafb;
  border-radius: 4px 4px 0 0; cursor: pointer; }
.ll-tabs button.ll-active { background: white; border-bottom-color: white; font-weight: 600; }
.ll-status { color: #6b7280; margin: 4px 0; }
.ll-pane { border: 1px solid #d1d5db; padding: 6px; max-height: 640px; overflow: auto; }
"""


class Workbench(anywidget.AnyWidget):
    """Every stage of ``comp`` for ``genome`` (default: the current genome) in one linked view."""

    _esm = _ESM
    _css = _CSS
    panes = traitlets.List(help="per stage: title, summary, SVG or CUDA listing, note, drawn node ids").tag(sync=True)
    selected = traitlets.Dict(help='the selected node: {"stage": ..., "id": ...}, or {}').tag(sync=True)
    highlighted = traitlets.Dict(help="stage -> ids: the selected node and its counterparts").tag(sync=True)
    cuda_lines = traitlets.Dict(help="CUDA kernel id -> source lines computing the selection").tag(sync=True)

    def __init__(self, comp: Compiled, genome: Genome | None = None, **kwargs: Any) -> None:
        self.provenance = Provenance.of(comp, genome)
        super().__init__(panes=[self._pane(name) for name in self.provenance.stages], **kwargs)

    def _pane(self, name: str) -> dict[str, Any]:
        stage = self.provenance.stages[name]
        pane: dict[str, Any] = {"stage": name, "title": TITLES.get(name, name),
                                "summary": self.provenance.envelopes[name]["summary"],
                                "targets": self.provenance.drawn(name), "svg": None, "note": ""}
        if isinstance(stage, CudaStage):
            pane["kernels"] = [{"id": cuda_id(k), "label": cuda_label(stage, k), "lines": k.source.splitlines()}
                               for k in stage.kernels]
        else:
            pane["svg"] = stage.to_svg()
            pane["note"] = "" if pane["svg"] else NO_PICTURE
        return pane

    @property
    def summaries(self) -> list[str]:
        """Each stage's summary line, in pipeline order."""
        return [pane["summary"] for pane in self.panes]

    def select(self, stage: str, node_id: str) -> dict[str, list[str]]:
        """Select ``node_id`` of ``stage`` as a click does; returns ``highlighted``. ``ValueError`` names an
        unknown stage or id."""
        self.provenance.counterparts(stage, node_id)  # raises for an unknown stage or id
        self.selected = {"stage": stage, "id": node_id}
        return self.highlighted

    @traitlets.observe("selected")
    def _on_selected(self, change: dict[str, Any]) -> None:
        selected = change["new"]
        highlighted, lines = self.provenance.highlight(selected["stage"], selected["id"]) if selected else ({}, {})
        with self.hold_sync():
            self.highlighted = highlighted
            self.cuda_lines = lines

    def __repr__(self) -> str:
        return "\n".join(("Workbench (click a node to see its counterparts):", *self.summaries))
