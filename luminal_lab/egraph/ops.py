"""The op registry: what each kernel op (``core.ops.KERNEL_OPS``) contributes to the e-graph program.

Every declared op gets its ``OpKind`` constructors (its own for an HLIR op, and its kernel op ``Kernel<Name>``
carrying the output dtype), and an HLIR op the generated rules that type it (``dtype_prop``), lower it to its kernel
op (``kernel_lower``) and, where it may be, subsume it once that exists (``cleanup``). Rules name fields (``kind``,
``op_term``), never count them, and every rule's ``:ruleset`` and ``:name`` are written by ``Rule`` from its own.

Selects: ``where(c, a, b)`` lowers to a ``Gather`` over ``concat(b, a)`` (``n`` elements each, read
flat) at ``c * n + iota``, which is exact for every value but moves three tensors' worth of data.
Where ``n`` is a number, ``where`` copies each operand into the output's layout on the way (``a``
and ``b`` as they are, the condition as its cast from bool to int), and a ``Gather`` of that form
(the rule checks that the concat holds ``2n``) gets a ``KernelSelect`` alternative in its e-class
reading what those copies read, through their views: the bool condition, ``a`` and ``b`` (a
broadcast constant stays a constant). A symbolic size keeps the Gather. A select is elementwise,
so it fuses (``fusion``): the masked scores of attention join their softmax's row region.

Contractions: a ``KernelSumReduce`` that reads a ``KernelMul``'s output in the product's own
layout with the reduced dim last (the product's out strides are the reduction's kept strides
with its reduced stride appended: the ``init-of`` relation, derived in ``expr``) gets a
``KernelMatmul`` alternative in its e-class, reading the product's two operands directly, so the
genome chooses between the contraction and materialising the product. ``contracts`` records the
product's e-class, so the matmul keeps the HLIR provenance of both ops.

A ``KernelMatmul`` of two strided views in which ``a`` does not vary along the output's last dim
and ``b`` not along the one before it (rows times columns, batched over the dims before; the
``last3`` relation reads a stride list's final three) gets one ``KernelMatmulTiled`` e-node per
``TILINGS`` entry, and, for f16, bf16 and f32, one ``KernelMatmulTensorCore`` per ``MMA_TILINGS``
entry: the implementations the genome chooses between.

A ``KernelMatmul`` of rows by columns whose ``b`` is a ``Gather`` at ``iota + rows * scale`` (``take`` along the
first axis: each row of a mixture of experts times its expert's matrix) gets a ``KernelGatherMatmul`` alternative
reading the gathered data in place, with the rows and the iota's expression as fields: no matrix is copied per row.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..core.ops import KERNEL_OPS, LOG2_E, MARKERS, Field, KernelOp
from ..core.tiling import MMA_DTYPES, MMA_TILINGS, TILINGS, MmaTiling, Tiling

RULESETS = ("expr", "dtype_prop", "early", "kernel_lower", "algebra", "fusion_facts", "fusion_pair", "fusion_grow",
            "fusion_merge", "cleanup")
# every OpKind constructor's fields: the HLIR ops', the kernel ops' and the fusion markers'
CONSTRUCTORS: dict[str, tuple[Field, ...]] = {**{op.name: op.fields for op in KERNEL_OPS if op.hlir},
                                               **{op.kernel: op.kernel_fields for op in KERNEL_OPS}, **MARKERS}


@dataclass(frozen=True)
class Rule:
    """One named egglog rule (or rewrite): ``body`` is the command, to which ``text`` adds its ruleset and name."""

    name: str
    ruleset: str
    body: str

    @property
    def text(self) -> str:
        return f'{self.body[:-1]} :ruleset {self.ruleset} :name "{self.name}")'


def kind(constructor: str, **values: str) -> str:
    """An OpKind term, each of the constructor's fields given by name: ``kind("KernelExp", shape="?s", ...)``."""
    declared = [f.name for f in CONSTRUCTORS[constructor]]
    if set(values) != set(declared):
        raise TypeError(f"{constructor} takes the fields {', '.join(declared)}; got {', '.join(values)}")
    return f"({' '.join([constructor, *(values[name] for name in declared)])})"


