// The layered layout (on lib/layout.js): e-graphs as boxes holding their e-nodes, DAG invariants, speed on 5,000 nodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { parseEnvelope, StageGraph } from '../lib/model.js';
import {
  boxHeight, edgePath, holdsInner, labelText, layout, layoutSteps, nodeWidth, stageLayout, stageLayoutInput, stageLayoutSteps,
  BOX_HEIGHT, BOX_PAD, BOX_TITLE, INNER_COLUMNS, INNER_GAP, INNER_ROWS, LABEL_CHARS, NODE_GAP, NODE_HEIGHT, RANK_GAP,
  innerColumnsFor
} from '../lib/layout.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const graphOf = envelope => {
  const parsed = parseEnvelope(envelope);
  assert.ok(parsed.ok, parsed.error);
  return new StageGraph(parsed.envelope);
};

/** The invariants every layout must keep. */
function checkLayout(input, result) {
  const n = input.count;
  assert.equal(result.x.length, n);
  for (let v = 0; v < n; v++) {
    assert.ok(Number.isFinite(result.x[v]) && Number.isFinite(result.y[v]), `node ${v} is placed`);
  }
  // no two nodes of a rank overlap
  const byRank = new Map();
  for (let v = 0; v < n; v++) {
    if (!byRank.has(result.rank[v])) byRank.set(result.rank[v], []);
    byRank.get(result.rank[v]).push(v);
  }
  for (const [rank, nodes] of byRank) {
    nodes.sort((a, b) => result.x[a] - result.x[b]);
    for (let i = 1; i < nodes.length; i++) {
      const a = nodes[i - 1];
      const b = nodes[i];
      const gap = result.x[b] - input.widths[b] / 2 - (result.x[a] + input.widths[a] / 2);
      assert.ok(gap >= NODE_GAP - 1e-6, `rank ${rank}: nodes ${a} and ${b} overlap (gap ${gap})`);
      assert.ok(result.order[b] > result.order[a], 'x follows the order within a rank');
    }
    for (const v of nodes) assert.equal(result.y[v], result.y[nodes[0]], 'a rank shares its y');
  }
  // edges go down the ranks, except reversed back edges which go up; routes join their ends
  let reversed = 0;
  input.sources.forEach((s, e) => {
    const t = input.targets[e];
    const route = result.edges[e];
    if (s === t) {
      assert.ok(route.loop);
      return;
    }
    if (route.reversed) {
      reversed++;
      assert.ok(result.rank[s] > result.rank[t], `reversed edge ${e} runs up`);
    } else {
      assert.ok(result.rank[t] > result.rank[s], `edge ${e} runs down (${result.rank[s]} -> ${result.rank[t]})`);
    }
    const p = route.points;
    const h = NODE_HEIGHT / 2;
    assert.ok(Math.abs(p[1] - (result.y[s] + (route.reversed ? -h : h))) < 1e-6, `edge ${e} starts at its source`);
    assert.ok(Math.abs(p[p.length - 1] - (result.y[t] + (route.reversed ? h : -h))) < 1e-6, `edge ${e} ends at its target`);
    assert.ok(Math.abs(p[0] - result.x[s]) <= input.widths[s] / 2 && Math.abs(p[p.length - 2] - result.x[t]) <= input.widths[t] / 2);
  });
  return reversed;
}

function hasCycle(n, sources, targets) {
  const out = Array.from({ length: n }, () => []);
  sources.forEach((s, e) => out[s].push(targets[e]));
  const state = new Uint8Array(n);
  const visit = v => {
    state[v] = 1;
    for (const w of out[v]) {
      if (state[w] === 1 || (state[w] === 0 && visit(w))) return true;
    }
    state[v] = 2;
    return false;
  };
  for (let v = 0; v < n; v++) if (state[v] === 0 && visit(v)) return true;
  return false;
}

/** Rectangles [left, top, right, bottom] `a` and `b` overlap, or come closer than `gap`. */
const tooClose = (a, b, gap) =>
  a[0] < b[2] + gap - 1e-6 && b[0] < a[2] + gap - 1e-6 && a[1] < b[3] + gap - 1e-6 && b[1] < a[3] + gap - 1e-6;

