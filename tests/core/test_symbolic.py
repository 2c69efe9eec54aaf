"""Symbolic expressions: simplification preserves value; rendering to egglog and C."""

from __future__ import annotations

import operator
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luminal_lab.core.symbolic import Expr, and_, ceil_div, div, evaluator, gte, lt, max_, min_, or_

Z = Expr.z()
S = Expr.var("s")
B = Expr.var("b")


def _python_value(op: str, a: int, b: int) -> int:
    return {
        "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.floordiv,
        "mod": operator.mod, "min": min, "max": max, "ceildiv": lambda x, y: -(-x // y),
        "and": lambda x, y: int(bool(x) and bool(y)), "or": lambda x, y: int(bool(x) or bool(y)),
        "gte": lambda x, y: int(x >= y), "lt": lambda x, y: int(x < y),
    }[op](a, b)


def _expr_value(op: str, a: Expr, b: Expr) -> Expr:
    return {
        "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.floordiv,
        "mod": operator.mod, "min": min_, "max": max_, "ceildiv": ceil_div, "and": and_, "or": or_,
        "gte": gte, "lt": lt,
    }[op](a, b)


@st.composite
def expressions(draw, depth: int = 4):
    """A pair (Expr, function of an environment giving the plain-integer value), non-negative throughout."""
    if depth == 0 or draw(st.booleans()):
        leaf = draw(st.sampled_from(["num", "s", "b", "z"]))
        if leaf == "num":
            n = draw(st.integers(0, 12))
            return Expr.num(n), lambda env, n=n: n
        expr = Z if leaf == "z" else Expr.var(leaf)
        return expr, lambda env, leaf=leaf: env[leaf]
    op = draw(st.sampled_from(["add", "mul", "div", "mod", "min", "max", "ceildiv", "and", "or", "gte", "lt"]))
    left, left_fn = draw(expressions(depth - 1))
    if op in ("div", "mod", "ceildiv"):
        d = draw(st.integers(1, 6))
        right, right_fn = Expr.num(d), (lambda env, d=d: d)
    else:
        right, right_fn = draw(expressions(depth - 1))
    return _expr_value(op, left, right), lambda env: _python_value(op, left_fn(env), right_fn(env))


@settings(max_examples=400)
@given(expressions(), st.integers(1, 9), st.integers(1, 9), st.integers(0, 40))
def test_simplification_preserves_value(pair, s: int, b: int, z: int) -> None:
    expr, value = pair
    assert expr.evaluate({"s": s, "b": b}, z) == value({"s": s, "b": b, "z": z})


@settings(max_examples=300)
@given(st.lists(expressions(), min_size=1, max_size=4), st.integers(1, 9), st.integers(1, 9), st.integers(0, 40))
def test_an_evaluator_gives_each_expressions_value(pairs, s: int, b: int, z: int) -> None:
    """``evaluator``'s one function of the binding equals each expression's ``evaluate`` (None kept)."""
    exprs = [expr.substitute(z=z) for expr, _ in pairs]
    values = evaluator([*exprs, None])({"s": s, "b": b})
    assert values == (*(value({"s": s, "b": b, "z": z}) for _, value in pairs), None)
    assert all(type(v) is int for v in values[:-1])
    with pytest.raises(ValueError, match="in z has no Python form"):
        evaluator([Z + S])
    with pytest.raises(KeyError, match="symbolic dimension 's' has no value"):  # as evaluate says it
        evaluator([S + 1])({"b": b})


@settings(max_examples=100)
@given(expressions(), st.integers(1, 9))
def test_vectorised_evaluation_matches_scalar(pair, s: int) -> None:
    expr, _ = pair
    zs = np.arange(30, dtype=np.int64)
    vector = np.broadcast_to(expr.evaluate({"s": s, "b": 2}, zs), zs.shape)
    assert list(vector) == [expr.evaluate({"s": s, "b": 2}, int(z)) for z in zs]


def test_canonical_forms() -> None:
    assert S + 2 + S == 2 * S + 2
    assert (S * 4) // 4 == S
    assert (Z // 4) * 4 + Z % 4 == Z
    assert (Z // 4 % 3) * 4 + (Z // 12) * 12 + Z % 4 == Z
    assert (S * 4 + 8) // 4 == S + 2
    assert (S * 6) % 3 == 0
    assert S - S == 0
    assert min_(S, S) == S
    assert gte(Z, 0) == 1
    assert and_(1, lt(Z, S)) == lt(Z, S)
    assert str(Z * 4 + 2) == "2 + 4*z"


def test_rendering_to_egglog_terms() -> None:
    assert (S * 4 + 2).to_egglog() == '(MAdd (MNum 2) (MMul (MNum 4) (MVar "s")))'
    assert (S - 3).to_egglog() == '(MSub (MVar "s") (MNum 3))'
    assert (Z // S % 4).to_egglog() == '(MMod (MDiv (MIter) (MVar "s")) (MNum 4))'
    assert and_(gte(Z, 2), lt(Z, 6)).to_egglog() == "(MAnd (MLt (MIter) (MNum 6)) (MGte (MIter) (MNum 2)))"
    assert ceil_div(S, 4).to_egglog() == '(MCeilDiv (MVar "s") (MNum 4))'


def test_rendering_to_c_compiles_and_agrees(tmp_path: Path) -> None:
    exprs = [Z // S % 4 * 3 + Z % S, ceil_div(S * 3 + 1, 4), and_(gte(Z, 2), lt(Z, S)), max_(Z, S) - min_(Z, 5)]
    body = "\n".join(f'    printf("%lld\\n", (long long)({e.to_c()}));' for e in exprs)
    source = tmp_path / "expr.c"
    source.write_text(textwrap.dedent("""
        #include <stdio.h>
        static long long min(long long a, long long b) { return a < b ? a : b; }
        static long long max(long long a, long long b) { return a > b ? a : b; }
        int main(void) {
            long long z = 13, s = 5;
        """) + body + "\n    return 0;\n}\n")
    binary = tmp_path / "expr"
    subprocess.run(["cc", "-o", str(binary), str(source)], check=True)
    printed = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split()
    assert [int(v) for v in printed] == [e.evaluate({"s": 5}, 13) for e in exprs]


def test_bad_names_and_missing_bindings() -> None:
    with pytest.raises(ValueError, match="identifier"):
        Expr.var("2x")
    with pytest.raises(KeyError, match="'s'"):
        (S + 1).evaluate({})
    with pytest.raises(ZeroDivisionError):
        S // 0


def test_division_of_products_cancels_common_factors() -> None:
    s, t = Expr.var("s"), Expr.var("t")
    assert div(32 * s, 8 * s) == 4  # reshape(-1) of a [s, 32] view into [s, ?, 8]
    assert div(6 * s * t, 3 * s) == 2 * t
    assert div(s * s, s) == s
    assert div(6 * s, 4 * s).op == "div"  # 4 does not divide 6: kept
    assert div(s * t, 2 * s).op == "div"
