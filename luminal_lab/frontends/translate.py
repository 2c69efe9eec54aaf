"""The translation driver: an ``ExportedProgram`` in core aten becomes an HLIR ``Graph`` and its ``Signature``.

``from_torch`` exports a module (or a function, wrapped into one), decomposes it to core aten
with the default table, and walks the graph: placeholders become inputs (user inputs) or weights
(parameters, buffers, constants, and the user inputs the caller names as weights); each aten op
is translated through ``aten.TABLE`` inside ``graph.origin(label)``, so every HLIR node remembers
the aten op and the user's source line it came from, and its result is checked against the shape
torch recorded (and cast to torch's dtype where the tensor API's promotion differs); outputs keep
torch's order, with in-place mutations of inputs and buffers as extra outputs written back after
each call. The result, a ``TorchProgram``, is what ``ll.compile`` and the ``torch.compile`` backend
compile.

A program exported with dynamic shapes keeps them: torch's symbolic sizes (``symbols.Sizes``)
become the HLIR's symbolic dimensions, in input shapes and in the arguments of views, slices and
iotas; the SymInt arithmetic between them (``sym_size``, ``operator.sub``, ...) is not translated
op by op but read from the value torch recorded, a float made of sizes (``SymFloat``) is computed where the program
runs as a 0-d tensor (``SCALAR_OPS``), and an int input becomes a size argument
(``Signature.sizes``) that binds its variable at every call.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ..core.arguments import fail
from ..core.arrays import to_numpy
from ..core.dtypes import DType
from ..core.dtypes import from_torch as from_torch_dtype
from ..core.errors import ArgumentError, LuminalError, UnsupportedOpError
from ..core.phases import phase
from ..core.symbolic import Expr, as_expr
from ..hlir.graph import Graph, Signature
from ..hlir.opaque import OpaqueCall
from ..hlir.tensor import GraphTensor
from .aten import TABLE, Context, dtype_of
from .experts import BY_NAME
from .export import FunctionModule, export_core_aten, parameter_names
from .origins import user_frame
from .symbols import Sizes

OPTIONS = ("strict", "dynamic_shapes")


@dataclass
class TorchProgram:
    """A torch program as the compiler takes it: the HLIR graph, how it meets its caller, the module whose buffers
    in-place mutations are written back to, and the example inputs (the default inputs of profiling and search)."""

    graph: Graph
    signature: Signature
    module: torch.nn.Module | None = None
    example_inputs: Sequence | None = None
    example_kwargs: Mapping[str, Any] | None = None


def from_torch(program: torch.nn.Module | Callable, example_inputs: Sequence,
               example_kwargs: Mapping[str, Any] | None = None, **options) -> TorchProgram:
    """Translate a module or function on ``example_inputs`` (positional; one tensor or a sequence) and, for a module,
    ``example_kwargs`` (its keyword arguments: a transformers model's ``cache=``) via torch.export; the program is then
    called with the same structure.

    Options: ``strict`` (bool, default False) and ``dynamic_shapes`` (torch.export's, e.g.
    ``{"x": {0: Dim.AUTO}}``: those sizes become symbolic dimensions, and int inputs size arguments)
    are passed to ``torch.export.export``.
    Raises ``UnsupportedOpError`` naming the first aten op without a translation and the
    user's source line, before anything runs.
    """
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ArgumentError(f"from_torch: unknown option(s) {sorted(unknown)} for a torch program; supported: "
                            f"{list(OPTIONS)}")
    module = program if isinstance(program, torch.nn.Module) else FunctionModule(program)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    elif not isinstance(example_inputs, (tuple, list)):
        fail("from_torch", "example_inputs", example_inputs, "a tensor or a tuple of the program's inputs")
    example_inputs = tuple(example_inputs)
    if example_kwargs and not isinstance(program, torch.nn.Module):
        fail("from_torch", "example_kwargs", example_kwargs, "None for a function (its inputs come by position); "
             "keyword inputs are a module's")
    names = None if isinstance(program, torch.nn.Module) else parameter_names(program, len(example_inputs))
    dynamic_shapes = options.get("dynamic_shapes")
    if dynamic_shapes is not None and not isinstance(program, torch.nn.Module):  # FunctionModule takes *args
        if isinstance(dynamic_shapes, dict):
            if names is None or set(dynamic_shapes) - set(names):
                fail("from_torch", "dynamic_shapes", dynamic_shapes, f"a dict keyed by the function's parameter "
                     f"names {names} or a tuple with one entry per example input")
            dynamic_shapes = [dynamic_shapes.get(name) for name in names]
        dynamic_shapes = (tuple(dynamic_shapes),)
    exported = export_core_aten(module, example_inputs, strict=options.get("strict", False),
                                dynamic_shapes=dynamic_shapes, example_kwargs=example_kwargs)
    program = translate(exported, module, names, example_inputs)
    program.example_kwargs = dict(example_kwargs) if example_kwargs else None
    return program


@phase("translation")
def translate(ep: torch.export.ExportedProgram, module: torch.nn.Module | None = None,
              input_names: Sequence[str] | None = None, example_inputs: Sequence | None = None, *,
              weights: Collection[str] = (), symbols: dict[str, str] | None = None,
              constant_outputs: bool = False, opaque: bool = False) -> TorchProgram:
    """The ``TorchProgram`` of a core-aten ``ExportedProgram`` (of ``module``).

    User inputs are named after their placeholders, or ``input_names`` (in order) when given;
    ``example_inputs`` become the default inputs of profiling and search. The user inputs named in
    ``weights`` become weights sharing their example input's memory (the torch.compile backend hands the runtime
    each call's tensors anyway), except those the program mutates
    in place (which stay inputs, so the mutation is written back to the caller's tensor); the
    program then takes the other user inputs, positionally. ``symbols`` renames torch's size symbols
    (``{"s17": "s77"}``) in the HLIR's dimensions. With ``constant_outputs``, a size among the user outputs (a
    number, or a symbolic size: a cache's length, say) is returned as a number, and a ``None`` (a backward graph's
    gradient of an input that needs none) as ``None``; without, both are refused. With ``opaque``, an op with no
    translation runs through torch as an opaque step (``hlir.opaque``, warned once per op); without, the first such
    op is refused before anything is built.
    """
    _check_supported(ep.graph, opaque)
    if weights and example_inputs is None:
        fail("translate", "example_inputs", example_inputs, "the user inputs' values, which the weights hold")
    g = Graph()
    sizes = Sizes(symbols)
    specs = ep.graph_signature
    mutated = {spec.target for spec in specs.output_specs if spec.kind == OutputKind.USER_INPUT_MUTATION}
    env: dict[torch.fx.Node, Any] = {}
    user_inputs: dict[str, str] = {}  # placeholder name -> input name
    held: set[int] = set()  # positions of the user inputs made weights
    position = 0  # of the next user input
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    for node, spec in zip(placeholders, specs.input_specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            name = input_names[position] if input_names else node.name
            val = node.meta["val"]
            if not isinstance(val, torch.Tensor):  # an int input: a size argument
                env[node] = sizes(val)
                g.size_inputs[name] = as_expr(env[node])
                user_inputs[node.name] = name
            elif name in weights and node.name not in mutated:
                env[node] = g.weight(name, to_numpy(example_inputs[position]))
                held.add(position)
            else:
                env[node] = g.tensor(sizes.shape(val.shape), name=name, dtype=dtype_of(val, node))
                user_inputs[node.name] = name
            position += 1
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            value = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            env[node] = g.weight(spec.target, np.array(to_numpy(value), copy=True))
        else:
            raise UnsupportedOpError(f"{spec.kind.name.lower()} input", detail=f"{node.name} cannot be translated")
    g.dynamic = bool(g.size_inputs) or any(not d.is_num for spec in g.inputs.values() for d in spec.node.shape)
    for node in ep.graph.nodes:
        if node.op == "call_function":
            env[node] = _size_or_scalar(g, node, env, sizes) if is_size(node) or node.target in SCALAR_OPS \
                else _translate_node(g, node, env, sizes)
    outputs, mutated_inputs, mutated_weights, constants = _mark_outputs(g, ep, env, constant_outputs)
    if not g.outputs:
        raise UnsupportedOpError("non-tensor output", detail="the program returns no tensor (only Python values), "
                                 "so there is nothing to compile")
    mutated_inputs = {output: user_inputs[placeholder] for output, placeholder in mutated_inputs.items()}
    in_spec = ep.call_spec.in_spec
    if held:  # the weights' leaves left the call's structure: the other inputs come positionally
        in_spec = None
        example_inputs = [value for i, value in enumerate(example_inputs) if i not in held]
    signature = Signature(list(user_inputs.values()), outputs, in_spec, ep.call_spec.out_spec, mutated_inputs,
                          mutated_weights, constants, dict(g.size_inputs))
    return TorchProgram(g, signature, module, example_inputs)


def _check_supported(graph: torch.fx.Graph, opaque: bool = False) -> None:
    """Raise for the first op with no translation (listing any others), before building anything; with ``opaque``,
    for the first that cannot run opaque either (``_opaque``: tensors in, one tensor of a luminal_lab dtype out)."""
    missing = [n for n in graph.nodes if n.op == "call_function" and lookup(n.target) is None and not is_size(n)
               and n.target not in SCALAR_OPS and not (opaque and _runs_opaque(n))]
    if missing:
        others = sorted({str(n.target) for n in missing[1:]} - {str(missing[0].target)})
        detail = "no translation" + (", nor one torch can run as an opaque step (tensors in, one tensor out)"
                                     if opaque else "")
        detail += f"; also untranslated here: {', '.join(others)}" if others else ""
        raise UnsupportedOpError(str(missing[0].target), user_frame(missing[0]), detail)


def _runs_opaque(node: torch.fx.Node) -> bool:
    """Whether an op can run as an opaque step: it returns one tensor of a luminal_lab dtype and reads tensors."""
    val = node.meta.get("val")
    operands = [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)]
    if not isinstance(val, torch.Tensor) or not operands:
        return False
    try:
        from_torch_dtype(val.dtype)
    except TypeError:
        return False
    return all(isinstance(a.meta.get("val"), torch.Tensor) for a in operands)


def lookup(target) -> Callable | None:
    """The translation of an fx node's target (an aten op, a library's custom op, or ``getitem``), or None."""
    if target is operator.getitem:
        return operator.getitem
    return TABLE.get(target) or TABLE.get(getattr(target, "overloadpacket", None)) or BY_NAME.get(str(target))


def is_size(node: torch.fx.Node) -> bool:
    """Whether a node computes a size (``sym_size``, SymInt arithmetic): its value is read from torch's record. A
    value that depends on a tensor's data (an unbacked symbol, from ``.item()``) is not one: its op is refused."""
    val = node.meta.get("val")
    if isinstance(val, (torch.SymInt, torch.SymBool)):
        return not free_unbacked_symbols(val)
    return isinstance(val, int) and node.target is not operator.getitem and lookup(node.target) is None