/** Ranks do not overlap down the page: every vertex of rank r ends at least RANK_GAP above any of rank r + 1. */
function checkRanks(result, vertices) {
  const top = new Map();
  const bottom = new Map();
  for (const v of vertices) {
    const r = result.rank[v];
    top.set(r, Math.min(top.get(r) ?? Infinity, result.y[v] - result.heights[v] / 2));
    bottom.set(r, Math.max(bottom.get(r) ?? -Infinity, result.y[v] + result.heights[v] / 2));
  }
  for (const [r, b] of bottom) {
    if (top.has(r + 1)) assert.ok(top.get(r + 1) - b >= RANK_GAP - 1e-6, `rank ${r} overlaps rank ${r + 1}`);
  }
}

/**
 * The invariants of a stage's compound layout (e-classes as boxes holding their e-nodes); returns how many
 * edges were reversed, and how many are self-reads drawn as loops.
 */
function checkCompound(graph, result) {
  const near = (a, b) => Math.abs(a - b) < 1e-6;
  const box = i => ({ left: result.x[i] - result.width[i] / 2, right: result.x[i] + result.width[i] / 2,
    top: result.y[i] - result.heights[i] / 2, bottom: result.y[i] + result.heights[i] / 2 });
  const boxes = [];
  graph.nodes.forEach((node, i) => {
    assert.ok(Number.isFinite(result.x[i]) && Number.isFinite(result.y[i]), `${node.id} is placed`);
    const c = graph.eclassOf[i];
    if (c < 0) {
      boxes.push(i);
      const held = graph.members[i].length;
      const rows = held ? Math.ceil(held / innerColumnsFor(held)) : 0;
      assert.ok(rows <= INNER_ROWS, `${node.id}: ${rows} rows`);
      assert.equal(result.heights[i], holdsInner(graph, i) ? boxHeight(rows) : NODE_HEIGHT, `${node.id}: height`);
      return;
    }
    // an e-node lies inside its e-class's box, in its row under the title row, its padding kept
    const inner = box(i);
    const outer = box(c);
    const q = result.nodeInner[i];
    const row = result.innerRow[q];
    assert.ok(q >= 0 && result.innerX[q] === result.x[i] && result.innerY[q] === result.y[i], `${node.id}: its inner box`);
    assert.ok(result.innerColumn[q] < innerColumnsFor(graph.members[c].length) && graph.members[c].includes(i),
      `${node.id}: a member of its box`);
    assert.equal(result.heights[i], NODE_HEIGHT);
    assert.ok(inner.left >= outer.left + BOX_PAD - 1e-6 && inner.right <= outer.right - BOX_PAD + 1e-6,
      `${node.id} lies inside ${node.eclass} across (${inner.left}..${inner.right} in ${outer.left}..${outer.right})`);
    assert.ok(near(inner.top, outer.top + BOX_TITLE + row * (NODE_HEIGHT + INNER_GAP)) && inner.bottom <= outer.bottom - BOX_PAD + 1e-6,
      `${node.id} lies inside ${node.eclass} down, in row ${row} under its title`);
    assert.equal(result.rank[i], result.rank[c]);
  });
  // the e-nodes of an e-class do not overlap (INNER_GAP apart)
  graph.members.forEach(members => {
    const rects = members.map(i => [result.x[i] - result.width[i] / 2, result.y[i] - NODE_HEIGHT / 2,
      result.x[i] + result.width[i] / 2, result.y[i] + NODE_HEIGHT / 2]);
    rects.forEach((a, k) => rects.slice(0, k).forEach(b => assert.ok(!tooClose(a, b, INNER_GAP), 'e-nodes of one e-class overlap')));
  });
  checkRanks(result, boxes);
  // boxes of a rank do not overlap, and share their top
  const byRank = new Map();
  for (const i of boxes) {
    if (!byRank.has(result.rank[i])) byRank.set(result.rank[i], []);
    byRank.get(result.rank[i]).push(i);
  }
  for (const [rank, nodes] of byRank) {
    nodes.sort((a, b) => result.x[a] - result.x[b]);
    for (let k = 1; k < nodes.length; k++) {
      const gap = box(nodes[k]).left - box(nodes[k - 1]).right;
      assert.ok(gap >= NODE_GAP - 1e-6, `rank ${rank}: ${graph.nodes[nodes[k - 1]].id} and ${graph.nodes[nodes[k]].id} overlap`);
      assert.ok(near(box(nodes[k]).top, box(nodes[0]).top), `rank ${rank} shares its top`);
    }
  }
  // an edge leaves from below its e-node (its bottom in the box's last row, else the box's bottom) and ends on
  // the top of the e-class box it reads (a back edge: from above the e-node, its top in the first row, else the
  // box's top, to the box's bottom; a self-read: a loop from below the e-node to the box's top)
  let reversed = 0;
  let loops = 0;
  graph.edges.forEach((edge, e) => {
    const s = graph.index.get(edge.source);
    const t = graph.index.get(edge.target);
    const p = result.edges[e].points;
    const from = box(s);
    const to = box(t);
    const c = graph.eclassOf[s];
    const outer = c >= 0 ? box(c) : from;
    const within = (x, b) => x >= b.left - 1e-6 && x <= b.right + 1e-6;
    assert.ok(within(p[0], from), `edge ${e} starts on its e-node`);
    assert.ok(within(p[p.length - 2], to), `edge ${e} ends on its target`);
    const below = y => near(y, from.bottom) || (near(y, outer.bottom) && from.bottom < outer.bottom - BOX_PAD - 1e-6);
    const above = y => near(y, from.top) || (near(y, outer.top) && from.top > outer.top + BOX_TITLE + 1e-6);
    if (result.edges[e].loop) {
      loops++;
      assert.equal(p.length, 8);
      assert.ok(below(p[1]) && near(p[7], to.top), `self-read ${e}: from below the e-node to the box top`);
    } else if (result.edges[e].reversed) {
      reversed++;
      assert.ok(above(p[1]) && near(p[p.length - 1], to.bottom), `back edge ${e} runs up`);
    } else {
      assert.ok(below(p[1]) && near(p[p.length - 1], to.top), `edge ${e}: below the e-node to the box top`);
    }
  });
  return { reversed, loops };
}

