"""``eg.stepper()``: step an e-graph round by round or ruleset by ruleset and see what each step did.

The widget runs ``step``, ``run(ruleset)``, ``saturate`` and ``reset`` on the e-graph (under the budgets in its
e-node and seconds boxes) and then shows: the rules that fired in the last action (matches and time, most matches
first: egglog's per-rule times and the step's own wall time, each in the unit that reads it, ``format_seconds``)
with the e-node and e-class counts before and after and the budget that stopped it, if one did; a plot of e-nodes
and e-classes from the e-graph as built through every step of its history (whole-number ticks); and the e-graph
picture, in which the e-nodes the last step added have a red outline. Steps are numbered from 1
(``StepReport.index``) in the status, the table, the plot and the picture's caption alike; step 0 is the e-graph as
built. An action that fails (say egglog rejects it) is reported in the status line, never raised out of a button, so
the notebook kernel carries on.

Each button calls a method (``step_round``, ``run_ruleset``, ``saturate``, ``reset``) that code and
tests can call too; what the widget shows is kept in plain attributes (``last_report``,
``matches_html``, ``plot_points``, ``picture_svg``, ``status_text``).
"""

from __future__ import annotations

import html
import io
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import ipywidgets as widgets
import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..egraph.egraph import DEFAULT_MAX_ENODES, DEFAULT_TIMEOUT, Saturation, StepReport
from ..llir.view import format_seconds

if TYPE_CHECKING:
    from ..egraph.egraph import EGraph

T = TypeVar("T")


STATUS_COLOURS = {"ok": "#374151", "running": "#6b7280", "stopped": "#b45309", "error": "#b91c1c"}
PICTURE_STYLE = "overflow:auto; max-height:640px; border:1px solid #e5e7eb; padding:4px"


