/**
 * The interactive graph of a stage (and the tabs of a pipeline), as plain DOM + SVG.
 *
 * Everything taken from the JSON reaches the DOM only as textContent, as the value of a fixed
 * attribute name, or in dataset; never through innerHTML.
 */

import {
  detailsOf,
  drawnCount,
  FOLD_MODES,
  FoldMode,
  groupNodes,
  Grouping,
  hasIrLevel,
  irLevel,
  LABEL_MIN_SCALE,
  Level,
  LEVELS,
  linkedCount,
  makeScene,
  openingFold,
  PipelineEnvelope,
  Provenance,
  StageEnvelope,
  Scene,
  StageGraph,
  stageTitle,
  visualKind
} from './model.js';
import { BOX_TITLE, edgePath, holdsInner, labelText, Layout, stageLayoutSteps } from './layout.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Above this many nodes a stage is drawn a chunk per animation frame (after a sliced layout). */
export const PROGRESSIVE_THRESHOLD = 1500;
/** Time per animation frame spent laying out / drawing a large stage. */
const FRAME_BUDGET_MS = 12;
const MAX_SCALE = 4;
const MIN_SCALE = 0.02;
/** Most links listed per stage in the details. */
const MAX_LINKS = 60;
/** Focus: the default and largest neighbourhood depth. */
export const FOCUS_DEPTH = 2;
export const MAX_FOCUS_DEPTH = 9;
const FOLD_TEXT: Record<FoldMode, string> = { none: 'No folding', layer: 'Fold by layer', hlir: 'Fold by HLIR node' };
const LEVEL_TEXT: Record<Level, string> = { ir: 'IR level', all: 'All e-classes' };

function html<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (className) {
    element.className = className;
  }
  if (text !== undefined) {
    element.textContent = text;
  }
  return element;
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, className?: string): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  if (className) {
    element.setAttribute('class', className);
  }
  return element;
}

const now = (): number => (typeof performance !== 'undefined' ? performance.now() : Date.now());

function nextFrame(callback: () => void): () => void {
  if (typeof requestAnimationFrame === 'function') {
    const handle = requestAnimationFrame(callback);
    return () => cancelAnimationFrame(handle);
  }
  const handle = setTimeout(callback, 16);
  return () => clearTimeout(handle);
}

/** An error box: a `div.jp-LuminalStage[data-status=error]` holding the message as text. */
export function errorBox(message: string, stage = ''): HTMLDivElement {
  const root = html('div', 'jp-LuminalStage lx-error-root');
  root.dataset.stage = stage;
  root.dataset.status = 'error';
  root.dataset.nodeCount = '0';
  root.dataset.drawn = '0';
  const box = html('div', 'lx-error');
  box.appendChild(html('strong', undefined, 'luminal_lab: cannot show this output. '));
  box.appendChild(html('span', 'lx-error-message', message));
  root.appendChild(box);
  return root;
}

/** What the pipeline tells a stage view when the selection is elsewhere. */
export interface LinkedState {
  /** the selection: its stage and id */
  from: { stage: string; id: string; label: string };
  /** the ids marked in this stage */
  ids: string[];
  /** CUDA kernel id -> lines to mark (for a CUDA stage) */
  lines: Record<string, number[]>;
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
  private readonly summary: HTMLDivElement;
  private readonly options: StageViewOptions;
  private readonly svgEl: SVGSVGElement;
  private readonly viewport: SVGGElement;
  private readonly details: HTMLDivElement;
  private readonly searchInput: HTMLInputElement;
  private readonly searchCount: HTMLSpanElement;
  /** behind everything else: the boxes of compound nodes (e-classes holding their e-nodes) */
  private boxLayer: SVGGElement;
  private layout: Layout | null = null;
  private scene: Scene;
  private fold: FoldMode = 'none';
  private readonly groupings = new Map<FoldMode, Grouping>();
  private readonly expanded = new Set<string>();
  private focus: { node: number; depth: number } | null = null;
  private depth = FOCUS_DEPTH;
  private readonly focusControls: { focus: HTMLButtonElement; less: HTMLButtonElement; more: HTMLButtonElement;
    depth: HTMLSpanElement; showAll: HTMLButtonElement; fold: HTMLSelectElement; foldAll: HTMLButtonElement };
  private levelSelect: HTMLSelectElement | null = null;
  private readonly sceneIndexOfEl = new WeakMap<Element, number>();
  private centreAfterDraw = -1;
  /**
   * An e-graph's opening view is still to be chosen (`chooseOpeningView`): true until its first layout is measured
   * in a visible graph area, or the user changes the view first.
   */
  private choosingView = false;
  /** Why the view opened folded (a line of the summary), until the fold or level changes. */
  private openedFolded = false;
  private observing = false;
  /** where nodes and edges are drawn: the viewport, or while redrawing a fragment that replaces its content when done */
  private target: Node;
  private nodeEls: (SVGGElement | undefined)[] = [];
  private edgeEls: (SVGPathElement | undefined)[] = [];
  private firstNodeEl: SVGGElement | null = null;
  private drawn = 0;
  private scale = 1;
  private tx = 0;
  private ty = 0;
  private fitted = false;
  private userMoved = false;
  private selected = -1;
  private matches: number[] = [];
  private matchSet = new Set<number>();
  private matchCursor = -1;
  /** matches of the search that the current level does not draw */
  private hiddenMatches = 0;
  private linked = new Set<number>();
  private linkedState: LinkedState | null = null;
  private hovered = -1;
  private hoverMarked: { nodes: number[]; edges: number[] } = { nodes: [], edges: [] };
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

