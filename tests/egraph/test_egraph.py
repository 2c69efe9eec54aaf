"""The e-graph stage: every HLIR op lowers to its kernel with its dtype, the rewrites do what
they say, step reports add up, exported programs reproduce the e-graph in a fresh egglog,
user rules run (or fail on the right line), and e-classes/program text are inspectable.

Each ``EGraph`` starts an egglog worker process; the ``egraphs`` fixture closes them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

import luminal_lab as ll
from luminal_lab.core.dtypes import from_torch
from luminal_lab.core.ops import Op
from luminal_lab.egraph import EGraph, Saturation, snapshot
from tests.helpers.models import MLP, LlamaBlock, SelfAttentionBlock, attention_inputs, llama_inputs, mlp_inputs
from tests.helpers.op_cases import CASES

ROOT = Path(__file__).resolve().parents[2]
NO_KERNEL = (Op.INPUT, Op.OUTPUT)

Make = Callable[..., EGraph]


@pytest.fixture
def egraphs() -> Iterator[Make]:
    """``make(graph)`` builds an EGraph; every one made is closed (its worker stopped) afterwards."""
    made: list[EGraph] = []

    def make(graph: ll.Graph, **options) -> EGraph:
        made.append(EGraph(graph, **options))
        return made[-1]

    yield make
    for egraph in made:
        egraph.close()


# ---- helpers -------------------------------------------------------------------------------------
def kernels_of(egraph: EGraph, cid: str, kernel: str) -> list[snapshot.ENode]:
    """The ``kernel`` e-nodes among the OpKinds of the ``Op`` e-nodes of e-class ``cid``."""
    classes = egraph.snapshot.classes
    return [kind for node in classes[cid].nodes if node.op == "Op"
            for kind in classes[node.children[0]].nodes if kind.op == kernel]


def constructors(egraph: EGraph, cid: str) -> set[str]:
    return {node.op for node in egraph.snapshot.classes[cid].nodes}


def assert_every_op_lowered(egraph: EGraph, graph: ll.Graph) -> int:
    """Every live HLIR op's e-class holds ``Kernel<Op>`` whose DType field is the node's dtype.

    Returns how many HLIR op nodes were checked.
    """
    of_node = {h: egraph.eclass(cid) for h, cid in egraph.snapshot.hlir_eclass.items()}
    checked = 0
    for node in graph.live_nodes():
        eclass = of_node.get(node.id)
        where = f"{node} (from {node.origin})"
        assert eclass is not None, f"{where} has no e-class"
        assert eclass.dtype == node.dtype.egglog, f"{where}: dtype fact {eclass.dtype}"
        if node.op in NO_KERNEL:
            continue
        kernel = f"Kernel{node.op.value}"
        found = kernels_of(egraph, eclass.id, kernel)
        assert found, f"{where}: e-class {eclass.id} has no {kernel}; it holds {eclass}"
        for kernel_node in found:  # the last field is the DType e-class, holding exactly one constructor
            assert constructors(egraph, kernel_node.children[-1]) == {node.dtype.egglog}, \
                f"{where}: {kernel} carries {constructors(egraph, kernel_node.children[-1])}"
        checked += 1
    return checked


def assert_saturated_within_budget(egraph: EGraph) -> Saturation:
    result = egraph.saturate()
    assert result.stopped is None, result
    assert result.saturated, result
    assert not any(report.stopped for report in egraph.history)
    assert (result.enodes, result.eclasses) == (egraph.snapshot.n_enodes, egraph.snapshot.n_eclasses)
    return result


def ops_graph(dtype: torch.dtype, transposed: bool) -> ll.Graph:
    """Every op case (tests/helpers/op_cases.py) that runs in ``dtype``, built as tests/hlir/test_ops.py builds it, in
    one graph (straight, and with inputs declared transposed and transposed back when asked)."""
    g = ll.Graph()
    for case in CASES:
        if dtype not in case.dtypes:
            continue
        for flip in (False, True) if transposed else (False,):
            tag = f"{case.name}{'_T' if flip else ''}"
            with g.origin(tag):
                tensors = []
                for i, shape in enumerate(case.shapes):
                    flipped = flip and len(shape) >= 2
                    stored = shape[:-2] + (shape[-1], shape[-2]) if flipped else shape
                    t = g.tensor(stored, f"{tag}_x{i}", from_torch(dtype))
                    tensors.append(t.transpose(-1, -2) if flipped else t)
                case.ll_fn(*tensors).output(tag)
    return g


def misc_graph() -> ll.Graph:
    """The graphs of test_ops' stand-alone tests: gather/scatter, iota, inf/nan, symbolic shapes."""
    g = ll.Graph()
    w, i, x = g.tensor((10, 4), "w"), g.tensor((2, 3), "ids", ll.i64), g.tensor((3, 10), "x")
    idx, s, b = g.tensor((2, 5), "index", ll.i64), g.tensor((2, 5), "src"), g.tensor((3, 3), "block")
    ll.embedding(i, w).output("embedding")
    x.take(i, axis=1).output("take")
    x.gather(0, idx).output("gather")
    x.scatter(0, idx[:, :1], s).output("scatter")
    x.slice_scatter(b.T, axis=1, start=1, stop=4).output("slice_scatter")
    x.scatter(1, idx[:1, :2], 7.0).output("scatter_value")
    g.arange(5, start=2, step=3).output("ints")
    (g.arange(4, dtype=ll.f32) * 0.5).output("floats")
    t = g.tensor((5,), "t")
    t.relu().output("relu")
    t.exp().output("exp")
    ll.maximum(t, 0.0).output("max")
    t.sigmoid().output("sigmoid")
    sx, sw = g.tensor(("s", 4), "sx"), g.tensor((4, 3), "sw")
    y = (sx @ sw).softmax(0)
    (y.mean(0, keepdim=True) + sx.sum(-1, keepdim=True)[:, :1]).output("y")
    sx.cumsum(0).output("running")
    bs = g.tensor(("b", "s"), "bs")
    bs.var(1).output("var")
    bs.pad([(0, 0), (1, 1)]).output("padded")
    f64 = g.tensor((3,), "f64", ll.f64)
    f64.exp().log().output("roundtrip")
    return g


