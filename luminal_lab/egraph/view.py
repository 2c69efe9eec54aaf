"""What the e-graph stage shows in a notebook: the summary line, the JSON envelope, the picture.

Summary (``text/plain``)::

    E-graph: 116 e-classes (15 IR), 139 e-nodes (17 subsumed) | rulesets expr, dtype_prop, early, kernel_lower,
    algebra, cleanup | 2 steps, last: round +9 e-nodes, 20 matches | step 1

JSON (see ``luminal_lab.core.stage`` for the envelope). Ids are egglog's: an e-class id is its sort
and number (``IR-72``), an e-node id ``function-N-Op``; both are stable for the same program
built and stepped the same way (an e-node id is egglog's row number, so it may name another
e-node after a later step). Stage-specific fields:

- e-class node: ``kind: "eclass"``, ``sort``, ``label`` (its e-nodes' names for an IR
  e-class, else a short term such as ``[4, 3]``), ``hlir`` (HLIR stage ids), ``dtype``,
  ``enodes`` (how many), ``group`` (its group folded by HLIR node, as the picture's
  ``fold="hlir"``; none for an e-class no IR e-class reaches); when the graph has a rolled layer
  (``eg.layer``, passed by ``Compiled``), ``layer``: whether all its HLIR nodes (at least one) are
  in that layer.
- e-node node: ``kind: "enode"``, ``op``, ``label``, ``literals``, ``eclass``, ``subsumed``,
  ``added_in_last_step``; an e-node of an IR e-class also has ``ir``: ``names`` (an ``Op``'s
  OpKind names, e.g. ``["KernelAdd"]``), ``inputs`` (the IR e-classes of its IList, in operand
  order) and ``new`` (the e-node or its OpKind e-node was added by the last step).
- edge: e-node -> the e-class of its child number ``index``.
- links: ``{"hlir": {e-class id: ["h5", ...]}}``.
- meta: ``counts``, ``rulesets``, ``status``, ``steps``, ``last_step`` (matches per rule that
  fired, e-node/e-class counts before and after, grown and merged e-classes; no timings, so
  the JSON is stable), ``capped`` when only IR e-classes are included (above
  ``MAX_JSON_ENODES`` e-nodes), ``overview`` when the picture shows part of the e-graph, and
  ``layer: {"copies": N}`` when the graph has a rolled layer.

Picture: the IR level. Each IR e-class is a cluster (SVG id = the e-class id) labelled with
its id, its HLIR nodes and dtype; each of its e-nodes a box (SVG id = the e-node id): an ``Op``
named by its OpKind (``KernelAdd``), ``Input``/``Output``/``OutputJoin`` plainly, with its
inputs in operand order under the name when there are several (so commuted alternatives
differ). An edge runs from an e-node to each IR e-class it reads (through its IList).
Expression, EList, View, DType, OpKind and IList e-classes are folded into the tooltips.
Subsumed e-nodes are dashed and grey; e-nodes the last step added have a red outline. SVG
classes: ``eclass`` (plus ``touched`` when it holds a new e-node, ``focus`` for ``around``,
``stub`` for an e-class that is read but not drawn) and ``enode`` (plus ``added``,
``subsumed``). E-graphs above ``MAX_IR_CLASSES`` IR e-classes or ``MAX_DRAWN_ENODES``
e-nodes get an overview: a table of IR e-nodes by op and the
neighbourhood of what the last step touched, capped, with a caption saying what is left out.
``eg.picture(around="IR-23", depth=2)`` draws the IR e-classes within two reads of one
e-class (any sort: a folded one is shown through the IR e-classes that use it).

Folded by HLIR node: ``eg.picture(fold="hlir")`` draws every IR e-class, grouped by the HLIR node
it came from (``hlir_groups``: an e-class's first, smallest, HLIR id; one with none, such as a
``FusionStart`` a fusion rule made, joins the group of the first e-class it reads that has one,
else of the first that reads it). Each group is one box: SVG id ``group-h5``, class ``group``
(plus ``touched`` as above), label ``h5 SumReduce axis=2 (matmul) · 5 e-classes`` over a line
with its e-node count and most common ops, tooltip listing its e-classes. The reads between two
groups are merged into one edge (id ``group-h3-group-h5``: group h5 reads group h3), class
``merged``, labelled ``×N`` when it stands for N > 1 reads; reads within a group are not drawn.
``eg.picture(fold="hlir", expand=["h5"])`` draws the named groups expanded: a cluster (SVG id
``group-h5``, class ``group expanded``, labelled like the box) holding the e-class clusters
drawn as above, with their e-node to e-class edges between expanded groups; a folded group's
reads of an expanded e-class are merged per e-class (id ``IR-72-group-h9``) and an expanded
e-node's reads of a folded group per e-node (id ``group-h3-function-12-Op``). ``fold`` takes
None or ``"hlir"``; ``expand`` (None, or a list of group ids of the picture) only with it, and
``fold`` not with ``around``; other values raise ``ArgumentError``.
"""

