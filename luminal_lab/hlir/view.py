"""What the HLIR stage (``graph.hlir``, ``comp.hlir``) shows in a notebook: summary line, JSON envelope, picture.

Summary (``text/plain``)::

    HLIR: 7 nodes (Add 1, Constant 1, Input 2, ...) | inputs a[s, 1] f32, b[1, 4] f32 | outputs c[s, 4] f32

A torch program with symbolic sizes adds where each comes from and the sizes torch specialised
(``| symbolic s77 = x[0], y[0], s86 = n | specialised x[1]=4``).

JSON (see ``luminal_lab.core.stage`` for the envelope). Node ids are ``"h{node.id}"``; node ids
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
``stage.picture(around="h12", depth=2)`` draws node by node, at any size, only the nodes within two reads (either
way, not through scalar constants) of one node, which has the SVG class ``focus``; a read from a node left out
comes from a small dashed stub (class ``stub``).
"""

from __future__ import annotations

import contextlib
import html
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import graphviz

from ..core.arguments import fail
from ..core.ids import hlir_id
from ..core.ops import REDUCE_OPS, Op
from ..core.shape_tracker import ShapeTracker, format_shape
from ..draw import (
    CLUSTER_ATTR,
    CONSTANT_EDGE_STYLE,
    INDEX_STYLE,
    KIND_STYLE,
    LAYER_ATTR,
    MAX_BOUNDARY,
    MAX_BOXES,
    ORDERED_OPERANDS,
    REDUCE_STYLE,
    STUB_STYLE,
    Picture,
    digraph,
    read_edge,
    read_tooltip,
    render,
    view_json,
    within,
)
from .graph import HLIRStage, Node


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


def summary(stage: HLIRStage) -> str:
    counts = Counter(n.op.value for n in stage.nodes)
    ops = ", ".join(f"{name} {counts[name]}" for name in sorted(counts))
    head = f"HLIR: {len(stage.nodes)} nodes" + (f" ({ops})" if ops else "")
    if stage.n_dead:
        head += f", {stage.n_dead} dead" + ("" if stage.include_dead else " hidden")
    parts = [head]
    user = [spec.node for spec in stage.inputs if not spec.is_weight]
    parts.append("inputs " + (", ".join(_describe(n, n.arg) for n in user) or "none"))
    weights = len(stage.inputs) - len(user)
    if weights:
        parts.append(f"weights {weights}")
    parts.append("outputs " + (", ".join(_describe(n, name) for name, n in stage.outputs.items()) or "none"))
    opaque = sorted({n.arg.name for n in stage.nodes if n.op == Op.OPAQUE})
    if opaque:
        parts.append("run by torch: " + ", ".join(opaque))
    if stage.layer:
        ids, copies = stage.layer
        parts.append(f"layer ×{copies} rolled: {sum(n.id in ids for n in stage.nodes)} nodes")
    parts.extend(_dims(stage))
    return " | ".join(parts)


def _dims(stage: HLIRStage) -> list[str]:
    """Where the symbolic dimensions come from (``symbolic s77 = x[0], y[0]``) and which sizes torch specialised."""
    graph = stage.graph
    found: dict[str, list[str]] = {}
    axes = [(dim, f"{spec.name}[{axis}]") for spec in stage.inputs if not spec.is_weight
            for axis, dim in enumerate(spec.node.shape)]
    for dim, where in [*axes, *((size, name) for name, size in graph.size_inputs.items())]:
        if dim.op == "var":
            found.setdefault(dim.args[0], []).append(where)
    parts = []
    if found and graph.dynamic:
        parts.append("symbolic " + ", ".join(f"{var} = {', '.join(where)}" for var, where in sorted(found.items())))
    if graph.specialised:
        parts.append("specialised " + ", ".join(f"{where}={size}" for where, size in graph.specialised.items()))
    return parts


def to_json(stage: HLIRStage) -> dict[str, Any]:
    nodes = [{
        "id": hlir_id(n), "op": n.op.value, "label": n.label, "shape": [str(d) for d in n.shape],
        "dtype": n.dtype.value, "origin": n.origin, "kind": stage.kind(n),
        **({"layer": n.id in stage.layer[0]} if stage.layer else {}),
    } for n in stage.nodes]
    edges = []
    for n in stage.nodes:
        for index, (src, tracker) in enumerate(n.sources):
            edges.append({"id": _edge_id(src, n, index), "source": hlir_id(src), "target": hlir_id(n),
                          "index": index, "dtype": src.dtype.value, **view_json(tracker)})
    meta: dict[str, Any] = {
        "inputs": [{"name": s.name, "id": hlir_id(s.node), "shape": [str(d) for d in s.node.shape],
                    "dtype": s.node.dtype.value, "weight": s.is_weight, "live": s.node.id in stage.live_ids}
                   for s in stage.inputs],
        "outputs": [{"name": name, "id": hlir_id(n), "shape": [str(d) for d in n.shape], "dtype": n.dtype.value}
                    for name, n in stage.outputs.items()],
        "dead": stage.n_dead,
        "include_dead": stage.include_dead,
    }
    if stage.layer:
        ids, copies = stage.layer
        meta["layer"] = {"copies": copies, "nodes": [hlir_id(n) for n in stage.nodes if n.id in ids]}
    if stage.condensed:
        meta["condensed"] = {box.id: [hlir_id(n) for n in box.nodes] for box in _boxes(stage)[0]}
    return stage.envelope(nodes, edges, meta=meta)


