"""A ready call: ``Compiled.run`` of one input signature on the CPU, its checks and lookups done once.

``Compiled.run`` makes one at a signature's second run (a dynamic program's, once its plan's native function is built)
and takes it first from then on, while the program's genome, e-graph and runtime are those it was made for
(``Ready.current``: a genome swapped in, by a search in the background say, retires it). The torch.compile backend calls
it with dynamo's arguments (``Ready.through``), and, once hot, as the plan's native function (``Ready.native``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from ..runtime import Runtime

if TYPE_CHECKING:
    from ..runtime.native import Native
    from .compiled import Compiled


def _natively_read(tensor: Any) -> bool:
    """Whether a native function reads this tensor's memory as it is: a C-contiguous CPU tensor without grad, not a
    neg or conj view."""
    return (tensor.is_cpu and tensor.is_contiguous() and not tensor.requires_grad and not tensor.is_neg()
            and not tensor.is_conj())


class Ready:
    """``Compiled.run`` of one input signature on the CPU, whose dtypes and shapes were checked before, at the
    ``bindings`` of its symbolic dimensions (none for a static program, whose ready call serves from the signature's
    second call on): the runtime found the plan and each input's slot once (``CPURuntime.caller``). It serves while the
    program's genome, e-graph and runtime are those it was made for (``current``). Called with a sequence whose items at
    ``positions`` are the program's arrays, in its input order (the size arguments left out)."""

    def __init__(self, compiled: Compiled, runtime: Runtime, positions: list[int], to_numpy: Callable | None,
                 bindings: Mapping[str, int] | None = None) -> None:
        self.compiled, self.runtime = compiled, runtime
        self.genome, self.snapshot = compiled._genome, compiled.egraph.snapshot
        self.runtime_key = (runtime.llir.genome_hash, "cpu")
        self.positions, self.to_numpy = positions, to_numpy
        sizes = compiled.signature.sizes
        self.names = [name for name in compiled.signature.inputs if name not in sizes]  # the arrays', in order
        self.bindings = dict(bindings or {})
        self.call = runtime.caller(self.names, self.bindings)
        self.weights = compiled.graph.weights
        self.pack = compiled.boundary.packer(self.bindings)

    @classmethod
    def of(cls, compiled: Compiled, runtime: Runtime, inputs: Sequence,
           bindings: Mapping[str, int] | None = None) -> Ready | None:
        """The ready call of ``inputs``' signature (at ``bindings``); None for a program that is not called
        positionally or that mutates its inputs, or for inputs that mix torch tensors and numpy arrays."""
        import torch

        if not compiled.boundary.positional or compiled.boundary.mutates:
            return None
        sizes = compiled.signature.sizes
        positions = [i for i, name in enumerate(compiled.signature.inputs) if name not in sizes]
        kinds = {type(inputs[i]) for i in positions}
        if kinds <= {torch.Tensor, torch.nn.Parameter}:
            return cls(compiled, runtime, positions, torch.Tensor.numpy, bindings)
        if kinds <= {np.ndarray}:
            return cls(compiled, runtime, positions, None, bindings)
        return None

    def through(self, positions: Sequence[int]) -> Ready:
        """This call taking its inputs from a sequence in which input ``i`` is at ``positions[i]`` (dynamo's
        arguments, say)."""
        ready = copy.copy(self)
        ready.positions = [positions[i] for i in self.positions]
        return ready

    def native(self, inputs: Sequence) -> Future[Callable[[Sequence], object] | None] | None:
        """For a caller whose every call passes tensors alike to ``inputs``' (at this call's positions) in dtype, shape,
        strides, device, grad and dispatch keys (dynamo's guards hold them so): a future of this call as the plan's
        native function (``runtime.native.build``, compiled in the background) run on the tensors' memory into fresh
        tensors, through a few lines of Python generated for this signature (each layer of Python costs a call of
        this size microseconds). The call returns None once the program's genome, e-graph or runtime changed, and
        where a gather meets an index out of range (``run``'s general path then raises on it). None where ``inputs``
        are not C-contiguous CPU tensors without grad, or the plan has no native function."""
        import torch

        from ..runtime.native import build

        if not all(isinstance(inputs[i], torch.Tensor) and _natively_read(inputs[i]) for i in self.positions):
            return None
        built = build(self.runtime, self.names, self.bindings)
        if built is None:
            return None
        called: Future[Callable[[Sequence], object] | None] = Future()

        def through(done: Future) -> None:
            native = None if done.exception() is not None else done.result()
            called.set_result(None if native is None else self._through(native))
        built.add_done_callback(through)
        return called

    def natively(self, native: Native) -> Callable[[Sequence], object]:
        """This call as ``native`` (the plan's native function, built) run on the tensors at ``positions`` into fresh
        tensors, for a caller whose tensors may differ from call to call in what ``native`` needs of them: None, for
        ``run``'s general path, unless each is a C-contiguous CPU tensor without grad (nor a neg or conj view), and
        once the program's genome, e-graph or runtime changed or a gather meets an index out of range."""
        return self._through(native, checked=True)

    def _through(self, native: Native, checked: bool = False) -> Callable[[Sequence], object]:
        """The generated Python that calls ``native`` on the tensors at ``positions`` (see ``native``), checking each
        tensor first where ``checked`` (see ``natively``)."""
        import torch

        from ..core.dtypes import to_torch as torch_dtype

        compiled = self.compiled
        names = [f"o{j}" for j in range(len(native.outputs))]
        space = {"current": self.current, "bind": native.bind, "weights": self.weights, "empty": torch.empty,
                 "address": torch.Tensor.data_ptr, "function": native.function, "table": native.address,
                 "pack": functools.partial(compiled.boundary.pack, bindings=self.bindings), "fits": _natively_read}
        lines = ["def run(args):", "    if not current():", "        return None"]
        if checked:
            fits = " and ".join(f"fits(args[{i}])" for i in self.positions)
            lines += [f"    if not ({fits}):", "        return None"]
        if native.plan.weights:
            lines.append("    bind(weights)")
        for name, (shape, dtype) in zip(names, native.outputs):
            space[f"{name}_dtype"] = torch_dtype(dtype)
            dims = ", ".join(map(str, shape)) if shape else "()"  # torch parses sizes as ints faster than a tuple
            lines.append(f"    {name} = empty({dims}, dtype={name}_dtype)")
        addresses = [f"address(args[{i}])" for i in self.positions] + [f"address({name})" for name in names]
        lines += [f"    if function(table, {', '.join(addresses)}):", "        return None",  # an index out of range
                  f"    return {compiled.boundary.packed(names)}"]
        exec("\n".join(lines), space)
        return space["run"]

    def current(self) -> bool:
        """Whether its program still runs the genome and runtime this call was made for."""
        compiled = self.compiled
        return (self.genome is compiled._genome and self.snapshot is compiled.egraph.snapshot
                and compiled._runtimes.get(self.runtime_key) is self.runtime)

    def __call__(self, inputs: Sequence) -> object:
        """The call's result; None where a tensor has no plain numpy view (one that requires grad, a CUDA or bf16
        one, a neg view): ``run``'s general path converts it."""
        arrays = [inputs[i] for i in self.positions]
        if self.to_numpy is not None:
            try:
                arrays = list(map(self.to_numpy, arrays))
            except (RuntimeError, TypeError):
                return None
        return self.pack(self.call(arrays, self.weights))
