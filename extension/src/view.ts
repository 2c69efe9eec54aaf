/**
 * The interactive graph of a stage (and the tabs of a pipeline), as plain DOM + SVG: `StageView` holds what is
 * selected, matched, linked, focused and folded, and composes the drawing (scene.ts), the moves about it
 * (interactions.ts) and the panels around it (panels.ts).
 */

import {
  drawnCount, FOLD_MODES, FoldMode, groupNodes, Grouping, hasIrLevel, irLevel, Level, linkedCount, makeScene, openingFold,
  PipelineEnvelope, Provenance, StageEnvelope, StageGraph, stageTitle
} from './model.js';
import { stageLayoutSteps } from './layout.js';
import { Camera, clamp, Hover, wirePointer, wireSearch } from './interactions.js';
import { Details, html, LinkedState, summaryText, Toolbar } from './panels.js';
import { Marks, now, SceneDrawing } from './scene.js';

export { errorBox, LinkedState } from './panels.js';

/** Above this many nodes a stage is drawn a chunk per animation frame (after a sliced layout). */
export const PROGRESSIVE_THRESHOLD = 1500;
/** Time per animation frame spent laying out / drawing a large stage. */
const FRAME_BUDGET_MS = 12;
/** Focus: the default and largest neighbourhood depth. */
export const FOCUS_DEPTH = 2;
export const MAX_FOCUS_DEPTH = 9;

function nextFrame(callback: () => void): () => void {
  if (typeof requestAnimationFrame === 'function') {
    const handle = requestAnimationFrame(callback);
    return () => cancelAnimationFrame(handle);
  }
  const handle = setTimeout(callback, 16);
  return () => clearTimeout(handle);
}

export interface StageViewOptions {
  /** called when the user selects a node (or clears the selection) in this stage */
  onSelect?: (view: StageView, id: string | null) => void;
  /** called when the user clicks a link to another stage's node in the details */
  onFollow?: (stage: string, id: string) => void;
  /** counterparts and CUDA lines of a node of this stage (in a pipeline) */
  provenance?: Provenance;
  /** the title in the toolbar (default: the stage's title, e.g. "E-graph") */
  title?: string;
}

/**
 * One stage: toolbar, summary, graph and details, under `div.jp-LuminalStage`.
 *
 * What is drawn is a `Scene` of `graph` (model.ts): all of it, or with groups folded to one node each
 * and/or only the neighbourhood of a focused node. `graph` is the stage, or for an e-graph with IR e-classes
 * its current level (`irLevel` by default, or every e-class). Drawn elements are indexed by scene index; the
 * selection, matches, linked nodes and focus by `graph`'s node index.
 */
export class StageView {
  readonly node: HTMLDivElement;
  /** the graph drawn: the stage's, or the current level's */
  graph: StageGraph;
  readonly stage: string;
  private readonly envelope: StageEnvelope;
  /** an e-graph's levels (none for other stages) and the one drawn */
  private readonly levels = new Map<Level, StageGraph>();
  private level: Level | null = null;
  private readonly options: StageViewOptions;
  private readonly toolbar: Toolbar;
  private readonly summary: HTMLDivElement;
  private readonly details: Details;
  private readonly drawing: SceneDrawing;
  private readonly camera: Camera;
  private readonly hover = new Hover();
  /** the state classes of drawn nodes and edges */
  private readonly marks: Marks = {
    node: (i, g) => this.applyNodeClasses(i, g),
    neighbourEdge: e => this.hover.edges.includes(e)
  };
  private fold: FoldMode = 'none';
  private readonly groupings = new Map<FoldMode, Grouping>();
  private readonly expanded = new Set<string>();
  private focus: { node: number; depth: number } | null = null;
  private depth = FOCUS_DEPTH;
  private centreAfterDraw = -1;
  /**
   * An e-graph's opening view is still to be chosen (`chooseOpeningView`): true until its first layout is measured
   * in a visible graph area, or the user changes the view first.
   */
  private choosingView = false;
  /** Why the view opened folded (a line of the summary), until the fold or level changes. */
  private openedFolded = false;
  private observing = false;
  private selected = -1;
  private matches: number[] = [];
  private matchSet = new Set<number>();
  private matchCursor = -1;
  /** matches of the search that the current level does not draw */
  private hiddenMatches = 0;
  private linked = new Set<number>();
  private linkedState: LinkedState | null = null;
  private cancelFrame: (() => void) | null = null;
  private resizeObserver: ResizeObserver | null = null;
  private disposed = false;
  private readyResolve: (() => void) | null = null;
  /** resolves when every node and edge is drawn (or on dispose) */
  readonly ready: Promise<void>;
  /** ms from start to ready */
  drawTime = 0;