from __future__ import annotations

import html
from collections import Counter, deque
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import graphviz

from ..core.arguments import fail
from ..core.ids import hlir_id
from ..core.symbolic import EGGLOG_EXPR_OPS
from ..draw import EDGE_ATTR, GRAPH_ATTR, KIND_STYLE, NODE_ATTR, STUB_STYLE, Picture
from .egraph import EGraph
from .snapshot import ENode, Snapshot

MAX_IR_CLASSES = 150  # above this many IR e-classes the picture is an overview
MAX_DRAWN_ENODES = 400  # ... or above this many drawn e-nodes
FOCUS_CLASSES = 30  # most IR e-classes drawn in an overview or neighbourhood picture
FOCUS_ENODES = 120  # most e-nodes drawn in one
MAX_PER_CLASS = 12  # most e-nodes drawn in one e-class (new and live ones first)
TABLE_ROWS = 16  # rows of the overview's table
MAX_JSON_ENODES = 5000  # above this many e-nodes the JSON holds IR e-classes only
MAX_JSON_IR_ENODES = 10000  # and at most about this many of their e-nodes
TOOLTIP_CHARS = 600
LABEL_CHARS = 80

FOLDED_SORTS = "Expression, EList, View, DType, OpKind and IList"

CLUSTER_STYLE = {"style": "rounded", "color": "#9ca3af", "fontcolor": "#374151", "fontsize": "9", "margin": "6"}
TOUCHED_CLUSTER_STYLE = {"color": "#f87171", "fontcolor": "#b91c1c"}
FOCUS_STYLE = {"penwidth": "2.5", "style": "rounded,filled", "fillcolor": "#fffbeb"}
KERNEL_STYLE = {"fillcolor": "#ecfccb", "color": "#4d7c0f"}
FUSED_STYLE = {"fillcolor": "#f3e8ff", "color": "#7e22ce"}
ADDED_STYLE = {"color": "#dc2626", "penwidth": "2.4"}
SUBSUMED_STYLE = {"style": "rounded,filled,dashed", "fillcolor": "#f9fafb", "fontcolor": "#9ca3af",
                  "color": "#9ca3af"}
MORE_STYLE = {"shape": "plaintext", "style": "", "fontcolor": "#6b7280", "fontsize": "8"}
TABLE_STYLE = {"shape": "plaintext", "style": "", "margin": "0"}
GROUP_STYLE = {"shape": "box", "style": "rounded,filled", "fillcolor": "#f3f4f6", "color": "#4b5563",
               "fontsize": "10", "margin": "0.12,0.06"}
GROUP_CLUSTER_STYLE = {"style": "rounded,dashed", "color": "#4b5563", "fontcolor": "#111827", "fontsize": "10",
                       "margin": "10"}
MERGED_STYLE = {"fontsize": "8", "fontcolor": "#6b7280", "penwidth": "1.3"}
FOLDS = ("hlir",)


# ---- terms of folded e-classes -----------------------------------------------------------------
def _pick(nodes: list[ENode]) -> ENode | None:
    """The e-node that stands for its e-class in a term: the first live one, else the first."""
    return next((n for n in nodes if not n.subsumed), nodes[0] if nodes else None)


def term(snapshot: Snapshot, cid: str, depth: int = 5) -> str:
    """A short readable term for an e-class: ``[4, 3]``, ``(z*3)``, ``Strided([z, 0])``; IR e-classes by id."""
    eclass = snapshot.classes.get(cid)
    node = _pick(eclass.nodes) if eclass is not None else None
    if node is None or eclass.sort == "IR":
        return cid
    return node_term(snapshot, node, depth)


def node_term(snapshot: Snapshot, node: ENode, depth: int = 5) -> str:
    """A short readable term for one e-node, its children as in ``term``."""
    if depth <= 0:
        return "…"
    op, literals = node.op, [lit.strip('"') for lit in node.literals]
    if op in ("ECons", "ICons") and len(node.children) == 2:  # lists: the tail does not use up depth
        head, tail = term(snapshot, node.children[0], depth - 1), term(snapshot, node.children[1], depth)
        return f"[{head}]" if tail == "[]" else f"[{head}, {tail[1:]}" if tail.startswith("[") else f"[{head} | {tail}]"
    if op in ("ENil", "INil"):
        return "[]"
    if op in ("MNum", "MFloat", "MVar") and literals:
        return literals[0]
    if op == "MIter":
        return "z"
    parts = [*literals, *(term(snapshot, c, depth - 1) for c in node.children)]
    expression = EGGLOG_EXPR_OPS.get(op)
    if expression and expression.c and len(parts) == 2:
        return f"({parts[0]}{expression.c}{parts[1]})"
    name = expression.name if expression else op
    return f"{name}({', '.join(parts)})" if parts else name


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---- the IR level ------------------------------------------------------------------------------
@dataclass(frozen=True)
class IRNode:
    """An e-node of an IR e-class as drawn: its names, the IR e-classes it reads, and its state."""

    enode: ENode
    names: tuple[str, ...]  # an Op's OpKind e-node names; otherwise the op and its literals
    kinds: tuple[ENode, ...]  # an Op's OpKind e-nodes; empty for other e-nodes
    inputs: tuple[str, ...]  # IR e-classes read, in operand order
    new: bool  # the e-node (or an e-node of its OpKind e-class) was added by the last step
    several_lists: bool  # a link of its IList has several e-nodes (the inputs follow the first)

    @property
    def ops(self) -> tuple[str, ...]:
        """The names without values: an Op's OpKind ops, else the e-node's op."""
        return tuple(k.op for k in self.kinds) or (self.enode.op,)

    @property
    def label(self) -> str:
        """All names when there are at most three, else the first two and how many more."""
        if len(self.names) <= 3:
            return " | ".join(self.names)
        return f"{self.names[0]} | {self.names[1]} | +{len(self.names) - 2}"


