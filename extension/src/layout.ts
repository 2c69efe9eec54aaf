/**
 * A layered (Sugiyama-style) layout, top to bottom, linear-time per sweep:
 *
 * 1. cycles are broken by reversing the back edges of a depth-first search (e-graphs have cycles);
 * 2. ranks by longest path from the sources; a source then moves down next to its nearest successor;
 * 3. edges spanning several ranks get dummy vertices (up to a budget; beyond it they are drawn direct);
 * 4. a few barycenter sweeps down and up order each rank, keeping the order with the fewest crossings;
 * 5. x coordinates: each rank is placed as close as possible to its neighbours' mean x under the
 *    minimum-separation constraints (a weighted isotonic regression, O(rank size)); y from the rank;
 * 6. edge routes through their dummies, end points spread along the node's top / bottom side.
 *
 * Compound vertices (an e-class holding its e-nodes): a vertex may hold inner boxes, drawn under a title
 * row in rows of at most INNER_COLUMNS (`innerColumns`) side by side, or more when that would make more than
 * INNER_ROWS (`innerRows`) rows (`innerColumnsFor`: a tall box grows wider), rows left-aligned and stacked with
 * INNER_GAP between them; the vertex is as wide as its widest row and as tall as its rows (`boxHeight`).
 * An edge may leave from an inner box (a port): it then starts below that box, at the box's bottom when
 * the box is in the vertex's last row, else at the vertex's bottom edge directly below the box (never
 * behind the inner boxes under it); a back edge from a port (it runs up) starts on the box's top in the
 * first row, else on the vertex's top above the box. The crossing count and the barycenters see a port
 * at its column's place along the vertex, and the inner boxes of each vertex are ordered by the
 * barycenter of what they read, then fill the rows in that order. A rank is as tall as its tallest
 * vertex; its vertices share their top. Edges always end on the top of their target vertex.
 * `stageLayoutSteps` lays a stage out this way, an e-class being one compound vertex whose inner boxes
 * are its e-nodes.
 *
 * Deterministic (no randomness, stable sorts). Pure: no DOM.
 */

import type { StageGraph } from './model.js';

export const NODE_HEIGHT = 28;
export const RANK_GAP = 36;
export const NODE_GAP = 18;
export const DUMMY_WIDTH = 6;
export const DUMMY_GAP = 6;
export const LABEL_CHARS = 40;
export const CHAR_WIDTH = 6.7; // 11px monospace
export const MIN_WIDTH = 44;
export const MAX_WIDTH = Math.ceil(LABEL_CHARS * CHAR_WIDTH + 20);
/** A compound vertex: padding around its inner boxes, its title row, the gap between inner boxes. */
export const BOX_PAD = 6;
export const BOX_TITLE = 18;
export const INNER_GAP = 8;
/** Most inner boxes side by side in one row of a compound vertex (the default of `innerColumns`)... */
export const INNER_COLUMNS = 4;
/** ...unless that makes more rows than this (the default of `innerRows`): a tall vertex then uses more columns. */
export const INNER_ROWS = 3;
/**
 * Columns of a compound vertex holding `count` inner boxes: at most `columns` side by side, or as many more as
 * keep it within `rows` rows (a tall e-class grows wider instead, so ranks stay short).
 */
export function innerColumnsFor(count: number, columns = INNER_COLUMNS, rows = INNER_ROWS): number {
  return Math.min(count, Math.max(columns, Math.ceil(count / rows)));
}
/** Height of a compound vertex holding `rows` rows of inner boxes (title row, the rows, padding below). */
export function boxHeight(rows: number): number {
  return BOX_TITLE + rows * NODE_HEIGHT + (rows - 1) * INNER_GAP + BOX_PAD;
}
/** Height of a compound vertex with one row of inner boxes. */
export const BOX_HEIGHT = boxHeight(1);

export interface LayoutInput {
  /** number of nodes */
  count: number;
  /** node widths (px), one per node */
  widths: ArrayLike<number>;
  /** edges as node indices: sources[e] -> targets[e] */
  sources: ArrayLike<number>;
  targets: ArrayLike<number>;
  /** optional edge weights (default 1): heavier edges pull their ends closer together horizontally */
  weights?: ArrayLike<number>;
  /** optional compound vertices: inner boxes held in rows in their vertex */
  inner?: InnerInput;
}

/** The inner boxes of compound vertices (the e-nodes of e-classes). */
export interface InnerInput {
  /** per inner box: the vertex holding it */
  owner: ArrayLike<number>;
  /** per inner box: its width (its height is NODE_HEIGHT) */
  widths: ArrayLike<number>;
  /** per edge: the inner box its source end leaves from (it must be held by the edge's source), or -1 */
  port: ArrayLike<number>;
}

export interface LayoutOptions {
  /** barycenter sweeps (down, up, down, ...); default 8, or 4 above 2,000 nodes */
  sweeps?: number;
  /** most dummy vertices to insert; default 2 * (nodes + edges) + 1,000 */
  maxDummies?: number;
  /** most inner boxes in one row of a compound vertex; default INNER_COLUMNS (more to keep within innerRows) */
  innerColumns?: number;
  /** most rows of inner boxes in a compound vertex (it then takes more columns); default INNER_ROWS */
  innerRows?: number;
}

export interface EdgeRoute {
  /** x0, y0, x1, y1, ... from the edge's source to its target */
  points: number[];
  /** whether the layout reversed it to break a cycle (it then runs upwards) */
  reversed: boolean;
  /**
   * a self-loop. points: the node's right side, top then bottom; or, leaving from an inner box, eight
   * numbers: its start below the inner box (as any edge from a port), a point right of and below the
   * vertex, one right of and above it, and the end on the vertex's top
   */
  loop: boolean;
}

export interface Layout {
  /** node centres */
  x: Float64Array;
  y: Float64Array;
  width: Float64Array;
  /** height of an ordinary node (NODE_HEIGHT) */
  height: number;
  /** height of each node (`boxHeight(rows)` for a compound vertex) */
  heights: Float64Array;
  rank: Int32Array;
  /** position of each node within its rank (counting dummies) */
  order: Int32Array;
  ranks: number;
  edges: EdgeRoute[];
  /** total size of the drawing */
  totalWidth: number;
  totalHeight: number;
  /** edge crossings between adjacent ranks of the chosen order */
  crossings: number;
  dummies: number;
  /** inner boxes (input.inner): centres and widths; empty without */
  innerX: Float64Array;
  innerY: Float64Array;
  innerWidth: Float64Array;
  /** inner boxes: the row (0 under the title) and column (0 leftmost) each sits in within its vertex */
  innerRow: Int32Array;
  innerColumn: Int32Array;
  /** a stage's layout (`stageLayoutSteps`): per stage node, its inner box (an index into innerX ..
   * innerColumn), or -1 for a vertex */
  nodeInner?: Int32Array;
}