  constructor(envelope: StageEnvelope, options: StageViewOptions = {}) {
    this.options = options;
    this.envelope = envelope;
    this.graph = new StageGraph(envelope);
    this.stage = envelope.stage;
    if (hasIrLevel(envelope)) {
      this.levels.set('all', this.graph);
      this.levels.set('ir', new StageGraph(irLevel(envelope)));
      this.level = 'ir';
      this.graph = this.levels.get('ir')!;
      this.choosingView = true;
    }
    this.ready = new Promise(resolve => (this.readyResolve = resolve));

    const root = html('div', 'jp-LuminalStage');
    this.node = root;
    root.dataset.stage = envelope.stage;
    root.dataset.drawn = '0';
    root.dataset.status = 'drawing';
    // an e-graph with e-classes of other sorts chooses its level
    const withLevel = this.level !== null && this.levels.get('ir')!.size < this.levels.get('all')!.size;
    this.toolbar = new Toolbar(options.title ?? stageTitle(envelope.stage), this.depth, withLevel, {
      focus: () => this.setFocus(this.selectedId),
      depth: step => this.setDepth(this.depth + step),
      showAll: () => this.setFocus(null),
      fold: mode => this.setFold(mode),
      foldAll: () => this.setFold(this.fold),
      level: level => this.setLevel(level),
      zoom: factor => this.zoomBy(factor),
      fit: () => this.fit()
    });
    root.appendChild(this.toolbar.node);
    this.summary = html('div', 'lx-summary');
    root.appendChild(this.summary);
    const body = html('div', 'lx-body');
    this.drawing = new SceneDrawing(this.stage, `${stageTitle(envelope.stage)} graph`, makeScene(this.graph));
    this.camera = new Camera(this.drawing.svg, this.drawing.viewport, root);
    this.updateControls();
    body.appendChild(this.drawing.svg);
    this.details = new Details(this.stage, options.provenance, options.onFollow);
    body.appendChild(this.details.node);
    root.appendChild(body);
    this.renderDetails();

    wireSearch(this.toolbar.search, query => this.setSearch(query), step => this.stepMatch(step));
    wirePointer(this.drawing, this.camera, {
      click: v => {
        if (v >= 0 && this.scene.group[v] >= 0) {
          this.expandGroup(String(this.scene.graph.nodes[v].group));
        } else {
          this.selectIndex(v >= 0 ? this.scene.node[v] : -1, false, true);
        }
      },
      hover: i => this.setHover(i),
      hovered: () => this.hover.node
    });
    this.levelChanged();
  }

  /** The scene drawn (or being drawn). */
  private get scene() {
    return this.drawing.scene;
  }

  private summaryText(): string {
    const eclasses = (graph: StageGraph): number => graph.nodes.filter(node => node.kind === 'eclass').length;
    const ir: [number, number] | null = this.level === 'ir' && this.toolbar.level
      ? [eclasses(this.graph), eclasses(this.levels.get('all')!)] : null;
    return summaryText(this.envelope, ir, this.openedFolded);
  }

  // ---- layout and drawing ----------------------------------------------------------------------

  /** Lay out and draw: at once for a small stage, sliced over animation frames for a large one. */
  start(): Promise<void> {
    if (!this.observing) {
      this.observing = true;
      this.observeSize();
    }
    this.draw(false);
    return this.ready;
  }

  /**
   * Draw the scene from scratch (after a change of focus or folding), off-screen until complete: the old drawing
   * stays on screen meanwhile (`SceneDrawing.begin`).
   */
  private redraw(): void {
    if (this.cancelFrame) {
      this.cancelFrame();
      this.cancelFrame = null;
    }
    this.choosingView = false;
    this.hover.clear();
    this.camera.fitted = false;
    this.draw(true);
  }

