"""The op registry: what each HLIR op contributes to the e-graph program.

Every op declares its ``OpKind`` constructor (the sorts of its fields), its kernel op
(``KernelAdd``, ... carrying the output dtype), how its dtype follows from its inputs, its
rewrites and early-stage rewrites, and whether its HLIR node may be cleaned up (subsumed)
once its kernel op exists. From that the registry generates the named rules of the
``dtype_prop``, ``kernel_lower`` and ``cleanup`` rulesets.

Field layouts, with a *view* being ``(Strided strides)`` or ``(Masked strides masks)``:

=========  =====================================================================
unary      shape, view of x, out strides
binary     shape, view of a, view of b, out strides
reduce     out shape, reduced extent, view of the kept dims, reduced dim's stride,
           reduced dim's mask, out strides
Iota       expression in z, length
Constant   value, dtype
Gather     index shape, index view, data shape, data view, out strides
Scatter    dest shape, dest view, index shape, index view, source view, out strides
Cast       shape, view of x, out strides, target dtype
Matmul     out shape, reduced extent, view of a, view of b (both over the out
           shape with the reduced dim last), out strides (a kernel op only)
MatmulTiled, MatmulTensorCore
           Matmul's fields, then the tiling's numbers (``core.tiling``)
Select     shape, view of the condition, view of a, view of b, out strides (a
           kernel op only)
=========  =====================================================================

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.ops import LOG2_E, Op
from ..core.tiling import MMA_DTYPES, MMA_TILINGS, TILINGS, MmaTiling, Tiling

UNARY_FIELDS = ("EList", "View", "EList")
MATMUL_FIELDS = ("EList", "Expression", "View", "View", "EList")
TILED_FIELDS = (*MATMUL_FIELDS, *("Expression",) * len(TILINGS[0].fields))
MMA_FIELDS = (*MATMUL_FIELDS, *("Expression",) * len(MMA_TILINGS[0].fields))
BINARY_FIELDS = ("EList", "View", "View", "EList")
REDUCE_FIELDS = ("EList", "Expression", "View", "Expression", "Expression", "EList")
SELECT_FIELDS = ("EList", "View", "View", "View", "EList")

RULESETS = ("expr", "dtype_prop", "early", "kernel_lower", "algebra", "fusion_pair", "fusion_grow", "fusion_merge",
            "cleanup")


@dataclass(frozen=True)
class Rule:
    """One named egglog rule (or rewrite): its full command text."""

    name: str
    ruleset: str
    text: str


@dataclass(frozen=True)
class OpSpec:
    """What one op contributes: constructor, kernel op, dtype rule, rewrites, cleanup."""

    name: str
    fields: tuple[str, ...]
    dtype_from: str  # "input0", "input1", "field" (the last field is the dtype), or a DType constructor
    rewrites: tuple[Rule, ...] = ()
    early_rewrites: tuple[Rule, ...] = ()
    cleanable: bool = True
    hlir_op: Op | None = None  # None for kernel-only ops (recognised patterns such as KernelExp)

    @property
    def kernel(self) -> str:
        return f"Kernel{self.name}"

    @property
    def kernel_fields(self) -> tuple[str, ...]:
        return self.fields if self.dtype_from == "field" else (*self.fields, "DType")

    def _variables(self, count: int) -> str:
        return " ".join(f"?f{i}" for i in range(count))

    def signatures(self) -> list[tuple[str, tuple[str, ...]]]:
        """The OpKind constructors this op adds: its own (for HLIR ops) and its kernel op."""
        kernel = (self.kernel, self.kernel_fields)
        return [kernel] if self.hlir_op is None else [(self.name, self.fields), kernel]

    def pattern(self) -> str:
        return f"(Op ({self.name} {self._variables(len(self.fields))}) ?ins)"

    def kernel_term(self) -> str:
        extra = "" if self.dtype_from == "field" else " ?dt"
        return f"(Op ({self.kernel} {self._variables(len(self.fields))}{extra}) ?ins)"

    def dtype_rule(self) -> Rule:
        fields = self._variables(len(self.fields))
        head = f"(= ?e (Op ({self.name} {fields}) "
        if self.dtype_from == "input0":
            query, value = head + "(ICons ?x ?rest))) (= ?dt (dtype ?x))", "?dt"
        elif self.dtype_from == "input1":
            query, value = head + "(ICons ?i (ICons ?x ?rest)))) (= ?dt (dtype ?x))", "?dt"
        elif self.dtype_from == "field":
            query, value = head + "?ins))", f"?f{len(self.fields) - 1}"
        else:
            query, value = head + "?ins))", f"({self.dtype_from})"
        name = f"dtype-{self.name}"
        return Rule(name, "dtype_prop",
                    f'(rule ({query}) ((set (dtype ?e) {value})) :ruleset dtype_prop :name "{name}")')

    def lowering(self) -> Rule:
        query = f"(= ?e {self.pattern()})" + ("" if self.dtype_from == "field" else " (= ?dt (dtype ?e))")
        name = f"lower-{self.name}"
        return Rule(name, "kernel_lower",
                    f'(rule ({query}) ((union ?e {self.kernel_term()})) :ruleset kernel_lower :name "{name}")')

    def cleanup(self) -> Rule:
        name = f"cleanup-{self.name}"
        return Rule(name, "cleanup",
                    f"(rule ((= ?e {self.pattern()}) (= ?e {self.kernel_term()}))"
                    f' ((subsume (Op ({self.name} {self._variables(len(self.fields))}) ?ins)))'
                    f' :ruleset cleanup :name "{name}")')

    def rules(self) -> list[Rule]:
        if self.hlir_op is None:
            return [*self.early_rewrites, *self.rewrites]
        generated = [self.dtype_rule(), self.lowering()]
        if self.cleanable:
            generated.append(self.cleanup())
        return [*generated, *self.early_rewrites, *self.rewrites]


# ---- rewrites ------------------------------------------------------------------------------------
def _identity_rules(op: str, constants: tuple[str, ...], ruleset: str, label: str) -> tuple[Rule, ...]:
    """``x op c = x`` for each spelling of ``c``, in both operand orders, when x is read as is."""
    rules = []
    for value in constants:
        for side, operands in (("rhs", "(ICons ?x (ICons ?c (INil)))"), ("lhs", "(ICons ?c (ICons ?x (INil)))")):
            views = "(Strided ?o) (Strided ?cs)" if side == "rhs" else "(Strided ?cs) (Strided ?o)"
            kind = "float" if "MFloat" in value else "int"
            name = f"{label}-{kind}-{side}"
            rules.append(Rule(name, ruleset,
                              f"(rule ((= ?e (Op ({op} ?s {views} ?o) {operands}))"
                              f" (= ?c (Op (Constant {value} ?cdt) (INil))))"
                              f' ((union ?e ?x)) :ruleset {ruleset} :name "{name}")'))
    return tuple(rules)


def _inverse_rule(outer: str, inner: str) -> Rule:
    """``outer(inner(x)) = x`` when both read their operand as is."""
    name = f"{outer.lower()}-of-{inner.lower()}"
    return Rule(name, "early",
                f"(rule ((= ?e (Op ({outer} ?s (Strided ?o) ?o) (ICons ?y (INil))))"
                f" (= ?y (Op ({inner} ?s2 (Strided ?o2) ?o2) (ICons ?x (INil)))))"
                f' ((union ?e ?x)) :ruleset early :name "{name}")')


def _commute(op: str) -> Rule:
    name = f"commute-{op}"
    return Rule(name, "algebra",
                f"(rewrite (Op ({op} ?s ?va ?vb ?o) (ICons ?a (ICons ?b (INil))))"
                f" (Op ({op} ?s ?vb ?va ?o) (ICons ?b (ICons ?a (INil))))"
                f' :ruleset algebra :name "{name}")')


EXP_CHAIN = Rule(
    "exp2-chain-to-KernelExp", "kernel_lower",
    "(rule ((= ?e (Op (Exp2 ?s (Strided ?o) ?o) (ICons ?m (INil))))"
    " (= ?m (Op (Mul ?s ?xv (Strided ?cs) ?o) (ICons ?x (ICons ?c (INil)))))"
    f" (= ?c (Op (Constant (MFloat {LOG2_E!r}) ?cdt) (INil)))"
    " (= ?dt (dtype ?e)))"
    " ((union ?e (Op (KernelExp ?s ?xv ?o ?dt) (ICons ?x (INil)))))"
    ' :ruleset kernel_lower :name "exp2-chain-to-KernelExp")')

# (init-of l i x): list l is list i with x appended; derived for the lists that already exist, making no terms
LIST_RULES = (
    Rule("init-of-one", "expr", '(rule ((= ?l (ECons ?x (ENil))) (= ?n (ENil))) ((init-of ?l ?n ?x))'
                                ' :ruleset expr :name "init-of-one")'),
    Rule("init-of-cons", "expr", '(rule ((= ?l (ECons ?h ?t)) (init-of ?t ?i ?x) (= ?j (ECons ?h ?i)))'
                                 ' ((init-of ?l ?j ?x)) :ruleset expr :name "init-of-cons")'),
    Rule("last3-end", "expr", '(rule ((= ?l (ECons ?x (ECons ?y (ECons ?z (ENil)))))) ((last3 ?l ?x ?y ?z))'
                              ' :ruleset expr :name "last3-end")'),
    Rule("last3-cons", "expr", '(rule ((= ?l (ECons ?h ?t)) (last3 ?t ?x ?y ?z)) ((last3 ?l ?x ?y ?z))'
                               ' :ruleset expr :name "last3-cons")'),
)

CONTRACTION = Rule(
    "matmul-of-mul-sum", "kernel_lower",
    "(rule ((= ?e (Op (KernelSumReduce ?s ?k (Strided ?kept) ?ks (MNum 1) ?o ?dt) (ICons ?m (INil))))"
    " (= ?m (Op (KernelMul ?ps ?va ?vb ?po ?mdt) (ICons ?a (ICons ?b (INil)))))"
    " (init-of ?po ?kept ?ks))"
    " ((union ?e (Op (KernelMatmul ?s ?k ?va ?vb ?o ?dt) (ICons ?a (ICons ?b (INil))))) (set (contracts ?e) ?m))"
    ' :ruleset kernel_lower :name "matmul-of-mul-sum")')

# where(c, a, b): a Gather over concat(b, a) of n elements each at c * n + iota, its index and data read in order,
# each operand a Cast to the gather's layout (``hlir.tensor.where``); the select reads what those Casts read
SELECT_OF_GATHER = Rule(
    "select-of-gather", "kernel_lower",
    "(rule ((= ?e (Op (Gather ?s (Strided ?o) (ECons (MNum ?len) (ENil)) (Strided (ECons (MIter) (ENil))) ?o)"
    " (ICons ?idx (ICons ?data (INil)))))"
    " (= ?idx (Op (Add ?s (Strided ?o) (Strided ?o) ?o) (ICons ?m (ICons ?p (INil)))))"
    " (= ?m (Op (Mul ?s (Strided ?o) (Strided ?zeros) ?o) (ICons ?c (ICons ?k (INil)))))"
    " (= ?c (Op (Cast ?s ?cv ?o (Int)) (ICons ?x (INil))))"
    " (= ?k (Op (Constant (MNum ?n) ?kdt) (INil)))"
    " (= ?p (Op (Iota (MIter) (MNum ?n)) (INil)))"
    " (= ?len (* 2 ?n))"
    " (= ?data (Op (Add (ECons (MNum ?len) (ENil))"
    " (Masked (ECons (MIter) (ENil)) (ECons (MLt (MIter) (MNum ?n)) (ENil)))"
    " (Masked (ECons (MSub (MIter) (MNum ?n)) (ENil))"
    " (ECons (MAnd (MLt (MIter) (MNum ?len)) (MGte (MIter) (MNum ?n))) (ENil)))"
    " (ECons (MIter) (ENil))) (ICons ?bc (ICons ?ac (INil)))))"
    " (= ?ac (Op (Cast ?s ?av ?o ?dt) (ICons ?a (INil))))"
    " (= ?bc (Op (Cast ?s ?bv ?o ?dt) (ICons ?b (INil))))"
    " (= ?dt (dtype ?e)))"
    " ((union ?e (Op (KernelSelect ?s ?cv ?av ?bv ?o ?dt) (ICons ?x (ICons ?a (ICons ?b (INil)))))))"
    ' :ruleset kernel_lower :name "select-of-gather")')

# a matmul whose a is constant along the out columns and b along the out rows: a batch of row-by-column products
_ROWS_BY_COLUMNS = ("(= ?e (Op (KernelMatmul ?s ?k (Strided ?sa) (Strided ?sb) ?o ?dt) ?ins))"
                    " (last3 ?sa ?am (MNum 0) ?ak) (last3 ?sb (MNum 0) ?bn ?bk)")


def _implementation(name: str, kernel: str, tiling: Tiling | MmaTiling, dtype: str = "?dt") -> Rule:
    """A rule adding ``kernel`` with ``tiling``'s numbers to a row-by-column matmul's e-class."""
    numbers = " ".join(f"(MNum {n})" for n in tiling.fields)
    query = _ROWS_BY_COLUMNS if dtype == "?dt" else _ROWS_BY_COLUMNS + f" (= ?dt ({dtype}))"
    return Rule(name, "kernel_lower",
                f"(rule ({query}) ((union ?e (Op ({kernel} ?s ?k (Strided ?sa) (Strided ?sb) ?o {numbers} ?dt) ?ins)))"
                f' :ruleset kernel_lower :name "{name}")')


TILED = tuple(_implementation(f"matmul-tiled-{t.name}", "KernelMatmulTiled", t) for t in TILINGS)
TENSOR_CORE = tuple(_implementation(f"matmul-mma-{t.name}-{d.value}", "KernelMatmulTensorCore", t, d.egglog)
                    for t in MMA_TILINGS for d in MMA_DTYPES)

FUNCTIONS = ("(relation init-of (EList EList Expression))",
             "(relation last3 (EList Expression Expression Expression))",
             "(function contracts (IR) IR :merge old)")  # a matmul's e-class -> the product it replaces

EXPR_RULES = tuple(Rule(name, "expr", f'{text} :ruleset expr :name "{name}")') for name, text in (
    ("expr-add-zero", "(rewrite (MAdd ?a (MNum 0)) ?a"),
    ("expr-zero-add", "(rewrite (MAdd (MNum 0) ?a) ?a"),
    ("expr-mul-one", "(rewrite (MMul ?a (MNum 1)) ?a"),
    ("expr-one-mul", "(rewrite (MMul (MNum 1) ?a) ?a"),
    ("expr-mul-zero", "(rewrite (MMul ?a (MNum 0)) (MNum 0)"),
    ("expr-div-one", "(rewrite (MDiv ?a (MNum 1)) ?a"),
    ("expr-fold-add", "(rewrite (MAdd (MNum ?a) (MNum ?b)) (MNum (+ ?a ?b))"),
    ("expr-fold-sub", "(rewrite (MSub (MNum ?a) (MNum ?b)) (MNum (- ?a ?b))"),
    ("expr-fold-mul", "(rewrite (MMul (MNum ?a) (MNum ?b)) (MNum (* ?a ?b))"),
    ("expr-fold-div", "(rule ((= ?e (MDiv (MNum ?a) (MNum ?b))) (>= ?a 0) (> ?b 0)) ((union ?e (MNum (/ ?a ?b))))"),
    ("expr-fold-mod", "(rule ((= ?e (MMod (MNum ?a) (MNum ?b))) (>= ?a 0) (> ?b 0)) ((union ?e (MNum (% ?a ?b))))"),
))


BOUNDARY_DTYPE_RULES = (
    Rule("dtype-Input", "dtype_prop",
         '(rule ((= ?e (Input ?id ?name ?dt))) ((set (dtype ?e) ?dt)) :ruleset dtype_prop :name "dtype-Input")'),
    Rule("dtype-Output", "dtype_prop",
         '(rule ((= ?e (Output ?x ?i)) (= ?dt (dtype ?x))) ((set (dtype ?e) ?dt)) :ruleset dtype_prop'
         ' :name "dtype-Output")'),
)


# ---- the registry --------------------------------------------------------------------------------
@dataclass
class OpRegistry:
    """All ops by name; ``rules()`` is every generated and declared rule, in a stable order."""

    specs: dict[str, OpSpec] = field(default_factory=dict)

    def register(self, spec: OpSpec) -> None:
        if spec.name in self.specs:
            raise ValueError(f"op {spec.name} is registered already")
        self.specs[spec.name] = spec

    def for_hlir(self, op: Op) -> OpSpec:
        for spec in self.specs.values():
            if spec.hlir_op == op:
                return spec
        raise KeyError(f"no e-graph op is registered for {op.value}")

    def signatures(self) -> list[tuple[str, tuple[str, ...]]]:
        return [c for spec in self.specs.values() for c in spec.signatures()]

    def rules(self) -> list[Rule]:
        return [*EXPR_RULES, *LIST_RULES, *BOUNDARY_DTYPE_RULES,
                *(rule for spec in self.specs.values() for rule in spec.rules())]


def default_registry() -> OpRegistry:
    registry = OpRegistry()
    float_one, int_one = "(MFloat 1.0)", "(MNum 1)"
    float_zero, int_zero = "(MFloat 0.0)", "(MNum 0)"
    for op in (Op.LOG2, Op.EXP2, Op.SIN, Op.SQRT, Op.RECIP):
        early = ()
        if op == Op.RECIP:
            early = (_inverse_rule("Recip", "Recip"),)
        elif op == Op.LOG2:
            early = (_inverse_rule("Log2", "Exp2"),)
        registry.register(OpSpec(op.value, UNARY_FIELDS, "input0", hlir_op=op, early_rewrites=early))
    registry.register(OpSpec("Add", BINARY_FIELDS, "input0", hlir_op=Op.ADD, rewrites=(_commute("Add"),),
                             early_rewrites=_identity_rules("Add", (float_zero, int_zero), "early", "add-zero")))
    registry.register(OpSpec("Mul", BINARY_FIELDS, "input0", hlir_op=Op.MUL, rewrites=(_commute("Mul"),),
                             early_rewrites=_identity_rules("Mul", (float_one, int_one), "early", "mul-one")))
    registry.register(OpSpec("Mod", BINARY_FIELDS, "input0", hlir_op=Op.MOD))
    registry.register(OpSpec("LessThan", BINARY_FIELDS, "Bool", hlir_op=Op.LESS_THAN))
    registry.register(OpSpec("SumReduce", REDUCE_FIELDS, "input0", hlir_op=Op.SUM_REDUCE))
    registry.register(OpSpec("MaxReduce", REDUCE_FIELDS, "input0", hlir_op=Op.MAX_REDUCE))
    registry.register(OpSpec("Iota", ("Expression", "Expression"), "Int", hlir_op=Op.IOTA))
    registry.register(OpSpec("Constant", ("Expression", "DType"), "field", hlir_op=Op.CONSTANT))
    registry.register(OpSpec("Gather", ("EList", "View", "EList", "View", "EList"), "input1", hlir_op=Op.GATHER))
    for name, op in (("Scatter", Op.SCATTER), ("ScatterAdd", Op.SCATTER_ADD)):
        registry.register(OpSpec(name, ("EList", "View", "EList", "View", "View", "EList"), "input0", hlir_op=op))
    registry.register(OpSpec("Cast", ("EList", "View", "EList", "DType"), "field", hlir_op=Op.CAST))
    registry.register(OpSpec("Exp", UNARY_FIELDS, "input0", rewrites=(EXP_CHAIN,)))
    registry.register(OpSpec("Select", SELECT_FIELDS, "input1", rewrites=(SELECT_OF_GATHER,)))
    registry.register(OpSpec("Matmul", MATMUL_FIELDS, "input0", rewrites=(CONTRACTION,)))
    registry.register(OpSpec("MatmulTiled", TILED_FIELDS, "input0", rewrites=TILED))
    registry.register(OpSpec("MatmulTensorCore", MMA_FIELDS, "input0", rewrites=TENSOR_CORE))
    return registry
