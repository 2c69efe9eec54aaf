"""Bad input gets a named error that says what was wrong and where: shapes and dtypes while a graph is built
(the call boundary of a compiled graph: tests/compiler/test_boundary.py)."""

from __future__ import annotations

import pytest
import torch

import luminal_lab as ll


def test_broadcast_mismatch_names_both_shapes() -> None:
    g = ll.Graph()
    a, b = g.tensor((3, 4), "a"), g.tensor((5, 4), "b")
    with pytest.raises(ll.ShapeError, match=r"\[3, 4\] and \[5, 4\]"):
        a + b


def test_matmul_mismatch_names_both_shapes() -> None:
    g = ll.Graph()
    a, b = g.tensor((3, 4), "a"), g.tensor((5, 2), "b")
    with pytest.raises(ll.ShapeError, match=r"\[3, 4\] and \[5, 2\]"):
        a @ b


def test_symbolic_mismatch_names_both_shapes() -> None:
    g = ll.Graph()
    a, b = g.tensor(("s", 4), "a"), g.tensor(("t", 4), "b")
    with pytest.raises(ll.ShapeError, match=r"\[s, 4\] and \[t, 4\]"):
        a + b


def test_reshape_and_axis_errors() -> None:
    g = ll.Graph()
    a = g.tensor((3, 4), "a")
    with pytest.raises(ll.ShapeError, match=r"\[3, 4\] to \[5, 2\]"):
        a.reshape(5, 2)
    with pytest.raises(ll.ShapeError, match="axis 2 is out of range"):
        a.sum(2)
    with pytest.raises(ll.ShapeError, match="concat"):
        ll.concat([a, g.tensor((2, 5), "b")], 0)


def test_op_dtype_errors() -> None:
    g = ll.Graph()
    a = g.tensor((3,), "a", ll.f32)
    with pytest.raises(ll.DTypeError, match="index tensor"):
        a.take(a)
    with pytest.raises(ll.DTypeError, match="dtype must be an ll dtype"):
        g.tensor((3,), "b", dtype=torch.float32)
