"""Bad input gets a named error that says what was wrong and where: the call boundary of a compiled graph
(dtypes, shapes, input count, device) and what a call gives back (errors while a graph is built:
tests/hlir/test_errors.py)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch

import luminal_lab as ll


def _graph_of(dtype: ll.DType) -> ll.Compiled:
    g = ll.Graph()
    (g.tensor(("s", 2), "x", dtype) * 2).output("y")
    return ll.compile(g)


def test_dtype_boundary_is_strict_and_checked_first() -> None:
    comp = _graph_of(ll.f32)
    with pytest.raises(ll.DTypeBoundaryError, match="input 'x' is f64 but the graph declares f32") as info:
        comp.run(torch.zeros(3, 2, dtype=torch.float64))
    assert isinstance(info.value, TypeError)
    # the dtype is checked before the shape: a wrong dtype with a wrong shape reports the dtype
    with pytest.raises(ll.DTypeBoundaryError):
        comp.run(torch.zeros(3, 5, dtype=torch.int64))
    with pytest.raises(ll.DTypeBoundaryError, match="int32"):
        comp.run(np.zeros((3, 2), dtype=np.int32))
    with pytest.raises(ll.DTypeBoundaryError, match=r"torch\.Tensor or numpy array"):
        comp.run([[1.0, 2.0]])
    shaped = type("Shaped", (), {"shape": (3, 2)})()  # a shape and no dtype (a data frame's, say)
    with pytest.raises(ll.DTypeBoundaryError, match=r"input 'x' must be a torch\.Tensor or numpy array, got Shaped"):
        comp.run(shaped)


def test_a_signature_checked_once_is_still_checked_for_every_other() -> None:
    """The boundary remembers the bindings of each input signature it has checked; another dtype, shape or kind of
    array is still checked, and each binding still comes from its own shape."""
    comp = _graph_of(ll.f32)
    for rows in (3, 5, 3):
        torch.testing.assert_close(comp.run(torch.ones(rows, 2)), torch.full((rows, 2), 2.0))
    np.testing.assert_array_equal(comp.run(np.ones((3, 2), np.float32)).numpy(), np.full((3, 2), 2.0, np.float32))
    with pytest.raises(ll.DTypeBoundaryError, match="input 'x' is f64"):
        comp.run(torch.ones(3, 2, dtype=torch.float64))
    with pytest.raises(ll.DTypeBoundaryError, match="float64"):
        comp.run(np.ones((3, 2)))
    with pytest.raises(ll.ShapeError, match="input 'x'"):
        comp.run(torch.ones(3, 4))
    assert comp.boundary.bind({"x": torch.ones(7, 2)}) == {"s": 7}


def test_a_tensor_passed_again_is_seen_as_it_is_now() -> None:
    """The boundary reuses its numpy view of a CPU tensor passed again over the same memory in the same layout; values
    changed in place are read as they are now, and a tensor transposed or resized in place is viewed anew."""
    g = ll.Graph()
    (g.tensor((3, 3), "x") * 2).output("y")
    comp = ll.compile(g)
    x = torch.arange(9.0).reshape(3, 3)
    first = comp.boundary.check({"x": x})[0]["x"]
    assert comp.boundary.check({"x": x})[0]["x"] is first and np.shares_memory(first, x.numpy())
    torch.testing.assert_close(comp.run(x), x * 2)
    x.add_(1)  # values changed in place: the same view reads them
    torch.testing.assert_close(comp.run(x), x * 2)
    x.t_()  # the same memory and shape, another layout: a new view
    assert comp.boundary.check({"x": x})[0]["x"] is not first
    torch.testing.assert_close(comp.run(x), x * 2)
    x.resize_(9).resize_(3, 3).t_()  # back to the first layout, moved to other memory or not: still what x holds
    torch.testing.assert_close(comp.run(x), x * 2)
    other = x.clone()  # another tensor: its own view
    assert comp.boundary.check({"x": other})[0]["x"] is not comp.boundary.check({"x": x})[0]["x"]
    torch.testing.assert_close(comp.run(other), other * 2)


def test_a_tensor_numpy_cannot_view_is_converted_as_to_numpy_converts_it() -> None:
    """A tensor that requires grad, or a negated view (torch's lazy neg bit), has no plain numpy view: the boundary
    reads its values all the same, never a view that drops the negation."""
    comp = _graph_of(ll.f32)
    x = torch.arange(6.0).reshape(3, 2).requires_grad_()
    torch.testing.assert_close(comp.run(x), x.detach() * 2)
    negated = torch._neg_view(torch.arange(6.0).reshape(3, 2))
    assert negated.is_neg()
    torch.testing.assert_close(comp.run(negated), negated * 2)


def test_a_signature_run_again_takes_its_ready_call() -> None:
    """A signature's second run makes its ready call, which the runs after it go through (the checks done once). It
    reads each call's values and the graph's weights as they are now, it stops serving once the genome changes, and a
    tensor without a plain numpy view still takes the general path. A signature that binds symbolic dimensions (a
    generation's, whose length changes with every call) makes none."""
    g = ll.Graph()
    (g.tensor((3, 4), "x") * g.weight("w", np.arange(4, dtype=np.float32))).sum(1).output("y")
    comp = ll.compile(g)
    x = torch.arange(12.0).reshape(3, 4)
    for _ in range(2):
        assert comp.ready(x) is None  # made by a second run: a signature run once has none
        torch.testing.assert_close(comp.run(x), (x * torch.arange(4.0)).sum(1))
    ready = comp.ready(x)
    assert ready is not None and comp.ready(x.numpy()) is None
    with mock.patch.object(type(comp.boundary), "check", side_effect=AssertionError("checked again")):
        for _ in range(2):
            x = torch.randn(3, 4)
            torch.testing.assert_close(comp.run(x), (x * torch.arange(4.0)).sum(1))
    comp.graph.weights["w"] = np.full(4, 2.0, np.float32)  # a new weight array: bound anew
    torch.testing.assert_close(comp.run(x), x.sum(1) * 2)
    grad = x.clone().requires_grad_()  # no plain numpy view: the general path converts it
    torch.testing.assert_close(comp.run(grad), x.sum(1) * 2)
    comp.genome = comp.random_genome(seed=1)
    assert comp.ready(x) is None
    for _ in range(2):
        torch.testing.assert_close(comp.run(x), x.sum(1) * 2)
    assert comp.ready(x) not in (None, ready)
    symbolic = _graph_of(ll.f32)
    for _ in range(3):
        torch.testing.assert_close(symbolic.run(torch.ones(3, 2)), torch.full((3, 2), 2.0))
    assert symbolic.ready(torch.ones(3, 2)) is None


def test_outputs_keep_their_dtype() -> None:
    comp = _graph_of(ll.bf16)
    out = comp.run(torch.ones(4, 2, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, torch.full((4, 2), 2.0, dtype=torch.bfloat16))


def test_shape_boundary_names_the_input() -> None:
    comp = _graph_of(ll.f32)
    with pytest.raises(ll.ShapeError, match=r"input 'x' has shape \[3, 5\] but the graph declares \[s, 2\]"):
        comp.run(torch.zeros(3, 5))
    with pytest.raises(ll.ShapeError, match="input 'x' has shape"):
        comp.run(torch.zeros(3))


def test_graph_without_outputs_and_wrong_input_count() -> None:
    g = ll.Graph()
    g.tensor((2,), "x")
    with pytest.raises(ll.LuminalError, match="no outputs"):
        ll.compile(g)
    comp = _graph_of(ll.f32)
    with pytest.raises(ll.ArgumentError, match=r"^2 inputs given; the program takes 1: \['x'\]"):
        comp.run(torch.zeros(1, 2), torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r"Compiled.run\(device='tpu'\): expected one of 'cpu', 'cuda'"):
        comp.run(torch.zeros(1, 2), device="tpu")


def test_calls_by_name_and_inputs_are_not_modified() -> None:
    g = ll.Graph()
    x, w = g.tensor((2, 2), "x"), g.tensor((2, 2), "w")
    (x @ w).output("y")
    x.output("x_again")
    comp = ll.compile(g)
    xv, wv = torch.randn(2, 2), torch.randn(2, 2)
    y, x_again = comp.run(w=wv, x=xv)
    torch.testing.assert_close(y, xv @ wv)
    x_again += 1  # an output is the caller's own: writing to it leaves the input alone
    assert not torch.equal(x_again, xv)