def inputs(*items: str, tail: str = "(INil)") -> str:
    """An IList of ``items``, ending in ``tail``."""
    text = tail
    for item in reversed(items):
        text = f"(ICons {item} {text})"
    return text


def op_term(constructor: str, operands: str, **values: str) -> str:
    """``(Op kind operands)``: an op with its named fields, reading the IList ``operands``."""
    return f"(Op {kind(constructor, **values)} {operands})"


@dataclass(frozen=True)
class OpSpec:
    """What one kernel op contributes: its constructors, its generated rules (an HLIR op's), and its rewrites."""

    op: KernelOp
    rewrites: tuple[Rule, ...] = ()
    early_rewrites: tuple[Rule, ...] = ()
    cleanable: bool = True

    def signatures(self) -> list[tuple[str, tuple[str, ...]]]:
        """The OpKind constructors this op adds: its own (for HLIR ops) and its kernel op."""
        own = (self.op.name,) if self.op.hlir else ()
        return [(c, tuple(f.sort for f in CONSTRUCTORS[c])) for c in (*own, self.op.kernel)]

    def _variables(self, constructor: str) -> dict[str, str]:
        return {f.name: f"?f-{f.name}" for f in CONSTRUCTORS[constructor]}

    def pattern(self) -> str:
        return op_term(self.op.name, "?ins", **self._variables(self.op.name))

    def kernel_term(self) -> str:
        return op_term(self.op.kernel, "?ins", **self._variables(self.op.kernel))

    def dtype_rule(self) -> Rule:
        source, own = self.op.dtype, self._variables(self.op.name)
        query, value = f"(= ?e {self.pattern()})", "?f-dtype" if source == "field" else f"({source})"
        if source in ("input0", "input1"):
            operands = inputs("?x", tail="?rest") if source == "input0" else inputs("?i", "?x", tail="?rest")
            query, value = f"(= ?e {op_term(self.op.name, operands, **own)}) (= ?dt (dtype ?x))", "?dt"
        return Rule(f"dtype-{self.op.name}", "dtype_prop", f"(rule ({query}) ((set (dtype ?e) {value})))")

    def lowering(self) -> Rule:
        query = f"(= ?e {self.pattern()})" + ("" if self.op.dtype == "field" else " (= ?f-dtype (dtype ?e))")
        return Rule(f"lower-{self.op.name}", "kernel_lower", f"(rule ({query}) ((union ?e {self.kernel_term()})))")

    def cleanup(self) -> Rule:
        return Rule(f"cleanup-{self.op.name}", "cleanup",
                    f"(rule ((= ?e {self.pattern()}) (= ?e {self.kernel_term()})) ((subsume {self.pattern()})))")

    def rules(self) -> list[Rule]:
        if self.op.hlir is None:
            return [*self.early_rewrites, *self.rewrites]
        generated = [self.dtype_rule(), self.lowering()]
        if self.cleanable:
            generated.append(self.cleanup())
        return [*generated, *self.early_rewrites, *self.rewrites]


# ---- rewrites ------------------------------------------------------------------------------------
def _identity_rules(op: str, constants: tuple[str, ...], label: str) -> tuple[Rule, ...]:
    """``x op c = x`` for each spelling of ``c``, in both operand orders, when x is read as is."""
    rules = []
    for value in constants:
        for side in ("rhs", "lhs"):
            views = {"a": "(Strided ?o)", "b": "(Strided ?cs)"} if side == "rhs" else \
                {"a": "(Strided ?cs)", "b": "(Strided ?o)"}
            operands = inputs("?x", "?c") if side == "rhs" else inputs("?c", "?x")
            name = f"{label}-{'float' if 'MFloat' in value else 'int'}-{side}"
            rules.append(Rule(name, "early",
                              f"(rule ((= ?e {op_term(op, operands, shape='?s', out='?o', **views)})"
                              f" (= ?c {op_term('Constant', '(INil)', value=value, dtype='?cdt')}))"
                              " ((union ?e ?x)))"))
    return tuple(rules)


