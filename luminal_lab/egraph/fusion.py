"""Fusion in the marker design: the rules that offer fused regions as alternatives.

A region is a term ``(FusionEnd (Fused<Op> ... (FusionStart x)))``: each ``FusionStart``
reads one outside e-class through its own view, the ``Fused<Op>`` ops inside run on values
(unary ``FusedSin/Sqrt/Exp/Exp2/Log2/Recip``, binary ``FusedAdd/Mul``, the ternary ``FusedSelect``,
and in a row region the reductions ``FusedSumReduce/MaxReduce``), and the single ``FusionEnd`` is
unioned with the e-class of the kernel op it replaces, so a genome chooses between the fused and
the unfused form. Every marker and fused op carries its shape, its (contiguous) out strides and its
dtype (a select's condition starts with its own, bool or int; all else is the region's); a fused
reduction also its reduced extent.

Elementwise rule families, each a ruleset:

``fusion_pair``
    two neighbouring kernel ops become a region: U->U, B->U, U->B (lhs, rhs), B->B (lhs, rhs), and
    the same with a select on either side (reading the other op as ``a`` or ``b``).
``fusion_grow``
    a kernel op that reads a region's end joins it: FE->U, FE->B (lhs, rhs), FE->select (a, b).
``fusion_merge``
    a binary kernel op whose operands are both region ends joins them into one.

The left side of every rule matches unfused ``Kernel*`` ops and the right side builds
``Fused*`` ops (another sort of term), so no rule re-matches its own output. Fusion only
follows reads whose strides are the producer's own out strides (one pattern variable,
``?o``, for both) over the same shape, so element ``z`` of the consumer is element ``z`` of
the producer. A lone elementwise op never forms a region, and there is no ``FS(FS x) = FS x``
or ``FS(FE x) = x`` rule (both put cycles into e-classes).

Row regions hold reductions (softmax, norms, the attention row). Their *rows* are the reductions'
out shape ``r``; every value in one has shape ``r`` (or ``r`` with a trailing 1, schema's strides
make that the same layout) and is computed once per row, or shape ``r + [n]`` and is computed
along the row, either possibly after a leading 1 (a batch of one: ``on-rows``). ``row-shape``
records ``r`` on each fused term with a reduction inside (following from the operands, rules in
``fusion_grow``); a region without one is *plain*. The row rules:

- a reduction reading its source through a plain view is a region of its own (``reduce-<op>``);
  one reading an unfused elementwise op pairs with it (``fuse-<op>-<reduce>``); one reading a
  region's end of shape ``r + [n]`` joins it (``grow-<reduce>``, from a plain region or one with
  the same rows);
- an elementwise op reading a region's end in its own layout joins a plain region (``grow-<op>``),
  or a region with rows ``r`` where the op is on those rows (``grow-<op>-rows``);
- an op reading the end of a region with rows ``r`` along the row (its strides with a 0 appended,
  or the end's own strides where the end's shape is ``r + [1]``) joins it (``grow-<op>-<side>-bcast``
  and ``-keepdim``), and so does a binary op reading such an end and another region's end
  (``merge-<op>-<side>-...``);
- regions with reductions merge only where their rows agree; the elementwise merge only merges
  plain regions;
- each row region's ``FusionEnd`` gets a ``FusionEndWarp`` twin in its e-class (``warp-per-row``):
  the same region, run on a GPU by one warp per row instead of one block, a choice the genome
  makes (and a CPU search leaves out, as it runs both alike).

Guards keep the number of regions small and the rules finite on e-graphs with cycles
(``x * 1 = x`` puts an op in its own operand's e-class):

- a rule never fires where the op reads its own e-class;
- a region grows (and merges) only from one region per e-class and kind (plain, or rows ``r``):
  ``largest-plain`` and ``largest-rows`` are the most ops of any region of that kind ending there,
  ``plain-region`` and ``rows-region`` the first region of each size. Every e-class so offers a
  few regions (pairs, one grown from each operand, one merge of both) rather than every
  sub-region of the graph above it, whose number is exponential in the graph's size (and doubly
  so where equal-sized regions would all be combined). Keeping the kinds apart lets a region of
  one kind grow where a larger one of another ends: the scaled, masked scores of attention are
  both a plain region (scale, mask) that the softmax grows from, and a region of the q·kᵀ row
  sums (a matmul as a row region) that nothing past the scores can join;
- a region grows only while it has fewer than ``MAX_REGION_OPS`` ops (counted once per path
  into its last op, so an op read twice inside counts twice: the masked attention row, scale,
  select and softmax, counts 25 for its 11 ops).
"""