  private draw(offscreen: boolean): void {
    const began = now();
    const grouping = this.fold === 'none' ? null : this.groupingOf(this.fold);
    const drawing = this.drawing;
    drawing.begin(offscreen ? makeScene(this.graph, { grouping, expanded: this.expanded, focus: this.focus }) : this.scene, offscreen);
    this.updateControls();
    const scene = this.scene.graph;
    this.node.dataset.drawStart = String(Math.round(began));
    this.node.dataset.status = 'drawing';
    this.node.dataset.drawn = '0';
    const steps = stageLayoutSteps(scene);
    const drawSome = (deadline: number): void => {
      drawing.drawSome(deadline, this.marks);
      this.node.dataset.drawn = String(drawing.drawn);
    };
    if (scene.size <= PROGRESSIVE_THRESHOLD) {
      for (;;) {
        const step = steps.next();
        if (step.done) {
          drawing.layout = step.value;
          break;
        }
      }
      this.sizeSvg();
      if (this.chooseOpeningView()) {
        return;
      }
      drawSome(Infinity);
      this.finish(began);
      return;
    }
    const work = (): void => {
      this.cancelFrame = null;
      if (this.disposed) {
        return;
      }
      const until = now() + FRAME_BUDGET_MS;
      while (drawing.layout === null && now() < until) {
        const step = steps.next();
        if (step.done) {
          drawing.layout = step.value;
          if (!drawing.offscreen) {
            this.sizeSvg();
            if (this.chooseOpeningView()) {
              return; // the folded scene is drawn instead
            }
            this.fitIfVisible();
          }
        }
      }
      if (drawing.layout !== null && now() < until) {
        drawSome(until);
      }
      if (drawing.layout !== null && drawing.isComplete()) {
        this.finish(began);
      } else {
        this.cancelFrame = nextFrame(work);
      }
    };
    this.cancelFrame = nextFrame(work);
  }

  private finish(began: number): void {
    if (this.drawing.commit()) {
      this.sizeSvg();
    }
    this.node.dataset.drawn = String(this.drawing.drawn);
    this.node.dataset.status = 'ready';
    this.drawTime = now() - began;
    this.node.dataset.drawMs = String(Math.round(this.drawTime));
    this.fitIfVisible();
    if (this.centreAfterDraw >= 0) {
      this.centreOn(this.centreAfterDraw);
      this.centreAfterDraw = -1;
    }
    if (this.readyResolve) {
      this.readyResolve();
      this.readyResolve = null;
    }
  }

  /** The classes of scene node `i`: a group is matched / linked when one of its members is. */
  private applyNodeClasses(i: number, g: SVGGElement): void {
    const node = this.scene.node[i];
    const group = this.scene.group[i];
    const members = group >= 0 ? this.groupingOf(this.fold).groups[group].members : [node];
    g.classList.toggle('lx-selected', node >= 0 && node === this.selected);
    g.classList.toggle('lx-match', this.matchSet.size > 0 && members.some(m => this.matchSet.has(m)));
    g.classList.toggle('lx-linked', this.linked.size > 0 && members.some(m => this.linked.has(m)));
    g.classList.toggle('lx-neighbour', this.hover.nodes.includes(i));
  }

  /** Re-apply the classes of the drawn folded groups (after the matches or linked nodes changed). */
  private refreshGroups(): void {
    this.scene.group.forEach((group, i) => {
      const g = this.drawing.nodeEls[i];
      if (group >= 0 && g) {
        this.applyNodeClasses(i, g);
      }
    });
  }


  // ---- focus and folding ---------------------------------------------------------------------

  /** The groups of `mode` in this stage (computed once). */
  private groupingOf(mode: FoldMode): Grouping {
    let grouping = this.groupings.get(mode);
    if (!grouping) {
      grouping = groupNodes(this.graph, mode);
      this.groupings.set(mode, grouping);
    }
    return grouping;
  }

  /** Show only node `id` and what is within the focus depth of it; null shows everything again. */
  setFocus(id: string | null): void {
    const i = id === null ? undefined : this.graph.index.get(id);
    this.focus = i === undefined ? null : { node: i, depth: this.depth };
    this.redraw();
  }