/** The label as drawn: at most `max` characters, ending with an ellipsis when cut. */
export function labelText(label: string, max = LABEL_CHARS): string {
  const chars = Array.from(label.replace(/\s+/g, ' '));
  return chars.length <= max ? chars.join('') : chars.slice(0, max - 1).join('') + '…';
}

/** Node width for a label (from its drawn length). */
export function nodeWidth(label: string): number {
  const chars = Array.from(labelText(label)).length;
  return Math.max(MIN_WIDTH, Math.min(MAX_WIDTH, Math.ceil(chars * CHAR_WIDTH + 20)));
}

/** The layout input of a stage, and where each of its nodes went: a vertex, or an inner box. */
export interface StageLayoutInput extends LayoutInput {
  /** per node: its vertex, or -1 when it is an inner box */
  vertexOf: Int32Array;
  /** per node: its inner box, or -1 when it is a vertex */
  innerOf: Int32Array;
  /** per vertex: its node */
  nodeOf: Int32Array;
}

/**
 * Whether node `i` of a stage is laid out as a compound vertex, a box holding its members (an e-class
 * holding e-nodes); a node that is itself a member (an e-node) holds none.
 */
export function holdsInner(graph: StageGraph, i: number): boolean {
  return graph.members[i].length > 0 && graph.eclassOf[i] < 0;
}

/**
 * The layout input of a stage: one vertex per node, except that (e-graph) an e-class holding e-nodes
 * is one compound vertex and its e-nodes are its inner boxes. Edge e is the stage's edge e, from its
 * source's vertex (leaving from the source's inner box when it is one) to its target's vertex.
 */
export function stageLayoutInput(graph: StageGraph): StageLayoutInput {
  const n = graph.size;
  const vertexOf = new Int32Array(n).fill(-1);
  const innerOf = new Int32Array(n).fill(-1);
  const nodeOf: number[] = [];
  const widths: number[] = [];
  const owner: number[] = [];
  const innerWidths: number[] = [];
  const inside = (i: number): boolean => graph.eclassOf[i] >= 0 && holdsInner(graph, graph.eclassOf[i]);
  for (let i = 0; i < n; i++) {
    if (!inside(i)) {
      vertexOf[i] = nodeOf.length;
      nodeOf.push(i);
      widths.push(nodeWidth(graph.nodes[i].label));
    }
  }
  for (let i = 0; i < n; i++) {
    if (inside(i)) {
      innerOf[i] = owner.length;
      owner.push(vertexOf[graph.eclassOf[i]]);
      innerWidths.push(nodeWidth(graph.nodes[i].label));
    }
  }
  const sources: number[] = [];
  const targets: number[] = [];
  const port: number[] = [];
  const vertex = (i: number): number => (vertexOf[i] >= 0 ? vertexOf[i] : owner[innerOf[i]]);
  for (const edge of graph.edges) {
    const s = graph.index.get(edge.source)!;
    sources.push(vertex(s));
    targets.push(vertex(graph.index.get(edge.target)!));
    port.push(innerOf[s]);
  }
  const input: StageLayoutInput = {
    count: nodeOf.length, widths, sources, targets, vertexOf, innerOf, nodeOf: Int32Array.from(nodeOf)
  };
  if (owner.length) {
    input.inner = { owner, widths: innerWidths, port };
  }
  return input;
}

/**
 * The layout of a stage (see `stageLayoutInput`) as a generator (see `layoutSteps`), its arrays indexed
 * by the stage's nodes and edges: an e-class's box and each of its e-nodes inside it.
 */
export function* stageLayoutSteps(graph: StageGraph, options: LayoutOptions = {}): Generator<string, Layout, void> {
  const input = stageLayoutInput(graph);
  const inner = yield* layoutSteps(input, options);
  const n = graph.size;
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  const width = new Float64Array(n);
  const heights = new Float64Array(n);
  const rank = new Int32Array(n);
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const v = input.vertexOf[i];
    if (v >= 0) {
      x[i] = inner.x[v];
      y[i] = inner.y[v];
      width[i] = inner.width[v];
      heights[i] = inner.heights[v];
      rank[i] = inner.rank[v];
      order[i] = inner.order[v];
    } else {
      const q = input.innerOf[i];
      const owner = input.inner!.owner[q];
      x[i] = inner.innerX[q];
      y[i] = inner.innerY[q];
      width[i] = inner.innerWidth[q];
      heights[i] = NODE_HEIGHT;
      rank[i] = inner.rank[owner];
      order[i] = inner.order[owner];
    }
  }
  return { ...inner, x, y, width, heights, rank, order, nodeInner: input.innerOf };
}

/** The layout of a stage, at once. */
export function stageLayout(graph: StageGraph, options: LayoutOptions = {}): Layout {
  const steps = stageLayoutSteps(graph, options);
  for (;;) {
    const step = steps.next();
    if (step.done) {
      return step.value;
    }
  }
}

/** CSR adjacency: for vertex v, list[start[v] .. start[v + 1]). */
interface Csr {
  start: Int32Array;
  list: Int32Array;
  /** weight of each entry of list */
  weight: Float64Array;
  /** the inner box (port) at this end (v's) and at the far end (list's) of each entry, or -1 */
  near: Int32Array;
  far: Int32Array;
}

function csr(
  count: number,
  from: ArrayLike<number>,
  to: ArrayLike<number>,
  length: number,
  weights?: ArrayLike<number>,
  nearPorts?: ArrayLike<number>,
  farPorts?: ArrayLike<number>
): Csr {
  const start = new Int32Array(count + 1);
  for (let i = 0; i < length; i++) {
    start[from[i] + 1]++;
  }
  for (let v = 0; v < count; v++) {
    start[v + 1] += start[v];
  }
  const fill = start.slice(0, count);
  const list = new Int32Array(length);
  const weight = new Float64Array(length);
  const near = new Int32Array(length).fill(-1);
  const far = new Int32Array(length).fill(-1);
  for (let i = 0; i < length; i++) {
    const at = fill[from[i]]++;
    list[at] = to[i];
    weight[at] = weights ? weights[i] : 1;
    if (nearPorts && farPorts) {
      near[at] = nearPorts[i];
      far[at] = farPorts[i];
    }
  }
  return { start, list, weight, near, far };
}

/** Synchronous layout. */
export function layout(input: LayoutInput, options: LayoutOptions = {}): Layout {
  const steps = layoutSteps(input, options);
  for (;;) {
    const step = steps.next();
    if (step.done) {
      return step.value;
    }
  }
}