class RuleStepper(widgets.VBox):
    """Buttons to step, run a ruleset, saturate under budgets and reset; the last action's matches,
    the growth plot and the e-graph picture below them."""

    def __init__(self, egraph: EGraph) -> None:
        self.egraph = egraph
        self.reports: list[StepReport] = egraph.history[-1:]  # the steps the last action recorded
        self.last_saturation: Saturation | None = None
        self.error: Exception | None = None
        self.status_text = egraph.status
        self.fired: dict[str, int] = {}
        self.matches_html = ""
        self.plot_points: list[tuple[int, int, int]] = []
        self.plot_svg = ""
        self.picture_svg: str | None = None

        self.step_button = widgets.Button(description="step round", tooltip="one round of every ruleset")
        self.ruleset_dropdown = widgets.Dropdown(options=egraph.rulesets, description="ruleset",
                                                 layout=widgets.Layout(width="220px"))
        self.run_button = widgets.Button(description="run ruleset", tooltip="one iteration of the chosen ruleset")
        self.saturate_button = widgets.Button(description="saturate", tooltip="rounds until nothing changes")
        self.reset_button = widgets.Button(description="reset", tooltip="back to the e-graph as built")
        self.max_enodes = widgets.IntText(value=DEFAULT_MAX_ENODES, description="max e-nodes",
                                          layout=widgets.Layout(width="220px"))
        self.timeout = widgets.FloatText(value=DEFAULT_TIMEOUT, description="seconds",
                                         layout=widgets.Layout(width="160px"))
        self.status_view = widgets.HTML()
        self.matches_view = widgets.HTML(layout=widgets.Layout(min_width="360px"))
        self.plot_view = widgets.HTML()
        self.picture_view = widgets.HTML()

        self.step_button.on_click(lambda _: self.step_round())
        self.run_button.on_click(lambda _: self.run_ruleset(self.ruleset_dropdown.value))
        self.saturate_button.on_click(lambda _: self.saturate())
        self.reset_button.on_click(lambda _: self.reset())

        super().__init__([
            widgets.HBox([self.step_button, self.ruleset_dropdown, self.run_button]),
            widgets.HBox([self.saturate_button, self.max_enodes, self.timeout, self.reset_button]),
            self.status_view,
            widgets.HBox([self.matches_view, self.plot_view]),
            self.picture_view,
        ])
        self._show_status(self.status_text, "ok")
        self.refresh()

    # ---- actions (what the buttons call) ---------------------------------------------------
    @property
    def last_report(self) -> StepReport | None:
        """The last step the last action recorded (None after a reset or a failed action)."""
        return self.reports[-1] if self.reports else None

    def step_round(self) -> StepReport | None:
        """One round of the default schedule; None when it failed (see ``error``)."""
        return self._act("round", lambda: self.egraph.step(**self._budget()))

    def run_ruleset(self, ruleset: str) -> StepReport | None:
        """One iteration of ``ruleset``; None when it failed (see ``error``)."""
        return self._act(f"ruleset {ruleset}", lambda: self.egraph.run(ruleset, **self._budget()))

    def saturate(self) -> Saturation | None:
        """Rounds until nothing changes or the budgets stop them; None when a round failed."""
        return self._act("saturate", lambda: self.egraph.saturate(**self._budget()))

    def reset(self) -> None:
        """Back to the e-graph as built (with any rules added since); the history is cleared."""
        self._act("reset", self.egraph.reset)

    def _budget(self) -> dict[str, float]:
        return {"max_enodes": self.max_enodes.value, "timeout": self.timeout.value}

    def _act(self, what: str, action: Callable[[], T]) -> T | None:
        """Run ``action``, then show what it recorded; an exception goes to the status line."""
        self._show_status(f"{what}: running…", "running")
        history = self.egraph.history
        start = len(history)
        try:
            result = action()
        except Exception as error:  # shown, not raised: a failed step must not take the notebook down
            self.error = error
            result = None
        else:
            self.error = None
        self.reports = self.egraph.history[start:] if self.egraph.history is history else []
        self.last_saturation = result if isinstance(result, Saturation) else None
        snapshot = self.egraph.snapshot
        counts = f"{snapshot.n_enodes} e-nodes, {snapshot.n_eclasses} e-classes"
        if self.error is not None:
            self._show_status(f"{what} failed: {type(self.error).__name__}: {self.error}", "error")
        elif self.last_saturation is not None:
            outcome = self.last_saturation
            state = ("saturated" if outcome.saturated else f"stopped: {outcome.stopped}" if outcome.stopped
                     else "round limit reached")
            rounds = f"{outcome.rounds} round{'' if outcome.rounds == 1 else 's'}"
            self._show_status(f"{what}: {state} after {rounds}; {counts}", "stopped" if outcome.stopped else "ok")
        else:
            self._show_status(f"{what}: {self.egraph.status}; {counts}", "stopped" if self._stopped() else "ok")
        self.refresh()
        return result

    def _stopped(self) -> str | None:
        """The budget that stopped the last action, if one did."""
        saturation = self.last_saturation
        stops = [*(report.stopped for report in self.reports), saturation.stopped if saturation is not None else None]
        return next((str(stop) for stop in stops if stop is not None), None)

    def _show_status(self, text: str, kind: str) -> None:
        self.status_text = text
        self.status_view.value = (f"<span style='color:{STATUS_COLOURS[kind]}'>"
                                  f"{html.escape(text)}</span>")

    # ---- what the widget shows --------------------------------------------------------------
    def refresh(self) -> None:
        """Redraw the matches, the plot and the picture from the e-graph as it is now."""
        rulesets = self.egraph.rulesets
        if list(self.ruleset_dropdown.options) != rulesets:
            chosen = self.ruleset_dropdown.value
            self.ruleset_dropdown.options = rulesets
            self.ruleset_dropdown.value = chosen if chosen in rulesets else rulesets[0]
        self._draw_matches()
        self._draw_plot()
        self._draw_picture()

    def _draw_matches(self) -> None:
        stopped = self._stopped()
        stop = f"<p class='ll-stopped' style='color:#b45309'>stopped: {html.escape(stopped)}</p>" if stopped else ""
        if not self.reports:
            snapshot = self.egraph.snapshot
            what = "The last action recorded no step" if self.egraph.history else "No step yet: the e-graph as built"
            self.fired = {}
            self.matches_html = (f"<p>{what}; {snapshot.n_enodes} e-nodes, {snapshot.n_eclasses} e-classes.</p>"
                                 + stop)
            self.matches_view.value = self.matches_html
            return
        first, last = self.reports[0], self.reports[-1]
        matches: dict[str, int] = {}
        seconds: dict[str, float] = {}
        for report in self.reports:
            for rule, n in report.fired().items():
                matches[rule] = matches.get(rule, 0) + n
                seconds[rule] = seconds.get(rule, 0.0) + report.seconds.get(rule, 0.0)
        self.fired = dict(sorted(matches.items(), key=lambda kv: (-kv[1], kv[0])))
        title = (f"{first.label} #{first.index}" if len(self.reports) == 1
                 else f"{len(self.reports)} steps, #{first.index}–#{last.index}")
        rows = "".join(f"<tr><td>{html.escape(rule)}</td><td style='text-align:right'>{n}</td>"
                       f"<td style='text-align:right'>{format_seconds(seconds[rule])}</td></tr>"
                       for rule, n in self.fired.items())
        table = ("<table class='ll-matches'><thead><tr><th>rule</th><th>matches</th><th>time</th></tr></thead>"
                 f"<tbody>{rows}</tbody></table>" if self.fired else "<p>No rule matched.</p>")
        added = sum(len(r.added_enodes) for r in self.reports)
        merged = sum(len(r.merged) for r in self.reports)
        counts = (f"e-nodes {first.enodes_before} → {last.enodes_after}, e-classes {first.eclasses_before} → "
                  f"{last.eclasses_after}; {added} e-nodes added, {merged} e-classes merged")
        took = format_seconds(sum(r.wall_seconds for r in self.reports))
        self.matches_html = (f"<p><b>{html.escape(title)}</b>: {sum(self.fired.values())} matches in "
                             f"{len(self.fired)} rules in {took}</p>{table}<p>{counts}</p>{stop}")
        self.matches_view.value = self.matches_html

    def _draw_plot(self) -> None:
        """E-nodes and e-classes after each step; step 0 is the e-graph before the first one. In the SVG the lines
        are the groups ``ll-enodes`` and ``ll-eclasses``, a marker per step, and the tick labels are text."""
        history = self.egraph.history
        if history:
            points = [(0, history[0].enodes_before, history[0].eclasses_before)]
            points += [(r.index, r.enodes_after, r.eclasses_after) for r in history]
        else:
            points = [(0, self.egraph.snapshot.n_enodes, self.egraph.snapshot.n_eclasses)]
        self.plot_points = points
        figure = Figure(figsize=(4.6, 2.8))
        axes = figure.add_subplot()
        steps = [p[0] for p in points]
        axes.plot(steps, [p[1] for p in points], marker="o", label="e-nodes", gid="ll-enodes")
        axes.plot(steps, [p[2] for p in points], marker="s", label="e-classes", gid="ll-eclasses")
        axes.set_xlabel("step (0: as built)")
        axes.set_xlim(-0.25, max(steps[-1], 1) + 0.25)  # a fresh or reset e-graph's one point on an axis to step 1
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylim(bottom=0)
        axes.legend(loc="lower right", fontsize="small")
        figure.tight_layout()
        buffer = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):  # labels as text, which a reader (or a test) can read
            figure.savefig(buffer, format="svg", metadata={"Date": None})
        text = buffer.getvalue()
        self.plot_svg = text[text.find("<svg"):]
        self.plot_view.value = self.plot_svg

    def _draw_picture(self) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.picture_svg = self.egraph.picture().to_svg()
        if self.picture_svg is None:
            why = str(caught[-1].message) if caught else "Graphviz could not draw the e-graph"
            self.picture_view.value = f"<p class='ll-no-picture'>No picture: {html.escape(why)}.</p>"
        else:
            self.picture_view.value = f"<div style='{PICTURE_STYLE}'>{self.picture_svg}</div>"