# ---- 1. every HLIR op lowers to its kernel, with its dtype ---------------------------------------
@pytest.mark.parametrize(("dtype", "transposed"), [
    (torch.float32, True), (torch.float16, False), (torch.bfloat16, False), (torch.float64, False),
    (torch.int32, False), (torch.int64, True), (torch.int8, False), (torch.uint8, True), (torch.int16, False),
], ids=lambda p: str(p).removeprefix("torch.") if isinstance(p, torch.dtype) else ("views" if p else "plain"))
def test_op_cases_lower_every_node_to_its_kernel(dtype: torch.dtype, transposed: bool, egraphs: Make) -> None:
    g = ops_graph(dtype, transposed)
    egraph = egraphs(g)
    assert_saturated_within_budget(egraph)
    checked = assert_every_op_lowered(egraph, g)
    assert checked > 100
    ops = {node.op for node in g.live_nodes()}
    assert {Op.ADD, Op.MUL, Op.SUM_REDUCE, Op.MAX_REDUCE, Op.LESS_THAN, Op.CAST, Op.CONSTANT} <= ops


def test_gather_scatter_iota_and_symbolic_graphs_lower(egraphs: Make) -> None:
    g = misc_graph()
    egraph = egraphs(g)
    assert_saturated_within_budget(egraph)
    assert_every_op_lowered(egraph, g)
    ops = {node.op for node in g.live_nodes()}
    assert {Op.GATHER, Op.SCATTER, Op.IOTA} <= ops
    assert '(MVar "s")' in egraph.program


MODELS = {
    "mlp": lambda: (MLP(32, 64, 16), mlp_inputs(4, 32)),
    "attention": lambda: (SelfAttentionBlock(32, 4), attention_inputs(2, 8, 32)),
    "llama": lambda: (LlamaBlock(64, 4, 128, 16), llama_inputs(2, 16, 64)),
    "llama_sdpa": lambda: (LlamaBlock(64, 4, 128, 16, sdpa=True), llama_inputs(2, 16, 64)),
}


@pytest.mark.parametrize("name", MODELS)
def test_torch_models_lower_every_node_to_its_kernel(name: str) -> None:
    model, inputs = MODELS[name]()
    comp = ll.compile(model, inputs)
    egraph = comp.egraph
    try:
        assert comp.egraph is egraph, "comp.egraph is built once"
        assert_saturated_within_budget(egraph)
        assert assert_every_op_lowered(egraph, comp.graph) > 40
        assert egraph.status == "saturated"
    finally:
        egraph.close()


# ---- 2. the rewrites -----------------------------------------------------------------------------
IDENTITY_FORMS: dict[str, Callable[[ll.Graph, ll.GraphTensor], ll.GraphTensor]] = {
    # rule name -> how the form is built on x (f32 for *-float-*, i32 for *-int-*)
    "mul-one-float-rhs": lambda g, x: x * 1.0,
    "mul-one-float-lhs": lambda g, x: g.constant(1.0) * x,
    "mul-one-int-rhs": lambda g, x: x * 1,
    "mul-one-int-lhs": lambda g, x: g.constant(1, ll.i32) * x,
    "add-zero-float-rhs": lambda g, x: x + 0.0,
    "add-zero-float-lhs": lambda g, x: g.constant(0.0) + x,
    "add-zero-int-rhs": lambda g, x: x + 0,
    "add-zero-int-lhs": lambda g, x: g.constant(0, ll.i32) + x,
    "recip-of-recip": lambda g, x: x.reciprocal().reciprocal(),
    "log2-of-exp2": lambda g, x: x.exp2().log2(),
}


