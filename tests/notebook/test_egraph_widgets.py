"""The e-graph widgets, driven as a notebook user would (button clicks, typing) and through the
methods the controls call: ``eg.stepper()`` shows what each step did and resets; ``eg.inspector()``
finds e-classes and shows their e-nodes, neighbours, origin and genome pick."""

from __future__ import annotations

import random
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import ipywidgets
import pytest

import luminal_lab as ll
from luminal_lab.egraph import EGraph
from luminal_lab.llir.view import format_seconds
from luminal_lab.notebook.inspector import EClassInspector
from luminal_lab.notebook.stepper import RuleStepper

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
SVG_NS = "{http://www.w3.org/2000/svg}"
SPLIT_4 = '(rewrite (MMul (MNum 4) ?a) (MAdd (MMul (MNum 2) ?a) (MMul (MNum 2) ?a)) :name "split-4")'


@pytest.fixture
def program() -> Iterator[ll.Compiled]:
    """sin((a * 1) + 0) on a 4x4 input, compiled without fusion (a small e-graph); its worker is closed after."""
    g = ll.Graph()
    a = g.tensor((4, 4), name="a")
    ((a * 1.0) + 0.0).sin().output("y")
    comp = ll.compile(g, fusion=False)
    yield comp
    comp.egraph.close()


def counts(eg: EGraph) -> tuple[int, int]:
    return eg.snapshot.n_enodes, eg.snapshot.n_eclasses


def table_rows(markup: str) -> list[tuple[str, int]]:
    """(rule, matches) of each row of the matches table, in order."""
    return [(rule, int(n)) for rule, n in
            re.findall(r"<tr><td>([^<]*)</td><td style='text-align:right'>(\d+)</td>", markup)]


def svg_classes(svg: str | None) -> dict[str, set[str]]:
    """The picture's SVG groups: id -> their classes."""
    assert svg is not None
    return {g.get("id"): set(g.get("class", "").split()) for g in ET.fromstring(svg).iter(f"{SVG_NS}g")}


def added_enodes(svg: str | None) -> set[str]:
    """Ids of the picture's e-node boxes with SVG class ``added``."""
    return {gid for gid, classes in svg_classes(svg).items() if {"enode", "added"} <= classes}


def expected_points(eg: EGraph) -> list[tuple[int, int, int]]:
    first = eg.history[0]
    return [(0, first.enodes_before, first.eclasses_before),
            *((r.index, r.enodes_after, r.eclasses_after) for r in eg.history)]