  /** The focus depth (1 to MAX_FOCUS_DEPTH); redraws when focused. */
  setDepth(depth: number): void {
    this.depth = clamp(Math.round(depth), 1, MAX_FOCUS_DEPTH);
    if (this.focus) {
      this.focus = { node: this.focus.node, depth: this.depth };
      this.redraw();
    } else {
      this.updateControls();
    }
  }

  /** Fold by `mode` (every group folded, none expanded). */
  setFold(mode: FoldMode): void {
    this.fold = FOLD_MODES.includes(mode) ? mode : 'none';
    if (this.openedFolded) {
      this.openedFolded = false;
      this.summary.textContent = this.summaryText();
    }
    this.expanded.clear();
    this.redraw();
  }

  /** Draw the folded group `key` node by node. */
  expandGroup(key: string): void {
    this.expanded.add(key);
    this.redraw();
  }

  /**
   * Draw an e-graph's `level` (nothing for another stage): the selection, focus, search and linked nodes carry over
   * by id where the level has them; groups start folded again, and a fold mode with no group there becomes `none`.
   */
  setLevel(level: Level): void {
    const graph = this.levels.get(level);
    if (graph === undefined || level === this.level) {
      return;
    }
    const selected = this.selectedId;
    const focus = this.focus ? this.graph.nodes[this.focus.node].id : null;
    this.level = level;
    this.graph = graph;
    this.levelChanged();
    this.selected = selected === null ? -1 : graph.index.get(selected) ?? -1;
    if (this.selected >= 0) {
      this.node.dataset.selected = selected!;
    } else {
      delete this.node.dataset.selected;
    }
    const f = focus === null ? undefined : graph.index.get(focus);
    this.focus = f === undefined ? null : { node: f, depth: this.depth };
    this.matches = [];
    this.matchSet = new Set();
    this.linked = this.linkedIndices(this.linkedState);
    this.node.dataset.linked = String(this.linked.size);
    this.expanded.clear();
    this.centreAfterDraw = -1;
    this.redraw();
    this.setSearch(this.toolbar.search.value);
    this.renderDetails();
  }

  /** What depends on the level only: the groupings, the fold options, the node count and the summary. */
  private levelChanged(): void {
    this.openedFolded = false;
    this.groupings.clear();
    for (const option of Array.from(this.toolbar.fold.options)) {
      option.disabled = option.value !== 'none' && this.groupingOf(option.value as FoldMode).groups.length === 0;
    }
    if (this.fold !== 'none' && this.groupingOf(this.fold).groups.length === 0) {
      this.fold = 'none';
    }
    if (this.level !== null) {
      this.node.dataset.level = this.level;
      if (this.toolbar.level) {
        this.toolbar.level.value = this.level;
      }
    }
    this.node.dataset.nodeCount = String(this.graph.size);
    this.summary.textContent = this.summaryText();
  }

  /** Make node `i` drawn as itself: expand its folded group, leave a focus it is outside of. */
  private reveal(i: number): boolean {
    const v = this.scene.at[i];
    if (v >= 0 && this.scene.node[v] === i) {
      return false;
    }
    if (v >= 0) {
      this.expanded.add(this.groupingOf(this.fold).groups[this.scene.group[v]].key);
      this.redraw();
    }
    const w = this.scene.at[i];
    if (this.focus && (w < 0 || this.scene.node[w] !== i)) {
      this.focus = null;
      this.redraw();
    }
    return true;
  }

  private updateControls(): void {
    const c = this.toolbar;
    const dataset = this.node.dataset;
    c.depth.textContent = String(this.depth);
    c.focus.disabled = this.selected < 0;
    c.less.disabled = this.depth <= 1;
    c.more.disabled = this.depth >= MAX_FOCUS_DEPTH;
    c.showAll.disabled = this.focus === null;
    c.fold.value = this.fold;
    c.foldAll.disabled = this.expanded.size === 0;
    dataset.fold = this.fold;
    dataset.focusDepth = String(this.depth);
    if (this.focus) {
      dataset.focus = this.graph.nodes[this.focus.node].id;
    } else {
      delete dataset.focus;
    }
    dataset.visible = String(this.scene.graph.size);
    let groups = 0;
    this.scene.group.forEach(g => g >= 0 && groups++);
    dataset.groups = String(groups);
    dataset.expanded = String(this.expanded.size);
  }

  private sizeSvg(): void {
    const layout = this.drawing.layout!;
    const height = `${Math.round(Math.max(320, Math.min(600, layout.totalHeight + 16)))}px`;
    this.drawing.svg.style.height = height;
    this.details.node.style.height = height;
  }

  // ---- view transform --------------------------------------------------------------------------

  /** Whether the graph area is laid out on screen (not display:none). */
  isVisible(): boolean {
    return this.camera.isVisible();
  }

  private fitIfVisible(): void {
    if (!this.camera.fitted && this.drawing.layout !== null && this.isVisible() && !this.chooseOpeningView()) {
      this.fit();
    }
  }

  /**
   * The e-graph opens at the most detailed view that reads at fit (`openingFold`): its IR level unfolded when it
   * fits at LABEL_MIN_SCALE or more, else folded by HLIR node. Decided once, from the first layout (unfolded) and
   * the graph area's size as `fit` measures them, once the area is visible; never after the user changed the view.
   * Returns whether it redrew (folded).
   */
  private chooseOpeningView(): boolean {
    const layout = this.drawing.layout;
    if (!this.choosingView || layout === null || !this.isVisible()) {
      return false;
    }
    this.choosingView = false;
    if (this.level !== 'ir' || this.fold !== 'none' || this.focus !== null || this.expanded.size > 0) {
      return false;
    }
    const scale = this.camera.fitScale(layout);
    this.node.dataset.openingScale = scale.toFixed(3);
    if (openingFold(scale, this.groupingOf('hlir').groups.length) === 'none') {
      return false;
    }
    this.fold = 'hlir';
    this.openedFolded = true;
    this.summary.textContent = this.summaryText();
    this.redraw();
    return true;
  }

  /** Fit the whole graph to the view (at most 1.5x); deferred until the view has a size. */
  fit(): void {
    if (this.drawing.layout !== null) {
      this.camera.fit(this.drawing.layout);
    }
  }

  zoomBy(factor: number): void {
    this.camera.zoomBy(factor);
  }

  /** Centre the stage's node `i` (or the group showing it) in the view, zooming in to a readable scale if needed. */
  private centreOn(i: number): void {
    const v = this.scene.at[i];
    const layout = this.drawing.layout;
    if (layout === null || v < 0) {
      if (i >= 0 && this.node.dataset.status === 'drawing') {
        this.centreAfterDraw = i;
      }
      return;
    }
    this.camera.centre(layout, layout.x[v], layout.y[v]);
  }

  /** Call when the view may have become visible (e.g. its tab was shown). */
  onShow(): void {
    this.fitIfVisible();
  }

  private observeSize(): void {
    if (typeof ResizeObserver === 'undefined') {
      return;
    }
    let last = '';
    this.resizeObserver = new ResizeObserver(() => {
      const { width, height } = this.camera.size();
      const key = `${width}x${height}`;
      if (key === last || width === 0 || height === 0) {
        return;
      }
      last = key;
      if (!this.camera.fitted || !this.camera.userMoved) {
        this.camera.fitted = false;
        this.fitIfVisible();
      }
    });
    this.resizeObserver.observe(this.drawing.svg);
  }

  // ---- search, hover, selection ------------------------------------------------------------------

  /** Mark the nodes matching `query` (`.lx-match`) and show their count. */
  setSearch(query: string): void {
    const ids = this.graph.search(query);
    const next = ids.map(id => this.graph.index.get(id)!);
    const same = next.length === this.matches.length && next.every((v, i) => v === this.matches[i]);
    if (!same) {
      for (const i of this.matches) {
        this.drawing.nodeEl(i)?.classList.remove('lx-match');
      }
      this.matches = next;
      this.matchSet = new Set(next);
      this.matchCursor = -1;
      for (const i of next) {
        this.drawing.nodeEl(i)?.classList.add('lx-match');
      }
      this.refreshGroups();
    }
    const n = next.length;
    const all = this.levels.get('all');
    this.hiddenMatches = all && all !== this.graph ? all.search(query).length - n : 0;
    const hidden = this.hiddenMatches === 0 ? '' : `, ${this.hiddenMatches} hidden at the IR level${n === 0 ? ' (Enter shows them)' : ''}`;
    this.toolbar.searchCount.textContent =
      (query.trim() === '' ? '' : n === 0 ? 'no matches' : n === 1 ? '1 match' : `${n} matches`) + hidden;
    this.node.dataset.matches = String(n);
  }