test('a cyclic e-graph: each e-class one box holding its e-nodes; edges from e-node bottoms to box tops', () => {
  const graph = graphOf(fixture('egraph_cyclic.json'));
  const input = stageLayoutInput(graph);
  const eclasses = graph.nodes.filter(n => n.kind === 'eclass').length;
  const enodes = graph.nodes.filter(n => n.kind === 'enode').length;
  assert.equal(input.count, eclasses, 'one vertex per e-class');
  assert.equal(input.inner.owner.length, enodes, 'one inner box per e-node');
  assert.equal(input.sources.length, graph.edges.length, 'no membership edges');
  assert.ok(hasCycle(input.count, input.sources, input.targets), 'the fixture has a cycle among its e-classes');
  const result = stageLayout(graph);
  const { reversed, loops } = checkCompound(graph, result);
  assert.ok(reversed > 0 && reversed < graph.edges.length / 10, `few edges reversed (${reversed})`);
  console.log(`# e-graph: ${eclasses} e-class boxes, ${enodes} e-nodes, ${result.ranks} ranks, ${reversed} reversed, ` +
    `${loops} self-reads, ${result.crossings} crossings, ${result.dummies} dummies, ` +
    `${Math.round(result.totalWidth)} x ${Math.round(result.totalHeight)} px`);
});

test('a compound vertex: inner boxes ordered under what they read, self-reads looped, ports counted in crossings', () => {
  // vertex 0 holds inner boxes 0 (reads vertex 2) and 1 (reads vertex 1); 1 is left of 2 below; box 2 reads
  // vertex 0 itself (a self-read), vertex 3 holds nothing
  const widths = [50, 50, 50, 60];
  const base = { count: 4, widths, sources: [0, 0, 0, 1], targets: [2, 1, 0, 3] };
  const inner = { owner: [0, 0, 0], widths: [60, 60, 40], port: [0, 1, 2, -1] };
  const result = layout({ ...base, inner });
  assert.ok(result.edges[2].loop && result.edges[2].points.length === 8, 'the self-read is a loop');
  assert.ok(result.x[1] < result.x[2], 'vertex 1 is left of vertex 2');
  assert.ok(result.innerX[1] < result.innerX[0], 'the inner box reading 1 sits left of the one reading 2');
  assert.equal(result.crossings, 0);
  assert.equal(result.heights[0], BOX_HEIGHT);
  assert.equal(result.heights[1], NODE_HEIGHT);
  assert.equal(result.width[0], 60 + 60 + 40 + 2 * INNER_GAP + 2 * BOX_PAD, 'the box holds its inner boxes');
  // boxes and what they read stay in order: the edges start at their inner boxes and do not cross
  for (const [e, q] of [[0, 0], [1, 1]]) {
    const p = result.edges[e].points;
    assert.ok(Math.abs(p[0] - result.innerX[q]) < 1e-6 && Math.abs(p[1] - (result.innerY[q] + NODE_HEIGHT / 2)) < 1e-6);
  }
  // two inner boxes both reading vertices 1 and 2 cross once whatever their order; from one point they would not
  const both = { count: 3, widths: [50, 50, 50], sources: [0, 0, 0, 0], targets: [1, 2, 1, 2] };
  assert.equal(layout({ ...both, inner: { owner: [0, 0], widths: [40, 40], port: [0, 0, 1, 1] } }).crossings, 1);
  assert.equal(layout(both).crossings, 0);
  // a port on another vertex than the edge's source is ignored
  const wrong = layout({ ...base, inner: { ...inner, port: [0, 1, 2, 0] } });
  assert.equal(wrong.edges[3].points[1], wrong.y[1] + NODE_HEIGHT / 2);
  assert.match(edgePath(result.edges[2]), /^M[\d.]+,[\d.]+ C.* C.* M.* L.* L[\d.]+,[\d.]+$/);
});

