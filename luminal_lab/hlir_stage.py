"""The HLIR stage object: what ``graph.hlir`` (and ``comp.hlir``) shows in a notebook.

Summary (``text/plain``)::

    HLIR: 7 nodes (Add 1, Constant 1, Input 2, ...) | inputs a[s, 1] f32, b[1, 4] f32 | outputs c[s, 4] f32

JSON (see ``luminal_lab.stage`` for the envelope). Node ids are ``"h{node.id}"``; node ids
are creation-order indices, so they are stable for the same build. Stage-specific fields:

- node: ``op``, ``label``, ``shape`` (list of strings), ``dtype``, ``origin`` (the high-level
  op or model line that made it, or null) and ``kind`` (input, weight, constant, output, op).
- edge: ``index`` (operand position), ``dtype`` and the view the target reads its operand
  through: ``shape``, ``strides`` and ``mask`` (one string per dimension, in ``z``),
  ``contiguous`` (reads the buffer in row-major order) and ``view`` (how it departs from
  that: any of padded, broadcast, permuted, sliced, strided).
- meta: ``inputs`` and ``outputs`` (name, id, shape, dtype; inputs also ``weight`` and
  ``live``), ``dead`` (nodes no output depends on), ``include_dead``, and ``condensed``
  (picture box id -> node ids) when the graph is too large to draw node by node.

Picture: one box per node, edges labelled with the shape and dtype read (dashed and named
when the read is a view), consecutive nodes of one high-level op (``origin``) in a dotted
cluster. Each SVG node's ``id`` is the stable node id and its ``class`` includes it too: a
scalar constant is drawn next to every op that reads it (the first drawing has the id, the
others ``h3.h12.1``-style ids), so that shared constants do not pull edges across the
picture. Edge ids are ``"{source}-{target}-{index}"``. Graphs above ``max_drawn`` nodes get
a condensed picture (one box per origin, or per stretch of nodes) that says so.
"""

from __future__ import annotations

import contextlib
import html
import math
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any

import graphviz

from .dtypes import DType
from .hlir import REDUCE_OPS, Graph, Node, Op
from .shape_tracker import ONE, ShapeTracker, format_shape
from .stage import Stage
from .symbolic import Expr

MAX_DRAWN_NODES = 400  # above this many nodes the picture is condensed
MAX_BOXES = 120  # most boxes of ops in a condensed picture
MAX_BOUNDARY = 40  # inputs / weights / outputs drawn one by one in a condensed picture (per kind)
ORDERED_OPERANDS = (Op.MOD, Op.LESS_THAN, Op.GATHER, Op.SCATTER)  # edge labels show the operand index

FONT = "Helvetica"
GRAPH_ATTR = {"rankdir": "TB", "fontname": FONT, "fontsize": "10", "ranksep": "0.3", "nodesep": "0.25",
              "labeljust": "l"}
NODE_ATTR = {"shape": "box", "style": "rounded,filled", "fontname": FONT, "fontsize": "10", "height": "0.3",
             "margin": "0.1,0.04", "fillcolor": "white", "color": "#4b5563"}
EDGE_ATTR = {"fontname": FONT, "fontsize": "8", "fontcolor": "#374151", "color": "#6b7280", "arrowsize": "0.6"}
KIND_STYLE = {
    "input": {"fillcolor": "#dbeafe", "color": "#1d4ed8"},
    "weight": {"fillcolor": "#fef3c7", "color": "#b45309"},
    "constant": {"fillcolor": "#f3f4f6", "color": "#9ca3af", "fontsize": "8", "width": "0.3", "height": "0.2",
                 "margin": "0.05,0.02"},
    "output": {"fillcolor": "#dcfce7", "color": "#15803d", "penwidth": "1.6"},
}
REDUCE_STYLE = {"fillcolor": "#ffedd5"}
INDEX_STYLE = {"fillcolor": "#ede9fe"}
VIEW_EDGE_STYLE = {"style": "dashed", "color": "#c2410c", "fontcolor": "#9a3412"}
CONSTANT_EDGE_STYLE = {"style": "dashed", "color": "#9ca3af", "arrowsize": "0.4"}
CLUSTER_ATTR = {"style": "dotted,rounded", "color": "#6b7280", "fontcolor": "#4b5563", "fontsize": "9",
                "margin": "6"}