/**
 * The layout as a generator that yields (a phase name) between phases and sweeps, so a caller can
 * spread it over several animation frames; its return value is the layout.
 */
export function* layoutSteps(input: LayoutInput, options: LayoutOptions = {}): Generator<string, Layout, void> {
  const n = input.count;
  const m = input.sources.length;
  const state0 = compounds(input, options);
  const state1 = { ...state0, ...breakCycles(state0) };
  yield 'cycles';
  const state2 = { ...state1, ...rankVertices(state1) };
  yield 'ranks';
  const state3 = { ...state2, ...addDummies(state2, options.maxDummies ?? 2 * (n + m) + 1000) };
  yield 'dummies';
  const state4 = { ...state3, ...(yield* orderRanks(state3, options.sweeps ?? (n > 2000 ? 4 : 8))) };
  const state: LayoutState = { ...state4, ...placeCoordinates(state4) };
  yield 'coordinates';
  return result(state, routeEdges(state));
}

/**
 * What the phases of `layoutSteps` share, phase by phase: each phase reads the parts before it and returns its
 * own (phase 4 also reorders `innerSeq` / `slot` and widens `vWidth`). Vertices 0 .. n-1 are the input's, n ..
 * total-1 dummies; inner box q is input.inner's q; edge e is the input's, d a DAG edge (self-loops left out).
 */
type LayoutState = Compounds & Cycles & Ranks & Dummies & Ordering & Coordinates;

/** 0. Compound vertices: their inner boxes (ports), widths and heights. */
interface Compounds {
  input: LayoutInput;
  /** vertices, edges, inner boxes */
  n: number;
  m: number;
  ni: number;
  /** per inner box: the vertex holding it, its width */
  owner: ArrayLike<number>;
  innerWidth: Float64Array;
  /** per edge: the inner box its source end leaves from, or -1 */
  port: Int32Array;
  /** per vertex: its inner boxes, innerSeq[innerStart[v] .. innerStart[v + 1]), in their order */
  innerCount: Int32Array;
  innerStart: Int32Array;
  innerSeq: Int32Array;
  /** per inner box: its position within its vertex (row by row) */
  slot: Int32Array;
  /** per vertex: columns of inner boxes (0 without), height, width before its inner boxes are placed */
  cols: Int32Array;
  vHeight: Float64Array;
  baseWidth: Float64Array;
}

function compounds(input: LayoutInput, options: LayoutOptions): Compounds {
  const n = input.count;
  const m = input.sources.length;
  const columns = Math.max(1, Math.floor(options.innerColumns ?? INNER_COLUMNS));
  const maxRows = Math.max(1, Math.floor(options.innerRows ?? INNER_ROWS));
  const inner = input.inner;
  const ni = inner ? inner.owner.length : 0;
  const s: Compounds = {
    input, n, m, ni, owner: inner ? inner.owner : [], innerWidth: new Float64Array(ni),
    port: new Int32Array(m).fill(-1), innerCount: new Int32Array(n), innerStart: new Int32Array(n + 1),
    innerSeq: new Int32Array(ni), slot: new Int32Array(ni), cols: new Int32Array(n),
    vHeight: new Float64Array(n).fill(NODE_HEIGHT), baseWidth: Float64Array.from({ length: n }, (_, v) => input.widths[v])
  };
  if (!inner) {
    return s;
  }
  const { innerWidth, innerCount, innerStart, innerSeq } = s;
  for (let q = 0; q < ni; q++) {
    innerWidth[q] = inner.widths[q];
    innerCount[inner.owner[q]]++;
  }
  for (let v = 0; v < n; v++) {
    innerStart[v + 1] = innerStart[v] + innerCount[v];
  }
  const fill = innerStart.slice(0, n);
  for (let q = 0; q < ni; q++) {
    const v = inner.owner[q];
    s.slot[q] = fill[v] - innerStart[v];
    innerSeq[fill[v]++] = q;
  }
  for (let e = 0; e < m; e++) {
    const q = inner.port[e];
    if (q >= 0 && q < ni && inner.owner[q] === input.sources[e]) {
      s.port[e] = q;
    }
  }
  for (let v = 0; v < n; v++) {
    if (innerCount[v] > 0) {
      s.cols[v] = innerColumnsFor(innerCount[v], columns, maxRows);
      s.vHeight[v] = boxHeight(Math.ceil(innerCount[v] / s.cols[v])); // widths once the rows are filled (4.)
    }
  }
  return s;
}

/** The column of an inner box within its vertex (rows are filled in slot order). */
const columnOf = (s: Compounds, q: number): number => s.slot[q] % s.cols[s.owner[q]];
/** Where along its vertex an inner box's column sits, in (-0.5, 0.5); 0 for the vertex itself (-1). */
const frac = (s: Compounds, q: number): number => (q < 0 ? 0 : (columnOf(s, q) + 0.5) / s.cols[s.owner[q]] - 0.5);

/** 1. Cycles broken: per edge, whether it is a reversed DFS back edge, or a self-loop. */
interface Cycles {
  reversed: Uint8Array;
  loop: Uint8Array;
}

function breakCycles({ input, n, m }: Compounds): Cycles {
  const outE = csr(n, input.sources, Int32Array.from({ length: m }, (_, e) => e), m); // edges by source
  const reversed = new Uint8Array(m);
  const loop = new Uint8Array(m);
  const state = new Uint8Array(n); // 0 new, 1 on stack, 2 done
  const stack = new Int32Array(n);
  const next = new Int32Array(n);
  const indeg = new Int32Array(n);
  for (let e = 0; e < m; e++) {
    if (input.sources[e] === input.targets[e]) {
      loop[e] = 1;
    } else {
      indeg[input.targets[e]]++;
    }
  }
  const dfs = (root: number): void => {
    let top = 0;
    stack[0] = root;
    next[root] = outE.start[root];
    state[root] = 1;
    while (top >= 0) {
      const u = stack[top];
      if (next[u] < outE.start[u + 1]) {
        const e = outE.list[next[u]++];
        if (loop[e]) {
          continue;
        }
        const v = input.targets[e];
        if (state[v] === 1) {
          reversed[e] = 1;
        } else if (state[v] === 0) {
          state[v] = 1;
          next[v] = outE.start[v];
          stack[++top] = v;
        }
      } else {
        state[u] = 2;
        top--;
      }
    }
  };
  for (let v = 0; v < n; v++) {
    if (indeg[v] === 0 && state[v] === 0) {
      dfs(v);
    }
  }
  for (let v = 0; v < n; v++) {
    if (state[v] === 0) {
      dfs(v);
    }
  }
  return { reversed, loop };
}

