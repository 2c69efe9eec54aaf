"""A CPU plan as one native function: its inputs copied in, its kernels and matmuls called, its outputs copied out.

At decode sizes a call costs what its Python costs, not what its kernels compute: a numpy array made for each tensor,
the plan's steps called one by one, each output made a tensor again; at prefill sizes the Python between some eighty
steps still costs several percent. A plan whose every step is a loop kernel (a ``_Launch``), a float matmul on torch's
threads (a ``_Matmul``: called here as MKL's ``cblas_?gemm_batch``, the routine torch's mm and bmm reach, found in
torch's own library), a copy of a read into its scratch or an output's copy is generated here as one numba ``cfunc``:
the caller hands it the addresses of its inputs and of fresh outputs (a tensor's ``data_ptr()``), and the address of
a table holding the addresses of the plan's own arrays. Called through ctypes, it replaces the plan's Python with one
foreign call. Inputs read in place and outputs written straight are pointed back at the plan's buffers first (the
native function copies them in and out); a weight read in place stays so, its table entries moved when another array
is bound (``Native.bind``).

Its source names the kernels by their modules and holds no address, so the kernel cache keeps it on disk like any
kernel (``KernelCache.function``), with numba's machine code of it. Typing and compiling it takes numba seconds, so
``build`` compiles it in a low-priority worker process in the background (``cache.Builders``) and loads it there
once it is on disk; a program seen before loads in milliseconds.
"""

from __future__ import annotations

import ctypes
import functools
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
from llvmlite import binding
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..codegen.cpu_loop import kernel_array
from ..core.dtypes import DType
from .cache import Builders
from .cpu import CPUPlan, CPURuntime, _Copy, _Direct, _Gather, _Launch, _Matmul, _Output, _Rebound, _Sequence

# a plan's runs at one binding before its native function is built (``Hot``): sizes seen this often are likely to be
# seen again (a prompt's length served again, a benchmark's or a training loop's fixed shapes), while a generation's
# decode steps bind a new length each
HOT_RUNS = 8
NATIVE_PLANS = 4  # bindings per runtime that ``Hot`` builds native functions for (each is seconds of numba's time)
COUNTED = 1 << 12  # bindings whose runs ``Hot`` counts, the oldest forgotten first (a generation binds thousands)
ROW_MAJOR, NO_TRANSPOSE, TRANSPOSE = 101, 111, 112  # CBLAS's enumerations
_GEMM = types.void(types.int32, *[types.voidptr] * 13, types.int32, types.voidptr)
gemm_f32 = types.ExternalFunction("cblas_sgemm_batch", _GEMM)
gemm_f64 = types.ExternalFunction("cblas_dgemm_batch", _GEMM)