    // toolbar
    const toolbar = html('div', 'lx-toolbar');
    const title = html('span', 'lx-title', options.title ?? stageTitle(envelope.stage));
    toolbar.appendChild(title);
    this.searchInput = html('input', 'lx-search');
    this.searchInput.type = 'search';
    this.searchInput.placeholder = 'Search id, label, op…';
    this.searchInput.setAttribute('aria-label', 'Search nodes');
    this.searchInput.spellcheck = false;
    toolbar.appendChild(this.searchInput);
    this.searchCount = html('span', 'lx-search-count');
    toolbar.appendChild(this.searchCount);
    const button = (className: string, text: string, tip: string, action: () => void): HTMLButtonElement => {
      const b = html('button', `lx-button ${className}`, text);
      b.type = 'button';
      b.title = tip;
      b.setAttribute('aria-label', tip);
      b.addEventListener('click', action);
      toolbar.appendChild(b);
      return b;
    };
    // focus on the selection's neighbourhood, its depth, and back to everything
    const focus = button('lx-focus', 'Focus', 'Show only the selected node and its neighbourhood', () => this.setFocus(this.selectedId));
    const less = button('lx-depth-less', '−', 'Focus on fewer steps around the node', () => this.setDepth(this.depth - 1));
    const depth = html('span', 'lx-depth', String(this.depth));
    depth.title = 'steps around the focused node';
    toolbar.appendChild(depth);
    const more = button('lx-depth-more', '+', 'Focus on more steps around the node', () => this.setDepth(this.depth + 1));
    const showAll = button('lx-show-all', 'Show all', 'Leave focus: show every node', () => this.setFocus(null));
    // folding: a select of the modes this stage has groups for, and "Fold all" to fold expanded groups again
    const choice = <T extends string>(className: string, label: string, tip: string, values: readonly T[],
      text: Record<T, string>, action: (value: T) => void): HTMLSelectElement => {
      const s = html('select', className);
      s.title = tip;
      s.setAttribute('aria-label', label);
      for (const value of values) {
        const option = html('option', undefined, text[value]);
        option.value = value;
        s.appendChild(option);
      }
      s.addEventListener('change', () => action(s.value as T));
      toolbar.appendChild(s);
      return s;
    };
    const fold = choice('lx-fold', 'Fold', 'Draw each group of nodes as one node (click a group to expand it)',
      FOLD_MODES, FOLD_TEXT, mode => this.setFold(mode));
    const foldAll = button('lx-fold-all', 'Fold all', 'Fold the expanded groups again', () => this.setFold(this.fold));
    this.focusControls = { focus, less, more, depth, showAll, fold, foldAll };
    // an e-graph with e-classes of other sorts: its IR level or every e-class
    if (this.level !== null && this.levels.get('ir')!.size < this.levels.get('all')!.size) {
      const select = choice('lx-level', 'Level',
        'Draw the IR e-classes only (what reads what), or every e-class (expressions, lists, views…)', LEVELS,
        LEVEL_TEXT, level => this.setLevel(level));
      select.value = this.level;
      this.levelSelect = select;
    }
    toolbar.appendChild(html('span', 'lx-spacer'));
    this.scene = makeScene(this.graph);
    this.updateControls();
    button('lx-zoom-out', '−', 'Zoom out', () => this.zoomBy(1 / 1.25));
    button('lx-zoom-in', '+', 'Zoom in', () => this.zoomBy(1.25));
    button('lx-fit', 'Fit', 'Fit the graph to the view', () => this.fit());
    root.appendChild(toolbar);

    this.summary = html('div', 'lx-summary');
    root.appendChild(this.summary);