class IRLevel:
    """The e-graph seen at the IR level: IR e-classes in HLIR order, their e-nodes with OpKind
    names and IList inputs resolved, and who reads whom."""

    def __init__(self, eg: EGraph) -> None:
        self.snapshot = snapshot = eg.snapshot
        self.added = frozenset(eg.history[-1].added_enodes) if eg.history else frozenset()
        order = {cid: k for k, cid in enumerate(snapshot.classes)}
        ir = [c for c in snapshot.classes.values() if c.sort == "IR"]
        ir.sort(key=lambda c: (c.hlir[0] if c.hlir else len(order), order[c.id]))
        self.classes: dict[str, list[IRNode]] = {c.id: [self._ir_node(n) for n in c.nodes] for c in ir}
        self.users: dict[str, list[str]] = {cid: [] for cid in self.classes}
        for cid, nodes in self.classes.items():
            for source in dict.fromkeys(s for n in nodes for s in n.inputs if s in self.users and s != cid):
                self.users[source].append(cid)

    def _ir_node(self, enode: ENode) -> IRNode:
        classes = self.snapshot.classes
        if enode.op != "Op" or len(enode.children) != 2:
            # an Input's number is its HLIR id, which the e-class label shows already
            literals = [lit for lit in enode.literals if enode.op != "Input" or lit.startswith('"')]
            names = (" ".join((enode.op, *(lit.strip('"') for lit in literals))),)
            inputs = tuple(c for c in enode.children if c in classes and classes[c].sort == "IR")
            return IRNode(enode, names, (), inputs, enode.id in self.added, False)
        kind, ilist = enode.children
        kinds = tuple(classes[kind].nodes) if kind in classes else ()
        names = tuple(self._kind_name(k) for k in kinds) or ("Op",)
        inputs, several = self._ilist(ilist)
        new = enode.id in self.added or any(k.id in self.added for k in kinds)
        return IRNode(enode, names, kinds, inputs, new, several)

    def _kind_name(self, kind: ENode) -> str:
        """An OpKind e-node's name; one without shapes or views (Constant, Iota) shows its values."""
        sorts = [self.snapshot.classes[c].sort for c in kind.children if c in self.snapshot.classes]
        if "EList" in sorts or "View" in sorts:
            return kind.op
        values = [term(self.snapshot, c, 3) for c, s in zip(kind.children, sorts) if s == "Expression"]
        return _clip(" ".join((kind.op, *values)), 40)

    def _ilist(self, cid: str) -> tuple[tuple[str, ...], bool]:
        """The IR e-classes of an IList chain, and whether any link of it has several e-nodes."""
        inputs: list[str] = []
        alternatives, seen = False, set()
        while cid in self.snapshot.classes and cid not in seen:
            seen.add(cid)
            nodes = self.snapshot.classes[cid].nodes
            alternatives |= len(nodes) > 1
            cons = _pick(nodes)
            if cons is None or len(cons.children) != 2:
                break
            inputs.append(cons.children[0])
            cid = cons.children[1]
        return tuple(inputs), alternatives

    @property
    def n_enodes(self) -> int:
        return sum(len(nodes) for nodes in self.classes.values())

    @property
    def n_drawn(self) -> int:
        """E-nodes a whole picture would draw."""
        return sum(min(len(nodes), MAX_PER_CLASS) for nodes in self.classes.values())

    @property
    def too_large(self) -> bool:
        return len(self.classes) > MAX_IR_CLASSES or self.n_drawn > MAX_DRAWN_ENODES

    @cached_property
    def touched(self) -> list[str]:
        """IR e-classes holding an e-node that is new at the IR level, in order."""
        return [cid for cid, nodes in self.classes.items() if any(n.new for n in nodes)]

    def owners(self, cid: str) -> list[str]:
        """The IR e-classes an e-class belongs to: itself, or the IR e-classes whose e-nodes use it."""
        if cid in self.classes:
            return [cid]
        self.snapshot.check(cid, "EGraph.picture")
        found, seen, queue = set(), {cid}, deque([cid])
        while queue:
            for parent in self.snapshot.classes[queue.popleft()].parents:
                if parent.eclass in self.classes:
                    found.add(parent.eclass)
                elif parent.eclass not in seen:
                    seen.add(parent.eclass)
                    queue.append(parent.eclass)
        return [c for c in self.classes if c in found]

    def neighbourhood(self, seeds: list[str], depth: int) -> list[str]:
        """IR e-classes within ``depth`` reads (either way) of each seed in turn, breadth first,
        until ``FOCUS_CLASSES`` e-classes or ``FOCUS_ENODES`` e-nodes are reached."""
        shown: set[str] = set()
        budget = FOCUS_ENODES
        for seed in seeds:
            queue = deque([(seed, 0)])
            while queue:
                cid, distance = queue.popleft()
                cost = min(len(self.classes[cid]), MAX_PER_CLASS)
                if cid in shown or (cost > budget and shown):
                    continue
                if len(shown) == FOCUS_CLASSES:
                    return [c for c in self.classes if c in shown]
                shown.add(cid)
                budget -= cost
                if distance < depth:
                    reads = [s for n in self.classes[cid] for s in n.inputs if s in self.classes]
                    queue.extend((c, distance + 1) for c in dict.fromkeys([*reads, *self.users[cid]]))
        return [c for c in self.classes if c in shown]

    def outputs(self) -> list[str]:
        """IR e-classes no other IR e-class reads (the root and what hangs off it)."""
        return [cid for cid, users in self.users.items() if not users]