def _inverse_rule(outer: str, inner: str) -> Rule:
    """``outer(inner(x)) = x`` when both read their operand as is."""
    return Rule(f"{outer.lower()}-of-{inner.lower()}", "early",
                f"(rule ((= ?e {op_term(outer, inputs('?y'), shape='?s', x='(Strided ?o)', out='?o')})"
                f" (= ?y {op_term(inner, inputs('?x'), shape='?s2', x='(Strided ?o2)', out='?o2')}))"
                " ((union ?e ?x)))")


def _commute(op: str) -> Rule:
    return Rule(f"commute-{op}", "algebra",
                f"(rewrite {op_term(op, inputs('?a', '?b'), shape='?s', a='?va', b='?vb', out='?o')}"
                f" {op_term(op, inputs('?b', '?a'), shape='?s', a='?vb', b='?va', out='?o')})")


EXP_CHAIN = Rule(
    "exp2-chain-to-KernelExp", "kernel_lower",
    f"(rule ((= ?e {op_term('Exp2', inputs('?m'), shape='?s', x='(Strided ?o)', out='?o')})"
    f" (= ?m {op_term('Mul', inputs('?x', '?c'), shape='?s', a='?xv', b='(Strided ?cs)', out='?o')})"
    f" (= ?c {op_term('Constant', '(INil)', value=f'(MFloat {LOG2_E!r})', dtype='?cdt')})"
    " (= ?dt (dtype ?e)))"
    f" ((union ?e {op_term('KernelExp', inputs('?x'), shape='?s', x='?xv', out='?o', dtype='?dt')})))")




def _scaled(result: str, operand: str, value: str, view: str = "(Strided ?o)") -> str:
    """``result`` is ``operand * c`` over ``?s``, ``c`` a broadcast constant of ``value`` (``result`` + ``c``)."""
    c = f"{result}c"
    return (f"(= {result} {op_term('Mul', inputs(operand, c), shape='?s', a=view, b=f'{c}v', out='?o')})"
            f" (= {c} {op_term('Constant', '(INil)', value=value, dtype=f'{c}t')})")


# tanh as the tensor API decomposes it, 2 * sigmoid(2x) - 1, each op over one shape in its own layout and the
# constants broadcast: 2 * recip(1 + exp2(2x * -1 * LOG2_E)) + 1 * -1; the kernel reads x as ``2x`` does
_ONE = op_term("Constant", "(INil)", value="(MNum 1)", dtype="?onet")
TANH_CHAIN = Rule(
    "tanh-chain-to-KernelTanh", "kernel_lower",
    f"(rule ((= ?e {op_term('Add', inputs('?h', '?m'), shape='?s', a='(Strided ?o)', b='(Strided ?o)', out='?o')})"
    f" {_scaled('?m', '?one', '(MNum -1)', '?onev')} (= ?one {_ONE}) {_scaled('?h', '?r', '(MNum 2)')}"
    f" (= ?r {op_term('Recip', inputs('?d'), shape='?s', x='(Strided ?o)', out='?o')})"
    f" (= ?d {op_term('Add', inputs('?x2', '?one'), shape='?s', a='(Strided ?o)', b='?dv', out='?o')})"
    f" (= ?x2 {op_term('Exp2', inputs('?l'), shape='?s', x='(Strided ?o)', out='?o')})"
    f" {_scaled('?l', '?n', f'(MFloat {LOG2_E!r})')} {_scaled('?n', '?t', '(MNum -1)')}"
    f" {_scaled('?t', '?x', '(MNum 2)', '?xv')} (= ?dt (dtype ?e)))"
    f" ((union ?e {op_term('KernelTanh', inputs('?x'), shape='?s', x='?xv', out='?o', dtype='?dt')})))")

