"""HLIR -> egglog text in Luminal's schema.

The program declares the sorts (``Expression``, ``EList``, ``DType``, ``View``, and the
mutually recursive ``IR`` / ``OpKind`` / ``IList``), the ``dtype`` function and the
rulesets, then emits every live HLIR node once, in topological order, as
``(let $tN ...)`` where N is the node's id, and joins all outputs into ``$root`` with
``OutputJoin``. Ops are ``(Op (Kind fields...) (ICons in0 (ICons in1 (INil))))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..hlir import BINARY_OPS, REDUCE_OPS, UNARY_OPS, Graph, Node, Op
from ..shape_tracker import ShapeTracker
from ..symbolic import Expr
from .ops import RULESETS, OpRegistry

_EXPRESSIONS = ("(MNum i64) (MFloat f64) (MIter) (MVar String) (MAdd Expression Expression) "
                "(MSub Expression Expression) (MMul Expression Expression) (MDiv Expression Expression) "
                "(MMod Expression Expression) (MCeilDiv Expression Expression) (MMin Expression Expression) "
                "(MMax Expression Expression) (MAnd Expression Expression) (MOr Expression Expression) "
                "(MGte Expression Expression) (MLt Expression Expression)")


def schema(registry: OpRegistry) -> str:
    """Sort declarations, the dtype function and the (empty) rulesets."""
    kinds = "\n    ".join(registry.constructors())
    lines = [
        "; ---- sorts ----",
        f"(datatype*\n  (Expression {_EXPRESSIONS})\n  (EList (ECons Expression EList) (ENil))\n"
        "  (DType (F32) (F16) (Bf16) (Int) (Int64) (F64) (Bool)))",
        "(datatype View (Strided EList) (Masked EList EList))",
        "(datatype*\n  (IR (OutputJoin IR IR) (Op OpKind IList) (Input i64 String DType) (Output IR i64))\n"
        f"  (OpKind\n    {kinds})\n  (IList (ICons IR IList) (INil)))",
        "(function dtype (IR) DType :merge new)",
        "; ---- rulesets ----",
        *(f"(ruleset {name})" for name in RULESETS),
    ]
    return "\n".join(lines)


def rules(registry: OpRegistry) -> str:
    lines = ["; ---- rules ----"]
    lines.extend(rule.text for rule in registry.rules())
    return "\n".join(lines)


# ---- terms -------------------------------------------------------------------------------------
def elist(exprs) -> str:
    text = "(ENil)"
    for expr in reversed(list(exprs)):
        text = f"(ECons {expr.to_egglog()} {text})"
    return text


def view(tracker: ShapeTracker) -> str:
    if tracker.is_masked:
        return f"(Masked {elist(tracker.strides)} {elist(tracker.masks)})"
    return f"(Strided {elist(tracker.strides)})"


def ilist(names) -> str:
    text = "(INil)"
    for name in reversed(list(names)):
        text = f"(ICons {name} {text})"
    return text


def float_literal(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def constant_term(value) -> str:
    if isinstance(value, Expr):
        return value.to_egglog()
    if isinstance(value, bool):
        return f"(MNum {int(value)})"
    if isinstance(value, int):
        return f"(MNum {value})"
    return f"(MFloat {float_literal(value)})"


def _out_strides(node: Node) -> str:
    return elist(ShapeTracker.contiguous(node.shape).strides)


def op_fields(node: Node) -> str:
    """The fields of a node's OpKind constructor (see the layouts in ``ops``)."""
    op = node.op
    trackers = [tracker for _, tracker in node.sources]
    if op in UNARY_OPS:
        return f"{elist(node.shape)} {view(trackers[0])} {_out_strides(node)}"
    if op in BINARY_OPS:
        return f"{elist(node.shape)} {view(trackers[0])} {view(trackers[1])} {_out_strides(node)}"
    if op in REDUCE_OPS:
        source, axis = trackers[0], node.arg
        kept = ShapeTracker(*(seq[:axis] + seq[axis + 1:] for seq in (source.dims, source.strides, source.masks)))
        return (f"{elist(node.shape)} {source.dims[axis].to_egglog()} {view(kept)} "
                f"{source.strides[axis].to_egglog()} {source.masks[axis].to_egglog()} {_out_strides(node)}")
    if op == Op.IOTA:
        expr, length = node.arg
        return f"{expr.to_egglog()} {length.to_egglog()}"
    if op == Op.CONSTANT:
        return f"{constant_term(node.arg)} ({node.dtype.egglog})"
    if op == Op.GATHER:
        index, data = trackers
        return f"{elist(index.dims)} {view(index)} {elist(data.dims)} {view(data)} {_out_strides(node)}"
    if op == Op.SCATTER:
        dest, index, source = trackers
        return (f"{elist(dest.dims)} {view(dest)} {elist(index.dims)} {view(index)} {view(source)} "
                f"{_out_strides(node)}")
    if op == Op.CAST:
        return f"{elist(node.shape)} {view(trackers[0])} {_out_strides(node)} ({node.arg.egglog})"
    raise ValueError(f"{op.value} has no OpKind fields")


@dataclass(frozen=True)
class EmittedGraph:
    """The let-bindings of a graph: the text, and which let name each HLIR node got."""

    text: str
    let_of: dict[int, str]
    root: str = "$root"


def emit(graph: Graph) -> EmittedGraph:
    """``(let $tN ...)`` for every live node in topological order, then ``$root``."""
    let_of: dict[int, str] = {}
    lines = ["; ---- the HLIR graph ----"]
    outputs = []
    for node in graph.live_nodes():
        name = f"$t{node.id}"
        let_of[node.id] = name
        if node.op == Op.INPUT:
            term = f'(Input {node.id} "{node.arg}" ({node.dtype.egglog}))'
        elif node.op == Op.OUTPUT:
            term = f"(Output {let_of[node.sources[0][0].id]} {len(outputs)})"
            outputs.append(name)
        else:
            inputs = ilist(let_of[src.id] for src, _ in node.sources)
            term = f"(Op ({node.op.value} {op_fields(node)}) {inputs})"
        lines.append(f"(let {name} {term})")
    root = outputs[0]
    for name in outputs[1:]:
        root = f"(OutputJoin {root} {name})"
    lines.append(f"(let $root {root})")
    return EmittedGraph("\n".join(lines), let_of)
