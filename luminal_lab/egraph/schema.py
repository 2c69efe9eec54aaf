"""HLIR -> egglog in Luminal's schema: the readable program, and the rows that load it fast.

The schema is data (``signatures``): sorts ``Expression``, ``EList``, ``DType``, ``View``,
and the mutually recursive ``IR`` / ``OpKind`` / ``IList``, plus the ``dtype`` function.
Every live HLIR node becomes one term, ``(Op (Kind fields...) (ICons in0 (INil)))``,
emitted in topological order; all outputs are joined into the root with ``OutputJoin``.

Each node also gets its dtype fact, ``(set (dtype $tN_) (F32))``, known from the HLIR's
dtype inference; ``dtype_prop`` then only has to type what rewrites add.

HLIR node N's term is named ``$tN_`` (``let_name``): the trailing ``_`` keeps every name from being
another's prefix. egglog 13.2 confuses globals whose names differ by trailing digits: with
``$t12`` and ``$t121`` both defined, a term built over ``$t12`` has been seen to read ``$t121``
(a transformer encoder layer's ``x - mean`` became ``-mean + -mean``). The text is sent
to egglog one command at a time (see ``worker``), which keeps loading linear in its size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.dtypes import DType
from ..core.ops import BINARY_OPS, HLIR_KERNELS, MARKERS, REDUCE_OPS, UNARY_OPS, Op
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import EXPR_OPS, Expr, render_term
from ..hlir.graph import Graph, Node
from . import fusion
from .ops import FUNCTIONS, RULESETS, OpRegistry

DATATYPE_GROUPS = (("Expression", "EList", "DType"), ("View",), ("IR", "OpKind", "IList"))


def signatures(registry: OpRegistry) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Every sort's constructors with the sorts of their fields."""
    return {
        "Expression": [("MNum", ("i64",)), ("MFloat", ("f64",)), ("MIter", ()), ("MVar", ("String",)),
                       *((op.egglog, ("Expression", "Expression")) for op in EXPR_OPS.values())],
        "EList": [("ECons", ("Expression", "EList")), ("ENil", ())],
        "DType": [(dtype.egglog, ()) for dtype in DType],
        "View": [("Strided", ("EList",)), ("Masked", ("EList", "EList"))],
        "IR": [("OutputJoin", ("IR", "IR")), ("Op", ("OpKind", "IList")), ("Input", ("i64", "String", "DType")),
               ("Output", ("IR", "i64"))],
        "OpKind": [*registry.signatures(), *((n, tuple(f.sort for f in fs)) for n, fs in MARKERS.items())],
        "IList": [("ICons", ("IR", "IList")), ("INil", ()),
                  ("FusedOperands", ("OpKind", "IList", "i64", "i64", "IR", "i64", "IR"))],
    }


def _declaration(name: str, fields: tuple[str, ...]) -> str:
    return f"({' '.join((name, *fields))})"


def schema(registry: OpRegistry) -> str:
    """Sort declarations, the dtype function and the rulesets."""
    sorts = signatures(registry)
    lines = ["; ---- sorts ----"]
    for group in DATATYPE_GROUPS:
        bodies = [f"({sort} {' '.join(_declaration(n, f) for n, f in sorts[sort])})" for sort in group]
        lines.append(f"(datatype* {' '.join(bodies)})" if len(group) > 1 else f"(datatype {bodies[0][1:]}")
    lines.append("(function dtype (IR) DType :merge new)")
    lines.extend(FUNCTIONS)
    lines.extend(fusion.FUNCTIONS)
    lines.append("; ---- rulesets ----")
    lines.extend(f"(ruleset {name})" for name in RULESETS)
    return "\n".join(lines)


def rules(registry: OpRegistry) -> str:
    return "\n".join(["; ---- rules ----", *(rule.text for rule in (*registry.rules(), *fusion.fusion_rules()))])


# ---- terms ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ref:
    """A reference to another HLIR node's term (``let_name(N)`` in text, id N in rows)."""

    node_id: int


def elist(exprs) -> tuple:
    term: tuple = ("ENil",)
    for expr in reversed(list(exprs)):
        term = ("ECons", expr.to_egglog_term(), term)
    return term


def strides(tracker: ShapeTracker) -> tuple[Expr, ...]:
    """The tracker's strides, each of an axis of extent 1 as its value at ``z = 0``: such an axis is never
    stepped, so an unsqueezed read and the contiguous layout of a shape with a trailing 1 are the same list."""
    return tuple(s.substitute(z=0) if d == 1 else s for d, s in zip(tracker.dims, tracker.strides))


