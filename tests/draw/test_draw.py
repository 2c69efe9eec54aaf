"""What the stages' pictures share: how a read through a shape tracker is described."""

from __future__ import annotations

from luminal_lab.core.shape_tracker import ONE, ShapeTracker
from luminal_lab.core.symbolic import Expr
from luminal_lab.draw import view_kinds


def test_view_kinds():
    base = ShapeTracker.contiguous((4, 6))
    assert view_kinds(base) == []
    assert view_kinds(ShapeTracker.contiguous((4,)).reshape((4, 1)).broadcast_to((4, 1))) == []
    assert view_kinds(base.permute((1, 0))) == ["permuted"]
    assert view_kinds(ShapeTracker.contiguous((6,)).broadcast_to((4, 6))) == ["broadcast"]
    assert view_kinds(base.pad(1, 2, 0)) == ["padded"]
    assert view_kinds(base.slice(1, 1, 6)) == ["sliced"]
    assert view_kinds(base.slice(1, 0, 6, 2)) == ["sliced"]
    assert view_kinds(base.slice(0, 1, 3)) == ["sliced"]
    assert view_kinds(ShapeTracker((Expr.num(5), Expr.num(5)), (Expr.z(), Expr.z()), (ONE, ONE))) == ["strided"]
    assert view_kinds(base.permute((1, 0)).reshape((24,))) == ["strided"]
    assert view_kinds(ShapeTracker.contiguous(("s", 4)).permute((1, 0))) == ["permuted"]
