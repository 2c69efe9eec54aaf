"""Loop rolling finds a run of identical layers, and only one: structure of the rolled graph, and the graphs it
leaves alone."""

from __future__ import annotations

import numpy as np

import luminal_lab as ll
from luminal_lab.core.ops import Op
from luminal_lab.hlir.rolling import MIN_LAYER_OPS, roll
from tests.helpers.stacks import D, appending, caching, layer, stack


def ops_of(g: ll.Graph) -> int:
    return sum(n.op not in (Op.INPUT, Op.CONSTANT, Op.OUTPUT) for n in g.live_nodes())


def test_a_stack_rolls_to_one_layer_with_markers_on_its_edges() -> None:
    g = stack(5)
    rolling = roll(g)
    assert rolling is not None and rolling.copies == 5
    per_layer = ops_of(stack(2)) - ops_of(stack(1))
    assert per_layer >= MIN_LAYER_OPS and len(rolling.layer) == per_layer
    assert rolling.params == {f"l0.{w}": tuple(f"l{i}.{w}" for i in range(5)) for w in ("w1", "w2", "norm")}
    rolled = rolling.graph
    # one LoopIn (the residual stream from the prefix) and one LoopOut (read by the suffix and carried)
    assert len(rolling.loop_in) == 1 and len(rolling.loop_out) == 1
    assert set(rolling.loop_in.values()) == set(rolling.loop_out)  # the LoopIn's later copies read the LoopOut
    for marker in rolling.markers:
        node = rolled.nodes[marker]
        assert node.op == Op.CAST and node.arg == node.dtype and node.sources[0][1].is_contiguous
        assert node.origin.startswith(("LoopIn", "LoopOut"))
    # the rolled graph is the one-layer graph plus its two markers, and keeps the program's outputs and inputs
    assert ops_of(rolled) == ops_of(stack(1)) + 2
    assert list(rolled.outputs) == ["y"]
    assert set(rolled.inputs) == {"x", "l0.w1", "l0.w2", "l0.norm"}
    # every op of copy 0 stands for that op in each copy of the full graph
    for rolled_id, full_ids in rolling.nodes.items():
        assert len(full_ids) == 5
        assert {g.nodes[f].op for f in full_ids} == {rolled.nodes[rolled_id].op}


def test_a_carried_value_nothing_after_the_run_reads_becomes_an_extra_output() -> None:
    rng = np.random.default_rng(1)
    g = ll.Graph()
    x = g.tensor((4, D), name="x")
    h, total = x, x.sum(-1)
    for i in range(3):  # two carried values: the stream h, and a running total that only the output reads
        h = layer(g, h, i, rng)
        total = total + h.sum(-1)
    total.output("total")
    rolling = roll(g)
    assert rolling is not None and rolling.copies == 3
    assert len(rolling.loop_in) == 2 and set(rolling.loop_in.values()) == set(rolling.loop_out)
    assert list(rolling.graph.outputs) == ["total", "layer ×3 carry 0"] and rolling.outputs == 1
    extra = rolling.graph.outputs["layer ×3 carry 0"]
    assert extra.sources[0][0].id in rolling.loop_out


def test_outputs_every_layer_gives_are_kept_for_copy_0_and_mapped_to_each_copy() -> None:
    """A layer's own outputs (a KV cache's keys and values) roll: the contiguous copies torch puts at the end of the
    graph count as the layer's ops, the rolled graph gives copy 0's outputs only, and ``output_copies`` says which copy
    gives each of the program's outputs."""
    g = caching(3)
    rolling = roll(g)
    assert rolling is not None and rolling.copies == 3
    assert len(rolling.layer) == (ops_of(caching(2)) - ops_of(caching(1)))
    assert list(rolling.graph.outputs) == ["keys0", "values0", "y"] and rolling.outputs == 3
    assert rolling.output_copies == ((0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, None))
    for name in ("keys0", "values0"):  # copy 0's outputs read the layer's own ops, through no marker
        source = rolling.graph.outputs[name].sources[0][0]
        assert source.id in rolling.layer and source.id not in rolling.markers
    assert rolling.graph.outputs["keys0"].sources[0][0].op == Op.CAST  # the contiguous copy, counted in the layer