# (init-of l i x): list l is list i with x appended; derived for the lists that already exist, making no terms
LIST_RULES = (
    Rule("init-of-one", "expr", "(rule ((= ?l (ECons ?x (ENil))) (= ?n (ENil))) ((init-of ?l ?n ?x)))"),
    Rule("init-of-cons", "expr", "(rule ((= ?l (ECons ?h ?t)) (init-of ?t ?i ?x) (= ?j (ECons ?h ?i)))"
                                 " ((init-of ?l ?j ?x)))"),
    Rule("last3-end", "expr", "(rule ((= ?l (ECons ?x (ECons ?y (ECons ?z (ENil)))))) ((last3 ?l ?x ?y ?z)))"),
    Rule("last3-cons", "expr", "(rule ((= ?l (ECons ?h ?t)) (last3 ?t ?x ?y ?z)) ((last3 ?l ?x ?y ?z)))"),
)

_SUM = op_term("KernelSumReduce", inputs("?m"), shape="?s", extent="?k", kept="(Strided ?kept)", stride="?ks",
               mask="(MNum 1)", out="?o", dtype="?dt")
_PRODUCT = op_term("KernelMul", inputs("?a", "?b"), shape="?ps", a="?va", b="?vb", out="?po", dtype="?mdt")
_CONTRACTED = op_term("KernelMatmul", inputs("?a", "?b"), shape="?s", extent="?k", a="?va", b="?vb", out="?o",
                      dtype="?dt")
CONTRACTION = Rule("matmul-of-mul-sum", "kernel_lower",
                   f"(rule ((= ?e {_SUM}) (= ?m {_PRODUCT}) (init-of ?po ?kept ?ks))"
                   f" ((union ?e {_CONTRACTED}) (set (contracts ?e) ?m)))")


def _cast(view: str, source: str, dtype: str) -> str:
    return op_term("Cast", inputs(source), shape="?s", x=view, out="?o", dtype=dtype)


# where(c, a, b): a Gather over concat(b, a) of n elements each at c * n + iota, its index and data read in order,
# each operand a Cast to the gather's layout (``hlir.tensor.where``); the select reads what those Casts read
_LEN = "(ECons (MNum ?len) (ENil))"
_GATHER = op_term("Gather", inputs("?idx", "?data"), index_shape="?s", index="(Strided ?o)", data_shape=_LEN,
                  data="(Strided (ECons (MIter) (ENil)))", out="?o")
_CONCAT = op_term("Add", inputs("?bc", "?ac"), shape=_LEN,
                  a="(Masked (ECons (MIter) (ENil)) (ECons (MLt (MIter) (MNum ?n)) (ENil)))",
                  b="(Masked (ECons (MSub (MIter) (MNum ?n)) (ENil))"
                    " (ECons (MAnd (MLt (MIter) (MNum ?len)) (MGte (MIter) (MNum ?n))) (ENil)))",
                  out="(ECons (MIter) (ENil))")
_SELECT = op_term("KernelSelect", inputs("?x", "?a", "?b"), shape="?s", cond="?cv", a="?av", b="?bv", out="?o",
                  dtype="?dt")
SELECT_OF_GATHER = Rule(
    "select-of-gather", "kernel_lower",
    f"(rule ((= ?e {_GATHER})"
    f" (= ?idx {op_term('Add', inputs('?m', '?p'), shape='?s', a='(Strided ?o)', b='(Strided ?o)', out='?o')})"
    f" (= ?m {op_term('Mul', inputs('?c', '?k'), shape='?s', a='(Strided ?o)', b='(Strided ?zeros)', out='?o')})"
    f" (= ?c {_cast('?cv', '?x', '(Int)')})"
    f" (= ?k {op_term('Constant', '(INil)', value='(MNum ?n)', dtype='?kdt')})"
    f" (= ?p {op_term('Iota', '(INil)', expr='(MIter)', length='(MNum ?n)')})"
    f" (= ?len (* 2 ?n)) (= ?data {_CONCAT})"
    f" (= ?ac {_cast('?av', '?a', '?dt')}) (= ?bc {_cast('?bv', '?b', '?dt')}) (= ?dt (dtype ?e)))"
    f" ((union ?e {_SELECT})))")

