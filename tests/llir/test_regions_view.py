"""The regions stage's views, and fused regions in the LLIR stage's views."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection

import pytest

import luminal_lab as ll
from luminal_lab.core.dtypes import DType
from luminal_lab.core.ops import FUSED_OPS, IN_REGION
from luminal_lab.core.shape_tracker import ShapeTracker
from luminal_lab.core.stage import STAGE_MIME
from luminal_lab.core.symbolic import Expr
from luminal_lab.llir import regions_view
from luminal_lab.llir import view as llir_view
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR, Kernel
from luminal_lab.llir.regions import Region, Regions, find_regions

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SVG_NS = "{http://www.w3.org/2000/svg}"
SEEDS = range(60)  # random genomes tried when looking for one with the regions a test wants
IO = "inputs a[4, 8] f32, b[4, 8] f32 | outputs [4, 8] f32"
FOUR = (Expr.num(4),)
FLAT = ShapeTracker.contiguous(FOUR)
REGION_OPS = ("FusionEnd", *IN_REGION)  # every kernel a region holds


def llirs(build: Callable[[ll.Graph], None], wanted: Callable[[LLIR, list[Region]], bool]) -> tuple[LLIR, LLIR]:
    """The first random genome's LLIR that ``wanted`` accepts and the smallest-term genome's LLIR
    of the graph ``build`` makes (the e-graph is closed afterwards)."""
    g = ll.Graph()
    build(g)
    comp = ll.compile(g)
    try:
        space = comp.choice_space()
        plain = extract(space.smallest_genome())
        for seed in SEEDS:
            fused = extract(space.random_genome(seed))
            if wanted(fused, find_regions(fused)):
                return fused, plain
    finally:
        comp.egraph.close()
    pytest.fail(f"no random genome in {SEEDS} has the regions wanted")


def sin_sqrt(g: ll.Graph) -> None:
    a, b = g.tensor((4, 8), name="a"), g.tensor((4, 8), name="b")
    (a + b).sin().sqrt().output("y")


def sin_sqrt_exp(g: ll.Graph) -> None:
    a, b, c = (g.tensor((4, 8), name=name) for name in "abc")
    ((a + b).sin().sqrt() * c).exp().output("y")


def chained(llir: LLIR, regions: list[Region]) -> bool:
    """Whether some region's start reads another region's end."""
    ends = {r.end for r in regions}
    by_id = {k.id: k for k in llir.kernels}
    return any(by_id[s].sources[0][0] in ends for r in regions for s in r.starts)


@pytest.fixture(scope="module")
def single() -> tuple[LLIR, LLIR]:
    """(a + b).sin().sqrt() fused into one region, and unfused."""
    return llirs(sin_sqrt, lambda llir, regions: [r.op_names(llir) for r in regions] == [["Add", "Sin", "Sqrt"]])


@pytest.fixture(scope="module")
def two() -> LLIR:
    """((a + b).sin().sqrt() * c).exp() as two regions, one reading the other's end."""
    return llirs(sin_sqrt_exp, chained)[0]


def fused_chain(n: int) -> LLIR:
    """``sqrt`` applied ``n`` times, each in its own region, built by hand: ``3 n + 2`` kernels."""
    kernels = [Kernel(0, "Input", (), FOUR, DType.F32, "x", "IR-0", (0,))]
    last = 0
    for _ in range(n):
        at = len(kernels)
        kernels += [Kernel(at, "FusionStart", ((last, FLAT),), FOUR, DType.F32, None, f"IR-{at}"),
                    Kernel(at + 1, "FusedSqrt", ((at, FLAT),), FOUR, DType.F32, None, f"IR-{at + 1}"),
                    Kernel(at + 2, "FusionEnd", ((at + 1, FLAT),), FOUR, DType.F32, None, f"IR-{at + 2}", (1,))]
        last = at + 2
    kernels.append(Kernel(len(kernels), "Output", ((last, FLAT),), FOUR, DType.F32, 0, f"IR-{len(kernels)}", (2,)))
    return LLIR(kernels, [kernels[-1].id], 7)


def shared_sin() -> LLIR:
    """sqrt(sin(a)) and exp(sin(a)) as two regions that both compute the same FusedSin k2."""
    k = [Kernel(0, "Input", (), FOUR, DType.F32, "a", "IR-0", (0,)),
         Kernel(1, "FusionStart", ((0, FLAT),), FOUR, DType.F32),
         Kernel(2, "FusedSin", ((1, FLAT),), FOUR, DType.F32),
         Kernel(3, "FusedSqrt", ((2, FLAT),), FOUR, DType.F32),
         Kernel(4, "FusionEnd", ((3, FLAT),), FOUR, DType.F32),
         Kernel(5, "FusedExp", ((2, FLAT),), FOUR, DType.F32),
         Kernel(6, "FusionEnd", ((5, FLAT),), FOUR, DType.F32),
         Kernel(7, "Output", ((4, FLAT),), FOUR, DType.F32, 0),
         Kernel(8, "Output", ((6, FLAT),), FOUR, DType.F32, 1)]
    return LLIR(k, [7, 8], 9)