  /** Select and centre the next match (`step` 1) or the previous (-1); what only every e-class has shows them. */
  private stepMatch(step: number): void {
    if (!this.matches.length && this.hiddenMatches > 0) {
      this.setLevel('all'); // what the IR level hides: show every e-class and step through the matches there
    }
    if (this.matches.length) {
      this.matchCursor = (this.matchCursor + step + this.matches.length) % this.matches.length;
      if (this.matchCursor < 0) {
        this.matchCursor = 0;
      }
      this.selectIndex(this.matches[this.matchCursor], true, true);
    }
  }

  /** Hover scene node `i` (-1: none): its in/out neighbours and the edges joining them get `.lx-neighbour`. */
  setHover(i: number): void {
    this.hover.set(i, this.drawing);
  }

  /** The selected node's id, or null. */
  get selectedId(): string | null {
    return this.selected >= 0 ? this.graph.nodes[this.selected].id : null;
  }

  /**
   * Select node `id` (null: clear), optionally centring on it; `notify` tells the pipeline. A node the IR level
   * does not draw switches the e-graph to every e-class.
   */
  select(id: string | null, centre = false, notify = false): boolean {
    if (id !== null && !this.graph.index.has(id) && this.levels.get('all')?.index.has(id)) {
      this.setLevel('all');
    }
    const i = id === null ? -1 : this.graph.index.get(id);
    if (i === undefined) {
      return false;
    }
    this.selectIndex(i, centre, notify);
    return true;
  }

  private selectIndex(i: number, centre: boolean, notify: boolean): void {
    this.drawing.nodeEl(this.selected)?.classList.remove('lx-selected');
    this.selected = i;
    if (i >= 0) {
      if (!this.reveal(i)) {
        this.drawing.nodeEl(i)?.classList.add('lx-selected');
      }
      this.linkedState = null;
      this.node.dataset.selected = this.graph.nodes[i].id;
      if (centre) {
        this.centreOn(i);
      }
    } else {
      delete this.node.dataset.selected;
    }
    this.updateControls();
    this.renderDetails();
    if (notify && this.options.onSelect) {
      this.options.onSelect(this, this.selectedId);
    }
  }

  /** Mark `state.ids` of this stage `.lx-linked` (the selection is in another stage); null clears. */
  setLinked(state: LinkedState | null): void {
    for (const i of this.linked) {
      this.drawing.nodeEl(i)?.classList.remove('lx-linked');
    }
    this.linked = this.linkedIndices(state);
    for (const i of this.linked) {
      this.drawing.nodeEl(i)?.classList.add('lx-linked');
    }
    this.refreshGroups();
    this.node.dataset.linked = String(this.linked.size);
    this.linkedState = state;
    if (state && this.selected >= 0) {
      this.drawing.nodeEl(this.selected)?.classList.remove('lx-selected');
      this.selected = -1;
      delete this.node.dataset.selected;
      this.updateControls();
    }
    this.renderDetails();
  }

  /** The node indices of `state.ids` that the drawn graph has. */
  private linkedIndices(state: LinkedState | null): Set<number> {
    const found = state ? state.ids.map(id => this.graph.index.get(id)) : [];
    return new Set(found.filter((i): i is number => i !== undefined));
  }

  // ---- details ---------------------------------------------------------------------------------

  private renderDetails(): void {
    this.details.show(this.selected < 0 ? null : this.graph.nodes[this.selected], this.linkedState, this.graph);
  }

  dispose(): void {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    if (this.cancelFrame) {
      this.cancelFrame();
      this.cancelFrame = null;
    }
    if (this.resizeObserver) {
      this.resizeObserver.disconnect();
      this.resizeObserver = null;
    }
    if (this.readyResolve) {
      this.readyResolve();
      this.readyResolve = null;
    }
  }
}