def test_layers_whose_sizes_are_named_apart_roll_with_each_copy_renaming_them() -> None:
    """Each layer's cache has a length of its own (``p0``, ``p1``, ``p2``, as dynamo names them): the copies roll,
    each renaming copy 0's length to its own."""
    rolling = roll(appending(3))
    assert rolling is not None and rolling.copies == 3
    assert rolling.renames == ({}, {"p0": "p1"}, {"p0": "p2"})
    assert rolling.output_copies == ((0, 0), (0, 1), (0, 2), (1, None))
    cache = rolling.graph.outputs["cache0"]
    assert cache.shape[0].variables() == {"p0"}
    assert rolling.renamed(cache.shape, 2)[0].variables() == {"p2"}
    assert rolling.renamed(cache.shape, None) == cache.shape
    assert rolling.sized_by_copy(cache.sources[0][1]) and not rolling.sized_by_copy(rolling.graph.outputs["y"].shape)


def test_a_size_renamed_by_copy_may_not_shape_what_is_read_after_the_run() -> None:
    """The rolled graph's ops after the run read copy 0's value: it may not have a length that copy names otherwise
    (the last layer's cache read after the run), or the rolled graph would read copy 0's length as the last's."""
    assert roll(appending(3)) is not None
    assert roll(appending(3, read_last=True)) is None


def test_a_shared_computed_value_is_read_through_its_own_loop_in() -> None:
    rolling = roll(stack(4, shared=True))
    assert rolling is not None and rolling.copies == 4
    assert sorted(v is None for v in rolling.loop_in.values()) == [False, True]  # one carried, one shared
    shared = next(m for m, v in rolling.loop_in.items() if v is None)
    assert rolling.graph.nodes[shared].origin.startswith("LoopIn: shared")


def test_graphs_without_a_run_of_identical_layers_are_not_rolled() -> None:
    assert roll(stack(1)) is None
    rng = np.random.default_rng(2)
    dense = ll.Graph()
    x = dense.tensor((4, D), name="x")
    h = x
    for i in range(3):
        h = layer(dense, h, i, rng) + x * float(i + 1)  # the same ops, but a constant that differs per layer
    h.output("y")
    assert roll(dense) is None
    small = ll.Graph()
    y = small.tensor((4, D), name="x")
    for _ in range(10):
        y = (y * 2.0).sin()  # a repeat of 2 ops, 20 in all: under two copies of MIN_LAYER_OPS
    y.output("y")
    assert roll(small) is None
    shapes = ll.Graph()
    z = shapes.tensor((4, D), name="x")
    for i in range(3):  # the same block on growing widths
        w = shapes.weight(f"w{i}", rng.standard_normal((D * 2**i, D * 2 ** (i + 1))).astype(np.float32))
        z = (z.rms_norm() @ w).relu().rms_norm().sigmoid().rms_norm()
    z.output("y")
    assert roll(shapes) is None


def test_layers_that_read_two_layers_back_roll_as_pairs_carrying_two_values() -> None:
    rng = np.random.default_rng(3)
    g = ll.Graph()
    x = g.tensor((4, D), name="x")
    hs = [x]
    for i in range(4):
        skip = hs[-2] if len(hs) > 1 else hs[-1]  # copy c reads copy c - 2 (copy 0 and 1 read the input)
        hs.append(layer(g, hs[-1], i, rng) + skip)
    hs[-1].output("y")
    rolling = roll(g)
    # a copy may read only its predecessor, so the copies are pairs of layers, each carrying both of its results
    assert rolling is not None and rolling.copies == 2
    assert len(rolling.layer) == ops_of(g) // 4 * 2 and len(rolling.loop_in) == len(rolling.loop_out) == 2
    # both carried values start as x: the second LoopIn marks the first, so that the two stay apart
    first, second = sorted(rolling.loop_in)
    assert rolling.graph.nodes[second].sources[0][0].id == first
    assert set(rolling.params) == {f"l{i}.{w}" for i in (0, 1) for w in ("w1", "w2", "norm")}