# ---- the stepper -------------------------------------------------------------------------------
def test_stepper_starts_at_the_egraph_as_built(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    assert isinstance(stepper, RuleStepper) and isinstance(stepper, ipywidgets.VBox)
    assert "application/vnd.jupyter.widget-view+json" in stepper._repr_mimebundle_()
    assert stepper.last_report is None and stepper.fired == {}
    assert stepper.plot_points == [(0, *counts(eg))]
    assert "No step yet" in stepper.matches_html
    assert list(stepper.ruleset_dropdown.options) == eg.rulesets
    assert stepper.plot_svg.startswith("<svg") and stepper.plot_view.value == stepper.plot_svg
    assert whole_ticks(stepper.plot_svg), "one point on an axis to step 1, not one from -0.045 to 0.045"


SVG = "{http://www.w3.org/2000/svg}"


def whole_ticks(svg: str) -> bool:
    """Whether a matplotlib SVG's tick labels (text: the stepper saves them so) are all whole numbers, at least one
    on each axis."""
    root = ET.fromstring(svg)
    labels = {axis: [t.text for g in root.iter(f"{SVG}g") if g.get("id", "").startswith(f"{axis}tick_")
                     for t in g.iter(f"{SVG}text")] for axis in ("x", "y")}
    return all(labels.values()) and all(label.isdigit() for found in labels.values() for label in found)


@needs_dot
def test_the_status_table_plot_and_picture_number_steps_alike(program: ll.Compiled) -> None:
    """Step N is the N-th step everywhere (step 0 is the e-graph as built); rule times are in the unit
    that reads them (ns, µs, ms or s); a reset stepper shows the e-graph as built on a plot that is not degenerate."""
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    stepper.step_button.click()
    stepper.step_button.click()
    report = eg.history[-1]
    assert report.index == 2 and stepper.status_text.startswith("round: step 2;")
    assert "<b>round #2</b>" in stepper.matches_html
    assert stepper.plot_points[-1] == (2, report.enodes_after, report.eclasses_after)
    assert eg.picture().caption.startswith("E-graph after round #2")
    assert whole_ticks(stepper.plot_svg)
    times = re.findall(r"<td style='text-align:right'>([^<]*)</td></tr>", stepper.matches_html)
    assert times and all(re.fullmatch(r"[\d.]+ (ns|µs|ms|s)", t) for t in times), times
    assert f"in {format_seconds(report.wall_seconds)}</p>" in stepper.matches_html, "the step's own time"
    outcome = stepper.saturate()
    assert outcome is not None and outcome.saturated
    first, last = stepper.reports[0], stepper.reports[-1]
    assert stepper.status_text.startswith(f"saturate: saturated after {outcome.rounds} round")
    title = (f"{first.label} #{first.index}" if outcome.rounds == 1
             else f"{outcome.rounds} steps, #{first.index}–#{last.index}")
    assert f"<b>{title}</b>" in stepper.matches_html
    assert last.index == len(eg.history) and first.index == 3
    stepper.reset()
    assert stepper.plot_points == [(0, *counts(eg))] and "No step yet" in stepper.matches_html
    assert whole_ticks(stepper.plot_svg)


@needs_dot
def test_step_round_shows_what_fired_and_what_was_added(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    assert added_enodes(stepper.picture_svg) == set(), "nothing is new in the e-graph as built"
    before = counts(eg)
    stepper.step_button.click()
    report = eg.history[-1]
    assert len(eg.history) == 1 and stepper.last_report is report
    assert report.enodes_after > report.enodes_before, "the first round adds the kernel e-nodes"
    expected = sorted(report.fired().items(), key=lambda kv: (-kv[1], kv[0]))
    assert list(stepper.fired.items()) == expected
    assert table_rows(stepper.matches_html) == expected, "the table lists exactly the rules that fired"
    assert all(report.matches[rule] == 0 for rule in report.matches if rule not in stepper.fired)
    assert (f"e-nodes {before[0]} → {report.enodes_after}, e-classes {before[1]} → {report.eclasses_after}"
            in stepper.matches_html)
    assert f"{report.total_matches} matches in {len(expected)} rules" in stepper.matches_html
    assert stepper.plot_points == [(0, *before), (1, report.enodes_after, report.eclasses_after)]
    assert stepper.status_text == f"round: step 1; {report.enodes_after} e-nodes, {report.eclasses_after} e-classes"
    added = added_enodes(stepper.picture_svg)
    assert added and added <= {n.id for c in eg.eclasses if c.sort == "IR" for n in c.nodes}
    assert stepper.picture_svg in stepper.picture_view.value

    stepper.saturate()  # a round that changes nothing follows: nothing is outlined any more
    assert not eg.history[-1].updated and added_enodes(stepper.picture_svg) == set()


def test_plot_has_a_point_per_step_plus_the_start(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    built = counts(eg)
    stepper.run_ruleset("kernel_lower")
    stepper.step_round()
    stepper.run_ruleset("algebra")
    assert len(stepper.plot_points) == len(eg.history) + 1 == 4
    assert stepper.plot_points == expected_points(eg)
    assert stepper.plot_points[0] == (0, *built) and stepper.plot_points[-1] == (3, *counts(eg))
    assert len({p[1] for p in stepper.plot_points}) > 1, "the e-graph grew"


def test_run_each_ruleset_from_the_dropdown(program: ll.Compiled) -> None:
    """Each ruleset in turn, from the e-graph as built, fires exactly its own rules."""
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    fired = {
        "expr": {"init-of-one": 3},  # the one-element lists: their shapes and strides
        "dtype_prop": {"dtype-Constant": 2, "dtype-Add": 1, "dtype-Input": 1, "dtype-Mul": 1, "dtype-Output": 1,
                       "dtype-Sin": 1},
        "early": {"add-zero-float-rhs": 1, "mul-one-float-rhs": 1},
        "kernel_lower": {"lower-Constant": 2, "lower-Add": 1, "lower-Mul": 1, "lower-Sin": 1},
        "algebra": {"commute-Add": 1, "commute-Mul": 1},
        "cleanup": {"cleanup-Constant": 2, "cleanup-Add": 1, "cleanup-Mul": 1, "cleanup-Sin": 1},
    }
    assert eg.rulesets == list(fired)
    for ruleset, rules in fired.items():
        stepper.ruleset_dropdown.value = ruleset
        stepper.run_button.click()
        report = eg.history[-1]
        assert stepper.last_report is report and report.label == ruleset
        assert stepper.fired == rules == report.fired(), ruleset
        assert dict(table_rows(stepper.matches_html)) == rules
        assert stepper.status_text.startswith(f"ruleset {ruleset}: step {report.index};")
    assert eg.stepper().fired == fired["cleanup"], "a new stepper shows the e-graph's last step"
    assert stepper.plot_points == expected_points(eg)


def test_a_failing_action_is_shown_not_raised(program: ll.Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    assert stepper.run_ruleset("nope") is None
    assert isinstance(stepper.error, ll.ArgumentError)
    assert stepper.status_text.startswith("ruleset nope failed: ArgumentError: EGraph.run(ruleset='nope'): expected")
    assert "failed" in stepper.status_view.value and eg.history == []

    def broken(**budget) -> None:
        raise ll.EgglogError("the worker said no")

    monkeypatch.setattr(eg, "step", broken)
    stepper.step_button.click()  # would raise out of the callback if the widget let it through
    assert stepper.status_text == "round failed: EgglogError: the worker said no"
    assert stepper.last_report is None and eg.history == []
    monkeypatch.undo()
    assert stepper.step_round() is eg.history[0] and stepper.error is None


def test_saturate_stops_at_the_budgets_in_the_boxes(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    stepper.max_enodes.value = 10
    stepper.saturate_button.click()
    outcome = stepper.last_saturation
    assert outcome is not None and not outcome.saturated and outcome.rounds == 1
    assert str(outcome.stopped) == f"e-node budget: {counts(eg)[0]} e-nodes > 10"
    assert stepper.last_report is eg.history[-1] and stepper.last_report.stopped is outcome.stopped
    assert stepper.status_text == (f"saturate: stopped: e-node budget: {counts(eg)[0]} e-nodes > 10 after 1 round; "
                                   f"{counts(eg)[0]} e-nodes, {counts(eg)[1]} e-classes")
    assert f"stopped: e-node budget: {counts(eg)[0]} e-nodes &gt; 10" in stepper.matches_html
    assert "#b45309" in stepper.status_view.value, "a budget stop is shown as such, not as an error"

    stepper.max_enodes.value = 1_000_000
    stepper.timeout.value = 0.0
    stepper.saturate()
    assert stepper.last_saturation.rounds == 0 and stepper.reports == []
    assert str(stepper.last_saturation.stopped) == "time budget of 0 s used up"
    assert "The last action recorded no step" in stepper.matches_html
    assert "stopped: time budget of 0 s used up" in stepper.matches_html

    stepper.timeout.value = 60.0
    outcome = stepper.saturate()
    assert outcome is stepper.last_saturation and outcome.saturated and outcome.stopped is None
    assert stepper.status_text.startswith(f"saturate: saturated after {outcome.rounds} rounds;")
    assert len(stepper.reports) == outcome.rounds and stepper.reports == eg.history[-outcome.rounds:]
    assert stepper.plot_points == expected_points(eg)


def test_reset_goes_back_to_the_egraph_as_built(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    stepper = eg.stepper()
    built, first = counts(eg), stepper.step_round()
    stepper.saturate()
    assert counts(eg) != built
    stepper.reset_button.click()
    assert eg.history == [] and eg.status == "built" and counts(eg) == built
    assert stepper.last_report is None and stepper.plot_points == [(0, *built)]
    assert stepper.status_text == f"reset: built; {built[0]} e-nodes, {built[1]} e-classes"
    again = stepper.step_round()
    assert (again.index, again.matches, again.added_enodes, again.merged) == (
        1, first.matches, first.added_enodes, first.merged), "the same first round as before the reset"


def test_reset_keeps_the_rules_added(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    built = counts(eg)
    eg.step()
    eg.add_rules(SPLIT_4, ruleset="strides")
    stepper = eg.stepper()
    assert stepper.last_report is eg.history[-1]
    stepper.reset()
    assert counts(eg) == built and "strides" in eg.rulesets
    assert list(stepper.ruleset_dropdown.options) == eg.rulesets
    stepper.run_ruleset("strides")
    assert stepper.fired["split-4"] >= 1 and counts(eg)[0] > built[0]


@needs_dot
def test_without_graphviz_the_widgets_say_so(program: ll.Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    comp = program
    eg = comp.egraph
    monkeypatch.setenv("PATH", "")
    stepper = eg.stepper()
    stepper.step_round()
    assert stepper.picture_svg is None and "<svg" not in stepper.picture_view.value
    assert "No picture: Graphviz&#x27;s `dot` is not installed" in stepper.picture_view.value
    inspector = eg.inspector()
    inspector.select(eg.eclass_of(0).id)
    assert inspector.picture_svg is None
    assert "No picture: Graphviz&#x27;s `dot` is not installed" in inspector.picture_view.value


# ---- the inspector -----------------------------------------------------------------------------
def test_search_by_hlir_id_finds_the_node_eclass(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    eg.step()
    inspector = eg.inspector()
    assert isinstance(inspector, EClassInspector) and isinstance(inspector, ipywidgets.VBox)
    for node in eg.graph.nodes:
        found = inspector.search(f"h{node.id}")
        assert found == [eg.eclass_of(node).id], node
        assert [value for _, value in inspector.eclass_list.options] == found
    assert inspector.search("h12") == [] and inspector.message == "No e-class matches 'h12'."
    inspector.search_box.value = "h5"  # typing: a single match is shown straight away
    assert inspector.selected == eg.eclass_of(5).id and inspector.details["hlir"][0]["id"] == "h5"


def test_search_by_id_op_and_sort(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    eg.step()
    inspector = eg.inspector()
    classes = eg.snapshot.classes
    everything = inspector.search("")
    ir = [cid for cid in everything if classes[cid].sort == "IR"]
    assert set(everything) == set(classes) and everything[:len(ir)] == ir, "IR e-classes first"
    assert ir == [eg.eclass_of(h).id for h in (0, 1, 3, 5, 6)], "in HLIR order"
    assert set(inspector.search("ilist")) == {cid for cid, c in classes.items() if c.sort == "IList"}
    sin = eg.eclass_of(5).id
    kernel_sin = {cid for cid, c in classes.items() if any(n.op == "KernelSin" for n in c.nodes)}
    assert set(inspector.search("KernelSin")) == {sin, *kernel_sin}, "IR e-classes match by their OpKind names"
    assert inspector.search("KernelSin")[0] == sin
    assert inspector.search(sin)[0] == sin and all(sin in cid for cid in inspector.matches)
    assert inspector.search("zzz") == [] and inspector.message == "No e-class matches 'zzz'."
    assert inspector.eclass_list.options == ()


def test_select_shows_the_snapshot_and_the_compiled_genome_pick(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    eg.step()
    inspector = eg.inspector()
    cid = eg.eclass_of(2).id  # a * 1 was merged with a (and so was + 0)
    details = inspector.select(cid)
    eclass = eg.snapshot.classes[cid]
    assert details is inspector.details and inspector.selected == cid and inspector.eclass_list.value == cid
    snapshot = eg.snapshot
    assert details["enodes"] == [{"id": n.id, "kind": snapshot.kind(n), "reads": snapshot.operands(n), "op": n.op,
                                  "literals": list(n.literals), "children": list(n.children), "subsumed": n.subsumed}
                                 for n in eclass.nodes]
    assert details["children"] == list(dict.fromkeys(c for n in eclass.nodes for c in n.children))
    assert details["parents"] == [{"enode": p.id, "op": p.op, "kind": snapshot.kind(p), "eclass": p.eclass}
                                  for p in eclass.parents]
    assert details["parents"], "the input is read by the ops that use it"
    assert details["hlir"] == [{"id": "h0", "op": "Input", "label": "Input a"},
                               {"id": "h2", "op": "Mul", "label": "Mul"}, {"id": "h4", "op": "Add", "label": "Add"}]
    assert details["picked"] == comp.genome.pick(cid).id
    assert details["best_term"] == eg.snapshot.best_term(cid)
    assert (details["sort"], details["dtype"]) == ("IR", "F32")
    assert f"{details['picked']} (✔)" in inspector.details_view.value
    kind = next(c for c in details["children"] if eg.snapshot.classes[c].sort == "OpKind")
    assert inspector.select(kind)["picked"] is None, "an OpKind e-class is not one of the genome's choices"


def test_a_given_genome_overrides_the_compiled_one(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    eg.step()
    mutated = comp.genome.mutate(1, random.Random(0))
    ((cid, old, new),) = mutated.mutations
    options = mutated.space.options[mutated.space.position[cid]]
    assert eg.inspector().select(cid)["picked"] == comp.genome.pick(cid).id == options[old].id
    picked = eg.inspector(genome=mutated).select(cid)["picked"]
    assert picked == mutated.pick(cid).id == options[new].id
    assert picked != comp.genome.pick(cid).id


def test_no_genome_pick_before_the_egraph_has_stepped(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    details = eg.inspector().select(eg.eclass_of(5).id)
    assert details["picked"] is None
    assert eg.history == [], "the inspector must not saturate the e-graph to find a genome"


@needs_dot
def test_navigation_through_children_and_parents(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    eg.step()
    inspector = eg.inspector()
    sin = eg.eclass_of(5).id
    inspector.eclass_list.value = sin  # clicking it in the list
    assert inspector.selected == sin and inspector.details["id"] == sin
    assert "focus" in svg_classes(inspector.picture_svg)[sin], "the picture is drawn around the selected e-class"
    buttons = {b.tooltip.removeprefix("select "): b for b in inspector.children_box.children}
    assert list(buttons) == inspector.details["children"]
    ilist = next(c for c in buttons if c.startswith("IList"))
    assert buttons[ilist].description == f"{ilist} · ICons", "a link names the e-class's op"
    buttons[ilist].click()
    assert inspector.selected == ilist and sin in [p["eclass"] for p in inspector.details["parents"]]
    parents = {b.tooltip.removeprefix("select "): b for b in inspector.parents_box.children}
    assert parents[sin].description == f"{sin} · KernelSin"
    parents[sin].click()
    assert inspector.selected == sin


def test_enodes_are_shown_in_the_compilers_terms(program: ll.Compiled) -> None:
    """An IR e-class's e-nodes read as the kernels they are (``KernelSin``, not ``Op``), with the e-class's shape and
    dtype and the e-classes each reads; the repr and the list name the ops too, and no list entry is cut off."""
    comp = program
    eg = comp.egraph
    eg.step()
    snapshot = eg.snapshot
    sin, source = eg.eclass_of(5).id, eg.eclass_of(4).id
    assert "KernelSin" in snapshot.classes[sin].ops and "Op" not in snapshot.classes[sin].ops
    assert "KernelSin" in repr(snapshot.classes[sin]) and "[Op" not in repr(snapshot.classes[sin])
    inspector = eg.inspector()
    details = inspector.select(sin)
    kernel = next(n for n in details["enodes"] if n["kind"] == "KernelSin")
    assert kernel["op"] == "Op" and kernel["reads"] == [source]
    assert details["shape"] == "[4, 4]" and details["dtype"] == "F32"
    shown = inspector.details_view.value
    assert "<b>KernelSin</b>" in shown and "[4, 4] F32" in shown and f"{source} · " in shown
    assert details["picked"] == comp.genome.pick(sin).id and "✔ picked" in shown
    for label, cid in inspector.eclass_list.options:
        assert all(op in label for op in snapshot.classes[cid].ops) and "…" not in label


def test_details_always_belong_to_a_listed_match(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    eg.step()
    inspector = eg.inspector()
    sin = eg.eclass_of(5).id
    inspector.select(sin)
    inspector.search_box.value = "IList"  # several matches, none of them the selected e-class
    assert sin not in inspector.matches and len(inspector.matches) > 1
    assert inspector.selected is None and inspector.details == {} and inspector.details_view.value == ""
    inspector.select(sin)  # selected again: a search whose matches keep it listed keeps it selected
    inspector.search("Kernel")
    assert inspector.selected == sin and inspector.details["id"] == sin


def test_unknown_or_merged_eclass(program: ll.Compiled) -> None:
    comp = program
    eg = comp.egraph
    inspector = eg.inspector()
    with pytest.raises(KeyError, match="IR-999"):
        inspector.select("IR-999")
    mul = eg.eclass_of(2).id
    inspector.select(mul)
    report = eg.step()
    assert mul in report.merged, "x * 1 was merged into x"
    inspector.refresh()  # the refresh button: a message, not an exception
    assert inspector.selected is None and inspector.details == {}
    assert inspector.message == f"There is no e-class {mul!r} in the e-graph now (a step may have merged it)."
    assert mul not in inspector.matches