from __future__ import annotations

from ..core.ops import FUSABLE_BINARY, FUSABLE_REDUCE, FUSABLE_TERNARY, FUSABLE_UNARY, KERNELS
from .ops import Rule, inputs, op_term

FUSION_RULESETS = ("fusion_pair", "fusion_grow", "fusion_merge")
MAX_REGION_OPS = 32
FUNCTIONS = ("(function largest-plain (IR) i64 :merge (max old new))",  # e-class -> most ops of a plain region
             "(function plain-region (IR i64) IR :merge old)",  # (e-class, ops) -> a plain region's inner term
             "(function largest-rows (IR EList) i64 :merge (max old new))",  # (e-class, rows) -> most ops
             "(function rows-region (IR EList i64) IR :merge old)",  # (e-class, rows, ops) -> a row region's term
             "(function fused-origin (IR) IR :merge old)",  # a fused op's e-class -> the kernel op's it mirrors
             "(function row-shape (IR) EList :merge old)",  # a fused term's rows: its reductions' out shape
             "(relation on-rows (EList EList))")  # (on-rows s r): shape s is rows r, or r + [n], or either after a 1

_ELEMENTWISE = (*FUSABLE_UNARY, *FUSABLE_BINARY, *FUSABLE_TERNARY)


# ---- terms ---------------------------------------------------------------------------------------
def _matched_inputs(*operands: str) -> str:
    """The inputs of an op in a query: its operands, then a tail variable of its own. Every op of a kind has the same
    number of inputs, so the tail is always ``INil``; a query naming ``(INil)`` in two lists lets egglog join them
    on it first, a product of every one-input list with every other (5 s an iteration for one rule on a 13k-node
    e-graph, instead of 30 ms)."""
    return inputs(*operands, tail="?tail-" + "-".join(operand.removeprefix("?") for operand in operands))


_HERE = ("?s", "?o")  # the shape and out strides of the op a rule fuses (its dtype is ?dt)


def _kernel(op: str, views: tuple[str, ...], operands: tuple[str, ...], at: tuple[str, str] = _HERE) -> str:
    """Elementwise kernel op ``op`` at ``at``, reading ``operands`` through ``views`` (its view fields, in order)."""
    named = dict(zip((f.name for f in KERNELS[op].fields if f.sort == "View"), views))
    return op_term(f"Kernel{op}", _matched_inputs(*operands), shape=at[0], out=at[1], dtype="?dt", **named)


def _fused(op: str, *operands: str, at: tuple[str, str] = _HERE) -> str:
    return op_term(f"Fused{op}", inputs(*operands), shape=at[0], out=at[1], dtype="?dt")


def _start(view: str, source: str, at: tuple[str, str] = _HERE, dtype: str = "?dt") -> str:
    return op_term("FusionStart", inputs(source), shape=at[0], view=view, out=at[1], dtype=dtype)


def _end(inner: str, at: tuple[str, str] = _HERE, marker: str = "FusionEnd") -> str:
    return op_term(marker, inner, shape=at[0], out=at[1], dtype="?dt")


_CONTIGUOUS = "(Strided ?o)"  # a read of a producer's output in its own layout