# Python's arithmetic on sizes and on the floats made of them (a batch norm's ``n / (n - 1)``, where dynamo and
# AOTAutograd leave ``n`` symbolic): a size is read from torch's record as an expression, but a float (``SymFloat``), or
# a size torch writes through one (``sym_int``, exported as ``math.trunc``), is computed where the program runs, as a
# 0-d f32 tensor of the sizes
SCALAR_OPS: dict[Any, Callable[..., GraphTensor]] = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.truediv: operator.truediv, operator.neg: operator.neg, operator.pow: operator.pow,
    operator.floordiv: lambda a, b: (a / b).floor(), operator.mod: lambda a, b: a - (a / b).floor() * b,
    torch.sym_float: lambda a: a, math.trunc: lambda a: a.trunc(),
    torch.sym_max: lambda a, b: a.fmax(b), torch.sym_min: lambda a, b: a.fmin(b),
}


def _size_or_scalar(g: Graph, node: torch.fx.Node, env: dict, sizes: Sizes) -> Any:
    """A size or a scalar node's value: the size torch recorded, where it is one (an expression of the symbolic
    sizes, or a number), else computed (``SCALAR_OPS``) as a 0-d tensor of torch's dtype."""
    val = node.meta["val"]
    if isinstance(val, float):
        return val
    if not isinstance(val, torch.SymFloat):
        try:
            return sizes(val)
        except UnsupportedOpError:  # a size of floats (TruncToInt): computed below
            if node.target not in SCALAR_OPS:
                raise
    operands = [_scalar(g, env[a] if isinstance(a, torch.fx.Node) else a) for a in node.args]
    with g.origin(f"{getattr(node.target, '__name__', node.target)} @ {user_frame(node) or 'sizes'}"):
        result = SCALAR_OPS[node.target](*operands)
        return result.cast(DType.F32 if isinstance(val, torch.SymFloat) else DType.I64)


