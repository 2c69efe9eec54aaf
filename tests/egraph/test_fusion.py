"""Fusion: the marker rules, the regions a genome extracts, and fused numbers against unfused and torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal_lab as ll
from luminal_lab.core.arrays import to_numpy
from luminal_lab.core.dtypes import DType
from luminal_lab.core.dtypes import to_torch as to_torch_dtype
from luminal_lab.core.errors import Refused
from luminal_lab.core.ops import FUSED_OPS, IN_REGION
from luminal_lab.core.shape_tracker import ShapeTracker, numel
from luminal_lab.core.symbolic import Expr
from luminal_lab.llir.genome import extract
from luminal_lab.llir.llir import LLIR, Kernel
from luminal_lab.llir.regions import find_regions
from luminal_lab.runtime.cpu import CPURuntime
from tests.helpers.models import LlamaBlock, llama_inputs

SHAPE = (8, 16)


def graph(build, names="abc", shape=SHAPE, dtype=ll.f32):
    """A graph of ``build(*inputs)`` over inputs named by ``names``, with output ``y``."""
    g = ll.Graph()
    inputs = [g.tensor(shape, name=n, dtype=dtype) for n in names]
    build(*inputs).output("y")
    return g


def fused_regions(g: ll.Graph):
    comp = ll.compile(g)
    llir = extract(comp.choice_space().fused_genome())
    return comp, llir, find_regions(llir)


def fusion_enodes(comp: ll.Compiled) -> int:
    return sum(1 for c in comp.egraph.eclasses for n in c.nodes if n.op == "FusionEnd")


def op_names(llir, region) -> list[str]:
    return region.op_names(llir)


def start_sources(llir, region) -> list[str]:
    kernels = {k.id: k for k in llir.kernels}
    return sorted(kernels[kernels[s].sources[0][0]].label for s in region.starts)


# ---- structure -----------------------------------------------------------------------------------
@pytest.mark.parametrize("chain", [("sin", "sqrt"), ("sin", "sqrt", "exp2"), ("exp2", "sin", "reciprocal", "log2")])
def test_unary_chain_forms_one_region(chain):
    def build(a):
        for op in chain:
            a = getattr(a, op)()
        return a
    _, llir, regions = fused_regions(graph(build, "a"))
    assert len(regions) == 1
    assert op_names(llir, regions[0]) == [{"reciprocal": "Recip"}.get(op, op.capitalize()) for op in chain]
    assert start_sources(llir, regions[0]) == ["Input a"]


def test_add_then_mul_is_one_region_with_three_starts():
    _, llir, regions = fused_regions(graph(lambda a, b, c: (a + b) * c))
    (region,) = regions
    assert op_names(llir, region) == ["Add", "Mul"]
    assert start_sources(llir, region) == ["Input a", "Input b", "Input c"]


def test_binary_to_unary_and_unary_to_binary_fuse():
    _, llir, regions = fused_regions(graph(lambda a, b: (a + b).sin(), "ab"))
    assert [op_names(llir, r) for r in regions] == [["Add", "Sin"]]
    _, llir, regions = fused_regions(graph(lambda a, b: a.sin() * b, "ab"))
    assert [op_names(llir, r) for r in regions] == [["Sin", "Mul"]]
    assert start_sources(llir, regions[0]) == ["Input a", "Input b"]


def test_silu_gate_is_one_region_whatever_constants_it_reads():
    """silu(a) * b from torch: exp(-a) as Exp2(a * -1 * log2 e) reads more constants than a split into two
    regions would, yet the fused genome counts kernels, not leaves, and takes one region of every op."""
    comp = ll.compile(lambda a, b: torch.nn.functional.silu(a) * b, (torch.rand(SHAPE), torch.rand(SHAPE)))
    llir = extract(comp.choice_space().fused_genome())
    (region,) = find_regions(llir)
    assert sorted(op_names(llir, region)) == ["Add", "Exp2", "Mul", "Mul", "Mul", "Mul", "Recip"]
    assert start_sources(llir, region).count("Input a") == 1


def test_diamond_is_one_region_with_one_end():
    def build(a):
        x = a.sin()
        return x.sqrt() + x.exp2()
    _, llir, regions = fused_regions(graph(build, "a"))
    (region,) = regions
    assert sorted(op_names(llir, region)) == ["Add", "Exp2", "Sin", "Sqrt"]  # Sin once, read twice
    assert len(region.starts) == 1
    assert sum(1 for k in llir.kernels if k.op == "FusionEnd") == 1


def test_identical_regions_have_identical_bodies():
    _, llir, regions = fused_regions(graph(lambda a, b, c: ((a + b).sin() + (b + c).sin()).sum(1), "abc"))
    bodies = {r.body(llir).steps for r in regions}
    assert len(regions) >= 1 and len(bodies) <= len(regions)
    _, llir2, regions2 = fused_regions(graph(lambda a, b: (a + b).sin().sqrt(), "ab"))
    _, llir3, regions3 = fused_regions(graph(lambda c, d: (c + d).sin().sqrt(), "cd"))
    assert regions2[0].body(llir2).steps == regions3[0].body(llir3).steps


# ---- what does not fuse --------------------------------------------------------------------------
def test_permuted_operand_does_not_fuse():
    comp = ll.compile(graph(lambda a, b: a.sin().permute((1, 0)) + b, "ab", shape=(8, 8)))
    comp.choice_space()
    assert fusion_enodes(comp) == 0
    control = ll.compile(graph(lambda a, b: a.sin() + b, "ab", shape=(8, 8)))
    control.choice_space()
    assert fusion_enodes(control) > 0


def test_reduction_in_the_middle_fuses_as_a_row_region():
    _, llir, regions = fused_regions(graph(lambda a: a.sin().sum(1).sqrt(), "a"))
    assert [op_names(llir, r) for r in regions] == [["Sin", "SumReduce", "Sqrt"]]
    assert regions[0].body(llir).rows == SHAPE[:1]


def test_lone_binary_does_not_fuse():
    comp = ll.compile(graph(lambda a, b: a + b, "ab"))
    comp.choice_space()
    assert fusion_enodes(comp) == 0


def test_fusion_off_offers_no_regions():
    comp = ll.compile(graph(lambda a, b: (a + b).sin().sqrt(), "ab"), fusion=False)
    comp.choice_space()
    assert fusion_enodes(comp) == 0
    assert not any(r.startswith("fusion") for r in comp.egraph.rulesets)
    assert len(comp.regions) == 0


def test_cycles_from_identities_do_not_grow_regions_forever():
    """``x * 1 = x`` and ``log2(exp2(x)) = x`` put ops into their operands' e-classes; fusion still saturates."""
    def build(a):
        return ((a.sin() * 1.0).exp2().log2() + 0.0).sqrt()
    comp = ll.compile(graph(build, "a"))
    saturation = comp.egraph.saturate()
    assert saturation.saturated, saturation


