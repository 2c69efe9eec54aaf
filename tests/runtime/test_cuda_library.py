"""The cuBLAS matmul step of the CUDA runtime, run on CPU torch tensors: the same views over flat buffers, the
same ``torch.mm`` or ``torch.bmm`` into the kernel's buffer (straight in, or through the product), checked against the
reference without a GPU."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.codegen.reads import lower
from luminal_lab.core.arrays import to_torch
from luminal_lab.core.dtypes import to_torch as to_torch_dtype
from luminal_lab.core.shape_tracker import ONE, ShapeTracker, Z
from luminal_lab.core.symbolic import as_expr, lt, mod, mul
from luminal_lab.llir.llir import LLIR
from luminal_lab.runtime.cuda import _library_matmul, _operand


def _add(g: ll.Graph, case: str, dtype) -> None:
    """``case``'s contraction, added to ``g``: its inputs ``<case>.a`` and ``<case>.b``, its output ``case``."""
    def a(*shape: int) -> ll.GraphTensor:
        return g.tensor(shape, f"{case}.a", dtype)

    def b(*shape: int) -> ll.GraphTensor:
        return g.tensor(shape, f"{case}.b", dtype)

    if case == "matrix":
        y = a(7, 5) @ b(5, 6)
    elif case == "batched-transposed":
        y = a(2, 3, 4, 5) @ b(2, 3, 6, 5).transpose(-1, -2)
    elif case == "transposed-out":  # the product read back transposed: written through the product
        y = (a(7, 5) @ b(5, 6)).transpose(0, 1) + 1.0
    elif case == "vector":
        y = (a(5) * b(4, 5)).sum(-1)
    elif case == "dot":
        y = (a(5) * b(5)).sum(-1)
    elif case == "broadcast-neither":  # an output dim neither operand varies along
        y = a(3, 1, 5).expand((3, 2, 5)) @ b(5, 4)
    elif case == "sliced":
        y = a(6, 9)[:, 2:7] @ b(8, 3)[1:6]
    elif case == "merged":  # a transpose, then a reshape: no strided view, a nested one copied into a scratch
        y = a(2, 3, 4).transpose(0, 1).reshape(3, 8) @ b(8, 5)
    elif case == "padded":  # the box of a padded view copied into a scratch of zeros
        y = a(5, 4).pad([(1, 2), (0, 0)]) @ b(4, 3).pad([(0, 0), (2, 0)])
    y.output(case)


def _read(flat: np.ndarray, view) -> np.ndarray:
    z = np.arange(int(view.n_elements.evaluate({})), dtype=np.int64)
    index = np.broadcast_to(view.index_expr().evaluate({}, z), z.shape)
    valid = np.broadcast_to(view.valid_expr().evaluate({}, z) != 0, z.shape)
    values = np.where(valid, flat.astype(np.float64)[np.where(valid, index, 0)], 0)
    return values.reshape([d.value for d in view.dims])


def _kind(read) -> str:
    return type(read).__name__ + (" padded" if getattr(read, "box", None) else "")


READS = {"merged": {"Nested", "Strided"}, "padded": {"Strided padded"}}
CASES = ["matrix", "batched-transposed", "transposed-out", "vector", "dot", "broadcast-neither", "sliced", "merged",
         "padded"]


