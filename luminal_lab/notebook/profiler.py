"""``comp.profiler()``: launch the genome search in the background and watch it live.

The widget's Launch button runs ``comp.search`` (with the generations, generation size,
mutations, seed and device in its boxes) in a background thread, so the notebook stays
responsive, and its Stop button ends the search before the next candidate (the result so far
comes back ``interrupted``). While it runs the widget shows a progress bar, a status line
(candidates done, best time so far, outcome counts), two plots (time per candidate coloured by
generation, and the best time so far; redrawn at most every ``REDRAW_SECONDS`` and at the end)
and the outcome table. Every candidate measured so far is in the selector: picking one shows
its LLIR, fused regions and generated CUDA in tabs, or why it was refused or failed. An error in
the search is reported in the status line, never raised into the kernel; ``device="cuda"``
without a GPU says why in the status line and starts nothing.

Each button calls a method that code and tests can call too (``launch``, ``stop``, ``wait``,
``select``); what the widget shows is kept in plain attributes (``history``, ``result``,
``status_text``, ``outcome_counts``, ``best_curve``, ``plot_png``, ``selected``, ``selected_html``).
"""

from __future__ import annotations

import html
import io
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

import ipywidgets as widgets
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..codegen.cuda_stage import CudaStage
from ..core.arguments import fail, integer, one_of
from ..core.errors import LuminalError, NoDeviceError
from ..core.stage import Stage
from ..llir.regions import Regions
from ..runtime import DEVICES, check_device
from ..search.runners import Runner
from ..search.search import OUTCOMES, Candidate, SearchResult

if TYPE_CHECKING:
    from ..compiler.compiled import Compiled

REDRAW_SECONDS = 0.5
TABS = ("LLIR", "Regions", "CUDA")
OUTCOME_COLOURS = {"ok": "#15803d", "slow": "#a16207", "nan": "#b45309", "mismatch": "#b45309", "error": "#b91c1c",
                   "timeout": "#b91c1c", "refused": "#6b7280"}
PICTURE_STYLE = "overflow:auto; max-height:640px; border:1px solid #e5e7eb; padding:4px"


RANKED = 8  # the candidates the ranking table lists, fastest median first


def candidate_label(candidate: Candidate) -> str:
    """``#3 gen 1 0.123 ms (0.118-0.140) ok``: the candidate as the selector lists it (its median, and the fastest
    and slowest of its trials)."""
    timing = f" {candidate.seconds * 1e3:.3f} ms" if candidate.seconds is not None else ""
    if candidate.spread is not None:
        timing += f" ({candidate.spread[0] * 1e3:.3f}-{candidate.spread[1] * 1e3:.3f})"
    return f"#{candidate.index} gen {candidate.generation}{timing} {candidate.outcome}"


def ranking(history: list[Candidate], count: int = RANKED) -> list[Candidate]:
    """The ``count`` viable candidates with the fastest median, fastest first (the search ranks them so too)."""
    return sorted((c for c in history if c.outcome == "ok"), key=lambda c: (c.seconds, c.index))[:count]


def _spread_cells(candidate: Candidate) -> list[str]:
    """A viable candidate's median, fastest and slowest trial in ms (``-`` where the runner gave no spread)."""
    low, high = candidate.spread or (None, None)
    return [f"{s * 1e3:.3f}" if s is not None else "-" for s in (candidate.seconds, low, high)]


def _stage_html(stage: Stage) -> str:
    svg = stage.to_svg()
    picture = f'<div style="{PICTURE_STYLE}">{svg}</div>' if svg is not None else ""
    return f"<div><b>{html.escape(stage.summary())}</b></div>{picture}"


