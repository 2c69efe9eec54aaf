"""The HLIR stage object: summary, JSON envelope, SVG picture, and the mime bundle."""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import luminal_lab as ll
from luminal_lab.core.ids import hlir_id
from luminal_lab.core.stage import SCHEMA_VERSION, STAGE_MIME, Stage
from luminal_lab.hlir import view as hlir_view
from luminal_lab.hlir.graph import HLIRStage

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SVG_NS = "{http://www.w3.org/2000/svg}"
SUMMARY = ("HLIR: 7 nodes (Add 1, Constant 1, Input 2, MaxReduce 1, Mul 1, Output 1) | "
           "inputs a[s, 1] f32, b[1, 4] f32 | outputs c[s, 4] f32")


def small_graph() -> ll.Graph:
    g = ll.Graph()
    a = g.tensor(("s", 1), name="a")
    b = g.tensor((1, 4), name="b")
    (a * b).relu().output("c")
    return g


def softmax_of_matmul() -> ll.Graph:
    g = ll.Graph()
    x = g.tensor((8, 16), name="x")
    w = g.weight("w", np.ones((16, 4), np.float32))
    with g.origin("matmul"):
        y = x @ w
    with g.origin("softmax"):
        y = y.softmax(-1)
    y.output("y")
    return g


def chain(n: int) -> ll.Graph:
    g = ll.Graph()
    x = g.tensor((4,), name="x")
    for _ in range(n):
        x = (x + 1.0).sqrt()
    x.output("y")
    return g


def svg_tree(stage: HLIRStage) -> ET.Element:
    svg = stage.to_svg()
    assert svg is not None
    return ET.fromstring(svg)


# ---- summary -----------------------------------------------------------------------------
def test_summary_exact():
    stage = small_graph().hlir
    assert stage.summary() == SUMMARY
    assert repr(stage) == SUMMARY


def test_summary_stable_across_builds():
    assert small_graph().hlir.summary() == small_graph().hlir.summary()
    assert softmax_of_matmul().hlir.summary() == softmax_of_matmul().hlir.summary()
    assert softmax_of_matmul().hlir.to_json() == softmax_of_matmul().hlir.to_json()


def test_summary_weights_and_dead_nodes():
    g = softmax_of_matmul()
    g.tensor((2,), name="unused").sqrt()
    assert g.hlir.summary().endswith(", 2 dead hidden | inputs x[8, 16] f32, unused[2] f32 | weights 1 "
                                     "| outputs y[8, 4] f32")
    full = HLIRStage(g, include_dead=True)
    assert len(full.nodes) == len(g.nodes)
    assert ", 2 dead |" in full.summary()


def test_summary_empty_graph():
    assert ll.Graph().hlir.summary() == "HLIR: 0 nodes | inputs none | outputs none"


# ---- JSON --------------------------------------------------------------------------------
def test_json_nodes_and_edges():
    data = small_graph().hlir.to_json()
    assert json.loads(json.dumps(data)) == data
    assert (data["stage"], data["schema"], data["summary"], data["links"]) == ("hlir", SCHEMA_VERSION, SUMMARY, {})
    assert [n["id"] for n in data["nodes"]] == [f"h{i}" for i in range(7)]
    assert [n["op"] for n in data["nodes"]] == ["Input", "Input", "Mul", "Constant", "Add", "MaxReduce", "Output"]
    assert [n["kind"] for n in data["nodes"]] == ["input", "input", "op", "constant", "op", "op", "output"]
    assert data["nodes"][0] == {"id": "h0", "op": "Input", "label": "Input a", "shape": ["s", "1"], "dtype": "f32",
                                "origin": None, "kind": "input"}
    assert [(e["source"], e["target"], e["index"]) for e in data["edges"]] == [
        ("h0", "h2", 0), ("h1", "h2", 1), ("h2", "h4", 0), ("h3", "h4", 1), ("h4", "h5", 0), ("h5", "h6", 0)]
    a_read = data["edges"][0]
    assert a_read["shape"] == ["s", "4"] and a_read["strides"] == ["z", "0"] and a_read["mask"] == ["1", "1"]
    assert (a_read["contiguous"], a_read["view"], a_read["dtype"]) == (False, ["broadcast"], "f32")
    assert data["edges"][-1]["contiguous"] and data["edges"][-1]["view"] == []
    assert data["meta"]["outputs"] == [{"name": "c", "id": "h6", "shape": ["s", "4"], "dtype": "f32"}]
    assert [i["name"] for i in data["meta"]["inputs"]] == ["a", "b"]