def _rule(ruleset: str, name: str, query: list[str], inner: str, size: str, producer: str = "",
          at: tuple[str, str] = _HERE, rows: str = "") -> Rule:
    """``?e`` (the consumer, of shape and out strides ``at``) gets the alternative ``FusionEnd(inner)``; ``inner``
    computes ``size`` ops. Its top fused op mirrors ``?e``, and ``?p`` (bound to ``producer``, where given) mirrors
    ``?m``: ``fused-origin`` records both, so the fused ops keep the HLIR provenance of the ops they replace.
    ``rows``, where given, is the new region's ``row-shape`` (else it is plain)."""
    bind_producer = f"(let ?p {producer}) (set (fused-origin ?p) ?m) " if producer else ""
    if rows:
        record = (f"(set (row-shape ?inner) {rows}) (set (rows-region ?e {rows} ?size) ?inner)"
                  f" (set (largest-rows ?e {rows}) ?size)")
    else:
        record = "(set (plain-region ?e ?size) ?inner) (set (largest-plain ?e) ?size)"
    actions = (f"{bind_producer}(let ?inner {inner}) (set (fused-origin ?inner) ?e) (let ?size {size}) {record}"
               f" (union ?e {_end(inputs('?inner'), at)})")
    return Rule(name, ruleset, f"(rule ({' '.join(query)}) ({actions}))")


def _producer(op: str, prefix: str, at: tuple[str, str] = _HERE) -> tuple[str, str]:
    """A kernel op producing ``?m`` (its pattern) and the fused term that computes it from starts."""
    if op in FUSABLE_UNARY:
        view, source = f"?{prefix}v", f"?{prefix}x"
        return (f"(= ?m {_kernel(op, (view,), (source,), at)})", _fused(op, _start(view, source, at), at=at))
    if op in FUSABLE_TERNARY:  # the condition starts with its own dtype
        views, sources = (f"?{prefix}vc", f"?{prefix}va", f"?{prefix}vb"), (f"?{prefix}c", f"?{prefix}a", f"?{prefix}b")
        condition = _start(views[0], sources[0], at, f"?{prefix}cdt")
        return (f"(= ?m {_kernel(op, views, sources, at)}) (= ?{prefix}cdt (dtype ?{prefix}c))",
                _fused(op, condition, *(_start(v, x, at) for v, x in zip(views[1:], sources[1:])), at=at))
    views, sources = (f"?{prefix}va", f"?{prefix}vb"), (f"?{prefix}a", f"?{prefix}b")
    return (f"(= ?m {_kernel(op, views, sources, at)})",
            _fused(op, *(_start(v, x, at) for v, x in zip(views, sources)), at=at))


# the operand a consumer reads ``?m`` as: the only one, the left or right, or a select's ``a`` or ``b``
_POSITION = {"x": 0, "lhs": 0, "rhs": 1, "a": 1, "b": 2}


def _consumer(op: str, side: str, read: str = _CONTIGUOUS) -> tuple[str, list[str]]:
    """A kernel op ``?e`` reading ``?m`` through ``read`` on ``side`` (``x``, ``lhs``, ``rhs``, ``a`` or ``b``), and
    its other operands as starts, in order (``?c`` through ``?cv``; a select's condition ``?sc`` through ``?scv``,
    with its own dtype)."""
    if side == "x":
        return f"(= ?e {_kernel(op, (read,), ('?m',))})", []
    if op in FUSABLE_TERNARY:
        views, operands = ["?scv", "?cv", "?cv"], ["?sc", "?c", "?c"]
        views[_POSITION[side]], operands[_POSITION[side]] = read, "?m"
        others = [_start("?scv", "?sc", dtype="?scdt"), _start("?cv", "?c")]
        return f"(= ?e {_kernel(op, tuple(views), tuple(operands))}) (= ?scdt (dtype ?sc))", others
    views = (read, "?cv") if side == "lhs" else ("?cv", read)
    operands = ("?m", "?c") if side == "lhs" else ("?c", "?m")
    return f"(= ?e {_kernel(op, views, operands)})", [_start("?cv", "?c")]