# ---- summary -----------------------------------------------------------------------------------
def summary(eg: EGraph) -> str:
    """``E-graph: N e-classes (K IR), M e-nodes | rulesets ... | S steps, last: ... | status``."""
    snapshot = eg.snapshot
    n_ir = sum(c.sort == "IR" for c in snapshot.classes.values())
    subsumed = sum(n.subsumed for c in snapshot.classes.values() for n in c.nodes)
    head = f"E-graph: {snapshot.n_eclasses} e-classes ({n_ir} IR), {snapshot.n_enodes} e-nodes"
    if subsumed:
        head += f" ({subsumed} subsumed)"
    steps = f"{len(eg.history)} step{'' if len(eg.history) == 1 else 's'}"
    if eg.history:
        last = eg.history[-1]
        steps += (f", last: {last.label} {last.enodes_after - last.enodes_before:+d} e-nodes, "
                  f"{last.total_matches} matches")
    return " | ".join((head, "rulesets " + ", ".join(eg.rulesets), steps, eg.status))


# ---- JSON --------------------------------------------------------------------------------------
def to_json(eg: EGraph) -> dict[str, Any]:
    """The JSON envelope (see the module docstring)."""
    snapshot, ir = eg.snapshot, IRLevel(eg)
    included = list(snapshot.classes)
    capped: dict[str, Any] | None = None
    if snapshot.n_enodes > MAX_JSON_ENODES:
        included, total = [], 0
        for cid, nodes in ir.classes.items():
            if total >= MAX_JSON_IR_ENODES:
                break
            included.append(cid)
            total += len(nodes)
        capped = {
            "reason": f"{snapshot.n_enodes:,} e-nodes > {MAX_JSON_ENODES:,}",
            "included": f"IR e-classes only (in HLIR order, up to about {MAX_JSON_IR_ENODES:,} e-nodes)",
            "left_out_eclasses": snapshot.n_eclasses - len(included),
            "left_out_enodes": snapshot.n_enodes - total,
        }
    keep = set(included)
    group = _fold_keys(ir)
    layer = eg.layer[0] if eg.layer else None
    nodes: list[dict[str, Any]] = []
    enodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for cid in included:
        eclass = snapshot.classes[cid]
        drawn = {n.enode.id: n for n in ir.classes.get(cid, [])}
        names = dict.fromkeys(name for n in drawn.values() if not n.enode.subsumed for name in n.names)
        nodes.append({"id": cid, "kind": "eclass", "sort": eclass.sort,
                      "label": _clip(" | ".join(names) if drawn else term(snapshot, cid), LABEL_CHARS),
                      "hlir": [hlir_id(h) for h in eclass.hlir], "dtype": eclass.dtype, "enodes": len(eclass.nodes)})
        if cid in group:
            nodes[-1]["group"] = group[cid]
        if layer is not None:
            nodes[-1]["layer"] = bool(eclass.hlir) and all(h in layer for h in eclass.hlir)
        for node in eclass.nodes:
            entry: dict[str, Any] = {"id": node.id, "kind": "enode", "op": node.op, "label": node.label,
                                     "literals": list(node.literals), "eclass": cid, "subsumed": node.subsumed,
                                     "added_in_last_step": node.id in ir.added}
            if node.id in drawn:
                irn = drawn[node.id]
                entry["label"] = irn.label
                entry["ir"] = {"names": list(irn.names), "inputs": list(irn.inputs), "new": irn.new}
            enodes.append(entry)
            edges.extend({"id": f"{node.id}-{child}-{index}", "source": node.id, "target": child, "index": index}
                         for index, child in enumerate(node.children) if child in keep)
    links = {"hlir": {cid: [hlir_id(h) for h in snapshot.classes[cid].hlir]
                      for cid in included if snapshot.classes[cid].hlir}}
    meta: dict[str, Any] = {
        "counts": {"eclasses": snapshot.n_eclasses, "enodes": snapshot.n_enodes, "ir_eclasses": len(ir.classes),
                   "subsumed": sum(n.subsumed for c in snapshot.classes.values() for n in c.nodes),
                   "by_sort": dict(sorted(Counter(c.sort for c in snapshot.classes.values()).items()))},
        "rulesets": eg.rulesets,
        "status": eg.status,
        "steps": len(eg.history),
        "last_step": _last_step(eg),
        "capped": capped,
    }
    if eg.layer:
        meta["layer"] = {"copies": eg.layer[1]}
    if ir.too_large:
        shown = _overview(ir)[0]
        meta["overview"] = {"shown": shown, "left_out": len(ir.classes) - len(shown)}
    return eg.envelope([*nodes, *enodes], edges, links=links, meta=meta)