def test_json_marks_a_permuted_read():
    g = ll.Graph()
    x = g.tensor((2, 3), name="x")
    x.T.sqrt().output("y")
    edge = next(e for e in g.hlir.to_json()["edges"] if e["target"] == "h1")
    assert edge["source"] == "h0"
    assert edge["shape"] == ["3", "2"] and edge["strides"] == ["z", "3*z"]
    assert edge["contiguous"] is False and edge["view"] == ["permuted"]


def test_json_kinds_and_origins():
    data = softmax_of_matmul().hlir.to_json()
    kinds = {n["id"]: n["kind"] for n in data["nodes"]}
    assert kinds["h0"] == "input" and kinds["h1"] == "weight"
    assert {n["origin"] for n in data["nodes"]} == {None, "matmul", "softmax"}
    assert data["meta"]["inputs"][1] == {"name": "w", "id": "h1", "shape": ["16", "4"], "dtype": "f32",
                                         "weight": True, "live": True}


def test_hlir_id():
    g = small_graph()
    assert hlir_id(g.nodes[5]) == hlir_id(5) == "h5"


# ---- mime bundle and the base class --------------------------------------------------------
@needs_dot
def test_mimebundle_has_three_types():
    bundle = small_graph().hlir._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml", STAGE_MIME}
    assert bundle["text/plain"] == SUMMARY
    assert bundle[STAGE_MIME]["nodes"][0]["id"] == "h0"
    assert set(small_graph().hlir._repr_mimebundle_(exclude=["image/svg+xml"])) == {"text/plain", STAGE_MIME}
    assert set(small_graph().hlir._repr_mimebundle_(include=["text/plain"])) == {"text/plain"}


def test_stage_without_picture(tmp_path):
    class Bare(Stage):
        name = "bare"

        def summary(self) -> str:
            return "bare: 1 node"

        def to_json(self) -> dict:
            return self.envelope([{"id": "x0", "label": "X"}], [])

    stage = Bare()
    assert set(stage._repr_mimebundle_()) == {"text/plain", STAGE_MIME}
    assert stage._repr_mimebundle_()[STAGE_MIME] == {"stage": "bare", "schema": SCHEMA_VERSION,
                                                     "summary": "bare: 1 node", "nodes": [{"id": "x0", "label": "X"}],
                                                     "edges": [], "links": {}, "meta": {}}
    assert json.loads(stage.save_json(tmp_path / "bare.json").read_text())["stage"] == "bare"
    with pytest.raises(RuntimeError, match="no picture"):
        stage.save_svg(tmp_path / "bare.svg")


# ---- picture -----------------------------------------------------------------------------
@needs_dot
def test_svg_has_every_live_node_and_edge_labels():
    stage = softmax_of_matmul().hlir
    root = svg_tree(stage)
    ids = {el.get("id") for el in root.iter()}
    assert {hlir_id(n) for n in stage.nodes} <= ids
    texts = [el.text for el in root.iter(f"{SVG_NS}text") if el.text]
    assert "[8, 4, 16] f32" in texts and "[8, 4] f32" in texts
    assert "broadcast, permuted" in texts  # the weight, read transposed and broadcast
    assert {"matmul", "softmax"} <= set(texts)  # origin clusters
    assert not stage.condensed


@needs_dot
def test_svg_small_graph_ids_and_edges():
    root = svg_tree(small_graph().hlir)
    groups = {el.get("id"): el for el in root.iter(f"{SVG_NS}g")}
    assert {f"h{i}" for i in range(7)} <= set(groups)
    assert {"h0-h2-0", "h1-h2-1", "h3-h4-1", "h5-h6-0"} <= set(groups)
    assert "node" in groups["h2"].get("class").split()
    texts = [el.text for el in root.iter(f"{SVG_NS}text")]
    assert "[s, 4] f32" in texts and "[s, 4, 2] f32" in texts


