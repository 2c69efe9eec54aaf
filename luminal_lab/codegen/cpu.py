"""CPU kernels as Python source for ``numba.njit``: one loop nest per elementwise op, cast, reduction, gather and fused
region, called as ``codegen.cpu_loop.Loop`` states.

A source is specialised by rank and by each ``Operand``, so one compiled kernel serves every shape and stride of its op,
dtypes and operands; ``parallel`` variants loop with ``prange``. f16 and bf16 compute in f32 and round on store; ints
wrap to their type on store (and so does a fused step's value); float32 Exp2/Exp/Log2/Sin call the vectorisable
versions in ``cpu_math``. With padded operands the innermost loop runs in segments, each wholly inside or outside every
padded operand's box, reading its buffer or its zeros through a contiguous row, so that each segment vectorises. A
source's first line names the hash of ``cpu_math`` (a kernel cached against older helpers is never reused); each
generator keeps the ``SOURCES`` it made last, which plans of each new size ask for again.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from ..core.dtypes import DType, cast_path
from ..core.errors import UnsupportedOpError
from ..core.ops import REDUCE_KERNELS, UNARY_KERNELS
from ..llir.regions import RegionBody
from . import cpu_math
from .cpu_loop import SEGMENT, Operand, Stride, meta_names, parameters

SOURCES = 4096  # sources kept per generator: a plan of each new size asks again for the ones it asked before


@functools.cache
def _codegen_version() -> str:
    """Hash of the helpers every kernel links (so kernels cached against older helpers are not reused)."""
    return hashlib.sha256(Path(cpu_math.__file__).read_bytes()).hexdigest()[:16]


def _header(parallel: bool, *fastmath: str) -> str:
    """Imports and the ``njit`` decorator; ``fastmath`` names LLVM flags: ``contract`` (fused multiply-adds in
    the helpers' polynomials), ``reassoc`` (lets LLVM vectorise a float sum, summing in lanes)."""
    options = "cache=True, error_model=\"numpy\""
    if parallel:
        options += ", parallel=True"
    flags = [flag for flag in fastmath if flag]
    if flags:
        options += ", fastmath={" + ", ".join(f'"{flag}"' for flag in flags) + "}"
    return (f"# luminal_lab CPU kernel, helpers {_codegen_version()}\n"
            "import numba\nimport numpy as np\n\nfrom luminal_lab.codegen import cpu_math as m\n\n\n"
            f"@numba.njit({options})\n")


_LOAD = {DType.F16: "m.f16_load({x})", DType.BF16: "m.bf16_load({x})"}  # f16/bf16 bits widen to f32
_STORE = {DType.F16: "m.f16_store(np.float32({x}))", DType.BF16: "m.bf16_store(np.float32({x}))"}  # and round back


def _load(dtype: DType, element: str) -> str:
    """An element as its compute type."""
    return _LOAD.get(dtype, "{x}").format(x=element)


def _loader(dtype: DType | None) -> Callable[[str], str]:
    """``_load`` for ``dtype``; None reads the stored bits as they are."""
    return (lambda element: element) if dtype is None else functools.partial(_load, dtype)


def _store(dtype: DType, value: str) -> str:
    """A compute value as the storage type."""
    return _STORE.get(dtype, "{x}").format(x=value)


_UNARY = {  # op -> (f32, f64)
    "Log2": ("m.log2f({x})", "np.log2({x})"),
    "Exp2": ("m.exp2f({x})", "np.exp2({x})"),
    "Exp": ("m.expf({x})", "np.exp({x})"),
    "Sin": ("m.sinf({x})", "np.sin({x})"),
    "Sqrt": ("np.sqrt({x})", "np.sqrt({x})"),
    "Recip": ("np.float32(1.0) / {x}", "1.0 / {x}"),
    "Tanh": ("np.tanh({x})", "np.tanh({x})"),
}
_BINARY = {"Add": "{x} + {y}", "Mul": "{x} * {y}", "LessThan": "{x} < {y}"}
_CAST = {DType.F32: "np.float32({x})", DType.F64: "np.float64({x})", DType.I8: "np.int8({x})",
         DType.U8: "np.uint8({x})", DType.I16: "np.int16({x})", DType.I32: "np.int32({x})",
         DType.I64: "np.int64({x})", DType.BOOL: "({x}) != 0"}


def _expression(op: str, dtype: DType, target: DType, operands: list[str]) -> str:
    """The value of ``op`` on loaded operands of ``dtype`` (its compute type), for an output of ``target``."""
    if op in UNARY_KERNELS:
        return _UNARY[op][dtype == DType.F64].format(x=operands[0])
    if op in _BINARY:
        value = _BINARY[op].format(x=operands[0], y=operands[1])
        return f"({value}) != 0" if target == DType.BOOL and op != "LessThan" else value  # bool + bool is or
    if op == "Mod":
        if dtype.is_float:
            return f"np.fmod({operands[0]}, {operands[1]})"
        return f"m.fmod_int(np.int64({operands[0]}), np.int64({operands[1]}))"
    if op == "Select":
        return f"{operands[1]} if {operands[0]} != 0 else {operands[2]}"
    if op == "Cast":
        value = operands[0]
        for step in cast_path(dtype, target):
            value = _CAST[step].format(x=value)
        return value
    raise UnsupportedOpError(op, detail="no CPU kernel source")


def _prologue(operands: Sequence[Operand], width: int, lengths: int = 0) -> list[str]:
    """``meta``'s numbers into the locals ``Loop`` names, for loops over ``width`` axes."""
    return [f"    {name} = meta[{i}]" for i, name in enumerate(meta_names(operands, width, lengths))]


def _outer(axes: int, parallel: bool, operands: Sequence[Operand], depth: int) -> list[str]:
    """Loops over ``out``'s first ``axes`` axes, tracking each operand's position ``p{j}_{d}`` and, for a padded
    operand, whether the indexes so far lie in its box (``u{j}_{d}``)."""
    lines = []
    for d in range(axes):
        loop = "numba.prange" if parallel and d == 0 else "range"
        lines.append("    " * (depth + d) + f"for i{d} in {loop}(out.shape[{d}]):")
        for j, operand in enumerate(operands):
            start = f"o{j}" if d == 0 else f"p{j}_{d - 1}"
            lines.append("    " * (depth + d + 1) + f"p{j}_{d} = {start} + i{d} * s{j}_{d}")
            if operand.padded:
                inside = f"l{j}_{d} <= i{d} and i{d} < h{j}_{d}"
                outer = f"u{j}_{d - 1} and " if d else ""
                lines.append("    " * (depth + d + 1) + f"u{j}_{d} = {outer}{inside}")
    return lines


def _operands(strides: Sequence[Stride], dtypes: Sequence[DType | None], axes: int, inner: int,
              indent: str) -> tuple[list[str], list[str]]:
    """Statements hoisted above the innermost loop (over index ``i{inner}``) and each unpadded operand's value inside
    it, read through a row where contiguous (so LLVM vectorises) and once where broadcast, loaded as the compute type of
    its dtype in ``dtypes`` (None: the stored bits as they are)."""
    hoisted, values = [], []
    for j, (stride, dtype) in enumerate(zip(strides, dtypes, strict=True)):
        load = _loader(dtype)
        position = f"o{j}" if axes == 0 else f"p{j}_{axes - 1}"
        if stride == Stride.CONTIGUOUS:
            hoisted.append(f"{indent}r{j} = x{j}[{position}:]")
            values.append(load(f"r{j}[i{inner}]"))
        elif stride == Stride.BROADCAST:
            hoisted.append(f"{indent}b{j} = {load(f'x{j}[{position}]')}")
            values.append(f"b{j}")
        else:
            values.append(load(f"x{j}[{position} + i{inner} * s{j}_{inner}]"))
    return hoisted, values


def _segment_operands(operands: Sequence[Operand], dtypes: Sequence[DType | None],
                      axis: int) -> tuple[list[str], list[str], list[str]]:
    """For a loop along ``axis`` in segments (``_segments``): statements hoisted above the segments, statements at
    the start of each segment ``[e0, e1)``, and each operand's value at index ``e0 + i`` of the segment.

    Operands read relative to the segment's start (the same contiguous rows as in ``_operands``); a padded one reads its
    zeros ``z{j}`` in a segment outside its box (``w{j}`` false): a zero row, or its first zero at stride 0."""
    hoisted, segment, values = [], [], []
    for j, (operand, dtype) in enumerate(zip(operands, dtypes, strict=True)):
        load = _loader(dtype)
        position, stride = (f"o{j}" if axis == 0 else f"p{j}_{axis - 1}"), f"s{j}_{axis}"
        if operand.stride == Stride.CONTIGUOUS:
            row = f"x{j}[{position} + e0:]"
            segment.append(f"r{j} = {f'{row} if w{j} else z{j}' if operand.padded else row}")
            values.append(load(f"r{j}[i]"))
        elif operand.stride == Stride.BROADCAST and not operand.padded:
            hoisted.append(f"b{j} = {load(f'x{j}[{position}]')}")
            values.append(f"b{j}")
        elif operand.stride == Stride.BROADCAST:
            segment.append(f"b{j} = {load(f'x{j}[{position}] if w{j} else z{j}[0]')}")
            values.append(f"b{j}")
        elif not operand.padded:
            segment.append(f"q{j} = {position} + e0 * {stride}")
            values.append(load(f"x{j}[q{j} + i * {stride}]"))
        else:
            segment += [f"y{j} = x{j} if w{j} else z{j}", f"q{j} = {position} + e0 * {stride} if w{j} else 0",
                        f"g{j} = {stride} if w{j} else 0"]
            values.append(load(f"y{j}[q{j} + i * g{j}]"))
    return hoisted, segment, values


def _segments(operands: Sequence[Operand], axis: int, parallel: bool, segment: list[str], body: list[str]) -> list[str]:
    """A loop along ``out``'s ``axis`` as segments ``[e0, e1)`` of at most ``SEGMENT`` elements in each of
    which every padded operand lies wholly inside its box (``w{j}``, also requiring the outer
    indexes' ``u{j}_{axis - 1}``) or wholly outside it; ``segment`` starts each segment, ``body`` runs at ``i`` from
    0 to its length. With ``parallel`` the chunks of ``SEGMENT`` elements run in parallel."""
    loop, extent = "numba.prange" if parallel else "range", f"out.shape[{axis}]"
    lines = [f"for c in {loop}(({extent} + {SEGMENT - 1}) // {SEGMENT}):", f"    e0 = c * {SEGMENT}",
             f"    end = min(e0 + {SEGMENT}, {extent})", "    while e0 < end:", "        e1 = end"]
    for j, operand in enumerate(operands):
        if operand.padded:
            low, high = f"l{j}_{axis}", f"h{j}_{axis}"
            outer = f"u{j}_{axis - 1} and " if axis else ""
            lines += [f"        e1 = min(e1, {low}) if e0 < {low} else min(e1, {high}) if e0 < {high} else e1",
                      f"        w{j} = {outer}{low} <= e0 and e0 < {high}"]
    lines += [f"        {line}" for line in segment] + ["        for i in range(e1 - e0):"]
    return lines + [f"            {line}" for line in body] + ["        e0 = e1"]


def _elementwise_nest(operands: Sequence[Operand], dtypes: Sequence[DType | None], rank: int, parallel: bool,
                      body: Callable[[list[str], str], list[str]], depth: int = 1) -> list[str]:
    """The loop nest of an elementwise kernel (operands of ``dtypes``, as in ``_operands``; in ``_segments`` where
    padded); ``body`` turns the operands' values and the element of ``out`` they make into innermost statements."""
    lines = _outer(rank - 1, parallel, operands, depth)
    indent = "    " * (depth + rank - 1)
    inner = rank - 1
    if not any(operand.padded for operand in operands):
        hoisted, values = _operands([operand.stride for operand in operands], dtypes, inner, inner, indent)
        loop = "numba.prange" if parallel and rank == 1 else "range"
        lines += hoisted + [f"{indent}for i{inner} in {loop}(out.shape[{inner}]):"]
        return lines + [f"{indent}    {line}" for line in body(values, f"out[{_index(rank)}]")]
    hoisted, segment, values = _segment_operands(operands, dtypes, inner)
    segment.append(f"ro = out[{''.join(f'i{d}, ' for d in range(inner))}e0:]")
    loops = _segments(operands, inner, parallel and rank == 1, segment, body(values, "ro[i]"))
    return lines + [f"{indent}{line}" for line in hoisted + loops]


# what a step adds to a loop's work, in units of one element's load and store: measured with one thread on f32 in
# cache, an add takes 0.12 ns an element, a reciprocal 0.18, a square root 0.21, exp2 and exp 0.27, sin 0.30, log2 1.16
EXTRA_COST = {"Recip": 0.5, "Sqrt": 1.0, "Exp2": 1.5, "Exp": 1.5, "Sin": 1.5, "Log2": 9.0}


def loop_work(elements: int, ops: Iterable[str], passes: int = 1) -> float:
    """A loop's work in element loads: ``passes`` over ``elements``, and what its ``ops`` add at each element (what
    decides whether it runs in parallel)."""
    return elements * (passes + sum(EXTRA_COST.get(op, 0.0) for op in ops))


def region_work(body: RegionBody, elements: int) -> float:
    """``loop_work`` of a region over ``elements``: an elementwise region is one pass; a row region makes one per
    reduction along the row and one for an end along it."""
    if body.rows is None:
        return loop_work(elements, (op for op, _ in body.steps))
    passes = sum(op in REDUCE_KERNELS and body.extent(names[0]) is not None for op, names in body.steps)
    passes += body.extent(body.result) is not None
    return loop_work(elements, (op for op, _ in body.steps), max(passes, 1))


def _index(rank: int) -> str:
    return ", ".join(f"i{d}" for d in range(rank))


# an int32 max reduction keeps the loop vectorised (a conditional count does not)
_SIN_FLAG = "max(big, np.int32(abs({x}) >= m.SIN_LIMIT))"


@functools.lru_cache(maxsize=SOURCES)
def elementwise_source(op: str, dtype: DType, target: DType, operands: tuple[Operand, ...], rank: int,
                       parallel: bool) -> str:
    """A ``Loop.over`` kernel: ``out = op(x0, ...)``. A Select moves the stored bits of ``x1`` or ``x2`` as they
    are, as does a copy (a Cast to its own dtype)."""
    same = [dtype] * len(operands)
    lines = [f"def kernel({', '.join(parameters(operands))}):", *_prologue(operands, rank)]
    if op == "Sin" and dtype != DType.F64:  # sinf's reduction is exact below SIN_LIMIT; libm takes the rest
        lines.append("    big = np.int32(0)")
        lines += _elementwise_nest(operands, same, rank, parallel, lambda v, out: [
            f"v = {v[0]}", f"{out} = {_store(target, 'm.sinf(v)')}", f"big = {_SIN_FLAG.format(x='v')}"])
        lines.append("    if big:")
        lines += _elementwise_nest(operands, same, rank, False, lambda v, out: [
            f"v = {v[0]}", "if abs(v) >= m.SIN_LIMIT:",
            f"    {out} = {_store(target, 'np.float32(np.sin(np.float64(v)))')}"], depth=2)
    elif op == "Select" or (op == "Cast" and dtype == target):
        lines += _elementwise_nest(operands, [None] * len(operands), rank, parallel, lambda v, out: [
            f"{out} = {_expression(op, dtype, target, v) if op == 'Select' else v[0]}"])
    else:
        lines += _elementwise_nest(operands, same, rank, parallel, lambda v, out: [
            f"{out} = {_store(target, _expression(op, dtype, target, v))}"])
    return _header(parallel, "contract" if op in UNARY_KERNELS else "") + "\n".join(lines) + "\n"


# a value in its type's compute type: a step's value wraps (or rounds) as an unfused kernel would store it
_COMPUTE_CAST = {**_CAST, DType.F16: "np.float32({x})", DType.BF16: "np.float32({x})"}


def _local(name: str) -> str:
    """The local holding region value ``name`` (``x{j}`` is input ``j``'s buffer, ``a{j}`` its element)."""
    return f"a{name[1:]}" if name[0] == "x" else name


def _steps(body: RegionBody, indexes: Iterable[int], exact_sin: bool = True) -> list[str]:
    """Statements computing steps ``indexes`` of ``body``, each value in the compute type (as an unfused kernel would
    store it). f32 Sins take ``sinf``, and with ``exact_sin`` libm's sin beyond ``SIN_LIMIT``."""
    lines = []
    for i in indexes:
        op, names = body.steps[i]
        operands = [_local(name) for name in names]
        if op == "Sin" and body.dtype != DType.F64:
            x = operands[0]
            value = (f"m.sinf({x}) if abs({x}) < m.SIN_LIMIT else np.float32(np.sin(np.float64({x})))" if exact_sin
                     else f"m.sinf({x})")
        else:
            value = _expression(op, body.dtype, body.dtype, operands)
        lines.append(f"t{i} = {_COMPUTE_CAST[body.dtype].format(x=value)}")
    return lines


@functools.lru_cache(maxsize=SOURCES)
def region_source(body: RegionBody, operands: tuple[Operand, ...], rank: int, parallel: bool) -> str:
    """A ``Loop.over`` kernel: a fused region as one loop nest, ``out`` = the last of ``body``'s steps on each
    element. f32 Sins run ``sinf`` and, where any of their arguments reached ``SIN_LIMIT``, the nest runs again
    (serially) with libm's sin for those."""
    dtype = body.dtype
    lines = [f"def kernel({', '.join(parameters(operands))}):", *_prologue(operands, rank)]
    sin_operands = [_local(names[0]) for op, names in body.steps if op == "Sin" and dtype != DType.F64]

    def statements(values: list[str], out: str, exact_sin: bool) -> list[str]:
        counted = [f"big = {_SIN_FLAG.format(x=x)}" for x in sin_operands if not exact_sin]
        loads = [f"a{j} = {value}" for j, value in enumerate(values)]
        computed = _steps(body, range(len(body.steps)), exact_sin)
        return [*loads, *computed, f"{out} = {_store(dtype, body.result)}", *counted]

    if sin_operands:
        lines.append("    big = np.int32(0)")
    dtypes = [d for _, _, d in body.inputs]
    lines += _elementwise_nest(operands, dtypes, rank, parallel, lambda v, out: statements(v, out, False))
    if sin_operands:
        lines.append("    if big:")
        lines += _elementwise_nest(operands, dtypes, rank, False, lambda v, out: statements(v, out, True), depth=2)
    unary = any(op in UNARY_KERNELS for op, _ in body.steps)
    return _header(parallel, "contract" if unary else "") + "\n".join(lines) + "\n"


def _row_pass(body: RegionBody, strides: Sequence[Stride], rank: int, extent: str, name: str,
              kept: str | None = None) -> list[str]:
    """A loop along the row computing value ``name`` at each position ``j``, preceded by the loads it needs (value
    ``kept`` read back from ``out``, where an earlier pass stored it); the statements that use it follow, indented by
    the caller, under the name ``v``."""
    known = () if kept is None else (kept,)
    lines = [f"for j in range({extent}):"]
    for j in body.reads(name, known):
        if body.extent(f"x{j}") is None or strides[j] == Stride.BROADCAST:
            continue  # loaded once per row
        position = f"p{j}_{rank - 1}"
        element = f"r{j}[j]" if strides[j] == Stride.CONTIGUOUS else f"x{j}[{position} + j * s{j}_{rank}]"
        lines.append(f"    a{j} = {_load(body.inputs[j][2], element)}")
    if kept is not None:
        lines.append(f"    {kept} = out[{_index(rank)}, j]")
    lines += [f"    {line}" for line in _steps(body, body.needs(name, known))]
    return lines + [f"    v = {_local(name)}"]


def _row_reduction(body: RegionBody, i: int, strides: Sequence[Stride], rank: int, keep: bool = False) -> list[str]:
    """Reduction step ``i`` of a row region: a pass along the row (the operand itself for a row of length 1), which
    also stores each operand value in ``out`` when ``keep``."""
    dtype, (op, (operand,)) = body.dtype, body.steps[i]
    if body.extent(operand) is None:
        return [f"t{i} = {_local(operand)}"]
    along = _row_pass(body, strides, rank, f"n{body.lengths.index(body.extent(operand))}", operand)
    if keep:
        along.append(f"    out[{_index(rank)}, j] = v")
    if op == "SumReduce":
        return [f"acc = {_zero(dtype)}", *along, "    acc += v", f"t{i} = acc"]
    if dtype.is_float and dtype != DType.F64:  # a max over order-preserving keys vectorises; NaN is largest
        return ["key = m.KEY_MIN", *along, "    k = m.f32_key(v)", "    key = k if k > key else key",
                f"t{i} = m.key_f32(key)"]
    start = "-np.inf" if dtype.is_float else str(np.iinfo(dtype.numpy).min)
    return [f"acc = {start}", *along, "    acc = v if v > acc or v != v else acc", f"t{i} = acc"]


def _kept(body: RegionBody) -> tuple[int, str] | None:
    """``(reduction step, its operand)`` where a row kernel's last reduction pass stores its operand in ``out`` for the
    end's pass to read back rather than recompute (softmax's ``exp``): the end's pass runs along the same extent and
    needs that value, recomputing it takes a unary op (a transcendental, a root, a reciprocal), and ``out``'s dtype
    holds it exactly (f32, f64)."""
    if body.dtype not in (DType.F32, DType.F64) or body.extent(body.result) is None:
        return None
    last = [i for i in body.row_order() if body.steps[i][0] in REDUCE_KERNELS][-1]
    (operand,) = body.steps[last][1]
    if (operand[0] != "t" or body.extent(operand) != body.extent(body.result)
            or int(operand[1:]) not in body.needs(body.result)
            or not any(body.steps[i][0] in UNARY_KERNELS for i in body.needs(operand))):
        return None
    return last, operand


@functools.lru_cache(maxsize=SOURCES)
def row_region_source(body: RegionBody, operands: tuple[Operand, ...], rank: int, parallel: bool) -> str:
    """A row region's ``Loop.over`` kernel (with ``lengths``: ``n{e}`` are ``body.lengths``), parallel over the rows
    (a per-row input, broadcast along the row, is loaded once per row). Per row, in ``body.row_order()``: each
    reduction is one pass along the row, computing what it reads there, and each per-row value is computed once; the
    end last (a pass where it runs along the row, reading back what the last reduction's pass kept in ``out``,
    ``_kept``)."""
    dtype, strides = body.dtype, [operand.stride for operand in operands]
    lines = [f"def kernel({', '.join(parameters(operands))}):", *_prologue(operands, rank + 1, len(body.lengths))]
    lines += _outer(rank, parallel, operands, 1)
    row: list[str] = []
    for j, stride in enumerate(strides):
        position = f"p{j}_{rank - 1}"
        if body.extent(f"x{j}") is None or stride == Stride.BROADCAST:  # the same all along the row
            row.append(f"a{j} = {_load(body.inputs[j][2], f'x{j}[{position}]')}")
        elif stride == Stride.CONTIGUOUS:
            row.append(f"r{j} = x{j}[{position}:]")
    kept = _kept(body)
    for i in body.row_order():
        row += (_row_reduction(body, i, strides, rank, kept is not None and kept[0] == i)
                if body.steps[i][0] in REDUCE_KERNELS else _steps(body, [i]))
    end = body.extent(body.result)
    index = _index(rank)
    if end is None:
        row.append(f"out[{index}, 0] = {_store(dtype, body.result)}")
    else:
        row += _row_pass(body, strides, rank, f"n{body.lengths.index(end)}", body.result, kept and kept[1])
        row.append(f"    out[{index}, j] = {_store(dtype, 'v')}")
    lines += ["    " * (rank + 1) + line for line in row]
    return _header(parallel, "reassoc" if dtype.is_float else "", "contract") + "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=SOURCES)
def reduce_source(op: str, dtype: DType, operands: tuple[Operand, ...], rank: int, parallel: bool) -> str:
    """A ``Loop.reducing`` kernel: ``out[...] = sum/max(x0[..., :])``, or, for a contraction, the sum of the products
    ``x0[..., :] * x1[..., :]`` in the compute type (never rounded to f16/bf16)."""
    lines = [f"def kernel({', '.join(parameters(operands))}):", *_prologue(operands, rank + 1, 1)]
    lines += _outer(rank, parallel, operands, 1)
    indent = "    " * (rank + 1)
    along = [Stride.CONTIGUOUS if o.stride == Stride.CONTIGUOUS else Stride.STRIDED for o in operands]  # a row, or not
    hoisted, values = _operands(along, [dtype] * len(operands), rank, rank, indent)
    value = " * ".join(values)
    if op == "SumReduce":
        body = [f"acc = {_zero(dtype)}", f"for i{rank} in range(n0):", f"    acc += {value}"]
    elif dtype == DType.F64:  # MaxReduce: NaN wins, as np.max
        body = [f"i{rank} = 0", f"acc = {value}", f"for i{rank} in range(1, n0):", f"    v = {value}",
                "    acc = v if v > acc or v != v else acc"]
    elif dtype.is_float:  # a max over order-preserving integer keys vectorises (NaN keys are the largest)
        body = ["key = m.KEY_MIN", f"for i{rank} in range(n0):", f"    k = m.f32_key({value})",
                "    key = k if k > key else key", "acc = m.key_f32(key)"]
    else:
        body = [f"i{rank} = 0", f"acc = {value}", f"for i{rank} in range(1, n0):", f"    v = {value}",
                "    acc = v if v > acc else acc"]
    body.append(f"out[{_index(rank)}] = {_store(dtype, 'acc')}")
    lines += hoisted + [indent + line for line in body]
    return _header(parallel, "reassoc" if op == "SumReduce" and dtype.is_float else "") + "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=SOURCES)
def accumulate_source(rank: int, parallel: bool) -> str:
    """A ``Loop.reducing`` contraction (f32 or f64) whose ``x1`` runs contiguous along ``out``'s last axis but not
    along the contracted one, and whose ``x0`` is the same all along that axis (a row times a matrix, as attention's
    probabilities times its values at decode): each row of ``out`` is the sum of ``x1``'s contiguous rows scaled by
    ``x0``'s elements, so that the inner loop vectorises where dot products would gather ``x1`` by its stride."""
    operands = (Operand(Stride.BROADCAST), Operand(Stride.STRIDED))
    lines = [f"def kernel({', '.join(parameters(operands))}):", *_prologue(operands, rank + 1, 1)]
    lines += _outer(rank - 1, parallel, operands, 1)
    position = [f"o{j}" if rank == 1 else f"p{j}_{rank - 2}" for j in range(2)]
    row = f"out[{_index(rank - 1)}]" if rank > 1 else "out"
    body = [f"row = {row}", "row[:] = 0", f"for i{rank} in range(n0):",
            f"    a = x0[{position[0]} + i{rank} * s0_{rank}]",
            f"    r1 = x1[{position[1]} + i{rank} * s1_{rank}:]", "    for j in range(row.shape[0]):",
            "        row[j] += a * r1[j]"]
    lines += ["    " * rank + line for line in body]
    return _header(parallel, "reassoc") + "\n".join(lines) + "\n"


def _zero(dtype: DType) -> str:
    """A sum's starting value in ``dtype``'s compute type."""
    return "0.0" if dtype == DType.F64 else "np.float32(0.0)" if dtype.is_float else "0"


@functools.lru_cache(maxsize=SOURCES)
def take_source(operand: Operand, rank: int, parallel: bool) -> str:
    """A ``Loop.over`` kernel (``data`` last): ``out = data[x0]``; returns how many indexes miss (read ``data[0]``)."""
    lines = ["def kernel(out, x0, meta, data):", *_prologue((operand,), rank), "    n = data.shape[0]", "    bad = 0"]
    lines += _elementwise_nest((operand,), [None], rank, parallel, lambda v, out: [
        f"k = {v[0]}", "inside = (k >= 0) & (k < n)", "bad += 0 if inside else 1", f"{out} = data[k if inside else 0]"])
    return _header(parallel) + "\n".join(lines + ["    return bad"]) + "\n"


@functools.lru_cache(maxsize=SOURCES)
def scatter_source(add: bool) -> str:
    """``kernel(out, index, values)``: ``out[index[i]] = values[i]`` in order (the last write of an index stays), or
    ``+=`` for a scatter-add; an index out of range is skipped and counted, the count returned."""
    lines = ["def kernel(out, index, values):", "    n = out.shape[0]", "    bad = 0",
             "    for i in range(index.shape[0]):", "        k = index[i]", "        if k < 0 or k >= n:",
             "            bad += 1", "        else:", f"            out[k] {'+=' if add else '='} values[i]",
             "    return bad"]
    return _header(False) + "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=SOURCES)
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