def _sides(op: str) -> tuple[str, ...]:
    """The operands of ``op`` through which it joins a region (not a select's condition: of another dtype)."""
    return ("x",) if op in FUSABLE_UNARY else ("a", "b") if op in FUSABLE_TERNARY else ("lhs", "rhs")


def _combine(op: str, side: str, inside: str, others: list[str]) -> str:
    """``op`` on ``inside`` at ``side``'s position and ``others`` (in order) at the rest."""
    operands = list(others)
    operands.insert(_POSITION[side], inside)
    return _fused(op, *operands)


def _largest(cls: str, size: str, region: str, rows: str = "") -> list[str]:
    """``region`` is the plain region (or, given ``rows``, the region with those rows) of most ops (``size``) ending at
    e-class ``cls``."""
    if rows:
        return [f"(= {size} (largest-rows {cls} {rows}))", f"(= {region} (rows-region {cls} {rows} {size}))"]
    return [f"(= {size} (largest-plain {cls}))", f"(= {region} (plain-region {cls} {size}))"]


def _region_at(cls: str, size: str, region: str, rows: str = "") -> list[str]:
    """``_largest`` ends at ``cls``, an operand of ``?e``, and may grow."""
    return [f"(!= ?e {cls})", *_largest(cls, size, region, rows), f"(< {size} {MAX_REGION_OPS})"]


def pair_rules() -> list[Rule]:
    """U->U, B->U, U->B and B->B: a consumer and the kernel op it reads become one region of two ops."""
    rules = []
    for consumer in _ELEMENTWISE:
        for side in _sides(consumer):
            for producer in _ELEMENTWISE:
                matched, inside = _producer(producer, "p")
                query, others = _consumer(consumer, side)
                name = f"fuse-{producer}-{consumer}" + ("" if side == "x" else f"-{side}")
                rules.append(_rule("fusion_pair", name, [query, matched, "(!= ?e ?m)"],
                                   _combine(consumer, side, "?p", others), "2", producer=inside))
    return rules


def grow_rules() -> list[Rule]:
    """FE->U and FE->B: a kernel op reading a region's end joins the region: any plain one, and one with rows ``?r``
    where the op is on those rows (``on-rows``)."""
    rules = []
    for consumer in _ELEMENTWISE:
        for side in _sides(consumer):
            query, others = _consumer(consumer, side)
            name = f"grow-{consumer}" + ("" if side == "x" else f"-{side}")
            rules.append(_rule("fusion_grow", name, [query, *_region_at("?m", "?k", "?y")],
                               _combine(consumer, side, "?y", others), "(+ ?k 1)"))
            rules.append(_rule("fusion_grow", f"{name}-rows", [query, *_region_at("?m", "?k", "?y", "?r"),
                                                                "(on-rows ?s ?r)"],
                               _combine(consumer, side, "?y", others), "(+ ?k 1)", rows="?r"))
    return rules


def merge_rules() -> list[Rule]:
    """FE,FE at a binary kernel op: both (plain) regions and the op become one region."""
    rules = []
    for op in FUSABLE_BINARY:
        query = [f"(= ?e {_kernel(op, (_CONTIGUOUS, _CONTIGUOUS), ('?m', '?n'))})", "(!= ?e ?m)", "(!= ?e ?n)",
                 *_largest("?m", "?i", "?y"), *_largest("?n", "?j", "?w"), "(= ?k (+ ?i ?j))",
                 f"(< ?k {MAX_REGION_OPS})"]
        rules.append(_rule("fusion_merge", f"merge-{op}", query, _fused(op, "?y", "?w"), "(+ ?k 1)"))
    return rules