class GenomeProfiler(widgets.VBox):
    """Search controls, Launch and Stop; live progress, plots and outcomes; a candidate's stages in tabs.

    The keyword arguments preset the controls."""

    def __init__(self, comp: Compiled, generations: int = 5, generation_size: int = 30, mutations: int = 3,
                 device: str = "cpu", seed: int = 0, runner: Runner | None = None) -> None:
        where = "Compiled.profiler"
        for name, value, low in (("generations", generations, 0), ("generation_size", generation_size, 1),
                                 ("mutations", mutations, 1), ("seed", seed, None)):
            integer(where, name, value, minimum=low)
        one_of(where, "device", device, DEVICES)
        if runner is not None and not isinstance(runner, Runner):
            fail(where, "runner", runner, "a runner (ll.LocalRunner(), ll.InProcessRunner(), ll.RayRunner()) or None")
        self.comp = comp
        self.runner = runner  # what measures the candidates (None: the search's default)
        self.history: list[Candidate] = []
        self.result: SearchResult | None = None
        self.error: str | None = None
        self.outcome_counts: Counter = Counter()
        self.best_curve: list[float] = []  # best seconds after each candidate, from the first viable one on
        self.status_text = ""
        self.plot_png = b""
        self.selected: Candidate | None = None
        self.selected_html: dict[str, str] = dict.fromkeys(TABS, "")
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.RLock()  # the search thread and the notebook both list and show candidates
        self._listing = False  # set while the selector's options are replaced: its value changes are not picks
        self._drawn_at = 0.0

        self.generations_input = widgets.IntText(generations, description="generations")
        self.size_input = widgets.IntText(generation_size, description="generation size")
        self.mutations_input = widgets.IntText(mutations, description="mutations")
        self.seed_input = widgets.IntText(seed, description="seed")
        self.device_input = widgets.Dropdown(options=DEVICES, value=device, description="device")
        self.launch_button = widgets.Button(description="Launch", button_style="primary", icon="play")
        self.stop_button = widgets.Button(description="Stop", icon="stop", disabled=True)
        self.progress = widgets.IntProgress(0, min=0, max=1, description="candidates")
        self.status_view = widgets.HTML()
        self.plot_view = widgets.Image(format="png")
        self.outcomes_view = widgets.HTML()
        self.ranking_view = widgets.HTML()
        self.selector = widgets.Dropdown(options=[], value=None, description="candidate",
                                         layout=widgets.Layout(width="360px"))
        self.tab_views = [widgets.HTML() for _ in TABS]
        self.tabs = widgets.Tab(children=self.tab_views, titles=TABS)

        self.launch_button.on_click(lambda _: self.launch())
        self.stop_button.on_click(lambda _: self.stop())
        self.device_input.observe(lambda _: self._device_ready(), names="value")
        self.selector.observe(self._on_pick, names="value")

        super().__init__([
            widgets.HBox([self.generations_input, self.size_input, self.mutations_input]),
            widgets.HBox([self.seed_input, self.device_input, self.launch_button, self.stop_button]),
            self.progress,
            self.status_view,
            widgets.HBox([self.plot_view, widgets.VBox([self.outcomes_view, self.ranking_view])]),
            self.selector,
            self.tabs,
        ])
        self._device_ready()
        self._show_outcomes()
        self._show_ranking()

    # ---- actions -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether a launched search is still going."""
        return self._thread is not None and self._thread.is_alive()

    def launch(self) -> None:
        """Start a search with the controls' settings in a background thread; the widget shows it live.
        Without the chosen device it says why in the status line and starts nothing."""
        if self.running:
            raise LuminalError("a search is already running: stop() it or wait() for it first")
        if not self._device_ready():
            return
        settings = {"generations": self.generations_input.value, "generation_size": self.size_input.value,
                    "mutations": self.mutations_input.value, "seed": self.seed_input.value,
                    "device": self.device_input.value, "runner": self.runner}
        self.history, self.result, self.error = [], None, None
        self.outcome_counts, self.best_curve = Counter(), []
        self._stop.clear()
        with self._lock:
            self._listing = True
            self.selector.options = []
            self._listing = False
        self._show(None)
        self.progress.bar_style = ""
        self.progress.value, self.progress.max = 0, settings["generations"] * settings["generation_size"] + 1
        self.launch_button.disabled, self.stop_button.disabled = True, False
        self._set_status("starting: building the choice space")
        self._thread = threading.Thread(target=self._search, args=(settings,), name="luminal-profiler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the search to end before its next candidate; ``wait`` then returns what it found."""
        if self.running:
            self._stop.set()
            self._set_status("stopping after the current candidate")

    def wait(self, timeout: float | None = None) -> SearchResult | None:
        """Wait for the search to end and return its result (None if it failed: see ``error``).
        Raises ``TimeoutError`` if it is still running after ``timeout`` seconds."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the search is still running after {timeout} s")
        return self.result

    def select(self, index: int) -> None:
        """Show candidate ``index`` (of ``history``) in the tabs, as picking it in the selector does."""
        with self._lock:
            self._list_candidates()
            self.selector.value = index
            if self.selected is not self.history[index]:  # the selector already held it, so no pick fired
                self._show(self.history[index])

    # ---- the search thread ---------------------------------------------------------------------
    def _search(self, settings: dict) -> None:
        try:
            self.result = self.comp.search(**settings, progress=False, on_candidate=self._on_candidate,
                                           stop=self._stop)
        except Exception as error:  # reported in the status line; the kernel carries on
            self.error = f"{type(error).__name__}: {error}"
        self._finish()

    def _on_candidate(self, candidate: Candidate) -> None:
        self.history.append(candidate)
        self.outcome_counts[candidate.outcome] += 1
        if candidate.outcome == "ok":
            self.best_curve.append(min(self.best_curve[-1:] + [candidate.seconds]))
        elif self.best_curve:
            self.best_curve.append(self.best_curve[-1])
        self.progress.max = max(self.progress.max, len(self.history))
        self.progress.value = len(self.history)
        self._set_status(f"running: {self._tally()}")
        if time.monotonic() - self._drawn_at >= REDRAW_SECONDS:
            self._redraw()

    def _finish(self) -> None:
        self._redraw()
        if self.error is not None:
            self.progress.bar_style = "danger"
            self._set_status(f"failed after {len(self.history)} candidates: {self.error}")
        elif self.result.interrupted:
            self.progress.bar_style = "warning"
            self._set_status(f"stopped: {self._tally()}")
        else:
            self.progress.max = self.progress.value  # children that repeat a genome are skipped: none left to do
            self.progress.bar_style = "success"
            self._set_status(f"done: {self._tally()}")
        if self.result is not None and self.selected is None:
            self.select(self.result.best.index)
        self.launch_button.disabled, self.stop_button.disabled = False, True

    # ---- what the widget shows -----------------------------------------------------------------
    def _device_ready(self) -> bool:
        """Whether the chosen device can run; if not, the status line says why."""
        try:
            check_device(self.device_input.value)
        except NoDeviceError as error:
            self._set_status(f"cannot use device={self.device_input.value!r}: {error}")
            return False
        if not self.running:
            self._set_status("ready")
        return True

    def _set_status(self, text: str) -> None:
        self.status_text = text
        self.status_view.value = f"<span>{html.escape(text)}</span>"

    def _tally(self) -> str:
        best = f"best {self.best_curve[-1] * 1e3:.3f} ms" if self.best_curve else "no viable candidate yet"
        counts = ", ".join(f"{o} {self.outcome_counts[o]}" for o in OUTCOMES if self.outcome_counts[o])
        return f"{len(self.history)} candidates, {best} ({counts})"

    def _redraw(self) -> None:
        self._drawn_at = time.monotonic()
        self.plot_png = self._plot()
        self.plot_view.value = self.plot_png
        self._show_outcomes()
        with self._lock:
            self._show_ranking()
            self._list_candidates()

    def _plot(self) -> bytes:
        """``figure()`` as PNG."""
        buffer = io.BytesIO()
        self.figure().savefig(buffer, format="png")
        return buffer.getvalue()

    def figure(self) -> Figure:
        """Time per candidate (its median, coloured by generation, on a bar from its fastest to its slowest trial)
        and the best time so far; whole-number ticks where an axis counts candidates or generations."""
        figure = Figure(figsize=(8, 2.8), dpi=90, layout="constrained")
        per_candidate, best = figure.subplots(1, 2)
        timed = [c for c in self.history if c.outcome == "ok"]
        spread = [c for c in timed if c.spread is not None]
        if spread:
            per_candidate.vlines([c.index for c in spread], [c.spread[0] * 1e3 for c in spread],
                                 [c.spread[1] * 1e3 for c in spread], colors="#9ca3af", linewidth=1.5)
        if timed:
            points = per_candidate.scatter([c.index for c in timed], [c.seconds * 1e3 for c in timed], s=14,
                                           c=[c.generation for c in timed], cmap="viridis", vmin=0,
                                           vmax=max(1, max(c.generation for c in timed)))
            figure.colorbar(points, ax=per_candidate, label="generation", ticks=MaxNLocator(integer=True))
        per_candidate.set(title="median per candidate (bar: fastest to slowest trial)", xlabel="candidate",
                          ylabel="ms")
        first = len(self.history) - len(self.best_curve)
        best.step(range(first, len(self.history)), [s * 1e3 for s in self.best_curve], where="post")
        best.set(title="best so far", xlabel="candidate", ylabel="ms")
        for axes in (per_candidate, best):  # every candidate's place, on an axis at least two wide
            axes.set_xlim(-0.5, max(len(self.history) - 1, 1) + 0.5)
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        return figure

    def _show_outcomes(self) -> None:
        cells = "".join(f'<tr><td style="color:{OUTCOME_COLOURS[o]}">{o}</td>'
                        f'<td style="text-align:right">{self.outcome_counts[o]}</td></tr>' for o in OUTCOMES)
        self.outcomes_view.value = f"<table><tr><th>outcome</th><th>candidates</th></tr>{cells}</table>"

    def _show_ranking(self) -> None:
        """The fastest candidates by median, with the fastest and slowest of their trials."""
        rows = "".join(f"<tr><td>{rank}</td><td>#{c.index}</td><td>{c.generation}</td>"
                       + "".join(f'<td style="text-align:right">{ms}</td>' for ms in _spread_cells(c)) + "</tr>"
                       for rank, c in enumerate(ranking(self.history), 1))
        self.ranking_view.value = ("<table><tr><th>rank</th><th>candidate</th><th>gen</th><th>median ms</th>"
                                   f"<th>fastest</th><th>slowest</th></tr>{rows}</table>")

    def _list_candidates(self) -> None:
        """Put every candidate so far in the selector, keeping the one picked."""
        if len(self.selector.options) == len(self.history):
            return
        picked = self.selector.value
        self._listing = True
        try:
            self.selector.options = [(candidate_label(c), c.index) for c in self.history]
            self.selector.value = picked
        finally:
            self._listing = False

    def _on_pick(self, change: dict) -> None:
        if not self._listing and change["new"] is not None:
            with self._lock:
                self._show(self.history[change["new"]])

    def _show(self, candidate: Candidate | None) -> None:
        """Fill the tabs with ``candidate``'s LLIR, regions and CUDA, or with why it has none."""
        self.selected = candidate
        if candidate is None:
            views = dict.fromkeys(TABS, "")
        elif candidate.outcome in ("refused", "error", "timeout"):
            views = dict.fromkeys(TABS, self._reason_html(candidate))
        else:
            try:
                llir = self.comp.llir(candidate.genome)
                views = {"LLIR": _stage_html(llir), "Regions": _stage_html(Regions.of(llir)),
                         "CUDA": CudaStage(llir)._repr_html_()}
            except Exception as error:  # a view that cannot be drawn says why, in its tab
                views = dict.fromkeys(TABS, f"<pre>{html.escape(f'{type(error).__name__}: {error}')}</pre>")
            if candidate.reason:  # nan or mismatch: it ran, but wrongly; slow: aborted; ok: its trials cut short
                views = {tab: self._reason_html(candidate) + view for tab, view in views.items()}
            elif candidate.worker:
                views = {tab: f"<div>measured by {html.escape(candidate.worker)}</div>" + view
                         for tab, view in views.items()}
        self.selected_html = views
        for view, tab in zip(self.tab_views, TABS):
            view.value = views[tab]

    @staticmethod
    def _reason_html(candidate: Candidate) -> str:
        colour = OUTCOME_COLOURS[candidate.outcome]
        by = f" (measured by {html.escape(candidate.worker)})" if candidate.worker else ""
        return (f'<div style="color:{colour}"><b>{html.escape(candidate_label(candidate))}</b>: '
                f"{html.escape(candidate.reason or '')}{by}</div>")
