/**
 * The HTML around a stage's graph: its toolbar, its summary line, its details panel (fields, counterparts in the
 * other stages, CUDA source) and the error box. Text from the JSON reaches the DOM only as textContent, as the
 * value of a fixed attribute name, or in dataset.
 */

import { detailsOf, FOLD_MODES, FoldMode, Level, LEVELS, Provenance, StageEnvelope, StageGraph, StageNode, stageTitle } from './model.js';

/** Most links listed per stage in the details. */
const MAX_LINKS = 60;
const FOLD_TEXT: Record<FoldMode, string> = { none: 'No folding', layer: 'Fold by layer', hlir: 'Fold by HLIR node' };
const LEVEL_TEXT: Record<Level, string> = { ir: 'IR level', all: 'All e-classes' };

/** An HTML element with a class and text. */
export function html<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (className) {
    element.className = className;
  }
  if (text !== undefined) {
    element.textContent = text;
  }
  return element;
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

/** What the toolbar's controls do. */
export interface ToolbarActions {
  focus(): void;
  /** focus on one step more (1) or fewer (-1) */
  depth(step: number): void;
  showAll(): void;
  fold(mode: FoldMode): void;
  foldAll(): void;
  level(level: Level): void;
  zoom(factor: number): void;
  fit(): void;
}

/** A stage's toolbar: title, search, focus and its depth, folding, an e-graph's level, zoom and fit. */
export class Toolbar {
  readonly node = html('div', 'lx-toolbar');
  readonly search = html('input', 'lx-search');
  readonly searchCount = html('span', 'lx-search-count');
  readonly focus: HTMLButtonElement;
  readonly less: HTMLButtonElement;
  readonly depth: HTMLSpanElement;
  readonly more: HTMLButtonElement;
  readonly showAll: HTMLButtonElement;
  readonly fold: HTMLSelectElement;
  readonly foldAll: HTMLButtonElement;
  /** an e-graph with e-classes of other sorts: its IR level or every e-class */
  readonly level: HTMLSelectElement | null = null;

  constructor(title: string, depth: number, withLevel: boolean, actions: ToolbarActions) {
    const toolbar = this.node;
    toolbar.appendChild(html('span', 'lx-title', title));
    this.search.type = 'search';
    this.search.placeholder = 'Search id, label, op…';
    this.search.setAttribute('aria-label', 'Search nodes');
    this.search.spellcheck = false;
    toolbar.appendChild(this.search);
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
    this.focus = button('lx-focus', 'Focus', 'Show only the selected node and its neighbourhood', () => actions.focus());
    this.less = button('lx-depth-less', '−', 'Focus on fewer steps around the node', () => actions.depth(-1));
    this.depth = html('span', 'lx-depth', String(depth));
    this.depth.title = 'steps around the focused node';
    toolbar.appendChild(this.depth);
    this.more = button('lx-depth-more', '+', 'Focus on more steps around the node', () => actions.depth(1));
    this.showAll = button('lx-show-all', 'Show all', 'Leave focus: show every node', () => actions.showAll());
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
    this.fold = choice('lx-fold', 'Fold', 'Draw each group of nodes as one node (click a group to expand it)',
      FOLD_MODES, FOLD_TEXT, mode => actions.fold(mode));
    this.foldAll = button('lx-fold-all', 'Fold all', 'Fold the expanded groups again', () => actions.foldAll());
    if (withLevel) {
      this.level = choice('lx-level', 'Level',
        'Draw the IR e-classes only (what reads what), or every e-class (expressions, lists, views…)', LEVELS,
        LEVEL_TEXT, level => actions.level(level));
    }
    toolbar.appendChild(html('span', 'lx-spacer'));
    button('lx-zoom-out', '−', 'Zoom out', () => actions.zoom(1 / 1.25));
    button('lx-zoom-in', '+', 'Zoom in', () => actions.zoom(1.25));
    button('lx-fit', 'Fit', 'Fit the graph to the view', () => actions.fit());
  }
}

/**
 * The summary line: the envelope's summary, what a cap left out, how many nodes are shown, and (`irLevel`: the
 * e-classes drawn and all of them) that the IR level hides some; `openedFolded` says why the view opened folded.
 */
export function summaryText(envelope: StageEnvelope, irLevel: [number, number] | null, openedFolded: boolean): string {
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
  if (envelope.stage === 'egraph' && counts && typeof counts === 'object') {
    const c = counts as Record<string, unknown>;
    const shown = envelope.nodes.length;
    if (typeof c.eclasses === 'number' && typeof c.enodes === 'number' && c.eclasses + c.enodes > shown && !capped) {
      text += ` | showing ${shown} of ${c.eclasses + c.enodes} nodes`;
    }
  }
  if (irLevel) {
    text += ` | IR level: ${irLevel[0]} of ${irLevel[1]} e-classes; Level: All e-classes shows the rest`;
  }
  if (openedFolded) {
    text += ' | opened folded by HLIR node to read at fit; choose No folding to see every e-class';
  }
  return text;
}

/**
 * The details panel, `div.lx-details`: the selected node's fields, its counterparts in the other stages (links to
 * follow) and a CUDA kernel's source; or, the selection being in another stage, what corresponds to it here.
 */
export class Details {
  readonly node = html('div', 'lx-details');

  constructor(private readonly stage: string, private readonly provenance?: Provenance,
    private readonly onFollow?: (stage: string, id: string) => void) {}

  /** Show `node` of this stage; with none, `linked` (or a hint when null too); `graph` is the graph drawn. */
  show(node: StageNode | null, linked: LinkedState | null, graph: StageGraph): void {
    const details = this.node;
    details.textContent = '';
    if (node === null) {
      if (linked) {
        this.showLinked(linked, graph);
      } else {
        details.appendChild(html('div', 'lx-hint', 'Click a node to see its fields (Focus then shows its neighbourhood), a folded group to expand it; drag to pan, wheel to zoom.'));
      }
      return;
    }
    details.appendChild(head(node.id, node.label));
    const provenance = this.provenance;
    let lines: Record<string, number[]> = {};
    if (provenance && provenance.has(this.stage, node.id)) {
      const found = provenance.counterparts(this.stage, node.id);
      lines = provenance.lines(this.stage, node.id);
      details.appendChild(this.links(found));
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

  /** `div.lx-links`: a row of `a.lx-link` per other stage with counterparts. */
  private links(found: Record<string, string[]>): HTMLDivElement {
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
          if (this.onFollow) {
            this.onFollow(stage, id);
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
    return block;
  }

  private showLinked(state: LinkedState, graph: StageGraph): void {
    const details = this.node;
    details.appendChild(head(`${stageTitle(state.from.stage)} ${state.from.id}`, state.from.label));
    const n = state.ids.length;
    details.appendChild(
      html('div', 'lx-hint', n === 0 ? 'Nothing here corresponds to it.' : `${n} ${n === 1 ? 'node' : 'nodes'} here correspond to it (marked).`)
    );
    if (this.stage === 'cuda') {
      for (const id of state.ids) {
        const node = graph.node(id);
        if (node && typeof node.source === 'string') {
          details.appendChild(html('div', 'lx-source-title', `${node.id} ${node.label}`));
          details.appendChild(sourceListing(node.id, node.source, state.lines[node.id] ?? []));
        }
      }
    }
  }
}

function head(id: string, label: string): HTMLDivElement {
  const div = html('div', 'lx-details-head');
  div.appendChild(html('span', 'lx-details-id', id));
  div.appendChild(html('span', 'lx-details-label', label));
  return div;
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
