"""The e-graph stage: the HLIR as an egglog program, stepped rule by rule under budgets.

A *round* of the default schedule runs ``expr`` and then ``dtype_prop`` to saturation,
then one pass each of ``early``, ``kernel_lower``, ``algebra``, ``fusion_facts`` and
``fusion_pair``, then ``fusion_grow`` and ``fusion_merge`` together until neither adds anything
(regions grow one op per iteration), then one pass of any user rulesets and of ``cleanup``. With
``fusion=False`` the four fusion rulesets are left out of the schedule.

``step()`` runs one round, ``run(ruleset, n)`` one ruleset n times, ``saturate()`` rounds
until nothing changes or a budget is hit. Every one of them
records a ``StepReport`` in ``history``.

egglog runs in a worker process (``worker.EgglogWorker``). Budgets are checked after every
egglog iteration: an e-node limit (with a growth forecast, so an iteration that would
multiply the e-graph past it is not started), a time limit, and the worker's memory
limit. A stop leaves the e-graph usable: a killed worker is rebuilt by replaying history.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.arguments import fail, integer, one_of, seconds, writable
from ..core.errors import BudgetExceeded, EgglogError
from ..core.phases import phase
from ..core.stage import Stage
from ..hlir.graph import Graph, Node
from ..hlir.tensor import GraphTensor
from . import saved
from .fusion import FUSION_RULESETS
from .ops import RULESETS, OpRegistry, default_registry
from .schema import emit, rules, schema
from .snapshot import PROGRAM_FUNCTIONS, EClass, Snapshot
from .worker import POSITION, EgglogWorker, WorkerDied, shift_position
from .worker import command_spans as _command_spans

if TYPE_CHECKING:
    from ..draw import Picture
    from ..notebook.inspector import EClassInspector
    from ..notebook.stepper import RuleStepper

DEFAULT_MAX_ENODES = 1_000_000
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_ROUNDS = 10
SATURATION_GUARD = 100  # iterations of a "to saturation" ruleset before it counts as runaway
MAX_BATCH = 32  # most iterations of a ruleset that keeps the e-graph's size run in one egglog call
RUN_TOGETHER = ("fusion_grow", "fusion_merge")  # rulesets a round runs to a joint fixpoint


class Picks(Protocol):
    """What a genome is to the e-graph: the id of the e-node it picks in each e-class it covers."""

    @property
    def choices(self) -> Mapping[str, str]: ...


def default_memory_limit() -> int:
    """Address space for the egglog worker: a third of this machine's memory, at most 8 GiB."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(total // 3, 8 * 2**30)


@dataclass
class StepReport:
    """What one step did: matches and time per rule, and how the e-graph changed. ``index`` counts the steps from 1
    (step 0 is the e-graph as built), as the stepper's status, table, plot and the pictures' captions do."""

    index: int
    label: str
    matches: dict[str, int]
    seconds: dict[str, float]
    enodes_before: int
    enodes_after: int
    eclasses_before: int
    eclasses_after: int
    grown: dict[str, int] = field(default_factory=dict)  # e-class -> e-nodes it gained
    merged: dict[str, str | None] = field(default_factory=dict)  # vanished e-class -> where it went
    added_enodes: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    updated: bool = False
    stopped: BudgetExceeded | None = None

    @property
    def total_matches(self) -> int:
        return sum(self.matches.values())

    def fired(self) -> dict[str, int]:
        """The rules that matched at least once."""
        return {rule: n for rule, n in self.matches.items() if n}

    def __repr__(self) -> str:
        stop = f", stopped: {self.stopped}" if self.stopped else ""
        return (f"<StepReport #{self.index} {self.label}: {self.total_matches} matches in {len(self.fired())} rules, "
                f"e-nodes {self.enodes_before} -> {self.enodes_after}, e-classes {self.eclasses_before} -> "
                f"{self.eclasses_after}, {len(self.merged)} merged{stop}>")