def to_svg(stage: HLIRStage) -> str | None:
    """The picture as SVG; ``None`` when Graphviz cannot draw it."""
    return render(to_dot(stage), "HLIR")


def picture(stage: HLIRStage, around: str | None, depth: int) -> Picture:
    """The picture, or with ``around`` (a node id such as ``"h12"``) the nodes within ``depth`` reads of it."""
    if around is None:
        return Picture(to_dot(stage), stage.summary(), "HLIR")
    ids = {hlir_id(n): n for n in stage.nodes}
    if around not in ids:
        fail("HLIRStage.picture", "around", around, f"the id of one of this stage's {len(ids)} nodes "
             f"({', '.join(itertools.islice(ids, 3))}, ...)")
    centre = ids[around]  # scalar constants are not passed through
    shown = within(((n.id, src.id) for n in stage.nodes for src, _ in n.sources if src.op != Op.CONSTANT),
                   centre.id, depth)
    caption = f"HLIR: the {len(shown)} nodes within {depth} reads of {around}, of {len(stage.nodes)}"
    dot = _full_dot(stage, shown, centre)
    dot.attr(label=caption, labelloc="t", fontsize="11")
    return Picture(dot, caption, "HLIR")


def to_dot(stage: HLIRStage) -> graphviz.Digraph:
    """The Graphviz graph behind the picture (``.source`` is the DOT text)."""
    return _condensed_dot(stage) if stage.condensed else _full_dot(stage)


def _full_dot(stage: HLIRStage, shown: set[int] | None = None, focus: Node | None = None) -> graphviz.Digraph:
    """Every node, or those in ``shown`` (reads from the others drawn from stubs), ``focus`` marked."""
    dot = digraph("hlir")
    used = {src.id for n in stage.nodes for src, _ in n.sources}
    # a scalar constant is drawn next to each op that reads it, so shared ones do not
    # pull long edges across the picture; the first copy carries the node's id
    drawn = [n for n in stage.nodes if (n.op != Op.CONSTANT or n.id not in used) and (shown is None or n.id in shown)]
    named: set[int] = set()
    edges: list[tuple[str, Node, int, ShapeTracker]] = []
    layer, copies = stage.layer or (frozenset(), 0)
    k = 0
    for in_layer, segment in itertools.groupby(_origin_runs(drawn, layer), key=lambda run: run[0].id in layer):
        with dot.subgraph(name="cluster_layer") if in_layer else contextlib.nullcontext(dot) as into:
            if in_layer:
                into.attr(label=f"layer ×{copies}: one copy, rolled (LoopIn / LoopOut mark what crosses its edge)",
                          id="layer", **LAYER_ATTR)
            for run in segment:
                _draw_run(stage, into, run, k, named, edges)
                k += 1
    stubs: set[int] = set()
    for name, n, index, tracker in edges:
        src = n.sources[index][0]
        if shown is not None and src.id not in shown and src.op != Op.CONSTANT and src.id not in stubs:
            stubs.add(src.id)
            dot.node(name, label=f"{name} {src.label}", id=name, tooltip=f"{name}: left out of this picture",
                     **{"class": f"stub {name}"}, **STUB_STYLE)
        attrs = {"id": _edge_id(src, n, index),
                 "tooltip": read_tooltip(hlir_id(src), hlir_id(n), index, tracker, src.dtype)}
        if src.op == Op.CONSTANT:
            attrs.update(CONSTANT_EDGE_STYLE)
        else:
            attrs.update(read_edge(tracker, src.dtype, index if n.op in ORDERED_OPERANDS else None))
        dot.edge(name, hlir_id(n), **attrs)
    if focus is not None:  # a second statement adds to the node's attributes
        dot.node(hlir_id(focus), penwidth="2.5", **{"class": f"focus {hlir_id(focus)}"})
    return dot