def _last_step(eg: EGraph) -> dict[str, Any] | None:
    if not eg.history:
        return None
    last = eg.history[-1]
    return {"index": last.index, "label": last.label, "total_matches": last.total_matches,
            "matches": dict(sorted(last.fired().items())), "enodes_before": last.enodes_before,
            "enodes_after": last.enodes_after, "eclasses_before": last.eclasses_before,
            "eclasses_after": last.eclasses_after, "added_enodes": len(last.added_enodes), "grown": last.grown,
            "merged": last.merged, "updated": last.updated,
            "stopped": str(last.stopped) if last.stopped else None}


# ---- picture -----------------------------------------------------------------------------------
def to_svg(eg: EGraph) -> str | None:
    """The stage picture as SVG, or ``None`` when Graphviz cannot draw it."""
    return picture(eg).to_svg()


def picture(eg: EGraph, around: str | None = None, depth: int = 2, fold: str | None = None,
            expand: Any = None) -> Picture:
    """The IR-level picture: all of it, an overview when it is too large, or with ``around`` (any
    e-class id) the IR e-classes within ``depth`` reads of it; with ``fold="hlir"`` every IR e-class,
    folded by the HLIR node it came from, the groups named in ``expand`` drawn expanded."""
    ir = IRLevel(eg)
    groups = _check_fold(ir, around, fold, expand)
    dot = graphviz.Digraph("egraph", graph_attr={**GRAPH_ATTR, "compound": "true", "ranksep": "0.35"},
                           node_attr=NODE_ATTR, edge_attr=EDGE_ATTR)
    step = f"after {eg.history[-1].label} #{eg.history[-1].index}" if eg.history else "as built"
    legend = (f"{FOLDED_SORTS} e-classes are folded into the tooltips. "
              "Red outline: new in the last step; dashed grey: subsumed.")
    if groups is not None:
        expanded = list(dict.fromkeys(expand or ()))
        caption = (f"E-graph {step}: IR e-classes folded by HLIR node; {len(groups)} groups of "
                   f"{len(ir.classes)} IR e-classes" + (f", {', '.join(expanded)} expanded" if expanded else ""))
        legend += " A box per HLIR node; the reads between two groups merged into one edge (×N: N reads)."
        dot.attr(label=f"{caption}\n{legend}", labelloc="t", fontsize="10")
        _draw_groups(dot, eg, ir, groups, set(expanded))
        return Picture(dot, caption, "e-graph")
    if around is not None:
        shown = ir.neighbourhood(ir.owners(around), depth)
        what = f"IR e-classes within {depth} reads of {around}"
    elif ir.too_large:
        shown, what = _overview(ir)
        _draw_table(dot, ir)
    else:
        shown, what = list(ir.classes), "all IR e-classes"
    left_out = len(ir.classes) - len(shown)
    caption = (f"E-graph {step}: {what}; {len(shown)} of {len(ir.classes)} IR e-classes drawn"
               + (f", {left_out} left out" if left_out else ""))
    dot.attr(label=f"{caption}\n{legend}", labelloc="t", fontsize="10")
    _draw(dot, ir, shown, focus=ir.owners(around) if around is not None else [])
    return Picture(dot, caption, "e-graph")


