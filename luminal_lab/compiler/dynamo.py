"""``torch.compile(model, backend="luminal_lab")``: the TorchDynamo backend.

The backend is registered through the ``torch_dynamo_backends`` entry point, so torch
finds it by name without importing luminal_lab first. Dynamo hands over an FX
``GraphModule`` and example inputs; each distinct set of input shapes and dtypes (and
values of non-tensor arguments, such as the symbolic sizes dynamo passes once it treats a
dimension as dynamic) is compiled through the same torch.export path as ``ll.compile``,
specialised to those values, and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensor

from ..frontends.export import export_core_aten
from ..frontends.translate import translate
from .compiled import Compiled


class _Bound(torch.nn.Module):
    """The dynamo graph with its non-tensor arguments fixed, taking only the tensors."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any]):
        super().__init__()
        self.gm = gm
        self.constants = [None if isinstance(a, torch.Tensor) else a for a in args]
        self.is_tensor = [isinstance(a, torch.Tensor) for a in args]

    def forward(self, *tensors: torch.Tensor):
        given = iter(tensors)
        args = [next(given) if t else c for t, c in zip(self.is_tensor, self.constants, strict=True)]
        # an Interpreter (under preserve_node_meta) hands each dynamo node's stack trace on to export
        return torch.fx.Interpreter(self.gm).run(*args)


class DynamoProgram:
    """What the backend returns to dynamo: runs the graph through luminal_lab.

    ``programs`` maps an input key (shapes, dtypes, non-tensor values) to its ``Compiled``
    program, for looking at in a notebook.
    """

    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.programs: dict[tuple, Compiled] = {}
        self.input_names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]

    def __call__(self, *args: Any) -> Any:
        program = self.programs.get(_key(args)) or self.compile_for(args)
        result = program.run(*[a for a in args if isinstance(a, torch.Tensor)])
        # the genome is chosen: the idle egglog worker goes (it restarts, replaying, if the e-graph is used again)
        program.egraph.close()
        return result

    def compile_for(self, args: Sequence[Any]) -> Compiled:
        """Compile (and cache) the program for concrete ``args``; inputs keep dynamo's placeholder names."""
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        names = [name for name, a in zip(self.input_names, args, strict=True) if isinstance(a, torch.Tensor)]
        bound = _Bound(self.gm, args)
        with fx_traceback.preserve_node_meta():
            program = Compiled.of_torch(translate(export_core_aten(bound, tensors), bound, names, tensors))
        self.programs[_key(args)] = program
        return program

    def __repr__(self) -> str:
        return f"<luminal_lab DynamoProgram, {len(self.programs)} compiled input signature(s)>"


def _key(args: Sequence[Any]) -> tuple:
    return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


def _is_concrete(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not isinstance(value, FakeTensor)
    return isinstance(value, (int, float, bool)) or value is None


def luminal_lab_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> DynamoProgram:
    """TorchDynamo backend: compile ``gm`` with luminal_lab; unsupported ops raise here, at compile time.

    When the example inputs are symbolic (dynamic shapes), compilation waits for the
    first call, which brings concrete values.
    """
    program = DynamoProgram(gm)
    if all(_is_concrete(a) for a in example_inputs):
        program.compile_for(example_inputs)
    return program
