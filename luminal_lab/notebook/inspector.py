"""``eg.inspector()``: find an e-class and see what it holds, who uses it and where it came from.

Type in the search box an e-class id (or part of one, ``IR-1``), an op (``KernelAdd``: an IR
e-class matches by the OpKind names of its ``Op`` e-nodes too), an HLIR node (``h12``) or a sort
(``IList``); the list shows the matching e-classes, IR ones first, each with its ops in the compiler's terms
(``Snapshot.kind``: ``KernelMatmul``, ``FusedAdd``). For the selected e-class the widget shows its shape and dtype,
its e-nodes (each one's op as the compiler names it, the e-classes it reads, its raw constructor and literals,
whether the genome picks it, whether it is subsumed), its child e-classes, its parents (the e-nodes that use it and
their e-classes), the HLIR nodes it came from, its smallest term and a picture of its neighbourhood. The child and
parent e-class buttons, labelled with their e-class's op, select that e-class. The details always belong to one of
the listed matches: a search that no longer matches the selected e-class clears them.

``search``, ``select`` and ``refresh`` are what the controls call; ``matches``, ``selected`` and
``details`` (a plain dict) hold what the widget shows.
"""

from __future__ import annotations

import html
import re
import warnings
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..core.shape_tracker import format_shape
from ..egraph.snapshot import EClass

if TYPE_CHECKING:
    from ..egraph.egraph import EGraph, Picks

MAX_LISTED = 200  # most e-classes the list shows
MAX_BUTTONS = 24  # most child / parent e-class buttons
PICTURE_STYLE = "overflow:auto; max-height:480px; border:1px solid #e5e7eb; padding:4px"
_HLIR = re.compile(r"h(\d+)")