def identities_graph() -> tuple[ll.Graph, dict[str, tuple[ll.GraphTensor, ll.GraphTensor]], ll.GraphTensor]:
    """One input per identity form (so each rule has exactly one place to fire), plus an exp chain."""
    g = ll.Graph()
    forms = {}
    for rule, build in IDENTITY_FORMS.items():
        x = g.tensor((3, 4), f"x_{rule}", ll.i32 if "-int-" in rule else ll.f32)
        forms[rule] = (x, build(g, x).output(rule))
    e = g.tensor((3, 4), "e").exp().output("exp")
    return g, forms, e


def test_identity_rewrites_land_in_the_operand_eclass(egraphs: Make) -> None:
    g, forms, _ = identities_graph()
    egraph = egraphs(g)
    for rule, (x, form) in forms.items():
        assert form.node.op != Op.INPUT, f"{rule}: the form was folded away while building"
        assert egraph.eclass_of(form.node).id != egraph.eclass_of(x.node).id, f"{rule}: merged before any rule ran"

    first = egraph.step()
    # the early rules run before algebra commutes anything: each form matches its own rule exactly once
    assert {rule: first.matches.get(rule, 0) for rule in forms} == dict.fromkeys(forms, 1)
    for rule, (x, form) in forms.items():
        assert egraph.eclass_of(form.node).id == egraph.eclass_of(x.node).id, f"{rule} did not merge x with {rule}"
        assert form.node.id in egraph.eclass_of(x.node).hlir
    assert first.merged, "merged e-classes are reported"

    assert_saturated_within_budget(egraph)
    for rule, (x, form) in forms.items():
        merged = egraph.eclass_of(x.node)
        assert merged.id == egraph.eclass_of(form.node).id
        assert "Input" in constructors(egraph, merged.id), f"{rule}: x's own e-node is kept"
    assert_every_op_lowered(egraph, g)


def test_exp_chain_gains_a_kernel_exp(egraphs: Make) -> None:
    g, _, exp = identities_graph()
    egraph = egraphs(g)
    assert exp.node.op == Op.EXP2
    mul, _ = exp.node.sources[0]
    x, _ = mul.sources[0]
    assert not kernels_of(egraph, egraph.eclass_of(exp.node).id, "KernelExp")
    egraph.step()
    (kernel_exp,) = kernels_of(egraph, egraph.eclass_of(exp.node).id, "KernelExp")
    assert constructors(egraph, kernel_exp.children[-1]) == {"F32"}
    # its Op e-node reads x itself (skipping the multiply by log2 e)
    ops = [n for n in egraph.eclass_of(exp.node).nodes
           if n.op == "Op" and kernel_exp in egraph.snapshot.classes[n.children[0]].nodes]
    (ilist,) = {op.children[1] for op in ops}
    (icons,) = egraph.snapshot.classes[ilist].nodes
    assert icons.children[0] == egraph.eclass_of(x).id
    assert egraph.total_matches["exp2-chain-to-KernelExp"] >= 1


def test_match_counts_name_the_rules_that_fired(egraphs: Make) -> None:
    g, forms, _ = identities_graph()
    egraph = egraphs(g)
    assert_saturated_within_budget(egraph)
    totals = egraph.total_matches
    fired = {"lower-Add", "lower-Mul", "lower-Exp2", "lower-Log2", "lower-Recip", "lower-Constant",
             "dtype-Input", "dtype-Output", "dtype-Add", "dtype-Constant", "commute-Add", "commute-Mul",
             "cleanup-Add", "exp2-chain-to-KernelExp", *forms}
    for rule in fired:
        assert totals.get(rule, 0) > 0, f"{rule} should have fired"
    # ops the graph does not have: their rules cannot match
    for op in ("Sin", "Sqrt", "Mod", "LessThan", "SumReduce", "MaxReduce", "Iota", "Gather", "Scatter", "Cast"):
        for rule in (f"lower-{op}", f"dtype-{op}", f"cleanup-{op}"):
            assert totals.get(rule, 0) == 0, f"{rule} cannot match here, got {totals.get(rule)}"