/** 2. Ranks: the DAG (edges with the back edges turned round, no self-loops), and each vertex's rank. */
interface Ranks {
  /** DAG edge d: dagFrom[d] -> dagTo[d], input edge dagEdge[d]; dm of them */
  dagFrom: Int32Array;
  dagTo: Int32Array;
  dagEdge: Int32Array;
  dm: number;
  rank: Int32Array;
  /** the vertices in a topological order of the DAG */
  topo: Int32Array;
  ranks: number;
}

/** Longest path from the sources, then sources down next to their successors, then balanced (`balanceRanks`). */
function rankVertices({ input, n, m, reversed, loop }: Compounds & Cycles): Ranks {
  const dagFrom = new Int32Array(m);
  const dagTo = new Int32Array(m);
  const dagEdge = new Int32Array(m);
  let dm = 0;
  for (let e = 0; e < m; e++) {
    if (loop[e]) {
      continue;
    }
    const s = input.sources[e];
    const t = input.targets[e];
    dagFrom[dm] = reversed[e] ? t : s;
    dagTo[dm] = reversed[e] ? s : t;
    dagEdge[dm] = e;
    dm++;
  }
  const dagWeight = Float64Array.from({ length: dm }, (_, d) => (input.weights ? input.weights[dagEdge[d]] : 1));
  const dagOut = csr(n, dagFrom, dagTo, dm, dagWeight);
  const dagIn = csr(n, dagTo, dagFrom, dm, dagWeight);
  const rank = new Int32Array(n);
  const topo = new Int32Array(n);
  const remaining = new Int32Array(n);
  let head = 0;
  let tail = 0;
  for (let v = 0; v < n; v++) {
    remaining[v] = dagIn.start[v + 1] - dagIn.start[v];
    if (remaining[v] === 0) {
      topo[tail++] = v;
    }
  }
  while (head < tail) {
    const u = topo[head++];
    for (let i = dagOut.start[u]; i < dagOut.start[u + 1]; i++) {
      const v = dagOut.list[i];
      if (rank[u] + 1 > rank[v]) {
        rank[v] = rank[u] + 1;
      }
      if (--remaining[v] === 0) {
        topo[tail++] = v;
      }
    }
  }
  for (let v = 0; v < n; v++) {
    const first = dagOut.start[v];
    const last = dagOut.start[v + 1];
    if (dagIn.start[v + 1] === dagIn.start[v] && last > first) {
      let lowest = Infinity;
      for (let i = first; i < last; i++) {
        lowest = Math.min(lowest, rank[dagOut.list[i]]);
      }
      rank[v] = lowest - 1;
    }
  }
  balanceRanks(rank, topo, dagIn, dagOut);
  let ranks = 0;
  for (let v = 0; v < n; v++) {
    ranks = Math.max(ranks, rank[v] + 1);
  }
  return { dagFrom, dagTo, dagEdge, dm, rank, topo, ranks };
}

/**
 * A vertex with slack between its predecessors and successors moves to the weighted median rank of its
 * neighbours (shorter edges, fewer dummies); a few passes in topological and reverse order; ranks then start at 0.
 */
function balanceRanks(rank: Int32Array, topo: Int32Array, dagIn: Csr, dagOut: Csr): void {
  const n = rank.length;
  const around: number[] = [];
  const aroundWeight: number[] = [];
  const byRank: number[] = [];
  for (let pass = 0; pass < 4; pass++) {
    for (let k = 0; k < n; k++) {
      const v = pass % 2 === 0 ? topo[n - 1 - k] : topo[k];
      let lo = -Infinity;
      let hi = Infinity;
      around.length = 0;
      aroundWeight.length = 0;
      let total = 0;
      for (let i = dagIn.start[v]; i < dagIn.start[v + 1]; i++) {
        const r = rank[dagIn.list[i]];
        lo = Math.max(lo, r + 1);
        around.push(r + 1);
        aroundWeight.push(dagIn.weight[i]);
        total += dagIn.weight[i];
      }
      for (let i = dagOut.start[v]; i < dagOut.start[v + 1]; i++) {
        const r = rank[dagOut.list[i]];
        hi = Math.min(hi, r - 1);
        around.push(r - 1);
        aroundWeight.push(dagOut.weight[i]);
        total += dagOut.weight[i];
      }
      if (around.length === 0 || lo >= hi) {
        continue;
      }
      byRank.length = 0;
      for (let i = 0; i < around.length; i++) {
        byRank.push(i);
      }
      byRank.sort((a, b) => around[a] - around[b] || a - b);
      let median = around[byRank[0]];
      for (let i = 0, seen = 0; i < byRank.length; i++) {
        seen += aroundWeight[byRank[i]];
        if (seen * 2 >= total) {
          median = around[byRank[i]];
          break;
        }
      }
      rank[v] = Math.max(lo, Math.min(hi, median));
    }
  }
  let lowest = Infinity;
  for (let v = 0; v < n; v++) {
    lowest = Math.min(lowest, rank[v]);
  }
  for (let v = 0; v < n && lowest !== 0; v++) {
    rank[v] -= lowest;
  }
}

/** 3. Dummy vertices along long edges, and the layered graph: only segments between adjacent ranks. */
interface Dummies {
  /** vertices with the dummies, and dummies */
  total: number;
  dummies: number;
  /** per vertex (dummies too): its rank, its width */
  vRank: Int32Array;
  vWidth: Float64Array;
  /** per DAG edge: its first dummy (a chain's dummies are consecutive), or -1 */
  chainStart: Int32Array;
  /** the segments: v -> its neighbours in the rank above / below */
  up: Csr;
  down: Csr;
}