def hlir_id(node: Node | int) -> str:
    """The stable id of an HLIR node in JSON, SVG and provenance links: ``"h{id}"``."""
    return f"h{node if isinstance(node, int) else node.id}"


def reads_row_major(tracker: ShapeTracker) -> bool:
    """True when the view reads its buffer in plain row-major order (size-1 dims ignored)."""
    if tracker.is_contiguous:
        return True
    return not tracker.is_masked and tracker.index_expr() == ShapeTracker.contiguous(tracker.dims).index_expr()


def view_kinds(tracker: ShapeTracker) -> list[str]:
    """How a read departs from row-major order: padded, broadcast, permuted, sliced (skips
    elements or starts at an offset), strided (overlapping windows, or not affine in ``z``).

    Empty for a row-major read. Symbolic strides are ordered by evaluating them with every
    dimension variable set to a large prime, which is enough for labelling.
    """
    if reads_row_major(tracker):
        return []
    kinds = ["padded"] if tracker.is_masked else []
    moving = [i for i, d in enumerate(tracker.dims) if d != 1]
    if any(not tracker.strides[i].has_z for i in moving):
        kinds.append("broadcast")
    linear = ShapeTracker(tracker.dims, tracker.strides, (ONE,) * tracker.rank).linear_strides()
    if linear is None:
        return [*kinds, "strided"]
    steps = [(_estimate(linear[i][0]), _estimate(tracker.dims[i])) for i in moving if linear[i][0] != 0]
    if any(step is None or size is None for step, size in steps):
        return kinds or ["strided"]
    if [s for s, _ in steps] != sorted((s for s, _ in steps), reverse=True):
        kinds.append("permuted")
    if not tracker.is_masked:  # padding shifts offsets and widens dims, so only unpadded reads are checked
        gaps = overlaps = False
        inner = 1
        for step, size in sorted(steps):
            gaps |= step > inner
            overlaps |= step < inner
            inner = step * size
        if gaps or any(off != 0 for _, off in linear):
            kinds.append("sliced")
        if overlaps:
            kinds.append("strided")
    return kinds or ["strided"]


def view_json(tracker: ShapeTracker) -> dict[str, Any]:
    """How an operand is read, for JSON: ``shape``, ``strides``, ``mask`` (strings), ``contiguous``, ``view``."""
    return {"shape": [str(d) for d in tracker.dims], "strides": [str(s) for s in tracker.strides],
            "mask": [str(m) for m in tracker.masks], "contiguous": reads_row_major(tracker),
            "view": view_kinds(tracker)}


def read_edge(tracker: ShapeTracker, dtype: DType, index: int | None = None) -> dict[str, Any]:
    """Graphviz attributes of an edge reading through ``tracker``: a label with ``#index`` (when
    given), shape and dtype, and for a view its kinds on a second line and the dashed view style."""
    label = f"{format_shape(tracker.dims)} {dtype.value}"
    if index is not None:
        label = f"#{index} {label}"
    kinds = view_kinds(tracker)
    if not kinds:
        return {"label": graphviz.nohtml(label)}
    return {"label": graphviz.nohtml(label + "\n" + ", ".join(kinds)), **VIEW_EDGE_STYLE}


def read_tooltip(source: str, target: str, index: int, tracker: ShapeTracker, dtype: DType) -> str:
    """An edge's tooltip: who reads whom as which operand, and the view's shape, strides and mask."""
    return graphviz.nohtml(f"{source} -> {target} operand {index}\\n{format_shape(tracker.dims)} {dtype.value}"
                           f"\\nstrides {format_shape(tracker.strides)}\\nmask {format_shape(tracker.masks)}")