# ---- row regions -----------------------------------------------------------------------------------
def _reduction(op: str, source: str) -> str:
    """A reduction ``?e`` with rows ``?s``, extent ``?k`` and out strides ``?o`` reading ``source`` unmasked."""
    reduction = op_term(f"Kernel{op}", _matched_inputs(source), shape="?s", extent="?k", kept="(Strided ?kept)",
                        stride="?ks", mask="(MNum 1)", out="?o", dtype="?dt")
    return f"(= ?e {reduction})"


def _fused_reduction(op: str, operand: str) -> str:
    return op_term(f"Fused{op}", inputs(operand), shape="?s", extent="?k", out="?o", dtype="?dt")


# the reduction reads a value of shape ?ps (its rows, then ?k) and out strides ?po in that value's own layout
_ALONG_ROWS = ("(init-of ?po ?kept ?ks)", "(init-of ?ps ?s ?k)")

# an op of shape ?s reading an end (shape, out strides ?po) of a region with rows ?r along the row, through view ?v:
# the end has shape ?r and ?v is ?po with a 0 appended, or the end has shape ?r + [1] and is read in its own layout
_ROW_READS = {
    "bcast": ("(Strided ?v)", f"(= {{end}} {_end('{fe}', ('?r', '?po'))})", "(init-of ?v ?po (MNum 0))"),
    "keepdim": ("(Strided ?po)", f"(= {{end}} {_end('{fe}', ('?ps', '?po'))})", "(init-of ?ps ?r (MNum 1))"),
}


def row_rules() -> list[Rule]:
    """Reductions with their producers and their readers (see the module docstring)."""
    rules = []
    for op in FUSABLE_REDUCE:
        start = _start("(Strided ?full)", "?x", ("?es", "?full"))
        rules.append(_rule("fusion_pair", f"reduce-{op}",
                           [_reduction(op, "?x"), "(!= ?e ?x)", "(init-of ?full ?kept ?ks)", "(init-of ?es ?s ?k)"],
                           _fused_reduction(op, start), "1", rows="?s"))
        for producer in _ELEMENTWISE:
            matched, inside = _producer(producer, "p", ("?ps", "?po"))
            rules.append(_rule("fusion_pair", f"fuse-{producer}-{op}",
                               [_reduction(op, "?m"), matched, "(!= ?e ?m)", *_ALONG_ROWS],
                               _fused_reduction(op, "?p"), "2", producer=inside, rows="?s"))
        end = [f"(= ?m {_end('?fe', ('?ps', '?po'))})", *_ALONG_ROWS]
        for kind, rows in (("plain", ""), ("rows", "?s")):
            rules.append(_rule("fusion_grow", f"grow-{op}-{kind}", [_reduction(op, "?m"),
                                                                   *_region_at("?m", "?j", "?y", rows), *end],
                               _fused_reduction(op, "?y"), "(+ ?j 1)", rows="?s"))
    for op in FUSABLE_BINARY:
        for side in ("lhs", "rhs"):
            for kind, (view, end, relation) in _ROW_READS.items():
                query, others = _consumer(op, side, view)
                rules.append(_rule("fusion_grow", f"grow-{op}-{side}-{kind}",
                                   [query, *_region_at("?m", "?j", "?y", "?r"),
                                    end.format(end="?m", fe="?fe"), relation, "(init-of ?s ?r ?n)"],
                                   _combine(op, side, "?y", others), "(+ ?j 1)", rows="?r"))
        rules += _row_merges(op)
    return rules