/** Dummies for the edges spanning several ranks, shortest spans first, up to `maxDummies`. */
function addDummies(s: Compounds & Cycles & Ranks, maxDummies: number): Dummies {
  const { input, n, port, reversed, dagFrom, dagTo, dagEdge, dm, rank } = s;
  const spans: number[] = [];
  let wanted = 0;
  for (let d = 0; d < dm; d++) {
    const span = rank[dagTo[d]] - rank[dagFrom[d]];
    if (span > 1) {
      spans.push(d);
      wanted += span - 1;
    }
  }
  const chained = new Uint8Array(dm);
  if (wanted > maxDummies) {
    spans.sort((a, b) => rank[dagTo[a]] - rank[dagFrom[a]] - (rank[dagTo[b]] - rank[dagFrom[b]]) || a - b);
  }
  let dummies = 0;
  for (const d of spans) {
    const extra = rank[dagTo[d]] - rank[dagFrom[d]] - 1;
    if (dummies + extra > maxDummies) {
      continue;
    }
    chained[d] = 1;
    dummies += extra;
  }
  const total = n + dummies;
  const vRank = new Int32Array(total);
  vRank.set(rank);
  const vWidth = new Float64Array(total).fill(DUMMY_WIDTH);
  vWidth.set(s.baseWidth);
  const lFrom: number[] = [];
  const lTo: number[] = [];
  const lWeight: number[] = [];
  const lUp: number[] = []; // the inner box at the segment's upper end, or -1
  const lDown: number[] = []; // ... at its lower end
  const segment = (from: number, to: number, d: number, upper: number, lower: number): void => {
    lFrom.push(from);
    lTo.push(to);
    lWeight.push(input.weights ? input.weights[dagEdge[d]] : 1);
    lUp.push(upper);
    lDown.push(lower);
  };
  const chainStart = new Int32Array(dm).fill(-1);
  let nextDummy = n;
  for (let d = 0; d < dm; d++) {
    const a = dagFrom[d];
    const b = dagTo[d];
    const e = dagEdge[d];
    const pu = reversed[e] ? -1 : port[e];
    const pd = reversed[e] ? port[e] : -1;
    if (rank[b] - rank[a] === 1) {
      segment(a, b, d, pu, pd);
    } else if (chained[d]) {
      chainStart[d] = nextDummy;
      let prev = a;
      for (let r = rank[a] + 1; r < rank[b]; r++) {
        vRank[nextDummy] = r;
        segment(prev, nextDummy, d, prev === a ? pu : -1, -1);
        prev = nextDummy++;
      }
      segment(prev, b, d, -1, pd);
    }
  }
  const lm = lFrom.length;
  const up = csr(total, lTo, lFrom, lm, lWeight, lDown, lUp);
  const down = csr(total, lFrom, lTo, lm, lWeight, lUp, lDown);
  return { total, dummies, vRank, vWidth, chainStart, up, down };
}

/** 4. Ordering: each rank's vertices in order, and where the inner boxes sit in their vertices. */
interface Ordering {
  layers: Int32Array[];
  /** per vertex: its position in its rank */
  pos: Int32Array;
  /** edge crossings of the order kept */
  crossings: number;
  /** per inner box: its centre's offset from its vertex's centre, its row and column */
  innerOffset: Float64Array;
  innerRow: Int32Array;
  innerColumn: Int32Array;
}

/** Barycenter sweeps down and up, keeping the order (and the inner boxes' order) with the fewest crossings. */
function* orderRanks(s: Compounds & Cycles & Ranks & Dummies, sweeps: number): Generator<string, Ordering, void> {
  const { n, ni, ranks, total, up, down, innerSeq } = s;
  const layers = initialLayers(s);
  const pos = new Int32Array(total);
  const setPositions = (): void => {
    for (const layer of layers) {
      for (let i = 0; i < layer.length; i++) {
        pos[layer[i]] = i;
      }
    }
  };
  setPositions();
  // an end at an inner box is told apart from the other ends at its vertex by its column: in a rank, vertex v
  // owns keys base[v] .. base[v] + 2 * cols[v], an inner box in column c key 2c + 1, the vertex itself the middle
  const base = new Int32Array(total);
  const endKey = (v: number, q: number): number => base[v] + (q < 0 ? (v < n ? s.cols[v] : 0) : 2 * columnOf(s, q) + 1);
  const keys = (v: number): number => (v < n ? 2 * s.cols[v] + 1 : 1);
  const countCrossings = (): number => {
    let crossings = 0;
    for (let r = 0; r + 1 < ranks; r++) {
      crossings += bilayerCrossings(layers[r], layers[r + 1], down, endKey, base, keys);
    }
    return crossings;
  };
  const innerKey = new Float64Array(ni);
  orderInner(s, pos, innerKey);
  let best = countCrossings();
  let bestLayers = layers.map(layer => layer.slice());
  let bestInner = innerSeq.slice();
  const key = new Float64Array(total);
  for (let sweep = 0; sweep < sweeps && best > 0; sweep++) {
    if (sweep % 2 === 0) {
      for (let r = 1; r < ranks; r++) {
        sortLayer(s, layers[r], up, pos, key);
      }
    } else {
      for (let r = ranks - 2; r >= 0; r--) {
        sortLayer(s, layers[r], down, pos, key);
      }
    }
    if (ni > 0) {
      orderInner(s, pos, innerKey);
    }
    const crossings = countCrossings();
    if (crossings < best) {
      best = crossings;
      bestLayers = layers.map(layer => layer.slice());
      bestInner = innerSeq.slice();
    }
    yield 'sweep';
  }
  for (let r = 0; r < ranks; r++) {
    layers[r] = bestLayers[r];
  }
  setPositions();
  innerSeq.set(bestInner);
  return { layers, pos, crossings: best, ...placeInner(s) };
}

/** The initial order: real vertices by a depth-first walk from the sources (keeps subtrees together), dummies by
 * their chain's source. */
function initialLayers({ n, total, ranks, vRank, topo, down }: Ranks & Dummies & { n: number }): Int32Array[] {
  const sizes = new Int32Array(ranks);
  for (let v = 0; v < total; v++) {
    sizes[vRank[v]]++;
  }
  const layers = Array.from(sizes, size => new Int32Array(size));
  const fill = new Int32Array(ranks);
  const seen = new Uint8Array(total);
  const place = (v: number): void => {
    seen[v] = 1;
    layers[vRank[v]][fill[vRank[v]]++] = v;
  };
  const walk = new Int32Array(total);
  for (let s = 0; s < total; s++) {
    const root = s < n ? topo[s] : s;
    if (seen[root]) {
      continue;
    }
    let top = 0;
    walk[0] = root;
    place(root);
    while (top >= 0) {
      const u = walk[top--];
      for (let i = down.start[u + 1] - 1; i >= down.start[u]; i--) {
        const v = down.list[i];
        if (!seen[v]) {
          place(v);
          walk[++top] = v;
        }
      }
    }
  }
  return layers;
}

/** Order `layer` by the barycenter of each vertex's neighbours along `adj` (a stable sort); updates `pos`. */
function sortLayer(s: Compounds, layer: Int32Array, adj: Csr, pos: Int32Array, key: Float64Array): void {
  for (let i = 0; i < layer.length; i++) {
    const v = layer[i];
    const first = adj.start[v];
    const last = adj.start[v + 1];
    if (last === first) {
      key[v] = pos[v];
    } else {
      let sum = 0;
      let total = 0;
      for (let j = first; j < last; j++) {
        sum += adj.weight[j] * (pos[adj.list[j]] + frac(s, adj.far[j]));
        total += adj.weight[j];
      }
      key[v] = sum / total;
    }
  }
  const sorted = Array.from(layer).sort((a, b) => key[a] - key[b] || pos[a] - pos[b]);
  for (let i = 0; i < sorted.length; i++) {
    layer[i] = sorted[i];
    pos[sorted[i]] = i;
  }
}

