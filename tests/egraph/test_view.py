"""The e-graph stage's views: summary line, JSON envelope, IR-level picture, mime bundle."""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator

import pytest

import luminal_lab as ll
from luminal_lab.core.stage import SCHEMA_VERSION, STAGE_MIME
from luminal_lab.draw import PICTURE_MIME
from luminal_lab.egraph import EGraph, Snapshot, view
from tests.helpers.stacks import stack

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SVG_NS = "{http://www.w3.org/2000/svg}"
RULESETS = "rulesets expr, dtype_prop, early, kernel_lower, algebra, cleanup"
# the second round adds the matmul alternative of the contraction (KernelMatmul, and its Op e-node)
SUMMARY = (f"E-graph: 116 e-classes (15 IR), 140 e-nodes (17 subsumed) | {RULESETS} | "
           "2 steps, last: round +11 e-nodes, 21 matches | step 2")


def softmax_of_matmul() -> ll.Graph:
    g = ll.Graph()
    x = g.tensor((4, 8), "x")
    w = g.tensor((8, 3), "w")
    (x @ w).softmax(-1).output("s")
    return g


def stepped(graph: ll.Graph, steps: int) -> EGraph:
    """The e-graph after ``steps`` rounds, without fusion or rolling: these tests pin the counts of the unfused
    schedule on the whole graph."""
    eg = ll.compile(graph, fusion=False, rolling=False).egraph
    for _ in range(steps):
        eg.step()
    return eg


@pytest.fixture(scope="module")
def egraph() -> Iterator[tuple[EGraph, Snapshot]]:
    """softmax(x @ w) after two steps, and the snapshot from before the second."""
    eg = stepped(softmax_of_matmul(), 1)
    before = eg.snapshot
    eg.step()
    yield eg, before
    eg.close()


def svg_tree(svg: str | None) -> ET.Element:
    assert svg is not None
    return ET.fromstring(svg)


def groups(tree: ET.Element, kind: str) -> dict[str, set[str]]:
    """SVG ``<g>`` elements of a Graphviz kind (node, cluster, edge): id -> their classes."""
    return {g.get("id"): set(g.get("class", "").split()) for g in tree.iter(f"{SVG_NS}g")
            if kind in g.get("class", "").split()}


# ---- summary -------------------------------------------------------------------------------
def test_summary_exact(egraph):
    eg, _ = egraph
    assert eg.summary() == SUMMARY
    assert repr(eg) == SUMMARY


def test_builds_are_identical_and_summary_tracks_steps(egraph):
    eg, _ = egraph
    other = ll.compile(softmax_of_matmul(), fusion=False).egraph
    try:
        assert other.summary() == f"E-graph: 86 e-classes (15 IR), 86 e-nodes | {RULESETS} | 0 steps | built"
        other.step()
        assert other.summary().endswith("1 step, last: round +43 e-nodes, 69 matches | step 1")
        other.step()
        assert other.summary() == eg.summary()
        assert other.to_json() == eg.to_json()
        if shutil.which("dot"):
            assert other.to_svg() == eg.to_svg()
    finally:
        other.close()


# ---- JSON ----------------------------------------------------------------------------------
def test_json_envelope(egraph):
    eg, _ = egraph
    data = eg.to_json()
    assert json.loads(json.dumps(data)) == data
    assert (data["stage"], data["schema"], data["summary"]) == ("egraph", SCHEMA_VERSION, SUMMARY)
    ids = [n["id"] for n in data["nodes"]]
    assert len(ids) == len(set(ids)) == 116 + 140
    classes = {n["id"]: n for n in data["nodes"] if n["kind"] == "eclass"}
    enodes = {n["id"]: n for n in data["nodes"] if n["kind"] == "enode"}
    assert sum(c["enodes"] for c in classes.values()) == len(enodes) == 140
    assert all(e["source"] in enodes and e["target"] in classes for e in data["edges"])
    assert len({e["id"] for e in data["edges"]}) == len(data["edges"])
    meta = data["meta"]
    assert meta["counts"]["eclasses"] == 116 and meta["counts"]["ir_eclasses"] == 15
    assert meta["counts"]["subsumed"] == sum(n["subsumed"] for n in enodes.values()) == 17
    assert meta["rulesets"] == eg.rulesets and meta["status"] == "step 2" and meta["steps"] == 2
    last = meta["last_step"]
    assert last["total_matches"] == 21 and sum(last["matches"].values()) == 21
    assert last["matches"]["lower-Mul"] == 4 and last["matches"]["matmul-of-mul-sum"] == 1
    assert (last["enodes_before"], last["enodes_after"]) == (129, 140)
    assert meta["capped"] is None and "overview" not in meta
    assert {n["id"] for n in enodes.values() if n["added_in_last_step"]} == set(eg.history[-1].added_enodes)
    output = eg.eclass_of(next(n for n in eg.graph.nodes if n.op == ll.Op.OUTPUT))
    assert classes[output.id]["sort"] == "IR" and classes[output.id]["label"] == "Output 0"
    assert any(c["sort"] == "EList" and c["label"] == "[4, 3]" for c in classes.values())


def test_json_ir_fields(egraph):
    eg, _ = egraph
    enodes = {n["id"]: n for n in eg.to_json()["nodes"] if n["kind"] == "enode"}
    add = eg.eclass_of(next(n for n in eg.graph.nodes if n.op == ll.Op.ADD))
    ops = [enodes[n.id] for n in add.nodes]
    assert sorted(n["label"] for n in ops) == ["Add", "Add", "KernelAdd", "KernelAdd"]
    inputs = {tuple(n["ir"]["inputs"]) for n in ops}
    assert len(inputs) == 2 and {tuple(reversed(i)) for i in inputs} == inputs  # a + b and b + a
    assert all(n["eclass"] == add.id and n["op"] == "Op" for n in ops)


def test_json_links_match_eclass_of(egraph):
    eg, _ = egraph
    links = eg.to_json()["links"]["hlir"]
    live = eg.graph.live_nodes()
    for node in live:
        assert f"h{node.id}" in links[eg.eclass_of(node).id]
    assert sum(len(ids) for ids in links.values()) == len(live)


def test_json_is_capped_for_large_egraphs(egraph, monkeypatch):
    eg, _ = egraph
    monkeypatch.setattr(view, "MAX_JSON_ENODES", 50)
    data = eg.to_json()
    capped = data["meta"]["capped"]
    ir_enodes = sum(len(c.nodes) for c in eg.eclasses if c.sort == "IR")
    assert capped["left_out_eclasses"] == 116 - 15 and capped["left_out_enodes"] == 140 - ir_enodes
    classes = [n for n in data["nodes"] if n["kind"] == "eclass"]
    assert len(classes) == 15 and {c["sort"] for c in classes} == {"IR"}
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in data["edges"])
    assert len(data["links"]["hlir"]) == 15


# ---- picture -------------------------------------------------------------------------------
@needs_dot
def test_svg_clusters_nodes_and_highlights(egraph):
    eg, before = egraph
    tree = svg_tree(eg.to_svg())
    clusters, nodes = groups(tree, "cluster"), groups(tree, "node")
    ir = [c for c in eg.eclasses if c.sort == "IR"]
    assert {c.id for c in ir} == set(clusters)
    assert {n.id for c in ir for n in c.nodes} == set(nodes)
    assert all("eclass" in classes for classes in clusters.values())
    # an Op is new when its Op e-node or its OpKind e-node is new
    added = set(eg.history[-1].added_enodes)
    kinds = {c.id: {n.id for n in c.nodes} for c in eg.eclasses if c.sort == "OpKind"}
    expected = {n.id for c in ir for n in c.nodes
                if n.id in added or (n.op == "Op" and kinds[n.children[0]] & added)}
    assert {nid for nid, classes in nodes.items() if "added" in classes} == expected
    assert len(expected) == 6 and {"KernelMul", "KernelAdd", "KernelMatmul"} == {
        eg.snapshot.classes[n.children[0]].nodes[0].op for c in ir for n in c.nodes if n.id in expected}
    subsumed = {n.id for c in ir for n in c.nodes if n.subsumed}
    assert {nid for nid, classes in nodes.items() if "subsumed" in classes} == subsumed
    # what the last step added is what the snapshot before it lacks
    old = {(n.op, n.literals, n.children) for c in before.classes.values() for n in c.nodes}
    assert added == {n.id for c in eg.eclasses for n in c.nodes if (n.op, n.literals, n.children) not in old}
    texts = {g.get("id"): " ".join(g.itertext()) for g in tree.iter(f"{SVG_NS}g")}
    for node in eg.graph.live_nodes():  # each cluster's label names its HLIR nodes
        assert f"h{node.id}" in texts[eg.eclass_of(node).id]


@needs_dot
def test_picture_around_an_eclass(egraph):
    eg, _ = egraph
    add = eg.eclass_of(next(n for n in eg.graph.nodes if n.op == ll.Op.ADD))
    picture = eg.picture(around=add.id, depth=1)
    clusters = groups(svg_tree(picture.to_svg()), "cluster")
    assert "focus" in clusters[add.id]
    assert 2 < len(clusters) < 15 and "left out" in picture.caption
    bundle = picture._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml", PICTURE_MIME}
    assert bundle[PICTURE_MIME] == {"schema": 1, "caption": picture.caption, "what": "e-graph"}
    inlined = svg_tree(bundle["image/svg+xml"])  # scaled down to its output's width where a front end inlines it
    assert inlined.get("style") == "max-width:100%;height:auto" and inlined.get("viewBox")
    kind = add.nodes[0].children[0]  # an OpKind e-class: pictured through the IR e-class using it
    assert "focus" in groups(svg_tree(eg.picture(around=kind, depth=0).to_svg()), "cluster")[add.id]
    with pytest.raises(KeyError):
        eg.picture(around="IR-999999")


@needs_dot
def test_mimebundle(egraph):
    eg, _ = egraph
    bundle = eg._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml", STAGE_MIME}
    assert bundle["text/plain"] == SUMMARY and bundle[STAGE_MIME]["stage"] == "egraph"
    assert bundle["image/svg+xml"].startswith("<svg")


@needs_dot
def test_large_egraphs_get_a_capped_overview():
    g = ll.Graph()
    x = g.tensor((4,), "x")
    for _ in range(150):
        x = (x + 1.0).sqrt()
    x.output("y")
    eg = stepped(g, 0)
    try:
        for focus in ("the outputs and what they read", "the last step touched"):
            start = time.monotonic()
            svg = eg.to_svg()
            data = eg.to_json()
            assert time.monotonic() - start < 5
            tree = svg_tree(svg)
            clusters = groups(tree, "cluster")
            assert 0 < len(clusters) <= view.FOCUS_CLASSES
            assert any("stub" in classes for classes in groups(tree, "node").values())  # read, but not drawn
            assert tree.find(f".//{SVG_NS}g[@id='overview']") is not None
            caption = " ".join(tree.find(f"{SVG_NS}g").find(f"{SVG_NS}text").itertext())
            assert focus in caption
            assert caption.endswith(f"{len(clusters)} of 303 IR e-classes drawn, {303 - len(clusters)} left out")
            assert set(data["meta"]["overview"]["shown"]) == set(clusters)
            assert data["meta"]["overview"]["left_out"] == 303 - len(clusters)
            eg.step()
    finally:
        eg.close()


@needs_dot
def test_overview_follows_the_last_step():
    g = ll.Graph()
    x = g.tensor((4,), "x")
    ys = [(x * float(i + 2)).sqrt() for i in range(100)]
    while len(ys) > 1:
        ys = [ys[i] + ys[i + 1] if i + 1 < len(ys) else ys[i] for i in range(0, len(ys), 2)]
    ys[0].output("y")
    eg = stepped(g, 2)
    try:
        tree = svg_tree(eg.to_svg())
        clusters, nodes = groups(tree, "cluster"), groups(tree, "node")
        assert len(clusters) == view.FOCUS_CLASSES
        assert sum("touched" in classes for classes in clusters.values()) >= view.FOCUS_CLASSES // 3
        assert any("added" in classes for classes in nodes.values())
    finally:
        eg.close()


