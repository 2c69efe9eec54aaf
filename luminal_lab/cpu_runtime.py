"""The CPU runtime: runs an LLIR with numba kernels generated from it.

For each binding of the symbolic dimensions ``CPURuntime`` builds a ``Plan`` once: every
kernel's output buffer is allocated, inputs get buffers they are copied into on each call,
weights are copied into theirs once (again only when the caller passes a different array),
constants and iotas are computed, and every source read is resolved against its producer's
buffer. Shape trackers are separable (each axis adds ``stride(z)`` where ``mask(z)`` holds),
so a read is, axis by axis: strided (broadcast axes have stride 0); padded, i.e. strided over
one box, read from a zeroed scratch whose box is copied in on each call; a few strided axes
merged into one (a transpose then a reshape), copied into a scratch with one strided copy;
or, failing those, gathered into a scratch through index arrays precomputed from the
tracker (as the reference runtime reads it). Each kernel is then a closure over fixed arrays.

Elementwise ops, casts, reductions and Gather run as generated Python source compiled with
``numba.njit``. A kernel gets each operand as its flat buffer plus offsets and strides (the
axes that every operand steps through alike merged first), and its loop nest is specialised
by rank and by each operand's innermost stride (unit, zero or other): LLVM vectorises only
loops over rows it knows are contiguous, which numba's strided ("A" layout) arrays never
are. So one compiled kernel serves every shape and stride of its op, dtypes, rank and
innermost strides. Kernels of ``PARALLEL_THRESHOLD`` elements or more get a ``prange``
variant. f16 and bf16 travel as their uint16 bits, compute in f32 and round on store;
float32 Exp2/Exp/Log2/Sin use vectorisable versions (``cpu_math``). Casts to or from f16
and bf16 and Scatter are numpy host ops. A ``Mul`` read only by a ``SumReduce`` that
contracts it like a matmul runs as one BLAS call into the reduction's buffer
(``contraction``), and the ``Mul`` itself is skipped.

Kernels are cached by source: in process, and on disk as importable modules named by the
hash of their source (numba's ``cache=True`` stores the machine code beside them), in
``~/.cache/luminal_lab/kernels`` or ``$LUMINAL_LAB_KERNEL_CACHE``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numba
import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import cpu_math  # before any kernel compiles: it sets numba's CPU features
from .contraction import Contraction
from .dtypes import DType
from .errors import DTypeBoundaryError, LuminalError, ShapeError, UnsupportedOpError
from .llir import BINARY_KERNELS, IN_REGION, LLIR, REDUCE_KERNELS, UNARY_KERNELS, Kernel
from .regions import RegionBody, find_regions
from .shape_tracker import ShapeTracker
from .symbolic import Expr

CACHE_ENV = "LUMINAL_LAB_KERNEL_CACHE"
PARALLEL_THRESHOLD = 1 << 16  # elements; below it numba's thread start-up costs more than it saves
_HALF = (DType.F16, DType.BF16)
Step = Callable[[], None]


# ---- the kernel cache -----------------------------------------------------------------


@dataclass
class CacheStats:
    """Kernel signatures compiled in this process and loaded from the disk cache, with the seconds each took."""

    compiled: int = 0
    loaded: int = 0
    compile_seconds: float = 0.0
    load_seconds: float = 0.0

    def __repr__(self) -> str:
        return (f"<CacheStats compiled {self.compiled} ({self.compile_seconds:.2f} s), "
                f"loaded {self.loaded} ({self.load_seconds:.2f} s)>")


@functools.cache
def _codegen_version() -> str:
    """Hash of the helpers every kernel links (so kernels cached against older helpers are not reused)."""
    return hashlib.sha256(Path(cpu_math.__file__).read_bytes()).hexdigest()[:16]


class KernelCache:
    """Generated kernel sources -> numba dispatchers, in memory and as modules in ``directory``."""

    _functions: ClassVar[dict[str, Any]] = {}  # source -> dispatcher, shared by every cache of the process

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser().resolve()
        self.stats = CacheStats()

    def function(self, source: str):
        """The dispatcher of ``source``'s ``kernel``, importing (and first writing) its module if needed."""
        if source in self._functions:
            return self._functions[source]
        name = "lk_" + hashlib.sha256(source.encode()).hexdigest()[:32]
        path = self.directory / f"{name}.py"
        if not path.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(source)
            os.replace(partial, path)  # atomic: a concurrent process sees all of it or nothing
            importlib.invalidate_caches()
        if str(self.directory) not in sys.path:
            sys.path.append(str(self.directory))
        function = importlib.import_module(name).kernel
        self._functions[source] = function
        return function

    def compile(self, source: str, args: Sequence[np.ndarray]):
        """The dispatcher of ``source``, compiled (or loaded from disk) for the types of ``args``."""
        function = self.function(source)
        signature = tuple(numba.typeof(a) for a in args)
        if signature not in function.overloads:
            hits = sum(function.stats.cache_hits.values())
            start = time.perf_counter()
            function.compile(signature)
            seconds = time.perf_counter() - start
            if sum(function.stats.cache_hits.values()) > hits:
                self.stats.loaded += 1
                self.stats.load_seconds += seconds
            else:
                self.stats.compiled += 1
                self.stats.compile_seconds += seconds
        return function


_caches: dict[Path, KernelCache] = {}


def kernel_cache() -> KernelCache:
    """The cache in ``$LUMINAL_LAB_KERNEL_CACHE`` (default ``~/.cache/luminal_lab/kernels``), one per directory."""
    directory = Path(os.environ.get(CACHE_ENV) or "~/.cache/luminal_lab/kernels").expanduser().resolve()
    if directory not in _caches:
        _caches[directory] = KernelCache(directory)
    return _caches[directory]


# ---- kernel sources -------------------------------------------------------------------