/** Order the inner boxes of each vertex by the barycenter of what they read below (a stable sort). */
function orderInner(s: Compounds & Dummies, pos: Int32Array, innerKey: Float64Array): void {
  const { n, innerStart, innerSeq, slot, down } = s;
  for (let v = 0; v < n; v++) {
    const first = innerStart[v];
    const last = innerStart[v + 1];
    if (last - first < 2) {
      continue;
    }
    let keyed = 0;
    let keySum = 0;
    for (let i = first; i < last; i++) {
      innerKey[innerSeq[i]] = NaN;
    }
    const sums = new Map<number, [number, number]>();
    for (let j = down.start[v]; j < down.start[v + 1]; j++) {
      const q = down.near[j];
      if (q >= 0) {
        const sum = sums.get(q) ?? [0, 0];
        sum[0] += down.weight[j] * (pos[down.list[j]] + frac(s, down.far[j]));
        sum[1] += down.weight[j];
        sums.set(q, sum);
      }
    }
    for (const [q, [sum, weight]] of sums) {
      innerKey[q] = sum / weight;
      keyed++;
      keySum += innerKey[q];
    }
    if (keyed === 0) {
      continue;
    }
    const middle = keySum / keyed;
    const boxes = Array.from(innerSeq.subarray(first, last));
    for (const q of boxes) {
      if (Number.isNaN(innerKey[q])) {
        innerKey[q] = middle;
      }
    }
    boxes.sort((p, q) => innerKey[p] - innerKey[q] || slot[p] - slot[q]);
    boxes.forEach((q, i) => {
      innerSeq[first + i] = q;
      slot[q] = i;
    });
  }
}

/**
 * Inner boxes: their slots, rows and columns (rows filled in slot order), their centres' offsets from their
 * vertex's centre (rows left-aligned, the widest centred); widens each compound vertex to hold them.
 */
function placeInner(s: Compounds & Dummies): Pick<Ordering, 'innerOffset' | 'innerRow' | 'innerColumn'> {
  const { n, ni, innerCount, innerStart, innerSeq, innerWidth, slot, cols } = s;
  const innerOffset = new Float64Array(ni);
  const innerRow = new Int32Array(ni);
  const innerColumn = new Int32Array(ni);
  for (let v = 0; v < n; v++) {
    if (innerCount[v] === 0) {
      continue;
    }
    const first = innerStart[v];
    const last = innerStart[v + 1];
    let widest = 0;
    for (let i = first; i < last; i += cols[v]) {
      let span = -INNER_GAP;
      for (let j = i; j < Math.min(last, i + cols[v]); j++) {
        span += innerWidth[innerSeq[j]] + INNER_GAP;
      }
      widest = Math.max(widest, span);
    }
    let at = -widest / 2;
    for (let i = first; i < last; i++) {
      const q = innerSeq[i];
      slot[q] = i - first;
      innerRow[q] = Math.floor(slot[q] / cols[v]);
      innerColumn[q] = slot[q] % cols[v];
      if (innerColumn[q] === 0) {
        at = -widest / 2;
      }
      innerOffset[q] = at + innerWidth[q] / 2;
      at += innerWidth[q] + INNER_GAP;
    }
    s.vWidth[v] = Math.max(s.baseWidth[v], widest + 2 * BOX_PAD);
  }
  return { innerOffset, innerRow, innerColumn };
}

/** 5. Coordinates: vertex centres, the ranks' tops and heights, the drawing's horizontal extent. */
interface Coordinates {
  /** per vertex (dummies too) */
  x: Float64Array;
  /** per input vertex */
  y: Float64Array;
  /** per rank (rankTop: one more, the bottom) */
  rankTop: Float64Array;
  rankHeight: Float64Array;
  minX: number;
  maxX: number;
}

const MARGIN = 12;

/**
 * x: each rank placed as near its neighbours' mean x as the separations allow (`isotonic`), in passes down, up,
 * down, up and both ways; y: a rank is as tall as its tallest vertex, and its vertices share their top.
 */
function placeCoordinates(s: Compounds & Ranks & Dummies & Ordering): Coordinates {
  const { n, total, vWidth, layers, ranks, up, down, rank } = s;
  const x = new Float64Array(total);
  const weight = Float64Array.from({ length: total }, (_, v) => (v < n ? 1 : 4)); // dummies hold their line straighter
  const separation = (a: number, b: number): number =>
    (vWidth[a] + vWidth[b]) / 2 + (a >= n && b >= n ? DUMMY_GAP : NODE_GAP);
  for (const layer of layers) {
    let at = 0;
    for (let i = 0; i < layer.length; i++) {
      at += i === 0 ? vWidth[layer[0]] / 2 : separation(layer[i - 1], layer[i]);
      x[layer[i]] = at;
    }
  }
  // centre the ranks on the widest
  const right = (layer: Int32Array): number => x[layer[layer.length - 1]] + vWidth[layer[layer.length - 1]] / 2;
  let widest = 0;
  for (const layer of layers) {
    if (layer.length) {
      widest = Math.max(widest, right(layer));
    }
  }
  for (const layer of layers) {
    if (layer.length) {
      const shift = (widest - right(layer)) / 2;
      for (const v of layer) {
        x[v] += shift;
      }
    }
  }
  const desired = new Float64Array(total);
  const place = (layer: Int32Array, adjs: Csr[]): void => {
    for (const v of layer) {
      let sum = 0;
      let count = 0;
      for (const adj of adjs) {
        for (let j = adj.start[v]; j < adj.start[v + 1]; j++) {
          sum += adj.weight[j] * (x[adj.list[j]] + offsetOf(s, adj.far[j]) - offsetOf(s, adj.near[j]));
          count += adj.weight[j];
        }
      }
      desired[v] = count ? sum / count : x[v];
    }
    isotonic(layer, desired, weight, separation, x);
  };
  for (const adjs of [[up], [down], [up], [down], [up, down]]) {
    if (adjs.length === 1 && adjs[0] === up) {
      for (let r = 1; r < ranks; r++) {
        place(layers[r], adjs);
      }
    } else if (adjs.length === 1) {
      for (let r = ranks - 2; r >= 0; r--) {
        place(layers[r], adjs);
      }
    } else {
      for (let r = 0; r < ranks; r++) {
        place(layers[r], adjs);
      }
    }
  }
  let minX = Infinity;
  let maxX = -Infinity;
  for (let v = 0; v < total; v++) {
    minX = Math.min(minX, x[v] - vWidth[v] / 2);
    maxX = Math.max(maxX, x[v] + vWidth[v] / 2);
  }
  if (total === 0) {
    minX = maxX = 0;
  }
  for (let v = 0; v < total; v++) {
    x[v] += MARGIN - minX;
  }
  const rankTop = new Float64Array(ranks + 1);
  const rankHeight = new Float64Array(ranks).fill(NODE_HEIGHT);
  for (let v = 0; v < n; v++) {
    rankHeight[rank[v]] = Math.max(rankHeight[rank[v]], s.vHeight[v]);
  }
  rankTop[0] = MARGIN;
  for (let r = 0; r < ranks; r++) {
    rankTop[r + 1] = rankTop[r] + rankHeight[r] + RANK_GAP;
  }
  const y = Float64Array.from({ length: n }, (_, v) => rankTop[rank[v]] + s.vHeight[v] / 2);
  return { x, y, rankTop, rankHeight, minX, maxX };
}