def _scalar(g: Graph, value: Any) -> GraphTensor:
    """A size, a number or a 0-d tensor as a 0-d f32 tensor."""
    if isinstance(value, GraphTensor):
        return value.cast(DType.F32)
    if isinstance(value, Expr):
        return g.constant(value, DType.I64).cast(DType.F32)
    return g.constant(float(value))


def _translate_node(g: Graph, node: torch.fx.Node, env: dict, sizes: Sizes) -> Any:
    args, kwargs = pytree.tree_map(lambda a: env[a] if isinstance(a, torch.fx.Node) else a, (node.args, node.kwargs))
    if node.target is operator.getitem:
        return args[0][args[1]]
    if lookup(node.target) is None:
        return _opaque(g, node, env, sizes)
    where = user_frame(node)
    label = str(node.target) + (f" @ {where}" if where else "")
    with g.origin(label):
        try:
            result = lookup(node.target)(Context(g, node, sizes), *args, **kwargs)
        except UnsupportedOpError:
            raise
        except Exception as error:
            raise LuminalError(f"translating {node.target} ({node.name}) failed: {error}"
                               + (f"\n  from {where}" if where else "")) from error
        return _conform(result, node.meta.get("val"), node, sizes)


def _opaque(g: Graph, node: torch.fx.Node, env: dict, sizes: Sizes) -> GraphTensor:
    """An op with no translation, run through torch as it is (``hlir.opaque``): its tensor arguments are the node's
    operands, every other argument is bound as torch recorded it (``_check_supported`` made sure it can run so:
    ``_runs_opaque``). Warned once per op in a process."""
    val, where = node.meta["val"], user_frame(node)
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    at = [i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node)]
    operands = [env[flat[i]] for i in at]
    dtype, target, name = dtype_of(val, node), node.target, str(node.target)

    def run(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        values = list(flat)
        for i, tensor in zip(at, tensors, strict=True):
            values[i] = tensor
        args, kwargs = pytree.tree_unflatten(values, spec)
        return target(*args, **kwargs)

    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(f"luminal_lab: {name} has no translation; it runs in torch as an opaque step of the program"
                      + (f", at {where}" if where else "") + " (options={'strict': True} raises instead)",
                      stacklevel=2)
    with g.origin(f"{name} @ {where}" if where else name):
        return g.opaque(OpaqueCall(name, run, where or ""), operands, sizes.shape(val.shape), dtype)


_WARNED: set[str] = set()  # the ops run opaque so far in this process, each warned of once


def _conform(result: Any, val: Any, node: torch.fx.Node, sizes: Sizes) -> Any:
    """Check ``result`` against torch's recorded value; cast to torch's dtype where promotion differs."""
    if isinstance(val, torch.Tensor):
        if not isinstance(result, GraphTensor):
            raise LuminalError(f"{node.target} ({node.name}): the translation gave {type(result).__name__}, "
                               "expected a tensor")
        expected = sizes.shape(val.shape)
        got = [d.value if d.is_num else d for d in result.shape]
        if got != list(expected):
            if not sizes.agree(got, expected):
                raise LuminalError(f"{node.target} ({node.name}): the translation has shape {_shown(got)}, torch "
                                   f"has {_shown(expected)}")
            result = result.as_shape(expected)  # torch's way of writing the same sizes
        return result.cast(dtype_of(val, node))
    if isinstance(val, (list, tuple)):
        return type(result)(_conform(r, v, node, sizes) for r, v in zip(result, val, strict=True))
    return result


def _shown(shape) -> list:
    return [d if isinstance(d, int) else str(d) for d in shape]


def _mark_outputs(g: Graph, ep: torch.export.ExportedProgram, env: dict, constant_outputs: bool = False
                  ) -> tuple[list[str], dict[str, str], dict[str, str], dict[int, Any]]:
    """Mark every output (user outputs and in-place mutations), keeping torch's order; with ``constant_outputs``, the
    sizes among the user outputs by position (numbers, or expressions of the symbolic dimensions) and any ``None``."""
    specs = ep.graph_signature
    outputs: list[str] = []
    mutated_inputs: dict[str, str] = {}
    mutated_weights: dict[str, str] = {}
    constants: dict[int, Any] = {}
    for spec, value in zip(specs.output_specs, ep.graph.output_node().args[0], strict=True):
        size = value if isinstance(value, (int, float, bool)) else env.get(value)
        constant = value is None or isinstance(size, (int, float, bool, Expr))  # None: a backward's absent gradient
        if constant_outputs and spec.kind == OutputKind.USER_OUTPUT and constant:
            constants[len(outputs) + len(constants)] = size
            continue
        if not isinstance(value, torch.fx.Node) or not isinstance(env.get(value), GraphTensor):
            shown = getattr(spec.arg, "value", value)
            raise UnsupportedOpError(f"{type(shown).__name__} output",
                                     detail=f"output {len(g.outputs)} is {shown!r}, not a tensor; return only tensors")
        name = _unique(spec.arg.name, g.outputs)
        if spec.kind == OutputKind.USER_OUTPUT:
            outputs.append(name)
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutated_inputs[name] = spec.target
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            mutated_weights[name] = spec.target
        else:
            raise UnsupportedOpError(f"{spec.kind.name.lower()} output", detail=f"{spec.target or name} "
                                     "(only user outputs, input and buffer mutations are supported)")
        env[value].output(name)
    return outputs, mutated_inputs, mutated_weights, constants


def _unique(name: str, taken) -> str:
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate
