"""The LLIR stage's views: summary line, JSON envelope, kernel-graph picture, mime bundle."""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET

import pytest

import luminal_lab as ll
from luminal_lab.core.dtypes import DType
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.core.stage import SCHEMA_VERSION, STAGE_MIME
from luminal_lab.core.symbolic import Expr
from luminal_lab.llir import view as llir_view
from luminal_lab.llir.genome import ChoiceSpace, Genome, extract
from luminal_lab.llir.llir import LLIR, Kernel

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SVG_NS = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"
OPS = "Add 1, Constant 1, Exp 1, Input 2, Matmul 1, MaxReduce 1, Mul 2, Output 1, Recip 1, SumReduce 1"
IO = "inputs x[4, 8] f32, w[8, 3] f32 | outputs [4, 3] f32"


def softmax_of_matmul() -> tuple[LLIR, Genome]:
    """The LLIR of softmax(x @ w) for the smallest-term genome, which fuses nothing (random genomes
    mostly do; ``test_regions_view`` covers regions). The e-graph is closed afterwards."""
    g = ll.Graph()
    x = g.tensor((4, 8), "x")
    w = g.tensor((8, 3), "w")
    (x @ w).softmax(-1).output("s")
    eg = ll.compile(g).egraph
    try:
        eg.saturate()
        genome = ChoiceSpace(eg.snapshot, g).smallest_genome()
    finally:
        eg.close()
    return extract(genome), genome


@pytest.fixture(scope="module")
def built() -> tuple[LLIR, Genome]:
    return softmax_of_matmul()


@pytest.fixture
def llir(built: tuple[LLIR, Genome]) -> LLIR:
    """A fresh, unprofiled copy of the module's LLIR."""
    base = built[0]
    return LLIR(base.kernels, base.outputs, base.genome_hash)


def profiled(llir: LLIR) -> LLIR:
    llir.times = {k.id: 1e-5 * (k.id + 1) for k in llir.kernels}
    return llir


def less_than_half() -> LLIR:
    """``a < 0.5`` built by hand: an input, a broadcast scalar constant, a LessThan and its output."""
    n = (Expr.num(4),)
    scalar = ShapeTracker(n, (Expr.num(0),), (Expr.num(1),))
    return LLIR([
        Kernel(0, "Input", (), n, DType.F32, "a", "IR-1", (0,)),
        Kernel(1, "Constant", (), (), DType.F32, 0.5, "IR-2", (1,)),
        Kernel(2, "LessThan", ((0, ShapeTracker.contiguous(n)), (1, scalar)), n, DType.BOOL, None, "IR-3", (2,)),
        Kernel(3, "Output", ((2, ShapeTracker.contiguous(n)),), n, DType.BOOL, 0, "IR-4", (3,)),
    ], [3], 0xABC)


def chain(n: int) -> LLIR:
    """``sqrt(x + 1)`` repeated ``n`` times, built by hand: ``2 n + 3`` kernels."""
    shape = (Expr.num(4),)
    flat = ShapeTracker.contiguous(shape)
    kernels = [Kernel(0, "Input", (), shape, DType.F32, "x", "IR-0", (0,)),
               Kernel(1, "Constant", (), (), DType.F32, 1.0, "IR-1", (1,))]
    scalar = ShapeTracker(shape, (Expr.num(0),), (Expr.num(1),))
    last = 0
    for _ in range(n):
        add = Kernel(len(kernels), "Add", ((last, flat), (1, scalar)), shape, DType.F32, None, f"IR-{len(kernels)}")
        kernels.append(add)
        kernels.append(Kernel(len(kernels), "Sqrt", ((add.id, flat),), shape, DType.F32, None, f"IR-{len(kernels)}"))
        last = kernels[-1].id
    kernels.append(Kernel(len(kernels), "Output", ((last, flat),), shape, DType.F32, 0, f"IR-{len(kernels)}"))
    return LLIR(kernels, [kernels[-1].id], 1)


def svg_tree(llir: LLIR) -> ET.Element:
    svg = llir.to_svg()
    assert svg is not None
    return ET.fromstring(svg)


def texts(tree: ET.Element) -> list[str]:
    return [el.text for el in tree.iter(f"{SVG_NS}text") if el.text]


def groups(tree: ET.Element, kind: str) -> dict[str, ET.Element]:
    """SVG ``<g>`` elements of a Graphviz kind (node, edge): id -> element."""
    return {g.get("id"): g for g in tree.iter(f"{SVG_NS}g") if kind in g.get("class", "").split()}


# ---- summary -------------------------------------------------------------------------------
def test_summary_exact(llir: LLIR, built: tuple[LLIR, Genome]):
    genome = built[1]
    assert llir.genome_hash == genome.hash
    assert llir.summary() == f"LLIR: 12 kernels ({OPS}) | {IO} | genome {genome.hash:016x} | not profiled"
    assert repr(llir) == llir.summary()


def test_summary_of_a_hand_built_llir():
    assert less_than_half().summary() == ("LLIR: 4 kernels (Constant 1, Input 1, LessThan 1, Output 1) | "
                                          "inputs a[4] f32 | outputs [4] bool | genome 0000000000000abc | "
                                          "not profiled")


def test_summary_says_profiled_without_numbers(llir: LLIR):
    plain = llir.summary()
    text = profiled(llir).summary()
    assert text == plain.replace("| not profiled", "| profiled")
    llir.times = {k.id: 2e-3 for k in llir.kernels}
    assert llir.summary() == text


def test_stable_across_two_builds(llir: LLIR):
    again, _ = softmax_of_matmul()
    assert again.summary() == llir.summary()
    assert again.to_json() == llir.to_json()


# ---- JSON ----------------------------------------------------------------------------------
def test_json_nodes_links_and_edges(llir: LLIR):
    data = llir.to_json()
    assert data["stage"] == "llir" and data["schema"] == SCHEMA_VERSION
    assert data["summary"] == llir.summary()
    assert [n["id"] for n in data["nodes"]] == [f"k{k.id}" for k in llir.kernels]
    for node, k in zip(data["nodes"], llir.kernels):
        assert (node["op"], node["label"], node["dtype"], node["eclass"]) == (k.op, k.label, k.dtype.value, k.eclass)
        assert node["shape"] == [str(d) for d in k.shape]
        assert node["hlir"] == [f"h{h}" for h in k.hlir]
        assert "seconds" not in node
    assert data["links"]["egraph"] == {f"k{k.id}": [k.eclass] for k in llir.kernels}
    assert data["links"]["hlir"] == {f"k{k.id}": [f"h{h}" for h in k.hlir] for k in llir.kernels}
    expected = [(f"k{src}", f"k{k.id}", index) for k in llir.kernels for index, (src, _) in enumerate(k.sources)]
    assert [(e["source"], e["target"], e["index"]) for e in data["edges"]] == expected
    assert len({e["id"] for e in data["edges"]}) == len(expected) == data["meta"]["counts"]["edges"]
    meta = data["meta"]
    assert meta["genome"] == f"{llir.genome_hash:016x}"
    assert meta["counts"]["kernels"] == 12 and meta["counts"]["ops"]["Matmul"] == 1
    assert [i["name"] for i in meta["inputs"]] == ["x", "w"]
    assert meta["outputs"] == [{"index": 0, "id": f"k{llir.outputs[0]}", "shape": ["4", "3"], "dtype": "f32"}]
    assert meta["profiled"] is False and "total_seconds" not in meta and "condensed" not in meta
    json.dumps(data)


def test_json_edges_describe_views(llir: LLIR):
    edges = llir.to_json()["edges"]
    matmul = next(k for k in llir.kernels if k.op == "Matmul")  # it reads x and w as the product would, broadcast
    reads = [e for e in edges if e["target"] == f"k{matmul.id}"]
    assert {tuple(e["view"]) for e in reads} == {("broadcast",), ("broadcast", "permuted")}
    assert all(e["shape"] == ["4", "3", "8"] and not e["contiguous"] and e["dtype"] == "f32" for e in reads)
    out = next(e for e in edges if e["target"] == f"k{llir.outputs[0]}")
    assert out["contiguous"] and out["view"] == [] and out["strides"] == ["3*z", "z"] and out["mask"] == ["1", "1"]


def test_json_with_times(llir: LLIR):
    data = profiled(llir).to_json()
    assert [n["seconds"] for n in data["nodes"]] == [llir.times[k.id] for k in llir.kernels]
    assert data["meta"]["profiled"] is True
    assert data["meta"]["total_seconds"] == pytest.approx(sum(llir.times.values()))


# ---- picture -------------------------------------------------------------------------------
def test_format_seconds_and_heat():
    assert [llir_view.format_seconds(s) for s in (2.5, 1.234e-3, 4.2e-5, 3e-8)] == ["2.5 s", "1.23 ms", "42 µs",
                                                                                  "30 ns"]
    assert (llir_view.heat(0), llir_view.heat(1), llir_view.heat(7)) == ("#fffbeb", "#dc2626", "#dc2626")
    assert llir_view.heat(0.5) not in llir_view.HEAT


@needs_dot
def test_svg_kernels_edges_and_tooltips(llir: LLIR):
    tree = svg_tree(llir)
    nodes = groups(tree, "node")
    assert {f"k{k.id}" for k in llir.kernels} <= set(nodes)
    constant = next(k for k in llir.kernels if k.op == "Constant")
    assert f"k{constant.id}" in nodes[f"k{constant.id}"].get("class").split()
    k = next(k for k in llir.kernels if k.op == "SumReduce")
    titles = [a.get(XLINK_TITLE) for a in nodes[f"k{k.id}"].iter(f"{SVG_NS}a")]
    assert f"e-class {k.eclass}" in titles[0] and "HLIR " + ", ".join(f"h{h}" for h in k.hlir) in titles[0]
    edges = groups(tree, "edge")
    assert {e["id"] for e in llir.to_json()["edges"]} <= set(edges)
    words = texts(tree)
    assert "[4, 3, 8] f32" in words and "broadcast, permuted" in words and "not profiled" in words
    assert not any("µs" in w or "%" in w for w in words)


@needs_dot
def test_svg_shows_times_when_profiled(llir: LLIR):
    tree = svg_tree(profiled(llir))
    words = texts(tree)
    last = llir.kernels[-1]
    assert f"{llir_view.format_seconds(llir.times[last.id])} · " in " ".join(words)
    assert any(w.startswith("total 780 µs over 12 timed kernels") for w in words)
    fills = {g.get("id"): next(g.iter(f"{SVG_NS}path")).get("fill") for g in groups(tree, "node").values()}
    assert fills[f"k{last.id}"] == llir_view.HEAT[-1]  # the slowest kernel is the hottest


@needs_dot
def test_ordered_operands_and_shared_constants():
    llir = less_than_half()
    tree = svg_tree(llir)
    assert "#0 [4] f32" in texts(tree)
    assert {"k0-k2-0", "k1-k2-1", "k2-k3-0"} <= set(groups(tree, "edge"))
    small = chain(2)
    copies = [g for g in svg_tree(small).iter(f"{SVG_NS}g") if "k1" in g.get("class", "").split()]
    assert [g.get("id") for g in copies] == ["k1", "k1.k4.1"]


@needs_dot
def test_mimebundle_keys(llir: LLIR):
    bundle = llir._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml", STAGE_MIME}
    assert bundle["text/plain"] == llir.summary()
    assert bundle[STAGE_MIME]["stage"] == "llir"
    assert set(llir._repr_mimebundle_(exclude=["image/svg+xml"])) == {"text/plain", STAGE_MIME}


@needs_dot
def test_large_llir_is_condensed_quickly():
    llir = profiled(chain(1000))
    assert len(llir.kernels) == 2003
    start = time.perf_counter()
    tree = svg_tree(llir)
    assert time.perf_counter() - start < 10
    words = " ".join(texts(tree))
    assert "condensed (more than 400); one box per 17 kernels in order" in words
    assert "17 kernels: Add 9, Sqrt 8" in words and "ms · " in words
    boxes = [g for g in groups(tree, "node") if g.startswith("g")]
    assert 1 < len(boxes) <= 120
    data = llir.to_json()
    assert data["meta"]["condensed"]["g0"][:2] == ["k2", "k3"]
    assert len(data["nodes"]) == 2003


def test_without_dot_there_is_only_summary_and_json(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` on the path
    llir = less_than_half()
    with pytest.warns(RuntimeWarning, match="not installed"):
        bundle = llir._repr_mimebundle_()
    assert set(bundle) == {"text/plain", STAGE_MIME}
    assert bundle["text/plain"] == llir.summary()
    assert llir_view.to_dot(llir).source.startswith("digraph llir {")


@needs_dot
def test_many_kernels_in_regions_are_condensed():
    """Graphviz lays clusters out in superlinear time (one 300-op chain's regions took 696 s): past
    ``MAX_CLUSTERED_KERNELS`` kernels in regions the picture is condensed, even under ``MAX_DRAWN_KERNELS``."""
    g = ll.Graph()
    y = g.tensor((4, 8), name="x")
    for i in range(140):
        y = y.sin() if i % 2 else y + 0.5
    y.output("y")
    comp = ll.compile(g, rolling=False)  # rolled, the chain would be one copy of a stretch of it
    comp.genome = comp.choice_space().fused_genome()
    llir = comp.llir()
    clustered = sum(len(region.kernels()) for region in comp.regions.regions)
    assert llir_view.MAX_CLUSTERED_KERNELS < clustered and len(llir.kernels) <= llir_view.MAX_DRAWN_KERNELS
    source = llir_view.to_dot(llir).source
    assert f"condensed ({clustered} kernels in regions, more than {llir_view.MAX_CLUSTERED_KERNELS})" in source
    assert "cluster_" not in source


@needs_dot
def test_picture_around_a_kernel_draws_its_neighbourhood_with_stubs():
    from tests.helpers.stacks import stack

    comp = ll.compile(stack(3))
    comp.genome = comp.choice_space().fused_genome()
    llir = comp.llir()
    reads = {k.id: [s for s, _ in k.sources if llir.kernels[s].op != "Constant"] for k in llir.kernels}
    readers = {k.id: [r.id for r in llir.kernels if k.id in reads[r.id]] for k in llir.kernels}
    centre = next(k for k in llir.kernels if k.copy == 1 and k.op == "FusionStart")  # a later copy: drawn anyway
    near = {centre.id, *reads[centre.id], *readers[centre.id]}
    picture = llir.picture(around=f"k{centre.id}", depth=1)
    assert picture.caption.endswith(f"; the {len(near)} within 1 reads of k{centre.id} drawn")
    root = ET.fromstring(picture.to_svg())
    classes = {el.get("id"): (el.get("class") or "").split() for el in root.iter(f"{SVG_NS}g")
               if "node" in (el.get("class") or "").split()}
    near_ids = {f"k{kid}" for kid in near}
    assert {kid for kid, c in classes.items() if "stub" not in c and llir.kernels[int(kid[1:])].op != "Constant"} == \
        near_ids
    stubs = {f"k{s}" for kid in near for s in reads[kid] if s not in near}
    assert {kid for kid, c in classes.items() if "stub" in c} == stubs
    assert classes[f"k{centre.id}"] == ["node", "focus", f"k{centre.id}"]
    # region clusters keep their index among all the LLIR's regions (as in the JSON's meta.regions)
    regions = llir.to_json()["meta"]["regions"]
    clusters = [el.get("id") for el in root.iter(f"{SVG_NS}g") if el.get("class") == "cluster"]
    assert clusters and sorted(clusters) == sorted(f"r{i}" for i, r in enumerate(regions) if r[-1] in near_ids)
    with pytest.raises(ll.ArgumentError, match=r"^LLIR.picture\(around='h3'\): expected the id of one of this LLIR"):
        llir.picture(around="h3")