# ---- numbers -------------------------------------------------------------------------------------
def silu_gated(a, b):
    return a * ((a * -1.0).exp() + 1.0).reciprocal() * b


CASES = {
    "add-sin-sqrt": (lambda a, b: (a + b).sin().sqrt(), lambda a, b: (a + b).sin().sqrt(), "ab"),
    "silu-gated": (silu_gated, lambda a, b: torch.nn.functional.silu(a) * b, "ab"),
    "diamond": (lambda a: a.sin().sqrt() + a.sin().exp2(), lambda a: a.sin().sqrt() + torch.exp2(a.sin()), "a"),
    "three-starts": (lambda a, b, c: (a + b) * c, lambda a, b, c: (a + b) * c, "abc"),
    "transposed-start": (lambda a, b: (a.permute((1, 0)) + b).sin(), lambda a, b: (a.T + b).sin(), "ab"),
    # a region computes element by element in row-major order, through reshapes of its values
    "reshaped-inside": (lambda a, b: (a * b + 2.0).reciprocal().reshape((256,)).sin() + b.reshape((256,)),
                        lambda a, b: (a * b + 2).reciprocal().reshape(256).sin() + b.reshape(256), "ab"),
    "transposed-then-reshaped": (lambda a, b: (a.permute((1, 0)) + b).sin().reshape((4, 64)).sqrt(),
                                 lambda a, b: (a.T + b).sin().reshape(4, 64).sqrt(), "ab"),
}


@pytest.mark.parametrize("dtype", [ll.f32, ll.f16, ll.bf16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_matches_unfused_and_torch(case, dtype):
    build, reference, names = CASES[case]
    shape = (16, 16)
    comp = ll.compile(graph(build, names, shape=shape, dtype=dtype))
    space = comp.choice_space()
    fused, unfused = extract(space.fused_genome()), extract(space.unfused_genome())
    assert find_regions(fused) and not find_regions(unfused)
    generator = torch.Generator().manual_seed(0)
    inputs = {n: (torch.rand(shape, generator=generator) * 2 - 1).to(to_torch_dtype(dtype)) for n in names}
    arrays = {n: to_numpy(t) for n, t in inputs.items()}
    expected = reference(*(inputs[n].float() for n in names)).numpy()
    tolerance = {ll.f32: 1e-5, ll.f16: 4e-3, ll.bf16: 3e-2}[dtype]
    results = [np.asarray(CPURuntime(llir).run(arrays)[0], np.float32) for llir in (fused, unfused)]
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance, equal_nan=True)


@pytest.mark.parametrize("case", ["reshaped-inside", "transposed-then-reshaped"])
def test_regions_through_reshapes_match_the_reference_in_every_genome(case):
    """A fused op may read its producer in another shape (a reshape of a contiguous value): the region's starts
    then read in the shape of its end (through a scratch copy when a start's own view cannot be reshaped)."""
    build, _, names = CASES[case]
    comp = ll.compile(graph(build, names, shape=(16, 16)))
    space = comp.choice_space()
    fused = extract(space.fused_genome())
    kernels = {k.id: k for k in fused.kernels}
    assert any(kernels[s].shape != kernels[r.end].shape for r in find_regions(fused) for s in r.starts)
    arrays = {n: np.random.default_rng(3).uniform(-1, 1, (16, 16)).astype(np.float32) for n in names}
    (expected,) = comp.run_reference(*(arrays[n] for n in names)).numpy()[None]
    runs = 0
    for llir in [fused, *(extract(space.random_genome(seed)) for seed in range(16))]:
        (out,) = CPURuntime(llir).run(arrays)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, equal_nan=True)
        runs += bool(find_regions(llir))
    assert runs >= 8


