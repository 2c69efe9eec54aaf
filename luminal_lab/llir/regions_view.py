"""What the regions stage shows in a notebook: the summary line, the JSON envelope, the picture.

Summary (``text/plain``), with Luminal's ``33x [Sqrt, Recip] fused`` kernel counts::

    Regions: 2 fused regions over 12 of 18 kernels | 1x [Add, Sin, Sqrt] 2 starts,
    1x [Mul, Mul, Exp2] 3 starts | genome 3ade64c0a9cba12d

or ``Regions: no fused regions in 6 kernels | genome ...``. Regions of the same ops and number
of starts are counted together, most common first (then in region order); past
``MAX_SIGNATURES`` kinds the rest are counted (``… 4 more kinds``). "12 of 18 kernels" counts
the distinct kernels (starts, fused ops, ends) the regions hold. The line has no timings, so
it is identical across runs.

JSON (see ``luminal_lab.core.stage`` for the envelope). Region ids are ``"r{i}"`` in the order of
``luminal_lab.llir.regions.find_regions`` (by ``FusionEnd``); kernel ids are the LLIR stage's
``"k{id}"``. Stage-specific fields:

- node (one per region): ``label`` (``[Add, Sin, Sqrt]``), ``ops`` (op names, in the order the
  region computes them), ``op_kernels`` (the ``Fused*`` kernel ids, same order), ``starts`` (one
  per ``FusionStart``, by id: ``id``, ``source`` (the kernel it reads), ``dtype`` and the view it
  reads through as the HLIR stage describes it: ``shape``, ``strides``, ``mask``, ``contiguous``,
  ``view``), ``end`` (the ``FusionEnd`` kernel id), ``shape`` (strings) and ``dtype`` of the result.
- edge (region -> region, one per start of the target that reads the source's end): ``id``
  (``"r0-r1-k10"``), ``start`` (the reading ``FusionStart``), ``end`` (the source's ``FusionEnd``),
  ``dtype`` and the view fields above.
- links: ``{"llir": {"r0": ["k1", "k3", "k4", ...]}}``: every kernel of the region, by id.
- meta: ``genome`` (hash, 16 hex digits), ``counts`` (``regions``, ``kernels`` in regions,
  ``llir_kernels``, ``starts``, ``ops``, ``edges``) and ``signatures`` (``ops``, ``starts``,
  ``count``; in summary order).

Picture: the LLIR stage's picture of the same LLIR (see ``luminal_lab.llir.view``), in which
each region is a cluster ``cluster_r{i}`` labelled with its ops, holding its starts, fused
ops and end. LLIRs too big to draw kernel by kernel get the LLIR's condensed picture.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..core.ids import kernel_id, region_id
from ..draw import render, view_json
from .regions import Regions
from .view import to_dot

MAX_SIGNATURES = 8  # kinds of region named in the summary line


def _signatures(stage: Regions) -> list[tuple[tuple[str, ...], int, int]]:
    """``(ops, starts, count)`` per kind of region, most common first, then in region order."""
    counts = Counter((tuple(r.op_names(stage.llir)), len(r.starts)) for r in stage.regions)
    return [(ops, starts, count) for (ops, starts), count in sorted(counts.items(), key=lambda kv: -kv[1])]


def _covered(stage: Regions) -> int:
    """Distinct kernels the regions hold."""
    return len({kid for r in stage.regions for kid in r.kernels()})


# ---- summary -----------------------------------------------------------------------------------
def summary(stage: Regions) -> str:
    """``Regions: N fused regions over K of M kernels | 2x [Add, Sin] 2 starts, ... | genome ...``."""
    genome = f"genome {stage.llir.genome_hash:016x}"
    total = len(stage.llir.kernels)
    if not stage.regions:
        return f"Regions: no fused regions in {total} kernels | {genome}"
    n = len(stage.regions)
    kinds = [f"{count}x [{', '.join(ops)}] {starts} start{'s' * (starts != 1)}"
             for ops, starts, count in _signatures(stage)]
    if len(kinds) > MAX_SIGNATURES:
        more = len(kinds) - MAX_SIGNATURES
        kinds[MAX_SIGNATURES:] = [f"… {more} more kind{'s' * (more != 1)}"]
    head = f"Regions: {n} fused region{'s' * (n != 1)} over {_covered(stage)} of {total} kernels"
    return " | ".join((head, ", ".join(kinds), genome))


# ---- JSON --------------------------------------------------------------------------------------
def to_json(stage: Regions) -> dict[str, Any]:
    """The JSON envelope (see the module docstring)."""
    by_id = {k.id: k for k in stage.llir.kernels}
    owner = {r.end: region_id(i) for i, r in enumerate(stage.regions)}  # FusionEnd -> its region
    nodes, edges = [], []
    for i, region in enumerate(stage.regions):
        ops = region.op_names(stage.llir)
        end = by_id[region.end]
        starts = []
        for sid in region.starts:
            source, tracker = by_id[sid].sources[0]
            read = {"dtype": by_id[source].dtype.value, **view_json(tracker)}
            starts.append({"id": kernel_id(sid), "source": kernel_id(source), **read})
            if source in owner:
                edges.append({"id": f"{owner[source]}-{region_id(i)}-{kernel_id(sid)}", "source": owner[source],
                              "target": region_id(i), "start": kernel_id(sid), "end": kernel_id(source), **read})
        nodes.append({"id": region_id(i), "label": f"[{', '.join(ops)}]", "ops": ops,
                      "op_kernels": [kernel_id(o) for o in region.ops], "starts": starts,
                      "end": kernel_id(region.end), "shape": [str(d) for d in end.shape], "dtype": end.dtype.value})
    links = {"llir": {region_id(i): [kernel_id(kid) for kid in r.kernels()]
                      for i, r in enumerate(stage.regions)}}
    meta = {
        "genome": f"{stage.llir.genome_hash:016x}",
        "counts": {"regions": len(stage.regions), "kernels": _covered(stage), "llir_kernels": len(stage.llir.kernels),
                   "starts": len({s for r in stage.regions for s in r.starts}),
                   "ops": len({o for r in stage.regions for o in r.ops}), "edges": len(edges)},
        "signatures": [{"ops": list(ops), "starts": starts, "count": count}
                       for ops, starts, count in _signatures(stage)],
    }
    return stage.envelope(nodes, edges, links=links, meta=meta)


# ---- picture -----------------------------------------------------------------------------------
def to_svg(stage: Regions) -> str | None:
    """The LLIR picture with one cluster per region as SVG, or ``None`` when Graphviz cannot draw it."""
    return render(to_dot(stage.llir, stage.regions), "regions")