def hlir_groups(ir: IRLevel) -> dict[str, list[str]]:
    """The IR e-classes by the HLIR node they came from: HLIR id (``"h5"``) -> e-class ids, in HLIR order.

    An e-class goes to its first (smallest) HLIR node. One with none (a ``FusionStart`` a fusion rule made) goes to
    the group of the first e-class it reads that has one, else of the first that reads it, else is a group of its
    own named by its e-class id."""
    snapshot = ir.snapshot
    key = {cid: hlir_id(min(snapshot.classes[cid].hlir)) for cid in ir.classes if snapshot.classes[cid].hlir}
    changed = True
    while changed:  # what it reads, then what reads it, until nothing changes (a chain of new e-classes)
        changed = False
        for cid, nodes in ir.classes.items():
            if cid not in key:
                near = [*(s for n in nodes for s in n.inputs), *ir.users[cid]]
                found = next((key[c] for c in near if c in key), None)
                if found is not None:
                    key[cid] = found
                    changed = True
    for cid in ir.classes:
        key.setdefault(cid, cid)
    order = {h: k for k, h in enumerate(sorted({k for k in key.values() if k.startswith("h") and k[1:].isdigit()},
                                                key=lambda h: int(h[1:])))}
    groups: dict[str, list[str]] = {}
    for cid in sorted(ir.classes, key=lambda c: order.get(key[c], len(order))):
        groups.setdefault(key[cid], []).append(cid)
    return groups


def _fold_keys(ir: IRLevel) -> dict[str, str]:
    """E-class id -> its group when folded by HLIR node: an IR e-class's from ``hlir_groups``; any other e-class
    (expression, list, view) goes with the first IR e-class, in HLIR order, whose e-nodes reach it."""
    classes = ir.snapshot.classes
    key = {cid: group for group, cids in hlir_groups(ir).items() for cid in cids}
    for cid in list(key):
        todo = [c for n in classes[cid].nodes for c in n.children]
        while todo:
            child = todo.pop()
            if child not in key and child in classes:
                key[child] = key[cid]
                todo.extend(c for n in classes[child].nodes for c in n.children)
    return key


def _check_fold(ir: IRLevel, around: str | None, fold: Any, expand: Any) -> dict[str, list[str]] | None:
    """The groups to draw for ``fold`` (None when not folding), after checking ``fold`` and ``expand``."""
    where = "EGraph.picture"
    if fold is None:
        if expand is not None:
            fail(where, "expand", expand, 'None unless fold="hlir" (it names groups of a folded picture)')
        return None
    if not isinstance(fold, str) or fold not in FOLDS:
        fail(where, "fold", fold, 'None or "hlir" (fold the IR e-classes by the HLIR node they came from)')
    if around is not None:
        fail(where, "fold", fold, "None when around is given (a folded picture draws every group)")
    groups = hlir_groups(ir)
    if expand is None:
        return groups
    if isinstance(expand, str) or not isinstance(expand, (list, tuple, set, frozenset)) \
            or not all(isinstance(g, str) for g in expand):
        fail(where, "expand", expand, "a list of group ids (HLIR ids such as ['h5'])")
    unknown = [g for g in expand if g not in groups]
    if unknown:
        some = ", ".join(list(groups)[:8]) + (", …" if len(groups) > 8 else "")
        fail(where, "expand", expand, f"ids of this picture's groups; {', '.join(unknown)} is not one "
                                      f"(the groups are {some})")
    return groups


def _overview(ir: IRLevel) -> tuple[list[str], str]:
    """What an overview draws: the neighbourhood of what the last step touched, else of the outputs."""
    if ir.touched:
        what = f"the {len(ir.touched)} IR e-classes the last step touched and their neighbours"
        return ir.neighbourhood(ir.touched, 1), f"too large to draw whole; {what}, capped"
    return ir.neighbourhood(ir.outputs(), FOCUS_CLASSES), "too large to draw whole; the outputs and what they read"


def _draw_table(dot: graphviz.Digraph, ir: IRLevel) -> None:
    """A table of the IR e-nodes by op: how many, how many new, how many subsumed."""
    rows: dict[str, list[int]] = {}
    for nodes in ir.classes.values():
        for n in nodes:
            row = rows.setdefault(" | ".join(dict.fromkeys(n.ops)), [0, 0, 0])
            row[0] += 1
            row[1] += n.new
            row[2] += n.enode.subsumed
    ranked = sorted(rows.items(), key=lambda kv: (-kv[1][0], kv[0]))
    cells = "".join(f"<tr><td align='left'>{html.escape(name)}</td><td align='right'>{total}</td>"
                    f"<td align='right'>{new or ''}</td><td align='right'>{subsumed or ''}</td></tr>"
                    for name, (total, new, subsumed) in ranked[:TABLE_ROWS])
    if len(ranked) > TABLE_ROWS:
        cells += f"<tr><td colspan='4' align='left'>… {len(ranked) - TABLE_ROWS} more ops</td></tr>"
    label = (f"<<table border='0' cellborder='1' cellspacing='0' cellpadding='3' bgcolor='#f9fafb'>"
             f"<tr><td colspan='4'><b>{len(ir.classes)} IR e-classes, {ir.n_enodes} e-nodes</b></td></tr>"
             f"<tr><td align='left'><i>e-node</i></td><td><i>all</i></td><td><i>new</i></td>"
             f"<td><i>subsumed</i></td></tr>{cells}</table>>")
    dot.node("overview", label=label, id="overview", **TABLE_STYLE)


