"""Symbolic integer expressions for shapes, strides, offsets and masks.

An ``Expr`` is an immutable tree over integer constants, named variables (symbolic
dimensions such as ``"s"``) and the index variable ``z`` (``Expr.z()``). Every constructor
simplifies as it builds, so structurally equal expressions compare equal: sums and products
are flattened, constants folded, like terms collected and operands sorted.

Division and modulo are floor operations on the non-negative values shapes and indices take.
Comparisons and ``and``/``or`` yield 0 or 1. An expression evaluates under a binding map,
with ``z`` bound to an int or to a numpy array of indices (vectorised), and renders to
egglog terms of Luminal's schema (``MNum``, ``MVar``, ``MIter``, ...) and to C.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np

ExprLike = Union["Expr", int]


class Expr:
    """An integer expression; build with ``Expr.num``, ``Expr.var``, ``Expr.z`` and operators."""

    __slots__ = ("_hash", "args", "op")

    def __init__(self, op: str, args: tuple):
        self.op = op
        self.args = args
        self._hash = hash((op, args))

    # ---- leaves -------------------------------------------------------------------------
    @staticmethod
    def num(value: int) -> Expr:
        return Expr("num", (int(value),))

    @staticmethod
    def var(name: str) -> Expr:
        if not name.isidentifier() or name == "z":
            raise ValueError(f"symbolic dimension name {name!r} must be an identifier other than 'z'")
        return Expr("var", (name,))

    @staticmethod
    def z() -> Expr:
        """The index variable (``MIter`` in egglog) that strides and masks are written in."""
        return _Z

    # ---- inspection ---------------------------------------------------------------------
    @property
    def is_num(self) -> bool:
        return self.op == "num"

    @property
    def value(self) -> int:
        """The constant's value; raises ``ValueError`` when the expression is symbolic."""
        if self.op != "num":
            raise ValueError(f"{self} is not a constant")
        return self.args[0]

    def variables(self) -> set[str]:
        """Names of the symbolic variables the expression mentions (``z`` excluded)."""
        if self.op == "var":
            return {self.args[0]}
        if self.op in ("num", "iter"):
            return set()
        return set().union(*(a.variables() for a in self.args))

    @property
    def has_z(self) -> bool:
        return self.op == "iter" or (self.op not in ("num", "var") and any(a.has_z for a in self.args))

    def min_value(self) -> int | None:
        """A lower bound (variables are dimensions, so at least 1; ``z`` at least 0), or None."""
        op, args = self.op, self.args
        if op == "num":
            return args[0]
        if op == "var":
            return 1
        lows = [a.min_value() for a in args]
        if op in ("iter", "div", "mod", "ceildiv", "and", "or", "gte", "lt"):
            return 0 if op == "iter" or all(lo is not None and lo >= 0 for lo in lows) else None
        if any(lo is None for lo in lows):
            return None
        if op == "add":
            return sum(lows)
        if op == "mul":
            return int(np.prod(lows)) if all(lo >= 0 for lo in lows) else None
        if op == "min":
            return min(lows)
        if op == "max":
            return max(lows)
        return None

    # ---- equality -----------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.op == "num" and self.args[0] == other
        return isinstance(other, Expr) and self._hash == other._hash and self.op == other.op and self.args == other.args

    def __hash__(self) -> int:
        return self._hash

    def _sort_key(self) -> tuple:
        return (self.op != "num", str(self))

    # ---- arithmetic ---------------------------------------------------------------------
    def __add__(self, other: ExprLike) -> Expr:
        return add(self, other)

    __radd__ = __add__

    def __sub__(self, other: ExprLike) -> Expr:
        return add(self, mul(-1, other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return add(other, mul(-1, self))

    def __mul__(self, other: ExprLike) -> Expr:
        return mul(self, other)

    __rmul__ = __mul__

    def __floordiv__(self, other: ExprLike) -> Expr:
        return div(self, other)

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return div(other, self)

    def __mod__(self, other: ExprLike) -> Expr:
        return mod(self, other)

    def __rmod__(self, other: ExprLike) -> Expr:
        return mod(other, self)

    def __neg__(self) -> Expr:
        return mul(-1, self)

    # ---- substitution and evaluation ----------------------------------------------------
    def substitute(self, z: ExprLike | None = None, **variables: ExprLike) -> Expr:
        """Replace ``z`` and/or named variables by expressions, simplifying again."""
        op = self.op
        if op == "iter":
            return as_expr(z) if z is not None else self
        if op == "var":
            name = self.args[0]
            return as_expr(variables[name]) if name in variables else self
        if op == "num":
            return self
        return EXPR_OPS[op].build(*(a.substitute(z, **variables) for a in self.args))

    def evaluate(self, bindings: Mapping[str, int] | None = None, z: int | np.ndarray | None = None):
        """Value under ``bindings``; ``z`` may be an int or an int64 array (evaluated elementwise)."""
        bindings = bindings or {}
        op, args = self.op, self.args
        if op == "num":
            return args[0]
        if op == "var":
            if args[0] not in bindings:
                raise KeyError(f"symbolic dimension {args[0]!r} has no value")
            return int(bindings[args[0]])
        if op == "iter":
            if z is None:
                raise KeyError("the index variable z has no value")
            return z
        vals = [a.evaluate(bindings, z) for a in args]
        vector = any(isinstance(v, np.ndarray) for v in vals)
        if op == "add":
            return sum(vals[1:], vals[0])
        if op == "mul":
            return functools.reduce(operator.mul, vals)
        a, b = vals[0], vals[-1]
        if op == "div":
            return a // b
        if op == "mod":
            return a % b
        if op == "ceildiv":
            return -(-a // b)
        if op in ("min", "max"):
            pick = (np.minimum if op == "min" else np.maximum) if vector else (min if op == "min" else max)
            return functools.reduce(pick, vals)
        if op in ("and", "or"):
            combine = np.logical_and if op == "and" else np.logical_or
            combined = functools.reduce(combine, (np.asarray(v) != 0 for v in vals))
            return combined.astype(np.int64) if vector else int(combined)
        result = (a >= b) if op == "gte" else (a < b)
        return result.astype(np.int64) if vector else int(result)

    # ---- rendering ----------------------------------------------------------------------
    def to_egglog_term(self) -> tuple:
        """The term in Luminal's egglog ``Expression`` sort, as ``(constructor, *arguments)``."""
        op, args = self.op, self.args
        if op == "num":
            return ("MNum", args[0])
        if op == "var":
            return ("MVar", args[0])
        if op == "iter":
            return ("MIter",)
        if op == "add":
            positive = [a for a in args if not _is_negated(a)]
            negative = [-a for a in args if _is_negated(a)]
            term = _fold_terms("MAdd", positive) if positive else ("MNum", 0)
            for a in negative:
                term = ("MSub", term, a.to_egglog_term())
            return term
        return _fold_terms(EXPR_OPS[op].egglog, args)

    def to_egglog(self) -> str:
        """The term as egglog text, e.g. ``(MAdd (MNum 2) (MVar "s"))``."""
        return render_term(self.to_egglog_term())

    def to_c(self, z: str = "z") -> str:
        """A C expression over ``long long`` operands; variables keep their names."""
        op, args = self.op, self.args
        if op == "num":
            return f"{args[0]}LL" if abs(args[0]) > 2**31 - 1 else str(args[0])
        if op == "var":
            return args[0]
        if op == "iter":
            return z
        parts = [a.to_c(z) for a in args]
        if op in ("min", "max"):  # both operands long long: CUDA's min(int, long long) is ambiguous
            return functools.reduce(lambda text, p: f"{op}((long long){text}, (long long){p})", parts)
        if op == "ceildiv":
            return f"(({parts[0]} + {parts[1]} - 1) / {parts[1]})"
        return "(" + f" {EXPR_OPS[op].c} ".join(parts) + ")"

    def to_python(self) -> str:
        """A Python expression of ints with ``evaluate``'s value, reading each variable from the mapping ``b``
        (``evaluator``); it has no ``z``."""
        op, args = self.op, self.args
        if op == "num":
            return f"({args[0]})"
        if op == "var":
            return f"b[{args[0]!r}]"
        if op == "iter":
            raise ValueError("an expression in z has no Python form of the binding alone")
        parts = [a.to_python() for a in args]
        if op in ("min", "max"):
            return f"{op}({', '.join(parts)})"
        if op == "ceildiv":
            return f"(-(-{parts[0]} // {parts[1]}))"
        if op in ("and", "or"):
            return f"int({f' {op} '.join(f'{p} != 0' for p in parts)})"
        text = "(" + f" {EXPR_OPS[op].python} ".join(parts) + ")"
        return f"int{text}" if op in ("gte", "lt") else text

    def __str__(self) -> str:
        op, args = self.op, self.args
        if op == "num":
            return str(args[0])
        if op == "var":
            return args[0]
        if op == "iter":
            return "z"
        if op == "add":
            text = str(args[0])
            for a in args[1:]:
                text += f" - {-a}" if _is_negated(a) else f" + {a}"
            return text
        if op == "mul":
            return "*".join(str(a) if a.op in ("num", "var", "iter", "min", "max") else f"({a})" for a in args)
        if op in ("min", "max"):
            return f"{op}({', '.join(str(a) for a in args)})"
        if op == "ceildiv":
            return f"ceil({args[0]}/{args[1]})"
        return EXPR_OPS[op].text.join(f"({a})" if a.op not in ("num", "var", "iter") else str(a) for a in args)

    def __repr__(self) -> str:
        return f"Expr({self})"


_Z = Expr("iter", ())


def as_expr(value: ExprLike | str) -> Expr:
    """Coerce an int, a variable name or an ``Expr`` to an ``Expr``."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return Expr.var(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Expr.num(int(value))
    raise TypeError(f"expected an int, a dimension name or an Expr, got {type(value).__name__} {value!r}")


def _is_negated(term: Expr) -> bool:
    return (term.op == "mul" and term.args[0].is_num and term.args[0].value < 0) or (term.is_num and term.value < 0)


def _fold_terms(name: str, args) -> tuple:
    return functools.reduce(lambda term, a: (name, term, a.to_egglog_term()), args[1:], args[0].to_egglog_term())


def float_literal(value: float) -> str:
    """An egglog f64 literal (``inf``, ``-inf`` and ``NaN`` included)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def render_term(term) -> str:
    """egglog text of a term given as nested ``(constructor, *arguments)`` tuples."""
    if isinstance(term, tuple):
        return "(" + " ".join([term[0], *(render_term(a) for a in term[1:])]) + ")"
    if isinstance(term, str):
        return '"' + term.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(term, float):
        return float_literal(term)
    return str(int(term))


def _split_coefficient(term: Expr) -> tuple[int, Expr | None]:
    """``3*x*y`` -> ``(3, x*y)``; a constant -> ``(c, None)``."""
    if term.is_num:
        return term.value, None
    if term.op == "mul" and term.args[0].is_num:
        rest = term.args[1:]
        return term.args[0].value, rest[0] if len(rest) == 1 else Expr("mul", rest)
    return 1, term


def add(*operands: ExprLike) -> Expr:
    coefficients: dict[Expr, int] = {}
    constant = 0
    stack = [as_expr(o) for o in operands]
    while stack:
        term = stack.pop()
        if term.op == "add":
            stack.extend(term.args)
            continue
        coef, rest = _split_coefficient(term)
        if rest is None:
            constant += coef
        else:
            coefficients[rest] = coefficients.get(rest, 0) + coef
    for rest, c in coefficients.items():
        # c*(x % d) + c*d*(x / d) == c*x: recombines the pieces that splitting an index makes
        if not (c and rest.op == "mod" and rest.args[1].is_num):
            continue
        quotient = div(*rest.args)
        if coefficients.get(quotient) == c * rest.args[1].value:
            others = [mul(k, r) for r, k in coefficients.items() if r not in (rest, quotient)]
            return add(constant, mul(c, rest.args[0]), *others)
    terms = [mul(c, rest) for rest, c in coefficients.items() if c != 0]
    if constant:
        terms.append(Expr.num(constant))
    if not terms:
        return Expr.num(0)
    if len(terms) == 1:
        return terms[0]
    return Expr("add", tuple(sorted(terms, key=Expr._sort_key)))


def mul(*operands: ExprLike) -> Expr:
    constant = 1
    factors: list[Expr] = []
    stack = [as_expr(o) for o in operands]
    while stack:
        factor = stack.pop()
        if factor.op == "mul":
            stack.extend(factor.args)
        elif factor.is_num:
            constant *= factor.value
        else:
            factors.append(factor)
    if constant == 0 or not factors:
        return Expr.num(constant)
    if len(factors) == 1 and factors[0].op == "add" and constant != 1:
        return add(*(mul(constant, t) for t in factors[0].args))  # distribute constants over sums
    factors.sort(key=Expr._sort_key)
    if constant == 1:
        return factors[0] if len(factors) == 1 else Expr("mul", tuple(factors))
    return Expr("mul", (Expr.num(constant), *factors))


def _non_negative(e: Expr) -> bool:
    low = e.min_value()
    return low is not None and low >= 0


def _divides(term: Expr, divisor: int) -> bool:
    coef, _ = _split_coefficient(term)
    return coef % divisor == 0


def div(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b == 0:
        raise ZeroDivisionError(f"symbolic division of {a} by zero")
    if a.is_num and b.is_num:
        return Expr.num(a.value // b.value)
    if b == 1 or a == 0:
        return a
    if a == b:
        return Expr.num(1)
    if b.is_num and b.value > 0:
        d = b.value
        if a.op == "div" and a.args[1].is_num:
            return div(a.args[0], a.args[1].value * d)
        terms = a.args if a.op == "add" else (a,)
        if all(_divides(t, d) for t in terms):
            return add(*(mul(_split_coefficient(t)[0] // d, _split_coefficient(t)[1] or 1) for t in terms))
        if a.op == "add" and all(_non_negative(t) for t in terms):
            # (d*x + r) / d == x + r / d when every term is non-negative
            whole = [t for t in terms if _divides(t, d)]
            rest = [t for t in terms if not _divides(t, d)]
            if whole:
                return add(div(add(*whole), d), div(add(*rest), d))
    if a.op == "mul" and b in a.args:
        remaining = list(a.args)
        remaining.remove(b)
        return mul(*remaining)
    if a.op in ("mul", "var") and b.op in ("mul", "var"):  # (c*x*y) / (d*y) == (c/d)*x when d divides c
        (ca, fa), (cb, fb) = _split_coefficient(a), _split_coefficient(b)
        remaining = list(fa.args if fa.op == "mul" else (fa,))
        wanted = list(fb.args if fb.op == "mul" else (fb,))
        if cb > 0 and ca % cb == 0 and all(remaining.count(f) >= wanted.count(f) for f in wanted):
            for f in wanted:
                remaining.remove(f)
            return mul(ca // cb, *remaining)
    return Expr("div", (a, b))


def mod(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b == 0:
        raise ZeroDivisionError(f"symbolic modulo of {a} by zero")
    if a.is_num and b.is_num:
        return Expr.num(a.value % b.value)
    if b == 1 or a == 0 or a == b:
        return Expr.num(0)
    if b.is_num and b.value > 0:
        d = b.value
        if a.op == "mod" and a.args[1].is_num and a.args[1].value % d == 0:
            return mod(a.args[0], d)
        terms = a.args if a.op == "add" else (a,)
        kept = [t for t in terms if not _divides(t, d)]
        if len(kept) < len(terms) and all(_non_negative(t) for t in terms):
            return mod(add(*kept), d)
        if not kept:
            return Expr.num(0)
    if a.op == "mul" and b in a.args:
        return Expr.num(0)
    return Expr("mod", (a, b))


def ceil_div(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.is_num and b.is_num:
        return Expr.num(-(-a.value // b.value))
    if b == 1:
        return a
    if b.is_num and all(_divides(t, b.value) for t in (a.args if a.op == "add" else (a,))):
        return div(a, b)
    return Expr("ceildiv", (a, b))


def _lattice(op: str, fold, operands) -> Expr:
    items: list[Expr] = []
    constants: list[int] = []
    for o in map(as_expr, operands):
        for item in o.args if o.op == op else (o,):
            if item.is_num:
                constants.append(item.value)
            elif item not in items:
                items.append(item)
    if constants:
        items.append(Expr.num(fold(constants)))
    if len(items) == 1:
        return items[0]
    return Expr(op, tuple(sorted(items, key=Expr._sort_key)))


def at_least(a: ExprLike, b: ExprLike) -> bool:
    """Whether ``a >= b`` follows from lower bounds (variables are sizes, at least 1): ``a - b`` is at least 0."""
    return _non_negative(add(a, mul(-1, b)))


def min_(*operands: ExprLike) -> Expr:
    return _lattice("min", min, operands)


def max_(*operands: ExprLike) -> Expr:
    return _lattice("max", max, operands)


def _is_boolean(e: Expr) -> bool:
    return e.op in ("and", "or", "gte", "lt") or (e.is_num and e.value in (0, 1))


def and_(*operands: ExprLike) -> Expr:
    """Logical and (1 when every operand is non-zero, else 0)."""
    exprs = [as_expr(o) for o in operands]
    if any(e == 0 for e in exprs):
        return Expr.num(0)
    kept = list(dict.fromkeys(e for e in exprs if not e.is_num))
    if not kept:
        return Expr.num(1)
    if len(kept) == 1 and not _is_boolean(kept[0]):
        kept.append(Expr.num(1))  # keeps the result 0/1
    return _lattice("and", lambda cs: int(all(cs)), kept)


def or_(*operands: ExprLike) -> Expr:
    """Logical or (1 when any operand is non-zero, else 0)."""
    exprs = [as_expr(o) for o in operands]
    if any(e.is_num and e.value != 0 for e in exprs):
        return Expr.num(1)
    kept = list(dict.fromkeys(e for e in exprs if not e.is_num))
    if not kept:
        return Expr.num(0)
    if len(kept) == 1 and not _is_boolean(kept[0]):
        return and_(kept[0], 1)
    return _lattice("or", lambda cs: int(any(cs)), kept)


def gte(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.is_num and b.is_num:
        return Expr.num(int(a.value >= b.value))
    if a == b or at_least(a, b):
        return Expr.num(1)
    return Expr("gte", (a, b))


def lt(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.is_num and b.is_num:
        return Expr.num(int(a.value < b.value))
    if a == b:
        return Expr.num(0)
    if at_least(b, add(a, 1)):
        return Expr.num(1)
    return Expr("lt", (a, b))


@dataclass(frozen=True)
class ExprOp:
    """An expression op, declared once: its ``Expr.op``, its egglog constructor, how it is built, its C operator
    (none for a call, ``name(a, b)``), its operator in ``str()`` and in Python (``to_python``; none for a call or
    a logical op). ``sub`` is egglog's alone: ``Expr`` adds a negated term."""

    name: str
    egglog: str
    build: Callable[..., Expr]
    c: str = ""
    text: str = ""
    python: str = ""


EXPR_OPS = {op.name: op for op in (
    ExprOp("add", "MAdd", add, "+", python="+"),
    ExprOp("sub", "MSub", lambda a, b: add(a, mul(-1, b)), "-"),
    ExprOp("mul", "MMul", mul, "*", python="*"),
    ExprOp("div", "MDiv", div, "/", "/", "//"),
    ExprOp("mod", "MMod", mod, "%", "%", "%"),
    ExprOp("ceildiv", "MCeilDiv", ceil_div),
    ExprOp("min", "MMin", min_),
    ExprOp("max", "MMax", max_),
    ExprOp("and", "MAnd", and_, "&&", " & "),
    ExprOp("or", "MOr", or_, "||", " | "),
    ExprOp("gte", "MGte", gte, ">=", " >= ", ">="),
    ExprOp("lt", "MLt", lt, "<", " < ", "<"),
)}

EGGLOG_EXPR_OPS = {op.egglog: op for op in EXPR_OPS.values()}  # egglog constructor -> its op


def evaluator(exprs: Sequence[Expr | None]) -> Callable[[Mapping[str, int]], tuple[int | None, ...]]:
    """One Python function of a binding giving each of ``exprs`` (None for None) at it, as ``evaluate`` does: the
    trees are walked once, here, not at every call (a plan for a new length evaluates hundreds). A binding without one
    of their dimensions raises ``evaluate``'s KeyError, naming it."""
    items = "".join(("None" if e is None else e.to_python()) + ", " for e in exprs)
    values = eval(f"lambda b: ({items})", {"__builtins__": {"min": min, "max": max, "int": int}})

    def evaluated(bindings: Mapping[str, int]) -> tuple[int | None, ...]:
        try:
            return values(bindings)
        except KeyError as missing:
            raise KeyError(f"symbolic dimension {missing.args[0]!r} has no value") from None
    return evaluated