def _estimate(expr: Expr) -> int | None:
    try:
        return int(expr.evaluate(dict.fromkeys(expr.variables(), 7919)))
    except (ZeroDivisionError, KeyError):
        return None


@dataclass
class _Box:
    """One box of a condensed picture: a run of nodes of one origin, or a stretch of nodes."""

    id: str
    title: str
    nodes: list[Node]

    def label(self) -> str:
        counts = Counter(n.op.value for n in self.nodes)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ops = ", ".join(f"{name} {count}" for name, count in top[:4]) + (", …" if len(top) > 4 else "")
        return (f'<<b>{html.escape(self.title)}</b><br/><font point-size="8">{len(self.nodes)} nodes: '
                f"{html.escape(ops)}</font>>")


class HLIRStage(Stage):
    """The HLIR of a ``Graph`` as a notebook object (summary, SVG picture, JSON).

    Shows the nodes some output depends on, or every node with ``include_dead=True``. The
    node list is taken when the stage is made; build a new stage after changing the graph.
    """

    name = "hlir"

    def __init__(self, graph: Graph, include_dead: bool = False, max_drawn: int = MAX_DRAWN_NODES) -> None:
        self.graph = graph
        self.include_dead = include_dead
        self.max_drawn = max_drawn
        live = graph.live_nodes()
        self.live_ids = {n.id for n in live}
        self.nodes: list[Node] = list(graph.nodes) if include_dead else live
        self.n_dead = len(graph.nodes) - len(live)
        self.inputs = list(graph.inputs.values())
        self.outputs = dict(graph.outputs)
        self._svg: str | None = None
        self._svg_done = False

    # ---- text ---------------------------------------------------------------------------
    def summary(self) -> str:
        counts = Counter(n.op.value for n in self.nodes)
        ops = ", ".join(f"{name} {counts[name]}" for name in sorted(counts))
        head = f"HLIR: {len(self.nodes)} nodes" + (f" ({ops})" if ops else "")
        if self.n_dead:
            head += f", {self.n_dead} dead" + ("" if self.include_dead else " hidden")
        parts = [head]
        user = [spec.node for spec in self.inputs if not spec.is_weight]
        parts.append("inputs " + (", ".join(_describe(n, n.arg) for n in user) or "none"))
        weights = len(self.inputs) - len(user)
        if weights:
            parts.append(f"weights {weights}")
        parts.append("outputs " + (", ".join(_describe(n, name) for name, n in self.outputs.items()) or "none"))
        return " | ".join(parts)

    def kind(self, node: Node) -> str:
        """input, weight, constant, output or op."""
        if node.op == Op.INPUT:
            return "weight" if self.graph.inputs[node.arg].is_weight else "input"
        if node.op == Op.CONSTANT:
            return "constant"
        if node.op == Op.OUTPUT:
            return "output"
        return "op"

    # ---- JSON ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        nodes = [{
            "id": hlir_id(n), "op": n.op.value, "label": n.label, "shape": [str(d) for d in n.shape],
            "dtype": n.dtype.value, "origin": n.origin, "kind": self.kind(n),
        } for n in self.nodes]
        edges = []
        for n in self.nodes:
            for index, (src, tracker) in enumerate(n.sources):
                edges.append({"id": _edge_id(src, n, index), "source": hlir_id(src), "target": hlir_id(n),
                              "index": index, "dtype": src.dtype.value, **view_json(tracker)})
        meta: dict[str, Any] = {
            "inputs": [{"name": s.name, "id": hlir_id(s.node), "shape": [str(d) for d in s.node.shape],
                        "dtype": s.node.dtype.value, "weight": s.is_weight, "live": s.node.id in self.live_ids}
                       for s in self.inputs],
            "outputs": [{"name": name, "id": hlir_id(n), "shape": [str(d) for d in n.shape], "dtype": n.dtype.value}
                        for name, n in self.outputs.items()],
            "dead": self.n_dead,
            "include_dead": self.include_dead,
        }
        if self.condensed:
            meta["condensed"] = {box.id: [hlir_id(n) for n in box.nodes] for box in self._boxes()[0]}
        return self.envelope(nodes, edges, meta=meta)

    # ---- picture ------------------------------------------------------------------------
    @property
    def condensed(self) -> bool:
        """Whether the picture shows boxes of nodes rather than every node."""
        return len(self.nodes) > self.max_drawn

    def to_svg(self) -> str | None:
        """The picture as SVG (rendered once, then cached); ``None`` when Graphviz cannot draw it."""
        if not self._svg_done:
            self._svg = _render(self.to_dot())
            self._svg_done = True
        return self._svg

    def to_dot(self) -> graphviz.Digraph:
        """The Graphviz graph behind the picture (``.source`` is the DOT text)."""
        return self._condensed_dot() if self.condensed else self._full_dot()

    def _full_dot(self) -> graphviz.Digraph:
        dot = _digraph()
        used = {src.id for n in self.nodes for src, _ in n.sources}
        # a scalar constant is drawn next to each op that reads it, so shared ones do not
        # pull long edges across the picture; the first copy carries the node's id
        drawn = [n for n in self.nodes if n.op != Op.CONSTANT or n.id not in used]
        named: set[int] = set()
        edges: list[tuple[str, Node, int, ShapeTracker]] = []
        for k, run in enumerate(_origin_runs(drawn)):
            clustered = run[0].origin is not None and len(run) > 1
            with dot.subgraph(name=f"cluster_{k}") if clustered else contextlib.nullcontext(dot) as box:
                if clustered:
                    box.attr(label=graphviz.nohtml(run[0].origin), id=f"origin{k}", **CLUSTER_ATTR)
                for n in run:
                    self._draw_node(box, n, show_origin=not clustered)
                    for index, (src, tracker) in enumerate(n.sources):
                        name = hlir_id(src)
                        if src.op == Op.CONSTANT:
                            if src.id in named:
                                name = f"{name}.{hlir_id(n)}.{index}"
                            named.add(src.id)
                            self._draw_node(box, src, show_origin=False, name=name)
                        edges.append((name, n, index, tracker))
        for name, n, index, tracker in edges:
            src = n.sources[index][0]
            attrs = {"id": _edge_id(src, n, index),
                     "tooltip": read_tooltip(hlir_id(src), hlir_id(n), index, tracker, src.dtype)}
            if src.op == Op.CONSTANT:
                attrs.update(CONSTANT_EDGE_STYLE)
            else:
                attrs.update(read_edge(tracker, src.dtype, index if n.op in ORDERED_OPERANDS else None))
            dot.edge(name, hlir_id(n), **attrs)
        return dot

    def _draw_node(self, dot: graphviz.Digraph, node: Node, show_origin: bool, name: str | None = None) -> None:
        """Draw ``node`` as ``name`` (its id unless it is a copy); every drawing has the node's id as class."""
        kind = self.kind(node)
        if kind == "constant":
            value = node.arg
            lines = [html.escape(f"{value:.6g}" if isinstance(value, float) else str(value))]
        else:
            lines = [f"<b>{html.escape(node.label)}</b>"]
        if kind in ("input", "weight", "output"):
            lines.append(f'<font point-size="8">{html.escape(_describe(node))}</font>')
        if show_origin and node.origin:
            lines.append(f'<font point-size="7" color="#6b7280">{html.escape(node.origin)}</font>')
        style = KIND_STYLE.get(kind, {})
        if node.op in REDUCE_OPS:
            style = REDUCE_STYLE
        elif node.op in (Op.GATHER, Op.SCATTER):
            style = INDEX_STYLE
        tooltip = f"{hlir_id(node)} {node.label}\\n{_describe(node)}" + (f"\\n{node.origin}" if node.origin else "")
        name = name or hlir_id(node)
        dot.node(name, label="<" + "<br/>".join(lines) + ">", id=name, tooltip=graphviz.nohtml(tooltip),
                 **{"class": hlir_id(node)}, **style)

    def _boxes(self) -> tuple[list[_Box], str]:
        """Boxes of ops in a condensed picture and how they were made (constants are left out)."""
        inner = [n for n in self.nodes if self.kind(n) == "op"]
        runs = _origin_runs(inner)
        if len(runs) <= MAX_BOXES:
            boxes = [_Box(f"g{k}", run[0].origin or "ops", run) for k, run in enumerate(runs)]
            return boxes, "one box per run of nodes of one origin"
        size = math.ceil(len(inner) / MAX_BOXES)
        chunks = [inner[i:i + size] for i in range(0, len(inner), size)]
        boxes = [_Box(f"g{k}", f"{hlir_id(c[0])} … {hlir_id(c[-1])}", c) for k, c in enumerate(chunks)]
        return boxes, f"one box per {size} nodes in order"

    def _condensed_dot(self) -> graphviz.Digraph:
        boxes, how = self._boxes()
        dot = _digraph()
        dot.attr(label=f"condensed: {len(self.nodes)} nodes (more than {self.max_drawn}); {how}; "
                       "scalar constants left out",
                 labelloc="t", fontsize="11")
        where: dict[int, str] = {}
        for box in boxes:
            dot.node(box.id, label=box.label(), id=box.id)
            where.update((n.id, box.id) for n in box.nodes)
        for kind in ("input", "weight", "output"):
            members = [n for n in self.nodes if self.kind(n) == kind]
            if len(members) <= MAX_BOUNDARY:
                for n in members:
                    self._draw_node(dot, n, show_origin=True)
                    where[n.id] = hlir_id(n)
            elif members:
                dot.node(f"{kind}s", label=f"{len(members)} {kind}s", id=f"{kind}s", **KIND_STYLE[kind])
                where.update((n.id, f"{kind}s") for n in members)
        flows = Counter((where[src.id], where[n.id]) for n in self.nodes for src, _ in n.sources
                        if src.id in where and where[src.id] != where[n.id])
        for (a, b), count in flows.items():
            dot.edge(a, b, label=f"×{count}" if count > 1 else None)
        return dot


