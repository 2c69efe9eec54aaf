"""An HLIR graph as JSON data and back (``hlir/data.py``): the graph read back is the one written, node for node (its
egglog text the same, its reference results the same), whatever its constants, views and symbolic sizes; data that is
not such a graph is refused with a ``ValueError``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.core.symbolic import Expr
from luminal_lab.egraph.schema import emit
from luminal_lab.frontends.translate import from_torch
from luminal_lab.hlir import data
from luminal_lab.hlir.graph import Graph, Node
from luminal_lab.hlir.reference import ReferenceRuntime
from tests.helpers.models import LlamaBlock, llama_inputs


def through_json(graph: Graph) -> Graph:
    return data.from_data(json.loads(json.dumps(data.to_data(graph))), graph.weights)


def described(node: Node) -> tuple:
    return (node.id, node.op, [(s.id, t) for s, t in node.sources], node.shape, node.dtype, type(node.arg),
            repr(node.arg), node.origin)


def assert_same(read: Graph, graph: Graph) -> None:
    assert [described(n) for n in read.nodes] == [described(n) for n in graph.nodes]
    assert {k: (s.node.id, s.is_weight) for k, s in read.inputs.items()} == \
        {k: (s.node.id, s.is_weight) for k, s in graph.inputs.items()}
    assert {k: n.id for k, n in read.outputs.items()} == {k: n.id for k, n in graph.outputs.items()}
    assert (read.size_inputs, read.specialised, read.dynamic) == (graph.size_inputs, graph.specialised, graph.dynamic)
    assert emit(read) == emit(graph)


def every_kind() -> Graph:
    """Constants of every kind (nan, infinities, -0.0, a bool, an int, a numpy scalar, a size expression), an iota, a
    cast, reductions, a gather and a scatter, views with masks and a symbolic size."""
    g = ll.Graph()
    x = g.tensor(("n", 4), "x")
    w = g.weight("w", np.arange(4, dtype=np.float32))
    with g.origin("aten.add @ model.py:3"):
        y = x + w.expand("n", 4)
    y = (y * g.constant(math.nan) + g.constant(math.inf) - g.constant(-math.inf)) * g.constant(-0.0)
    y = y + g.constant(np.float32(0.5)) + g.constant(Expr.var("n") * 2, ll.i32).cast(ll.f32)
    flag = x.lt(g.constant(1.0)).logical_or(g.constant(True, ll.bool))
    counted = g.arange("n", start=1, step=2).cast(ll.f32) + g.constant(3, ll.i32).cast(ll.f32)
    y.sum(1).output("sums")
    flag.cast(ll.f32).max(1).output("flags")
    counted.output("counted")
    x.pad([(0, 0), (1, 2)]).slice(1, 1, 5).output("padded")
    index = g.arange(4).unsqueeze(0).expand("n", 4)
    gathered = x.gather(1, index)
    gathered.scatter(1, index, y).output("scattered")
    return g


def test_a_graph_of_every_kind_reads_back_as_written() -> None:
    g = every_kind()
    read = through_json(g)
    assert_same(read, g)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got, expected = ReferenceRuntime(read).run({"x": x}, {"n": 3}), ReferenceRuntime(g).run({"x": x}, {"n": 3})
    assert got.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])
    # the constants keep their types: a later constant of the same value is the node already there
    assert read.constant(np.float32(0.5)).node is next(n for n in read.nodes if repr(n.arg) == repr(np.float32(0.5)))


def test_a_translated_model_reads_back_as_written() -> None:
    torch.manual_seed(0)
    model = LlamaBlock(d_model=64).eval()
    g = from_torch(model, llama_inputs(d_model=64)).graph
    read = through_json(g)
    assert_same(read, g)
    assert read.weights.keys() == g.weights.keys()


@pytest.mark.parametrize(("broken", "named"), [
    ({"format": 0}, "not an HLIR graph's data of this layout"),
    ("nodes", "not an HLIR graph's data of this layout"),
    ({"nodes": [["Sin", [[7, 0]], [4], "f32", None, None]]}, "IndexError"),
    ({"nodes": [["Tan", [], [4], "f32", None, None]]}, "ValueError"),
    ({"inputs": [["w", 1, True]]}, "KeyError"),
    ({"views": [[[True], ["z"], [1]]]}, "True is not an expression"),
])
def test_data_that_is_not_a_graph_is_refused(broken, named: str) -> None:
    written = data.to_data(every_kind())
    broken = {**written, **broken} if isinstance(broken, dict) else broken
    with pytest.raises(ValueError, match=r"^not an HLIR graph's data") as raised:
        data.from_data(broken, {})
    assert named in str(raised.value)
