"""``ll.compile``: a compiled program, its stages, and the boundary it is called through.

The boundary is strict: every input's dtype must equal the graph's declared dtype (else
``DTypeBoundaryError``, before any work) and its shape must fit the declared shape, which
also binds the symbolic dimensions. Nothing is cast on the way in or out.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes as dt
from .errors import DTypeBoundaryError, LuminalError, ShapeError
from .hlir import Graph
from .reference import ReferenceRuntime
from .shape_tracker import format_shape

DEVICES = ("cpu",)


@dataclass
class Signature:
    """How a compiled program meets its caller.

    ``inputs`` are the user inputs in call order and ``outputs`` the values returned, in
    order; ``in_spec``/``out_spec`` are torch pytree specs when the program came from torch.
    ``mutated_inputs`` and ``mutated_weights`` map an output to the user input or weight it
    is written back to after each call (in-place mutations in the original program).
    """

    inputs: list[str]
    outputs: list[str]
    in_spec: Any = None
    out_spec: Any = None
    mutated_inputs: dict[str, str] = field(default_factory=dict)
    mutated_weights: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_graph(cls, graph: Graph) -> Signature:
        return cls([n for n, spec in graph.inputs.items() if not spec.is_weight], list(graph.outputs))


class Compiled:
    """A compiled program: its stage objects and ``run``."""

    def __init__(self, graph: Graph, signature: Signature, module=None):
        if not graph.outputs:
            raise LuminalError("the graph has no outputs: mark at least one with .output(name)")
        self.graph = graph
        self.signature = signature
        self._module = module
        self._reference = ReferenceRuntime(graph)

    @property
    def hlir(self):
        return self.graph.hlir

    @functools.cached_property
    def egraph(self):
        """The e-graph stage, built (and its egglog worker started) on first access."""
        from .egraph import EGraph

        return EGraph(self.graph)

    def __repr__(self) -> str:
        return f"<ll.Compiled {self.hlir}>"

    def run(self, *inputs, device: str = "cpu", **named_inputs):
        """Run on torch tensors (or numpy arrays) and return torch tensors, in the program's order."""
        if device not in DEVICES:
            raise ValueError(f"device {device!r} is not available; choose one of {DEVICES}")
        values = self._match_inputs(inputs, named_inputs)
        arrays, bindings = check_inputs(self.graph, values)
        results = self._reference.run(arrays, bindings)
        self._write_back(values, results)
        return self._pack_outputs(results)

    __call__ = run

    # ---- the boundary -------------------------------------------------------------------
    def _match_inputs(self, inputs: Sequence, named: Mapping[str, Any]) -> dict[str, Any]:
        names = self.signature.inputs
        if self.signature.in_spec is not None:
            import torch.utils._pytree as pytree

            flat, spec = pytree.tree_flatten((tuple(inputs), dict(named)))
            if spec != self.signature.in_spec:
                raise LuminalError(f"the inputs are not structured as at compile time:\n  got {spec}\n"
                                   f"  expected {self.signature.in_spec}")
            flat = [v for v in flat if _is_array(v)]
        else:
            unknown = set(named) - set(names)
            if unknown:
                raise LuminalError(f"unknown input name(s) {sorted(unknown)}; the inputs are {names}")
            flat = list(inputs) + [named[n] for n in names[len(inputs):] if n in named]
        if len(flat) != len(names):
            raise LuminalError(f"expected {len(names)} input(s) {names}, got {len(flat)}")
        return dict(zip(names, flat))

    def _write_back(self, values: dict[str, Any], results: dict[str, np.ndarray]) -> None:
        for output, input_name in self.signature.mutated_inputs.items():
            target = values[input_name]
            if isinstance(target, np.ndarray):
                target[...] = results[output]
            else:
                target.copy_(to_torch(results[output]))
        for output, weight in self.signature.mutated_weights.items():
            self.graph.weights[weight] = results[output].copy()
            if self._module is not None:
                buffer = self._module.get_buffer(weight)
                buffer.copy_(to_torch(results[output]))

    def _pack_outputs(self, results: dict[str, np.ndarray]):
        tensors = [to_torch(results[name]) for name in self.signature.outputs]
        if self.signature.out_spec is not None:
            import torch.utils._pytree as pytree

            return pytree.tree_unflatten(tensors, self.signature.out_spec)
        return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _is_array(value) -> bool:
    import torch

    return isinstance(value, (np.ndarray, torch.Tensor))


def check_inputs(graph: Graph, values: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Check dtypes and shapes of the user inputs, bind symbolic dimensions, convert to numpy."""
    import torch

    declared = {name: graph.inputs[name].node for name in values}
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            got = _torch_dtype_name(value.dtype)
            ok = got == declared[name].dtype.value
        elif isinstance(value, np.ndarray):
            got = str(value.dtype)
            ok = value.dtype == declared[name].dtype.numpy
        else:
            raise DTypeBoundaryError(
                f"input {name!r} must be a torch.Tensor or numpy array, got {type(value).__name__}")
        if not ok:
            raise DTypeBoundaryError(f"input {name!r} is {got} but the graph declares {declared[name].dtype.value}; "
                                     "nothing is cast implicitly, cast it before the call")
    bindings: dict[str, int] = {}
    for name, value in values.items():
        dims = declared[name].shape
        shape = tuple(value.shape)
        if len(shape) != len(dims):
            raise ShapeError(f"input {name!r} has shape {list(shape)} but the graph declares {format_shape(dims)}")
        for dim, size in zip(dims, shape):
            if dim.op == "var":
                bindings.setdefault(dim.args[0], size)
    for name, value in values.items():
        dims = declared[name].shape
        try:
            expected = [int(d.evaluate(bindings)) for d in dims]
        except KeyError as missing:
            raise ShapeError(f"input {name!r}: cannot bind {format_shape(dims)} from {list(value.shape)} "
                             f"({missing.args[0]})") from None
        if expected != list(value.shape):
            raise ShapeError(f"input {name!r} has shape {list(value.shape)} but the graph declares "
                             f"{format_shape(dims)} = {expected} with {bindings}")
    return {name: to_numpy(value) for name, value in values.items()}, bindings


def _torch_dtype_name(dtype) -> str:
    try:
        return dt.from_torch(dtype).value
    except TypeError:
        return str(dtype).replace("torch.", "")


def to_numpy(value) -> np.ndarray:
    """A numpy view of a CPU tensor (bf16 through ml_dtypes), or the array itself."""
    if isinstance(value, np.ndarray):
        return value
    import torch

    value = value.detach()
    if value.dtype == torch.bfloat16:
        return value.contiguous().view(torch.int16).numpy().view(dt.bf16.numpy)
    return value.numpy(force=True)


def to_torch(array: np.ndarray):
    """A torch tensor over ``array``'s data (bf16 through ml_dtypes)."""
    import torch

    array = np.array(array, order="C", copy=None)  # keeps 0-d arrays 0-d
    if array.dtype == dt.bf16.numpy:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def compile(program, example_inputs: Sequence | None = None, **options) -> Compiled:
    """Compile an ``ll.Graph``, or a ``torch.nn.Module`` / function on ``example_inputs`` (via torch.export)."""
    if isinstance(program, Graph):
        if example_inputs is not None:
            raise LuminalError("a Graph declares its own inputs; pass no example inputs")
        return Compiled(program, Signature.of_graph(program))
    from .frontend_torch import compile_torch

    if example_inputs is None:
        raise LuminalError("compiling a torch module or function needs example_inputs")
    return compile_torch(program, example_inputs, **options)
