"""Fusion in the marker design: the rules that offer fused regions as alternatives.

A region is a term ``(FusionEnd (Fused<Op> ... (FusionStart x)))``: each ``FusionStart``
reads one outside e-class through its own view, the ``Fused<Op>`` ops inside run on values
(unary ``FusedSin/Sqrt/Exp/Exp2/Log2/Recip/Tanh``, binary ``FusedAdd/Mul``, the ternary ``FusedSelect``,
and in a row region the reductions ``FusedSumReduce/MaxReduce``), and the single ``FusionEnd`` is
unioned with the e-class of the kernel op it replaces, so a genome chooses between the fused and
the unfused form. Every marker and fused op carries its shape, its (contiguous) out strides and its
dtype (a select's condition starts with its own, bool or int; all else is the region's); a fused
reduction also its reduced extent.

The rules are written over classes of kernel, not per op. ``fusion_facts`` (one rule per fusing op,
generated from ``core.ops``) states once per kernel what the class rules need:

- ``(ew k fk s o dt n)``: kernel kind ``k`` is elementwise with ``n`` operands over shape ``s``, out
  strides ``o`` and dtype ``dt``; ``fk`` is the kind of its fused mirror (``FusedAdd s o dt``);
- ``(reads ins k p x v)``: that kernel, reading the operand list ``ins``, reads ``x`` through view ``v``
  as its operand ``p``, one row per operand through which it joins a region (not a select's
  condition: of another dtype);
- ``(operand ins k p x v dt)``: every operand, with the dtype its ``FusionStart`` has;
- ``(red k fk s n kept ks o dt)``: a reduction (unmasked) of rows ``s`` and extent ``n`` reading its
  source through the kept strides ``kept`` and the reduced stride ``ks``.

A region's op is then ``(Op fk list)``, its list the kernel's operands, each read through a
``FusionStart`` of its own view, but for the one (or two) fused there:
``(FusedOperands k ins 0 p inner t other)`` (``t`` -1 where one is), which four rules of ``fusion_grow``
write out operand by operand, a start made only where one is read (each written term is subsumed, so no
genome picks it).

Elementwise rule families:

``fusion_pair``
    a kernel op and the elementwise kernel op it reads in that one's own layout become a region.
``fusion_grow``
    a kernel op that reads a region's end joins it.
``fusion_merge``
    a binary kernel op whose operands are both region ends joins them into one.

The left side of every rule matches unfused ``Kernel*`` ops and the right side builds
``Fused*`` ops (another sort of term), so no rule re-matches its own output. Fusion only
follows reads whose strides are the producer's own out strides (one pattern variable,
``?o``, for both) over the same shape, so element ``z`` of the consumer is element ``z`` of
the producer (a read of a slice of a region's end, with the end's own strides over a shape of fewer elements, is
offered too: extraction refuses that region, ``llir.regions``). A lone elementwise op never forms a region, and there
is no ``FS(FS x) = FS x``
or ``FS(FE x) = x`` rule (both put cycles into e-classes).

Row regions hold reductions (softmax, norms, the attention row). Their *rows* are the reductions'
out shape ``r``; every value in one has shape ``r`` (or ``r`` with a trailing 1, schema's strides
make that the same layout) and is computed once per row, or shape ``r + [n]`` and is computed
along the row, either possibly after a leading 1 (a batch of one: ``on-rows``). ``row-shape``
records ``r`` on each region's inner term made by a rule for row regions; a region without one is
*plain*. The row rules:

- a reduction reading its source through a plain view is a region of its own (``reduce``); one
  reading an unfused elementwise op pairs with it (``fuse-into-reduce``); one reading a region's
  end of shape ``r + [n]`` joins it (``grow-reduce-<kind>``, from a plain region or one with the
  same rows);
- an elementwise op reading a region's end in its own layout joins a plain region (``grow-plain``),
  or a region with rows ``r`` where the op is on those rows (``grow-rows``);
- a binary op reading the end of a region with rows ``r`` along the row (its strides with a 0
  appended, or the end's own strides where the end's shape is ``r + [1]``) joins it
  (``grow-bcast``, ``grow-keepdim``), and so does a binary op reading such an end and another
  region's end (``merge-<kind>-<other>``);
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
  ``plain-region`` and ``rows-region`` a region of each size, the one whose last op reads the fewest
  operands (``plain-operands``, ``rows-operands``): where an exact kernel and its decomposition end
  regions of one size at one e-class, as ``KernelTanh`` and its ``Exp2`` form (ending in an ``Add``) do,
  the exact one grows on, whatever order egglog applies the matches in. Every e-class so offers a
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
from .ops import Rule, inputs, kind, op_term

FUSION_RULESETS = ("fusion_facts", "fusion_pair", "fusion_grow", "fusion_merge")
MAX_REGION_OPS = 32
FUNCTIONS = ("(relation ew (OpKind OpKind EList EList DType i64))",  # (kind, fused kind, shape, out, dtype, operands)
             "(relation reads (IList OpKind i64 IR View))",  # (list, kind, position, operand, view): joinable reads
             "(relation operand (IList OpKind i64 IR View DType))",  # (list, kind, position, operand, view, dtype)
             "(relation red (OpKind OpKind EList Expression EList Expression EList DType))",  # a reduction's facts
             "(function largest-plain (IR) i64 :merge (max old new))",  # e-class -> most ops of a plain region
             "(function plain-operands (IR i64) i64 :merge (min old new))",  # (e-class, ops) -> fewest operands
             "(function plain-region (IR i64 i64) IR :merge old)",  # (e-class, ops, operands) -> its inner term
             "(function largest-rows (IR EList) i64 :merge (max old new))",  # (e-class, rows) -> most ops
             "(function rows-operands (IR EList i64) i64 :merge (min old new))",  # (e-class, rows, ops) -> fewest
             "(function rows-region (IR EList i64 i64) IR :merge old)",  # (e-class, rows, ops, operands) -> its term
             "(function fused-origin (IR) IR :merge old)",  # a fused op's e-class -> the kernel op's it mirrors
             "(function row-shape (IR) EList :merge old)",  # a fused term's rows: its reductions' out shape
             "(relation on-rows (EList EList))")  # (on-rows s r): shape s is rows r, or r + [n], or either after a 1
FUSING = (*FUSABLE_UNARY, *FUSABLE_BINARY, *FUSABLE_TERNARY)  # the elementwise fusing ops


# ---- facts: once per kernel ----------------------------------------------------------------------
def _elementwise_facts(name: str) -> Rule:
    """What the class rules know of an elementwise kernel of op ``name`` (see the module docstring)."""
    op = KERNELS[name]
    views = [f.name for f in op.fields if f.sort == "View"]
    values = {f.name: f"?{f.name}" for f in op.kernel_fields} | {"shape": "?s", "out": "?o", "dtype": "?dt"}
    operands = [f"?x{i}" for i in range(len(views))]
    condition = name in FUSABLE_TERNARY  # the first operand is a condition, started with its own dtype
    dtypes = ["?cdt" if condition and i == 0 else "?dt" for i in range(len(views))]
    every = " ".join(f"(operand ?ins ?kd {i} {x} ?{v} {dt})"
                     for i, (x, v, dt) in enumerate(zip(operands, views, dtypes)))
    query = (f"(= ?kd {kind(op.kernel, **values)}) (= ?e (Op ?kd ?ins)) (= ?ins {inputs(*operands, tail='?tail')})"
             + (" (= ?cdt (dtype ?x0))" if condition else ""))
    reads = " ".join(f"(reads ?ins ?kd {i} {x} ?{v})" for i, (x, v) in enumerate(zip(operands, views))
                     if not (condition and i == 0))
    fused = kind(f"Fused{name}", shape="?s", out="?o", dtype="?dt")
    return Rule(f"facts-{name}", "fusion_facts",
                f"(rule ({query}) ((ew ?kd {fused} ?s ?o ?dt {len(views)}) {reads} {every}))")


def _reduction_facts(name: str) -> Rule:
    reduction = kind(f"Kernel{name}", shape="?s", extent="?n", kept="(Strided ?kept)", stride="?ks", mask="(MNum 1)",
                     out="?o", dtype="?dt")
    fused = kind(f"Fused{name}", shape="?s", extent="?n", out="?o", dtype="?dt")
    return Rule(f"facts-{name}", "fusion_facts",
                f"(rule ((= ?kd {reduction})) ((red ?kd {fused} ?s ?n ?kept ?ks ?o ?dt)))")


def fact_rules() -> list[Rule]:
    return [*(_elementwise_facts(name) for name in FUSING), *(_reduction_facts(name) for name in FUSABLE_REDUCE)]


# ---- terms ---------------------------------------------------------------------------------------
def _op(fused_kind: str, operands: str) -> str:
    return f"(Op {fused_kind} {operands})"


def _end(inner: str, at: tuple[str, str] = ("?s", "?o"), marker: str = "FusionEnd") -> str:
    return op_term(marker, inner, shape=at[0], out=at[1], dtype="?dt")


def _operands(position: str, inner: str, second: str = "-1", other: str = "?e", of: str = "?kd ?ins") -> str:
    """The fused op's operands: those of the kernel e-node ``of`` (e-class ``?e``) as starts, but ``inner`` at
    ``position`` (and ``other`` at ``second``; a position -1 is none, its term the e-node's own e-class)."""
    return f"(FusedOperands {of} 0 {position} {inner} {second} {other})"


def _rule(ruleset: str, name: str, query: list[str], inner: str, size: str, producer: str = "",
          at: tuple[str, str] = ("?s", "?o"), rows: str = "", operands: str = "?ar") -> Rule:
    """``?e`` (the consumer, of shape and out strides ``at``) gets the alternative ``FusionEnd(inner)``; ``inner``
    computes ``size`` ops. Its top fused op mirrors ``?e``, and ``?p`` (bound to ``producer``, where given) mirrors
    ``?m``: ``fused-origin`` records both, so the fused ops keep the HLIR provenance of the ops they replace.
    ``rows``, where given, is the new region's ``row-shape`` (else it is plain); ``operands``, how many its last op
    reads."""
    bind_producer = f"(let ?p {producer}) (set (fused-origin ?p) ?m) " if producer else ""
    if rows:
        record = (f"(set (row-shape ?inner) {rows}) (set (rows-region ?e {rows} ?size {operands}) ?inner)"
                  f" (set (rows-operands ?e {rows} ?size) {operands}) (set (largest-rows ?e {rows}) ?size)")
    else:
        record = (f"(set (plain-region ?e ?size {operands}) ?inner) (set (plain-operands ?e ?size) {operands})"
                  " (set (largest-plain ?e) ?size)")
    actions = (f"{bind_producer}(let ?inner {inner}) (set (fused-origin ?inner) ?e) (let ?size {size}) {record}"
               f" (union ?e {_end(inputs('?inner'), at)})")
    return Rule(name, ruleset, f"(rule ({' '.join(query)}) ({actions}))")


# the consumer: an elementwise kernel e-node ``?e`` of kind ``?kd`` (``?ar`` operands)
_CONSUMER = ["(= ?e (Op ?kd ?ins))", "(ew ?kd ?fk ?s ?o ?dt ?ar)"]
_BINARY = ["(= ?e (Op ?kd ?ins))", "(ew ?kd ?fk ?s ?o ?dt ?ar)", "(= ?ar 2)"]
_OWN = "(Strided ?o)"  # a read of a producer's output in its own layout
# an unfused elementwise producer ``?m`` and its fused mirror over starts
_PRODUCER = ("(= ?m (Op ?mk ?mins)) (ew ?mk ?pfk {at} ?dt ?par)",
             f"(Op ?pfk {_operands('-1', '?m', other='?m', of='?mk ?mins')})")


def _largest(cls: str, size: str, region: str, rows: str = "") -> list[str]:
    """``region`` is the plain region (or, given ``rows``, the region with those rows) of most ops (``size``) ending at
    e-class ``cls``."""
    if rows:
        return [f"(= {size} (largest-rows {cls} {rows}))", f"(= {region}-n (rows-operands {cls} {rows} {size}))",
                f"(= {region} (rows-region {cls} {rows} {size} {region}-n))"]
    return [f"(= {size} (largest-plain {cls}))", f"(= {region}-n (plain-operands {cls} {size}))",
            f"(= {region} (plain-region {cls} {size} {region}-n))"]


def _region_at(cls: str, size: str, region: str, rows: str = "") -> list[str]:
    """``_largest`` ends at ``cls``, an operand of ``?e``, and may grow."""
    return [f"(!= ?e {cls})", *_largest(cls, size, region, rows), f"(< {size} {MAX_REGION_OPS})"]


def elementwise_rules() -> list[Rule]:
    """An elementwise op pairs with the elementwise op it reads, grows a region it reads, and (binary) merges two."""
    reads = "(reads ?ins ?kd ?q ?m (Strided ?o))"
    producer, mirror = _PRODUCER
    rules = [_rule("fusion_pair", "fuse", [*_CONSUMER, reads, producer.format(at="?s ?o"), "(!= ?e ?m)"],
                   _op("?fk", _operands("?q", "?p")), "2", producer=mirror),
             _rule("fusion_grow", "grow-plain", [*_CONSUMER, reads, *_region_at("?m", "?k", "?y")],
                   _op("?fk", _operands("?q", "?y")), "(+ ?k 1)"),
             _rule("fusion_grow", "grow-rows", [*_CONSUMER, reads, *_region_at("?m", "?k", "?y", "?r"),
                                                "(on-rows ?s ?r)"],
                   _op("?fk", _operands("?q", "?y")), "(+ ?k 1)", rows="?r")]
    both = [*_BINARY, f"(reads ?ins ?kd 0 ?m {_OWN})", f"(reads ?ins ?kd 1 ?n {_OWN})", "(!= ?e ?m)", "(!= ?e ?n)",
            "(= ?k (+ ?i ?j))", f"(< ?k {MAX_REGION_OPS})"]
    at_shape = f"(= {{end}} {_end('{fe}')})"  # an end read in its own layout over the op's shape
    for label, lhs, rhs in (("plain", "", ""), ("rows", "?r", "?r"), ("rows-plain", "?r", ""),
                            ("plain-rows", "", "?r")):
        query = [*both, *_largest("?m", "?i", "?y", lhs), *_largest("?n", "?j", "?w", rhs)]
        if label != "plain":  # regions with rows are read as their ends over the op's shape
            query += [at_shape.format(end="?m", fe="?fa"), at_shape.format(end="?n", fe="?fb")]
        rules.append(_rule("fusion_merge", f"merge-{label}", query, _op("?fk", inputs("?y", "?w")), "(+ ?k 1)",
                           rows="?r" if lhs or rhs else ""))
    return rules


# ---- row regions -----------------------------------------------------------------------------------
_REDUCTION = ["(= ?e (Op ?kd (ICons ?m ?tail)))", "(red ?kd ?fk ?s ?n ?kept ?ks ?o ?dt)"]
# the reduction reads a value of shape ?ps (its rows, then ?n) and out strides ?po in that value's own layout
_ALONG_ROWS = ["(init-of ?po ?kept ?ks)", "(init-of ?ps ?s ?n)"]

# a binary op of shape ?s reading an end (shape, out strides ?po) of a region with rows ?r along the row, through
# view ?v: the end has shape ?r and ?v is ?po with a 0 appended, or the end has shape ?r + [1] and is read as it is
_ROW_READS = {
    "bcast": ("(Strided ?v)", f"(= ?m {_end('?fe', ('?r', '?po'))})", "(init-of ?v ?po (MNum 0))"),
    "keepdim": ("(Strided ?po)", f"(= ?m {_end('?fe', ('?ps', '?po'))})", "(init-of ?ps ?r (MNum 1))"),
}


def row_rules() -> list[Rule]:
    """Reductions with their producers and their readers (see the module docstring)."""
    start = op_term("FusionStart", inputs("?m"), shape="?es", view="(Strided ?full)", out="?full", dtype="?dt")
    producer, mirror = _PRODUCER
    rules = [_rule("fusion_pair", "reduce", [*_REDUCTION, "(!= ?e ?m)", "(init-of ?full ?kept ?ks)",
                                             "(init-of ?es ?s ?n)"],
                   _op("?fk", inputs(start)), "1", rows="?s", operands="1"),
             _rule("fusion_pair", "fuse-into-reduce", [*_REDUCTION, producer.format(at="?ps ?po"), "(!= ?e ?m)",
                                                       *_ALONG_ROWS],
                   _op("?fk", inputs("?p")), "2", producer=mirror, rows="?s", operands="1")]
    end = [f"(= ?m {_end('?fe', ('?ps', '?po'))})", *_ALONG_ROWS]
    for label, rows in (("plain", ""), ("rows", "?s")):
        rules.append(_rule("fusion_grow", f"grow-reduce-{label}", [*_REDUCTION, *_region_at("?m", "?j", "?y", rows),
                                                                   *end],
                           _op("?fk", inputs("?y")), "(+ ?j 1)", rows="?s", operands="1"))
    for label, (view, row_end, relation) in _ROW_READS.items():
        query = [*_BINARY, f"(reads ?ins ?kd ?q ?m {view})", *_region_at("?m", "?j", "?y", "?r"), row_end, relation,
                 "(init-of ?s ?r ?nn)"]
        rules.append(_rule("fusion_grow", f"grow-{label}", query, _op("?fk", _operands("?q", "?y")), "(+ ?j 1)",
                           rows="?r"))
        for other, other_rows in (("rows", "?r"), ("plain", "")):  # with another region's end read in its own layout
            query = [*_BINARY, f"(reads ?ins ?kd ?q ?m {view})", f"(reads ?ins ?kd ?t ?n {_OWN})", "(!= ?q ?t)",
                     "(!= ?e ?m)", "(!= ?e ?n)", "(= ?k (+ ?i ?j))", f"(< ?k {MAX_REGION_OPS})",
                     *_largest("?m", "?i", "?y", "?r"), *_largest("?n", "?j", "?w", other_rows), row_end, relation,
                     "(init-of ?s ?r ?nn)", f"(= ?n {_end('?fb')})"]
            rules.append(_rule("fusion_merge", f"merge-{label}-{other}", query,
                               _op("?fk", _operands("?q", "?y", "?t", "?w")), "(+ ?k 1)", rows="?r"))
    return rules


def bookkeeping_rules() -> list[Rule]:
    """The shapes ``on-rows`` of each row shape (of the lists that exist: no terms are made), and the fused ops'
    operands, written out one by one."""
    texts = {"on-rows": "((= ?r (row-shape ?t))) ((on-rows ?r ?r))",
             "on-rows-along": "((= ?r (row-shape ?t)) (init-of ?s ?r ?n)) ((on-rows ?s ?r))",
             "on-rows-batch": "((on-rows ?s ?r) (= ?b (ECons (MNum 1) ?s))) ((on-rows ?b ?r))",
             **_operand_rules()}
    return [Rule(name, "fusion_grow", f"(rule {text})") for name, text in texts.items()]


def _operand_rules() -> dict[str, str]:
    """``(FusedOperands k ins p q x t w)``, the operands of kernel e-node ``(Op k ins)`` from ``p`` on, ``x`` at ``q``
    and ``w`` at ``t``, the others as starts: one cons per rule, the term written out subsumed. Past a replaced
    position the rest is written with none pending there (-1, the e-node's own e-class): every region's list at
    a kernel e-node shares the one tail of starts after its fused operand."""
    def step(at: str, head: str, after: str, extra: str = "") -> str:
        term = f"(FusedOperands ?kd ?ins {at})"
        written = f"(ICons {head} (FusedOperands ?kd ?ins {after}))" if after else head
        return (f"((= ?l {term}) (ew ?kd ?fk ?s ?o ?dt ?ar) (= ?self (Op ?kd ?ins)){extra})"
                f" ((union ?l {written}) (subsume {term}))")

    start = op_term("FusionStart", inputs("?y"), shape="?s", view="?v", out="?o", dtype="?ydt")
    return {"operand-start": step("?p ?q ?x ?t ?w", start, "(+ ?p 1) ?q ?x ?t ?w",
                                  " (< ?p ?ar) (!= ?p ?q) (!= ?p ?t) (operand ?ins ?kd ?p ?y ?v ?ydt)"),
            "operand-fused": step("?p ?p ?x ?t ?w", "?x", "(+ ?p 1) -1 ?self ?t ?w"),
            "operand-other": step("?p ?q ?x ?p ?w", "?w", "(+ ?p 1) ?q ?x -1 ?self"),
            "operands-end": step("?ar ?q ?x ?t ?w", "(INil)", "")}


def warp_rules() -> list[Rule]:
    """A row region's end gets a ``FusionEndWarp`` twin in its e-class: the same region run a warp per row on a GPU
    (``FusionEnd`` runs it a block per row), a choice the genome makes."""
    text = (f"(rule ((= ?e {_end('?ins')}) (= ?ins (ICons ?inner (INil))) (= ?r (row-shape ?inner)))"
            f" ((union ?e {_end('?ins', marker='FusionEndWarp')})))")
    return [Rule("warp-per-row", "fusion_grow", text)]


def class_rules() -> list[Rule]:
    """The rules over classes of kernel: every rule of the fusion rulesets but the facts."""
    return [*elementwise_rules(), *row_rules(), *bookkeeping_rules(), *warp_rules()]


def fusion_rules() -> list[Rule]:
    return [*fact_rules(), *class_rules()]
