"""luminal_lab: watch and steer a search-based deep-learning compiler in a notebook.

``import luminal_lab as ll``: build graphs with ``ll.Graph``, compile them (or PyTorch
models) with ``ll.compile``, and look at every stage of the pipeline.

The package has one folder per stage, in the order data flows through them (``layers.LAYERS``):
``core`` (shared vocabulary), ``hlir`` (graph, tensor API, reference runtime), ``frontends``
(PyTorch in), ``egraph`` (egglog rules and saturation), ``llir`` (genomes, extraction, kernel
graph, fused regions), ``codegen`` (CPU and CUDA kernel source), ``runtime`` (running kernels),
``search`` (measured search), ``compiler`` (``ll.compile``, ``Compiled``, provenance,
``torch.compile``) and ``notebook`` (widgets, report, magics). Each imports only from earlier ones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.dtypes import DType, bf16, f16, f32, f64, i8, i16, i32, i64, u8
from .core.dtypes import bool_ as bool
from .core.errors import (
    ArgumentError,
    BudgetExceeded,
    DTypeBoundaryError,
    DTypeError,
    EgglogError,
    ExportError,
    LuminalError,
    MemoryBudgetError,
    NoDeviceError,
    NoEClassError,
    Refused,
    SearchStopped,
    ShapeError,
    UnsupportedOpError,
)
from .core.ops import Op
from .core.shape_tracker import ShapeTracker
from .core.symbolic import Expr
from .core.version import __version__ as __version__
from .layers import LAYERS

if TYPE_CHECKING:
    from .compiler.compiled import Compiled, compile
    from .hlir.graph import Graph, Node, Signature
    from .hlir.reference import ReferenceRuntime
    from .hlir.tensor import GraphTensor, concat, embedding, maximum, minimum, stack, where
    from .search.records import TuningRecords
    from .search.runners import InProcessRunner, LocalRunner, RayRunner

# the names of the later stages, imported when first used: a process that needs one stage (an egglog worker, a kernel
# compiler) starts without importing the rest
_LAZY = {**dict.fromkeys(("Compiled", "compile"), ".compiler.compiled"),
         **dict.fromkeys(("Graph", "Node", "Signature"), ".hlir.graph"), "ReferenceRuntime": ".hlir.reference",
         **dict.fromkeys(("GraphTensor", "concat", "embedding", "maximum", "minimum", "stack", "where"),
                         ".hlir.tensor"),
         "TuningRecords": ".search.records",
         **dict.fromkeys(("InProcessRunner", "LocalRunner", "RayRunner"), ".search.runners")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in LAYERS:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'luminal_lab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def programs(compiled) -> list[Compiled]:
    """The ``Compiled`` programs behind a ``torch.compile(..., backend="luminal_lab")``-d module or function (see
    ``compiler.dynamo.programs``); torch loads here, not at ``import luminal_lab``."""
    from .compiler.dynamo import programs as behind

    return behind(compiled)


def export_records(path, directory=None) -> int:
    """Write the tuning records (in ``directory``, default ``core.storage.default_directory()``) to ``path`` as
    JSON lines, for another machine's ``import_records``; returns how many."""
    from .search.records import TuningRecords

    return TuningRecords(directory).export(path)


def import_records(path, directory=None) -> int:
    """Add the tuning records of a file ``export_records`` wrote (those already here are skipped); returns how
    many were added."""
    from .search.records import TuningRecords

    return TuningRecords(directory).import_(path)


def load_ipython_extension(ipython) -> None:
    """``%load_ext luminal_lab``: registers the ``%luminal`` / ``%%luminal`` magics."""
    from .notebook.magic import LuminalMagics

    ipython.register_magics(LuminalMagics)


__all__ = [
    "ArgumentError", "BudgetExceeded", "Compiled", "DType", "DTypeBoundaryError", "DTypeError", "EgglogError",
    "ExportError", "Expr", "Graph", "GraphTensor", "InProcessRunner", "LocalRunner", "LuminalError",
    "MemoryBudgetError", "NoDeviceError", "NoEClassError", "Node", "Op", "RayRunner",
    "ReferenceRuntime", "Refused", "SearchStopped", "ShapeError", "ShapeTracker", "Signature", "TuningRecords",
    "UnsupportedOpError", "bf16", "bool", "compile", "concat", "embedding", "export_records", "f16", "f32", "f64",
    "i8", "i16", "i32", "i64", "import_records", "maximum", "minimum", "programs", "stack", "u8", "where",
]