def _draw(dot: graphviz.Digraph, ir: IRLevel, shown: list[str], focus: list[str]) -> None:
    """Clusters for the shown IR e-classes (``focus`` ones bold), small stubs for the ones they read
    that are not shown."""
    heads: dict[str, str] = {}  # e-class -> the drawn node edges attach to
    edges: list[tuple[IRNode, int, str]] = []
    for cid in shown:
        _draw_class(dot, ir, cid, cid in focus, heads, edges)
    for n, index, source in edges:
        _draw_read(dot, heads, shown, n, index, source)


def _draw_class(dot: graphviz.Digraph, ir: IRLevel, cid: str, focus: bool, heads: dict[str, str],
                edges: list[tuple[IRNode, int, str]]) -> None:
    """One IR e-class as a cluster of its e-nodes; notes the node its edges attach to in ``heads`` and its
    e-nodes' reads in ``edges``."""
    snapshot = ir.snapshot
    eclass, nodes = snapshot.classes[cid], ir.classes[cid]
    kept = {n.enode.id for n in sorted(nodes, key=lambda n: (not n.new, n.enode.subsumed))[:MAX_PER_CLASS]}
    drawn = [n for n in nodes if n.enode.id in kept]  # in e-graph order
    touched = any(n.new for n in nodes)
    with dot.subgraph(name=f"cluster_{cid}") as box:
        hlir = ", ".join(hlir_id(h) for h in eclass.hlir[:6]) + (", …" if len(eclass.hlir) > 6 else "")
        parts = [hlir, eclass.dtype or "", f"{len(nodes)} e-nodes" if len(nodes) > 1 else ""]
        label = f"<<b>{html.escape(cid)}</b>" + "".join(f" · {html.escape(p)}" for p in parts if p) + ">"
        tooltip = f"{cid} ({eclass.sort}) HLIR {hlir or 'none'}, {len(nodes)} e-nodes"
        classes = " ".join(("eclass", *(["touched"] if touched else []), *(["focus"] if focus else [])))
        style = {**CLUSTER_STYLE, **(TOUCHED_CLUSTER_STYLE if touched else {}), **(FOCUS_STYLE if focus else {})}
        box.attr(label=label, id=cid, tooltip=tooltip, **{"class": classes}, **style)
        for n in drawn:
            _draw_enode(box, snapshot, n)
            edges.extend((n, index, source) for index, source in enumerate(n.inputs))
        if len(drawn) < len(nodes):
            box.node(f"{cid}.more", label=f"+{len(nodes) - len(drawn)} more e-nodes", id=f"{cid}.more",
                     **MORE_STYLE)
        heads[cid] = drawn[0].enode.id if drawn else f"{cid}.more"


def _draw_read(dot: graphviz.Digraph, heads: dict[str, str], shown: Any, n: IRNode, index: int, source: str) -> None:
    """The edge of e-node ``n`` reading e-class ``source`` as operand ``index`` (from a stub when not shown)."""
    if source not in heads:
        heads[source] = source
        dot.node(source, label=f"{source} …", id=source, tooltip=f"{source}: not drawn",
                 **{"class": "eclass stub"}, **STUB_STYLE)
    attrs = {"id": f"{n.enode.id}-{source}-{index}", "dir": "back",
             "tooltip": f"{n.enode.id} reads {source} as operand {index}"}
    if source in shown and source != n.enode.eclass:
        attrs["ltail"] = f"cluster_{source}"
    dot.edge(heads[source], n.enode.id, **attrs)


def _group_label(eg: EGraph, ir: IRLevel, key: str, cids: list[str]) -> tuple[str, str, str]:
    """A group's title (``h5 SumReduce axis=2 (matmul) · 6 e-classes``), its second line (e-nodes and their
    ops) and its tooltip."""
    hid = int(key[1:]) if key.startswith("h") and key[1:].isdigit() else None
    node = eg.graph.nodes[hid] if hid is not None else None  # a node's id is its index
    what = (_clip(node.label, 40) + (f" ({_clip(node.origin, 40)})" if node.origin else "")) if node is not None \
        else "no HLIR node"
    title = f"{key} {what} · {len(cids)} e-class{'' if len(cids) == 1 else 'es'}"
    enodes = [n for cid in cids for n in ir.classes[cid]]
    ops = Counter(name for n in enodes for name in dict.fromkeys(n.ops))
    names = ", ".join(op for op, _ in ops.most_common(3)) + (", …" if len(ops) > 3 else "")
    line = f"{len(enodes)} e-node{'' if len(enodes) == 1 else 's'}: {names}"
    tooltip = _clip(f"{title}: {', '.join(cids)}", TOOLTIP_CHARS)
    return title, line, tooltip


