"""Provenance across the pipeline: which nodes of the other stages correspond to a node of one stage.

Each stage's JSON envelope (see ``luminal_lab.core.stage``) has ``links``: ids of that stage mapped to
the ids they came from in another stage (an e-class to its HLIR nodes, an LLIR kernel to its
e-class and HLIR nodes, a region or a CUDA kernel to its LLIR kernels). ``Provenance`` reads a
link both ways and follows links transitively: the counterparts of a node in stage ``T`` are the
ids reached along every chain of links from the node to ``T`` that visits each stage at most once,
e.g. CUDA kernel -> LLIR kernels -> e-classes -> HLIR nodes, or HLIR node -> e-class -> LLIR
kernels -> region and CUDA kernel (and HLIR node -> LLIR kernels directly). An e-node of the
e-graph stands for its e-class.

The links are all there is. A ``Fused*`` e-class the fusion rules made holds the HLIR nodes of the
kernel op it mirrors (egglog's ``fused-origin``), so an HLIR node computed only inside a region
reaches its fused LLIR kernel, the region, the region's CUDA kernel and the line defining its local;
a region's ``FusionEnd`` keeps the HLIR node of its result, and a ``FusionStart`` (which only reads
its input) holds none. Through an HLIR node, a node also reaches every e-class computing it,
including the fused alternatives of regions the genome did not choose.

``Provenance.lines`` names the CUDA source lines behind a selection (``CudaStage.source_lines``, gathered in
``cuda_lines``). ``Provenance.table`` is every node's counterparts and lines, which the pipeline envelope carries
for the JupyterLab extension to read (it computes none). The browser half of the workbench widget and the HTML
report is ``luminal_lab/notebook/static/provenance.js``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ..codegen.cuda_stage import CudaStage
from ..core.errors import ArgumentError
from ..core.ids import cuda_kernel_id as cuda_id
from ..core.ids import kernel_id
from ..core.stage import SCHEMA_VERSION, Stage

STAGES = ("hlir", "egraph", "llir", "regions", "cuda")  # pipeline order
TITLES = {"hlir": "HLIR", "egraph": "E-graph", "llir": "LLIR", "regions": "Regions", "cuda": "CUDA"}
# the stages whose nodes a stage's picture draws: the LLIR picture clusters the regions, and the
# regions picture is the LLIR picture
DRAWN = {"llir": ("llir", "regions"), "regions": ("regions", "llir")}


class Pipeline(Stage):
    """Every stage of one compilation in one notebook output, for the JupyterLab extension.

    Its envelope is ``{"stage": "pipeline", "schema", "summary", "stages": [the stage envelopes in
    pipeline order], "meta": {"cuda_lines": {CUDA kernel id: {LLIR kernel id: [1-based lines]}},
    "provenance": Provenance.table()}}``: the extension highlights a node's counterparts in the other stages,
    and marks its lines in a CUDA kernel's source, as ``provenance`` says.
    """

    name = "pipeline"

    def __init__(self, stages: Mapping[str, Stage]) -> None:
        self.stages = dict(stages)

    def summary(self) -> str:
        return "\n".join(stage.summary() for stage in self.stages.values())

    def to_json(self) -> dict[str, Any]:
        provenance = Provenance(self.stages)
        return {"stage": self.name, "schema": SCHEMA_VERSION, "summary": self.summary(),
                "stages": list(provenance.envelopes.values()),
                "meta": {"cuda_lines": provenance.cuda_lines, "provenance": provenance.table()}}


class Provenance:
    """The cross-stage map of one pipeline's ``stages`` (by name), read from their envelopes' links."""

    def __init__(self, stages: Mapping[str, Stage]) -> None:
        self.stages = dict(stages)
        self.envelopes = {name: stage.to_json() for name, stage in self.stages.items()}
        self._order = {name: {node["id"]: i for i, node in enumerate(envelope["nodes"])}
                       for name, envelope in self.envelopes.items()}
        self._eclass_of = {node["id"]: node["eclass"] for node in self.envelopes.get("egraph", {}).get("nodes", [])
                           if node.get("kind") == "enode"}
        # stage -> other stage -> id -> linked ids there, both directions of every link
        links: dict[str, dict[str, dict[str, set[str]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(set)))
        for source, envelope in self.envelopes.items():
            for target, mapping in envelope["links"].items():
                if target not in self.stages:
                    continue
                for sid, tids in mapping.items():
                    for tid in tids:
                        links[source][target][sid].add(tid)
                        links[target][source][tid].add(sid)
        self._links = links
        cuda = self.stages.get("cuda")
        # CUDA kernel id -> LLIR kernel id -> the lines of its source computing that LLIR kernel (none left out)
        self.cuda_lines: dict[str, dict[str, list[int]]] = {
            cuda_id(kernel): {kernel_id(k): lines for k in cuda.llir_kernels(kernel)
                              if (lines := cuda.source_lines(kernel, k))}
            for kernel in cuda.kernels} if isinstance(cuda, CudaStage) else {}

    def ids(self, stage: str) -> list[str]:
        """The node ids of ``stage``, in its envelope's order; ``ValueError`` for an unknown stage."""
        return list(self._nodes(stage))

    def _nodes(self, stage: str) -> dict[str, int]:
        if stage not in self._order:
            raise ArgumentError(f"unknown stage {stage!r}; the stages are {', '.join(self.stages)}")
        return self._order[stage]

    def drawn(self, stage: str) -> dict[str, str]:
        """Node id -> its stage, for every node ``stage``'s picture (or listing) draws."""
        self._nodes(stage)  # raises for an unknown stage
        return {node_id: name for name in DRAWN.get(stage, (stage,)) for node_id in self._order.get(name, ())}

    def counterparts(self, stage: str, node_id: str) -> dict[str, list[str]]:
        """For each other stage (pipeline order), the ids that correspond to ``node_id`` of ``stage`` (in that
        stage's order; empty when none). ``ValueError`` names an unknown stage or id."""
        if node_id not in self._nodes(stage):
            raise ArgumentError(f"the {stage} stage has no node {node_id!r}")
        found: dict[str, set[str]] = {name: set() for name in self.stages if name != stage}

        def walk(at: str, ids: set[str], seen: frozenset[str]) -> None:
            for target, relation in self._links[at].items():
                if target in seen:
                    continue
                reached = {linked for i in ids for linked in relation.get(i, ())}
                if reached:
                    found[target] |= reached
                    walk(target, reached, seen | {target})

        start = self._eclass_of.get(node_id, node_id) if stage == "egraph" else node_id
        walk(stage, {start}, frozenset({stage}))
        return {name: self._ordered(name, ids) for name, ids in found.items()}

    def lines(self, stage: str, node_id: str) -> dict[str, list[int]]:
        """CUDA kernel id -> the 1-based source lines computing the LLIR kernels that correspond to ``node_id``
        (for a CUDA kernel itself: every LLIR kernel it implements); kernels with no such line are left out."""
        return self._lines(stage, node_id, self.counterparts(stage, node_id))

    def highlight(self, stage: str, node_id: str) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
        """What selecting ``node_id`` of ``stage`` lights up: stage -> ids (the node itself, with its e-class for an
        e-node, and its counterparts; stages with none left out) and ``lines``."""
        found = self.counterparts(stage, node_id)
        own = {node_id, self._eclass_of.get(node_id, node_id)} if stage == "egraph" else {node_id}
        highlighted = {name: self._ordered(name, own) if name == stage else found[name] for name in self.stages
                       if name == stage or found[name]}
        return highlighted, self._lines(stage, node_id, found)

    def table(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Stage -> node id -> ``{"counterparts": {other stage: ids}, "lines": lines}`` for every node with any (stages
        with none and empty lines left out)."""
        table: dict[str, dict[str, dict[str, Any]]] = {}
        for name in self.stages:
            for node_id in self.ids(name):
                found = self.counterparts(name, node_id)
                entry = {"counterparts": {k: ids for k, ids in found.items() if ids},
                         "lines": self._lines(name, node_id, found)}
                entry = {k: v for k, v in entry.items() if v}
                if entry:
                    table.setdefault(name, {})[node_id] = entry
        return table

    def _lines(self, stage: str, node_id: str, found: dict[str, list[str]]) -> dict[str, list[int]]:
        kernels = [node_id] if stage == "cuda" else found.get("cuda", [])
        llir = [*found.get("llir", []), *([node_id] if stage == "llir" else [])]
        lines = {kid: sorted({n for k in llir for n in self.cuda_lines.get(kid, {}).get(k, ())}) for kid in kernels}
        return {kid: numbers for kid, numbers in lines.items() if numbers}

    def _ordered(self, stage: str, ids: set[str]) -> list[str]:
        order = self._order[stage]
        return sorted(ids, key=lambda i: (order.get(i, len(order)), i))