def test_without_dot_summary_and_json_remain(egraph, tmp_path, monkeypatch):
    eg, _ = egraph
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` on the path
    with pytest.warns(RuntimeWarning, match="not installed; the e-graph picture"):
        bundle = eg._repr_mimebundle_()
    assert set(bundle) == {"text/plain", STAGE_MIME}
    assert bundle["text/plain"] == SUMMARY and bundle[STAGE_MIME] == eg.to_json()
    with pytest.warns(RuntimeWarning):
        assert eg.to_svg() is None
        assert set(eg.picture()._repr_mimebundle_()) == {"text/plain"}
    assert eg.picture().dot.source.startswith("digraph egraph {")


def test_json_flags_the_rolled_layer():
    """Rolled, each e-class says whether all its HLIR nodes are in the layer, as the HLIR stage's JSON flags them."""
    comp = ll.compile(stack(3))
    assert comp.rolling is not None and comp.rolling.copies == 3
    eg = comp.egraph
    try:
        data = eg.to_json()
        in_layer = {n["id"] for n in comp.hlir.to_json()["nodes"] if n["layer"]}
        classes = [n for n in data["nodes"] if n["kind"] == "eclass"]
        flags = {c["id"]: c["layer"] for c in classes}
        assert flags == {c["id"]: bool(c["hlir"]) and set(c["hlir"]) <= in_layer for c in classes}
        assert 0 < sum(flags.values()) < sum(bool(c["hlir"]) for c in classes), "both inside and outside the layer"
        assert all("layer" not in n for n in data["nodes"] if n["kind"] == "enode")
        assert data["meta"]["layer"] == {"copies": 3}
    finally:
        eg.close()
    flat = ll.compile(stack(3), rolling=False).egraph
    try:
        data = flat.to_json()
        assert "layer" not in data["meta"] and all("layer" not in n for n in data["nodes"])
    finally:
        flat.close()


# ---- the picture folded by HLIR node ---------------------------------------------------------
@pytest.fixture(scope="module")
def stacked() -> Iterator[EGraph]:
    """A rolled stack of two residual blocks (RMSNorm, a ReLU MLP), saturated with fusion: 33 HLIR nodes."""
    eg = ll.compile(stack(2)).egraph
    eg.saturate()
    yield eg
    eg.close()


def hlir_group_of(eg: EGraph) -> dict[str, str]:
    """Each IR e-class's group, worked out here: its first HLIR node, or (a FusionStart a fusion rule made, with no
    HLIR node) the group of the one e-class it reads."""
    ir = view.IRLevel(eg)
    group = {cid: f"h{eg.snapshot.classes[cid].hlir[0]}" for cid in ir.classes if eg.snapshot.classes[cid].hlir}
    for cid, nodes in ir.classes.items():
        if cid not in group:
            assert [n.label for n in nodes] == ["FusionStart"] and len(nodes[0].inputs) == 1, (cid, nodes)
            group[cid] = group[nodes[0].inputs[0]]
    return group


def merged_reads(eg: EGraph, group: dict[str, str], expanded: set[str], drawn: set[str] = frozenset()) -> Counter:
    """(what is read, who reads) -> reads, as a folded picture merges them: between two folded groups, from a folded
    group to an e-node of an expanded one (of those ``drawn``), from an e-class of an expanded group to a folded
    group."""
    ir = view.IRLevel(eg)
    reads: Counter = Counter()
    for cid, nodes in ir.classes.items():
        for n in nodes:
            if group[cid] in expanded and n.enode.id not in drawn:
                continue
            for source in n.inputs:
                if group[source] == group[cid] or {group[source], group[cid]} <= expanded:
                    continue
                tail = source if group[source] in expanded else f"group-{group[source]}"
                head = n.enode.id if group[cid] in expanded else f"group-{group[cid]}"
                reads[(tail, head)] += 1
    return reads


def edge_labels(tree: ET.Element) -> dict[str, str]:
    """SVG edge id -> its label text ('' when none)."""
    return {g.get("id"): " ".join(t.text or "" for t in g.iter(f"{SVG_NS}text")).strip()
            for g in tree.iter(f"{SVG_NS}g") if "edge" in g.get("class", "").split()}


@needs_dot
def test_picture_folded_by_hlir_node(stacked):
    eg = stacked
    group = hlir_group_of(eg)
    picture = eg.picture(fold="hlir")
    tree = svg_tree(picture.to_svg())
    nodes, clusters = groups(tree, "node"), groups(tree, "cluster")
    assert clusters == {}, "folded whole, no e-class is drawn"
    assert set(nodes) == {f"group-h{k}" for k in range(33)}, "one box per HLIR node (the rolled stack has 33)"
    assert all(classes >= {"node", "group"} for classes in nodes.values())
    assert picture.caption == "E-graph after round #4: IR e-classes folded by HLIR node; 33 groups of 123 IR e-classes"
    texts = {g.get("id"): "".join(t.text or "" for t in g.iter(f"{SVG_NS}text")) for g in tree.iter(f"{SVG_NS}g")}
    sizes = Counter(group.values())
    enodes = Counter()
    for cid, nodes in view.IRLevel(eg).classes.items():
        enodes[group[cid]] += len(nodes)
    assert sum(sizes.values()) == 123 and sizes["h19"] == 5
    for key, size in sizes.items():
        node = next(n for n in eg.graph.nodes if f"h{n.id}" == key)
        assert texts[f"group-{key}"].startswith(f"{key} {node.label}"), texts[f"group-{key}"]
        assert f"· {size} e-class{'' if size == 1 else 'es'}{enodes[key]} e-node" in texts[f"group-{key}"]
    assert texts["group-h19"].startswith("h19 SumReduce axis=2 (matmul) · 5 e-classes22 e-nodes: ")
    # the reads between groups: one merged edge per pair of groups, labelled with how many reads it stands for
    reads = merged_reads(eg, group, set())
    labels = edge_labels(tree)
    assert set(labels) == {f"{tail}-{head}" for tail, head in reads} and len(labels) == 39
    assert all(groups(tree, "edge")[e] == {"edge", "merged"} for e in labels)
    for (tail, head), count in reads.items():
        assert labels[f"{tail}-{head}"] == (f"×{count}" if count > 1 else ""), (tail, head)
    assert reads[("group-h18", "group-h19")] == 5  # the matmul's SumReduce e-classes read its Mul's


def test_the_json_gives_each_eclass_the_group_the_folded_picture_draws_it_in(stacked):
    """The extension folds an e-graph by reading ``group`` (computed once, here): an IR e-class's is the picture's;
    an expression, list or view joins the first IR e-class (in HLIR order) that reaches it."""
    eg = stacked
    ir, classes = view.IRLevel(eg), eg.snapshot.classes
    group = {n["id"]: n.get("group") for n in eg.to_json()["nodes"] if n["kind"] == "eclass"}
    assert {cid: group[cid] for cid in ir.classes} == hlir_group_of(eg)
    first = next(iter(ir.classes))
    reached, todo = set(), [c for n in classes[first].nodes for c in n.children]
    while todo:
        cid = todo.pop()
        if cid not in ir.classes and cid not in reached:
            reached.add(cid)
            todo.extend(c for n in classes[cid].nodes for c in n.children)
    assert reached and all(group[cid] == group[first] for cid in reached)
    assert all(g is not None for cid, g in group.items() if classes[cid].sort != "IR")


@needs_dot
def test_picture_folded_with_groups_expanded(stacked):
    eg = stacked
    group = hlir_group_of(eg)
    ir = view.IRLevel(eg)
    picture = eg.picture(fold="hlir", expand=["h19", "h9"])
    assert picture.caption.endswith("33 groups of 123 IR e-classes, h19, h9 expanded")
    tree = svg_tree(picture.to_svg())
    nodes, clusters = groups(tree, "node"), groups(tree, "cluster")
    inside = {cid for cid, key in group.items() if key in ("h19", "h9")}
    assert len(inside) == 9
    assert set(clusters) == {"group-h19", "group-h9", *inside}
    assert clusters["group-h19"] == {"cluster", "group", "expanded"}
    assert {f"group-h{k}" for k in range(33)} - set(nodes) == {"group-h19", "group-h9"}
    drawn = {n for n in nodes if not n.startswith("group-")}
    more = {f"{cid}.more" for cid in inside if len(ir.classes[cid]) > view.MAX_PER_CLASS}
    assert more and more <= drawn
    assert drawn - more <= {n.enode.id for cid in inside for n in ir.classes[cid]}
    assert len(drawn - more) == sum(min(len(ir.classes[cid]), view.MAX_PER_CLASS) for cid in inside)

    def box(cid: str) -> tuple[float, float, float, float]:
        g = tree.find(f".//{SVG_NS}g[@id='{cid}']")
        points = [tuple(map(float, p.split(","))) for p in g.find(f".//{SVG_NS}path").get("d")[1:].replace("C", " ")
                  .split() if "," in p]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        return min(xs), min(ys), max(xs), max(ys)

    for cid in inside:  # each e-class cluster lies inside its group's cluster
        outer, inner = box(f"group-{group[cid]}"), box(cid)
        assert outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] and inner[3] <= outer[3], cid
    # reads merged where a folded group is at one end; e-node to e-class edges between expanded groups
    reads = merged_reads(eg, group, {"h19", "h9"}, drawn)
    edges = groups(tree, "edge")
    assert {e for e, classes in edges.items() if "merged" in classes} == {f"{t}-{h}" for t, h in reads}
    within = {f"{n.enode.id}-{s}-{i}" for cid in inside for n in ir.classes[cid] if n.enode.id in drawn
              for i, s in enumerate(n.inputs) if group[s] in ("h19", "h9")}
    assert {e for e, classes in edges.items() if "merged" not in classes} == within and within
    assert any(t in inside for t, _ in reads) and any(h in drawn for _, h in reads)


def test_picture_fold_arguments(stacked):
    eg = stacked
    cases = {
        "fold='x'": dict(fold="x"),
        "expand=['h5']): expected None unless fold=\"hlir\"": dict(expand=["h5"]),
        "expand='h5'): expected a list of group ids": dict(fold="hlir", expand="h5"),
        "expand=['h99']): expected ids of this picture's groups; h99 is not one (the groups are h0, h1,":
            dict(fold="hlir", expand=["h99"]),
        "fold='hlir'): expected None when around is given": dict(fold="hlir", around="IR-1"),
    }
    for first_line, kwargs in cases.items():
        with pytest.raises(ll.ArgumentError) as error:
            eg.picture(**kwargs)
        assert str(error.value).splitlines()[0].startswith(f"EGraph.picture({first_line}"), str(error.value)