def _draw_run(stage: HLIRStage, dot: graphviz.Digraph, run: list[Node], k: int, named: set[int],
              edges: list[tuple[str, Node, int, ShapeTracker]]) -> None:
    """Draw a run of nodes of one origin (in a dotted cluster when it has one and several nodes), and note the edges
    into them (a constant is drawn beside each reader)."""
    clustered = run[0].origin is not None and len(run) > 1
    with dot.subgraph(name=f"cluster_{k}") if clustered else contextlib.nullcontext(dot) as box:
        if clustered:
            box.attr(label=graphviz.nohtml(run[0].origin), id=f"origin{k}", **CLUSTER_ATTR)
        for n in run:
            _draw_node(stage, box, n, show_origin=not clustered)
            for index, (src, tracker) in enumerate(n.sources):
                name = hlir_id(src)
                if src.op == Op.CONSTANT:
                    if src.id in named:
                        name = f"{name}.{hlir_id(n)}.{index}"
                    named.add(src.id)
                    _draw_node(stage, box, src, show_origin=False, name=name)
                edges.append((name, n, index, tracker))


def _draw_node(stage: HLIRStage, dot: graphviz.Digraph, node: Node, show_origin: bool, name: str | None = None) -> None:
    """Draw ``node`` as ``name`` (its id unless it is a copy); every drawing has the node's id as class."""
    kind = stage.kind(node)
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
    elif node.op in (Op.GATHER, Op.SCATTER, Op.SCATTER_ADD):
        style = INDEX_STYLE
    tooltip = f"{hlir_id(node)} {node.label}\\n{_describe(node)}" + (f"\\n{node.origin}" if node.origin else "")
    name = name or hlir_id(node)
    dot.node(name, label="<" + "<br/>".join(lines) + ">", id=name, tooltip=graphviz.nohtml(tooltip),
             **{"class": hlir_id(node)}, **style)

def _boxes(stage: HLIRStage) -> tuple[list[_Box], str]:
    """Boxes of ops in a condensed picture and how they were made (constants are left out)."""
    inner = [n for n in stage.nodes if stage.kind(n) == "op"]
    runs = _origin_runs(inner)
    if len(runs) <= MAX_BOXES:
        boxes = [_Box(f"g{k}", run[0].origin or "ops", run) for k, run in enumerate(runs)]
        return boxes, "one box per run of nodes of one origin"
    size = math.ceil(len(inner) / MAX_BOXES)
    chunks = [inner[i:i + size] for i in range(0, len(inner), size)]
    boxes = [_Box(f"g{k}", f"{hlir_id(c[0])} … {hlir_id(c[-1])}", c) for k, c in enumerate(chunks)]
    return boxes, f"one box per {size} nodes in order"

def _condensed_dot(stage: HLIRStage) -> graphviz.Digraph:
    boxes, how = _boxes(stage)
    dot = digraph("hlir")
    dot.attr(label=f"condensed: {len(stage.nodes)} nodes (more than {stage.max_drawn}); {how}; "
                   "scalar constants left out",
             labelloc="t", fontsize="11")
    where: dict[int, str] = {}
    for box in boxes:
        dot.node(box.id, label=box.label(), id=box.id)
        where.update((n.id, box.id) for n in box.nodes)
    for kind in ("input", "weight", "output"):
        members = [n for n in stage.nodes if stage.kind(n) == kind]
        if len(members) <= MAX_BOUNDARY:
            for n in members:
                _draw_node(stage, dot, n, show_origin=True)
                where[n.id] = hlir_id(n)
        elif members:
            dot.node(f"{kind}s", label=f"{len(members)} {kind}s", id=f"{kind}s", **KIND_STYLE[kind])
            where.update((n.id, f"{kind}s") for n in members)
    flows = Counter((where[src.id], where[n.id]) for n in stage.nodes for src, _ in n.sources
                    if src.id in where and where[src.id] != where[n.id])
    for (a, b), count in flows.items():
        dot.edge(a, b, label=f"×{count}" if count > 1 else None)
    return dot




def _origin_runs(nodes: list[Node], layer: frozenset[int] = frozenset()) -> list[list[Node]]:
    """Consecutive nodes (in topological order) grouped by equal ``origin`` (and by being in ``layer`` or not)."""
    runs: list[list[Node]] = []
    for n in nodes:
        if runs and runs[-1][0].origin == n.origin and (runs[-1][0].id in layer) == (n.id in layer):
            runs[-1].append(n)
        else:
            runs.append([n])
    return runs


def _describe(node: Node, name: str = "") -> str:
    return f"{name}{format_shape(node.shape)} {node.dtype.value}"


def _edge_id(src: Node, dst: Node, index: int) -> str:
    return f"{hlir_id(src)}-{hlir_id(dst)}-{index}"
