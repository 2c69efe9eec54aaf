"""An HLIR ``Graph`` as JSON data and back, node for node: what a later process reads instead of translating again
(``luminal_lab.frontends.kept``).

``to_data`` writes every node (op, sources with their views, shape, dtype, op argument, origin), the inputs, outputs,
size arguments and whether the graph is dynamic; the weights' values are not written, ``from_data`` takes them.
Expressions are written as they are built, never simplified again on the way back, so the graph read back is the one
written (its egglog program is the same text). An expression is an int (a number), a str (a variable; ``"z"`` the
index variable) or ``[op, *arguments]``; a view is its dims, strides and masks. A constant's value keeps its type: a
number or bool as JSON has it, a numpy scalar as ``{"numpy": dtype, "value": ...}``, an expression as ``{"expr": ...}``.
Data that is not a graph written here raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.dtypes import DType
from ..core.ops import REDUCE_OPS, Op
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import Expr
from .graph import Graph, InputSpec, Node

FORMAT = 1  # the layout of the data: data of another is refused


def to_data(graph: Graph) -> dict[str, Any]:
    """The graph as JSON-ready data, its weights' values left out (their names are the weight inputs')."""
    views: dict[ShapeTracker, int] = {}  # each distinct view written once, nodes referring to it by position

    def view(tracker: ShapeTracker) -> int:
        if tracker not in views:
            views[tracker] = len(views)
        return views[tracker]

    nodes = [[node.op.value, [[source.id, view(tracker)] for source, tracker in node.sources],
              [expr_data(d) for d in node.shape], node.dtype.value, _arg(node), node.origin] for node in graph.nodes]
    return {"format": FORMAT, "nodes": nodes,
            "views": [[[expr_data(e) for e in part] for part in (t.dims, t.strides, t.masks)] for t in views],
            "inputs": [[name, spec.node.id, spec.is_weight] for name, spec in graph.inputs.items()],
            "outputs": [[name, node.id] for name, node in graph.outputs.items()],
            "size_inputs": [[name, expr_data(e)] for name, e in graph.size_inputs.items()],
            "specialised": dict(graph.specialised), "dynamic": graph.dynamic}


def from_data(data: Any, weights: Mapping[str, np.ndarray]) -> Graph:
    """The graph ``to_data`` wrote, holding ``weights`` (a value for each of its weight inputs)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("not an HLIR graph's data of this layout")
    try:
        views = [ShapeTracker(*(tuple(read_expr(e) for e in part) for part in parts)) for parts in data["views"]]
        g = Graph()
        for i, (op, sources, shape, dtype, arg, origin) in enumerate(data["nodes"]):
            op = Op(op)
            node = Node(i, op, tuple((g.nodes[s], views[v]) for s, v in sources),
                        tuple(read_expr(d) for d in shape), DType(dtype), _read_arg(op, arg), origin)
            g.nodes.append(node)
            if op == Op.CONSTANT:
                g._constants[(repr(node.arg), node.dtype)] = node
        for name, node_id, is_weight in data["inputs"]:
            g.inputs[name] = InputSpec(name, g.nodes[node_id], is_weight)
            if is_weight:
                g.weights[name] = weights[name]
        g.outputs = {name: g.nodes[node_id] for name, node_id in data["outputs"]}
        g.size_inputs = {name: read_expr(e) for name, e in data["size_inputs"]}
        g.specialised = dict(data["specialised"])
        g.dynamic = bool(data["dynamic"])
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise ValueError(f"not an HLIR graph's data: {type(error).__name__}: {error}") from None
    return g


def expr_data(e: Expr) -> Any:
    """An expression as data: an int, a variable's name (``"z"``: the index variable) or ``[op, *arguments]``."""
    if e.op == "num":
        return e.args[0]
    if e.op == "var":
        return e.args[0]
    if e.op == "iter":
        return "z"
    return [e.op, *(expr_data(a) for a in e.args)]


def read_expr(data: Any) -> Expr:
    if isinstance(data, bool):
        raise ValueError(f"{data!r} is not an expression")
    if isinstance(data, int):
        return Expr.num(data)
    if data == "z":
        return Expr.z()
    if isinstance(data, str):
        return Expr.var(data)
    op, *args = data
    return Expr(op, tuple(read_expr(a) for a in args))


def _arg(node: Node) -> Any:
    """A node's op argument as data."""
    op, arg = node.op, node.arg
    if op == Op.IOTA:
        return [expr_data(arg[0]), expr_data(arg[1])]
    if op == Op.CAST:
        return arg.value
    if op == Op.CONSTANT:
        if isinstance(arg, Expr):
            return {"expr": expr_data(arg)}
        if isinstance(arg, np.generic):
            return {"numpy": arg.dtype.name, "value": arg.item()}
        return arg
    return arg  # an input's or output's name, a reduction's axis, or None


def _read_arg(op: Op, data: Any) -> Any:
    if op == Op.IOTA:
        return read_expr(data[0]), read_expr(data[1])
    if op == Op.CAST:
        return DType(data)
    if op == Op.CONSTANT and isinstance(data, dict):
        return read_expr(data["expr"]) if "expr" in data else np.dtype(data["numpy"]).type(data["value"])
    if op in REDUCE_OPS and not isinstance(data, int):
        raise ValueError(f"a reduction's axis is {data!r}")
    return data