class EClassInspector(widgets.VBox):
    """A search box and a list of e-classes; the selected one's e-nodes, neighbours, HLIR nodes,
    genome pick, best term and picture."""

    def __init__(self, egraph: EGraph, genome: Picks | None = None) -> None:
        self.egraph = egraph
        self.genome = genome
        self.query = ""
        self.matches: list[str] = []
        self.selected: str | None = None
        self.details: dict[str, Any] = {}
        self.message = ""
        self.picture_svg: str | None = None
        self._listing = False  # set while the list's options are replaced, so its observer stays quiet

        self.search_box = widgets.Text(placeholder="e-class id, op, h12 or sort", description="search",
                                       continuous_update=False)
        self.refresh_button = widgets.Button(description="refresh", tooltip="read the e-graph again")
        self.eclass_list = widgets.Select(options=[], rows=12, layout=widgets.Layout(width="auto", min_width="340px"))
        self.message_view = widgets.HTML()
        self.details_view = widgets.HTML()
        self.children_box = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        self.parents_box = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        self.picture_view = widgets.HTML()

        self.search_box.observe(self._typed, names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.eclass_list.observe(self._listed, names="value")

        super().__init__([
            widgets.HBox([self.search_box, self.refresh_button]),
            self.message_view,
            widgets.HBox([self.eclass_list, widgets.VBox([
                self.details_view,
                widgets.HTML("<b>children</b>"), self.children_box,
                widgets.HTML("<b>parents</b>"), self.parents_box,
            ])]),
            self.picture_view,
        ])
        self.search("")

    # ---- searching --------------------------------------------------------------------------
    def search(self, text: str) -> list[str]:
        """The e-classes ``text`` matches (IR e-classes first), listed in the widget; all for ``""``."""
        self.query = text
        self.search_box.value = text  # its observer sees the query it already ran
        snapshot = self.egraph.snapshot
        query = text.strip().lower()
        found = [c for c in snapshot.classes.values() if self._matches(c, query)]
        found.sort(key=_order)
        self.matches = [c.id for c in found]
        listed = found[:MAX_LISTED]
        self._listing = True
        try:
            self.eclass_list.options = [(self._label(c), c.id) for c in listed]
            self.eclass_list.value = self.selected if self.selected in self.matches[:MAX_LISTED] else None
        finally:
            self._listing = False
        if self.selected is not None and self.selected not in self.matches:
            self._clear()  # the details belong to a listed match, or to none
        if not found:
            self._show_message(f"No e-class matches {text.strip()!r}.")
        elif len(found) > MAX_LISTED:
            self._show_message(f"{len(found)} e-classes match; the first {MAX_LISTED} are listed.")
        else:
            self._show_message("1 e-class matches." if len(found) == 1 else f"{len(found)} e-classes match.")
        return self.matches

    def _matches(self, eclass: EClass, query: str) -> bool:
        if not query:
            return True
        hlir = _HLIR.fullmatch(query)
        if hlir:
            return int(hlir.group(1)) in eclass.hlir
        return (query in eclass.id.lower() or query == eclass.sort.lower()
                or any(query in op.lower() for op in self._ops(eclass)))

    @staticmethod
    def _ops(eclass: EClass) -> list[str]:
        """The ops of an e-class's e-nodes in the compiler's terms, and their constructors (``Op``)."""
        return list(dict.fromkeys([*eclass.ops, *(n.op for n in eclass.nodes)]))

    @staticmethod
    def _label(eclass: EClass) -> str:
        """A list entry: the id, every op of its e-nodes, the HLIR nodes it came from (whole, never cut off)."""
        origin = f" · {', '.join(f'h{h}' for h in eclass.hlir)}" if eclass.hlir else ""
        return f"{eclass.id} · {' | '.join(eclass.ops)}{origin}"

    # ---- selecting --------------------------------------------------------------------------
    def select(self, cid: str) -> dict[str, Any]:
        """Show e-class ``cid`` and return its details; ``NoEClassError`` (a ``KeyError``) naming it when there is
        none."""
        snapshot = self.egraph.snapshot
        eclass = snapshot.classes[snapshot.check(cid, "EClassInspector.select")]
        graph = self.egraph.graph
        genome = self.current_genome()
        children = list(dict.fromkeys(c for n in eclass.nodes for c in n.children))
        parents = [{"enode": p.id, "op": p.op, "kind": snapshot.kind(p), "eclass": p.eclass} for p in eclass.parents]
        shapes = [graph.nodes[h].shape for h in eclass.hlir]
        self.selected = cid
        self.details = {
            "id": cid,
            "sort": eclass.sort,
            "dtype": eclass.dtype,
            "shape": format_shape(shapes[0]) if shapes else None,
            "enodes": [{"id": n.id, "kind": snapshot.kind(n), "reads": snapshot.operands(n), "op": n.op,
                        "literals": list(n.literals), "children": list(n.children), "subsumed": n.subsumed}
                       for n in eclass.nodes],
            "children": children,
            "parents": parents,
            "hlir": [{"id": f"h{h}", "op": graph.nodes[h].op.value, "label": graph.nodes[h].label}
                     for h in eclass.hlir],
            "picked": genome.choices.get(cid) if genome is not None else None,
            "best_term": snapshot.best_term(cid),
        }
        if self.eclass_list.value != cid and cid in self.matches[:MAX_LISTED]:
            self._listing = True
            try:
                self.eclass_list.value = cid
            finally:
                self._listing = False
        self._show_message(f"{cid} selected.")
        self._draw()
        return self.details

    def current_genome(self) -> Picks | None:
        """The genome whose picks are shown: the one given, else the e-graph's ``current_genome()`` once the
        e-graph has been run (before that there is nothing to pick from)."""
        if self.genome is None and self.egraph.current_genome is not None and self.egraph.history:
            return self.egraph.current_genome()
        return self.genome

    def refresh(self) -> None:
        """Read the e-graph again (after it stepped): the search again, the selected e-class again
        (or a message when a step merged it away)."""
        selected = self.selected
        self.search(self.query)
        if selected is not None:
            self._select_shown(selected)

    def _typed(self, change: dict[str, Any]) -> None:
        if change["new"] != self.query and len(self.search(change["new"])) == 1:
            self._select_shown(self.matches[0])  # one match: show it straight away

    def _listed(self, change: dict[str, Any]) -> None:
        if not self._listing and change["new"] is not None:
            self._select_shown(change["new"])

    def _select_shown(self, cid: str) -> None:
        """``select`` for the controls: an e-class that is gone is a message, not an exception."""
        try:
            self.select(cid)
        except KeyError:
            self._clear()
            self._show_message(f"There is no e-class {cid!r} in the e-graph now (a step may have merged it).")

    def _clear(self) -> None:
        """Nothing selected: the details, buttons and picture cleared."""
        self.selected, self.details, self.picture_svg = None, {}, None
        for view in (self.details_view, self.picture_view):
            view.value = ""
        self.children_box.children = self.parents_box.children = ()

    def _show_message(self, text: str) -> None:
        self.message = text
        self.message_view.value = f"<span style='color:#374151'>{html.escape(text)}</span>"

    # ---- drawing ----------------------------------------------------------------------------
    def _draw(self) -> None:
        d = self.details
        picked = d["picked"]
        classes = self.egraph.snapshot.classes
        value = " ".join(part for part in (d["shape"], d["dtype"]) if part)
        rows = "".join(
            f"<tr><td><b>{html.escape(n['kind'])}</b></td><td>{html.escape(value)}</td>"
            f"<td>{html.escape(', '.join(_named(classes, c) for c in n['reads']))}</td>"
            f"<td>{html.escape(n['id'])} ({html.escape(' '.join([n['op'], *n['literals']]))})</td>"
            f"<td>{'✔ picked' if n['id'] == picked else ''}{' subsumed' if n['subsumed'] else ''}</td></tr>"
            for n in d["enodes"])
        hlir = ", ".join(f"{h['id']} {h['label']}" for h in d["hlir"]) or "none"
        pick = (f"{picked} (✔)" if picked else "no genome yet" if self.current_genome() is None
                else "not one of the genome's choices")
        parents = "".join(f"<li>{html.escape(p['kind'])} ({html.escape(p['enode'])}) in {html.escape(p['eclass'])}</li>"
                          for p in d["parents"]) or "<li>none</li>"
        self.details_view.value = (
            f"<p><b>{html.escape(d['id'])}</b> · sort {html.escape(d['sort'])}"
            f"{' · ' + html.escape(value) if value else ''} · HLIR {html.escape(hlir)}</p>"
            f"<p>genome picks: {html.escape(pick)}</p>"
            f"<p>best term: <code>{html.escape(d['best_term'])}</code></p>"
            "<table class='ll-enodes'><thead><tr><th>op</th><th>shape</th><th>reads</th><th>e-node</th>"
            f"<th></th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p>used by</p><ul>{parents}</ul>")
        self.children_box.children = self._buttons(d["children"])
        self.parents_box.children = self._buttons(list(dict.fromkeys(p["eclass"] for p in d["parents"])))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.picture_svg = self.egraph.picture(around=d["id"], depth=1).to_svg()
        if self.picture_svg is None:
            why = str(caught[-1].message) if caught else "Graphviz could not draw the e-graph"
            self.picture_view.value = f"<p class='ll-no-picture'>No picture: {html.escape(why)}.</p>"
        else:
            self.picture_view.value = f"<div style='{PICTURE_STYLE}'>{self.picture_svg}</div>"

    def _buttons(self, cids: list[str]) -> tuple[widgets.Widget, ...]:
        """A button per e-class (selecting it), at most ``MAX_BUTTONS`` and a note of the rest."""
        buttons: list[widgets.Widget] = []
        classes = self.egraph.snapshot.classes
        for cid in cids[:MAX_BUTTONS]:
            button = widgets.Button(description=_named(classes, cid), tooltip=f"select {cid}",
                                    layout=widgets.Layout(width="auto"))
            button.on_click(lambda _, cid=cid: self._select_shown(cid))
            buttons.append(button)
        if len(cids) > MAX_BUTTONS:
            buttons.append(widgets.HTML(f"… {len(cids) - MAX_BUTTONS} more"))
        return tuple(buttons) if buttons else (widgets.HTML("none"),)


def _named(classes: dict[str, EClass], cid: str) -> str:
    """An e-class as a link shows it: its id and the op (or kind) of its first e-node."""
    eclass = classes.get(cid)
    return f"{cid} · {eclass.ops[0]}" if eclass is not None and eclass.ops else cid


def _order(eclass: EClass) -> tuple:
    """IR e-classes first, then by the first HLIR node, sort and number."""
    number = eclass.id.rsplit("-", 1)[-1]
    return (eclass.sort != "IR", eclass.hlir[0] if eclass.hlir else float("inf"), eclass.sort,
            int(number) if number.isdigit() else 0, eclass.id)