@functools.cache
def _lowered(dtype) -> tuple[ll.Graph, LLIR]:
    """Every case in ``dtype`` side by side in one graph (its nodes tagged with the case), lowered by one e-graph
    rather than one per case, and the smallest genome's LLIR."""
    g = ll.Graph()
    for case in CASES:
        if dtype.is_float or case not in ("vector", "dot"):
            with g.origin(case):
                _add(g, case, dtype)
    comp = ll.compile(g)
    llir = comp.llir()
    comp.egraph.close()
    return g, llir


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Floats in [-1, 1], i32 in [-4, 4], a narrow int over its whole range (so its products wrap)."""
    if dtype.is_float or dtype == ll.i32:
        return (rng.uniform(-1, 1, shape) * (4 if dtype == ll.i32 else 1)).astype(dtype.numpy)
    return rng.integers(dtype.lowest, dtype.highest, shape, endpoint=True).astype(dtype.numpy)


# an integer .sum() widens to i64 (as torch's does), so integer contractions come from @ only
@pytest.mark.parametrize(("case", "dtype"), [(c, d) for d in (ll.f32, ll.f16, ll.i32, ll.i8, ll.u8, ll.i16)
                                             for c in CASES if d.is_float or c not in ("vector", "dot")],
                         ids=lambda p: p if isinstance(p, str) else p.value)
def test_library_matmul_step_matches_the_reference(case: str, dtype) -> None:
    graph, llir = _lowered(dtype)
    rng = np.random.default_rng(0)
    inputs = {name: _values(rng, tuple(d.value for d in t.node.shape), dtype) for name, t in graph.inputs.items()
              if t.node.origin == case}
    by_id = {k.id: k for k in llir.kernels}
    (kernel,) = (k for k in llir.kernels if k.op == "Matmul" and case in {graph.nodes[h].origin for h in k.hlir})
    tensors = {k.id: to_torch(inputs[k.arg].reshape(-1)).clone() for k in llir.kernels
               if k.op == "Input" and k.arg in inputs}
    tensors[kernel.id] = torch.full((int(np.prod([d.value for d in kernel.shape])),), -7,
                                    dtype=to_torch_dtype(kernel.dtype))
    (a_id, a_view), (b_id, b_view) = kernel.sources
    reads = {_kind(lower(view, {}, tensors[sid].numel(), sid)) for sid, view in kernel.sources}
    assert reads == READS.get(case, {"Strided"})  # how each operand is read: in place, or through a scratch
    step = _library_matmul(kernel, tensors, {})
    step()
    first = tensors[kernel.id].clone()
    for sid, _ in kernel.sources:  # new values in the same buffers: a scratch is refreshed on every call
        tensors[sid].copy_(tensors[sid].flip(0))
    step()
    for sid, _ in kernel.sources:
        inputs[by_id[sid].arg] = inputs[by_id[sid].arg].reshape(-1)[::-1].copy()
    assert not torch.equal(first, tensors[kernel.id]) or case == "dot"
    # this kernel alone, from its views' index expressions: the product of the two views, summed over the last dim
    a, b = (_read(inputs[by_id[sid].arg].reshape(-1), view) for sid, view in ((a_id, a_view), (b_id, b_view)))
    expected = (a * b).sum(-1)
    if not dtype.is_float:  # exact in f64 here; the kernel's type keeps it modulo 2**bits
        got = tensors[kernel.id].numpy().reshape(expected.shape)
        np.testing.assert_array_equal(got, expected.astype(np.int64).astype(dtype.numpy))
        return
    got = tensors[kernel.id].float().numpy().astype(np.float64).reshape(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=2e-3 if dtype == ll.f16 else 1e-5, atol=2e-3)


def _trackers() -> dict[str, ShapeTracker]:
    """A view of each kind ``lower`` gives, over a buffer of 24 elements."""
    grid = ShapeTracker.contiguous((2, 3, 4))
    every_third_left_out = ShapeTracker((as_expr(4), as_expr(6)), (mul(Z, 6), Z), (ONE, lt(mod(Z, 3), 2)))
    return {"Strided": grid.permute((2, 0, 1)), "Strided padded": ShapeTracker.contiguous((4, 6)).pad(0, 1, 2),
            "Nested": grid.permute((1, 0, 2)).reshape((3, 8)), "Gathered": every_third_left_out}


@pytest.mark.parametrize("kind", list(_trackers()))
def test_an_operand_read_in_place_or_through_a_scratch_matches_its_index_expressions(kind: str) -> None:
    """What the cuBLAS step reads of each kind of view, on two calls with new values in the buffer between them."""
    tracker = _trackers()[kind]
    flat = torch.arange(24, dtype=torch.float32) + 1
    assert _kind(lower(tracker, {}, flat.numel(), 0)) == kind
    operand, refreshes = _operand(flat, 0, tracker, {})
    assert len(refreshes) == (kind != "Strided")  # a scratch, refreshed on each call, for all but a strided view
    for _ in range(2):
        for refresh in refreshes:
            refresh()
        np.testing.assert_array_equal(operand.numpy(), _read(flat.numpy(), tracker))
        flat.mul_(-3)