@needs_dot
def test_shared_constant_is_drawn_next_to_each_use():
    g = ll.Graph()
    x = g.tensor((3,), name="x")
    ((x + 1.0).sqrt() + 1.0).output("y")
    stage = g.hlir
    constant = next(n for n in stage.nodes if n.op == ll.Op.CONSTANT)
    root = svg_tree(stage)
    copies = [el for el in root.iter(f"{SVG_NS}g") if hlir_id(constant) in (el.get("class") or "").split()]
    assert len(copies) == 2
    assert copies[0].get("id") == hlir_id(constant)


@needs_dot
def test_svg_is_cached_and_stable():
    stage = softmax_of_matmul().hlir
    assert stage.to_svg() is stage.to_svg()
    assert stage.to_svg() == softmax_of_matmul().hlir.to_svg()


@needs_dot
def test_large_graph_is_condensed_quickly():
    g = chain(1000)
    stage = g.hlir
    assert len(stage.nodes) == 2003
    start = time.perf_counter()
    root = svg_tree(stage)
    assert time.perf_counter() - start < 10
    assert stage.condensed
    texts = " ".join(el.text or "" for el in root.iter(f"{SVG_NS}text"))
    assert "condensed: 2003 nodes" in texts
    assert "2000 nodes: Add 1000, Sqrt 1000" in texts
    assert stage.to_json()["meta"]["condensed"]["g0"][:2] == ["h2", "h3"]
    assert len(stage.to_json()["nodes"]) == 2003


@needs_dot
def test_many_origins_are_condensed_into_stretches():
    g = ll.Graph()
    x = g.tensor((4,), name="x")
    for i in range(300):
        with g.origin(f"step{i}"):
            x = x.sqrt()
    x.output("y")
    stage = HLIRStage(g, max_drawn=100)
    root = svg_tree(stage)
    boxes = [el for el in root.iter(f"{SVG_NS}g") if (el.get("id") or "").startswith("g")]
    assert 1 < len(boxes) <= 120
    assert "one box per 3 nodes in order" in " ".join(el.text or "" for el in root.iter(f"{SVG_NS}text"))


def test_without_dot_there_is_no_picture(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` on the path
    stage = softmax_of_matmul().hlir
    with pytest.warns(RuntimeWarning, match="not installed"):
        bundle = stage._repr_mimebundle_()
    assert set(bundle) == {"text/plain", STAGE_MIME}
    assert bundle["text/plain"] == stage.summary()
    assert stage.to_svg() is None
    assert hlir_view.to_dot(stage).source.startswith("digraph hlir {")


@needs_dot
def test_picture_around_a_node_draws_its_neighbourhood_with_stubs():
    g = ll.Graph()
    x = g.tensor((3,), name="x")
    a = x.sin()
    b = (a * 2.0).sqrt()
    c = b.reciprocal()
    c.log2().output("y")
    ids = {n.label.split()[0]: hlir_id(n) for n in g.nodes}
    stage = g.hlir
    picture = stage.picture(around=ids["Sqrt"], depth=1)
    assert picture.caption == f"HLIR: the 3 nodes within 1 reads of {ids['Sqrt']}, of {len(stage.nodes)}"
    root = ET.fromstring(picture.to_svg())
    classes = {el.get("id"): (el.get("class") or "").split() for el in root.iter(f"{SVG_NS}g")
               if "node" in (el.get("class") or "").split()}
    # Mul, Sqrt and Recip drawn (the constant 2.0 beside Mul, not passed through); Sin a stub; Log2 left out
    drawn = {ids["Mul"], ids["Sqrt"], ids["Recip"], ids["Constant"]}
    assert {k for k, v in classes.items() if "stub" not in v} == drawn
    assert [k for k, v in classes.items() if "stub" in v] == [ids["Sin"]]
    assert classes[ids["Sqrt"]] == ["node", "focus", ids["Sqrt"]]
    assert ids["Log2"] not in classes and ids["Input"] not in classes
    assert len(stage.picture(around=ids["Sqrt"], depth=3).dot.body) > len(picture.dot.body)
    with pytest.raises(ll.ArgumentError, match=r"^HLIRStage.picture\(around='h99'\): expected the id of one of"):
        stage.picture(around="h99")
    with pytest.raises(ll.ArgumentError, match=r"^HLIRStage.picture\(depth=-1\): expected an int >= 0"):
        stage.picture(around=ids["Sqrt"], depth=-1)
