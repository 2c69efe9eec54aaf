"""``comp.workbench()``: one widget with a tab per stage, linked by provenance.

Each tab shows a stage's summary line and picture (the CUDA tab lists each kernel's source with
line numbers). Clicking a node in any picture sets ``selected`` (``{"stage": ..., "id": ...}``);
Python answers with ``highlighted`` (stage -> ids: the node and its counterparts, see
``luminal_lab.compiler.provenance``) and ``cuda_lines`` (CUDA kernel id -> the source lines that compute
them), which the view marks. ``select(stage, id)`` does the same as a click. Everything the view
shows from data is set as text; the pictures are Graphviz's SVG, parsed as XML.

The last tab, *Search*, is the program's search (``search``): the state of the search going on behind its calls
(``comp.search_state``: running, done, stopped or failed, each candidate as it is measured, the best) and its
history, the tuning records that this and earlier processes left for it. It follows a running search live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from ..codegen.cuda_stage import CudaStage
from ..codegen.cuda_view import label as cuda_label
from ..compiler.provenance import TITLES, Provenance
from ..core.errors import LuminalError
from ..core.ids import cuda_kernel_id as cuda_id
from .assets import NO_PICTURE, asset

if TYPE_CHECKING:
    from ..compiler.compiled import Compiled
    from ..llir.genome import Genome

class Workbench(anywidget.AnyWidget):
    """Every stage of ``comp`` for ``genome`` (default: the current genome) in one linked view."""

    _esm = asset("provenance.js", "workbench.js")
    _css = asset("provenance.css", "workbench.css")
    panes = traitlets.List(help="per stage: title, summary, SVG or CUDA listing, note, drawn node ids").tag(sync=True)
    selected = traitlets.Dict(help='the selected node: {"stage": ..., "id": ...}, or {}').tag(sync=True)
    highlighted = traitlets.Dict(help="stage -> ids: the selected node and its counterparts").tag(sync=True)
    cuda_lines = traitlets.Dict(help="CUDA kernel id -> source lines computing the selection").tag(sync=True)
    search = traitlets.Dict(help="the program's search: summary, candidates measured, history (tuning records)").tag(
        sync=True)

    def __init__(self, comp: Compiled, genome: Genome | None = None, **kwargs: Any) -> None:
        self.provenance = Provenance(comp.stages(genome))
        self.comp = comp
        super().__init__(panes=[self._pane(name) for name in self.provenance.stages], search=search_view(comp),
                         **kwargs)
        if comp.search_state is not None and comp.search_state.running:  # (one that ends meanwhile calls back at once)
            comp.search_state.watch(lambda _: self.refresh_search())

    def refresh_search(self) -> dict[str, Any]:
        """Read the program's search again (a running search's tab does so on each candidate); returns ``search``."""
        self.search = search_view(self.comp)
        return self.search

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
        return "\n".join(("Workbench (click a node to see its counterparts):", *self.summaries,
                          f"Search: {self.search['summary']}"))


def search_view(comp: Compiled) -> dict[str, Any]:
    """The search tab's data: a summary line, the candidates of the search behind the calls, and the history."""
    state = comp.search_state
    if state is None:
        summary, candidates = "no search behind this program's calls", []
    else:
        summary, candidates = repr(state).strip("<>"), state.rows()
    try:
        history = [{"hash": row["hash"], "device": row["device"], "outcome": row["outcome"],
                    "ms": None if row["seconds"] is None else row["seconds"] * 1e3, "machine": row["machine"]}
                   for row in comp.tuning_records()]
        note = f"{len(history)} tuning records for this program, from this process and earlier ones"
    except LuminalError as error:
        history, note = [], str(error)
    return {"summary": summary, "candidates": candidates, "history": history, "note": note}