def cluster_members(source: str) -> dict[str, set[str]]:
    """Kernel boxes declared in each cluster of a DOT source: cluster name -> kernel ids."""
    members: dict[str, set[str]] = {}
    current = None
    for line in (line.strip() for line in source.splitlines()):
        if line.startswith("subgraph cluster_"):
            current = line.split()[1]
            members[current] = set()
        elif line == "}":
            current = None
        elif current and line.startswith("k") and " [" in line:
            members[current].add(line.split()[0])
    return members


def kernel_ids(llir: LLIR, ops: Collection[str]) -> list[str]:
    """Ids of the kernels whose op is one of ``ops``, in order."""
    return [f"k{k.id}" for k in llir.kernels if k.op in ops]


# ---- summary -------------------------------------------------------------------------------
def test_summary_exact(single: tuple[LLIR, LLIR]):
    llir = single[0]
    stage = Regions.of(llir)
    assert stage.summary() == ("Regions: 1 fused region over 6 of 9 kernels | 1x [Add, Sin, Sqrt] 2 starts | "
                               f"genome {llir.genome_hash:016x}")
    assert repr(stage) == stage.summary()
    assert llir.summary() == ("LLIR: 9 kernels (FusedAdd 1, FusedSin 1, FusedSqrt 1, FusionEnd 1, FusionStart 2, "
                              f"Input 2, Output 1) | 1 fused region | {IO} | genome {llir.genome_hash:016x} | "
                              "not profiled")


def test_summary_without_regions(single: tuple[LLIR, LLIR]):
    plain = single[1]
    assert Regions.of(plain).summary() == f"Regions: no fused regions in 6 kernels | genome {plain.genome_hash:016x}"
    assert plain.summary() == (f"LLIR: 6 kernels (Add 1, Input 2, Output 1, Sin 1, Sqrt 1) | {IO} | "
                               f"genome {plain.genome_hash:016x} | not profiled")
    data = Regions.of(plain).to_json()
    assert (data["nodes"], data["edges"], data["links"]) == ([], [], {"llir": {}})
    assert data["meta"]["counts"]["regions"] == 0 and data["meta"]["signatures"] == []
    assert plain.to_json()["meta"]["regions"] == []
    assert "cluster_" not in llir_view.to_dot(plain).source


def test_summary_counts_regions_of_one_kind_together(monkeypatch):
    assert Regions.of(fused_chain(3)).summary() == ("Regions: 3 fused regions over 9 of 11 kernels | "
                                                    "3x [Sqrt] 1 start | genome 0000000000000007")
    assert Regions.of(shared_sin()).summary() == ("Regions: 2 fused regions over 6 of 9 kernels | "
                                                  "1x [Sin, Sqrt] 1 start, 1x [Sin, Exp] 1 start | "
                                                  "genome 0000000000000009")
    monkeypatch.setattr(regions_view, "MAX_SIGNATURES", 1)
    assert "| 1x [Sin, Sqrt] 1 start, … 1 more kind |" in Regions.of(shared_sin()).summary()


# ---- JSON ----------------------------------------------------------------------------------
def test_json_of_one_region(single: tuple[LLIR, LLIR]):
    llir = single[0]
    stage = Regions.of(llir)
    data = stage.to_json()
    assert data["stage"] == "regions" and data["summary"] == stage.summary()
    [node] = data["nodes"]
    region = stage[0]
    assert (node["id"], node["label"], node["ops"]) == ("r0", "[Add, Sin, Sqrt]", ["Add", "Sin", "Sqrt"])
    assert node["op_kernels"] == [f"k{o}" for o in region.ops] == kernel_ids(llir, FUSED_OPS)
    assert (node["end"], node["shape"], node["dtype"]) == (f"k{region.end}", ["4", "8"], "f32")
    assert len(node["starts"]) == 2
    inputs = {k.id: k.arg for k in llir.kernels if k.op == "Input"}
    assert sorted(inputs[int(s["source"][1:])] for s in node["starts"]) == ["a", "b"]
    assert all(s["contiguous"] and s["view"] == [] and s["strides"] == ["8*z", "z"] for s in node["starts"])
    assert [s["id"] for s in node["starts"]] == kernel_ids(llir, ("FusionStart",))
    assert data["edges"] == []
    assert data["links"] == {"llir": {"r0": kernel_ids(llir, REGION_OPS)}}
    assert data["meta"]["counts"] == {"regions": 1, "kernels": 6, "llir_kernels": 9, "starts": 2, "ops": 3, "edges": 0}
    assert data["meta"]["signatures"] == [{"ops": ["Add", "Sin", "Sqrt"], "starts": 2, "count": 1}]
    assert llir.to_json()["meta"]["regions"] == [data["links"]["llir"]["r0"]]
    json.dumps(data)


