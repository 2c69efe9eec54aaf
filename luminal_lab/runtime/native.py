"""A small CPU plan as one native function: its inputs copied in, its loop kernels called, its outputs copied out.

At decode sizes a call costs what its Python costs, not what its kernels compute: a numpy array made for each tensor,
the plan's steps called one by one, each output made a tensor again. A plan whose every step is a loop kernel (a
``_Launch``), a copy of a read into its scratch or an output's copy, with no input read in place and no output written
straight (so that every array a kernel takes stays where the plan put it), is generated here as one numba ``cfunc``:
the caller hands it the addresses of its inputs and of fresh outputs (a tensor's ``data_ptr()``), and the address of
a table holding the addresses of the plan's own arrays. Called through ctypes, it replaces the plan's Python with one
foreign call.

Its source names the kernels by their modules and holds no address, so the kernel cache keeps it on disk like any
kernel (``KernelCache.function``), with numba's machine code of it. Typing and compiling it takes numba seconds, so
``build`` compiles it in a low-priority worker process in the background (``cache.Builders``) and loads it there
once it is on disk; a program seen before loads in milliseconds.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..codegen.cpu_loop import kernel_array
from ..core.dtypes import DType
from .cache import Builders
from .cpu import CPUPlan, CPURuntime, _Copy, _Launch, _Output, _Sequence


@intrinsic
def at(typingctx, address):
    """The pointer at integer ``address`` (in a native program: ``carray`` takes pointers)."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(address), codegen


@dataclass(frozen=True)
class Native:
    """A plan's native function: ``function(address, *inputs, *outputs)`` takes ``address`` (of ``table``, which holds
    the addresses of the plan's arrays, kept alive by the plan held here), then the addresses of the caller's inputs
    (C-contiguous, in the order of the ``names`` given to ``build``, of the plan's dtypes and shapes) and of fresh
    C-contiguous outputs of ``outputs``' shapes and dtypes (``llir.outputs`` order). The plan's weights are bound
    first (``bind``) where it has any."""

    function: Callable[..., None]
    outputs: list[tuple[tuple[int, ...], DType]]
    table: np.ndarray
    runtime: CPURuntime
    plan: CPUPlan
    source: str

    @property
    def address(self) -> int:
        return self.table.ctypes.data

    def bind(self, weights: Mapping[str, np.ndarray]) -> None:
        """Bind the plan's weights to ``weights`` (by name), copying in only those that changed."""
        self.runtime.bind_weights(self.plan, weights)

    def __call__(self, *addresses: int) -> None:
        """Run on the addresses of the inputs and then the outputs (the weights bound already)."""
        self.function(self.address, *addresses)


def build(runtime: CPURuntime, names: Sequence[str]) -> Future[Native | None] | None:
    """Start building the native function of the plan of ``runtime``'s empty binding, taking its inputs in ``names``
    order, in the background: a future of it (None where compiling it failed). None for a plan with another kind of
    step (a library matmul, a gather, a host cast), an input read in place or an output written straight."""
    program = _program(runtime, names)
    if program is None:
        return None
    source, outputs, plan = program
    text, table = source.text(len(names), len(outputs)), np.array(source.addresses, np.uint64)
    cache = runtime.cache

    def load() -> Native | None:
        try:
            function = cache.function(text)
        except Exception as error:  # the plan runs as it did; the warning's first line says why not natively
            why = str(error).splitlines()[0] if str(error) else ""
            warnings.warn(f"luminal_lab: a plan's native function did not compile ({type(error).__name__}: {why}); "
                          "its steps run as they are", stacklevel=1)
            return None
        return Native(function.ctypes, outputs, table, runtime, plan, text)
    return _builders().build(cache, lambda: [(text, ())], then=load)


@functools.cache
def _builders() -> Builders:
    """One compile worker, at the lowest priority, for every native function this process builds."""
    return Builders(1)