def test_step_reports_add_up(egraphs: Make) -> None:
    g, _, _ = identities_graph()
    egraph = egraphs(g)
    initial = (egraph.snapshot.n_enodes, egraph.snapshot.n_eclasses)
    result = assert_saturated_within_budget(egraph)
    history = egraph.history
    assert result.rounds == len(history) >= 2
    assert [r.index for r in history] == list(range(1, len(history) + 1))
    assert (history[0].enodes_before, history[0].eclasses_before) == initial
    for previous, current in itertools.pairwise(history):
        assert current.enodes_before == previous.enodes_after
        assert current.eclasses_before == previous.eclasses_after
    final = (egraph.snapshot.n_enodes, egraph.snapshot.n_eclasses)
    assert sum(r.enodes_after - r.enodes_before for r in history) == final[0] - initial[0] > 0
    assert sum(r.eclasses_after - r.eclasses_before for r in history) == final[1] - initial[1]
    assert final == (sum(len(c.nodes) for c in egraph.eclasses), len(egraph.eclasses))
    summed: Counter[str] = Counter()
    for report in history:
        summed.update(report.matches)
        assert report.total_matches == sum(report.matches.values())
        assert report.fired() == {rule: n for rule, n in report.matches.items() if n > 0}
    assert dict(summed) == egraph.total_matches
    assert history[0].updated and history[0].total_matches > 0
    assert not history[-1].updated and history[-1].total_matches == 0, "saturated: the last round changed nothing"
    assert history[-1].enodes_before == history[-1].enodes_after


def test_k_rounds_in_one_call_equal_k_steps(egraphs: Make) -> None:
    g, _, _ = identities_graph()
    stepped, at_once = egraphs(g), egraphs(g)
    for _ in range(3):
        stepped.step()
    report = at_once.run(None, iterations=3)
    assert len(at_once.history) == 1 and report.label == "round x3"
    assert at_once.total_matches == stepped.total_matches
    assert report.matches == stepped.total_matches
    assert (report.enodes_after, report.eclasses_after) == (stepped.history[-1].enodes_after,
                                                            stepped.history[-1].eclasses_after)
    assert (at_once.snapshot.n_enodes, at_once.snapshot.n_eclasses) == (stepped.snapshot.n_enodes,
                                                                        stepped.snapshot.n_eclasses)
    assert sorted(c.sort for c in at_once.eclasses) == sorted(c.sort for c in stepped.eclasses)


def test_run_one_ruleset(egraphs: Make) -> None:
    g, _, _ = identities_graph()
    egraph = egraphs(g)
    egraph.run("dtype_prop", iterations=4)
    report = egraph.run("kernel_lower")
    assert report.label == "kernel_lower"
    assert report.fired() and all(rule.startswith("lower-") or rule == "exp2-chain-to-KernelExp"
                                  for rule in report.fired())
    assert report.enodes_after > report.enodes_before
    with pytest.raises(ll.ArgumentError, match=r"EGraph.run\(ruleset='nope'\): expected one of 'expr'"):
        egraph.run("nope")


def test_deep_graph_gets_dtypes_and_kernels_in_one_round(egraphs: Make) -> None:
    """dtype facts walk one op per egglog iteration: a chain deeper than the iteration guard (100)
    must still be typed, and lowered, in the first round."""
    g = ll.Graph()
    x = g.tensor((4,), "x")
    for i in range(150):
        x = x.sin() if i % 2 else x + 1.0
    x.output("y")
    egraph = egraphs(g)
    report = egraph.step()
    assert report.stopped is None, report.stopped
    assert report.matches["lower-Sin"] == 75 and report.matches["lower-Add"] == 75
    assert_saturated_within_budget(egraph)
    assert_every_op_lowered(egraph, g)


# ---- 3. exported programs reproduce the e-graph ---------------------------------------------------
COUNT_IN_FRESH_EGGLOG = textwrap.dedent("""
    import json, sys
    from egglog.bindings import EGraph
    from luminal_lab.egraph.snapshot import count
    counts = []
    for path in sys.argv[1:]:
        e = EGraph()
        text = open(path).read()
        e.run_program(*e.parse_program(text))
        counts.append(count(e.serialize([]).to_json()))
    print(json.dumps(counts))
""")


