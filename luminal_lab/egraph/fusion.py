"""Fusion in the marker design: the rules that offer fused regions as alternatives.

A region is a term ``(FusionEnd (Fused<Op> ... (FusionStart x)))``: each ``FusionStart``
reads one outside e-class through its own view, the ``Fused<Op>`` ops inside run on values
(unary ``FusedSin/Sqrt/Exp/Exp2/Log2/Recip``, binary ``FusedAdd/Mul``), and the single
``FusionEnd`` is unioned with the e-class of the kernel op it replaces, so a genome chooses
between the fused and the unfused form. Every marker and fused op carries the region's
shape, its (contiguous) out strides and its dtype.

Three rule families, each a ruleset:

``fusion_pair``
    two neighbouring kernel ops become a region: U->U, B->U, U->B (lhs, rhs), B->B (lhs, rhs).
``fusion_grow``
    a kernel op that reads a region's end joins it: FE->U, FE->B (lhs, rhs).
``fusion_merge``
    a binary kernel op whose operands are both region ends joins them into one.

The left side of every rule matches unfused ``Kernel*`` ops and the right side builds
``Fused*`` ops (another sort of term), so no rule re-matches its own output. Fusion only
follows reads whose strides are the producer's own out strides (one pattern variable,
``?o``, for both) over the same shape, so element ``z`` of the consumer is element ``z`` of
the producer. Reductions are never fused through, a lone op never forms a region, and
there is no ``FS(FS x) = FS x`` or ``FS(FE x) = x`` rule (both put cycles into e-classes).

Guards keep the number of regions small and the rules finite on e-graphs with cycles
(``x * 1 = x`` puts an op in its own operand's e-class):

- a rule never fires where the op reads its own e-class;
- a region grows (and merges) only from one region per e-class: ``largest-region`` is the
  most ops of any region ending there, ``region-of`` the first region of each size. Every
  e-class so offers a few regions (pairs, one grown from each operand, one merge of both)
  rather than every sub-region of the graph above it, whose number is exponential in the
  graph's size (and doubly so where equal-sized regions would all be combined);
- a region grows only while it has fewer than ``MAX_REGION_OPS`` ops (counted once per path
  into its last op, so an op read twice inside counts twice).
"""

from __future__ import annotations

from ..core.ops import FUSABLE_BINARY, FUSABLE_UNARY
from .ops import Rule

FUSION_RULESETS = ("fusion_pair", "fusion_grow", "fusion_merge")
MAX_REGION_OPS = 24
FUNCTIONS = ("(function largest-region (IR) i64 :merge (max old new))",
             "(function region-of (IR i64) IR :merge old)",
             "(function fused-origin (IR) IR :merge old)")  # a fused op's e-class -> the kernel op's it mirrors


def signatures() -> list[tuple[str, tuple[str, ...]]]:
    """The OpKind constructors of the markers and fused ops."""
    region = ("EList", "EList", "DType")  # shape, out strides, dtype
    return [("FusionStart", ("EList", "View", "EList", "DType")), ("FusionEnd", region),
            *((f"Fused{op}", region) for op in (*FUSABLE_UNARY, *FUSABLE_BINARY))]


# ---- terms ---------------------------------------------------------------------------------------
def _ilist(*items: str) -> str:
    text = "(INil)"
    for item in reversed(items):
        text = f"(ICons {item} {text})"
    return text


def _kernel(op: str, views: tuple[str, ...], operands: tuple[str, ...]) -> str:
    return f"(Op (Kernel{op} ?s {' '.join(views)} ?o ?dt) {_ilist(*operands)})"


def _fused(op: str, *operands: str) -> str:
    return f"(Op (Fused{op} ?s ?o ?dt) {_ilist(*operands)})"


def _start(view: str, source: str) -> str:
    return f"(Op (FusionStart ?s {view} ?o ?dt) {_ilist(source)})"


def _end(inner: str) -> str:
    return f"(Op (FusionEnd ?s ?o ?dt) {_ilist(inner)})"


_CONTIGUOUS = "(Strided ?o)"  # a read of a producer's output in its own layout