# a matmul of rows by columns (as ``_ROWS_BY_COLUMNS``) whose b is a Gather at iota + rows * scale (``take``: each row's
# expert matrix, ``frontends.experts``), the index read in the gather's own layout: the gathered contraction reads the
# gather's data in place, the rows as the addition reads them (a row of a table times a vector, as an embedding's
# dot products, stays a matmul of the gathered rows: it copies nothing a read would not)
_GATHERED = op_term("KernelGather", inputs("?idx", "?w"), index_shape="?is", index="(Strided ?go)", data_shape="?ds",
                    data="?dv", out="?go", dtype="?gdt")
_INDEX = op_term("KernelAdd", inputs("?iota", "?off"), shape="?is", a="(Strided ?go)", b="?rv", out="?go",
                 dtype="?idt")
_OFFSETS = op_term("KernelMul", inputs("?rows", "?c"), shape="?ms", a="(Strided ?mo)", b="?cv", out="?mo",
                   dtype="?odt")
_GATHER_MATMUL = op_term("KernelGatherMatmul", inputs("?a", "?rows", "?w"), shape="?s", extent="?k", a="?va", b="?vb",
                         index_shape="?is", rows="?rv", within="?within", scale="?scale", data_shape="?ds", data="?dv",
                         out="?o", dtype="?dt")
_MATMUL_OF_GATHER = op_term("KernelMatmul", inputs("?a", "?g"), shape="?s", extent="?k", a="?va", b="?vb", out="?o",
                            dtype="?dt")
GATHERED_CONTRACTION = Rule(
    "gathered-matmul", "kernel_lower",
    f"(rule ((= ?e {_MATMUL_OF_GATHER}) (= ?va (Strided ?sa)) (= ?vb (Strided ?sb))"
    " (last3 ?sa ?am (MNum 0) ?ak) (last3 ?sb (MNum 0) ?bn ?bk)"
    f" (= ?g {_GATHERED}) (= ?idx {_INDEX})"
    f" (= ?iota {op_term('KernelIota', '(INil)', expr='?within', length='?n', dtype='?tdt')})"
    f" (= ?off {_OFFSETS}) (= ?c {op_term('KernelConstant', '(INil)', value='?scale', dtype='?cdt')}))"
    f" ((union ?e {_GATHER_MATMUL})))")

# a matmul whose a is constant along the out columns and b along the out rows: a batch of row-by-column products
_MATMUL = {"shape": "?s", "extent": "?k", "a": "(Strided ?sa)", "b": "(Strided ?sb)", "out": "?o"}
_ROWS_BY_COLUMNS = (f"(= ?e {op_term('KernelMatmul', '?ins', **_MATMUL, dtype='?dt')})"
                    " (last3 ?sa ?am (MNum 0) ?ak) (last3 ?sb (MNum 0) ?bn ?bk)")


def _implementation(name: str, kernel: str, tiling: Tiling | MmaTiling, dtype: str = "?dt") -> Rule:
    """A rule adding ``kernel`` with ``tiling``'s numbers to a row-by-column matmul's e-class."""
    numbers = {f.name: f"(MNum {getattr(tiling, f.name)})" for f in dataclasses.fields(tiling)}
    query = _ROWS_BY_COLUMNS if dtype == "?dt" else _ROWS_BY_COLUMNS + f" (= ?dt ({dtype}))"
    return Rule(name, "kernel_lower",
                f"(rule ({query}) ((union ?e {op_term(kernel, '?ins', **_MATMUL, **numbers, dtype='?dt')})))")


TILED = tuple(_implementation(f"matmul-tiled-{t.name}", "KernelMatmulTiled", t) for t in TILINGS)
TENSOR_CORE = tuple(_implementation(f"matmul-mma-{t.name}-{d.value}", "KernelMatmulTensorCore", t, d.egglog)
                    for t in MMA_TILINGS for d in MMA_DTYPES)

FUNCTIONS = ("(relation init-of (EList EList Expression))",
             "(relation last3 (EList Expression Expression Expression))",
             "(function contracts (IR) IR :merge old)")  # a matmul's e-class -> the product it replaces