def _program(runtime: CPURuntime, names: Sequence[str]) -> tuple[_Source, list, CPUPlan] | None:
    """The native source of the plan of the empty binding, its outputs' shapes and dtypes, and the plan (whose arrays'
    addresses the source's table lists); None where a step has no native form."""
    plan = runtime.plan({})
    slots = {slot.name: slot for slot in plan.inputs}
    outputs = runtime.llir.outputs
    if plan.in_place or plan.direct or sorted(slots) != sorted(names) or len(set(outputs)) != len(outputs):
        return None
    source = _Source()
    for position, name in enumerate(names):
        buffer = slots[name].buffer
        source.copy(source.array(buffer), source.parameter(f"i{position}", buffer), buffer.shape)
    at_output = {kid: position for position, kid in enumerate(outputs)}
    shapes: list = [None] * len(outputs)
    dtypes = {kernel.id: kernel.dtype for kernel in runtime.llir.kernels}
    steps = [step for _, step in plan.steps]
    while steps:
        step = steps.pop(0)
        if isinstance(step, _Sequence):
            steps[:0] = step.steps
        elif isinstance(step, _Copy) and step.target.shape == step.source.shape:
            source.copy(source.array(step.target), source.array(step.source), step.target.shape)
        elif isinstance(step, _Launch) and all(isinstance(a, np.ndarray) and a.ndim and a.flags.c_contiguous
                                               for a in step.args):
            source.call(step.function, [source.array(a) for a in step.args])
        elif isinstance(step, _Output) and step.kid in at_output:
            position = at_output[step.kid]
            source.copy(source.parameter(f"o{position}", step.array), source.array(step.array), step.array.shape)
            shapes[position] = (step.array.shape, dtypes[step.kid])
        else:
            return None
    return None if None in shapes else (source, shapes, plan)


class _Source:
    """The generated module: its body's lines, the kernels' modules it imports, and the addresses of the plan's
    arrays (the table's entries) it reads."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.kernels: dict[str, str] = {}  # module -> the name it is imported as
        self.addresses: list[int] = []

    def array(self, array: np.ndarray) -> str:
        """An expression for one of the plan's arrays (as a kernel takes it): a C array at its address, else its
        shape and strides (in bytes) over the memory from there."""
        array = kernel_array(array.reshape(1) if array.ndim == 0 else array)
        address = array.ctypes.data
        if address not in self.addresses:
            self.addresses.append(address)
        pointer, kind = f"at(table[{self.addresses.index(address)}])", f"np.{array.dtype.name}"
        if array.flags.c_contiguous:
            return f"carray({pointer}, {array.shape!r}, {kind})"
        return f"as_strided(carray({pointer}, (1,), {kind}), {array.shape!r}, {array.strides!r})"

    @staticmethod
    def parameter(name: str, like: np.ndarray) -> str:
        """An expression for the caller's array at parameter ``name``: C-contiguous, of ``like``'s shape and type."""
        return f"carray({name}, {(like.shape or (1,))!r}, np.{kernel_array(like).dtype.name})"

    def copy(self, target: str, source: str, shape: tuple[int, ...]) -> None:
        """Copy ``source`` into ``target`` (array expressions of ``shape``) element by element: a loop nest types in
        a fraction of the time numba takes over an array assignment."""
        n = len(self.lines)
        self.lines += [f"t{n} = {target}", f"s{n} = {source}"]
        index = ", ".join(f"j{axis}" for axis in range(len(shape))) or "0"
        for axis, extent in enumerate(shape):
            self.lines.append(f"{'    ' * axis}for j{axis} in range({extent}):")
        self.lines.append(f"{'    ' * len(shape)}t{n}[{index}] = s{n}[{index}]")

    def call(self, function: object, arguments: list[str]) -> None:
        module = function.py_func.__module__
        name = self.kernels.setdefault(module, f"k{len(self.kernels)}")
        self.lines.append(f"{name}({', '.join(arguments)})")

    def text(self, inputs: int, outputs: int) -> str:
        parameters = ["table", *(f"i{p}" for p in range(inputs)), *(f"o{p}" for p in range(outputs))]
        imports = [f"from {module} import kernel as {name}" for module, name in self.kernels.items()]
        signature = ", ".join(["types.voidptr"] * len(parameters))
        return "\n".join([
            "# luminal_lab native CPU program", "import numpy as np", "from numba import carray, cfunc, types",
            "from numpy.lib.stride_tricks import as_strided", "", "from luminal_lab.runtime.native import at",
            *imports, "", "", f"@cfunc(types.void({signature}), cache=True)", f"def kernel({', '.join(parameters)}):",
            f"    table = carray(table, ({len(self.addresses)},), np.uint64)", *(f"    {line}" for line in self.lines),
        ]) + "\n"