@dataclass
class Saturation:
    """The outcome of ``saturate``: saturated, or stopped by the budget in ``stopped``."""

    saturated: bool
    rounds: int
    enodes: int
    eclasses: int
    seconds: float
    stopped: BudgetExceeded | None = None

    def __repr__(self) -> str:
        state = "saturated" if self.saturated else f"stopped: {self.stopped}" if self.stopped else "round limit"
        return f"<Saturation {state} after {self.rounds} rounds, {self.eclasses} e-classes, {self.enodes} e-nodes>"


class EGraph(Stage):
    """The e-graph of a graph's HLIR; ``comp.egraph``. Whoever builds it may pass what its views show beside it:
    ``layer``, a rolled graph's layer (its HLIR node ids, markers included, and its copies), and ``genome``, a
    function giving the genome whose picks views show by default (``Compiled`` passes its current genome)."""

    name = "egraph"
    view_module = "luminal_lab.egraph.view"

    def __init__(self, graph: Graph, registry: OpRegistry | None = None, memory_limit: int | None = None,
                 fusion: bool = True, layer: tuple[frozenset[int], int] | None = None,
                 genome: Callable[[], Picks | None] | None = None):
        self.graph = graph
        self.fusion = fusion
        self.registry = registry or default_registry()
        base = _base(self.registry)  # the same for every e-graph of a registry
        self._graph_text = emit(graph)
        self._user_rules: list[tuple[frozenset[str], str]] = []  # (the rulesets its rules join, the text)
        self._user_rulesets: list[str] = []
        self.history: list[StepReport] = []
        self.current_genome = genome
        self.layer = layer
        self._growth: dict[str, float] = {}  # each ruleset's growth factor in its last iteration, for the forecast
        self.status = "built"
        # the worker reads the graph when first asked for anything (a saturation kept on disk may need nothing of it)
        self._worker = EgglogWorker(memory_limit or default_memory_limit(), base, [self._graph_text])
        self._snapshot: Snapshot | None = None  # taken when first needed
        self._serialized = ""  # egglog's serialized e-graph, of which the snapshot was taken

    # ---- the program --------------------------------------------------------------------
    @property
    def program(self) -> str:
        """The egglog text that defines this e-graph (schema, rules, the HLIR, user rules)."""
        return "\n".join([self._worker.base, self._graph_text, *self._user_texts])

    @property
    def _user_texts(self) -> list[str]:
        return [text for _, text in self._user_rules]

    @property
    def _user_joined(self) -> set[str]:
        """The rulesets user rules joined."""
        return {name for names, _ in self._user_rules for name in names}

    @property
    def _functions(self) -> frozenset[str]:
        """The program's functions and relations, the user's included: they annotate e-classes (not e-nodes)."""
        return PROGRAM_FUNCTIONS | {name for text in self._user_texts
                                    for name in re.findall(r"\(function\s+([^\s()]+)", text)}

    @property
    def rulesets(self) -> list[str]:
        """The rulesets a round runs, in order (without the fusion rulesets when fusion is off)."""
        scheduled = [r for r in RULESETS if self.fusion or r not in FUSION_RULESETS]
        return [*scheduled[:-1], *self._user_rulesets, scheduled[-1]]

    def export(self, path: str | Path) -> Path:
        """Write a ``.egg`` file that egglog runs on its own to reach this e-graph's state."""
        path = writable("EGraph.export", path)
        path.write_text(";; exported by luminal_lab: the program, then every command that ran, in order\n"
                        + "\n".join([self._worker.base, *self._worker.log]) + "\n")
        return path

    def add_rules(self, text: str, ruleset: str | None = None) -> None:
        """Add rules in egglog syntax. With ``ruleset``, rules that name none go there. A new
        ruleset (named here or declared in the text) joins every round, before ``cleanup``.
        Errors raise ``EgglogError`` with the offending line and change nothing.

        After the first round ``cleanup`` has subsumed the HLIR ops that have kernel ops, so
        rules added later should match the ``Kernel*`` ops."""
        if not isinstance(text, str):
            fail("EGraph.add_rules", "text", text, "egglog rules as a str")
        body = text
        if ruleset is not None:
            if not isinstance(ruleset, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", ruleset):
                fail("EGraph.add_rules", "ruleset", ruleset, "a ruleset name (an egglog identifier such as 'mine')")
            body = _assign_ruleset(text, ruleset)
        prelude = ""
        if ruleset is not None and ruleset not in self.rulesets:
            prelude = f"(ruleset {ruleset})\n"
        try:
            self._worker.run(prelude + body)
        except EgglogError as error:
            raise _located(error, text, offset=prelude.count("\n")) from None
        declared = re.findall(r"\(ruleset\s+([^\s()]+)\s*\)", prelude + body)
        self._user_rulesets += [name for name in declared if name not in self.rulesets]
        joined = frozenset(declared) | set(re.findall(r":ruleset\s+([^\s()]+)", body))
        self._user_rules.append((joined, prelude + body))
        self._snapshot = self._take_snapshot()

    def remove_rules(self, ruleset: str | None = None) -> None:
        """Take out the rules ``add_rules`` added (those that join ``ruleset``, or all of them), then ``reset``:
        the e-graph as built, with the user rules that remain."""
        joined = sorted(self._user_joined)
        if ruleset is not None and ruleset not in joined:
            fail("EGraph.remove_rules", "ruleset", ruleset,
                 f"a ruleset that added rules joined ({', '.join(map(repr, joined)) or 'none so far'}) or None (all)")
        self._user_rules = [(names, text) for names, text in self._user_rules
                            if ruleset is not None and ruleset not in names]
        self._user_rulesets = [name for name in self._user_rulesets if name in self._user_joined]
        self.reset()

    # ---- running ------------------------------------------------------------------------
    def step(self, max_enodes: int = DEFAULT_MAX_ENODES, timeout: float = DEFAULT_TIMEOUT) -> StepReport:
        """Run one round of the default schedule. A ruleset that egglog fails to run (a user rule whose primitive has
        no value, a panic) raises ``EgglogError`` naming the rule and its ruleset, the e-graph as before the step."""
        max_enodes, timeout = _budgets("EGraph.step", max_enodes, timeout)
        return self._record("round", lambda budget: budget.round(self.rulesets), max_enodes, timeout)

    def run(self, ruleset: str | None = None, iterations: int = 1, max_enodes: int = DEFAULT_MAX_ENODES,
            timeout: float = DEFAULT_TIMEOUT) -> StepReport:
        """Run one ruleset ``iterations`` times (or, with None, that many rounds) as one step."""
        if ruleset is not None:
            one_of("EGraph.run", "ruleset", ruleset, self.rulesets)
        iterations = integer("EGraph.run", "iterations", iterations, minimum=1)
        max_enodes, timeout = _budgets("EGraph.run", max_enodes, timeout)

        def body(budget: _Budget) -> None:
            for _ in range(iterations):
                if ruleset is None:
                    budget.round(self.rulesets)
                else:
                    budget.once(ruleset)

        label = f"{ruleset or 'round'} x{iterations}" if iterations != 1 else (ruleset or "round")
        return self._record(label, body, max_enodes, timeout)

    @phase("saturation")
    def saturate(self, max_enodes: int = DEFAULT_MAX_ENODES, timeout: float = DEFAULT_TIMEOUT,
                 max_rounds: int = DEFAULT_MAX_ROUNDS) -> Saturation:
        """Rounds until one changes nothing, ``max_rounds`` pass, or a budget stops it. A saturated e-graph gives its
        egglog worker back to the pool (no rule of it has anything left to do): the next e-graph of the process takes
        it, and a later step of this one takes a worker again and replays its history."""
        max_enodes, timeout = _budgets("EGraph.saturate", max_enodes, timeout)
        max_rounds = integer("EGraph.saturate", "max_rounds", max_rounds, minimum=1)
        start = time.monotonic()
        rounds, saturated, stopped = 0, False, None
        while rounds < max_rounds:
            remaining = timeout - (time.monotonic() - start)
            if remaining <= 0:
                stopped = BudgetExceeded(f"time budget of {timeout:g} s used up")
                break
            report = self.step(max_enodes=max_enodes, timeout=remaining)
            rounds += 1
            if report.stopped is not None:
                stopped = report.stopped
                break
            if not report.updated:
                saturated = True
                break
        self.status = "saturated" if saturated else f"stopped: {stopped}" if stopped else "round limit"
        if saturated:
            self.close()
        return Saturation(saturated, rounds, self.snapshot.n_enodes, self.snapshot.n_eclasses,
                          time.monotonic() - start, stopped)

    @phase("saturation")
    def saturate_kept(self, directory: Path | None) -> Saturation:
        """``saturate()`` with the default budgets, as an earlier process kept it in ``directory`` where one did (then
        egglog does nothing here until the e-graph is stepped further, which replays it), else run and kept there once
        saturated (``luminal_lab.egraph.saved``). ``directory`` None, or an e-graph already run or given rules of the
        user's: ``saturate()``."""
        if directory is None or self.history or self._user_rules:
            return self.saturate()
        start = time.monotonic()
        of = saved.key(self.program, self.rulesets, (DEFAULT_MAX_ENODES, DEFAULT_TIMEOUT, DEFAULT_MAX_ROUNDS))
        entry = saved.load(directory, of)
        if entry is not None:
            self._worker.close()  # the worker (if one holds this e-graph as built) replays the saturation if needed
            self._worker.log.extend(entry.commands)
            self.history = [StepReport(**report) for report in entry.history]
            self._snapshot = Snapshot(entry.serialized, self._functions)
            self._serialized = entry.serialized
            self.status = "saturated"
            return Saturation(True, len(self.history), self._snapshot.n_enodes, self._snapshot.n_eclasses,
                              time.monotonic() - start)
        logged = len(self._worker.log)
        saturation = self.saturate()
        if saturation.saturated:
            saved.store(directory, of, saved.Saved(self._worker.log[logged:],
                                                   [dataclasses.asdict(report) for report in self.history],
                                                   self._serialized))
        return saturation

    def reset(self) -> None:
        """Back to the e-graph as built, with the rules added by ``add_rules`` (in their order): the
        history, the budgets' growth forecasts and the status are cleared."""
        self._worker.close()
        self._worker.log = [self._graph_text, *self._user_texts]  # the next request replays just these
        self.history = []
        self._growth.clear()
        self.status = "built"
        self._snapshot = self._take_snapshot()

    def _record(self, label: str, body, max_enodes: int, timeout: float) -> StepReport:
        before = self.snapshot
        budget = _Budget(self._worker, max_enodes, time.monotonic() + timeout, self._functions, growth=self._growth,
                         user_rulesets=frozenset(self._user_joined))
        start, logged = time.monotonic(), len(self._worker.log)
        try:
            body(budget)
        except _Stop as stop:
            budget.stopped = stop.reason
        except _RulesetFailed as failed:  # egglog may have applied part of the step: back to the state before it
            del self._worker.log[logged:]
            self._worker.restart()
            raise self._failure(failed, label) from None
        budget.stopped = budget.stopped or budget.runaway
        try:
            self._snapshot = self._take_snapshot()
        except WorkerDied:  # the step's e-graph outgrew the worker while being read: the step is undone
            del self._worker.log[logged:]
            self._worker.restart()
            budget.stopped = BudgetExceeded(f"the egglog worker ran out of memory taking the snapshot after "
                                            f"{label}; the e-graph was restored to before it")
            self._snapshot = self._take_snapshot()
        report = _diff(len(self.history) + 1, label, before, self._snapshot, budget)
        report.wall_seconds = time.monotonic() - start
        self.history.append(report)
        self.status = f"stopped: {budget.stopped}" if budget.stopped else f"step {report.index}"
        return report

    def _failure(self, failed: _RulesetFailed, label: str) -> EgglogError:
        """The error for a ruleset egglog failed to run: the rule (by its name, when the user added it) and
        ruleset first, then what to do, then egglog's own message."""
        rule = next(filter(None, (_rule_at(failed.message, text) for names, text in self._user_rules
                                  if failed.ruleset in names)), None)
        where = f"rule {rule} of ruleset {failed.ruleset}" if rule else f"ruleset {failed.ruleset}"
        advice = (f"; take it out with comp.egraph.remove_rules({failed.ruleset!r})"
                  if failed.ruleset in self._user_joined else "")
        return EgglogError(f"{label}: {where} failed: {_reason(failed.message)}; the e-graph was restored to before "
                           f"this step{advice}\n  egglog said: {' / '.join(failed.message.splitlines())}")

    def _take_snapshot(self) -> Snapshot:
        serialized = self._serialized = self._worker.serialize()
        # parsing allocates many small objects; the cyclic collector would scan the whole
        # (torch-sized) heap several times over without freeing anything of ours
        collecting = gc.isenabled()
        gc.disable()
        try:
            return Snapshot(serialized, self._functions)
        finally:
            if collecting:
                gc.enable()

    # ---- inspection ---------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        """The e-graph as it is now (taken from the worker when first asked for)."""
        if self._snapshot is None:
            self._snapshot = self._take_snapshot()
        return self._snapshot

    @property
    def eclasses(self) -> list[EClass]:
        return list(self.snapshot.classes.values())

    def eclass(self, cid: str) -> EClass:
        """One e-class, with its e-nodes, parents, HLIR nodes and best term."""
        return self.snapshot.eclass(cid)

    def eclass_of(self, node: Node | GraphTensor | int) -> EClass:
        """The e-class an HLIR node (a ``Node``, the ``GraphTensor`` it made, or its id) landed in."""
        node_id = node.node.id if isinstance(node, GraphTensor) else node.id if isinstance(node, Node) else node
        return self.eclass(self.snapshot.eclass_of_hlir(node_id))

    @property
    def total_matches(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for report in self.history:
            for rule, n in report.matches.items():
                totals[rule] = totals.get(rule, 0) + n
        return totals

    @property
    def worker_peak_memory(self) -> int | None:
        """Peak resident memory of the egglog worker in bytes (Linux)."""
        return self._worker.peak_memory()

    def close(self) -> None:
        """Give the egglog worker back to the pool (a later call takes one again and replays the history)."""
        self._worker.close()

    # ---- the stage object (summary, to_json, to_svg: luminal_lab.egraph.view) -----------
    def picture(self, around: str | None = None, depth: int = 2, fold: str | None = None,
                expand: list[str] | None = None) -> Picture:
        """The IR-level picture (shows itself in a notebook); with ``around`` (an e-class id), only
        the IR e-classes within ``depth`` reads of it; with ``fold="hlir"``, one box per HLIR node holding
        the IR e-classes that came from it, the groups named in ``expand`` (HLIR ids such as ``["h5"]``)
        drawn expanded. See ``luminal_lab.egraph.view``."""
        integer("EGraph.picture", "depth", depth, minimum=0)
        return self._view().picture(self, around, depth, fold, expand)

    # ---- notebook widgets ---------------------------------------------------------------
    def stepper(self) -> RuleStepper:
        """A widget that steps rounds or rulesets, saturates under budgets and resets, showing each
        step's matches, the e-graph's growth and its picture. See ``luminal_lab.notebook.stepper``."""
        from ..notebook.stepper import RuleStepper

        return RuleStepper(self)

    def inspector(self, genome: Picks | None = None) -> EClassInspector:
        """A widget to search e-classes and see one's e-nodes, neighbours, HLIR origin, best term and
        the e-node ``genome`` (default: ``current_genome()``, once the e-graph has been run) picks in it."""
        from ..notebook.inspector import EClassInspector

        if genome is not None and not hasattr(genome, "choices"):
            fail("EGraph.inspector", "genome", genome, "a Genome of this e-graph (comp.genome) or None")
        return EClassInspector(self, genome)


def _base(registry: OpRegistry) -> str:
    """What every e-graph of ``registry`` starts from: the schema and the rules."""
    return "\n".join((schema(registry), rules(registry)))


# ---- budgets -------------------------------------------------------------------------------------
def _budgets(where: str, max_enodes: int, timeout: float) -> tuple[int, float]:
    """The checked budgets of a step: at least one e-node, a time >= 0."""
    return integer(where, "max_enodes", max_enodes, minimum=1), seconds(where, "timeout", timeout)


class _Stop(Exception):
    def __init__(self, reason: BudgetExceeded):
        self.reason = reason


class _RulesetFailed(Exception):
    """egglog failed while running ``ruleset`` (a primitive that failed, a panic); ``message`` is egglog's."""

    def __init__(self, ruleset: str, message: str):
        self.ruleset = ruleset
        self.message = message


@dataclass
class _Budget:
    """Runs rulesets one egglog iteration at a time, checking the budgets in between."""

    worker: EgglogWorker
    max_enodes: int
    deadline: float
    functions: frozenset[str]
    matches: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    updated: bool = False
    stopped: BudgetExceeded | None = None
    growth: dict[str, float] = field(default_factory=dict)  # by ruleset, kept across steps by the EGraph
    user_rulesets: frozenset[str] = frozenset()  # the rulesets user rules joined (named in a runaway's advice)
    runaway: BudgetExceeded | None = None  # the first ruleset that did not saturate; the step went on without it
    _sizes: list[int] = field(default_factory=list)

    def size(self) -> int:
        (output,) = self.worker.run("(print-size)", record=False)
        return sum(n for name, n in output["sizes"].items()
                   if name not in self.functions)

    def once(self, ruleset: str, iterations: int = 1) -> bool:
        """``iterations`` iterations of ``ruleset`` in one egglog call; True when they changed the e-graph."""
        if not self._sizes:
            self._sizes.append(self.size())
        self._forecast(ruleset)
        if time.monotonic() >= self.deadline:
            raise _Stop(BudgetExceeded("time budget used up"))
        try:
            schedule = f"(run {ruleset})" if iterations == 1 else f"(repeat {iterations} (run {ruleset}))"
            (output,) = self.worker.run(f"(run-schedule {schedule})", deadline=self.deadline)
        except EgglogError as error:
            raise _RulesetFailed(ruleset, str(error)) from None
        except WorkerDied as died:
            self.worker.restart()
            reason = ("time budget used up during an iteration of " if died.reason == "timeout"
                      else "the egglog worker ran out of memory in an iteration of ")
            raise _Stop(BudgetExceeded(reason + ruleset + "; the e-graph was restored to before it")) from None
        for rule, n in output["matches"].items():
            self.matches[rule] = self.matches.get(rule, 0) + n
        for rule, s in output["seconds"].items():
            self.seconds[rule] = self.seconds.get(rule, 0.0) + s
        self.updated |= output["updated"]
        self._sizes.append(self.size())
        if self._sizes[-2]:
            self.growth[ruleset] = self._sizes[-1] / self._sizes[-2]
        if self._sizes[-1] > self.max_enodes:
            raise _Stop(BudgetExceeded(f"e-node budget: {self._sizes[-1]:,} e-nodes > {self.max_enodes:,}"))
        return output["updated"]

    def _forecast(self, ruleset: str) -> None:
        """Refuse an iteration that would pass the e-node budget, growing as much as the last iteration or as
        this ruleset's own last iteration did (a ruleset that exploded once is not let run after a calm one)."""
        last = self._sizes[-1] / self._sizes[-2] if len(self._sizes) >= 2 and self._sizes[-2] else 1.0
        growth = max(last, self.growth.get(ruleset, 1.0))
        forecast = self._sizes[-1] * growth
        if growth > 1 and forecast > self.max_enodes:
            raise _Stop(BudgetExceeded(f"e-node budget: the next iteration of {ruleset} would grow "
                                       f"{self._sizes[-1]:,} e-nodes to about {int(forecast):,} > {self.max_enodes:,}"))

    def saturate(self, ruleset: str) -> bool:
        """Iterations of ``ruleset`` until one changes nothing; True when the first changed the e-graph.

        After an iteration that grew the e-graph the next runs alone (budgets are checked after
        each). While the size holds, e.g. ``dtype_prop`` walking a deep graph one node per
        iteration, iterations go in doubling batches of one egglog call. Runaway: more than
        ``SATURATION_GUARD`` growing iterations, or more than max(``SATURATION_GUARD``, e-nodes)
        that do not grow (the facts over a fixed e-graph settle in fewer). A runaway ruleset
        stops there and is noted in ``runaway``; the rest of the round still runs, so a rule that
        never saturates cannot keep the program from lowering.
        """
        batch, grown, flat = 1, 0, 0
        changed = False
        while self.once(ruleset, batch):
            changed = True
            if self._sizes[-1] > self._sizes[-2]:
                grown, batch = grown + batch, 1
            else:
                flat, batch = flat + batch, min(2 * batch, MAX_BATCH)
            if grown >= SATURATION_GUARD or flat >= max(SATURATION_GUARD, self._sizes[-1]):
                self._ran_away(ruleset, grown + flat)
                break
        return changed

    def _ran_away(self, ruleset: str, iterations: int) -> None:
        advice = (f"; user rules joined {ruleset}: a rule there may never saturate (take them out with "
                  f"comp.egraph.remove_rules({ruleset!r}))" if ruleset in self.user_rulesets else "")
        self.runaway = self.runaway or BudgetExceeded(
            f"{ruleset} did not saturate in {iterations} iterations; the rest of the round ran{advice}")

    def round(self, rulesets: list[str]) -> None:
        self.saturate("expr")
        self.saturate("dtype_prop")
        for ruleset in rulesets[2:]:
            if ruleset in RUN_TOGETHER:
                if ruleset == RUN_TOGETHER[0]:
                    self.saturate_together(RUN_TOGETHER)
                continue
            self.once(ruleset)

    def saturate_together(self, rulesets: tuple[str, ...]) -> None:
        """Each ruleset to saturation in turn, again until a whole pass changes nothing (or one runs away)."""
        for _ in range(SATURATION_GUARD):
            if not any([self.saturate(ruleset) for ruleset in rulesets]) or self.runaway:
                return
        self._ran_away(" and ".join(rulesets), SATURATION_GUARD)


def _diff(index: int, label: str, before: Snapshot, after: Snapshot, budget: _Budget) -> StepReport:
    """Which e-classes grew, which were merged away (and into which), which e-nodes are new."""
    previous = {cid: len(eclass.nodes) for cid, eclass in before.classes.items()}
    grown = {cid: len(eclass.nodes) - previous.get(cid, 0) for cid, eclass in after.classes.items()
             if len(eclass.nodes) > previous.get(cid, 0)}
    keys_after = after.node_keys()
    merged: dict[str, str | None] = {
        cid: next((keys_after[(n.op, n.literals, n.children)] for n in eclass.nodes
                   if (n.op, n.literals, n.children) in keys_after), None)
        for cid, eclass in before.classes.items() if cid not in after.classes}
    # e-node ids are egglog row numbers and move (e.g. when a row is subsumed), so an e-node is
    # new when no e-node of ``before`` has its op, literals and (merged-through) children
    old_keys = {(n.op, n.literals, tuple(merged.get(c) or c for c in n.children))
                for eclass in before.classes.values() for n in eclass.nodes}
    added = sorted(n.id for eclass in after.classes.values() for n in eclass.nodes
                   if (n.op, n.literals, n.children) not in old_keys)
    return StepReport(index, label, budget.matches, budget.seconds, before.n_enodes, after.n_enodes,
                      before.n_eclasses, after.n_eclasses, grown, merged, added, updated=budget.updated,
                      stopped=budget.stopped)


# ---- user rule text ------------------------------------------------------------------------------
def _assign_ruleset(text: str, ruleset: str) -> str:
    """Put rules that name no ruleset into ``ruleset``, editing in place so line numbers hold."""
    for start, end in reversed(_command_spans(text)):
        command = text[start:end + 1]
        head = command[1:].split(None, 1)[0] if len(command) > 1 else ""
        if head in ("rule", "rewrite", "birewrite") and ":ruleset" not in command:
            text = text[:end] + f" :ruleset {ruleset}" + text[end:]
    return text


# egglog's reasons, reworded to say what is wrong in the user's terms (fields from each pattern's groups)
_REASONS = (
    (r"parse error: this \( is never closed", "a ( is never closed"),
    (r"parse error: expected command", "expected a command such as (rule ...), (rewrite ...) or (ruleset ...)"),
    (r"parse error: (.*)", "egglog cannot parse this: {0}"),
    (r"Shadowing is not allowed, but found (\S+)", "{0} is already declared (declare each name once)"),
    (r"Unbound function (\S+)", "no function or constructor {0} in the schema (see comp.egraph.program)"),
    (r"Arity mismatch, expected (\d+) args: (.*)", "{1} has the wrong number of arguments: it takes {0}"),
    (r"Unbound symbol (\S+)", "{0} is not bound: a variable on the right must appear on the left"),
    (r"Failed to infer a type for: (.*)", "the type of {0} cannot be inferred"),
    (r"Expect expression (\S+) to have type (\S+), but get type (\S+)", "{0} is an {2} where an {1} is expected"),
    (r"Panic: Illegal merge attempted for function (\S+)", "a rule gave function {0} two values for one key, and it "
     "has no :merge to choose between them"),
    (r"egglog panicked: Rule '(.*)' was already present", "a rule named {0!r} was already added (add rules once; "
     "comp.egraph.remove_rules() takes them out)"),
    (r"Panic: In \S+: (.*): call of primitive (\S+) failed", "{0} failed for a match (primitive {1} has no value "
     "there, as for a division by zero)"),
)


def _reason(message: str) -> str:
    """egglog's reason for rejecting rules (its message without the ``In L:C`` lines), reworded."""
    said = "; ".join(line.strip() for line in message.splitlines() if line.strip() and not POSITION.match(line))
    for pattern, ours in _REASONS:
        found = re.fullmatch(pattern, said)
        if found:
            return ours.format(*found.groups())
    return said or "egglog gave no reason"


def _rule_at(message: str, text: str) -> str | None:
    """The rule of ``text`` (as sent to egglog) that egglog's ``message`` points at (``In L:C-C: snippet``), by its
    ``:name`` or else its first line; None when the position is not in ``text`` or reads something else there."""
    found = re.search(r"In (\d+):(\d+)-(\d+): ", message)
    if found is None:
        return None
    line, first, last = map(int, found.groups())
    lines = text.split("\n")
    if line > len(lines) or not message[found.end():].startswith(lines[line - 1][first - 1:last]):
        return None
    offset = sum(len(row) + 1 for row in lines[:line - 1]) + first - 1
    command = next((text[start:end + 1] for start, end in _command_spans(text) if start <= offset <= end), None)
    if command is None:
        return None
    named = re.search(r':name\s+"([^"]*)"', command)
    return repr(named.group(1)) if named else command.split("\n")[0].strip()


def _located(error: EgglogError, text: str, offset: int) -> EgglogError:
    """The error with the reason and the offending line of the user's text first (egglog says ``In L:C``),
    egglog's own message after.

    ``text`` is the text as the user gave it (``_assign_ruleset`` keeps its line numbers);
    egglog's positions are moved back by the ``offset`` lines that were sent before it.
    """
    message = shift_position(str(error), -offset)
    lines = text.split("\n")
    positions = [(int(first), int(col)) for first, col, _, _ in POSITION.findall(message)]
    inside = [(line, col) for line, col in positions if 1 <= line <= len(lines)]
    at = (inside[-1] if "Shadowing" in message else inside[0]) if inside else None  # a redeclaration: the new one
    where = f"line {at[0]}, column {at[1]}" if at else "the rules"
    return EgglogError(f"add_rules, {where}: {_reason(message)}\n  egglog said: {' / '.join(message.splitlines())}",
                       line=lines[at[0] - 1].strip() if at else None)