EXPR_RULES = tuple(Rule(name, "expr", text) for name, text in (
    ("expr-add-zero", "(rewrite (MAdd ?a (MNum 0)) ?a)"),
    ("expr-zero-add", "(rewrite (MAdd (MNum 0) ?a) ?a)"),
    ("expr-mul-one", "(rewrite (MMul ?a (MNum 1)) ?a)"),
    ("expr-one-mul", "(rewrite (MMul (MNum 1) ?a) ?a)"),
    ("expr-mul-zero", "(rewrite (MMul ?a (MNum 0)) (MNum 0))"),
    ("expr-div-one", "(rewrite (MDiv ?a (MNum 1)) ?a)"),
    ("expr-fold-add", "(rewrite (MAdd (MNum ?a) (MNum ?b)) (MNum (+ ?a ?b)))"),
    ("expr-fold-sub", "(rewrite (MSub (MNum ?a) (MNum ?b)) (MNum (- ?a ?b)))"),
    ("expr-fold-mul", "(rewrite (MMul (MNum ?a) (MNum ?b)) (MNum (* ?a ?b)))"),
    ("expr-fold-div", "(rule ((= ?e (MDiv (MNum ?a) (MNum ?b))) (>= ?a 0) (> ?b 0)) ((union ?e (MNum (/ ?a ?b)))))"),
    ("expr-fold-mod", "(rule ((= ?e (MMod (MNum ?a) (MNum ?b))) (>= ?a 0) (> ?b 0)) ((union ?e (MNum (% ?a ?b)))))"),
))


BOUNDARY_DTYPE_RULES = (
    Rule("dtype-Input", "dtype_prop", "(rule ((= ?e (Input ?id ?name ?dt))) ((set (dtype ?e) ?dt)))"),
    Rule("dtype-Output", "dtype_prop", "(rule ((= ?e (Output ?x ?i)) (= ?dt (dtype ?x))) ((set (dtype ?e) ?dt)))"),
)


# ---- the registry --------------------------------------------------------------------------------
@dataclass
class OpRegistry:
    """All ops by name; ``rules()`` is every generated and declared rule, in a stable order."""

    specs: dict[str, OpSpec] = field(default_factory=dict)

    def register(self, spec: OpSpec) -> None:
        if spec.op.name in self.specs:
            raise ValueError(f"op {spec.op.name} is registered already")
        self.specs[spec.op.name] = spec

    def signatures(self) -> list[tuple[str, tuple[str, ...]]]:
        return [c for spec in self.specs.values() for c in spec.signatures()]

    def rules(self) -> list[Rule]:
        return [*EXPR_RULES, *LIST_RULES, *BOUNDARY_DTYPE_RULES,
                *(rule for spec in self.specs.values() for rule in spec.rules())]


_REWRITES = {  # each op's rewrites, and its early ones
    "Add": ((_commute("Add"),), _identity_rules("Add", ("(MFloat 0.0)", "(MNum 0)"), "add-zero")),
    "Mul": ((_commute("Mul"),), _identity_rules("Mul", ("(MFloat 1.0)", "(MNum 1)"), "mul-one")),
    "Recip": ((), (_inverse_rule("Recip", "Recip"),)),
    "Log2": ((), (_inverse_rule("Log2", "Exp2"),)),
    "Exp": ((EXP_CHAIN,), ()),
    "Tanh": ((TANH_CHAIN,), ()),
    "Select": ((SELECT_OF_GATHER,), ()),
    "Matmul": ((CONTRACTION,), ()),
    "GatherMatmul": ((GATHERED_CONTRACTION,), ()),
    "MatmulTiled": (TILED, ()),
    "MatmulTensorCore": (TENSOR_CORE, ()),
}


def default_registry() -> OpRegistry:
    """Every declared kernel op with its rewrites."""
    registry = OpRegistry()
    for op in KERNEL_OPS:
        rewrites, early = _REWRITES.get(op.name, ((), ()))
        registry.register(OpSpec(op, rewrites, early))
    return registry
