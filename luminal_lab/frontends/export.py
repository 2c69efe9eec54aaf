"""``torch.export`` of a module or function on example tensors, decomposed to core aten (torch's fused
inference fast paths included, through ``fast_paths``); ``aot_decompositions``, the same decompositions for
AOTAutograd's joint forward and backward graph.

With ``dynamic_shapes`` (torch.export's: ``Dim.AUTO``, ``Dim.DYNAMIC`` or named ``Dim``s per
input), the sizes marked stay symbolic where torch can keep them so, and int inputs are
allowed (their values become symbolic too).

Non-strict export normally keeps only the frames of ``forward`` methods in a node's stack trace;
here it keeps every user frame, so an op written in a helper points at its own line. A plain
function is wrapped into a module; its parameter names become the inputs' names. A value that depends on the input's
data (an op returning a Python bool, an ``if`` on a tensor) cannot be exported: ``ExportError`` names it and the
user's line.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.proxy import TracerBase

from ..core.errors import ExportError, LuminalError
from ..core.phases import phase
from .fast_paths import DECOMPOSITIONS

# ops translated as they are (``aten``), more cheaply than through torch's decomposition: ``_safe_softmax`` (attention's
# softmax, 0 over a fully masked row) as one softmax whose row max and sum are clamped, not a where over every score
UNDECOMPOSED = (torch.ops.aten._safe_softmax.default,)
# ops that training decomposes further than core aten: batch norm in train mode, max pooling's gradient
TRAINING = [torch.ops.aten._native_batch_norm_legit_functional, torch.ops.aten.max_pool2d_with_indices_backward]


@phase("export")
def export_core_aten(module: torch.nn.Module, example_inputs: tuple, strict: bool = False,
                     dynamic_shapes: Any = None, decompose: bool = True,
                     example_kwargs: dict[str, Any] | None = None) -> torch.export.ExportedProgram:
    """``torch.export`` on tensor inputs (and int inputs, with ``dynamic_shapes``), positional and by keyword
    (``example_kwargs``), decomposed to core aten, with every user frame in the stack traces. ``decompose=False``
    skips the decomposition, for a module whose graph is core aten already (AOTAutograd's forward and backward, traced
    with ``aot_decompositions``): re-tracing it would change nothing, and it costs most of the export's time."""
    _register_caches(module)
    for position, value in [*enumerate(example_inputs), *(example_kwargs or {}).items()]:
        if dynamic_shapes is not None and isinstance(value, int) and not isinstance(value, bool):
            continue
        leaves = pytree.tree_leaves(value)
        if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            what = f"example input {position}" if isinstance(position, int) else f"example keyword input {position!r}"
            raise LuminalError(f"{what} is a {type(value).__name__}; only tensors (or structures of them torch's "
                               "pytree knows, such as a transformers cache) can be inputs (bind other arguments "
                               "first, e.g. with functools.partial)")
    with _all_user_frames(), _data_dependence_named():
        exported = torch.export.export(module, example_inputs, example_kwargs, strict=strict,
                                       dynamic_shapes=dynamic_shapes)
        if not decompose:
            return exported
        with warnings.catch_warnings():  # torch's own deepcopy of its pytree specs warns about itself
            warnings.filterwarnings("ignore", r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning)
            table = torch.export.default_decompositions()
            for op in UNDECOMPOSED:
                table.pop(op)
            table.update(DECOMPOSITIONS)
            return exported.run_decompositions(table)


def _register_caches(module: torch.nn.Module) -> None:
    """Register a ``transformers`` model's cache classes with torch's pytree (transformers' own
    ``register_cache_pytrees_for_model``), so that a cache among its inputs or outputs (a causal LM's ``DynamicCache``,
    returned by default) is flattened into its tensors, and the program returns one as the model does."""
    transformers = sys.modules.get("transformers")  # a transformers model was built only where it is imported
    if transformers is not None and isinstance(module, transformers.PreTrainedModel):
        from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model

        register_cache_pytrees_for_model(module)


@contextlib.contextmanager
def _data_dependence_named() -> Iterator[None]:
    """torch.export's failures on values that depend on the input's data, raised as an ``ExportError`` naming the op
    (or the expression guarded on) and the user's line that reached it, with what to do instead."""
    from torch._subclasses.fake_tensor import DataDependentOutputException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    try:
        yield
    except DataDependentOutputException as error:
        raise ExportError(_data_dependent(f"{error.func} gives a Python value that depends on the input's data",
                                          error)) from None
    except GuardOnDataDependentSymNode as error:
        raise ExportError(_data_dependent(f"the program branches on a value that depends on the input's data "
                                          f"({error.cond})", error)) from None


def _data_dependent(what: str, error: BaseException) -> str:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if not frame.filename.startswith(_LIBRARY_DIRECTORIES)]
    where = f"\n  from {frames[-1].filename}:{frames[-1].lineno}: {frames[-1].line}" if frames else ""
    return (f"torch.export cannot trace the program: {what}, which an exported graph cannot hold{where}\n  compile "
            "it with torch.compile(fn, backend=\"luminal_lab\") instead (dynamo runs that op in torch and compiles "
            "the parts around it), or compile the parts before and after it on their own")


# torch's, the standard library's and luminal_lab's own frames: the user's line is the last frame outside them
_LIBRARY_DIRECTORIES = (str(Path(torch.__file__).parent), str(Path(contextlib.__file__).parent),
                        str(Path(__file__).parents[1]))


def aot_decompositions() -> dict:
    """The decompositions AOTAutograd traces a joint forward and backward graph with (the backend's training path):
    core aten's (backward ops such as ``gelu_backward`` and ``native_layer_norm_backward`` included) but for
    ``UNDECOMPOSED``, ``TRAINING``'s (batch norm in train mode: its batch statistics, and the running ones it returns
    to be written back; max pooling's gradient), and torch's fused fast paths (``DECOMPOSITIONS``)."""
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = core_aten_decompositions()
    for op in UNDECOMPOSED:
        table.pop(op, None)
    return {**table, **get_decompositions(TRAINING), **DECOMPOSITIONS}


def parameter_names(fn: Callable, count: int) -> list[str] | None:
    """The names of a function's first ``count`` positional parameters, when it has that many."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())[:count]
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(parameters) < count or any(p.kind not in positional for p in parameters):
        return None
    return [p.name for p in parameters]


@contextlib.contextmanager
def _all_user_frames() -> Iterator[None]:
    """Make non-strict export record every user frame in a node's stack trace.

    By default it keeps only frames of ``forward`` methods, so an op written in a helper
    (``self.attention(x)``, a plain function) would point at its caller's line.
    """
    original = TracerBase._filter_traceback_frames

    def keep_user_frames(tracer: TracerBase, summary):
        tracer._record_forward_stack_traces_only = False
        return original(tracer, summary)

    TracerBase._filter_traceback_frames = keep_user_frames
    try:
        yield
    finally:
        TracerBase._filter_traceback_frames = original


class FunctionModule(torch.nn.Module):
    """A plain function as a module, so torch.export can take it."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)