def _header(parallel: bool, fastmath: str = "") -> str:
    """Imports and the ``njit`` decorator; ``fastmath`` names one LLVM flag: ``contract`` (fused multiply-adds in
    the helpers' polynomials) or ``reassoc`` (lets LLVM vectorise a float sum, summing in lanes)."""
    options = "cache=True, error_model=\"numpy\""
    if parallel:
        options += ", parallel=True"
    if fastmath:
        options += f", fastmath={{\"{fastmath}\"}}"
    return (f"# luminal_lab CPU kernel, helpers {_codegen_version()}\n"
            "import numba\nimport numpy as np\n\nfrom luminal_lab import cpu_math as m\n\n\n"
            f"@numba.njit({options})\n")


def _load(dtype: DType, element: str) -> str:
    """An element as its compute type: f16/bf16 bits widen to f32."""
    if dtype == DType.F16:
        return f"m.f16_load({element})"
    if dtype == DType.BF16:
        return f"m.bf16_load({element})"
    return element


def _store(dtype: DType, value: str) -> str:
    """A compute value as the storage type: f32 rounds to f16/bf16 bits."""
    if dtype == DType.F16:
        return f"m.f16_store(np.float32({value}))"
    if dtype == DType.BF16:
        return f"m.bf16_store(np.float32({value}))"
    return value


_UNARY_F32 = {"Log2": "m.log2f({x})", "Exp2": "m.exp2f({x})", "Exp": "m.expf({x})", "Sin": "m.sinf({x})",
              "Sqrt": "np.sqrt({x})", "Recip": "np.float32(1.0) / {x}"}
_UNARY_F64 = {"Log2": "np.log2({x})", "Exp2": "np.exp2({x})", "Exp": "np.exp({x})", "Sin": "np.sin({x})",
              "Sqrt": "np.sqrt({x})", "Recip": "1.0 / {x}"}
_BINARY = {"Add": "{x} + {y}", "Mul": "{x} * {y}", "LessThan": "{x} < {y}"}
_CAST = {DType.F32: "np.float32({x})", DType.F64: "np.float64({x})", DType.I32: "np.int32({x})",
         DType.I64: "np.int64({x})", DType.BOOL: "{x} != 0"}


def _expression(op: str, dtype: DType, target: DType, operands: list[str]) -> str:
    """The value of ``op`` on loaded operands of ``dtype`` (its compute type), for an output of ``target``."""
    if op in UNARY_KERNELS:
        return (_UNARY_F64 if dtype == DType.F64 else _UNARY_F32)[op].format(x=operands[0])
    if op in _BINARY:
        value = _BINARY[op].format(x=operands[0], y=operands[1])
        return f"({value}) != 0" if target == DType.BOOL and op != "LessThan" else value  # bool + bool is or
    if op == "Mod":
        if dtype.is_float:
            return f"np.fmod({operands[0]}, {operands[1]})"
        return f"m.fmod_int(np.int64({operands[0]}), np.int64({operands[1]}))"
    if op == "Cast":
        return _CAST[target].format(x=operands[0])
    raise UnsupportedOpError(op, detail="no CPU kernel source")


def _prologue(arity: int, width: int) -> list[str]:
    """Read each operand's offset and ``width`` strides (in elements) from ``meta``."""
    lines = []
    for j in range(arity):
        base = j * (width + 1)
        lines.append(f"    o{j} = meta[{base}]")
        lines += [f"    s{j}_{d} = meta[{base + 1 + d}]" for d in range(width)]
    return lines


def _outer(axes: int, parallel: bool, arity: int, depth: int) -> list[str]:
    """Loops over ``out``'s first ``axes`` axes, tracking each operand's position ``p{j}_{d}``."""
    lines = []
    for d in range(axes):
        loop = "numba.prange" if parallel and d == 0 else "range"
        lines.append("    " * (depth + d) + f"for i{d} in {loop}(out.shape[{d}]):")
        for j in range(arity):
            start = f"o{j}" if d == 0 else f"p{j}_{d - 1}"
            lines.append("    " * (depth + d + 1) + f"p{j}_{d} = {start} + i{d} * s{j}_{d}")
    return lines


def _operands(kinds: str, dtype: DType | None, axes: int, inner: int, indent: str) -> tuple[list[str], list[str]]:
    """Statements hoisted above the innermost loop (over index ``i{inner}``) and each operand's value inside it.

    ``kinds`` has one letter per operand for its innermost stride: ``c`` unit (read through a contiguous row, so
    LLVM vectorises), ``b`` zero (read once), ``s`` any. ``dtype`` None reads the stored bits as they are.
    """
    load = (lambda element: element) if dtype is None else (lambda element: _load(dtype, element))
    hoisted, values = [], []
    for j, kind in enumerate(kinds):
        position = f"o{j}" if axes == 0 else f"p{j}_{axes - 1}"
        if kind == "c":
            hoisted.append(f"{indent}r{j} = x{j}[{position}:]")
            values.append(load(f"r{j}[i{inner}]"))
        elif kind == "b":
            hoisted.append(f"{indent}b{j} = {load(f'x{j}[{position}]')}")
            values.append(f"b{j}")
        else:
            values.append(load(f"x{j}[{position} + i{inner} * s{j}_{inner}]"))
    return hoisted, values


def _elementwise_nest(kinds: str, dtype: DType | None, rank: int, parallel: bool,
                      body: Callable[[list[str]], list[str]], depth: int = 1) -> list[str]:
    """The loop nest of an elementwise kernel; ``body`` turns the operands' values into innermost statements."""
    lines = _outer(rank - 1, parallel, len(kinds), depth)
    indent = "    " * (depth + rank - 1)
    hoisted, values = _operands(kinds, dtype, rank - 1, rank - 1, indent)
    loop = "numba.prange" if parallel and rank == 1 else "range"
    lines += hoisted + [f"{indent}for i{rank - 1} in {loop}(out.shape[{rank - 1}]):"]
    return lines + [f"{indent}    {line}" for line in body(values)]


def _index(rank: int) -> str:
    return ", ".join(f"i{d}" for d in range(rank))


