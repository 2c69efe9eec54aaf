"""The base of every pipeline stage object (HLIR, e-graph, LLIR, regions, CUDA).

A stage shows itself in a notebook three ways, all from ``_repr_mimebundle_``:

``text/plain``
    ``summary()``: one line that is identical across runs for the same program (no memory
    addresses, no timings), so notebook tests can compare it strictly.
``image/svg+xml``
    ``to_svg()``: a picture, or ``None`` when none can be drawn (e.g. Graphviz's ``dot`` is
    not installed); the bundle then simply has no picture.
``application/vnd.luminal-lab.stage+json`` (``STAGE_MIME``)
    ``to_json()``: the envelope below, read by the JupyterLab extension.

The JSON envelope, shared by all stages::

    {
      "stage":   "hlir",          # which stage: hlir, egraph, llir, regions, cuda, ...
      "schema":  1,               # SCHEMA_VERSION; bumped when the envelope changes
      "summary": "HLIR: ...",     # the text/plain line
      "nodes":   [{"id": "h12", "label": "Mul", ...}, ...],
      "edges":   [{"id": "h3-h12-0", "source": "h3", "target": "h12", ...}, ...],
      "links":   {"hlir": {"c7": ["h12", "h13"]}},
      "meta":    {...}            # stage-specific extras (inputs, outputs, counts, ...)
    }

Every node has a string ``id`` that is unique within its stage and stable for the same
program built the same way, and a human ``label``; every edge has ``source`` and ``target``
node ids. Stages add their own fields to nodes and edges (documented by each stage).
``links`` is provenance: for each other stage (by name) it maps ids of this stage to the
ids they came from there, e.g. an e-class to the HLIR nodes it holds. A renderer uses it to
highlight a node's counterparts across stages; the first stage (HLIR) has no links.
Everything in the envelope is plain JSON (strings, numbers, bools, lists, dicts).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

STAGE_MIME = "application/vnd.luminal-lab.stage+json"
SCHEMA_VERSION = 1
MAX_DRAWN_NODES = 400  # above this many nodes a stage's picture is condensed


class Stage:
    """A pipeline stage as a notebook object: one-line summary, SVG picture, JSON envelope.

    Subclasses set ``name``, and ``view_module``: the module that shows them (defining ``summary(stage)``,
    ``to_json(stage)`` and ``to_svg(stage)``), named, not imported, so a model never imports its view and nothing
    that draws (graphviz, matplotlib) loads until a stage is shown. A stage with no view module implements
    ``summary`` and ``to_json`` itself and has no picture.
    """

    name: str = "stage"
    view_module: ClassVar[str | None] = None

    def _view(self) -> ModuleType:
        if self.view_module is None:
            raise LookupError(f"{type(self).__name__} names no view module (Stage.view_module)")
        return importlib.import_module(self.view_module)

    def summary(self) -> str:
        """One stable line describing the stage."""
        return self._view().summary(self)

    def to_json(self) -> dict[str, Any]:
        """The JSON envelope (see the module docstring)."""
        return self._view().to_json(self)

    def to_svg(self) -> str | None:
        """An SVG picture, or ``None`` when none can be drawn (no Graphviz, or no view)."""
        return None if self.view_module is None else self._view().to_svg(self)

    def envelope(self, nodes: list[dict[str, Any]], edges: list[dict[str, Any]],
                 links: dict[str, dict[str, list[str]]] | None = None,
                 meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Wrap a stage's nodes, edges, links and extras in the shared envelope."""
        return {
            "stage": self.name,
            "schema": SCHEMA_VERSION,
            "summary": self.summary(),
            "nodes": nodes,
            "edges": edges,
            "links": links or {},
            "meta": meta or {},
        }

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        """text/plain, image/svg+xml (when a picture can be drawn) and the stage JSON."""

        def wanted(mime: str) -> bool:
            return (include is None or mime in include) and (exclude is None or mime not in exclude)

        bundle: dict[str, Any] = {}
        if wanted("text/plain"):
            bundle["text/plain"] = self.summary()
        if wanted("image/svg+xml"):
            svg = self.to_svg()
            if svg is not None:
                bundle["image/svg+xml"] = svg
        if wanted(STAGE_MIME):
            bundle[STAGE_MIME] = self.to_json()
        return bundle

    def save_svg(self, path: str | Path) -> Path:
        """Write the picture to ``path``; raises ``RuntimeError`` when there is none."""
        svg = self.to_svg()
        if svg is None:
            raise RuntimeError(f"the {self.name} stage has no picture (is Graphviz's `dot` installed?)")
        path = Path(path)
        path.write_text(svg, encoding="utf-8")
        return path

    def save_json(self, path: str | Path) -> Path:
        """Write the JSON envelope to ``path``."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        return self.summary()
