"""Shape trackers against numpy: any chain of views reads the same elements numpy's views do."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luminal_lab.codegen.reads import lower
from luminal_lab.core.errors import ShapeError
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.core.symbolic import Expr


def materialise(buffer: np.ndarray, tracker: ShapeTracker) -> np.ndarray:
    """Read a tracker's view of a flat buffer the slow, obvious way: index and mask expressions."""
    dims = [d.value for d in tracker.dims]
    z = np.arange(int(np.prod(dims)), dtype=np.int64)
    index = np.broadcast_to(tracker.index_expr().evaluate({}, z), z.shape)
    valid = np.broadcast_to(tracker.valid_expr().evaluate({}, z), z.shape).astype(bool)
    return np.where(valid, buffer[np.where(valid, index, 0)], 0).reshape(dims)


@st.composite
def view_chains(draw) -> list[tuple[np.ndarray, np.ndarray, ShapeTracker]]:
    """Random chains of views applied alike to a numpy array and a tracker.

    Returns (buffer, expected, tracker) checkpoints: where a reshape needs a copy, the view so
    far is checked and then materialised into a new flat buffer, as the HLIR would do.
    """
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    array = np.arange(1, int(np.prod(shape)) + 1).reshape(shape)
    buffer, tracker = array.reshape(-1), ShapeTracker.contiguous(shape)
    checkpoints = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["permute", "slice", "pad", "reshape", "expand", "broadcast"]))
        rank = array.ndim
        if kind == "permute":
            axes = draw(st.permutations(range(rank)))
            array, tracker = array.transpose(axes), tracker.permute(axes)
        elif kind == "slice":
            axis = draw(st.integers(0, rank - 1))
            n = array.shape[axis]
            start = draw(st.integers(0, n - 1))
            stop = draw(st.integers(start + 1, n))
            step = draw(st.integers(1, 2))
            index = [slice(None)] * rank
            index[axis] = slice(start, stop, step)
            array, tracker = array[tuple(index)], tracker.slice(axis, start, stop, step)
        elif kind == "pad":
            axis = draw(st.integers(0, rank - 1))
            widths = [(0, 0)] * rank
            widths[axis] = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
            array, tracker = np.pad(array, widths), tracker.pad(axis, *widths[axis])
        elif kind == "reshape":
            divisors = [d for d in range(1, array.size + 1) if array.size % d == 0]
            first = draw(st.sampled_from(divisors))
            new_shape = (first, array.size // first)
            reshaped = tracker.reshape(new_shape)
            if reshaped is None:
                checkpoints.append((buffer, array.copy(), tracker))
                buffer = np.ascontiguousarray(array).reshape(-1)
                reshaped = ShapeTracker.contiguous(array.shape).reshape(new_shape)
            array, tracker = array.reshape(new_shape), reshaped
        elif kind == "expand":
            axis = draw(st.integers(0, rank))
            size = draw(st.integers(1, 3))
            array = np.broadcast_to(np.expand_dims(array, axis), array.shape[:axis] + (size,) + array.shape[axis:])
            tracker = tracker.expand_dim(axis, size)
        else:
            ones = [i for i, d in enumerate(array.shape) if d == 1]
            if ones:
                target = list(array.shape)
                target[draw(st.sampled_from(ones))] = 3
                array, tracker = np.broadcast_to(array, target), tracker.broadcast_to(target)
        if array.ndim > 5 or array.size > 400:
            break
    checkpoints.append((buffer, array, tracker))
    return checkpoints


@settings(max_examples=400)
@given(view_chains())
def test_views_read_what_numpy_reads(checkpoints) -> None:
    for buffer, expected, tracker in checkpoints:
        assert [d.value for d in tracker.dims] == list(expected.shape)
        np.testing.assert_array_equal(materialise(buffer, tracker), expected)


@settings(max_examples=300)
@given(view_chains())
def test_a_boxed_tracker_reads_each_axis_as_a_line_over_one_run(checkpoints) -> None:
    """Where ``boxed_strides`` gives each axis as ``z*step + offset`` valid on ``low <= z < high``, that is what the
    axis's stride and mask expressions give at every index."""
    for _, _, tracker in checkpoints:
        axes = tracker.boxed_strides()
        if axes is None:
            continue
        for dim, stride, mask, axis in zip(tracker.dims, tracker.strides, tracker.masks, axes):
            z = np.arange(dim.value)
            low = 0 if axis.low is None else axis.low.evaluate({})
            high = dim.value if axis.high is None else axis.high.evaluate({})
            np.testing.assert_array_equal(np.broadcast_to(mask.evaluate({}, z) != 0, z.shape), (z >= low) & (z < high))
            np.testing.assert_array_equal(np.broadcast_to(stride.evaluate({}, z), z.shape),
                                          axis.step.evaluate({}) * z + axis.offset.evaluate({}))


def test_permutes_slices_pads_and_broadcasts_are_boxed_at_every_size() -> None:
    """A KV cache's concat (a pad of a symbolic length), a transpose, a slice and a broadcast: every axis is a line
    over one run, at whatever the symbolic length is bound to."""
    s = Expr.var("s")
    tracker = (ShapeTracker.contiguous((2, s, 8)).pad(1, 0, 1).permute((1, 0, 2)).slice(2, 1, 7, 2)
               .expand_dim(0, 3))
    axes = tracker.boxed_strides()
    assert axes is not None
    for size in (1, 5, 64):
        bindings = {"s": size}
        assert [None if a.high is None else a.high.evaluate(bindings) for a in axes] == [None, size, None, None]
        assert [a.step.evaluate(bindings) for a in axes] == [0, 8, 8 * size, 2]
        assert [a.offset.evaluate(bindings) for a in axes] == [0, 0, 0, 1]
    assert ShapeTracker.contiguous((4, 6)).permute((1, 0)).reshape((24,)).boxed_strides() is None  # a nest


def test_a_stride_that_is_a_line_over_its_own_indexes_is_boxed() -> None:
    """An axis of two heads (as a decode step's grouped-query cache has) stepping by ``(z/2)*a + (z%2)*b``: over its
    two indexes that is ``z*b``, so the read is boxed (and lowered as the read of every index finds it); over four
    indexes it is a line only where ``a`` is ``2*b``."""
    s, z = Expr.var("s"), Expr.z()
    a, b = (s + 1) * 192, (s + 1) * 64
    heads = (z // 2) * a + (z % 2) * b
    two = ShapeTracker((Expr.num(2), s + 1, Expr.num(64)), (heads, z * 64, z), (Expr.num(1),) * 3)
    axes = two.boxed_strides()
    assert axes is not None and [axis.step for axis in axes] == [b, Expr.num(64), Expr.num(1)]
    for size in (1, 7):
        flat = 4 * (size + 1) * 64
        assert lower(two, {"s": size}, flat, 0) == lower(two, {"s": size}, flat, 0, boxed=False)
    four = ShapeTracker((Expr.num(4), s + 1, Expr.num(64)), (heads, z * 64, z), (Expr.num(1),) * 3)
    assert four.boxed_strides() is None


def test_merge_of_contiguous_dims_stays_linear() -> None:
    tracker = ShapeTracker.contiguous((2, 3, 4)).permute((1, 0, 2))
    merged = tracker.reshape((3, 8))
    assert merged is not None and merged.dims == (Expr.num(3), Expr.num(8))
    assert ShapeTracker.contiguous((3, 4, 5)).reshape((12, 5)).is_contiguous
    split = ShapeTracker.contiguous((12, 5)).slice(0, 2, 10).reshape((2, 4, 5))
    assert split is not None and split.linear_strides() is not None


def test_reshape_that_needs_a_copy_says_so() -> None:
    tracker = ShapeTracker.contiguous((4, 6)).permute((1, 0))
    assert tracker.reshape((24,)) is not None  # merging is always expressible
    assert tracker.reshape((3, 8)) is None  # splitting a non-linear merge is not


def test_symbolic_dims() -> None:
    s = Expr.var("s")
    tracker = ShapeTracker.contiguous((s, 4))
    assert tracker.reshape((s * 4,)).is_contiguous
    padded = tracker.pad(0, 1, 0)
    assert padded.dims[0] == s + 1
    assert padded.valid_expr().evaluate({"s": 3}, 0) == 0
    assert padded.valid_expr().evaluate({"s": 3}, 4) == 1


def test_errors_name_the_shapes() -> None:
    tracker = ShapeTracker.contiguous((2, 3))
    with pytest.raises(ShapeError, match=r"\[2, 3\] to \[4, 2\]"):
        tracker.reshape((4, 2))
    with pytest.raises(ShapeError, match=r"\[2, 3\] to \[2, 4\]"):
        tracker.broadcast_to((2, 4))
    with pytest.raises(ShapeError, match="permutation"):
        tracker.permute((0, 0))
