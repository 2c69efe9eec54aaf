"""What the CUDA stage shows in a notebook: the summary line, the JSON envelope, the HTML listing.

Summary (``text/plain``)::

    CUDA: 3 kernels (1 fused region), 3 compiled to sm_90 PTX

followed by ``, N failed`` and ``, N not compiled`` (no compiler) when there are such kernels.
Showing it compiles every kernel (once; PTX is cached by source).

JSON (see ``luminal_lab.core.stage`` for the envelope). Kernel ids are ``"cu{id}"`` with the id of
the LLIR kernel it writes. Stage-specific fields:

- node: ``name`` (the CUDA function), ``source``, ``grid`` and ``block`` (numbers, or the
  expressions in the symbolic dims as text), ``dyn`` (the dims ``dyn`` holds, in order),
  ``reads`` (LLIR ids bound to ``in0, in1, ...``), ``writes`` (LLIR id bound to ``out``),
  ``fused`` and ``region`` (the fused ops in the order they run; empty for a plain kernel),
  ``compiled`` and ``status`` (``compiled (N lines of PTX)`` or the compiler's log).
- edge: one per buffer a kernel reads that another kernel writes: ``index`` (the ``in``
  position) and ``buffer`` (the LLIR id).
- links: ``{"llir": {"cu7": ["k1", "k3", "k4", "k5", "k7"]}}``, the LLIR kernels each kernel
  implements (a region's starts, fused ops and end).
- meta: ``arch``, ``block`` (threads per block of elementwise kernels) and ``counts``.

There is no picture (``to_svg`` is None); ``to_html`` lists each kernel's launch configuration
and compile status above its source, highlighted with Pygments when it is installed.
"""

from __future__ import annotations

import html
from typing import Any

from ..core.ids import cuda_kernel_id as kernel_id
from ..core.symbolic import Expr
from .cuda_c import BLOCK, CudaKernel
from .cuda_stage import CudaStage

OK_COLOUR, ERROR_COLOUR, MUTED = "#15803d", "#b91c1c", "#6b7280"


def label(stage: CudaStage, kernel: CudaKernel) -> str:
    """``k_add``, or ``k_region [Add, Sin, Sqrt]`` for a fused region."""
    ops = stage.region_ops(kernel)
    return f"{kernel.name} [{', '.join(ops)}]" if ops else kernel.name


def _counts(stage: CudaStage) -> dict[str, int]:
    compiled = [stage.compilation(k) for k in stage.kernels]
    return {"kernels": len(stage.kernels), "regions": sum(stage.region(k) is not None for k in stage.kernels),
            "compiled": sum(c.ok and not c.library for c in compiled),
            "library": sum(bool(c.library) for c in compiled), "failed": sum(c.failed for c in compiled),
            "not_compiled": sum(not c.ok and not c.failed for c in compiled)}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


# ---- summary -----------------------------------------------------------------------------------
def summary(stage: CudaStage) -> str:
    """``CUDA: N kernels (R fused regions), C compiled to <arch> PTX[, L library calls][, F failed][, U not
    compiled]``."""
    counts = _counts(stage)
    text = (f"CUDA: {_plural(counts['kernels'], 'kernel')} ({_plural(counts['regions'], 'fused region')}), "
            f"{counts['compiled']} compiled to {stage.arch} PTX")
    if counts["library"]:
        text += f", {counts['library']} library call{'s' * (counts['library'] != 1)}"
    if counts["failed"]:
        text += f", {counts['failed']} failed"
    if counts["not_compiled"]:
        text += f", {counts['not_compiled']} not compiled"
    return text


# ---- JSON --------------------------------------------------------------------------------------
def _plain(expr: Expr) -> int | str:
    return expr.value if expr.is_num else str(expr)


def to_json(stage: CudaStage) -> dict[str, Any]:
    """The JSON envelope (see the module docstring)."""
    writer = {k.writes: kernel_id(k) for k in stage.kernels}
    nodes, edges = [], []
    for k in stage.kernels:
        grid, block = stage.launch(k)
        compilation = stage.compilation(k)
        ops = stage.region_ops(k)
        nodes.append({"id": kernel_id(k), "label": label(stage, k), "name": k.name, "source": k.source,
                      "grid": _plain(grid), "block": _plain(block), "dyn": list(k.dyn),
                      "reads": [f"k{r}" for r in k.reads], "writes": f"k{k.writes}", "fused": bool(ops),
                      "region": ops, "compiled": compilation.ok, "status": compilation.status})
        edges.extend({"id": f"{writer[r]}-{kernel_id(k)}-{index}", "source": writer[r], "target": kernel_id(k),
                      "index": index, "buffer": f"k{r}"} for index, r in enumerate(k.reads) if r in writer)
    links = {"llir": {kernel_id(k): [f"k{i}" for i in stage.llir_kernels(k)] for k in stage.kernels}}
    meta = {"arch": stage.arch, "block": BLOCK, "counts": _counts(stage)}
    return stage.envelope(nodes, edges, links=links, meta=meta)


def to_svg(stage: CudaStage) -> str | None:
    """No picture: the stage is its listing (``to_html``)."""
    return None


# ---- HTML --------------------------------------------------------------------------------------
def highlight(source: str) -> str:
    """``source`` as HTML: CUDA highlighted with inline styles by Pygments, else an escaped ``<pre>``."""
    try:
        from pygments import highlight as pygmentize
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import CudaLexer
    except ImportError:
        return f'<pre style="margin:0">{html.escape(source)}</pre>'
    return pygmentize(source, CudaLexer(), HtmlFormatter(noclasses=True, nobackground=True))


def _kernel_html(stage: CudaStage, kernel: CudaKernel) -> str:
    grid, block = stage.launch(kernel)
    compilation = stage.compilation(kernel)
    reads = ", ".join(f"k{r}" for r in kernel.reads) or "nothing"
    facts = [f"grid {grid} × block {block}", f"reads {reads}", f"writes k{kernel.writes}"]
    if kernel.dyn:
        facts.append("dyn " + ", ".join(kernel.dyn))
    text = html.escape(compilation.status)
    status = (f'<div style="color:{OK_COLOUR}">{text}</div>' if compilation.ok
              else f'<pre style="color:{ERROR_COLOUR};white-space:pre-wrap;margin:2px 0">{text}</pre>')
    title = f'<b>{html.escape(label(stage, kernel))}</b> <span style="color:{MUTED}">{kernel_id(kernel)}</span>'
    return (f'<div id="{kernel_id(kernel)}" style="margin:8px 0;border-left:3px solid #d1d5db;padding-left:8px">'
            f'<div>{title}</div><div style="color:{MUTED}">{html.escape(" · ".join(facts))}</div>'
            f"{status}{highlight(kernel.source)}</div>")


def to_html(stage: CudaStage) -> str:
    """The summary, then each kernel's launch configuration, compile status and highlighted source."""
    kernels = "".join(_kernel_html(stage, k) for k in stage.kernels)
    return f'<div class="luminal-cuda"><div><b>{html.escape(summary(stage))}</b></div>{kernels}</div>'
