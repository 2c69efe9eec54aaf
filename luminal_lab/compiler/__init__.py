"""The compiler a user calls: ``ll.compile``, the ``Compiled`` program and its boundary, provenance, torch.compile.

``compiled`` (``compile``, ``Compiled``: its stages, genomes, search, ``run`` and ``profile``),
``boundary`` (how inputs are matched, checked and converted, and outputs packed), ``provenance``
(a node's counterparts across stages; ``comp.pipeline()``), ``dynamo`` (the ``torch.compile``
backend, registered as ``luminal_lab`` through the ``torch_dynamo_backends`` entry point).
"""

from .compiled import Compiled, compile
from .provenance import STAGES, Pipeline, Provenance

__all__ = ["STAGES", "Compiled", "Pipeline", "Provenance", "compile"]
