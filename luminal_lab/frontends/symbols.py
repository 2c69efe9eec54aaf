"""torch's symbolic sizes as luminal_lab expressions.

An ``ExportedProgram`` exported with dynamic shapes records its sizes as ``SymInt``s over
sympy symbols (``s0``, ``s77``, ...): in tensors' shapes, in ``sym_size`` nodes and in the
SymInt arithmetic of view, expand and slice arguments. ``Sizes`` turns each into a
``core.symbolic.Expr`` (a symbol becomes a variable, renamed through ``names``) or, when it is
a number, a plain ``int``, and decides whether two shapes agree for every binding torch allows
(checked at the hints torch recorded and at multiples of them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy
import torch
from torch.utils._sympy import functions as symfn

from ..core.errors import UnsupportedOpError
from ..core.symbolic import Expr, add, and_, as_expr, div, gte, lt, max_, min_, mod, mul

# sympy's size arithmetic, comparisons and logic, each with how its expression is built from its operands
_SYMPY_OPS: tuple[tuple[Any, Callable[..., Expr]], ...] = (
    (sympy.Add, add),
    (sympy.Mul, mul),
    ((symfn.FloorDiv, symfn.CleanDiv), div),
    ((symfn.Mod, symfn.PythonMod, sympy.Mod), mod),
    ((sympy.Max, symfn.Max), max_),
    ((sympy.Min, symfn.Min), min_),
    (sympy.StrictLessThan, lt),
    (sympy.GreaterThan, gte),
    (sympy.StrictGreaterThan, lambda a, b: lt(b, a)),
    (sympy.LessThan, lambda a, b: gte(b, a)),
    (sympy.Eq, lambda a, b: and_(gte(a, b), gte(b, a))),
    (sympy.Ne, lambda a, b: add(1, mul(-1, and_(gte(a, b), gte(b, a))))),
    (sympy.And, and_),
    (sympy.Or, lambda *args: max_(*(and_(a, 1) for a in args))),
    (sympy.Not, lambda a: add(1, mul(-1, and_(a, 1)))),
)


class Sizes:
    """Converts torch's sizes to expressions; ``names`` renames torch's symbols (``{"s17": "s77"}``), and
    ``hints`` collects each variable's value in the example the program was exported on."""

    def __init__(self, names: Mapping[str, str] | None = None) -> None:
        self.names = dict(names or {})
        self.hints: dict[str, int] = {}

    def __call__(self, value: Any) -> Expr | int:
        """An ``int`` for a number (a plain size, or a SymInt torch specialised), else an ``Expr``."""
        if isinstance(value, (torch.SymInt, torch.SymBool)):
            node = value.node
            expr = node.shape_env.replace(node.expr) if node.shape_env is not None else node.expr
            if node.shape_env is not None:
                known = getattr(node.shape_env, "backed_var_to_val", None)
                known = node.shape_env.var_to_val if known is None else known
                for symbol in expr.free_symbols:
                    hint = known.get(symbol)
                    if hint is not None and hint.is_number:
                        self.hints.setdefault(self._name(symbol), int(hint))
            converted = self.expr(expr)
        elif isinstance(value, sympy.Basic):
            converted = self.expr(value)
        elif isinstance(value, (bool, int)):
            return int(value)
        else:
            raise UnsupportedOpError(f"symbolic {type(value).__name__}", detail=f"{value!r} is not an integer size")
        return converted.value if converted.is_num else converted

    def shape(self, dims: Sequence[Any]) -> tuple[Expr | int, ...]:
        return tuple(self(d) for d in dims)

    def _name(self, symbol: sympy.Symbol) -> str:
        if symbol.name in self.names:
            return self.names[symbol.name]
        # a symbol left with its own name keeps apart from one renamed to that name
        return symbol.name if symbol.name not in self.names.values() else f"{symbol.name}_torch"

    def expr(self, e: sympy.Basic) -> Expr:
        """The expression of a sympy integer expression (sizes, their arithmetic and comparisons)."""
        if e is sympy.true:
            return Expr.num(1)
        if e is sympy.false:
            return Expr.num(0)
        if isinstance(e, sympy.Integer):
            return Expr.num(int(e))
        if isinstance(e, sympy.Symbol):
            return Expr.var(self._name(e))
        if isinstance(e, sympy.Pow) and isinstance(e.exp, sympy.Integer) and int(e.exp) >= 0:
            return mul(*([self.expr(e.base)] * int(e.exp))) if int(e.exp) else Expr.num(1)
        args = [self.expr(a) for a in e.args] if not isinstance(e, sympy.Pow) else []
        for kinds, build in _SYMPY_OPS:
            if isinstance(e, kinds):
                return build(*args)
        raise UnsupportedOpError(f"symbolic size {type(e).__name__}",
                                 detail=f"{e} has no luminal_lab expression (sizes take +, *, //, %, min, max)")

    def agree(self, got: Sequence[Expr | int], expected: Sequence[Expr | int]) -> bool:
        """Whether two shapes are equal at the example's binding and at multiples of it (sizes the translation
        writes another way than torch, such as ``min(s - 1, s)`` for ``s - 1``)."""
        if len(got) != len(expected):
            return False
        names = set().union(*(as_expr(d).variables() for d in (*got, *expected)))
        if not names <= set(self.hints):
            return False
        for factor in (1, 2, 3):
            binding = {name: self.hints[name] * factor for name in names}
            try:
                if any(as_expr(a).evaluate(binding) != as_expr(b).evaluate(binding)
                       for a, b in zip(got, expected, strict=True)):
                    return False
            except (KeyError, ZeroDivisionError):
                return False
        return True