def view(tracker: ShapeTracker) -> tuple:
    if tracker.is_masked:
        return ("Masked", elist(strides(tracker)), elist(tracker.masks))
    return ("Strided", elist(strides(tracker)))


def ilist(refs) -> tuple:
    term: tuple = ("INil",)
    for ref in reversed(list(refs)):
        term = ("ICons", ref, term)
    return term


def constant_term(value) -> tuple:
    if isinstance(value, Expr):
        return value.to_egglog_term()
    if isinstance(value, bool | int):
        return ("MNum", int(value))
    return ("MFloat", float(value))


def op_fields(node: Node) -> tuple:
    """The fields of a node's OpKind constructor, in its declaration's order (``core.ops``)."""
    op = node.op
    trackers = [tracker for _, tracker in node.sources]
    out = elist(strides(ShapeTracker.contiguous(node.shape)))
    if op in UNARY_OPS:
        named = {"shape": elist(node.shape), "x": view(trackers[0]), "out": out}
    elif op in BINARY_OPS:
        named = {"shape": elist(node.shape), "a": view(trackers[0]), "b": view(trackers[1]), "out": out}
    elif op in REDUCE_OPS:
        source, axis = trackers[0], node.arg
        kept = ShapeTracker(*(seq[:axis] + seq[axis + 1:] for seq in (source.dims, source.strides, source.masks)))
        named = {"shape": elist(node.shape), "extent": source.dims[axis].to_egglog_term(), "kept": view(kept),
                 "stride": strides(source)[axis].to_egglog_term(), "mask": source.masks[axis].to_egglog_term(),
                 "out": out}
    elif op == Op.IOTA:
        named = {"expr": node.arg[0].to_egglog_term(), "length": node.arg[1].to_egglog_term()}
    elif op == Op.CONSTANT:
        named = {"value": constant_term(node.arg), "dtype": (node.dtype.egglog,)}
    elif op == Op.GATHER:
        index, data = trackers
        named = {"index_shape": elist(index.dims), "index": view(index), "data_shape": elist(data.dims),
                 "data": view(data), "out": out}
    elif op in (Op.SCATTER, Op.SCATTER_ADD):
        dest, index, source = trackers
        named = {"dest_shape": elist(dest.dims), "dest": view(dest), "index_shape": elist(index.dims),
                 "index": view(index), "source": view(source), "out": out}
    elif op == Op.CAST:
        named = {"shape": elist(node.shape), "x": view(trackers[0]), "out": out, "dtype": (node.arg.egglog,)}
    elif op == Op.OPAQUE:  # read back from the HLIR node at extraction: its call and its operands' views
        named = {"node": ("MNum", node.id), "shape": elist(node.shape), "dtype": (node.dtype.egglog,)}
    else:
        raise ValueError(f"{op.value} has no OpKind fields")
    return tuple(named[f.name] for f in HLIR_KERNELS[op].fields)


def node_term(node: Node, output_index: int) -> tuple:
    if node.op == Op.INPUT:
        return ("Input", node.id, node.arg, (node.dtype.egglog,))
    if node.op == Op.OUTPUT:
        return ("Output", Ref(node.sources[0][0].id), output_index)
    return ("Op", (node.op.value, *op_fields(node)), ilist(Ref(src.id) for src, _ in node.sources))


# ---- the program text ----------------------------------------------------------------------------
LET_NAME = re.compile(r"\$t(\d+)_")  # a let name, HLIR node id as the group


def let_name(node_id: int) -> str:
    """The egglog global naming HLIR node ``node_id``'s term: ``$t12_`` (no name is another's prefix)."""
    return f"$t{node_id}_"


def _text(term) -> str:
    if isinstance(term, Ref):
        return let_name(term.node_id)
    if isinstance(term, tuple):
        return "(" + " ".join([term[0], *(_text(a) for a in term[1:])]) + ")"
    return render_term(term)


def emit(graph: Graph) -> str:
    """``(let $tN_ ...)`` and the dtype fact of every live node in topological order, then ``$root``."""
    lines = ["; ---- the HLIR graph ----"]
    outputs: list[Ref] = []
    for node in graph.live_nodes():
        term = node_term(node, len(outputs))
        if node.op == Op.OUTPUT:
            outputs.append(Ref(node.id))
        lines.append(f"(let {let_name(node.id)} {_text(term)})")
        lines.append(f"(set (dtype {let_name(node.id)}) ({node.dtype.egglog}))")
    root: Ref | tuple = outputs[0]
    for ref in outputs[1:]:
        root = ("OutputJoin", root, ref)
    lines.append(f"(let $root {_text(root)})")
    return "\n".join(lines)