test('a compound vertex of 10 inner boxes wraps into 3 rows of at most INNER_COLUMNS', () => {
  assert.equal(INNER_COLUMNS, 4);
  // vertex 0 (above) reads vertex 1, which holds inner boxes 0..9: box q reads vertex 2 + q % 5, box 5 reads
  // vertex 1 itself (a self-read), box 9 reads vertex 0 (a back edge)
  const count = 7;
  const widths = [50, 40, 60, 60, 60, 60, 60];
  const sources = [0];
  const targets = [1];
  const port = [-1];
  for (let q = 0; q < 10; q++) {
    sources.push(1);
    targets.push(q === 5 ? 1 : q === 9 ? 0 : 2 + (q % 5));
    port.push(q);
  }
  const innerWidths = [60, 90, 50, 120, 70, 60, 44, 100, 80, 66];
  const input = { count, widths, sources, targets, inner: { owner: new Array(10).fill(1), widths: innerWidths, port } };
  const result = layout(input);
  assert.equal(result.heights[1], BOX_TITLE + 3 * NODE_HEIGHT + 2 * INNER_GAP + BOX_PAD, '3 rows tall');
  assert.equal(result.heights[1], boxHeight(3));
  assert.equal(result.heights[0], NODE_HEIGHT);
  assert.deepEqual([...result.innerRow].sort(), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
  const vertex = v => [result.x[v] - result.width[v] / 2, result.y[v] - result.heights[v] / 2,
    result.x[v] + result.width[v] / 2, result.y[v] + result.heights[v] / 2];
  const innerBox = q => [result.innerX[q] - innerWidths[q] / 2, result.innerY[q] - NODE_HEIGHT / 2,
    result.innerX[q] + innerWidths[q] / 2, result.innerY[q] + NODE_HEIGHT / 2];
  const outer = vertex(1);
  const rowWidths = [0, 0, 0];
  for (let q = 0; q < 10; q++) {
    const b = innerBox(q);
    assert.ok(b[0] >= outer[0] + BOX_PAD - 1e-6 && b[2] <= outer[2] - BOX_PAD + 1e-6, `inner box ${q} inside across`);
    assert.ok(b[1] >= outer[1] + BOX_TITLE - 1e-6 && b[3] <= outer[3] - BOX_PAD + 1e-6, `inner box ${q} inside down`);
    assert.ok(Math.abs(b[1] - (outer[1] + BOX_TITLE + result.innerRow[q] * (NODE_HEIGHT + INNER_GAP))) < 1e-6, `box ${q}: its row`);
    for (let p = 0; p < q; p++) assert.ok(!tooClose(innerBox(p), b, INNER_GAP), `inner boxes ${p} and ${q} overlap`);
    rowWidths[result.innerRow[q]] += innerWidths[q] + INNER_GAP;
  }
  assert.equal(result.width[1], Math.max(...rowWidths) - INNER_GAP + 2 * BOX_PAD, 'as wide as its widest row');
  // every edge from a port starts inside the vertex's span across, below its inner box, and not above the vertex's bottom
  for (let e = 1; e < sources.length; e++) {
    const q = port[e];
    const b = innerBox(q);
    const p = result.edges[e].points;
    const [x0, y0] = p; // a back edge too starts at its port (it runs up from there)
    assert.ok(x0 >= outer[0] && x0 <= outer[2] && x0 >= b[0] && x0 <= b[2], `edge ${e} starts across its inner box`);
    if (result.edges[e].reversed) {
      assert.ok(Math.abs(y0 - (result.innerRow[q] === 0 ? b[1] : outer[1])) < 1e-6, `back edge ${e} reaches above its box`);
    } else {
      assert.ok(y0 >= b[3] - 1e-6 && y0 <= outer[3] + 1e-6, `edge ${e} starts below its inner box (${y0} in ${b[3]}..${outer[3]})`);
      assert.ok(Math.abs(y0 - (result.innerRow[q] === 2 ? b[3] : outer[3])) < 1e-6, `edge ${e}: the box's or the vertex's bottom`);
    }
  }
  assert.ok(result.edges[6].loop && result.edges[10].reversed);
  // ranks do not overlap; the rank below starts under the tall vertex
  checkRanks(result, [0, 1, 2, 3, 4, 5, 6]);
  for (let v = 2; v < count; v++) assert.ok(result.y[v] - NODE_HEIGHT / 2 >= outer[3] + RANK_GAP - 1e-6);
  assert.ok(result.totalHeight >= outer[3]);
  // a port's place along the vertex is its column's: the inner boxes of each column read what lies below it
  // (fewer crossings than the 10 inner boxes in one row would give)
  const wide = layout(input, { innerColumns: 10 });
  assert.equal(wide.heights[1], BOX_HEIGHT);
  assert.ok(wide.width[1] > result.width[1]);
  assert.deepEqual([...wide.innerColumn].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  // deterministic
  assert.deepEqual(layout(input), result);
  // at most innerRows rows: 10 inner boxes in 2 rows take 5 columns
  const two = layout(input, { innerRows: 2 });
  assert.equal(two.heights[1], boxHeight(2));
  assert.deepEqual([...two.innerColumn].sort((a, b) => a - b), [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
});

test('a tall compound vertex takes more columns to stay within INNER_ROWS rows', () => {
  assert.equal(INNER_ROWS, 3);
  assert.deepEqual([1, 4, 5, 12, 13, 14, 18, 40].map(n => innerColumnsFor(n)), [1, 4, 4, 4, 5, 5, 6, 14]);
  assert.equal(innerColumnsFor(10, 10), 10);
  assert.equal(innerColumnsFor(10, 4, 2), 5);
  // one vertex holding 18 inner boxes: 6 columns, 3 rows
  const count = 18;
  const result = layout({ count: 1, widths: [60], sources: [], targets: [],
    inner: { owner: new Array(count).fill(0), widths: new Array(count).fill(50), port: [] } });
  assert.equal(result.heights[0], boxHeight(3));
  assert.equal(Math.max(...result.innerColumn) + 1, 6);
  assert.equal(Math.max(...result.innerRow) + 1, 3);
  assert.equal(result.width[0], 6 * 50 + 5 * INNER_GAP + 2 * BOX_PAD);
});

/** An e-graph envelope of `k` e-classes in a chain, two e-nodes each (one also reading a shared leaf), with a
 * self-read and a back edge. */
function syntheticEgraph(k) {
  const nodes = [];
  const edges = [];
  for (let c = 0; c <= k; c++) nodes.push({ id: `IR-${c}`, kind: 'eclass', label: c === k ? 'leaf' : `Op ${c % 7}` });
  for (let c = 0; c < k; c++) {
    for (let j = 0; j < 2; j++) {
      const id = `e-${c}-${j}`;
      nodes.push({ id, kind: 'enode', eclass: `IR-${c}`, label: j ? `Kernel${c % 5}` : `Op${c % 3}` });
      edges.push({ source: id, target: `IR-${c + 1}` });
      if (j === 1 && c % 10 === 0) edges.push({ source: id, target: `IR-${k}` });
    }
  }
  edges.push({ source: 'e-3-0', target: 'IR-3' }, { source: 'e-9-1', target: 'IR-2' });
  return graphOf({ stage: 'egraph', schema: 1, nodes, edges });
}

test('a large e-graph: laid out in slices, quickly, every e-node inside its box', () => {
  const graph = syntheticEgraph(1000);
  assert.ok(graph.size > 1500, 'above the view\'s PROGRESSIVE_THRESHOLD');
  const began = performance.now();
  const steps = stageLayoutSteps(graph);
  let count = 0;
  let step = steps.next();
  while (!step.done) {
    count++;
    step = steps.next();
  }
  const took = performance.now() - began;
  assert.ok(count >= 6, `the layout can be sliced (${count} steps)`);
  const { reversed, loops } = checkCompound(graph, step.value);
  assert.equal(loops, 1, 'the self-read');
  assert.ok(reversed >= 1, 'the back edge');
  console.log(`# ${graph.size}-node e-graph: ${took.toFixed(0)} ms, ${step.value.ranks} ranks, ${step.value.crossings} crossings`);
  assert.ok(took < 2000, `layout took ${took} ms`);
});

test('a DAG keeps every edge pointing down, sources next to their consumers', () => {
  const hlir = graphOf(fixture('pipeline_fused.json').stages[0]);
  const input = stageLayoutInput(hlir);
  const result = layout(input);
  assert.equal(checkLayout(input, result), 0);
  assert.equal(result.crossings, 0);
  const rank = id => result.rank[hlir.index.get(id)];
  assert.deepEqual(['h0', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'h7'].map(rank), [0, 0, 1, 2, 3, 4, 4, 5]);
  // the two inputs sit either side of their Add
  const x = id => result.x[hlir.index.get(id)];
  assert.ok(x('h0') < x('h2') && x('h2') < x('h1'));
});

test('cycles, self-loops and long edges', () => {
  // 0 -> 1 -> 2 -> 0, 2 -> 2, 0 -> 3 -> 4, 0 -> 4 (long)
  const input = { count: 5, widths: [50, 50, 50, 50, 50], sources: [0, 1, 2, 2, 0, 3, 0], targets: [1, 2, 0, 2, 3, 4, 4] };
  const result = layout(input);
  assert.equal(checkLayout(input, result), 1);
  assert.ok(result.edges[2].reversed);
  assert.ok(result.edges[3].loop);
  assert.equal(result.edges[6].points.length, 6, 'a two-rank edge passes one dummy');
  assert.equal(result.dummies, 2, 'the long edge and the reversed 2 -> 0 (spanning two ranks) get one dummy each');
  // with no dummy budget the long edge is drawn direct
  const direct = layout(input, { maxDummies: 0 });
  checkLayout(input, direct);
  assert.equal(direct.edges[6].points.length, 4);
  assert.equal(direct.dummies, 0);
  // empty graph
  const empty = layout({ count: 0, widths: [], sources: [], targets: [] });
  assert.equal(empty.ranks, 0);
  assert.deepEqual(empty.edges, []);
});

test('labels and widths', () => {
  assert.equal(labelText('Mul'), 'Mul');
  const long = 'x'.repeat(100);
  assert.equal(Array.from(labelText(long)).length, LABEL_CHARS);
  assert.ok(labelText(long).endsWith('…'));
  assert.equal(labelText('a\n b'), 'a b');
  assert.ok(nodeWidth('Mul') < nodeWidth('SumReduce axis=1'));
  assert.equal(nodeWidth(long), nodeWidth('y'.repeat(LABEL_CHARS + 5)));
  const path = edgePath({ points: [10, 20, 30, 80], reversed: false, loop: false });
  assert.match(path, /^M10,20 C10,50 30,50 30,80 M26,74 L30,80 L34,74$/);
});

function syntheticDag(n, m) {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const sources = [];
  const targets = [];
  for (let v = 1; v < n; v++) {
    sources.push(Math.max(0, v - 1 - Math.floor(random() * Math.min(v, 30))));
    targets.push(v);
  }
  while (sources.length < m) {
    const a = Math.floor(random() * n);
    const b = Math.floor(random() * n);
    if (a < b && b - a < 200) {
      sources.push(a);
      targets.push(b);
    }
  }
  const widths = Array.from({ length: n }, (_, v) => nodeWidth(`node ${v} ${'op'.repeat(v % 9)}`));
  return { count: n, widths, sources, targets };
}

test('5,000 nodes and 6,000 edges: fast and deterministic', () => {
  const input = syntheticDag(5000, 6000);
  const times = [];
  let first = null;
  for (let run = 0; run < 3; run++) {
    const began = performance.now();
    const result = layout(input);
    times.push(performance.now() - began);
    if (first === null) {
      first = result;
    } else {
      assert.deepEqual(result.x, first.x);
      assert.deepEqual(result.y, first.y);
      assert.deepEqual(result.edges.map(e => e.points), first.edges.map(e => e.points));
    }
  }
  checkLayout(input, first);
  const steps = [...(function* () { yield* layoutSteps(input); })()];
  assert.ok(steps.length >= 6, 'the layout can be sliced into several steps');
  console.log(`# 5,000-node layout: ${times.map(t => t.toFixed(0)).join(', ')} ms (${first.ranks} ranks, ${first.dummies} dummies, ${first.crossings} crossings)`);
  assert.ok(Math.min(...times) < 1000, `layout took ${Math.min(...times)} ms`);
});
