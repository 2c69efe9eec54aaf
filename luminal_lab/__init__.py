"""luminal_lab: watch and steer a search-based deep-learning compiler in a notebook.

``import luminal_lab as ll``: build graphs with ``ll.Graph``, compile them (or PyTorch
models) with ``ll.compile``, and look at every stage of the pipeline.
"""

from .compiled import Compiled, Signature, compile
from .dtypes import DType, bf16, f16, f32, f64, i32, i64
from .dtypes import bool_ as bool
from .errors import (
    BudgetExceeded,
    DTypeBoundaryError,
    EgglogError,
    LuminalError,
    NoDeviceError,
    ShapeError,
    UnsupportedOpError,
)
from .hlir import DTypeError, Graph, Node, Op
from .reference import ReferenceRuntime
from .shape_tracker import ShapeTracker
from .symbolic import Expr
from .tensor import GraphTensor, concat, embedding, maximum, minimum, stack, where

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """``%load_ext luminal_lab``: registers the ``%luminal`` / ``%%luminal`` magics."""
    from .magic import LuminalMagics

    ipython.register_magics(LuminalMagics)


__all__ = [
    "BudgetExceeded", "Compiled", "DType", "DTypeBoundaryError", "DTypeError", "EgglogError", "Expr", "Graph",
    "GraphTensor", "LuminalError", "NoDeviceError", "Node", "Op", "ReferenceRuntime", "ShapeError",
    "ShapeTracker", "Signature", "UnsupportedOpError", "bf16", "bool", "compile", "concat", "embedding", "f16",
    "f32", "f64", "i32", "i64", "maximum", "minimum", "stack", "where",
]
