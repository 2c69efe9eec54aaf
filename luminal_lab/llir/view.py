"""What the LLIR stage shows in a notebook: the summary line, the JSON envelope, the picture.

Summary (``text/plain``)::

    LLIR: 13 kernels (Add 1, Constant 1, Exp 1, Input 2, ...) | inputs x[4, 8] f32, w[8, 3] f32 |
    outputs [4, 3] f32 | genome 00735eee05b9e566 | not profiled

An LLIR with fused regions says how many after the kernel counts (``| 2 fused regions |``).
It says whether the LLIR is profiled but shows no timings, so it is identical across runs.

JSON (see ``luminal_lab.core.stage`` for the envelope). Kernel ids are ``"k{kernel.id}"``.
Stage-specific fields:

- node: ``op``, ``label``, ``kind`` (input, constant, output, op), ``shape`` (strings),
  ``dtype``, ``eclass``, ``hlir`` (HLIR stage ids) and, for a kernel with a measured time,
  ``seconds``.
- edge: ``index`` (operand position), ``dtype`` and the view the kernel reads its operand
  through, as the HLIR stage describes it (``shape``, ``strides``, ``mask``, ``contiguous``,
  ``view``).
- links: ``{"egraph": {"k3": ["IR-40"]}, "hlir": {"k3": ["h3"]}}``.
- meta: ``genome`` (hash, 16 hex digits), ``counts`` (kernels, edges, ops), ``inputs`` and
  ``outputs`` (kernel id, shape, dtype), ``profiled``, ``regions`` (one list of kernel ids per
  fused region, in the order of ``luminal_lab.llir.regions.find_regions``: its starts, fused ops and
  end by id), ``total_seconds`` when profiled, and ``condensed`` (picture box id -> kernel ids)
  when the picture is condensed.

Only a profiled LLIR's JSON varies from run to run (``seconds`` and ``total_seconds``).

Picture: one box per kernel (SVG id ``k{id}``, tooltip with its e-class and HLIR nodes),
labelled with op, id, shape and dtype, in the HLIR picture's style; edges labelled with the
shape and dtype read (dashed and named when the read is a view). A scalar constant is drawn
next to each kernel that reads it (later copies have ``k0.k6.1``-style ids, every copy has
the kernel id as class). Once ``llir.times`` is filled, each timed kernel shows its time and
share of the total and is shaded on a heat scale by its time (pale to red, red for the
slowest kernel); the caption gives the total and the scale. Each fused region is a cluster
(subgraph ``cluster_r{i}``, SVG id ``r{i}``, labelled ``region r0: Add, Sin, Sqrt``) holding its
``FusionStart``, ``Fused*`` and ``FusionEnd`` kernels; a kernel two regions share is drawn in the
first. LLIRs above ``MAX_DRAWN_KERNELS`` kernels get a condensed picture: one box per stretch of
kernels in order, shaded by the stretch's time (no region clusters; the caption counts them).
``llir.picture(around="k12", depth=2)`` draws, kernel by kernel at any size and every copy of a rolled layer, only
the kernels within two reads (either way, not through scalar constants) of one kernel, which has the SVG class
``focus``; a read from a kernel left out comes from a small dashed stub (class ``stub``).
"""

from __future__ import annotations

import html
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import graphviz