def _row_merges(op: str) -> list[Rule]:
    """A binary op joining two region ends (``?m`` lhs, ``?q`` rhs), at least one of them with rows ``?r``."""
    rules = []
    both = ["(!= ?e ?q)", "(= ?k (+ ?i ?j))", f"(< ?k {MAX_REGION_OPS})"]
    at_shape = f"(= {{end}} {_end('{fe}')})"  # an end read in its own layout over the op's shape
    for kind, lhs, rhs in (("rows", "?r", "?r"), ("rows-plain", "?r", ""), ("plain-rows", "", "?r")):
        query = [f"(= ?e {_kernel(op, (_CONTIGUOUS, _CONTIGUOUS), ('?m', '?q'))})", "(!= ?e ?m)", *both,
                 *_largest("?m", "?i", "?y", lhs), *_largest("?q", "?j", "?w", rhs),
                 at_shape.format(end="?m", fe="?fa"), at_shape.format(end="?q", fe="?fb")]
        rules.append(_rule("fusion_merge", f"merge-{op}-{kind}", query, _fused(op, "?y", "?w"), "(+ ?k 1)",
                           rows="?r"))
    for side in ("lhs", "rhs"):  # the row-level end is read along the row on ``side``, the other in its own layout
        (row, row_class, row_size), (other, other_class, other_size) = \
            (("?y", "?m", "?i"), ("?w", "?q", "?j")) if side == "lhs" else (("?w", "?q", "?j"), ("?y", "?m", "?i"))
        for kind, (view, end, relation) in _ROW_READS.items():
            views = (view, _CONTIGUOUS) if side == "lhs" else (_CONTIGUOUS, view)
            for other_kind, other_rows in (("rows", "?r"), ("plain", "")):
                query = [f"(= ?e {_kernel(op, views, ('?m', '?q'))})", "(!= ?e ?m)", *both,
                         *_largest(row_class, row_size, row, "?r"),
                         *_largest(other_class, other_size, other, other_rows),
                         end.format(end=row_class, fe="?fa"), relation, "(init-of ?s ?r ?n)",
                         at_shape.format(end=other_class, fe="?fb")]
                rules.append(_rule("fusion_merge", f"merge-{op}-{side}-{kind}-{other_kind}", query,
                                   _fused(op, "?y", "?w"), "(+ ?k 1)", rows="?r"))
    return rules


def bookkeeping_rules() -> list[Rule]:
    """``row-shape`` of fused terms, from their operands, and the shapes ``on-rows`` of each row shape (of the lists
    that exist: no terms are made)."""
    texts = {"on-rows": "((= ?r (row-shape ?t))) ((on-rows ?r ?r))",
             "on-rows-along": "((= ?r (row-shape ?t)) (init-of ?s ?r ?n)) ((on-rows ?s ?r))",
             "on-rows-batch": "((on-rows ?s ?r) (= ?b (ECons (MNum 1) ?s))) ((on-rows ?b ?r))"}
    sides = {**{op: (("", "?a"),) for op in FUSABLE_UNARY}, **{op: (("-lhs", "?a"), ("-rhs", "?b"))
                                                                for op in FUSABLE_BINARY},
             **{op: (("-c", "?c"), ("-a", "?a"), ("-b", "?b")) for op in FUSABLE_TERNARY}}
    for op, operands in sides.items():
        term = f"(= ?t {_fused(op, *(x for _, x in operands))})"
        for label, x in operands:
            texts[f"rows-{op}{label}"] = f"({term} (= ?r (row-shape {x}))) ((set (row-shape ?t) ?r))"
    return [Rule(name, "fusion_grow", f"(rule {text})") for name, text in texts.items()]


def warp_rules() -> list[Rule]:
    """A row region's end gets a ``FusionEndWarp`` twin in its e-class: the same region run a warp per row on a GPU
    (``FusionEnd`` runs it a block per row), a choice the genome makes."""
    text = (f"(rule ((= ?e {_end('?ins')}) (= ?ins (ICons ?inner (INil))) (= ?r (row-shape ?inner)))"
            f" ((union ?e {_end('?ins', marker='FusionEndWarp')})))")
    return [Rule("warp-per-row", "fusion_grow", text)]


def fusion_rules() -> list[Rule]:
    return [*pair_rules(), *grow_rules(), *merge_rules(), *row_rules(), *bookkeeping_rules(), *warp_rules()]