# an int32 max reduction keeps the loop vectorised (a conditional count does not)
_SIN_FLAG = "max(big, np.int32(abs({x}) >= m.SIN_LIMIT))"


def elementwise_source(op: str, dtype: DType, target: DType, kinds: str, rank: int, parallel: bool) -> str:
    """``kernel(out, x0, ..., meta)``: ``out = op(x0, ...)``; ``out`` has ``rank`` contiguous axes, operand ``j``
    is the flat buffer ``x{j}`` read at ``meta``'s offset and strides, its innermost stride of kind ``kinds[j]``."""
    out = f"out[{_index(rank)}]"
    raw = op == "Cast" and dtype == target  # a copy moves the stored bits as they are
    args = ", ".join(["out"] + [f"x{j}" for j in range(len(kinds))] + ["meta"])
    lines = [f"def kernel({args}):", *_prologue(len(kinds), rank)]
    if op == "Sin" and dtype != DType.F64:  # sinf's reduction is exact below SIN_LIMIT; libm takes the rest
        lines.append("    big = np.int32(0)")
        lines += _elementwise_nest(kinds, dtype, rank, parallel, lambda v: [
            f"v = {v[0]}", f"{out} = {_store(target, 'm.sinf(v)')}", f"big = {_SIN_FLAG.format(x='v')}"])
        lines.append("    if big:")
        lines += _elementwise_nest(kinds, dtype, rank, False, lambda v: [
            f"v = {v[0]}", "if abs(v) >= m.SIN_LIMIT:",
            f"    {out} = {_store(target, 'np.float32(np.sin(np.float64(v)))')}"], depth=2)
    elif raw:
        lines += _elementwise_nest(kinds, None, rank, parallel, lambda v: [f"{out} = {v[0]}"])
    else:
        lines += _elementwise_nest(kinds, dtype, rank, parallel, lambda v: [
            f"{out} = {_store(target, _expression(op, dtype, target, v))}"])
    return _header(parallel, "contract" if op in UNARY_KERNELS else "") + "\n".join(lines) + "\n"


_COMPUTE_CAST = {DType.F32: "np.float32({x})", DType.F16: "np.float32({x})", DType.BF16: "np.float32({x})",
                 DType.F64: "np.float64({x})", DType.I32: "np.int32({x})", DType.I64: "np.int64({x})",
                 DType.BOOL: "({x}) != 0"}


def _region_statements(body: RegionBody, values: list[str], exact_sin: bool) -> tuple[list[str], list[str]]:
    """The statements computing ``body``'s steps from its inputs' ``values`` (each step's value in the compute
    type, as an unfused kernel would store it), and the names of the f32 Sin operands. With ``exact_sin``
    those Sins take libm's sin beyond ``SIN_LIMIT`` instead."""
    dtype = body.dtype
    lines = [f"a{j} = {value}" for j, value in enumerate(values)]  # x{j} is the buffer, a{j} its element
    sin_operands = []
    for i, (op, names) in enumerate(body.steps):
        operands = [f"a{name[1:]}" if name[0] == "x" else name for name in names]
        if op == "Sin" and dtype != DType.F64:
            (x,) = operands
            sin_operands.append(x)
            value = (f"m.sinf({x}) if abs({x}) < m.SIN_LIMIT else np.float32(np.sin(np.float64({x})))" if exact_sin
                     else f"m.sinf({x})")
        else:
            value = _expression(op, dtype, dtype, operands)
        lines.append(f"t{i} = {_COMPUTE_CAST[dtype].format(x=value)}")
    return lines, sin_operands


def region_source(body: RegionBody, kinds: str, rank: int, parallel: bool) -> str:
    """``kernel(out, x0, ..., meta)``: a fused region as one loop nest, ``out`` = the last of ``body``'s steps
    on each element; operands as in ``elementwise_source``. f32 Sins run ``sinf`` and, where any of their
    arguments reached ``SIN_LIMIT``, the nest runs again (serially) with libm's sin for those."""
    dtype, out = body.dtype, f"out[{_index(rank)}]"
    args = ", ".join(["out"] + [f"x{j}" for j in range(len(kinds))] + ["meta"])
    lines = [f"def kernel({args}):", *_prologue(len(kinds), rank)]

    def statements(values: list[str], exact_sin: bool) -> list[str]:
        computed, sin_operands = _region_statements(body, values, exact_sin)
        counted = [f"big = {_SIN_FLAG.format(x=x)}" for x in sin_operands if not exact_sin]
        return [*computed, f"{out} = {_store(dtype, body.result)}", *counted]

    _, sin_operands = _region_statements(body, [], False)
    if sin_operands:
        lines.append("    big = np.int32(0)")
    lines += _elementwise_nest(kinds, dtype, rank, parallel, lambda v: statements(v, False))
    if sin_operands:
        lines.append("    if big:")
        lines += _elementwise_nest(kinds, dtype, rank, False, lambda v: statements(v, True), depth=2)
    unary = any(op in UNARY_KERNELS for op, _ in body.steps)
    return _header(parallel, "contract" if unary else "") + "\n".join(lines) + "\n"