from ..core.arguments import fail
from ..core.ids import hlir_id, kernel_id, region_id
from ..core.ops import REDUCE_KERNELS
from ..core.shape_tracker import format_shape
from ..core.stage import MAX_DRAWN_NODES
from ..draw import (
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
from .llir import LLIR, Kernel
from .regions import Region, find_regions

MAX_DRAWN_KERNELS = MAX_DRAWN_NODES  # above this many kernels the picture is condensed
MAX_CLUSTERED_KERNELS = 120  # or above this many inside regions (Graphviz lays clusters out in superlinear time)
HEAT = ("#fffbeb", "#fde68a", "#fb923c", "#dc2626")  # heat scale stops, from no time to the largest share
DARK_FROM = 0.75  # on fills hotter than this the text is white
LEGEND_STEPS = 5  # cells of the heat scale in the caption
ORDERED_KERNELS = {op.value for op in ORDERED_OPERANDS}  # edge labels show the operand index
BOUNDARY_KINDS = ("input", "output")
MUTED = "#6b7280"
REGION_ATTR = {"style": "rounded,filled", "fillcolor": "#f5f3ff", "color": "#7c3aed", "fontcolor": "#5b21b6",
               "fontsize": "9", "margin": "8"}


def kind(kernel: Kernel) -> str:
    """input, constant, output or op."""
    return {"Input": "input", "Constant": "constant", "Output": "output"}.get(kernel.op, "op")


def format_seconds(seconds: float) -> str:
    """A duration with three significant digits in s, ms, µs or ns."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def heat(fraction: float) -> str:
    """The heat-scale colour of ``fraction`` (0..1, clipped) as ``#rrggbb``."""
    position = min(max(fraction, 0.0), 1.0) * (len(HEAT) - 1)
    low = min(int(position), len(HEAT) - 2)
    a, b = _rgb(HEAT[low]), _rgb(HEAT[low + 1])
    t = position - low
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def _describe(kernel: Kernel, name: str = "") -> str:
    return f"{name}{format_shape(kernel.shape)} {kernel.dtype.value}"


def _count_regions(n: int) -> str:
    return f"{n} fused region{'s' * (n != 1)}"


def _inputs(llir: LLIR) -> list[Kernel]:
    """Input kernels in the graph's order (by HLIR id), whatever order the genome put them in."""
    return sorted((k for k in llir.kernels if k.op == "Input"), key=lambda k: (k.hlir, str(k.arg)))


# ---- summary -----------------------------------------------------------------------------------
def summary(llir: LLIR) -> str:
    """``LLIR: N kernels (ops) | inputs ... | outputs ... | genome ... | profiled or not``."""
    counts = llir.op_counts()
    ops = ", ".join(f"{name} {counts[name]}" for name in sorted(counts))
    by_id = {k.id: k for k in llir.kernels}
    regions = find_regions(llir)
    parts = [
        f"LLIR: {len(llir.kernels)} kernels" + (f" ({ops})" if ops else ""),
        *([_count_regions(len(regions))] if regions else []),
        "inputs " + (", ".join(_describe(k, str(k.arg)) for k in _inputs(llir)) or "none"),
        "outputs " + (", ".join(_describe(by_id[o]) for o in llir.outputs) or "none"),
        f"genome {llir.genome_hash:016x}",
        "profiled" if llir.times else "not profiled",
    ]
    if llir.copies:
        per_copy = sum(k.copy == 0 for k in llir.kernels)
        parts.insert(-2, f"layer ×{llir.copies}: {per_copy} kernels per copy")
    return " | ".join(parts)


# ---- JSON --------------------------------------------------------------------------------------
def to_json(llir: LLIR) -> dict[str, Any]:
    """The JSON envelope (see the module docstring)."""
    by_id = {k.id: k for k in llir.kernels}
    nodes, edges = [], []
    for k in llir.kernels:
        node = {"id": kernel_id(k), "op": k.op, "label": k.label, "kind": kind(k),
                "shape": [str(d) for d in k.shape], "dtype": k.dtype.value, "eclass": k.eclass,
                "hlir": [hlir_id(h) for h in k.hlir]}
        if k.id in llir.times:
            node["seconds"] = llir.times[k.id]
        if k.copy is not None:
            node["copy"] = k.copy
        nodes.append(node)
        edges.extend({"id": _edge_id(src, k, index), "source": kernel_id(src), "target": kernel_id(k),
                      "index": index, "dtype": by_id[src].dtype.value, **view_json(tracker)}
                     for index, (src, tracker) in enumerate(k.sources))
    links = {"egraph": {kernel_id(k): [k.eclass] for k in llir.kernels if k.eclass},
             "hlir": {kernel_id(k): [hlir_id(h) for h in k.hlir] for k in llir.kernels if k.hlir}}
    meta: dict[str, Any] = {
        "genome": f"{llir.genome_hash:016x}",
        "counts": {"kernels": len(llir.kernels), "edges": len(edges), "ops": dict(sorted(llir.op_counts().items()))},
        "inputs": [{"name": k.arg, "id": kernel_id(k), "shape": [str(d) for d in k.shape], "dtype": k.dtype.value}
                   for k in _inputs(llir)],
        "outputs": [{"index": i, "id": kernel_id(o), "shape": [str(d) for d in by_id[o].shape],
                     "dtype": by_id[o].dtype.value} for i, o in enumerate(llir.outputs)],
        "profiled": bool(llir.times),
        "regions": [[kernel_id(kid) for kid in r.kernels()] for r in find_regions(llir)],
    }
    if llir.times:
        meta["total_seconds"] = _total(llir)
    if llir.copies:
        meta["layer"] = {"copies": llir.copies, "folded": llir.fold}
    if len(_drawn(llir)) > MAX_DRAWN_KERNELS:
        meta["condensed"] = {box.id: [kernel_id(k) for k in box.kernels] for box in _boxes(llir)[0]}
    return llir.envelope(nodes, edges, links=links, meta=meta)


def _edge_id(source: int, target: Kernel, index: int) -> str:
    return f"{kernel_id(source)}-{kernel_id(target)}-{index}"


def _total(llir: LLIR) -> float:
    """Seconds summed over the kernels that have a time."""
    return sum(llir.times[k.id] for k in llir.kernels if k.id in llir.times)


# ---- picture -----------------------------------------------------------------------------------
def to_svg(llir: LLIR) -> str | None:
    """The picture as SVG, or ``None`` when Graphviz cannot draw it."""
    return render(to_dot(llir), "LLIR")


def to_dot(llir: LLIR, regions: list[Region] | None = None) -> graphviz.Digraph:
    """The Graphviz graph behind the picture (``.source`` is the DOT text); ``regions`` are the
    LLIR's fused regions when already found."""
    regions = find_regions(llir) if regions is None else regions
    dot = digraph("llir")
    drawn = _drawn(llir)
    shown = [(i, region) for i, region in enumerate(regions) if region.end in drawn]
    clustered = sum(len(region.kernels()) for _, region in shown)
    if len(drawn) > MAX_DRAWN_KERNELS or clustered > MAX_CLUSTERED_KERNELS:
        _condensed(dot, llir, len(regions), clustered)
    else:
        _full(dot, llir, shown, len(regions))
    return dot


def picture(llir: LLIR, around: str | None, depth: int) -> Picture:
    """The picture, or with ``around`` (a kernel id such as ``"k12"``) the kernels within ``depth`` reads of it."""
    if around is None:
        return Picture(to_dot(llir), llir.summary(), "LLIR")
    by_id = {kernel_id(k): k for k in llir.kernels}
    if around not in by_id:
        fail("LLIR.picture", "around", around, f"the id of one of this LLIR's {len(by_id)} kernels "
             f"({', '.join(list(by_id)[:3])}, ...)")
    llir = llir.expand()  # scalar constants are not passed through
    shown = within(((k.id, src) for k in llir.kernels for src, _ in k.sources if llir.kernels[src].op != "Constant"),
                   by_id[around].id, depth)
    regions = find_regions(llir)
    dot = digraph("llir")
    note = f"the {len(shown)} within {depth} reads of {around} drawn"
    _full(dot, llir, [(i, r) for i, r in enumerate(regions) if r.end in shown], len(regions), shown, note)
    dot.node(around, penwidth="2.5", **{"class": f"focus {around}"})  # a second statement adds to its attributes
    return Picture(dot, f"LLIR of genome {llir.genome_hash:016x}: {len(llir.kernels)} kernels; {note}", "LLIR")


def _drawn(llir: LLIR, shown: set[int] | None = None) -> dict[int, Kernel]:
    """The kernels the picture draws, by id: all (or those in ``shown``), but for a folded layer's later copies."""
    return {k.id: k for k in llir.kernels if (not llir.fold or not k.copy) and (shown is None or k.id in shown)}


def _first_copy(llir: LLIR) -> dict[int, int]:
    """Kernel id -> the id of the kernel it repeats in a rolled layer's first copy (for later copies only)."""
    first = {k.eclass: k.id for k in llir.kernels if k.copy == 0}
    return {k.id: first[k.eclass] for k in llir.kernels if k.copy}


class _Heat:
    """Heat colours for the ``shaded`` times (of kernels or boxes; a fill is the time relative to the
    largest of them) and their shares of the LLIR's total."""

    def __init__(self, llir: LLIR, shaded: list[float]) -> None:
        self.total = _total(llir)
        self.largest = max(shaded, default=0.0)

    def fraction(self, seconds: float) -> float:
        return seconds / self.largest if self.largest > 0 else 0.0

    def style(self, seconds: float) -> dict[str, str]:
        fraction = self.fraction(seconds)
        return {"fillcolor": heat(fraction), **({"fontcolor": "white"} if fraction > DARK_FROM else {})}

    def line(self, seconds: float) -> str:
        """``12.3 µs · 9.1%``: the time and its share of the total."""
        share = seconds / self.total if self.total > 0 else 0.0
        return f"{format_seconds(seconds)} · {share:.1%}"


def _caption(dot: graphviz.Digraph, llir: LLIR, scale: _Heat | None, regions: int, note: str = "",
             unit: str = "kernel") -> None:
    """The caption: genome, kernels, fused regions (when any), the note, and for a profiled LLIR the
    total and the heat scale (of ``unit``s: kernels or boxes)."""
    head = f"LLIR of genome {llir.genome_hash:016x}: {len(llir.kernels)} kernels"
    rows = [head + (f", {_count_regions(regions)}" if regions else "") + (f"; {note}" if note else "")]
    legend = ""
    if scale is None:
        rows.append("not profiled")
    else:
        timed = sum(k.id in llir.times for k in llir.kernels)
        rows.append(f"total {format_seconds(scale.total)} over {timed} timed kernel{'s' * (timed != 1)}; "
                    f"fill: time relative to the slowest {unit}")
        cells = []
        for step in range(LEGEND_STEPS):
            fraction = step / (LEGEND_STEPS - 1)
            colour = ' color="white"' if fraction > DARK_FROM else ""
            cells.append(f'<td bgcolor="{heat(fraction)}" width="46"><font point-size="8"{colour}>'
                         f"{format_seconds(fraction * scale.largest) if step else 0}</font></td>")
        legend = (f'<tr><td align="left"><table align="left" border="0" cellspacing="1" cellpadding="2" '
                  f'fixedsize="true" width="{48 * LEGEND_STEPS}" height="16"><tr>{"".join(cells)}</tr></table>'
                  "</td></tr>")
    text = "".join(f'<tr><td align="left">{html.escape(row)}</td></tr>' for row in rows)
    dot.attr(label=f'<<table border="0" cellspacing="0" cellpadding="1">{text}{legend}</table>>',
             labelloc="t", labeljust="l", fontsize="10")


def _full(dot: graphviz.Digraph, llir: LLIR, regions: list[tuple[int, Region]], n_regions: int,
          shown: set[int] | None = None, note: str = "") -> None:
    """Every kernel (a folded layer's first copy), or those in ``shown`` with reads from the others drawn from stubs;
    ``regions`` are the drawn ones, with their index among all of them."""
    by_id = {k.id: k for k in llir.kernels}
    drawn = _drawn(llir, shown)
    first = _first_copy(llir) if llir.fold else {}
    scale = _Heat(llir, [llir.times[k.id] for k in llir.kernels if k.id in llir.times]) if llir.times else None
    folded = (f"layer ×{llir.copies}: its first copy drawn, the other {llir.copies - 1} run the same kernels "
              "(expand() draws them)") if first else ""
    _caption(dot, llir, scale, n_regions, note or folded)
    layer = graphviz.Digraph("cluster_layer")
    if first:
        layer.attr(label=f"layer ×{llir.copies}", id="layer", **LAYER_ATTR)
    clusters = [_cluster(llir, i, region) for i, region in regions]
    place: dict[int, graphviz.Digraph] = {k.id: layer for k in drawn.values() if first and k.copy == 0}
    for cluster, (_, region) in zip(clusters, regions):
        for kid in region.kernels():
            place[kid] = cluster if place.get(kid) in (None, layer) else place[kid]  # shared: in the first region
    used = {src for k in drawn.values() for src, _ in k.sources}
    named: set[int] = set()
    edges: list[tuple[str, Kernel, int]] = []
    for k in drawn.values():
        if k.op == "Constant" and k.id in used:
            continue  # drawn next to each kernel that reads it
        _draw_kernel(place.get(k.id, dot), llir, k, scale)
        for index, (src, _) in enumerate(k.sources):
            name = kernel_id(first.get(src, src))  # a read of a later copy is drawn from the first
            if by_id[src].op == "Constant":
                if src in named:
                    name = f"{name}.{kernel_id(k)}.{index}"
                named.add(src)
                _draw_kernel(dot, llir, by_id[src], scale, name)
            edges.append((name, k, index))
    for cluster, (_, region) in zip(clusters, regions):
        (layer if first and by_id[region.end].copy == 0 else dot).subgraph(cluster)
    if first:
        dot.subgraph(layer)
    stubs: set[str] = set()
    for name, k, index in edges:
        src, tracker = k.sources[index]
        source = by_id[src]
        if shown is not None and src not in shown and source.op != "Constant" and name not in stubs:
            stubs.add(name)
            dot.node(name, label=f"{name} {source.label}", id=name, tooltip=f"{name}: left out of this picture",
                     **{"class": f"stub {name}"}, **STUB_STYLE)
        attrs = {"id": _edge_id(src, k, index),
                 "tooltip": read_tooltip(kernel_id(src), kernel_id(k), index, tracker, source.dtype)}
        if source.op == "Constant":
            attrs.update(CONSTANT_EDGE_STYLE)
        else:
            attrs.update(read_edge(tracker, source.dtype, index if k.op in ORDERED_KERNELS else None))
        dot.edge(name, kernel_id(k), **attrs)


def _cluster(llir: LLIR, index: int, region: Region) -> graphviz.Digraph:
    """The empty cluster of a region, labelled ``region r0: Add, Sin, Sqrt``."""
    cluster = graphviz.Digraph(f"cluster_{region_id(index)}")
    label = f"region {region_id(index)}: {', '.join(region.op_names(llir))}"
    tooltip = (f"{label}\\n{len(region.starts)} starts, {len(region.ops)} fused ops, "
               f"end {kernel_id(region.end)}")
    cluster.attr(label=graphviz.nohtml(label), id=region_id(index), tooltip=graphviz.nohtml(tooltip), **REGION_ATTR)
    return cluster


def _draw_kernel(dot: graphviz.Digraph, llir: LLIR, k: Kernel, scale: _Heat | None, name: str | None = None) -> None:
    """Draw kernel ``k`` as ``name`` (its id unless it is a copy of a constant); the first drawing
    shows its time. Every drawing has the kernel id as class."""
    name = name or kernel_id(k)
    style = dict(KIND_STYLE.get(kind(k), {}))
    if k.op in REDUCE_KERNELS:
        style.update(REDUCE_STYLE)
    elif k.op in ("Gather", "Scatter", "ScatterAdd"):
        style.update(INDEX_STYLE)
    tooltip = [f"{kernel_id(k)} {k.label}", _describe(k), f"e-class {k.eclass or 'none'}",
               "HLIR " + (", ".join(hlir_id(h) for h in k.hlir) or "none")]
    timing = None
    if scale is not None and name == kernel_id(k) and k.id in llir.times:
        style.update(scale.style(llir.times[k.id]))
        timing = scale.line(llir.times[k.id])
        tooltip.append(f"{timing} of the total")
    if kind(k) == "constant":
        lines = [html.escape(f"{k.arg:.6g}" if isinstance(k.arg, float) else str(k.arg))]
    else:
        muted = "" if style.get("fontcolor") == "white" else f' color="{MUTED}"'
        lines = [f'<b>{html.escape(k.label)}</b> <font point-size="7"{muted}>{kernel_id(k)}</font>',
                 f'<font point-size="8">{html.escape(_describe(k))}</font>']
    if timing:
        lines.append(f'<font point-size="8">{html.escape(timing)}</font>')
    dot.node(name, label="<" + "<br/>".join(lines) + ">", id=name, tooltip=graphviz.nohtml("\\n".join(tooltip)),
             **{"class": kernel_id(k)}, **style)


@dataclass
class _Box:
    """One box of a condensed picture: a stretch of kernels in order."""

    id: str
    kernels: list[Kernel]

    def label(self, line: str | None) -> str:
        counts = Counter(k.op for k in self.kernels)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ops = ", ".join(f"{name} {count}" for name, count in top[:4]) + (", …" if len(top) > 4 else "")
        title = f"{kernel_id(self.kernels[0])} … {kernel_id(self.kernels[-1])}"
        label = (f"<<b>{html.escape(title)}</b><br/><font point-size=\"8\">{len(self.kernels)} kernels: "
                 f"{html.escape(ops)}</font>")
        return label + (f'<br/><font point-size="8">{html.escape(line)}</font>>' if line else ">")


def _boxes(llir: LLIR) -> tuple[list[_Box], str]:
    """The boxes of a condensed picture (op kernels only) and how they were made."""
    inner = [k for k in _drawn(llir).values() if kind(k) == "op"]
    size = max(math.ceil(len(inner) / MAX_BOXES), 1)
    boxes = [_Box(f"g{i}", inner[at:at + size]) for i, at in enumerate(range(0, len(inner), size))]
    return boxes, f"one box per {size} kernels in order"


def _condensed(dot: graphviz.Digraph, llir: LLIR, regions: int, clustered: int) -> None:
    boxes, how = _boxes(llir)
    seconds = {box.id: sum(llir.times.get(k.id, 0.0) for k in box.kernels) for box in boxes}
    scale = _Heat(llir, list(seconds.values())) if llir.times else None
    why = (f"more than {MAX_DRAWN_KERNELS}" if len(_drawn(llir)) > MAX_DRAWN_KERNELS
           else f"{clustered} kernels in regions, more than {MAX_CLUSTERED_KERNELS}")
    folded = f"; layer ×{llir.copies}: its first copy drawn" if llir.fold and llir.copies else ""
    _caption(dot, llir, scale, regions, f"condensed ({why}); {how}; constants left out{folded}", "box")
    where: dict[int, str] = {}
    for box in boxes:
        style = scale.style(seconds[box.id]) if scale else {}
        dot.node(box.id, label=box.label(scale.line(seconds[box.id]) if scale else None), id=box.id, **style)
        where.update((k.id, box.id) for k in box.kernels)
    for boundary in BOUNDARY_KINDS:
        members = [k for k in _drawn(llir).values() if kind(k) == boundary]
        if len(members) <= MAX_BOUNDARY:
            for k in members:
                _draw_kernel(dot, llir, k, scale)
                where[k.id] = kernel_id(k)
        elif members:
            dot.node(f"{boundary}s", label=f"{len(members)} {boundary}s", id=f"{boundary}s", **KIND_STYLE[boundary])
            where.update((k.id, f"{boundary}s") for k in members)
    first = _first_copy(llir) if llir.fold else {}
    reads = [(where.get(first.get(src, src)), where.get(k.id)) for k in llir.kernels for src, _ in k.sources]
    flows = Counter((a, b) for a, b in reads if a is not None and b is not None and a != b)
    for (a, b), count in flows.items():
        dot.edge(a, b, label=f"×{count}" if count > 1 else None)