def counts_in_fresh_process(*paths: Path) -> list[tuple[int, int]]:
    done = subprocess.run([sys.executable, "-c", COUNT_IN_FRESH_EGGLOG, *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [tuple(pair) for pair in json.loads(done.stdout)]


def test_export_runs_in_a_fresh_egglog_to_the_same_egraph(egraphs: Make, tmp_path: Path) -> None:
    g, _, _ = identities_graph()
    egraph = egraphs(g)
    live = []
    egraph.step()
    egraph.step()
    live.append((egraph.snapshot.n_eclasses, egraph.snapshot.n_enodes))
    stepped = egraph.export(tmp_path / "stepped.egg")

    egraph.add_rules('(rewrite (MMul (MNum 4) ?a) (MAdd (MMul (MNum 2) ?a) (MMul (MNum 2) ?a)) :name "split-4")',
                     ruleset="strides")
    report = egraph.step()
    assert report.matches["split-4"] >= 1 and report.enodes_after > report.enodes_before
    live.append((egraph.snapshot.n_eclasses, egraph.snapshot.n_enodes))
    with_rules = egraph.export(tmp_path / "with_rules.egg")

    text = with_rules.read_text()
    assert text.startswith(";; exported by luminal_lab")
    assert "(ruleset strides)" in text and '"split-4"' in text
    assert text.count("(run-schedule (run kernel_lower))") == 3, "one kernel_lower pass per round"
    assert "(print-size)" not in text, "budget probes are not part of the program"
    assert counts_in_fresh_process(stepped, with_rules) == live


# ---- 4. user rules -------------------------------------------------------------------------------
TWICE_IS_ADD = """\
; x * 2 = x + x
(rule ((= ?e (Op (Mul ?s ?xv (Strided ?cs) ?o) (ICons ?x (ICons ?c (INil)))))
       (= ?c (Op (Constant (MFloat 2.0) ?dt) (INil))))
      ((union ?e (Op (Add ?s ?xv ?xv ?o) (ICons ?x (ICons ?x (INil))))))
      :name "twice-is-add")
(rewrite (MMul (MNum 2) ?a) (MAdd ?a ?a) :name "expr-twice-is-add")
"""


def twice_graph() -> tuple[ll.Graph, ll.GraphTensor, ll.GraphTensor]:
    g = ll.Graph()
    x = g.tensor((3, 2), "x")
    return g, x, (x * 2.0).output("y")


def test_user_rules_run_in_the_next_round_and_report_by_name(egraphs: Make) -> None:
    g, x, y = twice_graph()
    egraph = egraphs(g)
    before = (egraph.snapshot.n_enodes, egraph.snapshot.n_eclasses)
    egraph.add_rules(TWICE_IS_ADD, ruleset="mine")
    assert egraph.rulesets[-2:] == ["mine", "cleanup"], "a new ruleset joins every round, before cleanup"
    assert (egraph.snapshot.n_enodes, egraph.snapshot.n_eclasses) == before, "adding rules runs nothing"
    assert ":ruleset mine" in egraph.program and '"twice-is-add"' in egraph.program

    report = egraph.step()
    assert report.matches["twice-is-add"] == 1
    assert report.matches["expr-twice-is-add"] >= 1  # the stride of dim 0 of a (3, 2) tensor is 2*z
    classes = egraph.snapshot.classes
    y_class = egraph.eclass_of(y.node)
    adds = [n for n in y_class.nodes if n.op == "Op" and constructors(egraph, n.children[0]) & {"Add"}]
    assert adds, f"no Add in {y_class}"
    (icons,) = classes[adds[0].children[1]].nodes
    (rest,) = classes[icons.children[1]].nodes
    assert icons.children[0] == rest.children[0] == egraph.eclass_of(x.node).id, "the Add reads x twice"

    assert_saturated_within_budget(egraph)
    assert egraph.total_matches["twice-is-add"] == 1
    assert kernels_of(egraph, y_class.id, "KernelAdd"), "the new Add is lowered too"
    assert_every_op_lowered(egraph, g)


TWICE_IS_ADD_KERNEL = """\
(rule ((= ?e (Op (KernelMul ?s ?xv (Strided ?cs) ?o ?dt) (ICons ?x (ICons ?c (INil)))))
       (= ?c (Op (KernelConstant (MFloat 2.0) ?cdt) (INil))))
      ((union ?e (Op (KernelAdd ?s ?xv ?xv ?o ?dt) (ICons ?x (ICons ?x (INil))))))
      :name "twice-is-add-kernel")
"""


def test_rules_over_hlir_ops_see_them_only_until_cleanup(egraphs: Make) -> None:
    """The first round's ``cleanup`` subsumes every HLIR op that has its kernel (egglog then no
    longer matches it): rules added later have to be written over the kernel ops."""
    g, x, y = twice_graph()
    egraph = egraphs(g)
    first = egraph.step()
    assert first.matches["cleanup-Mul"] == 1
    egraph.add_rules(TWICE_IS_ADD, ruleset="late")
    assert egraph.step().matches.get("twice-is-add", 0) == 0
    egraph.add_rules(TWICE_IS_ADD_KERNEL, ruleset="kernels")
    assert egraph.step().matches["twice-is-add-kernel"] == 1
    adds = kernels_of(egraph, egraph.eclass_of(y.node).id, "KernelAdd")
    assert len(adds) == 1 and constructors(egraph, adds[0].children[-1]) == {"F32"}
    assert_saturated_within_budget(egraph)
    assert egraph.eclass_of(x.node).id != egraph.eclass_of(y.node).id


VALID_TWO_LINES = ('(rewrite (MAdd ?a (MNum 0)) ?a :name "u-add-zero")\n'
                   '(rewrite (MMul ?a (MNum 1)) ?a :name "u-mul-one")\n')
BAD_THIRD_LINES = {
    "unbalanced parens": '(rewrite (MMul (MNum 2) ?a) (MAdd ?a ?a) :name "u-twice"',
    "unknown constructor": '(rewrite (Op (Tan ?s ?v ?o) ?i) (Op (Sin ?s ?v ?o) ?i) :name "u-tan")',
    "arity mismatch": '(rewrite (Op (Sin ?s ?v) ?i) (Op (Sqrt ?s ?v) ?i) :name "u-arity")',
    "type error": '(rewrite (MAdd ?a (MNum 0)) (MNum ?a) :name "u-type")',
}


@pytest.mark.parametrize("kind", BAD_THIRD_LINES)
def test_bad_rule_text_names_its_line_and_leaves_the_egraph_usable(kind: str, egraphs: Make) -> None:
    g, _, _ = twice_graph()
    egraph = egraphs(g)
    egraph.step()
    program, rulesets, counts = egraph.program, egraph.rulesets, (egraph.snapshot.n_enodes, len(egraph.eclasses))
    bad = BAD_THIRD_LINES[kind]
    text = VALID_TWO_LINES + "   " + bad + "\n"  # with the trailing newline a triple-quoted string has
    with pytest.raises(ll.EgglogError) as raised:
        egraph.add_rules(text, ruleset="mine")
    assert isinstance(raised.value, ll.LuminalError)
    assert raised.value.line == bad, "the offending line, as given"
    first = str(raised.value).splitlines()[0]
    assert re.fullmatch(r"add_rules, line 3, column \d+: .+", first) and "egglog" not in first, first
    # nothing of the failed text stays: the first two (valid) rules were rolled back too
    assert (egraph.program, egraph.rulesets) == (program, rulesets)
    assert (egraph.snapshot.n_enodes, len(egraph.eclasses)) == counts
    assert egraph.step().stopped is None

    egraph.add_rules(VALID_TWO_LINES, ruleset="mine")  # the same rules, fixed, go in cleanly
    assert "mine" in egraph.rulesets
    assert_saturated_within_budget(egraph)
    assert_every_op_lowered(egraph, g)


def test_adding_the_same_rules_twice_is_an_egglog_error(egraphs: Make) -> None:
    """Re-running a notebook cell adds its rules again: a clear error, not a dead worker."""
    g, _, _ = twice_graph()
    egraph = egraphs(g)
    egraph.add_rules(TWICE_IS_ADD, ruleset="mine")
    program = egraph.program
    with pytest.raises(ll.EgglogError, match="a rule named 'twice-is-add' was already added") as raised:
        egraph.add_rules(TWICE_IS_ADD, ruleset="mine")
    assert raised.value.line is not None and raised.value.line.startswith("(rule")
    assert egraph.program == program
    assert egraph.step().matches["twice-is-add"] == 1


DIVIDE_BY_ZERO = '(rule ((= ?e (MNum ?n)))\n      ((MNum (/ ?n 0))) :name "div0")'


def state(egraph: EGraph) -> tuple[int, int, Counter]:
    """The worker's e-graph as it is now (read afresh, not the last snapshot): counts and e-nodes by constructor."""
    live = egraph._take_snapshot()
    return live.n_enodes, live.n_eclasses, Counter(n.op for c in live.classes.values() for n in c.nodes)


def test_a_rule_that_fails_in_egglog_leaves_the_egraph_as_before_its_step(egraphs: Make) -> None:
    """The first round lowers every op before the user's ruleset runs: its failure takes that back too."""
    g, _, _ = twice_graph()
    egraph = egraphs(g)
    built = state(egraph)
    egraph.add_rules(DIVIDE_BY_ZERO, ruleset="mine")
    with pytest.raises(ll.EgglogError) as raised:
        egraph.step()
    first = str(raised.value).splitlines()[0]
    assert first == ("round: rule 'div0' of ruleset mine failed: (/ ?n 0) failed for a match (primitive / has no "
                     "value there, as for a division by zero); the e-graph was restored to before this step; take "
                     "it out with comp.egraph.remove_rules('mine')")
    assert "call of primitive / failed" in str(raised.value), "egglog's own message follows"
    assert state(egraph) == built and egraph.history == [] and egraph.status == "built"
    with pytest.raises(ll.EgglogError, match="rule 'div0' of ruleset mine failed"):
        egraph.run("mine")


def test_after_a_failing_rule_the_last_good_step_runs_and_removing_the_rule_goes_on() -> None:
    g = ll.Graph()
    a, b = g.tensor((4,), "a"), g.tensor((4,), "b")
    (a * b + a).output("c")
    comp = ll.compile(g)
    try:
        x, y = torch.arange(4.0), torch.full((4,), 3.0)
        comp.egraph.step()
        stepped = state(comp.egraph)
        comp.egraph.add_rules(DIVIDE_BY_ZERO, ruleset="mine")
        with pytest.raises(ll.EgglogError, match="rule 'div0' of ruleset mine failed"):
            comp.egraph.step()
        assert state(comp.egraph) == stepped and len(comp.egraph.history) == 1
        assert torch.equal(comp.run(x, y), x * y + x), "the step before the failure extracts and runs"
        comp.egraph.remove_rules("mine")
        assert "div0" not in comp.egraph.program
        assert_saturated_within_budget(comp.egraph)
        assert torch.equal(comp.run(x, y), x * y + x)
    finally:
        comp.egraph.close()


def test_bad_ruleset_name(egraphs: Make) -> None:
    g, _, _ = twice_graph()
    egraph = egraphs(g)
    with pytest.raises(ll.ArgumentError, match=r"EGraph.add_rules\(ruleset='my rules'\)"):
        egraph.add_rules(VALID_TWO_LINES, ruleset="my rules")
    assert egraph.rulesets == ["expr", "dtype_prop", "early", "kernel_lower", "algebra", "fusion_facts", "fusion_pair",
                               "fusion_grow", "fusion_merge", "cleanup"]


# ---- 5. inspection and the program text ----------------------------------------------------------
def small_graph() -> tuple[ll.Graph, ll.GraphTensor, ll.GraphTensor, ll.GraphTensor]:
    g = ll.Graph()
    x = g.tensor((3, 2), "x")
    a = x.sin()
    b = (a + x).output("b")
    a.output("a")
    return g, x, a, b


def test_eclass_parents_hlir_nodes_and_best_term(egraphs: Make) -> None:
    g, x, a, b = small_graph()
    egraph = egraphs(g)
    assert_saturated_within_budget(egraph)
    sin = egraph.eclass(egraph.eclass_of(a.node).id)
    assert sin.hlir == [a.node.id] and sin.sort == "IR" and sin.dtype == "F32"
    # used by the Add (through its input list) and by the Output of "a"
    parent_ops = Counter(p.op for p in sin.parents)
    assert parent_ops["Output"] == 1 and parent_ops["ICons"] >= 1
    assert all(sin.id in p.children for p in sin.parents)
    assert sin.best_term.startswith("(Op (KernelSin "), "the HLIR Sin is cleaned up once its kernel exists"
    assert '(Input 0 "x" F32)' in sin.best_term
    assert any(n.subsumed for n in sin.nodes) and not all(n.subsumed for n in sin.nodes)

    source = egraph.eclass(egraph.eclass_of(x.node).id)
    assert source.hlir == [x.node.id] and source.best_term == '(Input 0 "x" F32)'
    users = {p.eclass for p in source.parents}
    assert users, "x is read by the Sin and the Add"
    assert egraph.eclass_of(x.node.id).id == source.id, "by node or by node id"
    with pytest.raises(KeyError):
        egraph.eclass("no-such-class")

    output = egraph.eclass_of(b.node.id + 1)  # Output "b"
    assert output.hlir == [b.node.id + 1] and g.nodes[b.node.id + 1].op == Op.OUTPUT


LET = re.compile(r"^\(let \$t(\d+)_ (.*)\)$")


def test_program_lets_in_topological_order_joined_by_output_join(egraphs: Make) -> None:
    g, *_ = small_graph()
    unused = g.tensor((2,), "unused").sqrt()  # dead: not emitted
    egraph = egraphs(g)
    lines = egraph.program.splitlines()
    lets = [(int(m[1]), m[2]) for m in map(LET.match, lines) if m]
    assert [i for i, _ in lets] == [n.id for n in g.live_nodes()]
    assert unused.node.id not in [i for i, _ in lets]
    seen: set[int] = set()
    for node_id, term in lets:
        assert {int(r) for r in re.findall(r"\$t(\d+)_", term)} <= seen, f"$t{node_id}_ reads a later let"
        seen.add(node_id)
    outputs = [n.id for n in g.outputs.values()]
    assert f"(let $root (OutputJoin $t{outputs[0]}_ $t{outputs[1]}_))" in lines
    assert lines.index(f"(let $root (OutputJoin $t{outputs[0]}_ $t{outputs[1]}_))") > lines.index(
        next(line for line in lines if line.startswith(f"(let $t{outputs[1]}_ ")))

    single = ll.Graph()
    single.tensor((2,), "z").sqrt().output("root")
    text = egraphs(single).program
    assert "OutputJoin $t" not in text and "(let $root $t2_)" in text.splitlines()


PROGRAM_DIGEST = textwrap.dedent("""
    import hashlib
    import luminal_lab as ll
    from luminal_lab.egraph import EGraph
    g = ll.Graph()
    x, w = g.tensor(("s", 4), "x"), g.tensor((4, 3), "w")
    ids = g.tensor((2,), "ids", ll.i64)
    y = (x @ w).softmax(-1)
    y.output("y")
    ll.embedding(ids, w).output("rows")
    (x.sum(-1) * 0.5 + 1).exp().output("z")
    e = EGraph(g)
    print(hashlib.sha256(e.program.encode()).hexdigest())
    e.close()
""")


def test_program_text_is_deterministic(egraphs: Make) -> None:
    g1, *_ = small_graph()
    g2, *_ = small_graph()
    assert egraphs(g1).program == egraphs(g2).program
    digests = set()
    for seed in ("1", "2"):  # string hashing (set and dict order of str keys) differs between these
        done = subprocess.run([sys.executable, "-c", PROGRAM_DIGEST], cwd=ROOT, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONHASHSEED=seed), timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.strip())
    assert len(digests) == 1


def test_torch_model_program_is_deterministic() -> None:
    programs = []
    for _ in range(2):
        comp = ll.compile(*MODELS["attention"]())
        programs.append(comp.egraph.program)
        comp.egraph.close()
    assert programs[0] == programs[1]
    assert hashlib.sha256(programs[0].encode()).hexdigest() == hashlib.sha256(programs[1].encode()).hexdigest()


def _sin_graph() -> ll.Graph:
    g = ll.Graph()
    g.tensor((4,), "x").sin().output("y")
    return g


def test_each_egraph_takes_the_spare_worker_and_leaves_another() -> None:
    """Starting a worker leaves a spare for the next e-graph under the same settings, which takes it (no import
    wait); other settings (a memory limit) get a worker of their own."""
    from luminal_lab.egraph.worker import EgglogWorker, idle_pids

    first = ll.compile(_sin_graph())
    assert first.egraph.summary()  # the e-graph (and its worker) is built on first use
    idle = idle_pids()
    second = ll.compile(_sin_graph())
    try:
        assert second.egraph.summary()
        taken = second.egraph._worker.pid
        assert taken in idle
        assert idle_pids() and taken not in idle_pids() and first.egraph._worker.pid not in idle_pids()
        other = EgglogWorker(256 * 2**20)
        other.run("(datatype Nothing (Thing))")
        assert other.pid not in (None, *idle_pids())
        other.close()
        assert second.egraph.saturate() is not None and second.run(torch.ones(4)).allclose(torch.ones(4).sin())
    finally:
        first.egraph.close()
        second.egraph.close()


def test_a_saturated_egraph_steps_on_in_a_worker_that_replays_it() -> None:
    """Saturation gives the worker back; a later step takes one again, replays the history and finds nothing new."""
    comp = ll.compile(_sin_graph())
    saturation = comp.egraph.saturate()
    assert saturation.saturated and comp.egraph._worker.pid is None
    report = comp.egraph.step()
    assert comp.egraph._worker.pid is not None and not report.updated
    assert report.enodes_after == saturation.enodes
    comp.egraph.close()


def test_a_worker_given_back_serves_the_next_egraph_from_its_base_alone() -> None:
    """An e-graph done with its worker (closed, or dropped) gives it back: the next e-graph takes it, holding the schema
    and rules it read once and nothing of the e-graph before (its terms, its user rules and rulesets)."""
    from luminal_lab.egraph.worker import idle_pids

    rule = "(rule ((= ?e (Op (KernelSin ?s ?x ?o ?dt) ?ins))) ((set (dtype ?e) ?dt)) :name \"mine\")"
    first = ll.compile(_sin_graph())
    first.egraph.add_rules(rule, ruleset="mine")
    used = first.egraph._worker.pid
    first.egraph.saturate()  # saturated: its e-graph's worker goes back to the pool
    assert used in idle_pids() and first.egraph._worker.pid is None
    del first
    fresh = ll.compile(_sin_graph())
    assert fresh.egraph.summary()
    fresh.egraph.close()
    g = ll.Graph()
    (g.tensor((4,), "x") * 2.0).output("y")
    second = ll.compile(g)
    assert second.egraph.summary() and second.egraph._worker.pid == used
    second.egraph.add_rules(rule, ruleset="mine")  # its name and ruleset are free again
    second.egraph.saturate()
    ops = {node.op for eclass in second.egraph.eclasses for node in eclass.nodes}
    assert "KernelMul" in ops and "KernelSin" not in ops and "Sin" not in ops
    assert torch.equal(second.run(torch.ones(4)), torch.full((4,), 2.0))
    second.egraph.close()


def test_rule_terms_name_every_field_of_their_declaration() -> None:
    """A rule's OpKind term gives each declared field by name; a missing or misspelt one is refused when built."""
    from luminal_lab.egraph.ops import kind

    assert kind("KernelExp", shape="?s", x="?v", out="?o", dtype="?dt") == "(KernelExp ?s ?v ?o ?dt)"
    with pytest.raises(TypeError, match=r"KernelExp takes the fields shape, x, out, dtype; got shape, x, out$"):
        kind("KernelExp", shape="?s", x="?v", out="?o")
    with pytest.raises(TypeError, match="FusionEnd takes the fields shape, out, dtype"):
        kind("FusionEnd", shape="?s", strides="?o", dtype="?dt")