    const body = html('div', 'lx-body');
    this.svgEl = svg('svg', 'lx-graph');
    this.svgEl.setAttribute('role', 'img');
    this.svgEl.setAttribute('aria-label', `${stageTitle(envelope.stage)} graph`);
    this.viewport = svg('g', 'lx-viewport');
    this.svgEl.appendChild(this.viewport);
    this.boxLayer = svg('g', 'lx-boxes');
    this.viewport.appendChild(this.boxLayer);
    this.target = this.viewport;
    body.appendChild(this.svgEl);
    this.details = html('div', 'lx-details');
    body.appendChild(this.details);
    root.appendChild(body);
    this.renderDetails();

    this.wireSearch();
    this.wirePointer();
    this.levelChanged();
  }

  private summaryText(): string {
    const envelope = this.envelope;
    let text = envelope.summary;
    const capped = envelope.meta.capped;
    if (capped && typeof capped === 'object') {
      const c = capped as Record<string, unknown>;
      const parts = ['capped'];
      if (typeof c.reason === 'string') {
        parts.push(c.reason);
      }
      if (typeof c.included === 'string') {
        parts.push(`showing ${c.included}`);
      }
      const left: string[] = [];
      if (typeof c.left_out_eclasses === 'number') {
        left.push(`${c.left_out_eclasses.toLocaleString('en-US')} e-classes`);
      }
      if (typeof c.left_out_enodes === 'number') {
        left.push(`${c.left_out_enodes.toLocaleString('en-US')} e-nodes`);
      }
      if (left.length) {
        parts.push(`left out ${left.join(', ')}`);
      }
      text += ` | ${parts.join('; ')}`;
    } else if (capped === true) {
      text += ' | capped: not every node is included';
    }
    const counts = envelope.meta.counts;
    if (this.stage === 'egraph' && counts && typeof counts === 'object') {
      const c = counts as Record<string, unknown>;
      const shown = envelope.nodes.length;
      if (typeof c.eclasses === 'number' && typeof c.enodes === 'number' && c.eclasses + c.enodes > shown && !capped) {
        text += ` | showing ${shown} of ${c.eclasses + c.enodes} nodes`;
      }
    }
    if (this.level === 'ir' && this.levelSelect) {
      const count = (graph: StageGraph): number => graph.nodes.filter(node => node.kind === 'eclass').length;
      text += ` | IR level: ${count(this.graph)} of ${count(this.levels.get('all')!)} e-classes; Level: All e-classes shows the rest`;
    }
    if (this.openedFolded) {
      text += ' | opened folded by HLIR node to read at fit; choose No folding to see every e-class';
    }
    return text;
  }

  // ---- layout and drawing ----------------------------------------------------------------------

  /** Lay out and draw: at once for a small stage, sliced over animation frames for a large one. */
  start(): Promise<void> {
    if (!this.observing) {
      this.observing = true;
      this.observeSize();
    }
    this.draw();
    return this.ready;
  }

  /**
   * Draw the scene from scratch (after a change of focus or folding), into a fragment that replaces the old
   * drawing when complete: the old one stays on screen meanwhile (`svg.lx-busy`, not clickable), and the browser
   * does not render a growing drawing frame after frame.
   */
  private redraw(): void {
    if (this.cancelFrame) {
      this.cancelFrame();
      this.cancelFrame = null;
    }
    this.choosingView = false;
    const grouping = this.fold === 'none' ? null : this.groupingOf(this.fold);
    this.scene = makeScene(this.graph, { grouping, expanded: this.expanded, focus: this.focus });
    this.target = document.createDocumentFragment();
    this.boxLayer = svg('g', 'lx-boxes');
    this.target.appendChild(this.boxLayer);
    this.svgEl.classList.add('lx-busy');
    this.layout = null;
    this.firstNodeEl = null;
    this.drawn = 0;
    this.edgesDrawn = 0;
    this.hovered = -1;
    this.hoverMarked = { nodes: [], edges: [] };
    this.fitted = false;
    this.updateControls();
    this.draw();
  }

  private draw(): void {
    const began = now();
    const scene = this.scene.graph;
    this.node.dataset.drawStart = String(Math.round(began));
    this.node.dataset.status = 'drawing';
    this.node.dataset.drawn = '0';
    this.nodeEls = new Array(scene.size);
    this.edgeEls = new Array(scene.edges.length);
    const steps = stageLayoutSteps(scene);
    const large = scene.size > PROGRESSIVE_THRESHOLD;
    if (!large) {
      for (;;) {
        const step = steps.next();
        if (step.done) {
          this.layout = step.value;
          break;
        }
      }
      this.sizeSvg();
      if (this.chooseOpeningView()) {
        return;
      }
      this.drawSome(Infinity);
      this.finish(began);
      return;
    }
    const work = (): void => {
      this.cancelFrame = null;
      if (this.disposed) {
        return;
      }
      const until = now() + FRAME_BUDGET_MS;
      while (this.layout === null && now() < until) {
        const step = steps.next();
        if (step.done) {
          this.layout = step.value;
          if (this.target === this.viewport) {
            this.sizeSvg();
            if (this.chooseOpeningView()) {
              return; // the folded scene is drawn instead
            }
            this.fitIfVisible();
          }
        }
      }
      if (this.layout !== null && now() < until) {
        this.drawSome(until);
      }
      if (this.layout !== null && this.isComplete()) {
        this.finish(began);
      } else {
        this.cancelFrame = nextFrame(work);
      }
    };
    this.cancelFrame = nextFrame(work);
  }

  private isComplete(): boolean {
    return this.drawn >= this.scene.graph.size && this.edgesDrawn >= this.edgeEls.length;
  }

  private edgesDrawn = 0;

  /** Draw nodes, then edges, until `deadline` (ms, performance.now()). */
  private drawSome(deadline: number): void {
    const layout = this.layout!;
    const n = this.scene.graph.size;
    let count = 0;
    while (this.drawn < n) {
      this.drawNode(this.drawn++);
      if (++count % 64 === 0 && now() > deadline) {
        break;
      }
    }
    this.node.dataset.drawn = String(this.drawn);
    if (this.drawn < n) {
      return;
    }
    while (this.edgesDrawn < layout.edges.length) {
      this.drawEdge(this.edgesDrawn++);
      if (++count % 64 === 0 && now() > deadline) {
        break;
      }
    }
  }

  /** Draw scene node `i` (a stage node, or a folded group: `g.lx-node.lx-group[data-group][data-size]`). */
  private drawNode(i: number): void {
    const layout = this.layout!;
    const scene = this.scene.graph;
    const node = scene.nodes[i];
    const w = layout.width[i];
    const h = layout.heights[i];
    const box = holdsInner(scene, i); // drawn as a box holding its members, which are drawn after it
    const g = svg('g', box ? 'lx-node lx-box' : 'lx-node');
    const group = this.scene.group[i] >= 0;
    if (group) {
      g.classList.add('lx-group');
      g.dataset.group = String(node.group);
      g.dataset.size = String(node.size);
    } else {
      g.dataset.id = node.id;
    }
    g.dataset.kind = visualKind(this.stage, node);
    if (node.subsumed === true) {
      g.dataset.subsumed = 'true';
    }
    const owner = scene.eclassOf[i];
    if (owner >= 0 && holdsInner(scene, owner)) {
      g.dataset.eclass = scene.nodes[owner].id; // drawn inside that e-class's box, at the layout's row and column
      const q = layout.nodeInner?.[i] ?? -1;
      if (q >= 0) {
        g.dataset.row = String(layout.innerRow[q]);
        g.dataset.column = String(layout.innerColumn[q]);
      }
    }
    g.setAttribute('transform', `translate(${round(layout.x[i] - w / 2)},${round(layout.y[i] - h / 2)})`);
    const shape = svg('rect', 'lx-shape');
    shape.setAttribute('width', String(w));
    shape.setAttribute('height', String(h));
    const radius = box ? 7 : node.kind === 'enode' ? h / 2 : node.kind === 'eclass' ? 9 : group ? 2 : 5;
    shape.setAttribute('rx', String(radius));
    shape.setAttribute('ry', String(radius));
    g.appendChild(shape);
    const text = svg('text', 'lx-label');
    text.setAttribute('x', String(w / 2));
    text.setAttribute('y', String(box ? BOX_TITLE / 2 + 1 : h / 2));
    const drawnLabel = labelText(node.label);
    text.textContent = drawnLabel;
    g.appendChild(text);
    if (drawnLabel !== node.label || group) {
      const tip = svg('title');
      tip.textContent = group ? `${node.label} (click to expand)` : node.label;
      g.appendChild(tip);
    }
    this.applyNodeClasses(i, g);
    this.nodeEls[i] = g;
    this.sceneIndexOfEl.set(g, i);
    if (box) {
      this.boxLayer.appendChild(g);
      return;
    }
    this.target.appendChild(g);
    if (this.firstNodeEl === null) {
      this.firstNodeEl = g;
    }
  }

  private drawEdge(e: number): void {
    const route = this.layout!.edges[e];
    const scene = this.scene.graph;
    const edge = scene.edges[e];
    const index = this.scene.edge[e];
    const path = svg('path', (route.reversed ? 'lx-edge lx-back' : 'lx-edge') + (index < 0 ? ' lx-merged' : ''));
    if (index >= 0) {
      path.dataset.index = String(index);
    } else {
      path.dataset.merged = String(edge.merged);
    }
    const end = (id: string): string => {
      const v = scene.index.get(id)!;
      return this.scene.group[v] >= 0 ? `group ${String(scene.nodes[v].group)}` : id;
    };
    path.dataset.source = end(edge.source);
    path.dataset.target = end(edge.target);
    path.setAttribute('d', edgePath(route));
    this.edgeEls[e] = path;
    if (this.hoverMarked.edges.includes(e)) {
      path.classList.add('lx-neighbour');
    }
    this.target.insertBefore(path, this.firstNodeEl);
  }

  private finish(began: number): void {
    if (this.target !== this.viewport) {
      this.viewport.replaceChildren(this.target);
      this.target = this.viewport;
      this.svgEl.classList.remove('lx-busy');
      this.sizeSvg();
    }
    this.node.dataset.drawn = String(this.drawn);
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
    g.classList.toggle('lx-neighbour', this.hoverMarked.nodes.includes(i));
  }

  /** Re-apply the classes of the drawn folded groups (after the matches or linked nodes changed). */
  private refreshGroups(): void {
    this.scene.group.forEach((group, i) => {
      const g = this.nodeEls[i];
      if (group >= 0 && g) {
        this.applyNodeClasses(i, g);
      }
    });
  }

  /** The element drawing the stage's node `i` itself (not its folded group), if drawn. */
  private nodeEl(i: number): SVGGElement | undefined {
    const v = i >= 0 ? this.scene.at[i] : -1;
    return v >= 0 && this.scene.node[v] === i ? this.nodeEls[v] : undefined;
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
    this.setSearch(this.searchInput.value);
    this.renderDetails();
  }

  /** What depends on the level only: the groupings, the fold options, the node count and the summary. */
  private levelChanged(): void {
    this.openedFolded = false;
    this.groupings.clear();
    for (const option of Array.from(this.focusControls.fold.options)) {
      option.disabled = option.value !== 'none' && this.groupingOf(option.value as FoldMode).groups.length === 0;
    }
    if (this.fold !== 'none' && this.groupingOf(this.fold).groups.length === 0) {
      this.fold = 'none';
    }
    if (this.level !== null) {
      this.node.dataset.level = this.level;
      if (this.levelSelect) {
        this.levelSelect.value = this.level;
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
    const c = this.focusControls;
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
    const layout = this.layout!;
    const height = `${Math.round(Math.max(320, Math.min(600, layout.totalHeight + 16)))}px`;
    this.svgEl.style.height = height;
    this.details.style.height = height;
  }

  // ---- view transform --------------------------------------------------------------------------

  private applyTransform(): void {
    this.viewport.setAttribute('transform', `translate(${round(this.tx)},${round(this.ty)}) scale(${this.scale.toFixed(4)})`);
    this.svgEl.classList.toggle('lx-lod', this.scale < LABEL_MIN_SCALE);
    this.node.dataset.scale = this.scale.toFixed(3);
  }

  private size(): { width: number; height: number } {
    return { width: this.svgEl.clientWidth, height: this.svgEl.clientHeight };
  }

  /** Whether the graph area is laid out on screen (not display:none). */
  isVisible(): boolean {
    const { width, height } = this.size();
    return width > 0 && height > 0;
  }

  private fitIfVisible(): void {
    if (!this.fitted && this.layout !== null && this.isVisible() && !this.chooseOpeningView()) {
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
    if (!this.choosingView || this.layout === null || !this.isVisible()) {
      return false;
    }
    this.choosingView = false;
    if (this.level !== 'ir' || this.fold !== 'none' || this.focus !== null || this.expanded.size > 0) {
      return false;
    }
    const scale = this.fitScale(this.layout);
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

  /** The scale at which `layout` fits the graph area (as `fit` sets it). */
  private fitScale(layout: Layout): number {
    const { width, height } = this.size();
    const pad = 16;
    const gw = Math.max(1, layout.totalWidth);
    const gh = Math.max(1, layout.totalHeight);
    return clamp(Math.min((width - 2 * pad) / gw, (height - 2 * pad) / gh, 1.5), MIN_SCALE, MAX_SCALE);
  }

  /** Fit the whole graph to the view (at most 1.5x); deferred until the view has a size. */
  fit(): void {
    if (this.layout === null) {
      return;
    }
    const { width, height } = this.size();
    if (width === 0 || height === 0) {
      this.fitted = false;
      return;
    }
    const pad = 16;
    const gw = Math.max(1, this.layout.totalWidth);
    const gh = Math.max(1, this.layout.totalHeight);
    this.scale = this.fitScale(this.layout);
    this.tx = (width - gw * this.scale) / 2;
    this.ty = Math.max(pad, (height - gh * this.scale) / 2);
    this.fitted = true;
    this.userMoved = false;
    this.applyTransform();
  }

  private zoomAt(factor: number, cx: number, cy: number): void {
    const scale = clamp(this.scale * factor, MIN_SCALE, MAX_SCALE);
    const k = scale / this.scale;
    this.tx = cx - (cx - this.tx) * k;
    this.ty = cy - (cy - this.ty) * k;
    this.scale = scale;
    this.userMoved = true;
    this.applyTransform();
  }

  zoomBy(factor: number): void {
    const { width, height } = this.size();
    this.zoomAt(factor, width / 2, height / 2);
  }

  /** Centre the stage's node `i` (or the group showing it) in the view, zooming in to a readable scale if needed. */
  private centreOn(i: number): void {
    const v = this.scene.at[i];
    if (this.layout === null || v < 0) {
      if (i >= 0 && this.node.dataset.status === 'drawing') {
        this.centreAfterDraw = i;
      }
      return;
    }
    if (!this.fitted) {
      this.fit();
    }
    const { width, height } = this.size();
    if (width === 0) {
      return;
    }
    this.scale = Math.max(this.scale, 0.8);
    this.tx = width / 2 - this.layout.x[v] * this.scale;
    this.ty = height / 2 - this.layout.y[v] * this.scale;
    this.userMoved = true;
    this.applyTransform();
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
      const { width, height } = this.size();
      const key = `${width}x${height}`;
      if (key === last || width === 0 || height === 0) {
        return;
      }
      last = key;
      if (!this.fitted || !this.userMoved) {
        this.fitted = false;
        this.fitIfVisible();
      }
    });
    this.resizeObserver.observe(this.svgEl);
  }

  // ---- interaction -----------------------------------------------------------------------------

  private wireSearch(): void {
    this.searchInput.addEventListener('input', () => this.setSearch(this.searchInput.value));
    this.searchInput.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        event.preventDefault();
        this.setSearch(this.searchInput.value);
        if (!this.matches.length && this.hiddenMatches > 0) {
          this.setLevel('all'); // what the IR level hides: show every e-class and step through the matches there
        }
        if (this.matches.length) {
          const step = event.shiftKey ? -1 : 1;
          this.matchCursor = (this.matchCursor + step + this.matches.length) % this.matches.length;
          if (this.matchCursor < 0) {
            this.matchCursor = 0;
          }
          this.selectIndex(this.matches[this.matchCursor], true, true);
        }
      } else if (event.key === 'Escape') {
        this.searchInput.value = '';
        this.setSearch('');
      }
      event.stopPropagation();
    });
  }

  /** Mark the nodes matching `query` (`.lx-match`) and show their count. */
  setSearch(query: string): void {
    const ids = this.graph.search(query);
    const next = ids.map(id => this.graph.index.get(id)!);
    const same = next.length === this.matches.length && next.every((v, i) => v === this.matches[i]);
    if (!same) {
      for (const i of this.matches) {
        this.nodeEl(i)?.classList.remove('lx-match');
      }
      this.matches = next;
      this.matchSet = new Set(next);
      this.matchCursor = -1;
      for (const i of next) {
        this.nodeEl(i)?.classList.add('lx-match');
      }
      this.refreshGroups();
    }
    const n = next.length;
    const all = this.levels.get('all');
    this.hiddenMatches = all && all !== this.graph ? all.search(query).length - n : 0;
    const hidden = this.hiddenMatches === 0 ? '' : `, ${this.hiddenMatches} hidden at the IR level${n === 0 ? ' (Enter shows them)' : ''}`;
    this.searchCount.textContent =
      (query.trim() === '' ? '' : n === 0 ? 'no matches' : n === 1 ? '1 match' : `${n} matches`) + hidden;
    this.node.dataset.matches = String(n);
  }

  /** The scene index of the node (or group) element at or above `target`, or -1. */
  private nodeIndexOf(target: EventTarget | null): number {
    let element = target as Element | null;
    while (element && element !== this.svgEl) {
      if (element instanceof SVGGElement && element.classList.contains('lx-node')) {
        const i = this.sceneIndexOfEl.get(element);
        return i === undefined ? -1 : i;
      }
      element = element.parentNode as Element | null;
    }
    return -1;
  }

  private wirePointer(): void {
    let down: { x: number; y: number; tx: number; ty: number; id: number } | null = null;
    let dragging = false;
    let suppressClick = false;
    // the node pressed: when the release lands on another element (nodes a fraction of a pixel tall in a large
    // graph), the click goes to their common ancestor, and the press decides
    let pressed = -1;
    this.svgEl.addEventListener('pointerdown', event => {
      if (event.button !== 0) {
        return;
      }
      down = { x: event.clientX, y: event.clientY, tx: this.tx, ty: this.ty, id: event.pointerId };
      dragging = false;
      pressed = this.nodeIndexOf(event.target);
    });
    this.svgEl.addEventListener('pointermove', event => {
      if (!down || event.pointerId !== down.id) {
        return;
      }
      const dx = event.clientX - down.x;
      const dy = event.clientY - down.y;
      if (!dragging && Math.abs(dx) + Math.abs(dy) > 4) {
        dragging = true;
        this.svgEl.classList.add('lx-panning');
        try {
          this.svgEl.setPointerCapture(event.pointerId);
        } catch {
          // the pointer may already be gone
        }
      }
      if (dragging) {
        this.tx = down.tx + dx;
        this.ty = down.ty + dy;
        this.userMoved = true;
        this.applyTransform();
      }
    });
    const end = (event: PointerEvent): void => {
      if (!down || event.pointerId !== down.id) {
        return;
      }
      if (dragging) {
        suppressClick = true;
        this.svgEl.classList.remove('lx-panning');
      }
      down = null;
      dragging = false;
    };
    this.svgEl.addEventListener('pointerup', end);
    this.svgEl.addEventListener('pointercancel', end);
    this.svgEl.addEventListener('click', event => {
      if (suppressClick) {
        suppressClick = false;
        pressed = -1;
        return;
      }
      const at = this.nodeIndexOf(event.target);
      const v = at >= 0 ? at : pressed;
      pressed = -1;
      if (v >= 0 && this.scene.group[v] >= 0) {
        this.expandGroup(String(this.scene.graph.nodes[v].group));
      } else {
        this.selectIndex(v >= 0 ? this.scene.node[v] : -1, false, true);
      }
    });
    this.svgEl.addEventListener(
      'wheel',
      event => {
        event.preventDefault();
        const box = this.svgEl.getBoundingClientRect();
        const delta = event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY;
        this.zoomAt(Math.exp(-clamp(delta, -200, 200) / 300), event.clientX - box.left, event.clientY - box.top);
      },
      { passive: false }
    );
    this.svgEl.addEventListener('pointerover', event => {
      const i = this.nodeIndexOf(event.target);
      if (i >= 0 && i !== this.hovered) {
        this.setHover(i);
      }
    });
    this.svgEl.addEventListener('pointerout', event => {
      if (this.hovered < 0) {
        return;
      }
      const to = this.nodeIndexOf(event.relatedTarget);
      if (to !== this.hovered) {
        this.setHover(to);
      }
    });
  }

  /** Hover scene node `i` (-1: none): its in/out neighbours and the edges joining them get `.lx-neighbour`. */
  setHover(i: number): void {
    for (const v of this.hoverMarked.nodes) {
      this.nodeEls[v]?.classList.remove('lx-neighbour');
    }
    for (const e of this.hoverMarked.edges) {
      this.edgeEls[e]?.classList.remove('lx-neighbour');
    }
    if (this.hovered >= 0) {
      this.nodeEls[this.hovered]?.classList.remove('lx-hover');
    }
    this.hovered = i;
    this.hoverMarked = { nodes: [], edges: [] };
    if (i < 0) {
      return;
    }
    const scene = this.scene.graph;
    const { nodes, edges } = scene.neighbours(scene.nodes[i].id);
    this.hoverMarked = { nodes: nodes.map(id => scene.index.get(id)!).filter(v => v !== i), edges };
    for (const v of this.hoverMarked.nodes) {
      this.nodeEls[v]?.classList.add('lx-neighbour');
    }
    for (const e of edges) {
      this.edgeEls[e]?.classList.add('lx-neighbour');
    }
    this.nodeEls[i]?.classList.add('lx-hover');
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
    this.nodeEl(this.selected)?.classList.remove('lx-selected');
    this.selected = i;
    if (i >= 0) {
      if (!this.reveal(i)) {
        this.nodeEl(i)?.classList.add('lx-selected');
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
      this.nodeEl(i)?.classList.remove('lx-linked');
    }
    this.linked = this.linkedIndices(state);
    for (const i of this.linked) {
      this.nodeEl(i)?.classList.add('lx-linked');
    }
    this.refreshGroups();
    this.node.dataset.linked = String(this.linked.size);
    this.linkedState = state;
    if (state && this.selected >= 0) {
      this.nodeEl(this.selected)?.classList.remove('lx-selected');
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
    const details = this.details;
    details.textContent = '';
    if (this.selected < 0) {
      if (this.linkedState) {
        this.renderLinkedDetails(this.linkedState);
      } else {
        details.appendChild(html('div', 'lx-hint', 'Click a node to see its fields (Focus then shows its neighbourhood), a folded group to expand it; drag to pan, wheel to zoom.'));
      }
      return;
    }
    const node = this.graph.nodes[this.selected];
    const head = html('div', 'lx-details-head');
    head.appendChild(html('span', 'lx-details-id', node.id));
    head.appendChild(html('span', 'lx-details-label', node.label));
    details.appendChild(head);

    const provenance = this.options.provenance;
    let lines: Record<string, number[]> = {};
    if (provenance && provenance.has(this.stage, node.id)) {
      const found = provenance.counterparts(this.stage, node.id);
      lines = provenance.lines(this.stage, node.id, found);
      const block = html('div', 'lx-links');
      block.appendChild(html('div', 'lx-links-title', 'Counterparts in the other stages'));
      let any = false;
      for (const [stage, ids] of Object.entries(found)) {
        if (!ids.length) {
          continue;
        }
        any = true;
        const row = html('div', 'lx-link-row');
        row.dataset.stage = stage;
        for (const id of ids.slice(0, MAX_LINKS)) {
          const a = html('a', 'lx-link', `${stageTitle(stage)} ${id}`);
          a.dataset.stage = stage;
          a.dataset.id = id;
          a.href = '#';
          a.addEventListener('click', event => {
            event.preventDefault();
            if (this.options.onFollow) {
              this.options.onFollow(stage, id);
            }
          });
          row.appendChild(a);
        }
        if (ids.length > MAX_LINKS) {
          row.appendChild(html('span', 'lx-more', `and ${ids.length - MAX_LINKS} more`));
        }
        block.appendChild(row);
      }
      if (!any) {
        block.appendChild(html('div', 'lx-hint', 'none'));
      }
      details.appendChild(block);
    }

    if (this.stage === 'cuda' && typeof node.source === 'string') {
      details.appendChild(sourceListing(node.id, node.source, lines[node.id] ?? []));
    }
    const table = html('table', 'lx-fields');
    const body = html('tbody');
    const isSource = (key: string): boolean => key === 'source' && typeof node.source === 'string' && this.stage === 'cuda';
    for (const [key, text] of detailsOf(node)) {
      const row = html('tr');
      row.dataset.key = key;
      row.appendChild(html('th', undefined, key));
      const shown = isSource(key) ? `${(node.source as string).replace(/\n$/, '').split('\n').length} lines, above` : text;
      row.appendChild(html('td', undefined, shown));
      body.appendChild(row);
    }
    table.appendChild(body);
    details.appendChild(table);
  }

  private renderLinkedDetails(state: LinkedState): void {
    const details = this.details;
    const head = html('div', 'lx-details-head');
    head.appendChild(html('span', 'lx-details-id', `${stageTitle(state.from.stage)} ${state.from.id}`));
    head.appendChild(html('span', 'lx-details-label', state.from.label));
    details.appendChild(head);
    const n = state.ids.length;
    details.appendChild(
      html('div', 'lx-hint', n === 0 ? 'Nothing here corresponds to it.' : `${n} ${n === 1 ? 'node' : 'nodes'} here correspond to it (marked).`)
    );
    if (this.stage === 'cuda') {
      for (const id of state.ids) {
        const node = this.graph.node(id);
        if (node && typeof node.source === 'string') {
          details.appendChild(html('div', 'lx-source-title', `${node.id} ${node.label}`));
          details.appendChild(sourceListing(node.id, node.source, state.lines[node.id] ?? []));
        }
      }
    }
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

/** A CUDA source listing: one `span.lx-line[data-line]` per line, `.lx-hit` on `hits`. */
function sourceListing(kernel: string, source: string, hits: number[]): HTMLPreElement {
  const pre = html('pre', 'lx-source');
  pre.dataset.kernel = kernel;
  const marked = new Set(hits);
  const lines = source.replace(/\n$/, '').split('\n');
  lines.forEach((line, i) => {
    const span = html('span', marked.has(i + 1) ? 'lx-line lx-hit' : 'lx-line', line);
    span.dataset.line = String(i + 1);
    pre.appendChild(span);
  });
  return pre;
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
    const lines = this.provenance.lines(from.stage, id, found);
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

function round(v: number): string {
  return (Math.round(v * 100) / 100).toString();
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}