/** A pipeline: tabs, one stage view per stage, selection and provenance shared across them. */
export class PipelineView {
  readonly node: HTMLDivElement;
  readonly views: StageView[] = [];
  readonly provenance: Provenance;
  private readonly tabs: HTMLButtonElement[] = [];
  private readonly counts: HTMLSpanElement[] = [];

  constructor(envelope: PipelineEnvelope) {
    this.provenance = Provenance.of(envelope);
    this.node = html('div', 'jp-LuminalPipeline');
    this.node.dataset.stages = envelope.stages.map(s => s.stage).join(' ');
    const tabs = html('div', 'lx-tabs');
    tabs.setAttribute('role', 'tablist');
    if (envelope.summary) {
      tabs.title = envelope.summary;
    }
    this.node.appendChild(tabs);
    const panes = html('div', 'lx-panes');
    this.node.appendChild(panes);
    envelope.stages.forEach((stage, i) => {
      const tab = html('button', 'lx-tab');
      tab.type = 'button';
      tab.dataset.stage = stage.stage;
      tab.setAttribute('role', 'tab');
      tab.appendChild(html('span', 'lx-tab-title', stageTitle(stage.stage)));
      const size = html('span', 'lx-tab-size', String(stage.nodes.length));
      size.title = drawnCount(stage);
      tab.title = `${stageTitle(stage.stage)}: ${size.title}`;
      tab.appendChild(size);
      const count = html('span', 'lx-tab-count');
      tab.appendChild(count);
      tab.addEventListener('click', () => this.show(i));
      tabs.appendChild(tab);
      this.tabs.push(tab);
      this.counts.push(count);
      const view = new StageView(stage, {
        provenance: this.provenance,
        onSelect: (from, id) => this.selected(from, id),
        onFollow: (target, id) => this.follow(target, id)
      });
      this.views.push(view);
      panes.appendChild(view.node);
    });
    this.show(0);
  }

  /** Lay out and draw every stage (hidden ones too); resolves when all are drawn. */
  start(): Promise<void> {
    return Promise.all(this.views.map(view => view.start())).then(() => undefined);
  }

  /** Show the tab of stage index `i`. */
  show(i: number): void {
    this.tabs.forEach((tab, j) => {
      tab.classList.toggle('lx-active', j === i);
      tab.setAttribute('aria-selected', j === i ? 'true' : 'false');
    });
    this.views.forEach((view, j) => {
      view.node.style.display = j === i ? '' : 'none';
      view.node.classList.toggle('lx-hidden', j !== i);
    });
    this.node.dataset.active = this.views[i] ? this.views[i].stage : '';
    this.views[i]?.onShow();
  }

  showStage(stage: string): StageView | undefined {
    const i = this.views.findIndex(view => view.stage === stage);
    if (i >= 0) {
      this.show(i);
    }
    return this.views[i];
  }

  private follow(stage: string, id: string): void {
    const view = this.showStage(stage);
    if (view) {
      view.select(id, true, true);
    }
  }

  private selected(from: StageView, id: string | null): void {
    if (id === null) {
      for (const view of this.views) {
        view.setLinked(null);
        if (view !== from) {
          view.select(null);
        }
      }
      this.counts.forEach(count => (count.textContent = ''));
      return;
    }
    const found = this.provenance.counterparts(from.stage, id);
    const lines = this.provenance.lines(from.stage, id);
    const label = from.graph.node(id)?.label ?? id;
    this.views.forEach((view, j) => {
      if (view === from) {
        view.setLinked(null);
        this.counts[j].textContent = this.counts[j].title = '';
        return;
      }
      const ids = found[view.stage] ?? [];
      view.setLinked({ from: { stage: from.stage, id, label }, ids, lines });
      this.counts[j].textContent = ids.length ? String(ids.length) : '';
      this.counts[j].title = ids.length ? linkedCount(ids.length, `${stageTitle(from.stage)} ${id}`) : '';
    });
  }

  dispose(): void {
    this.views.forEach(view => view.dispose());
  }
}
