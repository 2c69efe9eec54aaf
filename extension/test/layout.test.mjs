// The layered layout (on lib/layout.js): cyclic e-graphs, DAG invariants, speed on 5,000 nodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { parseEnvelope, StageGraph } from '../lib/model.js';
import {
  edgePath, labelText, layout, layoutSteps, nodeWidth, stageLayoutInput, LABEL_CHARS, NODE_GAP, NODE_HEIGHT
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

test('a cyclic e-graph: every node placed, no overlaps, edges follow ranks but for reversed back edges', () => {
  const graph = graphOf(fixture('egraph_cyclic.json'));
  const input = stageLayoutInput(graph);
  assert.ok(hasCycle(input.count, input.sources, input.targets), 'the fixture has a cycle');
  const enodes = graph.nodes.filter(n => n.kind === 'enode').length;
  assert.equal(input.sources.length, graph.edges.length + enodes, 'one membership edge per e-node');
  assert.deepEqual(input.member.filter(Boolean).length, enodes);
  const result = layout(input);
  const reversed = checkLayout(input, result);
  assert.ok(reversed > 0, 'some back edges were reversed');
  assert.ok(reversed < input.sources.length / 10, `few edges reversed (${reversed})`);
  // after reversing, the edges form a DAG
  const s2 = input.sources.map((s, e) => (result.edges[e].reversed ? input.targets[e] : s));
  const t2 = input.targets.map((t, e) => (result.edges[e].reversed ? input.sources[e] : t));
  assert.ok(!hasCycle(input.count, s2, t2));
  // most e-nodes sit right under their e-class
  let under = 0;
  graph.nodes.forEach((node, i) => {
    if (node.kind === 'enode' && result.rank[i] === result.rank[graph.index.get(node.eclass)] + 1) under++;
  });
  assert.equal(under, enodes, `${under} of ${enodes} e-nodes sit right under their e-class`);
  console.log(`# e-graph: ${input.count} nodes, ${result.ranks} ranks, ${reversed} reversed, ${result.crossings} crossings, ${result.dummies} dummies`);
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
