"""The notebooks the JupyterLab end-to-end test opens (see ``tests/extension/test_lab_e2e.py``).

Each one is written by executing its cells with nbclient (kernel ``python3``, this environment's
interpreter), so the stored outputs are exactly what a user's kernel produces; the kernel is shut
down afterwards, and the browser renders them from the saved JSON.

``stages.ipynb``
    A small fused program: one cell per stage (HLIR, e-graph, LLIR, regions, CUDA),
    ``comp.pipeline()`` and an e-graph picture (``PICTURE``). Its ``expected`` record lists each stage's
    node ids and labels, and the picture's caption and size.
``malicious.ipynb``
    Stage envelopes whose every string (labels, ids, summary, meta keys and values, field
    names, the stage name, edge fields, CUDA source, link names, the HLIR ids groups are
    folded by) is markup that would run script if a renderer ever parsed it as HTML; it is
    marked trusted (the worst case).
``large.ipynb``
    A real HLIR of at least ``LARGE_NODES`` nodes (a long elementwise chain).
``deep.ipynb``
    A 2-layer Llama (``transformers``, random weights, d=64, 16 tokens), rolled: its HLIR (the layer
    flagged), saturated e-graph and LLIR of the fused genome (one copy of the layer's kernels per layer).
``workbench.ipynb``
    Unexecuted: builds the small program and shows ``comp.workbench()``, the rule stepper, the
    e-class inspector and the genome profiler; the browser runs it with a live kernel.
"""

from __future__ import annotations

import json
import re
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat

STAGE_MIME = "application/vnd.luminal-lab.stage+json"
PICTURE_MIME = "application/vnd.luminal-lab.picture+json"
STAGES = ("hlir", "egraph", "llir", "regions", "cuda")
LARGE_NODES = 5000

# The small program every notebook compiles: a matmul, sin, mul and add, with the fused genome so
# the regions and CUDA stages have a fused region.
PROGRAM = textwrap.dedent("""\
    import luminal_lab as ll

    g = ll.Graph()
    a = g.tensor((4, 8), name="a")
    b = g.tensor((8, 3), name="b")
    c = g.tensor((4, 3), name="c")
    y = ((a @ b).sin() * c + c).output("y")
    comp = ll.compile(g)
    comp.egraph.saturate()
    comp.genome = comp.choice_space().fused_genome()
    assert comp.regions.to_json()["nodes"], "the fused genome made no region"
    """)

# the e-graph around the output's add, two reads deep: a picture wider than its output
PICTURE = ("add = comp.egraph.eclass_of(next(n for n in comp.egraph.graph.nodes if n.op == ll.Op.ADD))\n"
           "comp.egraph.picture(around=add.id, depth=2)")

# Strings that execute script (setting window.__pwned) or make a request off this machine if
# any of them is ever parsed as HTML or SVG markup, or used as a link target.
PAYLOADS = (
    '<script>window.__pwned=1</script>',
    '<img src="http://203.0.113.7/x.png" onerror="window.__pwned=2">',
    '<svg onload="window.__pwned=3"></svg>',
    'javascript:window.__pwned=4',
    '"><b class="ll-pwn">bold</b>',
    "'><iframe src=\"javascript:window.__pwned=5\"></iframe>",
    '</text><foreignObject><img src=x onerror="window.__pwned=6"></foreignObject>',
    '<style>*{background:url(http://203.0.113.7/css)}</style>',
    '{{constructor.constructor("window.__pwned=7")()}}',
    '&lt;script&gt;window.__pwned=8&lt;/script&gt;',
)

MALICIOUS = textwrap.dedent("""\
    from IPython.display import display

    MIME = "application/vnd.luminal-lab.stage+json"
    P = {payloads!r}

    def stage(name, prefix):
        ids = [f"{{prefix}}{{i}}{{p}}" for i, p in enumerate(P)]
        nodes = [{{"id": ids[i], "label": p, "op": p, p: p, "kind": p, "shape": [p], "dtype": p,
                  "source": "// " + p + "\\n" + p, "name": p, "eclass": ids[0], "href": p, "url": p,
                  "hlir": [P[i % 2]], "layer": True}}
                 for i, p in enumerate(P)]
        edges = [{{"id": p, "source": ids[i], "target": ids[i + 1], "label": p, p: p, "slot": p}}
                 for i, p in enumerate(P[:-1])]
        return {{"stage": name, "schema": 1, "summary": " ".join(P), "nodes": nodes, "edges": edges,
                "links": {{}}, "meta": {{p: p for p in P}} | {{"inputs": list(P), "outputs": list(P)}}}}

    def show(envelope):
        display({{MIME: envelope, "text/plain": "malicious " + envelope["stage"]}}, raw=True)
    """).format(payloads=PAYLOADS)