def test_fused_sin_takes_libm_beyond_the_fast_range():
    comp = ll.compile(graph(lambda a, b: (a + b).sin().sqrt(), "ab", shape=(4, 8)))
    llir = extract(comp.choice_space().fused_genome())
    a = np.linspace(-3e7, 3e7, 32, dtype=np.float32).reshape(4, 8)
    b = np.ones((4, 8), np.float32)
    (out,) = CPURuntime(llir).run({"a": a, "b": b})
    with np.errstate(invalid="ignore"):  # sqrt of a negative sine is nan on both sides
        expected = np.sqrt(np.sin((a + b).astype(np.float64))).astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_compiled_runs_a_fused_genome_and_shows_its_regions():
    comp = ll.compile(graph(lambda a, b: (a + b).sin().sqrt(), "ab"))
    comp._genome = comp.choice_space().fused_genome()
    assert [r.op_names(comp.llir()) for r in comp.regions] == [["Add", "Sin", "Sqrt"]]
    a, b = torch.rand(SHAPE), torch.rand(SHAPE)
    torch.testing.assert_close(comp.run(a, b), (a + b).sin().sqrt())


# ---- invariants over random genomes --------------------------------------------------------------
def check_region_invariants(llir):
    kernels = {k.id: k for k in llir.kernels}
    readers: dict[int, list[int]] = {k.id: [] for k in llir.kernels}
    for k in llir.kernels:
        for source, _ in k.sources:
            readers[source].append(k.id)
    regions = find_regions(llir)
    assert len(regions) == sum(1 for k in llir.kernels if k.op == "FusionEnd")
    for region in regions:
        members = set(region.ops) | set(region.starts)
        # exactly one end: the one op no other op of the region reads, read by the region's FusionEnd
        sinks = [o for o in region.ops if not any(r in members for r in readers[o])]
        assert sinks == [kernels[region.end].sources[0][0]]
        # values inside leave only through an end
        for kid in members:
            assert all(kernels[r].op in IN_REGION or kernels[r].op == "FusionEnd" for r in readers[kid])
        # the starts are exactly the distinct outside reads
        reads = [kernels[s].sources[0] for s in region.starts]
        assert all(kernels[src].op not in IN_REGION for src, _ in reads)
        assert len({(src, view) for src, view in reads}) == len(reads)
        assert all(kernels[o].op in FUSED_OPS for o in region.ops)
        # two ops at least, but for a lone reduction (a row region that epilogues may grow from)
        assert len(region.ops) >= 2 or FUSED_OPS[kernels[region.ops[0]].op] in ("SumReduce", "MaxReduce")
    return len(regions)


def test_region_invariants_and_numbers_across_random_genomes():
    model = LlamaBlock(32, 2, 64, 8).eval()
    (x,) = llama_inputs(1, 8, 32)
    comp = ll.compile(model, (x,))
    space = comp.choice_space()
    expected = model(x).detach().numpy()
    regions, runs = 0, 0
    for seed in range(12):
        try:
            llir = extract(space.random_genome(seed))
        except Refused:
            continue
        regions += check_region_invariants(llir)
        (out,) = CPURuntime(llir).run({comp.signature.inputs[0]: x.numpy()}, comp.graph.weights)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        runs += 1
    assert runs >= 8 and regions >= 20


