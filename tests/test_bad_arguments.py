"""The whole public API walked with bad arguments, as a new user would try it: graph building, compile, run, the
e-graph, genomes, search, profile, report, export, torch.compile, the magic and the profiler widget.

Each case asserts the error's type, that its first line names the offending argument or value, and afterwards that
the objects the case used still work with good inputs (nothing the user built is lost).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from IPython.core.error import UsageError

import luminal_lab as ll
from luminal_lab.runtime.cuda import cuda_unavailable_reason

SMALL_SEARCH = {"generations": 1, "generation_size": 2, "progress": False}


class Lin(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).relu()


@dataclass
class World:
    """What the cases act on: a graph program (``a @ b`` then relu), another program, a torch module compiled,
    an IPython shell with the magic loaded, and a scratch folder."""

    g: ll.Graph
    a: ll.GraphTensor
    comp: ll.Compiled
    other_a: ll.GraphTensor
    other: ll.Compiled
    module: Lin
    tcomp: ll.Compiled
    shell: object
    tmp: Path

    X = torch.randn(2, 3)
    W = torch.randn(3, 4)

    def still_works(self) -> None:
        """The objects answer good inputs as before."""
        torch.testing.assert_close(self.comp.run(self.X, self.W), (self.X @ self.W).relu())
        torch.testing.assert_close(self.comp.run(a=self.X, b=self.W), (self.X @ self.W).relu())
        torch.testing.assert_close(self.tcomp(self.X), self.module(self.X))
        root = self.comp.egraph.snapshot.root
        assert self.comp.egraph.eclass(root).id == root
        assert self.comp.egraph.eclass_of(self.a).id == self.comp.egraph.eclass_of(self.a.node.id).id
        assert self.comp.llir().kernels and self.comp.genome.space is self.comp.choice_space()
        more = self.a.sin() * 2  # the graph still grows
        assert more.shape == self.a.shape and more.dtype == ll.f32


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from IPython.testing import globalipapp

    g = ll.Graph()
    a = g.tensor((2, 3), name="a")
    b = g.tensor((3, 4), name="b")
    (a @ b).relu().output("y")
    comp = ll.compile(g)
    og = ll.Graph()
    other_a = og.tensor((2, 3), name="a")
    (other_a * 2).output("y")
    other = ll.compile(og)
    other.choice_space()
    module = Lin().eval()
    tcomp = ll.compile(module, (World.X,))
    shell = globalipapp.get_ipython()
    before = set(shell.user_ns)
    shell.run_line_magic("load_ext", "luminal_lab")
    shell.user_ns.update(g=g, model=module, x=World.X)
    made = World(g, a, comp, other_a, other, module, tcomp, shell, tmp_path_factory.mktemp("bad_arguments"))
    made.still_works()
    yield made
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]


@dataclass(frozen=True)
class Case:
    """A bad call: what it raises and what the first line of its message must name."""

    call: Callable[[World], object]
    error: type[BaseException]
    names: str


def _set_genome(w: World, genome: object) -> None:
    w.comp.genome = genome


def _huge_search(w: World) -> object:
    g = ll.Graph()
    (g.tensor((2**40, 2**40), name="big") * 2).output("y")
    return ll.compile(g).search(**SMALL_SEARCH)


def _torch_compile(options: dict) -> Callable[[World], object]:
    def call(w: World) -> object:
        return torch.compile(lambda p: p.sin(), backend="luminal_lab", options=options)(w.X)
    return call


def _magic(line: str) -> Callable[[World], object]:
    return lambda w: w.shell.run_line_magic("luminal", line)


def _search(**settings) -> Callable[[World], object]:
    return lambda w: w.comp.search(**{**SMALL_SEARCH, **settings})


def _parent_is_a_file(w: World) -> object:
    blocker = w.tmp / "a_file"
    blocker.write_text("")
    return w.comp.report(blocker / "report.html")


CASES: dict[str, Case] = {
    # ---- building graphs
    "shape None": Case(lambda w: w.g.tensor(None, name="n1"), ll.ArgumentError, "Graph.tensor(shape=None)"),
    "negative size": Case(lambda w: w.g.tensor((2, -1), "n2"), ll.ArgumentError, "shape=(2, -1)"),
    "float size": Case(lambda w: w.g.tensor((2.5,), "n3"), ll.ArgumentError, "shape=(2.5,)"),
    "input name not a str": Case(lambda w: w.g.tensor((2,), name=3), ll.ArgumentError, "Graph.tensor(name=3)"),
    "empty input name": Case(lambda w: w.g.tensor((2,), name=""), ll.ArgumentError, "name=''"),
    "dtype as a str": Case(lambda w: w.g.tensor((2,), "n4", dtype="float32"), ll.DTypeError, "'float32'"),
    "input name taken": Case(lambda w: w.g.tensor((2,), "a"), ll.LuminalError, "input named 'a'"),
    "weight of strings": Case(lambda w: w.g.weight("ws", np.array(["s"])), ll.DTypeError, "weight 'ws'"),
    "constant of a str": Case(lambda w: w.g.constant("one"), ll.ArgumentError, "Graph.constant(value='one')"),
    "arange of -3": Case(lambda w: w.g.arange(-3), ll.ArgumentError, "Graph.arange(n=-3)"),
    "axis as a str": Case(lambda w: w.a.sum("rows"), ll.ArgumentError, "axis='rows'"),
    "axis out of range": Case(lambda w: w.a.sum(5), ll.ShapeError, "axis 5"),
    "reshape to other count": Case(lambda w: w.a.reshape(4, 2), ll.ShapeError, "[4, 2]"),
    "permute repeats": Case(lambda w: w.a.permute(0, 0), ll.ShapeError, "(0, 0)"),
    "matmul mismatch": Case(lambda w: w.a @ w.a, ll.ShapeError, "[2, 3] and [2, 3]"),
    "add a str": Case(lambda w: w.a + "x", TypeError, "'x'"),
    "operands of two graphs": Case(lambda w: w.a + w.other_a, ll.ShapeError, "different graphs"),
    "cast to a str": Case(lambda w: w.a.cast("f16"), ll.DTypeError, "dtype='f16'"),
    "slice step 0": Case(lambda w: w.a[::0], ll.ArgumentError, "slice(None, None, 0)"),
    "index out of range": Case(lambda w: w.a[5], ll.ShapeError, "index 5"),
    "power of a str": Case(lambda w: w.a ** "2", ll.ArgumentError, "exponent='2'"),
    "output name not a str": Case(lambda w: w.a.output(5), ll.ArgumentError, "output(name=5)"),
    "output name taken": Case(lambda w: w.a.output("y"), ll.LuminalError, "output named 'y'"),
    "concat of nothing": Case(lambda w: ll.concat([], 0), ll.ShapeError, "at least one tensor"),
    # ---- compiling
    "compile an int": Case(lambda w: ll.compile(123), ll.ArgumentError, "ll.compile(program=123)"),
    "fusion as a str": Case(lambda w: ll.compile(w.g, fusion="yes"), ll.ArgumentError, "fusion='yes'"),
    "graph with inputs": Case(lambda w: ll.compile(w.g, (w.X,)), ll.ArgumentError, "ll.compile(example_inputs="),
    "graph with an option": Case(lambda w: ll.compile(w.g, strict=True), ll.ArgumentError, "['strict']"),
    "graph without outputs": Case(lambda w: ll.compile(ll.Graph()), ll.LuminalError, "no outputs"),
    "module without inputs": Case(lambda w: ll.compile(w.module), ll.ArgumentError, "example_inputs=None"),
    "module on an int": Case(lambda w: ll.compile(w.module, 5), ll.ArgumentError, "example_inputs=5"),
    "module with a bad option": Case(lambda w: ll.compile(w.module, (w.X,), bogus=1), ll.ArgumentError, "['bogus']"),
    # ---- running
    "an input missing": Case(lambda w: w.comp.run(w.X), ll.ArgumentError, "missing input(s) ['b']"),
    "an input too many": Case(lambda w: w.comp.run(w.X, w.W, w.W), ll.ArgumentError, "3 inputs given"),
    "an input twice": Case(lambda w: w.comp.run(w.X, w.W, a=2 * w.X), ll.ArgumentError, "input 'a' is given twice"),
    "an unknown keyword": Case(lambda w: w.comp.run(w.X, c=w.W), ll.ArgumentError, "unknown input name(s) ['c']"),
    "f64 input": Case(lambda w: w.comp.run(w.X.double(), w.W), ll.DTypeBoundaryError, "input 'a' is f64"),
    "input of another shape": Case(lambda w: w.comp.run(torch.randn(3, 3), w.W), ll.ShapeError, "input 'a'"),
    "input as a list": Case(lambda w: w.comp.run([1.0, 2.0], w.W), ll.DTypeBoundaryError, "input 'a'"),
    "run on a tpu": Case(lambda w: w.comp.run(w.X, w.W, device="tpu"), ll.ArgumentError, "device='tpu'"),
    "torch program, wrong keyword": Case(lambda w: w.tcomp(y=w.X), ll.ArgumentError, "unknown input name(s) ['y']"),
    # ---- the e-graph
    "e-class by int": Case(lambda w: w.comp.egraph.eclass(12), ll.NoEClassError, "EGraph.eclass(cid=12)"),
    "e-class not there": Case(lambda w: w.comp.egraph.eclass("c999999"), ll.NoEClassError, "cid='c999999'"),
    "HLIR node not there": Case(lambda w: w.comp.egraph.eclass_of(10**6), ll.NoEClassError, "1000000"),
    "unknown ruleset": Case(lambda w: w.comp.egraph.run("nope"), ll.ArgumentError, "EGraph.run(ruleset='nope')"),
    "zero iterations": Case(lambda w: w.comp.egraph.run(iterations=0), ll.ArgumentError, "iterations=0"),
    "no e-nodes allowed": Case(lambda w: w.comp.egraph.saturate(max_enodes=0), ll.ArgumentError, "max_enodes=0"),
    "negative timeout": Case(lambda w: w.comp.egraph.saturate(timeout=-1), ll.ArgumentError, "timeout=-1"),
    "rounds as a str": Case(lambda w: w.comp.egraph.saturate(max_rounds="3"), ll.ArgumentError, "max_rounds='3'"),
    "step timeout as a str": Case(lambda w: w.comp.egraph.step(timeout="fast"), ll.ArgumentError, "timeout='fast'"),
    "rules not text": Case(lambda w: w.comp.egraph.add_rules(5), ll.ArgumentError, "add_rules(text=5)"),
    "rules unclosed": Case(lambda w: w.comp.egraph.add_rules("(rule ((= ?x (MAdd ?a ?b)))"), ll.EgglogError,
                           "line 1, column 1: a ( is never closed"),
    "rules of an unknown op": Case(lambda w: w.comp.egraph.add_rules("(rewrite (Foo ?a) ?a)"), ll.EgglogError,
                                   "line 1, column 10: no function or constructor Foo"),
    "rules of the wrong arity": Case(lambda w: w.comp.egraph.add_rules("\n(rewrite (MAdd ?a) ?a)"), ll.EgglogError,
                                     "line 2, column 10: (MAdd ?a) has the wrong number of arguments: it takes 2"),
    "rules unbound variable": Case(lambda w: w.comp.egraph.add_rules("(rewrite (MAdd ?a ?b) (MAdd ?a ?c))"),
                                   ll.EgglogError, "?c is not bound"),
    "rules of the wrong sort": Case(lambda w: w.comp.egraph.add_rules("(rule ((= ?e (MNum ?n))) ((set (dtype ?e) "
                                                                     "(F16))))"),
                                    ll.EgglogError, "?e is an Expression where an IR is expected"),
    "ruleset name with a space": Case(lambda w: w.comp.egraph.add_rules("", ruleset="my rules"), ll.ArgumentError,
                                      "ruleset='my rules'"),
    "remove an unknown ruleset": Case(lambda w: w.comp.egraph.remove_rules("nope"), ll.ArgumentError,
                                      "EGraph.remove_rules(ruleset='nope')"),
    "picture around nothing": Case(lambda w: w.comp.egraph.picture(around="c999999"), ll.NoEClassError,
                                   "EGraph.picture(cid='c999999')"),
    "picture depth -1": Case(lambda w: w.comp.egraph.picture(depth=-1), ll.ArgumentError, "depth=-1"),
    "picture folded by op": Case(lambda w: w.comp.egraph.picture(fold="op"), ll.ArgumentError,
                                 "EGraph.picture(fold='op'): expected None or \"hlir\""),
    "picture expanding nothing": Case(lambda w: w.comp.egraph.picture(fold="hlir", expand=["h999"]),
                                      ll.ArgumentError, "h999 is not one"),
    "inspector of a str": Case(lambda w: w.comp.egraph.inspector(genome="best"), ll.ArgumentError, "genome='best'"),
    "export to nothing": Case(lambda w: w.comp.egraph.export(None), ll.ArgumentError, "EGraph.export(path=None)"),
    "export to a folder": Case(lambda w: w.comp.egraph.export(w.tmp), ll.ArgumentError, "not a directory"),
    # ---- genomes
    "genome None": Case(lambda w: _set_genome(w, None), ll.ArgumentError, "Compiled.genome(genome=None)"),
    "genome by name": Case(lambda w: _set_genome(w, "fused"), ll.ArgumentError, "genome='fused'"),
    "genome of another program": Case(lambda w: _set_genome(w, w.other.genome), ll.ArgumentError,
                                      "another program"),
    "LLIR of another's genome": Case(lambda w: w.comp.llir(w.other.genome), ll.ArgumentError,
                                     "Compiled.llir(genome=<Genome"),
    "stages of a str": Case(lambda w: w.comp.stages("best"), ll.ArgumentError, "Compiled.stages(genome='best')"),
    "pipeline of another's genome": Case(lambda w: w.comp.pipeline(w.other.genome), ll.ArgumentError,
                                         "another program"),
    "random genome seed a str": Case(lambda w: w.comp.random_genome(seed="a"), ll.ArgumentError, "seed='a'"),
    "mutate -1 times": Case(lambda w: w.comp.genome.mutate(-1, random.Random(0)), ll.ArgumentError, "n=-1"),
    "mutate without a Random": Case(lambda w: w.comp.genome.mutate(1, 0), ll.ArgumentError, "rng=0"),
    "alternatives of nothing": Case(lambda w: w.comp.choice_space().alternatives(w.comp.genome, "nope"),
                                    ll.NoEClassError, "cid='nope'"),
    # ---- search
    "generations -2": Case(_search(generations=-2), ll.ArgumentError, "Compiled.search(generations=-2)"),
    "generation size 0": Case(_search(generation_size=0), ll.ArgumentError, "generation_size=0"),
    "no mutations": Case(_search(mutations=0), ll.ArgumentError, "mutations=0"),
    "keep none": Case(_search(keep_best=0), ll.ArgumentError, "keep_best=0"),
    "budget -1": Case(_search(budget=-1), ll.ArgumentError, "budget=-1"),
    "budget a str": Case(_search(budget="fast"), ll.ArgumentError, "budget='fast'"),
    "seed 1.5": Case(_search(seed=1.5), ll.ArgumentError, "seed=1.5"),
    "search on a tpu": Case(_search(device="tpu"), ll.ArgumentError, "device='tpu'"),
    "search trials 0": Case(_search(trials=0), ll.ArgumentError, "trials=0"),
    "cost not a function": Case(_search(cost=5), ll.ArgumentError, "cost=5"),
    "on_candidate a str": Case(_search(on_candidate="print"), ll.ArgumentError, "on_candidate='print'"),
    "stop a bool": Case(_search(stop=True), ll.ArgumentError, "stop=True"),
    "memory budget -5": Case(_search(memory_budget=-5), ll.ArgumentError, "memory_budget=-5"),
    "inputs one tensor": Case(_search(inputs=World.X), ll.ArgumentError, "Compiled.search(inputs=tensor("),
    "inputs one short": Case(_search(inputs=[World.X]), ll.ArgumentError, "missing input(s) ['b']"),
    "random inputs too big": Case(_huge_search, ll.MemoryBudgetError, "random input 'big'"),
    # ---- profile
    "profile trials 0": Case(lambda w: w.comp.profile(trials=0), ll.ArgumentError, "Compiled.profile(trials=0)"),
    "profile warmup -1": Case(lambda w: w.comp.profile(warmup=-1), ll.ArgumentError, "warmup=-1"),
    "profile another's genome": Case(lambda w: w.comp.profile(genome=w.other.genome), ll.ArgumentError,
                                     "Compiled.profile(genome=<Genome"),
    "profile on a gpu": Case(lambda w: w.comp.profile(device="gpu"), ll.ArgumentError, "device='gpu'"),
    # ---- report
    "report to an int": Case(lambda w: w.comp.report(123), ll.ArgumentError, "Compiled.report(path=123)"),
    "report to a folder": Case(lambda w: w.comp.report(w.tmp), ll.ArgumentError, "not a directory"),
    "report under a file": Case(_parent_is_a_file, ll.ArgumentError, "a_file/report.html"),
    # ---- torch.compile
    "unknown option": Case(_torch_compile({"generation": 2}), ll.ArgumentError, "['generation']"),
    "option budget -1": Case(_torch_compile({"budget": -1}), ll.ArgumentError, "budget=-1"),
    "option device tpu": Case(_torch_compile({"device": "tpu"}), ll.ArgumentError, "device='tpu'"),
    "programs of an int": Case(lambda w: ll.programs(5), TypeError, "not int"),
    # ---- the magic and the profiler widget
    "magic search 0": Case(_magic("--search 0 g"), UsageError, "needs at least 1 generation, got 0"),
    "magic unknown name": Case(_magic("nope x"), UsageError, "name 'nope' is not defined"),
    "magic graph with inputs": Case(_magic("g x"), UsageError, "ll.compile(example_inputs="),
    "magic model without inputs": Case(_magic("model"), UsageError, "model needs example inputs"),
    "profiler generations -1": Case(lambda w: w.comp.profiler(generations=-1), ll.ArgumentError,
                                    "Compiled.profiler(generations=-1)"),
    "profiler on a tpu": Case(lambda w: w.comp.profiler(device="tpu"), ll.ArgumentError, "device='tpu'"),
}


def _raised(error: BaseException) -> BaseException:
    """The error itself, or the one torch.compile wrapped."""
    return getattr(error, "inner_exception", None) or error


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_bad_argument_is_named_and_nothing_is_lost(case: Case, world: World) -> None:
    with pytest.raises(Exception) as raised:
        case.call(world)
    error = _raised(raised.value)
    assert isinstance(error, case.error), f"{type(error).__name__}: {error}"
    first = str(error).splitlines()[0]
    assert case.names in first, first
    world.still_works()


def test_the_walk_covers_the_api() -> None:
    areas = {"Graph.", "ll.compile", "run", "EGraph.", "genome", "Compiled.search", "Compiled.profile", "report",
             "export", "magic"}
    assert len(CASES) >= 60
    text = " ".join(f"{label} {case.names}" for label, case in CASES.items())
    assert all(area in text for area in areas), [area for area in areas if area not in text]


def test_cuda_without_a_gpu_names_why(world: World) -> None:
    reason = cuda_unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is here: device='cuda' runs")
    with pytest.raises(ll.NoDeviceError, match="device='cuda'"):
        world.comp.run(world.X, world.W, device="cuda")
    world.still_works()


def test_a_rule_that_never_saturates_cannot_starve_lowering() -> None:
    """A user rule that keeps adding e-nodes in a built-in ruleset: the round still lowers (the program runs and
    says which ruleset did not saturate), and removing the rules brings the e-graph back."""
    g = ll.Graph()
    a, b = g.tensor((2, 3), name="a"), g.tensor((2, 3), name="b")
    (a * b + a).output("y")
    comp = ll.compile(g)
    clean = comp.egraph.saturate()
    comp.egraph.add_rules("(rule ((= ?e (MNum ?n))) ((union ?e (MAdd (MNum (+ ?n 1)) (MNum -1)))))",
                          ruleset="expr")
    comp.egraph.reset()
    outcome = comp.egraph.saturate()
    assert not outcome.saturated
    assert str(outcome.stopped).startswith("expr did not saturate in 100 iterations; the rest of the round ran")
    assert "comp.egraph.remove_rules('expr')" in str(outcome.stopped)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(comp.run(x, y), x * y + x)
    comp.egraph.remove_rules("expr")
    assert comp.egraph.history == [] and "MNum (+ ?n 1)" not in comp.egraph.program
    again = comp.egraph.saturate()
    assert again.saturated and (again.enodes, again.eclasses) == (clean.enodes, clean.eclasses)
    torch.testing.assert_close(comp.run(x, y), x * y + x)


def test_a_stopped_saturation_is_named_when_a_genome_is_refused() -> None:
    """A budget that stops the first round before lowering: running says which kernel is missing and why."""
    g = ll.Graph()
    (g.tensor((2, 3), name="a").sin() * 2).output("y")
    comp = ll.compile(g)
    outcome = comp.egraph.saturate(max_enodes=1)
    assert outcome.stopped is not None
    with pytest.raises(ll.Refused) as raised:
        comp.run(torch.randn(2, 3))
    assert isinstance(raised.value, ll.LuminalError)
    assert "the e-graph's saturation stopped: e-node budget" in str(raised.value).splitlines()[0]


def test_a_rule_failing_while_running_names_its_ruleset_and_comes_out() -> None:
    g = ll.Graph()
    (g.tensor((2, 3), name="a") * 2).output("y")
    comp = ll.compile(g)
    comp.egraph.add_rules("(function pick (i64) i64 :no-merge)\n"
                          "(rule ((= ?e (MNum ?n))) ((set (pick ?n) ?n) (set (pick ?n) (+ ?n 1))))", ruleset="clash")
    with pytest.raises(ll.EgglogError) as raised:
        comp.egraph.step()
    assert str(raised.value).splitlines()[0] == (
        "round: ruleset clash failed: a rule gave function pick two values for one key, and it has no :merge to choose "
        "between them; the e-graph was restored to before this step; take it out with "
        "comp.egraph.remove_rules('clash')")
    assert comp.egraph.history == []
    comp.egraph.remove_rules("clash")
    assert "clash" not in comp.egraph.rulesets and comp.egraph.saturate().saturated
    x = torch.randn(2, 3)
    torch.testing.assert_close(comp.run(x), x * 2)