/** An inner box's centre's offset from its vertex's centre; 0 for the vertex itself (-1). */
const offsetOf = (s: Ordering, q: number): number => (q < 0 ? 0 : s.innerOffset[q]);
/** The top of vertex v, of inner box q. */
const topOf = (s: LayoutState, v: number): number => s.rankTop[s.rank[v]];
const innerTop = (s: LayoutState, q: number): number =>
  topOf(s, s.owner[q]) + BOX_TITLE + s.innerRow[q] * (NODE_HEIGHT + INNER_GAP);
/** Where an edge leaving inner box q starts: its bottom in the last row, else the vertex's bottom below it. */
function portBottom(s: LayoutState, q: number): number {
  const v = s.owner[q];
  return s.innerRow[q] === Math.ceil(s.innerCount[v] / s.cols[v]) - 1 ? innerTop(s, q) + NODE_HEIGHT : topOf(s, v) + s.vHeight[v];
}
/** Where a back edge from inner box q starts (it runs up): its top in the first row, else the vertex's top above it. */
const portTop = (s: LayoutState, q: number): number => (s.innerRow[q] === 0 ? innerTop(s, q) : topOf(s, s.owner[q]));
/** The centre and width of a side g: vertex g's (g < n), else inner box g - n's. */
const centreOf = (s: LayoutState, g: number): number => (g < s.n ? s.x[g] : s.x[s.owner[g - s.n]] + s.innerOffset[g - s.n]);
const widthOf = (s: LayoutState, g: number): number => (g < s.n ? s.vWidth[g] : s.innerWidth[g - s.n]);

/** 6. Edge routes: through their dummies, their ends spread along each side; self-loops round the vertex. */
function routeEdges(s: LayoutState): EdgeRoute[] {
  const { n, m, ni, x, y, vWidth, vHeight, rank, vRank, port, reversed, loop, dm, dagFrom, dagTo, dagEdge, chainStart } = s;
  const edges: EdgeRoute[] = new Array(m);
  const dagOf = new Int32Array(m).fill(-1);
  for (let d = 0; d < dm; d++) {
    dagOf[dagEdge[d]] = d;
  }
  // spread the ends over each side (a vertex's top or bottom, an inner box's bottom or top), ordered by the x of
  // the other end
  const topEnds: number[][] = Array.from({ length: n + ni }, () => []);
  const bottomEnds: number[][] = Array.from({ length: n + ni }, () => []);
  const nearTop = new Float64Array(dm); // x of the point next to the lower end (at b's top)
  const nearBottom = new Float64Array(dm); // x of the point next to the upper end (at a's bottom)
  const upperSide = new Int32Array(dm);
  const lowerSide = new Int32Array(dm);
  for (let d = 0; d < dm; d++) {
    const e = dagEdge[d];
    const span = rank[dagTo[d]] - rank[dagFrom[d]];
    const first = chainStart[d];
    upperSide[d] = !reversed[e] && port[e] >= 0 ? n + port[e] : dagFrom[d];
    lowerSide[d] = reversed[e] && port[e] >= 0 ? n + port[e] : dagTo[d];
    nearBottom[d] = first >= 0 ? x[first] : centreOf(s, lowerSide[d]);
    nearTop[d] = first >= 0 ? x[first + span - 2] : centreOf(s, upperSide[d]);
    bottomEnds[upperSide[d]].push(d);
    topEnds[lowerSide[d]].push(d);
  }
  const endX = new Float64Array(dm * 2); // [2d]: at the upper end, [2d + 1]: at the lower end
  const spread = (g: number, ends: number[], near: Float64Array, which: number): void => {
    const centre = centreOf(s, g);
    if (ends.length === 1) {
      endX[ends[0] * 2 + which] = centre;
      return;
    }
    ends.sort((p, q) => near[p] - near[q] || p - q);
    const span = Math.min(widthOf(s, g) * 0.7, (ends.length - 1) * 10);
    ends.forEach((d, i) => {
      endX[d * 2 + which] = centre - span / 2 + (span * i) / (ends.length - 1);
    });
  };
  for (let g = 0; g < n + ni; g++) {
    if (bottomEnds[g].length) {
      spread(g, bottomEnds[g], nearBottom, 0);
    }
    if (topEnds[g].length) {
      spread(g, topEnds[g], nearTop, 1);
    }
  }
  const loops = new Int32Array(n); // self-loops from inner boxes so far, per vertex
  for (let e = 0; e < m; e++) {
    if (loop[e]) {
      const v = s.input.sources[e];
      const right = x[v] + vWidth[v] / 2;
      const q = port[e];
      if (q >= 0) {
        // from the inner box's bottom, out below and round the vertex's right side, into its top
        const k = loops[v]++;
        const top = topOf(s, v);
        const out = right + 12 + 6 * k;
        const end = Math.max(x[v], right - 12 - 8 * k);
        edges[e] = {
          points: [centreOf(s, n + q), portBottom(s, q), out, top + vHeight[v] + 10 + 4 * k, out, top - 10 - 4 * k, end, top],
          reversed: false,
          loop: true
        };
      } else {
        edges[e] = { points: [right, y[v] - 6, right, y[v] + 6], reversed: false, loop: true };
      }
      continue;
    }
    const d = dagOf[e];
    const a = dagFrom[d];
    const b = dagTo[d];
    const upper = upperSide[d];
    const lower = lowerSide[d];
    const points = [endX[d * 2], upper < n ? topOf(s, a) + vHeight[a] : portBottom(s, upper - n)];
    if (chainStart[d] >= 0) {
      for (let v = chainStart[d]; v < chainStart[d] + rank[b] - rank[a] - 1; v++) {
        points.push(x[v], s.rankTop[vRank[v]] + s.rankHeight[vRank[v]] / 2); // mid-rank
      }
    }
    points.push(endX[d * 2 + 1], lower < n ? topOf(s, b) : portTop(s, lower - n));
    if (reversed[e]) {
      const back: number[] = [];
      for (let i = points.length - 2; i >= 0; i -= 2) {
        back.push(points[i], points[i + 1]);
      }
      edges[e] = { points: back, reversed: true, loop: false };
    } else {
      edges[e] = { points, reversed: false, loop: false };
    }
  }
  return edges;
}