def test_json_edges_between_chained_regions(two: LLIR):
    stage = Regions.of(two)
    data = stage.to_json()
    assert len(data["nodes"]) >= 2
    by_id = {k.id: k for k in two.kernels}
    ends = {f"k{r.end}": f"r{i}" for i, r in enumerate(stage)}
    expected = {(ends[f"k{by_id[s].sources[0][0]}"], f"r{i}", f"k{s}")
                for i, r in enumerate(stage) for s in r.starts if f"k{by_id[s].sources[0][0]}" in ends}
    assert expected and {(e["source"], e["target"], e["start"]) for e in data["edges"]} == expected
    nodes = {n["id"]: n for n in data["nodes"]}
    for edge in data["edges"]:
        assert edge["id"] == f"{edge['source']}-{edge['target']}-{edge['start']}"
        assert edge["end"] == nodes[edge["source"]]["end"]
        assert edge["start"] in [s["id"] for s in nodes[edge["target"]]["starts"]]
    linked = data["links"]["llir"]
    assert sorted(k for ks in linked.values() for k in ks) == sorted(kernel_ids(two, REGION_OPS))
    assert two.to_json()["meta"]["regions"] == list(linked.values())


def test_json_of_a_hand_built_chain_and_a_shared_op():
    data = Regions.of(fused_chain(3)).to_json()
    assert [(e["id"], e["end"]) for e in data["edges"]] == [("r0-r1-k4", "k3"), ("r1-r2-k7", "k6")]
    shared = Regions.of(shared_sin()).to_json()
    assert shared["links"]["llir"] == {"r0": ["k1", "k2", "k3", "k4"], "r1": ["k1", "k2", "k5", "k6"]}
    assert shared["meta"]["counts"]["kernels"] == 6 and shared["edges"] == []


# ---- pictures ------------------------------------------------------------------------------
def test_llir_dot_draws_each_region_as_a_cluster(two: LLIR):
    source = llir_view.to_dot(two).source
    links = Regions.of(two).to_json()["links"]["llir"]
    assert cluster_members(source) == {f"cluster_{r}": set(kernels) for r, kernels in links.items()}
    assert "region r0: " in source and f"{len(links)} fused regions" in source


def test_shared_op_is_drawn_in_the_first_region():
    members = cluster_members(llir_view.to_dot(shared_sin()).source)
    assert members == {"cluster_r0": {"k1", "k2", "k3", "k4"}, "cluster_r1": {"k5", "k6"}}


@needs_dot
def test_svg_has_region_clusters(single: tuple[LLIR, LLIR]):
    llir = single[0]
    for svg in (Regions.of(llir).to_svg(), llir.to_svg()):
        assert svg is not None and "cluster_r0" in svg
        tree = ET.fromstring(svg)
        clusters = {g.get("id"): g for g in tree.iter(f"{SVG_NS}g") if "cluster" in g.get("class", "").split()}
        assert set(clusters) == {"r0"}
        assert "region r0: Add, Sin, Sqrt" in [t.text for t in clusters["r0"].iter(f"{SVG_NS}text")]


@needs_dot
def test_mimebundle_of_the_regions_stage(single: tuple[LLIR, LLIR]):
    stage = Regions.of(single[0])
    bundle = stage._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "image/svg+xml", STAGE_MIME}
    assert bundle["text/plain"] == stage.summary() and bundle[STAGE_MIME]["stage"] == "regions"


@needs_dot
def test_large_fused_llir_is_condensed():
    llir = fused_chain(150)
    assert len(llir.kernels) == 452 > llir_view.MAX_DRAWN_KERNELS
    assert "| 150 fused regions |" in llir.summary()
    svg = Regions.of(llir).to_svg()
    assert svg is not None and "cluster_r" not in svg
    assert "452 kernels, 150 fused regions; condensed (more than 400)" in svg
    assert len(llir.to_json()["meta"]["regions"]) == 150
    assert Regions.of(llir).summary().endswith("| 150x [Sqrt] 1 start | genome 0000000000000007")


def test_without_dot_the_regions_stage_has_no_picture(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` on the path
    stage = Regions.of(fused_chain(2))
    with pytest.warns(RuntimeWarning, match="regions picture is left out"):
        assert set(stage._repr_mimebundle_()) == {"text/plain", STAGE_MIME}