def reduce_source(op: str, dtype: DType, kind: str, rank: int, parallel: bool) -> str:
    """``kernel(out, x0, meta)``: ``out[...] = sum/max(x0[..., :])``; ``out`` has ``rank`` contiguous axes, ``x0``
    is a flat buffer read at ``meta``'s offset and ``rank + 1`` strides (the reduced one of ``kind``), then the
    reduced extent."""
    lines = ["def kernel(out, x0, meta):", *_prologue(1, rank + 1), f"    n = meta[{rank + 2}]"]
    lines += _outer(rank, parallel, 1, 1)
    indent = "    " * (rank + 1)
    hoisted, (value,) = _operands("c" if kind == "c" else "s", dtype, rank, rank, indent)
    if op == "SumReduce":
        init = {DType.F64: "0.0"}.get(dtype, "np.float32(0.0)" if dtype.is_float else "0")
        body = [f"acc = {init}", f"for i{rank} in range(n):", f"    acc += {value}"]
    elif dtype == DType.F64:  # MaxReduce: NaN wins, as np.max
        body = [f"i{rank} = 0", f"acc = {value}", f"for i{rank} in range(1, n):", f"    v = {value}",
                "    acc = v if v > acc or v != v else acc"]
    elif dtype.is_float:  # a max over order-preserving integer keys vectorises (NaN keys are the largest)
        body = ["key = m.KEY_MIN", f"for i{rank} in range(n):", f"    k = m.f32_key({value})",
                "    key = k if k > key else key", "acc = m.key_f32(key)"]
    else:
        body = [f"i{rank} = 0", f"acc = {value}", f"for i{rank} in range(1, n):", f"    v = {value}",
                "    acc = v if v > acc else acc"]
    body.append(f"out[{_index(rank)}] = {_store(dtype, 'acc')}")
    lines += hoisted + [indent + line for line in body]
    return _header(parallel, "reassoc" if op == "SumReduce" and dtype.is_float else "") + "\n".join(lines) + "\n"


def take_source(kind: str, rank: int, parallel: bool) -> str:
    """``kernel(out, x0, meta, data)``: ``out = data[x0]`` with ``x0`` read as an elementwise operand (innermost
    stride of ``kind``); returns how many indexes fall outside ``data`` (those read ``data[0]``)."""
    out = f"out[{_index(rank)}]"
    lines = ["def kernel(out, x0, meta, data):", *_prologue(1, rank), "    n = data.shape[0]", "    bad = 0"]
    lines += _elementwise_nest(kind, None, rank, parallel, lambda v: [
        f"k = {v[0]}", "inside = (k >= 0) & (k < n)", "bad += 0 if inside else 1", f"{out} = data[k if inside else 0]"])
    return _header(parallel) + "\n".join(lines + ["    return bad"]) + "\n"


def gather_source(masked: bool, parallel: bool) -> str:
    """``kernel(out, src, index[, valid, zero])``: ``out[i] = src[index[i]]`` (``zero[0]`` where not valid)."""
    loop = "numba.prange" if parallel else "range"
    if masked:
        lines = ["def kernel(out, src, index, valid, zero):", f"    for i in {loop}(out.shape[0]):",
                 "        out[i] = src[index[i]] if valid[i] else zero[0]"]
    else:
        lines = ["def kernel(out, src, index):", f"    for i in {loop}(out.shape[0]):",
                 "        out[i] = src[index[i]]"]
    return _header(parallel) + "\n".join(lines) + "\n"


# ---- profiles -------------------------------------------------------------------------


@dataclass
class Profile:
    """Median seconds per kernel id (each kernel call timed on its own) and per whole run (timed separately)."""

    kernels: dict[int, float]
    total: float
    trials: int
    kernel_ops: dict[int, str] = field(default_factory=dict)

    def hot_spots(self, n: int = 10) -> list[tuple[int, str, float]]:
        """The ``n`` slowest kernels as ``(kernel id, op, seconds)``."""
        ranked = sorted(self.kernels.items(), key=lambda item: -item[1])[:n]
        return [(kid, self.kernel_ops.get(kid, ""), seconds) for kid, seconds in ranked]

    def __repr__(self) -> str:
        return f"<Profile {len(self.kernels)} kernels, {self.total * 1e3:.3f} ms per run (median of {self.trials})>"


# ---- the runtime ----------------------------------------------------------------------


_HALF_NUMPY = tuple(d.numpy for d in _HALF)


def _numba_view(array: np.ndarray) -> np.ndarray:
    """What a kernel receives: f16/bf16 as their uint16 bits."""
    return array.view(np.uint16) if array.dtype in _HALF_NUMPY else array


@dataclass
class _View:
    """A read of a flat contiguous buffer: element ``index`` is ``flat[offset + sum(index * strides)]``.

    ``refresh`` are the steps that fill ``flat`` first when it is a scratch copy (a padded or gathered view).
    """

    flat: np.ndarray
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    refresh: list[Step] = field(default_factory=list)

    @property
    def array(self) -> np.ndarray:
        """The same read as a numpy view."""
        item = self.flat.itemsize
        return as_strided(self.flat[self.offset:], self.shape, tuple(s * item for s in self.strides))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, inner = [], 1
    for d in reversed(shape):
        strides.append(inner)
        inner *= d
    return tuple(reversed(strides))


def _collapse(shape: Sequence[int], strides: Sequence[Sequence[int]],
              keep_last: bool = False) -> tuple[list[int], list[list[int]]]:
    """The same index space over fewer axes: size-1 axes dropped, and neighbours merged where every operand
    steps through them alike. With ``keep_last`` the last axis (a reduction's) stays apart. At least one axis
    (two with ``keep_last``) remains."""
    last = len(shape) - 1
    dims: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for i, size in enumerate(shape):
        if size == 1 and not (keep_last and i == last):
            continue
        inner = [s[i] for s in strides]
        if dims and not (keep_last and i == last) and all(m[-1] == t * size for m, t in zip(merged, inner)):
            dims[-1] *= size
            for m, t in zip(merged, inner):
                m[-1] = t
        else:
            dims.append(size)
            for m, t in zip(merged, inner):
                m.append(t)
    while len(dims) < (2 if keep_last else 1):
        dims.insert(0, 1)
        for m in merged:
            m.insert(0, 0)
    return dims, merged


def _kind(stride: int) -> str:
    return "c" if stride == 1 else "b" if stride == 0 else "s"


def _loop_operands(out: np.ndarray, views: Sequence[_View]) -> tuple[int, str, list]:
    """What an elementwise loop nest over ``out`` reading ``views`` is generated for and called with: its rank
    after collapsing axes, each view's innermost-stride kind, and the arguments (out, the views' flat buffers,
    then every view's offset and strides)."""
    dims, strides = _collapse(out.shape, [_contiguous_strides(out.shape)] + [v.strides for v in views])
    kinds = "".join(_kind(s[-1]) for s in strides[1:])
    meta = np.array([x for v, s in zip(views, strides[1:]) for x in (v.offset, *s)], np.int64)
    return len(dims), kinds, [_numba_view(out.reshape(dims)), *(_numba_view(v.flat) for v in views), meta]