def _draw_groups(dot: graphviz.Digraph, eg: EGraph, ir: IRLevel, groups: dict[str, list[str]],
                 expanded: set[str]) -> None:
    """A folded picture: a box per group, a cluster of e-class clusters per expanded group, the reads between
    groups merged."""
    group_of = {cid: key for key, cids in groups.items() for cid in cids}
    heads: dict[str, str] = {}
    edges: list[tuple[IRNode, int, str]] = []
    for key, cids in groups.items():
        gid = f"group-{key}"
        title, line, tooltip = _group_label(eg, ir, key, cids)
        touched = any(n.new for cid in cids for n in ir.classes[cid])
        if key in expanded:
            with dot.subgraph(name=f"cluster_{gid}") as box:
                box.attr(label=f"<<b>{html.escape(key)}</b>{html.escape(title[len(key):])}>", id=gid,
                         tooltip=tooltip, **{"class": "group expanded" + (" touched" if touched else "")},
                         **GROUP_CLUSTER_STYLE)
                for cid in cids:
                    _draw_class(box, ir, cid, False, heads, edges)
        else:
            label = (f"<<b>{html.escape(key)}</b>{html.escape(title[len(key):])}"
                     f'<br/><font point-size="8" color="#6b7280">{html.escape(line)}</font>>')
            style = {**GROUP_STYLE, **(TOUCHED_CLUSTER_STYLE if touched else {})}
            dot.node(gid, label=label, id=gid, tooltip=tooltip, **{"class": "group" + (" touched" if touched else "")},
                     **style)
    # merged reads: (what is read: a group box or an expanded e-class, who reads: a group box or an e-node) -> reads
    merged: Counter[tuple[str, str]] = Counter()
    shown = {cid for key in expanded for cid in groups[key]}
    for n, index, source in edges:  # the e-nodes of expanded groups
        if group_of.get(source, "") in expanded or source not in group_of:
            _draw_read(dot, heads, shown, n, index, source)
        else:
            merged[(f"group-{group_of[source]}", n.enode.id)] += 1
    for key, cids in groups.items():
        if key in expanded:
            continue
        for source in (s for cid in cids for n in ir.classes[cid] for s in n.inputs):
            other = group_of.get(source)
            if other is not None and other != key:
                merged[(source if other in expanded else f"group-{other}", f"group-{key}")] += 1
    for (tail, head), count in merged.items():
        attrs = {"id": f"{tail}-{head}", "dir": "back", "class": "merged",
                 "tooltip": f"{head} reads {tail}: {count} read{'' if count == 1 else 's'}", **MERGED_STYLE}
        if count > 1:
            attrs["label"] = f"×{count}"
        if tail in heads:  # an e-class of an expanded group: the edge leaves its cluster
            attrs["ltail"] = f"cluster_{tail}"
        dot.edge(heads.get(tail, tail), head, **attrs)


def _draw_enode(dot: graphviz.Digraph, snapshot: Snapshot, n: IRNode) -> None:
    """One e-node box: coloured by kind, dashed when subsumed, outlined when new; the tooltip has
    the folded fields."""
    op = n.ops[0]
    style: dict[str, str] = {}
    if n.enode.op in ("Output", "OutputJoin"):
        style = KIND_STYLE["output"]
    elif n.enode.op == "Input":
        style = KIND_STYLE["input"]
    elif op.startswith("Kernel"):
        style = KERNEL_STYLE
    elif op.startswith("Fus"):
        style = FUSED_STYLE
    if n.enode.subsumed:
        style = {**style, **SUBSUMED_STYLE}
    if n.new:
        style = {**style, **ADDED_STYLE}
    classes = " ".join(("enode", *(["added"] if n.new else []), *(["subsumed"] if n.enode.subsumed else [])))
    terms = [node_term(snapshot, k, 6) for k in n.kinds] or [node_term(snapshot, n.enode, 6)]
    if n.several_lists:
        terms.append("(its IList has alternatives; the inputs follow the first)")
    state = (" (subsumed)" if n.enode.subsumed else "") + (" (new)" if n.new else "")
    tooltip = _clip("\n".join((f"{n.enode.id} in {n.enode.eclass}{state}", *terms)), TOOLTIP_CHARS)
    label = f"<{html.escape(n.label)}"
    if len(n.inputs) > 1:  # the operand order tells commuted alternatives apart
        label += f'<br/><font point-size="7" color="#6b7280">{html.escape(", ".join(n.inputs))}</font>'
    dot.node(n.enode.id, label=label + ">", id=n.enode.id, tooltip=graphviz.nohtml(tooltip.replace("\n", "\\n")),
             **{"class": classes}, **style)