@intrinsic
def at(typingctx, address):
    """The pointer at integer ``address`` (in a native program: ``carray`` takes pointers)."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(address), codegen


@intrinsic
def move(typingctx, target, source, count):
    """Copy ``count`` bytes from pointer ``source`` to pointer ``target`` (a memcpy)."""
    def codegen(context, builder, signature, args):
        cgutils.raw_memcpy(builder, args[0], args[1], args[2], 1)
    return types.void(types.voidptr, types.voidptr, types.int64), codegen


@njit(cache=True)
def copy_into(target: np.ndarray, target_strides: tuple, source: np.ndarray, source_strides: tuple,
              shape: tuple) -> None:
    """Copy an array of ``shape`` read from the flat ``source`` at ``source_strides`` (in elements) into the flat
    ``target`` at ``target_strides``, the last axis innermost: compiled once per rank and dtype and kept on disk, so
    that a copy is one call in a native function (a loop nest typed inline in each costs its build seconds)."""
    rank = len(shape)
    inner, along_target, along_source = shape[rank - 1], target_strides[rank - 1], source_strides[rank - 1]
    rows = 1
    for axis in range(rank - 1):
        rows *= shape[axis]
    index = np.zeros(rank, np.int64)
    at_target = at_source = 0
    for _ in range(rows if inner else 0):
        if along_target == 1 and along_source == 1:  # a slice copy, which LLVM vectorises
            target[at_target:at_target + inner] = source[at_source:at_source + inner]
        else:
            for j in range(inner):
                target[at_target + j * along_target] = source[at_source + j * along_source]
        axis = rank - 2
        while axis >= 0:  # the next row: an odometer over the outer axes
            index[axis] += 1
            at_target += target_strides[axis]
            at_source += source_strides[axis]
            if index[axis] < shape[axis]:
                break
            at_target -= target_strides[axis] * shape[axis]
            at_source -= source_strides[axis] * shape[axis]
            index[axis] = 0
            axis -= 1


@functools.cache
def blas() -> bool:
    """Whether MKL's batched gemms are found in torch's library (and made known to numba's linker by name, so that a
    native function compiled in another process loads here too)."""
    try:
        import torch

        library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        for name in ("cblas_sgemm_batch", "cblas_dgemm_batch"):
            binding.add_symbol(name, ctypes.cast(getattr(library, name), ctypes.c_void_p).value)
    except (ImportError, OSError, AttributeError):
        return False
    return True


@dataclass
class _Moved:
    """A weight the plan reads in place: the memory it was bound to when the table was written, and the table's
    entries inside it."""

    place: _Rebound
    base: int
    entries: list[int]


@dataclass(frozen=True)
class Native:
    """A plan's native function: ``function(address, *inputs, *outputs)`` takes ``address`` (of ``table``, which holds
    the addresses of the plan's arrays, kept alive by the plan held here, and of ``held``'s), then the addresses of the
    caller's inputs (C-contiguous, in the order of the ``names`` given to ``build``, of the plan's dtypes and shapes)
    and of fresh C-contiguous outputs of ``outputs``' shapes and dtypes (``llir.outputs`` order). The plan's weights
    are bound first (``bind``) where it has any."""

    function: Callable[..., int]
    outputs: list[tuple[tuple[int, ...], DType]]
    table: np.ndarray
    runtime: CPURuntime
    plan: CPUPlan
    source: str
    names: list[str]  # the inputs', in order
    held: list[np.ndarray]  # the matmuls' parameters and pointer arrays
    moved: list[_Moved]
    seen: list = field(default_factory=lambda: [None])  # the plan's binding of weights the table was checked at

    @property
    def address(self) -> int:
        return self.table.ctypes.data

    def bind(self, weights: Mapping[str, np.ndarray]) -> None:
        """Bind the plan's weights to ``weights`` (by name), copying in only those that changed; the table's entries
        in a weight read in place follow it to another array."""
        self.runtime.bind_weights(self.plan, weights)
        if self.plan.bound is self.seen[0]:  # no weight bound anew since the table was last checked
            return
        self.seen[0] = self.plan.bound
        table = self.table
        for moved in self.moved:
            address = moved.place.address
            if address != moved.base:
                for entry in moved.entries:
                    table[entry] = int(table[entry]) - moved.base + address
                moved.base = address

    def __call__(self, *addresses: int) -> bool:
        """Run on the addresses of the inputs and then the outputs (the weights bound already): whether it ran to the
        end (not: a gather met an index out of range, which the plan's steps then raise on)."""
        return not self.function(self.address, *addresses)


class Hot:
    """Runs a CPU runtime's plans (``CPURuntime.run`` of checked arrays, at any binding), each binding's as its native
    function once that plan has run ``HOT_RUNS`` times and its function is built (in the background meanwhile), for
    up to ``NATIVE_PLANS`` bindings; inputs that are not C-contiguous, and a gather's index out of range (which they
    raise on), take the plan's steps."""

    def __init__(self, runtime: CPURuntime) -> None:
        self.runtime = runtime
        self.runs: dict[tuple, int] = {}
        self.natives: dict[tuple, Future[Native | None]] = {}
        self.ready: dict[tuple, Native | None] = {}  # the natives' futures once done (None: it did not compile)

    def native(self, bindings: Mapping[str, int]) -> Native | None:
        """The native function of the plan of ``bindings`` once built; None before, or where it has none."""
        key = tuple(bindings.items())
        if key not in self.ready and key in self.natives and self.natives[key].done():
            built = self.natives[key]
            self.ready[key] = built.result() if built.exception() is None else None
        return self.ready.get(key)

    def run(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray],
            bindings: Mapping[str, int]) -> list[np.ndarray]:
        key = tuple(bindings.items())
        native = self.native(bindings)
        if native is not None:
            arrays = [inputs[name] for name in native.names]
            if all(array.flags.c_contiguous for array in arrays):
                native.bind(weights)
                outputs = [np.empty(shape, dtype.numpy) for shape, dtype in native.outputs]
                if native(*[array.__array_interface__["data"][0] for array in (*arrays, *outputs)]):
                    return outputs
        outputs = self.runtime.run(inputs, weights, bindings, checked=True)
        if key not in self.runs and len(self.runs) >= COUNTED:
            del self.runs[next(iter(self.runs))]
        runs = self.runs[key] = self.runs.get(key, 0) + 1
        if runs == HOT_RUNS and len(self.natives) < NATIVE_PLANS:
            names = [slot.name for slot in self.runtime.plan(bindings).inputs]
            future = build(self.runtime, names, bindings)
            if future is not None:
                self.natives[key] = future
        return outputs