def _rule(ruleset: str, name: str, query: list[str], inner: str, size: str, producer: str = "") -> Rule:
    """``?e`` (the consumer) gets the alternative ``FusionEnd(inner)``; ``inner`` computes ``size`` ops. Its top
    fused op mirrors ``?e``, and ``?p`` (bound to ``producer``, where given) mirrors ``?m``: ``fused-origin``
    records both, so the fused ops keep the HLIR provenance of the ops they replace."""
    bind_producer = f"(let ?p {producer}) (set (fused-origin ?p) ?m) " if producer else ""
    actions = (f"{bind_producer}(let ?inner {inner}) (set (fused-origin ?inner) ?e) (let ?size {size})"
               f" (set (region-of ?e ?size) ?inner) (set (largest-region ?e) ?size) (union ?e {_end('?inner')})")
    return Rule(name, ruleset, f"(rule ({' '.join(query)}) ({actions}) :ruleset {ruleset} :name \"{name}\")")


def _producer(op: str, prefix: str) -> tuple[str, str]:
    """A kernel op producing ``?m`` (its pattern) and the fused term that computes it from starts."""
    if op in FUSABLE_UNARY:
        view, source = f"?{prefix}v", f"?{prefix}x"
        return (f"(= ?m {_kernel(op, (view,), (source,))})", _fused(op, _start(view, source)))
    views, sources = (f"?{prefix}va", f"?{prefix}vb"), (f"?{prefix}a", f"?{prefix}b")
    return (f"(= ?m {_kernel(op, views, sources)})",
            _fused(op, *(_start(v, x) for v, x in zip(views, sources))))


def _consumer(op: str, side: str) -> tuple[str, str]:
    """A kernel op ``?e`` reading ``?m`` contiguously on ``side`` (``x``, ``lhs`` or ``rhs``) and the other operand."""
    if side == "x":
        return f"(= ?e {_kernel(op, (_CONTIGUOUS,), ('?m',))})", ""
    views = (_CONTIGUOUS, "?cv") if side == "lhs" else ("?cv", _CONTIGUOUS)
    operands = ("?m", "?c") if side == "lhs" else ("?c", "?m")
    return f"(= ?e {_kernel(op, views, operands)})", _start("?cv", "?c")


def _sides(op: str) -> tuple[str, ...]:
    return ("x",) if op in FUSABLE_UNARY else ("lhs", "rhs")


def _combine(op: str, side: str, inside: str, other: str) -> str:
    if side == "x":
        return _fused(op, inside)
    return _fused(op, inside, other) if side == "lhs" else _fused(op, other, inside)


def pair_rules() -> list[Rule]:
    """U->U, B->U, U->B and B->B: a consumer and the kernel op it reads become one region of two ops."""
    rules = []
    for consumer in (*FUSABLE_UNARY, *FUSABLE_BINARY):
        for side in _sides(consumer):
            for producer in (*FUSABLE_UNARY, *FUSABLE_BINARY):
                matched, inside = _producer(producer, "p")
                query, other = _consumer(consumer, side)
                name = f"fuse-{producer}-{consumer}" + ("" if side == "x" else f"-{side}")
                rules.append(_rule("fusion_pair", name, [query, matched, "(!= ?e ?m)"],
                                   _combine(consumer, side, "?p", other), "2", producer=inside))
    return rules


def grow_rules() -> list[Rule]:
    """FE->U and FE->B: a kernel op reading a region's end joins the region."""
    rules = []
    for consumer in (*FUSABLE_UNARY, *FUSABLE_BINARY):
        for side in _sides(consumer):
            query, other = _consumer(consumer, side)
            name = f"grow-{consumer}" + ("" if side == "x" else f"-{side}")
            rules.append(_rule("fusion_grow", name,
                               [query, "(!= ?e ?m)", "(= ?k (largest-region ?m))", "(= ?y (region-of ?m ?k))",
                                f"(< ?k {MAX_REGION_OPS})"],
                               _combine(consumer, side, "?y", other), "(+ ?k 1)"))
    return rules


def merge_rules() -> list[Rule]:
    """FE,FE at a binary kernel op: both regions and the op become one region."""
    rules = []
    for op in FUSABLE_BINARY:
        query = [f"(= ?e {_kernel(op, (_CONTIGUOUS, _CONTIGUOUS), ('?m', '?n'))})", "(!= ?e ?m)", "(!= ?e ?n)",
                 "(= ?i (largest-region ?m))", "(= ?y (region-of ?m ?i))", "(= ?j (largest-region ?n))",
                 "(= ?w (region-of ?n ?j))", "(= ?k (+ ?i ?j))", f"(< ?k {MAX_REGION_OPS})"]
        rules.append(_rule("fusion_merge", f"merge-{op}", query, _fused(op, "?y", "?w"), "(+ ?k 1)"))
    return rules


def fusion_rules() -> list[Rule]:
    return [*pair_rules(), *grow_rules(), *merge_rules()]