/** The layout of the state, with its edge routes. */
function result(s: LayoutState, edges: EdgeRoute[]): Layout {
  const { n, ni, ranks } = s;
  return {
    x: s.x.slice(0, n),
    y: s.y,
    width: s.vWidth.slice(0, n),
    height: NODE_HEIGHT,
    heights: s.vHeight,
    rank: s.rank,
    order: s.pos.slice(0, n),
    ranks,
    edges,
    totalWidth: Math.max(0, s.maxX - s.minX) + 2 * MARGIN + 40,
    totalHeight: ranks ? s.rankTop[ranks] - RANK_GAP + MARGIN : 2 * MARGIN,
    crossings: s.crossings,
    dummies: s.dummies,
    innerX: Float64Array.from({ length: ni }, (_, q) => centreOf(s, n + q)),
    innerY: Float64Array.from({ length: ni }, (_, q) => innerTop(s, q) + NODE_HEIGHT / 2),
    innerWidth: s.innerWidth,
    innerRow: s.innerRow,
    innerColumn: s.innerColumn
  };
}

/**
 * Place `layer`'s vertices (in order) as near `desired` as the separations allow: a weighted
 * isotonic regression (pool adjacent violators) on x - cumulative separation. Writes `x`.
 */
function isotonic(
  layer: Int32Array,
  desired: Float64Array,
  weight: Float64Array,
  separation: (a: number, b: number) => number,
  x: Float64Array
): void {
  const k = layer.length;
  if (k === 0) {
    return;
  }
  const offset = new Float64Array(k);
  for (let i = 1; i < k; i++) {
    offset[i] = offset[i - 1] + separation(layer[i - 1], layer[i]);
  }
  // blocks on a stack: total weight, weighted sum, first index
  const bw = new Float64Array(k);
  const bs = new Float64Array(k);
  const bf = new Int32Array(k);
  let top = -1;
  for (let i = 0; i < k; i++) {
    const v = layer[i];
    top++;
    bw[top] = weight[v];
    bs[top] = weight[v] * (desired[v] - offset[i]);
    bf[top] = i;
    while (top > 0 && bs[top - 1] / bw[top - 1] > bs[top] / bw[top]) {
      bw[top - 1] += bw[top];
      bs[top - 1] += bs[top];
      top--;
    }
  }
  for (let b = 0; b <= top; b++) {
    const value = bs[b] / bw[b];
    const end = b < top ? bf[b + 1] : k;
    for (let i = bf[b]; i < end; i++) {
      x[layer[i]] = value + offset[i];
    }
  }
}

/**
 * Crossings between `upper` and the next rank, `lower`: accumulator tree, O(E log E). An end's position
 * is `key(v, port)`, after `base` is set for the lower rank (`size(v)` keys for each of its vertices);
 * ends at the same key do not cross.
 */
function bilayerCrossings(
  upper: Int32Array,
  lower: Int32Array,
  down: Csr,
  key: (v: number, port: number) => number,
  base: Int32Array,
  size: (v: number) => number
): number {
  let keys = 0;
  for (const v of lower) {
    base[v] = keys;
    keys += size(v);
  }
  const ends: number[] = [];
  for (const u of upper) {
    const first = ends.length;
    for (let j = down.start[u]; j < down.start[u + 1]; j++) {
      // ordered by where the end leaves u (its port), then by where it arrives
      ends.push((key(u, down.near[j]) - base[u]) * keys + key(down.list[j], down.far[j]));
    }
    if (ends.length - first > 1) {
      const part = ends.slice(first).sort((a, b) => a - b);
      for (let i = 0; i < part.length; i++) {
        ends[first + i] = part[i] % keys;
      }
    } else if (ends.length > first) {
      ends[first] %= keys;
    }
  }
  if (ends.length < 2) {
    return 0;
  }
  let size2 = 1;
  while (size2 < keys) {
    size2 *= 2;
  }
  const tree = new Int32Array(2 * size2);
  let crossings = 0;
  for (const end of ends) {
    let index = end + size2;
    tree[index]++;
    while (index > 1) {
      if (index % 2 === 0) {
        crossings += tree[index + 1];
      }
      index = index >> 1;
      tree[index]++;
    }
  }
  return crossings;
}

/** The SVG path of an edge route: smooth vertical curves through its points, with an arrowhead. */
export function edgePath(route: EdgeRoute): string {
  const p = route.points;
  const f = (v: number): string => (Math.round(v * 10) / 10).toString();
  if (route.loop && p.length === 8) {
    // from an inner box's bottom, below and round the right side of its vertex, down into its top
    const [x0, y0, xr, yb, , yt, x1, y1] = p;
    const mid = (yb + yt) / 2;
    return `M${f(x0)},${f(y0)} C${f(x0)},${f(yb)} ${f(xr)},${f(yb)} ${f(xr)},${f(mid)}` +
      ` C${f(xr)},${f(yt)} ${f(x1)},${f(yt)} ${f(x1)},${f(y1)}` +
      ` M${f(x1 - 4)},${f(y1 - 6)} L${f(x1)},${f(y1)} L${f(x1 + 4)},${f(y1 - 6)}`;
  }
  if (route.loop) {
    const [x0, y0, x1, y1] = p;
    return `M${f(x0)},${f(y0)} C${f(x0 + 26)},${f(y0 - 14)} ${f(x1 + 26)},${f(y1 + 14)} ${f(x1)},${f(y1)}` +
      ` M${f(x1 + 6)},${f(y1 + 1)} L${f(x1)},${f(y1)} L${f(x1 + 5)},${f(y1 + 5)}`;
  }
  let d = `M${f(p[0])},${f(p[1])}`;
  for (let i = 2; i < p.length; i += 2) {
    const x0 = p[i - 2];
    const y0 = p[i - 1];
    const x1 = p[i];
    const y1 = p[i + 1];
    const mid = (y0 + y1) / 2;
    d += ` C${f(x0)},${f(mid)} ${f(x1)},${f(mid)} ${f(x1)},${f(y1)}`;
  }
  // arrowhead: the curve ends vertically
  const tx = p[p.length - 2];
  const ty = p[p.length - 1];
  const dir = ty >= p[p.length - 3] ? 1 : -1;
  d += ` M${f(tx - 4)},${f(ty - 6 * dir)} L${f(tx)},${f(ty)} L${f(tx + 4)},${f(ty - 6 * dir)}`;
  return d;
}
