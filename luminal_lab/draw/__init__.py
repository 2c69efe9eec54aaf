"""What every stage's picture shares: Graphviz styles, sizes, rendering, and how a read is described.

Each stage's view draws with these, so the HLIR, e-graph, LLIR and regions pictures look alike:
the box and edge styles by kind, the sizes above which a picture is condensed, ``render`` (SVG
text to inline, or None when Graphviz's ``dot`` is missing or fails, with a warning), and the
description of a read through a shape tracker (``view_kinds``: padded, broadcast, permuted,
sliced, strided), used for edge labels and in the JSON of the HLIR, LLIR and regions stages.
``Picture`` is a drawing that is not a stage (part of the e-graph) but shows itself alike.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import graphviz

from ..core.dtypes import DType
from ..core.ops import Op
from ..core.shape_tracker import ONE, ShapeTracker, format_shape
from ..core.symbolic import Expr

MAX_BOXES = 120  # most boxes of ops in a condensed picture
MAX_BOUNDARY = 40  # inputs / weights / outputs drawn one by one in a condensed picture (per kind)
ORDERED_OPERANDS = (Op.MOD, Op.LESS_THAN, Op.GATHER, Op.SCATTER, Op.SCATTER_ADD)  # edge labels show the operand index

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
STUB_STYLE = {"shape": "plaintext", "style": "", "fontcolor": "#6b7280", "fontsize": "8"}  # a node read, not drawn
INDEX_STYLE = {"fillcolor": "#ede9fe"}
VIEW_EDGE_STYLE = {"style": "dashed", "color": "#c2410c", "fontcolor": "#9a3412"}
CONSTANT_EDGE_STYLE = {"style": "dashed", "color": "#9ca3af", "arrowsize": "0.4"}
CLUSTER_ATTR = {"style": "dotted,rounded", "color": "#6b7280", "fontcolor": "#4b5563", "fontsize": "9",
                "margin": "6"}
LAYER_ATTR = {"style": "rounded,filled", "color": "#7c3aed", "fillcolor": "#f5f3ff", "fontcolor": "#5b21b6",
              "fontsize": "11", "penwidth": "1.6", "margin": "10"}  # a rolled layer, drawn once for its copies


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


def within(reads: Iterable[tuple[int, int]], centre: int, depth: int) -> set[int]:
    """The ids within ``depth`` reads of ``centre``, either way, given the reads as ``(reader, source)`` pairs (what
    a focused picture draws)."""
    near: dict[int, list[int]] = defaultdict(list)
    for reader, source in reads:
        near[reader].append(source)
        near[source].append(reader)
    shown, frontier = {centre}, [centre]
    for _ in range(depth):
        frontier = [m for nid in frontier for m in near[nid] if m not in shown]
        shown.update(frontier)
    return shown


def digraph(name: str) -> graphviz.Digraph:
    """An empty picture in the shared style (top to bottom, rounded boxes, small labels)."""
    return graphviz.Digraph(name, graph_attr=GRAPH_ATTR, node_attr=NODE_ATTR, edge_attr=EDGE_ATTR)


def render(dot: graphviz.Digraph, what: str) -> str | None:
    """SVG text (without the XML prolog, so it can be inlined), or None when ``dot`` fails; ``what`` names the
    picture in the warning."""
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


# a picture's own output type, beside its SVG: JupyterLab's luminal-lab extension shows the SVG to pan, zoom and fit,
# with its tooltips (other front ends show the SVG as it is)
PICTURE_MIME = "application/vnd.luminal-lab.picture+json"
PICTURE_SCHEMA = 1


@dataclass
class Picture:
    """A picture that shows itself in a notebook: the caption as text, the SVG, and ``PICTURE_MIME`` (the caption and
    what it shows) for the extension; ``dot.source`` is the DOT text."""

    dot: graphviz.Digraph
    caption: str
    what: str  # what it shows, for the warning when it cannot be drawn

    def to_svg(self) -> str | None:
        """The SVG text, or ``None`` when Graphviz cannot draw it."""
        return render(self.dot, self.what)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": self.caption}
        svg = self.to_svg()
        if svg is not None:  # never wider than its output where a front end inlines the SVG (scaled down to fit)
            bundle["image/svg+xml"] = '<svg style="max-width:100%;height:auto"' + svg.removeprefix("<svg")
            bundle[PICTURE_MIME] = {"schema": PICTURE_SCHEMA, "caption": self.caption, "what": self.what}
        return bundle