def _digraph() -> graphviz.Digraph:
    return graphviz.Digraph("hlir", graph_attr=GRAPH_ATTR, node_attr=NODE_ATTR, edge_attr=EDGE_ATTR)


def _render(dot: graphviz.Digraph, what: str = "HLIR") -> str | None:
    """SVG text (without the XML prolog, so it can be inlined), or None when ``dot`` fails."""
    try:
        svg = dot.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        warnings.warn(f"Graphviz's `dot` is not installed; the {what} picture is left out", RuntimeWarning,
                      stacklevel=3)
        return None
    except graphviz.CalledProcessError as err:
        warnings.warn(f"Graphviz could not draw the {what}: {err}", RuntimeWarning, stacklevel=3)
        return None
    return svg[svg.find("<svg"):]


def _origin_runs(nodes: list[Node]) -> list[list[Node]]:
    """Consecutive nodes (in topological order) grouped by equal ``origin``."""
    runs: list[list[Node]] = []
    for n in nodes:
        if runs and runs[-1][0].origin == n.origin:
            runs[-1].append(n)
        else:
            runs.append([n])
    return runs


def _describe(node: Node, name: str = "") -> str:
    return f"{name}{format_shape(node.shape)} {node.dtype.value}"


def _edge_id(src: Node, dst: Node, index: int) -> str:
    return f"{hlir_id(src)}-{hlir_id(dst)}-{index}"
