"""The boundary a compiled program is called through: inputs matched, checked and converted; outputs packed.

The boundary is strict: every input's dtype must equal the graph's declared dtype (else
``DTypeBoundaryError``, before any work) and its shape must fit the declared shape, which
also binds the symbolic dimensions (else ``ShapeError``), as does each size argument (an int input of a torch
program exported with dynamic shapes, ``Signature.sizes``). The bindings of each input signature checked (dtypes,
shapes, size arguments) are remembered, so a repeated call is not checked again. Nothing is cast on the way in or out.
Inputs come positionally, by keyword, or (for a torch program) in the pytree structure it was
exported with; outputs go back as torch tensors in the program's structure, and in-place
mutations of inputs and buffers are written back after each call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core import dtypes as dt
from ..core.arrays import to_numpy, to_torch
from ..core.errors import ArgumentError, DTypeBoundaryError, ShapeError
from ..core.shape_tracker import format_shape
from ..core.symbolic import Expr
from ..hlir.graph import Graph, Signature

MEMO = 1024  # input signatures whose bindings a boundary remembers


class Boundary:
    """How one compiled program meets its caller: its graph's inputs, its ``Signature``, and the module (if any)
    whose buffers in-place mutations are written back to."""

    def __init__(self, graph: Graph, signature: Signature, module=None) -> None:
        self.graph = graph
        self.signature = signature
        self.module = module
        self.positional = signature.in_spec is None or signature.in_spec == _positional_spec(len(signature.inputs))
        count = len(signature.outputs) + len(signature.constants)
        # outputs returned as a plain tuple (or list) of leaves need no pytree work
        self.flat_out = next((kind for kind in (tuple, list) if signature.out_spec == _flat_spec(kind, count)), None)
        self.mutates = bool(signature.mutated_inputs or signature.mutated_weights)  # whether a call writes back
        order = list(graph.outputs)
        self._returned = [order.index(name) for name in signature.outputs]  # where each returned value is computed
        self._bound: dict[tuple, dict[str, int]] = {}  # the bindings of each input signature seen (dtypes, shapes)
        self._arrays: dict[str, tuple] = {}  # by input: the tensor last converted, its data_ptr, strides, view

    def match(self, inputs: Sequence, named: Mapping[str, Any]) -> dict[str, Any]:
        """The call's values by input name: positional and keyword arguments, or a pytree as at compile time."""
        names = self.signature.inputs
        if not named and len(inputs) == len(names) and self.positional:
            return dict(zip(names, inputs))  # the common call: tensors in order, no pytree work
        if not self.positional:
            import torch.utils._pytree as pytree

            flat, spec = pytree.tree_flatten((tuple(inputs), dict(named)))
            if spec != self.signature.in_spec:
                raise ArgumentError(f"the inputs are not structured as at compile time:\n  got {spec}\n"
                                    f"  expected {self.signature.in_spec}")
            sizes = self.signature.sizes
            return dict(zip(names, [v for v in flat if _is_array(v) or (sizes and _is_size(v))]))
        unknown = sorted(set(named) - set(names))
        if unknown:
            raise ArgumentError(f"unknown input name(s) {unknown}; the program's inputs are {names}")
        if len(inputs) > len(names):
            raise ArgumentError(f"{len(inputs)} inputs given; the program takes {len(names)}: {names}")
        twice = [name for name in names[:len(inputs)] if name in named]
        if twice:
            raise ArgumentError(f"input {twice[0]!r} is given twice, by position and by keyword; the program's "
                                f"inputs are {names}")
        missing = [name for name in names[len(inputs):] if name not in named]
        if missing:
            raise ArgumentError(f"missing input(s) {missing}; the program's inputs are {names}")
        return {**dict(zip(names, inputs)), **{name: named[name] for name in names[len(inputs):]}}

    def check(self, values: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """Check the inputs' dtypes and shapes, bind the symbolic dimensions, and convert to numpy (the size arguments,
        which only bind, are left out)."""
        bindings = self.bind(values)
        sizes = self.signature.sizes
        return {name: self._array(name, value) for name, value in values.items() if name not in sizes}, bindings

    def _array(self, name: str, value: Any) -> np.ndarray:
        """``value`` as numpy: for the CPU tensor converted last for this input, still over the same memory in the
        same layout, the same view as then (so that a runtime reading it in place has nothing to point anew)."""
        if isinstance(value, np.ndarray):
            return value
        last = self._arrays.get(name)
        if (last is not None and last[0] is value and last[1] == value.data_ptr() and last[2] == value.stride()
                and last[3].shape == value.shape):
            return last[3]
        try:
            array = value.numpy()  # a view of a CPU tensor's own memory
        except (RuntimeError, TypeError):  # one that requires grad, a CUDA or bf16 one: to_numpy's way
            return to_numpy(value)
        self._arrays[name] = (value, value.data_ptr(), value.stride(), array)
        return array

    def tensors(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` without the size arguments."""
        return {name: value for name, value in values.items() if name not in self.signature.sizes}

    def bind(self, values: Mapping[str, Any]) -> dict[str, int]:
        """Check the inputs' dtypes and shapes and bind the symbolic dimensions; the values stay where they are. A
        signature (each input's dtype and shape, each size argument's value) checked before is not checked again: its
        bindings are the ones remembered (not to be changed)."""
        key = signature_key(values.values())
        bindings = self._bound.get(key) if key is not None else None
        if bindings is None:
            bindings = self._check(values)
            if key is not None and len(self._bound) < MEMO:
                self._bound[key] = bindings
        return bindings

    def _check(self, values: Mapping[str, Any]) -> dict[str, int]:
        import torch

        bindings: dict[str, int] = self._bind_sizes(values)
        values = self.tensors(values)
        declared = {name: self.graph.inputs[name].node for name in values}
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
                raise DTypeBoundaryError(f"input {name!r} is {got} but the graph declares "
                                         f"{declared[name].dtype.value}; nothing is cast implicitly, cast it before "
                                         "the call")
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
        return bindings

    def _bind_sizes(self, values: Mapping[str, Any]) -> dict[str, int]:
        """The variables the size arguments bind; a size that must be a number is checked."""
        bindings: dict[str, int] = {}
        for name, expr in self.signature.sizes.items():
            value = values[name]
            if not _is_size(value):
                raise ShapeError(f"input {name!r} is a size (an int), got {type(value).__name__} {value!r}")
            if expr.op == "var":
                bindings[expr.args[0]] = int(value)
            elif expr.is_num and expr.value != int(value):
                raise ShapeError(f"input {name!r} is {value} but the program was specialised to {expr.value}")
        return bindings

    def write_back(self, values: dict[str, Any], results: dict[str, Any]) -> None:
        """Write in-place mutations back: into the caller's inputs, the graph's weights and the module's buffers.
        ``results`` are numpy arrays, or torch tensors (a device-resident call)."""
        for output, input_name in self.signature.mutated_inputs.items():
            target = values[input_name]
            if isinstance(target, np.ndarray):
                target[...] = to_numpy(results[output])
            else:
                target.copy_(_tensor(results[output]))
        for output, weight in self.signature.mutated_weights.items():
            self.graph.weights[weight] = to_numpy(results[output]).copy()
            if self.module is not None:
                buffer = self.module.get_buffer(weight)
                buffer.copy_(_tensor(results[output]))

    def packer(self, bindings: Mapping[str, int]) -> Callable[[Sequence[np.ndarray]], Any]:
        """``pack`` at ``bindings`` for a caller's host arrays: for a program returning a flat tuple (or list) of
        tensors and no sizes, without looking at its structure again."""
        if self.flat_out is None or self.signature.constants:
            return functools.partial(self.pack, bindings=bindings)
        import torch

        flat_out, returned = self.flat_out, self._returned
        # the caller's arrays are fresh and C-contiguous: torch takes them as they are, but for bf16 (to_torch's way)
        bf16 = any(self.graph.outputs[name].dtype == dt.bf16 for name in self.signature.outputs)
        convert = to_torch if bf16 else torch.from_numpy
        return lambda outputs: flat_out([convert(outputs[index]) for index in returned])

    def packed(self, names: Sequence[str]) -> str:
        """A Python expression packing the fresh tensors named ``names`` (``graph.outputs`` order) as ``pack`` does: a
        tuple or list display for a flat result with no sizes, else a call of a ``pack`` bound to no sizes."""
        if self.flat_out is None or self.signature.constants:
            return f"pack([{', '.join(names)}])"
        items = ", ".join(names[index] for index in self._returned)
        return f"({items},)" if self.flat_out is tuple else f"[{items}]"

    def pack(self, outputs: Sequence[Any], bindings: Mapping[str, int]) -> Any:
        """The graph's outputs (numpy arrays or torch tensors, in ``graph.outputs`` order) as the program returns them:
        torch tensors, in its order and structure, and any sizes it returns (``Signature.constants``) as numbers at
        ``bindings``."""
        tensors = [_tensor(outputs[index]) for index in self._returned]
        if self.signature.constants:
            for position, value in sorted(self.signature.constants.items()):
                tensors.insert(position, int(value.evaluate(bindings)) if isinstance(value, Expr) else value)
        if self.flat_out is not None:
            return self.flat_out(tensors)
        if self.signature.out_spec is not None:
            import torch.utils._pytree as pytree

            return pytree.tree_unflatten(tensors, self.signature.out_spec)
        return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _tensor(value: Any) -> Any:
    """A torch tensor as it is, or one over a numpy array."""
    return to_torch(value) if isinstance(value, np.ndarray) else value


def signature_key(values: Iterable[Any]) -> tuple | None:
    """What checking inputs depends on, hashable: each tensor's or array's dtype and shape, each size argument's type
    and value; None for a value that is neither (a list, say: ``Boundary._check`` names what is wrong)."""
    values = list(values)
    try:
        return tuple([(value.dtype, value.shape) for value in values])  # the common call: tensors or arrays only
    except AttributeError:
        pass
    try:
        key = tuple([(type(v), v) if getattr(v, "shape", None) is None else (v.dtype, v.shape) for v in values])
        hash(key)
    except (AttributeError, TypeError):  # something with a shape but no dtype, or unhashable
        return None
    return key


def _flat_spec(kind: type, count: int):
    """The torch pytree spec of a ``kind`` (tuple or list) of ``count`` leaves."""
    import torch.utils._pytree as pytree

    return pytree.tree_flatten(kind(range(count)))[1]


def _positional_spec(count: int):
    """The torch pytree spec of ``count`` positional tensors and no keywords."""
    import torch.utils._pytree as pytree

    return pytree.tree_flatten((tuple(range(count)), {}))[1]


def _is_array(value) -> bool:
    import torch

    return isinstance(value, (np.ndarray, torch.Tensor))


def _is_size(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _torch_dtype_name(dtype) -> str:
    try:
        return dt.from_torch(dtype).value
    except TypeError:
        return str(dtype).replace("torch.", "")