def build(runtime: CPURuntime, names: Sequence[str],
          bindings: Mapping[str, int] | None = None) -> Future[Native | None] | None:
    """Start building the native function of the plan of ``runtime``'s ``bindings`` (default: none), taking its inputs
    in ``names`` order, in the background: a future of it (None where compiling it failed). None for a plan with
    another kind of step (a host cast, a scatter, a matmul in numpy or on one thread) or weights read in place whose
    memory overlaps."""
    program = _program(runtime, names, dict(bindings or {}))
    if program is None:
        return None
    source, outputs, plan, moved = program
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
        return Native(function.ctypes, outputs, table, runtime, plan, text, list(names), source.held, moved)
    return _builders().build(cache, lambda: [(text, ())], then=load)


def settle(timeout: float | None = None) -> None:
    """Wait until every native function this process started building is built (or failed to): a hot program's
    steady state, which a benchmark measures (``TimeoutError`` past ``timeout`` seconds)."""
    _builders().settle(timeout)


@functools.cache
def _builders() -> Builders:
    """One compile worker, at the lowest priority, for every native function this process builds."""
    return Builders(1)


def _program(runtime: CPURuntime, names: Sequence[str],
             bindings: dict[str, int]) -> tuple[_Source, list, CPUPlan, list[_Moved]] | None:
    """The native source of the plan of ``bindings``, its outputs' shapes and dtypes, the plan (whose arrays'
    addresses the source's table lists) and its weights read in place; None where a step has no native form."""
    plan = runtime.plan(bindings)
    slots = {slot.name: slot for slot in plan.inputs}
    outputs = runtime.llir.outputs
    if sorted(slots) != sorted(names) or len(set(outputs)) != len(outputs):
        return None
    weights = {slot.name for slot in plan.weights}
    for name, place in plan.in_place.items():
        if name not in weights:
            place.bind(place.buffer)  # copied in by the native function
    for place in (*plan.direct, *plan.pinned):
        place.bind(place.buffer)  # copied out by the native function; held to the plan's own buffer
    source = _Source()
    for position, name in enumerate(names):
        buffer = slots[name].buffer
        source.copy(buffer, f"i{position}", buffer)
    at_output = {kid: position for position, kid in enumerate(outputs)}
    shapes: list = [None] * len(outputs)
    dtypes = {kernel.id: kernel.dtype for kernel in runtime.llir.kernels}
    steps = [step for _, step in plan.steps]
    while steps:
        step = steps.pop(0)
        if isinstance(step, _Sequence):
            steps[:0] = step.steps
        elif isinstance(step, _Copy) and step.target.shape == step.source.shape \
                and step.target.dtype == step.source.dtype \
                and min((*step.target.strides, *step.source.strides), default=0) >= 0:
            source.copy(step.target, step.source, step.target)
        elif isinstance(step, (_Launch, _Gather)) and _native_arguments(launch := getattr(step, "launch", step)):
            source.call(launch.function, [source.array(a) for a in launch.args], checked=isinstance(step, _Gather))
        elif isinstance(step, _Matmul) and source.gemm(step):
            pass
        elif isinstance(step, (_Output, _Direct)) and step.kid in at_output:
            array = step.array if isinstance(step, _Output) else step.output.buffer.reshape(step.shape)
            position = at_output[step.kid]
            source.copy(f"o{position}", array, array)
            shapes[position] = (array.shape, dtypes[step.kid])
        else:
            return None
    moved = _moved(source.addresses, [place for name, place in plan.in_place.items() if name in weights])
    return None if None in shapes or moved is None else (source, shapes, plan, moved)