def test_setting_the_genome_makes_run_and_the_stages_use_it():
    a, b = np.random.default_rng(5).uniform(-1, 1, (2, *SHAPE)).astype(np.float32)
    comp = ll.compile(graph(lambda a, b: (a + b).sin().sqrt(), "ab"))
    assert len(comp.regions) == 0, "before a search, the smallest genome: nothing fused"
    comp.genome = comp.choice_space().fused_genome()
    assert [r.op_names(comp.llir()) for r in comp.regions] == [["Add", "Sin", "Sqrt"]]
    assert any(comp.cuda.region(k) for k in comp.cuda.kernels)
    y = comp.run(a, b)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(y.numpy(), np.sqrt(np.sin(a + b)), rtol=1e-6, atol=1e-6)
    other = ll.compile(graph(lambda a, b: (a + b).sin().sqrt(), "ab"))
    with pytest.raises(ll.LuminalError, match=r"Compiled.genome\(genome=<Genome .*belongs to another program"):
        comp.genome = other.choice_space().fused_genome()


def _query(rule_text: str) -> str:
    """The query of a ``(rule (query...) (actions...) ...)`` command: its first balanced group."""
    start = rule_text.index("(", len("(rule"))
    depth = 0
    for at in range(start, len(rule_text)):
        depth += {"(": 1, ")": -1}.get(rule_text[at], 0)
        if depth == 0:
            return rule_text[start:at + 1]
    raise ValueError(f"unbalanced rule: {rule_text[:80]}")


def test_no_fusion_query_joins_two_lists_on_inil() -> None:
    """A query naming ``(INil)`` in two lists lets egglog join every one-input list with every other first (6 s an
    iteration of one rule on a 13k-node e-graph): each matched list ends in a tail variable of its own."""
    from luminal_lab.egraph.fusion import fusion_rules

    shared = [rule.name for rule in fusion_rules() if _query(rule.text).count("(INil)") > 1]
    assert not shared, shared


def test_fusion_rules_are_written_over_classes_of_kernel() -> None:
    """One facts rule per fusing op, and the rules over classes of kernel do not grow with the op list."""
    from luminal_lab.core.ops import KERNEL_OPS
    from luminal_lab.egraph.fusion import class_rules, fact_rules

    assert sorted(rule.name for rule in fact_rules()) == sorted(f"facts-{op.name}" for op in KERNEL_OPS if op.fuses)
    classes = class_rules()
    assert len(classes) <= 25
    assert not any(op.name in rule.text for op in KERNEL_OPS if op.fuses for rule in classes)


def test_a_region_never_reads_part_of_a_value_it_computes() -> None:
    """``(a * b)[:1] + c``, as Mamba's scan steps read it: the slice reads the product's first row with the product's
    own strides, over another shape. A region computes element by element, so the add cannot join the product's
    region (it would read the product where the region has computed none of it); the fused genome runs as the
    reference."""
    g = ll.Graph()
    a, b = g.tensor((3, 4), name="a"), g.tensor((3, 4), name="b")
    c = g.tensor((1, 4), name="c")
    ((a * b).exp2()[:1] + c).sqrt().output("y")
    comp, llir, regions = fused_regions(g)
    for region in regions:
        shapes = {llir_kernel.shape for llir_kernel in llir.kernels if llir_kernel.id in region.kernels()}
        assert len({numel(s) for s in shapes}) == 1, shapes
    # the e-graph offers the add grown onto the product's region; extraction refuses that region, and the fused
    # genome took the next best
    space = comp.choice_space()
    fused = space.fused_genome()
    refused = []
    for cid in space.classes:
        for alternative in space.alternatives(fused, cid):
            try:
                extract(alternative)
            except Refused as error:
                refused.append(error.detail)
    assert any("not the region's 4 elements" in detail for detail in refused), refused
    comp.genome = fused
    given = [np.random.default_rng(0).standard_normal(shape, dtype=np.float32) for shape in ((3, 4), (3, 4), (1, 4))]
    np.testing.assert_allclose(to_numpy(comp.run(*given)), to_numpy(comp.run_reference(*given)), rtol=1e-6)


def test_a_region_of_values_of_other_sizes_is_broken() -> None:
    """A plain region whose start holds three rows where its end holds one: ``Region.body`` names it (extraction
    refuses such a genome as a ``broken region``, and the fused genome takes the next best)."""
    rows, row = (Expr.num(3), Expr.num(4)), (Expr.num(1), Expr.num(4))
    kernels = [Kernel(0, "Input", (), rows, DType.F32, "a"),
               Kernel(1, "FusionStart", ((0, ShapeTracker.contiguous(rows)),), rows, DType.F32),
               Kernel(2, "FusedSin", ((1, ShapeTracker.contiguous(rows)),), rows, DType.F32),
               Kernel(3, "FusedSqrt", ((2, ShapeTracker.contiguous(row)),), row, DType.F32),
               Kernel(4, "FusionEnd", ((3, ShapeTracker.contiguous(row)),), row, DType.F32)]
    llir = LLIR(kernels, [4])
    (region,) = find_regions(llir)
    with pytest.raises(ll.LuminalError, match=r"k1 \(FusionStart\) in the region of k4 has \[3, 4\], not the "
                                              r"region's 4 elements"):
        region.body(llir)