def _nest(positions: np.ndarray) -> list[tuple[int, int]] | None:
    """``(size, step)`` of the strided axes, outermost first, whose nest visits ``positions`` (from 0), or None.

    ``[0, 1, 2, 8, 9, 10]`` is ``[(2, 8), (3, 1)]``: a run of equal steps sets the inner axis, and the positions
    must repeat that run from each start, the starts forming a nest in turn.
    """
    step = _arithmetic(positions)
    if step is not None:
        return [(positions.size, step)]
    steps = np.diff(positions)
    width = 1 + int(np.argmax(steps != steps[0]))
    if positions.size % width:
        return None
    blocks = positions.reshape(-1, width)
    if not np.array_equal(blocks - blocks[:, :1], np.broadcast_to(blocks[0] - blocks[0, 0], blocks.shape)):
        return None
    outer = _nest(blocks[:, 0])
    return None if outer is None else [*outer, (width, int(steps[0]))]


def _arithmetic(values: np.ndarray) -> int | None:
    """The common step of an arithmetic sequence (0 for fewer than two values), or None."""
    if values.size < 2:
        return 0
    step = int(values[1] - values[0])
    return step if np.array_equal(np.diff(values), np.full(values.size - 1, step)) else None


@dataclass
class _Weight:
    name: str
    buffer: np.ndarray
    bound: Any = None  # the caller's array last copied in


@dataclass
class Plan:
    """What one binding of the symbolic dimensions runs: buffers by kernel id, the (kernel id, step) pairs in
    order, the buffers inputs and weights are copied to, and the fresh arrays the Output steps make in a run."""

    inputs: list[tuple[str, np.ndarray]]
    weights: list[_Weight]
    steps: list[tuple[int, Step]]
    buffers: dict[int, np.ndarray]
    results: dict[int, np.ndarray]