def _native_arguments(launch: _Launch) -> bool:
    """Whether a kernel's every argument is an array of the plan (the native function passes C arrays)."""
    return all(isinstance(a, np.ndarray) and a.ndim and a.flags.c_contiguous for a in launch.args)


def _moved(addresses: list[int], places: list[_Rebound]) -> list[_Moved] | None:
    """The table's entries (of ``addresses``) inside each weight read in place; None where one lies in two."""
    found = []
    taken: set[int] = set()
    for place in places:
        if place.address is None:
            return None
        end = place.address + place.buffer.nbytes
        entries = [i for i, address in enumerate(addresses) if place.address <= address < end]
        if taken & set(entries):
            return None
        taken |= set(entries)
        found.append(_Moved(place, place.address, entries))
    return found


class _Source:
    """The generated module: its body's lines, the kernels' modules it imports, and the addresses of the plan's
    arrays (the table's entries) it reads."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.kernels: dict[str, str] = {}  # module -> the name it is imported as
        self.addresses: list[int] = []
        self.held: list[np.ndarray] = []
        self.gemms: set[str] = set()  # the gemm functions it calls

    def entry(self, address: int) -> str:
        """An expression for ``address``, put in the table."""
        if address not in self.addresses:
            self.addresses.append(address)
        return f"table[{self.addresses.index(address)}]"

    def hold(self, array: np.ndarray) -> str:
        """An expression for the address of ``array``, which the native function keeps alive."""
        self.held.append(array)
        return self.entry(array.ctypes.data)

    def array(self, array: np.ndarray) -> str:
        """An expression for one of the plan's arrays (as a kernel takes it): a C array at its address, else its
        shape and strides (in bytes) over the memory from there."""
        array = kernel_array(array.reshape(1) if array.ndim == 0 else array)
        pointer, kind = f"at({self.entry(array.ctypes.data)})", f"np.{array.dtype.name}"
        if array.flags.c_contiguous:
            return f"carray({pointer}, {array.shape!r}, {kind})"
        return f"as_strided(carray({pointer}, (1,), {kind}), {array.shape!r}, {array.strides!r})"

    @staticmethod
    def parameter(name: str, like: np.ndarray) -> str:
        """An expression for the caller's array at parameter ``name``: C-contiguous, of ``like``'s shape and type."""
        return f"carray({name}, {(like.shape or (1,))!r}, np.{kernel_array(like).dtype.name})"

    def copy(self, target: np.ndarray | str, source: np.ndarray | str, like: np.ndarray) -> None:
        """Copy ``source`` into ``target`` (of ``like``'s shape and dtype): each one of the plan's arrays, or the name
        of a C-contiguous parameter; a memcpy where both are C-contiguous."""
        if all(isinstance(x, str) or x.flags.c_contiguous for x in (target, source)):
            target, source = (x if isinstance(x, str) else f"at({self.entry(x.ctypes.data)})"
                              for x in (target, source))
            self.lines.append(f"move({target}, {source}, {like.nbytes})")
            return
        shape = like.shape or (1,)
        operands = []
        for x in (target, source):
            if isinstance(x, str):
                operands += [self.parameter(x, like.reshape(-1)), _contiguous(shape)]
                continue
            x = kernel_array(x.reshape(1) if x.ndim == 0 else x)
            strides = tuple(stride // x.itemsize for stride in x.strides)
            span = 1 + sum(max(extent - 1, 0) * stride for extent, stride in zip(x.shape, strides))
            operands += [f"carray(at({self.entry(x.ctypes.data)}), ({span},), np.{x.dtype.name})", strides]
        self.lines.append(f"copy_into({operands[0]}, {operands[1]!r}, {operands[2]}, {operands[3]!r}, {shape!r})")

    def gemm(self, step: _Matmul) -> bool:
        """Call ``step``'s product as one batched gemm of MKL, as torch would on its threads; False (nothing added)
        where it is none such: numpy's, one run on one thread, or operands BLAS cannot take as they are."""
        if step.torch is None or step.serial or not blas():
            return False
        out, lhs, rhs = (x if x.dim() == 3 else x.unsqueeze(0) for x in step.operands)
        name = {step.torch.float32: "gemm_f32", step.torch.float64: "gemm_f64"}.get(out.dtype)
        count, m, n = out.shape
        k = lhs.shape[2]
        layouts = [_layout(lhs, m, k), _layout(rhs, k, n), _layout(out, m, n)]
        if name is None or None in layouts or layouts[2][0] != NO_TRANSPOSE:
            return False
        (ta, lda), (tb, ldb), (_, ldc) = layouts
        dtype = np.float32 if name == "gemm_f32" else np.float64
        ints = self.hold(np.array([ta, tb, m, n, k, lda, ldb, ldc, count], np.int32))
        scalars = self.hold(np.array([1, 0], dtype))  # alpha and beta
        table = self.hold(np.zeros(3 * count, np.uint64))  # the operands' matrices' addresses: lhs's, rhs's, out's
        pointers = f"g{len(self.lines)}"
        self.lines += [f"{pointers} = carray(at({table}), ({3 * count},), np.uint64)", f"for b in range({count}):"]
        for j, x in enumerate((lhs, rhs, out)):
            self.lines.append(f"    {pointers}[{j * count} + b] = {self.entry(x.data_ptr())} + "
                              f"np.uint64(b * {x.stride(0) * x.element_size()})")
        field = [f"at({ints} + np.uint64({4 * i}))" for i in range(9)]
        matrices = [f"at({table} + np.uint64({8 * j * count}))" for j in range(3)]
        self.gemms.add(name)
        self.lines.append(f"{name}({ROW_MAJOR}, {', '.join(field[:5])}, at({scalars}), {matrices[0]}, {field[5]}, "
                          f"{matrices[1]}, {field[6]}, at({scalars} + np.uint64({dtype().itemsize})), {matrices[2]}, "
                          f"{field[7]}, 1, {field[8]})")
        return True

    def call(self, function: object, arguments: list[str], checked: bool = False) -> None:
        """Call a kernel; ``checked``: a gather's, whose true result (an index out of range) returns 1 at once."""
        module = function.py_func.__module__
        name = self.kernels.setdefault(module, f"k{len(self.kernels)}")
        call = f"{name}({', '.join(arguments)})"
        self.lines += [f"if {call}:", "    return 1"] if checked else [call]

    def text(self, inputs: int, outputs: int) -> str:
        parameters = ["table", *(f"i{p}" for p in range(inputs)), *(f"o{p}" for p in range(outputs))]
        imports = [f"from {module} import kernel as {name}" for module, name in self.kernels.items()]
        signature = ", ".join(["types.voidptr"] * len(parameters))
        return "\n".join([
            "# luminal_lab native CPU program", "import numpy as np", "from numba import carray, cfunc, types",
            "from numpy.lib.stride_tricks import as_strided", "",
            f"from luminal_lab.runtime.native import {', '.join(['at', 'copy_into', 'move', *sorted(self.gemms)])}",
            *imports, "", "", f"@cfunc(types.int32({signature}), cache=True)", f"def kernel({', '.join(parameters)}):",
            f"    table = carray(table, ({len(self.addresses)},), np.uint64)", *(f"    {line}" for line in self.lines),
            "    return 0",
        ]) + "\n"


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A C-contiguous array's strides in elements."""
    return tuple(int(np.prod(shape[axis + 1:])) for axis in range(len(shape)))


def _layout(x, rows: int, cols: int) -> tuple[int, int] | None:
    """How row-major BLAS takes the ``[batch, rows, cols]`` torch view ``x``: as it is (unit stride along a row) or
    transposed (unit stride down a column), with its leading dimension; None when neither."""
    along, down = x.stride(2), x.stride(1)
    if along == 1 or cols == 1:
        lead, least, layout = (down if rows > 1 else cols), cols, NO_TRANSPOSE
    elif down == 1 or rows == 1:
        lead, least, layout = (along if cols > 1 else rows), rows, TRANSPOSE
    else:
        return None
    return (layout, lead) if lead >= max(1, least) else None
