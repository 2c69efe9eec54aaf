"""``comp.report(path)``: every stage of a compiled program in one self-contained HTML file.

One section per stage (``section.ll-stage``, ``data-stage`` its name): the summary line, the
picture (Graphviz's SVG inline; the CUDA stage lists each kernel's source with line numbers; a
note where Graphviz could not draw) and the stage's JSON envelope in a ``<script
type="application/json" class="ll-envelope">``. A last JSON script (``#ll-provenance``) holds, for
every node of every stage, what selecting it highlights (``luminal_lab.compiler.provenance``), computed here;
a small inline script makes the nodes clickable and marks their counterparts and CUDA lines.
``#select=llir:k5`` in the address selects a node on load. The page uses no kernel, no network
and no outside file: opened from disk it works as written. The script sets ``data-ready="1"`` on
``<body>`` once it has run.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..codegen.cuda_stage import CudaStage
from ..codegen.cuda_view import label as cuda_label
from ..compiler.provenance import TITLES, Provenance
from ..core.arguments import writable
from ..core.ids import cuda_kernel_id as cuda_id
from .assets import NO_PICTURE, asset

if TYPE_CHECKING:
    from ..compiler.compiled import Compiled
    from ..llir.genome import Genome

def script_json(data: Any) -> str:
    """``data`` as JSON safe inside ``<script>``: ``<``, ``>`` and ``&`` are written as ``\\u`` escapes, so no
    label can close the tag."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _listing(stage: CudaStage) -> str:
    """Each CUDA kernel's title and source, one ``.ll-line`` span per line with its number."""
    blocks = []
    for kernel in stage.kernels:
        lines = "".join(f'<span class="ll-line" data-line="{n}"><span class="ll-lineno">{n}</span>'
                        f"{html.escape(text)}</span>" for n, text in enumerate(kernel.source.splitlines(), 1))
        title = html.escape(f"{cuda_label(stage, kernel)} ({cuda_id(kernel)}) · {stage.status(kernel)}")
        blocks.append(f'<div class="ll-kernel" data-node="{html.escape(cuda_id(kernel))}"><div>{title}</div>'
                      f'<pre class="ll-source">{lines}</pre></div>')
    return "".join(blocks)


def _section(provenance: Provenance, name: str) -> str:
    stage = provenance.stages[name]
    envelope = provenance.envelopes[name]
    if isinstance(stage, CudaStage):
        picture = _listing(stage)
    else:
        svg = stage.to_svg()
        picture = svg if svg is not None else f'<p class="ll-note">{html.escape(NO_PICTURE)}</p>'
    return (f'<section class="ll-stage" id="stage-{html.escape(name)}" data-stage="{html.escape(name)}">'
            f"<h2>{html.escape(TITLES.get(name, name))}</h2>"
            f'<p class="ll-summary">{html.escape(envelope["summary"])}</p>'
            f'<div class="ll-stage-picture">{picture}</div>'
            f'<script type="application/json" class="ll-envelope" data-stage="{html.escape(name)}">'
            f"{script_json(envelope)}</script></section>")


def selections(provenance: Provenance) -> dict[str, dict[str, dict[str, Any]]]:
    """Stage -> node id -> ``{"highlighted": ..., "cuda_lines": ...}`` (``Provenance.highlight``) for every node."""
    return {name: {node_id: dict(zip(("highlighted", "cuda_lines"), provenance.highlight(name, node_id), strict=True))
                   for node_id in provenance.ids(name)}
            for name in provenance.stages}


def write_report(comp: Compiled, path: str | Path, genome: Genome | None = None) -> Path:
    """Write every stage of ``comp`` for ``genome`` (default: the current genome) to the HTML file ``path``."""
    path = writable("Compiled.report", path)
    provenance = Provenance(comp.stages(genome))
    data = {"targets": {name: provenance.drawn(name) for name in provenance.stages},
            "selections": selections(provenance)}
    sections = "".join(_section(provenance, name) for name in provenance.stages)
    page = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>luminal_lab report</title>"
            f"<style>{asset('provenance.css', 'report.css')}</style></head><body>"
            "<h1>luminal_lab report</h1>"
            '<div class="ll-status">Click a node in any stage to highlight its counterparts in the others.</div>'
            f'{sections}<script type="application/json" id="ll-provenance">{script_json(data)}</script>'
            f"<script>{asset('provenance.js', 'report.js')}</script></body></html>\n")
    path.write_text(page, encoding="utf-8")
    return path