MALICIOUS_CELLS = (
    # payloads in every field of known stages
    'show(stage("hlir", "m"))',
    'cuda = stage("cuda", "c")\ncuda["links"] = {"hlir": {n["id"]: ["m0" + P[0]] for n in cuda["nodes"]}}\nshow(cuda)',
    # payloads as the stage name itself
    'show(stage(P[0], "s"))\nshow(stage(P[1], "t"))',
    # a pipeline whose stage names, links and line map are payloads
    textwrap.dedent("""\
        first, second = stage("hlir", "m"), stage("egraph", "e")
        second["links"] = {"hlir": {n["id"]: ["m0" + P[0], P[1]] for n in second["nodes"]}, P[2]: {P[3]: [P[4]]}}
        odd = stage(P[5], "o")
        odd["links"] = {"hlir": {"o0" + P[0]: [P[6]]}}
        links = {"counterparts": {"hlir": ["m0" + P[0], P[1]], P[5]: [P[6]]}, "lines": {P[0]: [1, 2]}}
        pipe = {"stage": "pipeline", "schema": 1, "summary": " ".join(P), "stages": [first, second, odd],
                "meta": {"cuda_lines": {P[0]: {P[1]: [1, 2]}}, P[2]: P[3],
                         "provenance": {"egraph": {n["id"]: links for n in second["nodes"]}}}}
        show(pipe)"""),
)

LARGE = textwrap.dedent("""\
    import luminal_lab as ll

    g = ll.Graph()
    x = g.tensor((4,), name="x")
    y = x
    for i in range({steps}):
        y = (y * 1.001).sin() if i % 2 else y + x
    y.output("y")
    big = ll.compile(g, rolling=False)  # rolled, the chain would be one copy of a stretch of it
    print("nodes:", len(big.hlir.to_json()["nodes"]))
    """)

DEEP = textwrap.dedent("""\
    import torch
    from transformers import LlamaConfig, LlamaModel

    import luminal_lab as ll

    SEQ = 16


    class Llama(torch.nn.Module):
        def __init__(self, layers: int):
            super().__init__()
            torch.manual_seed(0)
            config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                 num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=SEQ,
                                 use_cache=False)
            config._attn_implementation = "eager"
            self.model = LlamaModel(config).eval()

        def forward(self, input_ids):
            return self.model(input_ids=input_ids).last_hidden_state


    ids = torch.randint(0, 256, (1, SEQ), generator=torch.Generator().manual_seed(1))
    comp = ll.compile(Llama(2), (ids,))
    assert comp.rolling is not None and comp.rolling.copies == 2, comp.rolling
    comp.egraph.saturate()
    comp.genome = comp.choice_space().fused_genome()
    """)

WORKBENCH = (
    "workbench = comp.workbench()\nworkbench",
    "fresh = ll.compile(g)  # an e-graph not yet saturated, to step\nfresh.egraph.stepper()",
    "comp.egraph.inspector()",
    "comp.profiler(generations=1, generation_size=4)",
)


def _notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def _execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 120) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def stage_outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    """Every stage envelope stored in ``nb``'s outputs, in order."""
    return [out["data"][STAGE_MIME] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if STAGE_MIME in out.get("data", {})]


def picture_outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    """Every picture stored in ``nb``'s outputs, in order: its ``PICTURE_MIME`` data and the size its SVG is drawn
    at (``"width"`` and ``"height"``, Graphviz's points)."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else ():
            if PICTURE_MIME in out.get("data", {}):
                size = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', out["data"]["image/svg+xml"])
                found.append({**out["data"][PICTURE_MIME], "width": float(size[1]), "height": float(size[2])})
    return found


def _forget_kernel(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop the kernelspec and language so JupyterLab starts no kernel for a notebook only rendered from disk."""
    nb.metadata.pop("kernelspec", None)
    nb.metadata.pop("language_info", None)
    return nb


def write_notebooks(directory: Path) -> dict[str, Any]:
    """Write the five notebooks into ``directory``; returns what the tests expect of them: ``{"stages":
    [envelope per stage output], "malicious": [...], "large": [...], "deep": [...], "payloads": [...]}``."""
    directory.mkdir(parents=True, exist_ok=True)
    # the deep model (torch, transformers, a saturation) runs in a kernel of its own beside the others
    pool = ThreadPoolExecutor(1)
    deep_run = pool.submit(_execute, _notebook([DEEP, "comp.hlir", "comp.egraph", "comp.llir()"]), directory)
    stages = _execute(_notebook([PROGRAM, "comp.hlir", "comp.egraph", "comp.llir()", "comp.regions", "comp.cuda",
                                 "comp.pipeline()", PICTURE]), directory)
    malicious = _execute(_notebook([MALICIOUS, *MALICIOUS_CELLS]), directory)
    steps = 3400  # 1.5 HLIR nodes a step (the constant, the op): just over 5,000 nodes
    large = _execute(_notebook([LARGE.format(steps=steps), "big.hlir"]), directory)
    deep = deep_run.result()
    pool.shutdown()
    workbench = _notebook([PROGRAM, *WORKBENCH])
    for name, nb in (("stages", stages), ("malicious", malicious), ("large", large), ("deep", deep)):
        nbformat.write(_forget_kernel(nb), directory / f"{name}.ipynb")
    nbformat.write(workbench, directory / "workbench.ipynb")
    expected = {"stages": stage_outputs(stages), "picture": picture_outputs(stages),
                "malicious": stage_outputs(malicious), "large": stage_outputs(large), "deep": stage_outputs(deep),
                "payloads": list(PAYLOADS)}
    (directory / "expected.json").write_text(json.dumps(expected), encoding="utf-8")
    return expected


if __name__ == "__main__":  # python tests/helpers/lab_notebooks.py DIR: write them for a manual look
    import sys
    import time

    start = time.perf_counter()
    out = write_notebooks(Path(sys.argv[1]))
    print({k: [(e["stage"], len(e.get("nodes", e.get("stages", [])))) for e in v] if k != "payloads" else len(v)
           for k, v in out.items()}, f"{time.perf_counter() - start:.1f} s")
