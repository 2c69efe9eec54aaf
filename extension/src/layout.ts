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
 * Deterministic (no randomness, stable sorts). Pure: no DOM.
 */

import type { StageGraph } from './model.js';

export const NODE_HEIGHT = 28;
export const RANK_GAP = 44;
export const NODE_GAP = 18;
export const DUMMY_WIDTH = 6;
export const DUMMY_GAP = 6;
export const LABEL_CHARS = 40;
export const CHAR_WIDTH = 6.7; // 11px monospace
export const MIN_WIDTH = 44;
export const MAX_WIDTH = Math.ceil(LABEL_CHARS * CHAR_WIDTH + 20);

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
}

export interface LayoutOptions {
  /** barycenter sweeps (down, up, down, ...); default 8, or 4 above 2,000 nodes */
  sweeps?: number;
  /** most dummy vertices to insert; default 2 * (nodes + edges) + 1,000 */
  maxDummies?: number;
}

export interface EdgeRoute {
  /** x0, y0, x1, y1, ... from the edge's source to its target */
  points: number[];
  /** whether the layout reversed it to break a cycle (it then runs upwards) */
  reversed: boolean;
  /** a self-loop (points: the node's right side, top then bottom) */
  loop: boolean;
}

export interface Layout {
  /** node centres */
  x: Float64Array;
  y: Float64Array;
  width: Float64Array;
  height: number;
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

/**
 * The layout input of a stage: its edges, then (e-graph) one membership edge e-class -> e-node per
 * e-node, so each e-node sits under its e-class. `member[e]` marks those.
 */
export function stageLayoutInput(graph: StageGraph): LayoutInput & { member: boolean[] } {
  const sources: number[] = [];
  const targets: number[] = [];
  const member: boolean[] = [];
  const weights: number[] = [];
  for (const edge of graph.edges) {
    sources.push(graph.index.get(edge.source)!);
    targets.push(graph.index.get(edge.target)!);
    member.push(false);
    weights.push(1);
  }
  for (let i = 0; i < graph.size; i++) {
    if (graph.eclassOf[i] >= 0) {
      sources.push(graph.eclassOf[i]);
      targets.push(i);
      member.push(true);
      weights.push(MEMBER_WEIGHT);
    }
  }
  const widths = graph.nodes.map(node => nodeWidth(node.label));
  return { count: graph.size, widths, sources, targets, member, weights };
}

/** How strongly an e-node is held under its e-class (relative to an ordinary edge). */
export const MEMBER_WEIGHT = 6;

/** CSR adjacency: for vertex v, list[start[v] .. start[v + 1]). */
interface Csr {
  start: Int32Array;
  list: Int32Array;
  /** weight of each entry of list */
  weight: Float64Array;
}

function csr(count: number, from: ArrayLike<number>, to: ArrayLike<number>, length: number, weights?: ArrayLike<number>): Csr {
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
  for (let i = 0; i < length; i++) {
    const at = fill[from[i]]++;
    list[at] = to[i];
    weight[at] = weights ? weights[i] : 1;
  }
  return { start, list, weight };
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
  const sweeps = options.sweeps ?? (n > 2000 ? 4 : 8);
  const maxDummies = options.maxDummies ?? 2 * (n + m) + 1000;

  // ---- 1. break cycles: reverse DFS back edges ----
  const edgeIdx = new Int32Array(m);
  for (let e = 0; e < m; e++) {
    edgeIdx[e] = e;
  }
  const outE = csr(n, input.sources, edgeIdx, m); // edges by source
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
  yield 'cycles';

  // ---- 2. ranks: longest path, then sources down next to their successors ----
  const dagFrom = new Int32Array(m);
  const dagTo = new Int32Array(m);
  let dm = 0;
  const dagEdge = new Int32Array(m); // dag edge -> input edge
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
  const dagWeight = new Float64Array(dm);
  for (let d = 0; d < dm; d++) {
    dagWeight[d] = input.weights ? input.weights[dagEdge[d]] : 1;
  }
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
  // balance: a vertex with slack between its predecessors and successors moves to the weighted median
  // rank of its neighbours (shorter edges, fewer dummies); a few passes in topological and reverse order
  {
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
  let ranks = 0;
  for (let v = 0; v < n; v++) {
    ranks = Math.max(ranks, rank[v] + 1);
  }
  yield 'ranks';

  // ---- 3. dummy vertices along long edges (shortest spans first, up to the budget) ----
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
  for (let v = 0; v < n; v++) {
    vWidth[v] = input.widths[v];
  }
  // the layered graph: only edges between adjacent ranks
  const lFrom: number[] = [];
  const lTo: number[] = [];
  const lWeight: number[] = [];
  const weightOf = (d: number): number => (input.weights ? input.weights[dagEdge[d]] : 1);
  const chainStart = new Int32Array(dm).fill(-1); // dag edge -> its first dummy (dummies are consecutive)
  let nextDummy = n;
  for (let d = 0; d < dm; d++) {
    const a = dagFrom[d];
    const b = dagTo[d];
    const span = rank[b] - rank[a];
    if (span === 1) {
      lFrom.push(a);
      lTo.push(b);
      lWeight.push(weightOf(d));
    } else if (chained[d]) {
      chainStart[d] = nextDummy;
      let prev = a;
      for (let r = rank[a] + 1; r < rank[b]; r++) {
        vRank[nextDummy] = r;
        lFrom.push(prev);
        lTo.push(nextDummy);
        lWeight.push(weightOf(d));
        prev = nextDummy++;
      }
      lFrom.push(prev);
      lTo.push(b);
      lWeight.push(weightOf(d));
    }
  }
  const lm = lFrom.length;
  const up = csr(total, lTo, lFrom, lm, lWeight); // v -> its neighbours in the rank above
  const down = csr(total, lFrom, lTo, lm, lWeight); // v -> its neighbours in the rank below
  yield 'dummies';

  // ---- 4. ordering: barycenter sweeps, keep the best ----
  const layers: Int32Array[] = [];
  {
    const sizes = new Int32Array(ranks);
    for (let v = 0; v < total; v++) {
      sizes[vRank[v]]++;
    }
    for (let r = 0; r < ranks; r++) {
      layers.push(new Int32Array(sizes[r]));
    }
    const fill = new Int32Array(ranks);
    // initial order: real vertices by a depth-first walk from the sources (keeps subtrees together),
    // dummies by their chain's source
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
  }
  const pos = new Int32Array(total);
  const setPositions = (): void => {
    for (const layer of layers) {
      for (let i = 0; i < layer.length; i++) {
        pos[layer[i]] = i;
      }
    }
  };
  setPositions();
  const countCrossings = (): number => {
    let crossings = 0;
    for (let r = 0; r + 1 < ranks; r++) {
      crossings += bilayerCrossings(layers[r], layers[r + 1].length, down, pos);
    }
    return crossings;
  };
  let best = countCrossings();
  let bestLayers = layers.map(layer => layer.slice());
  const key = new Float64Array(total);
  const sortLayer = (layer: Int32Array, adj: Csr): void => {
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
          sum += adj.weight[j] * pos[adj.list[j]];
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
  };
  for (let sweep = 0; sweep < sweeps && best > 0; sweep++) {
    if (sweep % 2 === 0) {
      for (let r = 1; r < ranks; r++) {
        sortLayer(layers[r], up);
      }
    } else {
      for (let r = ranks - 2; r >= 0; r--) {
        sortLayer(layers[r], down);
      }
    }
    const crossings = countCrossings();
    if (crossings < best) {
      best = crossings;
      bestLayers = layers.map(layer => layer.slice());
    }
    yield 'sweep';
  }
  for (let r = 0; r < ranks; r++) {
    layers[r] = bestLayers[r];
  }
  setPositions();

  // ---- 5. coordinates ----
  const x = new Float64Array(total);
  const weight = new Float64Array(total);
  for (let v = 0; v < total; v++) {
    weight[v] = v < n ? 1 : 4; // dummies hold their line straighter
  }
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
  {
    let widest = 0;
    for (const layer of layers) {
      if (layer.length) {
        widest = Math.max(widest, x[layer[layer.length - 1]] + vWidth[layer[layer.length - 1]] / 2);
      }
    }
    for (const layer of layers) {
      if (layer.length) {
        const shift = (widest - (x[layer[layer.length - 1]] + vWidth[layer[layer.length - 1]] / 2)) / 2;
        for (const v of layer) {
          x[v] += shift;
        }
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
          sum += adj.weight[j] * x[adj.list[j]];
          count += adj.weight[j];
        }
      }
      desired[v] = count ? sum / count : x[v];
    }
    isotonic(layer, desired, weight, separation, x);
  };
  const passes: Csr[][] = [[up], [down], [up], [down], [up, down]];
  for (const adjs of passes) {
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
  const margin = 12;
  for (let v = 0; v < total; v++) {
    x[v] += margin - minX;
  }
  const yOf = (r: number): number => margin + NODE_HEIGHT / 2 + r * (NODE_HEIGHT + RANK_GAP);
  yield 'coordinates';

  // ---- 6. edge routes ----
  const edges: EdgeRoute[] = new Array(m);
  const dagOf = new Int32Array(m).fill(-1);
  for (let d = 0; d < dm; d++) {
    dagOf[dagEdge[d]] = d;
  }
  // spread the ends over each node's side, ordered by the x of the other end
  const topEnds: number[][] = Array.from({ length: n }, () => []);
  const bottomEnds: number[][] = Array.from({ length: n }, () => []);
  const nearTop = new Float64Array(dm); // x of the point next to the bottom node's (b) top end
  const nearBottom = new Float64Array(dm); // x of the point next to the top node's (a) bottom end
  for (let d = 0; d < dm; d++) {
    const a = dagFrom[d];
    const b = dagTo[d];
    const span = rank[b] - rank[a];
    const first = chainStart[d];
    nearBottom[d] = first >= 0 ? x[first] : x[b];
    nearTop[d] = first >= 0 ? x[first + span - 2] : x[a];
    bottomEnds[a].push(d);
    topEnds[b].push(d);
  }
  const endX = new Float64Array(dm * 2); // [2d]: at a's bottom, [2d + 1]: at b's top
  const spread = (v: number, ends: number[], near: Float64Array, slot: number): void => {
    if (ends.length === 1) {
      endX[ends[0] * 2 + slot] = x[v];
      return;
    }
    ends.sort((p, q) => near[p] - near[q] || p - q);
    const span = Math.min(vWidth[v] * 0.7, (ends.length - 1) * 10);
    ends.forEach((d, i) => {
      endX[d * 2 + slot] = x[v] - span / 2 + (span * i) / (ends.length - 1);
    });
  };
  for (let v = 0; v < n; v++) {
    if (bottomEnds[v].length) {
      spread(v, bottomEnds[v], nearBottom, 0);
    }
    if (topEnds[v].length) {
      spread(v, topEnds[v], nearTop, 1);
    }
  }
  for (let e = 0; e < m; e++) {
    if (loop[e]) {
      const v = input.sources[e];
      const right = x[v] + vWidth[v] / 2;
      edges[e] = { points: [right, yOf(rank[v]) - 6, right, yOf(rank[v]) + 6], reversed: false, loop: true };
      continue;
    }
    const d = dagOf[e];
    const a = dagFrom[d];
    const b = dagTo[d];
    const points = [endX[d * 2], yOf(rank[a]) + NODE_HEIGHT / 2];
    if (chainStart[d] >= 0) {
      for (let v = chainStart[d]; v < chainStart[d] + rank[b] - rank[a] - 1; v++) {
        points.push(x[v], yOf(vRank[v]));
      }
    }
    points.push(endX[d * 2 + 1], yOf(rank[b]) - NODE_HEIGHT / 2);
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
  const order = new Int32Array(n);
  for (let v = 0; v < n; v++) {
    order[v] = pos[v];
  }
  const y = new Float64Array(n);
  for (let v = 0; v < n; v++) {
    y[v] = yOf(rank[v]);
  }
  return {
    x: x.slice(0, n),
    y,
    width: Float64Array.from(input.widths),
    height: NODE_HEIGHT,
    rank,
    order,
    ranks,
    edges,
    totalWidth: Math.max(0, maxX - minX) + 2 * margin + 40,
    totalHeight: ranks * (NODE_HEIGHT + RANK_GAP) - RANK_GAP + 2 * margin,
    crossings: best,
    dummies
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

/** Crossings between `upper` and the next rank (of `lowerSize` vertices): accumulator tree, O(E log V). */
function bilayerCrossings(upper: Int32Array, lowerSize: number, down: Csr, pos: Int32Array): number {
  const ends: number[] = [];
  for (const u of upper) {
    const first = ends.length;
    for (let j = down.start[u]; j < down.start[u + 1]; j++) {
      ends.push(pos[down.list[j]]);
    }
    if (ends.length - first > 1) {
      const part = ends.slice(first).sort((a, b) => a - b);
      for (let i = 0; i < part.length; i++) {
        ends[first + i] = part[i];
      }
    }
  }
  if (ends.length < 2) {
    return 0;
  }
  let size = 1;
  while (size < lowerSize) {
    size *= 2;
  }
  const tree = new Int32Array(2 * size);
  let crossings = 0;
  for (const end of ends) {
    let index = end + size;
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