class CPURuntime:
    """Runs an LLIR on the CPU: ``run(inputs, weights, bindings)`` returns the outputs in ``llir.outputs`` order."""

    def __init__(self, llir: LLIR, cache: KernelCache | None = None):
        self.llir = llir
        self.cache = cache or kernel_cache()
        self._plans: dict[tuple, Plan] = {}
        self._weights: dict[str, np.ndarray] = {}

    @property
    def plans(self) -> dict[tuple, Plan]:
        """The plans built so far, by sorted ``(dimension, size)`` pairs."""
        return self._plans

    def plan(self, bindings: Mapping[str, int] | None = None) -> Plan:
        """The plan for one binding of the symbolic dimensions (built, and its kernels compiled, on first use)."""
        bindings = dict(bindings or {})
        key = tuple(sorted(bindings.items()))
        if key not in self._plans:
            self._plans[key] = _Planner(self, bindings).plan()
        return self._plans[key]

    def _prepare(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray],
                 bindings: Mapping[str, int] | None) -> Plan:
        self._weights.update(weights)
        plan = self.plan(bindings)
        for name, buffer in plan.inputs:
            if name not in inputs:
                raise LuminalError(f"missing input {name!r}; the inputs are {[n for n, _ in plan.inputs]}")
            _fill(buffer, inputs[name], name)
        for weight in plan.weights:
            value = self._weights.get(weight.name)
            if value is None:
                raise LuminalError(f"missing weight {weight.name!r}")
            if value is not weight.bound:
                _fill(weight.buffer, value, weight.name)
                weight.bound = value
        return plan

    def run(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
            bindings: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Run once; weights are copied in only when first seen (or when a different array is passed)."""
        with np.errstate(all="ignore"):
            plan = self._prepare(inputs, weights or {}, bindings)
            for _, step in plan.steps:
                step()
            return self._collect(plan)

    def profile(self, inputs: Mapping[str, np.ndarray], weights: Mapping[str, np.ndarray] | None = None,
                bindings: Mapping[str, int] | None = None, warmup: int = 2, trials: int = 10) -> Profile:
        """Median seconds per kernel and per run over ``trials`` runs after ``warmup`` runs; fills ``llir.times``."""
        for _ in range(warmup):
            self.run(inputs, weights, bindings)
        per_kernel: dict[int, list[float]] = defaultdict(list)
        totals = []
        clock = time.perf_counter
        for _ in range(trials):
            start = clock()
            self.run(inputs, weights, bindings)
            totals.append(clock() - start)
            with np.errstate(all="ignore"):
                plan = self._prepare(inputs, weights or {}, bindings)
                for kid, step in plan.steps:
                    begin = clock()
                    step()
                    per_kernel[kid].append(clock() - begin)
        medians = {kid: statistics.median(times) for kid, times in per_kernel.items()}
        self.llir.times = dict(medians)
        ops = {k.id: k.op for k in self.llir.kernels}
        return Profile(medians, statistics.median(totals), trials, {kid: ops[kid] for kid in medians})

    def _collect(self, plan: Plan) -> list[np.ndarray]:
        outputs = [plan.results[kid] if kid in plan.results else plan.buffers[kid].copy() for kid in self.llir.outputs]
        plan.results.clear()  # the caller owns them now
        return outputs


def _fill(buffer: np.ndarray, value: np.ndarray, name: str) -> None:
    value = np.asarray(value)
    if value.dtype != buffer.dtype:
        raise DTypeBoundaryError(f"{name!r} is {value.dtype} but the LLIR declares {buffer.dtype}; "
                                 "nothing is cast implicitly")
    if value.shape != buffer.shape:
        raise ShapeError(f"{name!r} has shape {list(value.shape)} but the plan expects {list(buffer.shape)}")
    np.copyto(buffer, value)


class _Planner:
    """Builds one plan: buffers, views, compiled kernels and the steps that run them."""

    def __init__(self, runtime: CPURuntime, bindings: dict[str, int]):
        self.llir = runtime.llir
        self.cache = runtime.cache
        self.bindings = bindings
        self.kernels = {k.id: k for k in self.llir.kernels}
        self.consumers: dict[int, list[Kernel]] = defaultdict(list)
        for kernel in self.llir.kernels:
            for src, _ in kernel.sources:
                self.consumers[src].append(kernel)
        self.regions = {region.end: region for region in find_regions(self.llir)}
        self.buffers: dict[int, np.ndarray] = {}
        self.contractions: dict[int, tuple[Contraction, _View, _View]] = {}
        self.weight_names = set(runtime._weights)
        self.result = Plan([], [], [], self.buffers, {})

    def size(self, expr: Expr) -> int:
        return int(expr.evaluate(self.bindings))

    def plan(self) -> Plan:
        for kernel in self.llir.kernels:
            if kernel.op in IN_REGION or (kernel.op == "Mul" and self._contraction(kernel)):
                continue  # computed by its region's end, or by its reduction's matmul
            if kernel.op != "Output":
                shape = tuple(self.size(d) for d in kernel.shape)
                self.buffers[kernel.id] = np.zeros(shape, kernel.dtype.numpy)
            step = self._step(kernel)
            if step is not None:
                self.result.steps.append((kernel.id, step))
        return self.result

    # ---- views ----------------------------------------------------------------------
    def view(self, source: int, tracker: ShapeTracker) -> _View:
        """How to read ``source``'s buffer through ``tracker``.

        Each axis adds ``stride(z)`` to the flat index where ``mask(z)`` holds, so the axes are looked at one by
        one, and the first of these that fits is taken: strided (every axis steps evenly over one run of valid
        positions; a padded view is a zeroed scratch whose valid box is copied in on each call), a nest of
        strided axes copied into a scratch, or a gather through precomputed indexes.
        """
        flat = self.buffers[source].reshape(-1)
        dims = tuple(self.size(d) for d in tracker.dims)
        if 0 in dims:
            return _View(flat, 0, dims, (0,) * len(dims))
        positions, valids = [], []
        for d, stride, mask in zip(dims, tracker.strides, tracker.masks):
            z = np.arange(d, dtype=np.int64)
            positions.append(np.broadcast_to(np.asarray(stride.evaluate(self.bindings, z), np.int64), (d,)))
            valids.append(np.broadcast_to(np.asarray(mask.evaluate(self.bindings, z)) != 0, (d,)))
        return (self._strided(source, flat, dims, positions, valids)
                or self._nested(source, flat, dims, positions, valids)
                or self._gathered(source, flat, dims, positions, valids))

    def _strided(self, source: int, flat: np.ndarray, dims: tuple[int, ...], positions: list[np.ndarray],
                 valids: list[np.ndarray]) -> _View | None:
        """A strided view, or a padded one (zeros, and the strided box copied in); None when an axis is no run."""
        box = [np.flatnonzero(v) for v in valids]
        if not all(b.size == 0 or b[-1] - b[0] + 1 == b.size for b in box):
            return None
        steps = [_arithmetic(p[b]) for p, b in zip(positions, box)]
        if any(step is None for step in steps):
            return None
        if all(v.all() for v in valids):
            return self._checked(_View(flat, int(sum(p[0] for p in positions)), dims, tuple(steps)), source)
        scratch = np.zeros(dims, flat.dtype)
        padded = _View(scratch.reshape(-1), 0, dims, _contiguous_strides(dims))
        if any(b.size == 0 for b in box):
            return padded  # nothing but padding
        inside = self._checked(_View(flat, int(sum(p[b[0]] for p, b in zip(positions, box))),
                                     tuple(b.size for b in box), tuple(steps)), source).array
        target = scratch[tuple(slice(b[0], b[-1] + 1) for b in box)]
        padded.refresh.append(lambda: np.copyto(target, inside))
        return padded

    @staticmethod
    def _compact(dims: tuple[int, ...], positions: list[np.ndarray],
                 valids: list[np.ndarray]) -> tuple[list[bool], tuple[int, ...], tuple[int, ...]]:
        """Which axes read one element throughout (broadcast), the shape with those axes 1, and the strides of a
        contiguous scratch of that shape read with stride 0 along them."""
        constant = [bool((p == p[0]).all() and v.all()) for p, v in zip(positions, valids)]
        compact = tuple(1 if c else d for c, d in zip(constant, dims))
        return constant, compact, tuple(0 if c else s for c, s in zip(constant, _contiguous_strides(compact)))

    def _nested(self, source: int, flat: np.ndarray, dims: tuple[int, ...], positions: list[np.ndarray],
                valids: list[np.ndarray]) -> _View | None:
        """Unpadded axes that each step through a few strided ones (a transpose, then a reshape): one strided
        copy into a scratch, of the varying axes only. None when an axis is no such nest."""
        if not all(v.all() for v in valids):
            return None
        constant, compact, strides = self._compact(dims, positions, valids)
        nests = [[(1, 0)] if c else _nest(p - p[0]) for p, c in zip(positions, constant)]
        if any(nest is None for nest in nests):
            return None
        inside = self._checked(_View(flat, int(sum(p[0] for p in positions)),
                                     tuple(n for nest in nests for n, _ in nest),
                                     tuple(s for nest in nests for _, s in nest)), source).array
        scratch = np.zeros(compact, flat.dtype)
        target = scratch.reshape(inside.shape)
        return _View(scratch.reshape(-1), 0, dims, strides, [lambda: np.copyto(target, inside)])

    def _gathered(self, source: int, flat: np.ndarray, dims: tuple[int, ...], positions: list[np.ndarray],
                  valids: list[np.ndarray]) -> _View:
        """The varying axes gathered into a scratch through precomputed indexes (0 where padded)."""
        constant, compact, strides = self._compact(dims, positions, valids)
        index = np.zeros(compact, np.int64)
        valid = np.ones(compact, bool)
        for axis, (p, v, c) in enumerate(zip(positions, valids, constant)):  # sum / and of per-axis vectors
            along = [1] * len(dims)
            along[axis] = compact[axis]
            index += (p[:1] if c else p).reshape(along)
            valid &= (v[:1] if c else v).reshape(along)
        index, valid = np.where(valid, index, 0).reshape(-1), valid.reshape(-1)
        if index.min() < 0 or index.max() >= flat.size:
            raise LuminalError(f"a view of k{source} reads outside its {flat.size} elements")
        scratch = np.zeros(compact, flat.dtype).reshape(-1)
        args = [_numba_view(scratch), _numba_view(flat), index.astype(np.int32 if flat.size < 2**31 else np.int64)]
        if not valid.all():
            args += [np.ascontiguousarray(valid), _numba_view(np.zeros(1, flat.dtype))]
        source_text = gather_source(len(args) > 3, scratch.size >= PARALLEL_THRESHOLD)
        return _View(scratch, 0, dims, strides, [self._launch(source_text, args)])

    @staticmethod
    def _checked(view: _View, source: int) -> _View:
        """``view``, after making sure every element it reads lies inside its buffer."""
        low = view.offset + sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s < 0)
        high = view.offset + sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s > 0)
        if view.size and (low < 0 or high >= view.flat.size):
            raise LuminalError(f"a view of k{source} reads elements {low}..{high} of its {view.flat.size}")
        return view

    def _launch(self, source: str, args: list[np.ndarray]) -> Step:
        return functools.partial(self.cache.compile(source, args), *args)

    def _views(self, kernel: Kernel) -> list[_View]:
        return [self.view(src, tracker) for src, tracker in kernel.sources]

    @staticmethod
    def _sequence(views: Sequence[_View], steps: list[Step]) -> Step:
        """One step running the views' refreshes, then ``steps``."""
        steps = [step for view in views for step in view.refresh] + steps
        if len(steps) == 1:
            return steps[0]

        def run_all() -> None:
            for step in steps:
                step()
        return run_all

    # ---- steps ----------------------------------------------------------------------
    def _step(self, kernel: Kernel) -> Step | None:
        op = kernel.op
        if op == "Input":
            buffer = self.buffers[kernel.id]
            if kernel.arg in self.weight_names:
                self.result.weights.append(_Weight(kernel.arg, buffer))
            else:
                self.result.inputs.append((kernel.arg, buffer))
            return None
        if op == "Constant":
            value = kernel.arg.evaluate(self.bindings) if isinstance(kernel.arg, Expr) else kernel.arg
            self.buffers[kernel.id][...] = np.asarray(value, dtype=kernel.dtype.numpy)
            return None
        if op == "Iota":
            expr, length = kernel.arg
            n = self.size(length)
            self.buffers[kernel.id][...] = np.broadcast_to(
                expr.evaluate(self.bindings, np.arange(n, dtype=np.int64)), (n,)).astype(np.int32)
            return None
        if op == "Output":
            return self._output(kernel)
        if op == "SumReduce" and kernel.id in self.contractions:
            return self._matmul(kernel)
        if op in UNARY_KERNELS or op in BINARY_KERNELS or op == "Cast":
            return self._elementwise(kernel)
        if op in REDUCE_KERNELS:
            return self._reduce(kernel)
        if op == "FusionEnd":
            return self._region(kernel)
        if op == "Gather":
            return self._gather(kernel)
        if op == "Scatter":
            return self._scatter(kernel)
        raise UnsupportedOpError(op, where=f"LLIR kernel k{kernel.id} (HLIR {kernel.hlir})",
                                 detail="the CPU runtime has no implementation of it")

    def _output(self, kernel: Kernel) -> Step:
        (view,) = self._views(kernel)
        array, results, kid = view.array, self.result.results, kernel.id

        def output() -> None:  # a fresh array per call: the caller owns it
            results[kid] = np.array(array, order="C")
        return self._sequence([view], [output])

    def _elementwise(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        views = self._views(kernel)
        dtype = self.kernels[kernel.sources[0][0]].dtype
        if kernel.op == "Cast" and dtype != kernel.dtype and (dtype in _HALF or kernel.dtype in _HALF):
            array = views[0].array  # numpy's (and ml_dtypes') conversion is the definition of these casts
            return self._sequence(views, [lambda: np.copyto(out, array, casting="unsafe")])
        if out.size == 0:
            return self._sequence(views, [])
        rank, kinds, args = _loop_operands(out, views)
        source = elementwise_source(kernel.op, dtype, kernel.dtype, kinds, rank, out.size >= PARALLEL_THRESHOLD)
        return self._sequence(views, [self._launch(source, args)])

    def _region(self, end: Kernel) -> Step:
        """A fused region as one loop nest: its starts' views in, the end's buffer out."""
        body = self.regions[end.id].body(self.llir)
        out = self.buffers[end.id]
        views = [self.view(source, tracker) for source, tracker, _ in body.inputs]
        if out.size == 0:
            return self._sequence(views, [])
        rank, kinds, args = _loop_operands(out, views)
        source = region_source(body, kinds, rank, out.size >= PARALLEL_THRESHOLD)
        return self._sequence(views, [self._launch(source, args)])

    def _reduce(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        (view,) = self._views(kernel)
        if kernel.op == "MaxReduce" and view.shape[-1] == 0:
            raise LuminalError(f"MaxReduce k{kernel.id} reduces an empty axis")
        if out.size == 0:
            return self._sequence([view], [])
        dims, (_, strides) = _collapse(view.shape, [_contiguous_strides(out.shape) + (0,), view.strides],
                                       keep_last=True)
        meta = np.array([view.offset, *strides, dims[-1]], np.int64)
        args = [_numba_view(out.reshape(dims[:-1])), _numba_view(view.flat), meta]
        source = reduce_source(kernel.op, kernel.dtype, _kind(strides[-1]), len(dims) - 1,
                               view.size >= PARALLEL_THRESHOLD)
        return self._sequence([view], [self._launch(source, args)])

    # ---- matmul ---------------------------------------------------------------------
    def _contraction(self, product: Kernel) -> bool:
        """Plan ``product`` (a Mul) as part of its consumer's matmul when that is one; True when it was."""
        consumers = self.consumers[product.id]
        if len(consumers) != 1 or consumers[0].op != "SumReduce" or product.id in self.llir.outputs:
            return False
        reduce = consumers[0]
        contiguous = ShapeTracker.contiguous(product.shape)
        axes = list(range(len(product.shape)))
        found = [a for a in axes if contiguous.permute([i for i in axes if i != a] + [a]) == reduce.sources[0][1]]
        if not found:
            return False
        a, b = self._views(product)
        contraction = Contraction.of(a.array, b.array, found[0])
        if contraction is None or not (contraction.rows or contraction.cols):
            return False  # not a matmul, or only dot products (a sum of squares): the kernels do those faster
        self.contractions[reduce.id] = (contraction, a, b)
        return True

    def _matmul(self, kernel: Kernel) -> Step:
        """One BLAS matmul into the reduction's buffer (through scratch copies only where BLAS needs them)."""
        contraction, a, b = self.contractions[kernel.id]
        out = self.buffers[kernel.id]
        compute = kernel.dtype.compute_numpy
        count, m, k, n = contraction.matmul_shape
        steps: list[Step] = []
        operands = []
        for compact, shape in zip(contraction.compact_operands(a.array, b.array), ((count, m, k), (count, k, n))):
            operand = _reshaped(compact, shape) if compact.dtype == compute else None
            if operand is None or not _blas_ready(operand):
                scratch = np.empty(compact.shape, compute)
                steps.append(lambda scratch=scratch, compact=compact: np.copyto(scratch, compact, casting="unsafe"))
                operand = scratch.reshape(shape)
            operands.append(operand)
        lhs, rhs = operands
        if not contraction.neither and out.dtype == compute:  # write straight into out: as lhs @ rhs or its transpose
            for left, right, axes, shape in ((lhs, rhs, contraction.rows + contraction.cols, (count, m, n)),
                                             (rhs.transpose(0, 2, 1), lhs.transpose(0, 2, 1),
                                              contraction.cols + contraction.rows, (count, n, m))):
                order = [contraction.others.index(i) for i in contraction.batch + axes]
                target = _reshaped(out.transpose(order), shape)
                if target is not None and target.flags.c_contiguous:
                    return self._sequence([a, b], [*steps, _matmul_step(left, right, target)])
        product = np.empty((count, m, n), compute)
        arranged = contraction.arrange(product)
        steps += [_matmul_step(lhs, rhs, product), lambda: np.copyto(out, arranged, casting="unsafe")]
        return self._sequence([a, b], steps)

    # ---- host ops -------------------------------------------------------------------
    def _gather(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        index, data = self._views(kernel)
        flat, copy = _flat(data.array)
        dims, (_, strides) = _collapse(out.shape, [_contiguous_strides(out.shape), index.strides])
        args = [_numba_view(out.reshape(dims)), index.flat, np.array([index.offset, *strides], np.int64),
                _numba_view(flat)]
        function = self.cache.compile(take_source(_kind(strides[-1]), len(dims), out.size >= PARALLEL_THRESHOLD),
                                      args)
        indexes = index.array

        def gather() -> None:
            if function(*args):
                _check_indexes(indexes, flat.size, kernel)  # raises, naming the first bad index
        return self._sequence([index, data], copy + [gather])

    def _scatter(self, kernel: Kernel) -> Step:
        out = self.buffers[kernel.id]
        views = self._views(kernel)
        dest, indexes, values = (v.array for v in views)
        flat_out = out.reshape(-1)

        def scatter() -> None:
            np.copyto(out, dest)
            _check_indexes(indexes, flat_out.size, kernel)
            flat_out[indexes.reshape(-1)] = values.reshape(-1)
        return self._sequence(views, [scatter])


def _flat(array: np.ndarray) -> tuple[np.ndarray, list[Step]]:
    """``array`` flattened: a view when its layout allows, else a scratch copied into on each call."""
    flat = _reshaped(array, (array.size,))
    if flat is not None:
        return flat, []
    scratch = np.empty(array.size, array.dtype)
    target = scratch.reshape(array.shape)
    return scratch, [lambda: np.copyto(target, array)]


def _reshaped(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``array`` reshaped without a copy, or None when that needs one."""
    try:
        return array.reshape(shape, copy=False)
    except ValueError:
        return None


def _blas_ready(x: np.ndarray) -> bool:
    """Whether BLAS takes this ``[batch, r, c]`` operand as it is: rows or columns of unit stride."""
    item = x.itemsize
    _, r, c = x.shape
    s1, s2 = x.strides[1:]
    rows = (s2 == item or c == 1) and s1 % item == 0 and s1 >= c * item
    columns = (s1 == item or r == 1) and s2 % item == 0 and s2 >= r * item
    return rows or columns


def _matmul_step(lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> Step:
    """``out = lhs @ rhs`` over ``[batch, r, c]`` arrays (``out`` contiguous). Float products go through torch's
    BLAS (MKL) when torch is installed: at transformer-block sizes it is 1.5-2x faster than numpy's OpenBLAS."""
    if lhs.dtype in (np.float32, np.float64):
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            a, b, c = (torch.from_numpy(x) for x in (lhs, rhs, out))  # views of the plan's arrays, no copies
            if lhs.shape[0] == 1:
                a, b, c = a[0], b[0], c[0]
                return lambda: torch.mm(a, b, out=c)
            return lambda: torch.bmm(a, b, out=c)
    return lambda: np.matmul(lhs, rhs, out=out)


def _check_indexes(index: np.ndarray, size: int, kernel: Kernel) -> None:
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index[(index < 0) | (index >= size)].reshape(-1)[0]
        raise IndexError(f"{kernel.op} k{kernel.id} (HLIR {', '.join(f'h{h}' for h in kernel.hlir)}): "
                         f"index {bad} is out of range for {size} elements")
