// Focus (k-hop neighbourhoods) and folding (groups by layer / by HLIR node, merged edges), on lib/model.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  compareHlirIds, groupNodes, hlirOf, kHop, LABEL_MIN_SCALE, makeScene, openingFold, parseEnvelope, StageGraph
} from '../lib/model.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const pipeline = fixture('pipeline_fused.json');

function graphOf(envelope) {
  const parsed = parseEnvelope(envelope);
  assert.ok(parsed.ok, parsed.error);
  return new StageGraph(parsed.envelope);
}

const ids = (graph, indices) => indices.map(i => graph.nodes[i].id);
const edge = (source, target) => ({ source, target });

/** h0 -> h1 -> h2 -> h3 -> h4 and h5 -> h2: a chain with a side input. */
function chain() {
  const nodes = ['h0', 'h1', 'h2', 'h3', 'h4', 'h5'].map(id => ({ id, label: id }));
  const edges = [edge('h0', 'h1'), edge('h1', 'h2'), edge('h2', 'h3'), edge('h3', 'h4'), edge('h5', 'h2')];
  return graphOf({ stage: 'hlir', schema: 1, nodes, edges });
}

/** Breadth-first search through StageGraph.neighbours (with membership): ids within `depth` of `id`. */
function reference(graph, id, depth) {
  const seen = new Set([id]);
  let frontier = [id];
  for (let k = 0; k < depth; k++) {
    const next = [];
    for (const u of frontier) {
      for (const v of graph.neighbours(u, true).nodes) {
        if (!seen.has(v)) {
          seen.add(v);
          next.push(v);
        }
      }
    }
    frontier = next;
  }
  return [...seen].sort((a, b) => graph.index.get(a) - graph.index.get(b));
}

test('k-hop: edges either way, depth by depth', () => {
  const g = chain();
  const at = id => g.index.get(id);
  assert.deepEqual(ids(g, kHop(g, at('h2'), 0)), ['h2']);
  assert.deepEqual(ids(g, kHop(g, at('h2'), 1)), ['h1', 'h2', 'h3', 'h5']);
  assert.deepEqual(ids(g, kHop(g, at('h2'), 2)), ['h0', 'h1', 'h2', 'h3', 'h4', 'h5']);
  assert.deepEqual(ids(g, kHop(g, at('h0'), 2)), ['h0', 'h1', 'h2']);
  assert.deepEqual(ids(g, kHop(g, at('h5'), 2)), ['h1', 'h2', 'h3', 'h5']);
  assert.deepEqual(kHop(g, -1, 2), []);
});

test('k-hop in an e-graph counts membership, as neighbours(id, true) does', () => {
  const g = graphOf(pipeline.stages.find(s => s.stage === 'egraph'));
  const enode = g.nodes.find(n => n.kind === 'enode' && g.outEdges[g.index.get(n.id)].length > 0);
  // depth 1 from an e-node: its e-class (membership) and the e-classes it reads (edges)
  const one = ids(g, kHop(g, g.index.get(enode.id), 1));
  assert.ok(one.includes(enode.eclass), `${enode.id}'s e-class ${enode.eclass} is one step away`);
  for (const depth of [1, 2, 3]) {
    for (const node of g.nodes.filter((_, i) => i % 7 === 0)) {
      assert.deepEqual(ids(g, kHop(g, g.index.get(node.id), depth)), reference(g, node.id, depth), `${node.id} depth ${depth}`);
    }
  }
  const sizes = [0, 1, 2, 3, 4].map(d => kHop(g, g.index.get(enode.id), d).length);
  assert.ok(sizes.every((s, i) => i === 0 || s >= sizes[i - 1]) && sizes[4] > sizes[1], `growing: ${sizes}`);
});

test('HLIR ids sort numerically', () => {
  assert.deepEqual(['h10', 'h9', 'x', 'h100', 'h2'].sort(compareHlirIds), ['h2', 'h9', 'h10', 'h100', 'x']);
});

/** An HLIR whose nodes h1..h3 are a rolled layer (×4): h0 -> h1 -> h2 -> h3 -> h4, and h5 -> h2. */
function rolledHlir() {
  const nodes = ['h0', 'h1', 'h2', 'h3', 'h4', 'h5'].map(id => ({ id, label: id, layer: ['h1', 'h2', 'h3'].includes(id) }));
  const edges = [edge('h0', 'h1'), edge('h1', 'h2'), edge('h2', 'h3'), edge('h3', 'h4'), edge('h5', 'h2'), edge('h0', 'h2')];
  return graphOf({ stage: 'hlir', schema: 1, nodes, edges, meta: { layer: { copies: 4, nodes: ['h1', 'h2', 'h3'] } } });
}

test('fold by layer: the HLIR layer is one group, edges to it merged', () => {
  const g = rolledHlir();
  const grouping = groupNodes(g, 'layer');
  assert.equal(grouping.groups.length, 1);
  const [layer] = grouping.groups;
  assert.equal(layer.key, 'layer');
  assert.equal(layer.label, 'layer ×4 · 3 nodes');
  assert.deepEqual(ids(g, layer.members), ['h1', 'h2', 'h3']);
  assert.deepEqual(Array.from(grouping.groupOf), [-1, 0, 0, 0, -1, -1]);
  assert.equal(groupNodes(g, 'hlir').groups.length, 0, 'an HLIR has no HLIR links to fold by');
  assert.equal(groupNodes(g, 'none').groups.length, 0);

  const scene = makeScene(g, { grouping });
  const drawn = scene.graph.nodes.map(n => (n.kind === 'group' ? `[${n.label}]` : n.id));
  assert.deepEqual(drawn, ['h0', '[layer ×4 · 3 nodes]', 'h4', 'h5'], 'the group sits where its first member was');
  const pairs = scene.graph.edges.map(e => `${scene.graph.node(e.source).label}>${scene.graph.node(e.target).label}:${e.merged ?? '-'}`);
  // h0->h1 and h0->h2 become one edge counting 2; h1->h2 and h2->h3 are inside; h3->h4 and h5->h2 stay one each
  assert.deepEqual(pairs, ['h0>layer ×4 · 3 nodes:2', 'layer ×4 · 3 nodes>h4:1', 'h5>layer ×4 · 3 nodes:1']);
  assert.deepEqual(Array.from(scene.edge), [-1, -1, -1], 'every edge touches the group: none is a stage edge');
  assert.deepEqual(Array.from(scene.at), [0, 1, 1, 1, 2, 3]);
  assert.deepEqual(Array.from(scene.node), [0, -1, 4, 5]);
  assert.deepEqual(Array.from(scene.group), [-1, 0, -1, -1]);

  // expanded, the group is drawn node by node: the stage itself
  const open = makeScene(g, { grouping, expanded: new Set(['layer']) });
  assert.equal(open.graph, g);
  assert.equal(open.graph.size, scene.graph.size + layer.members.length - 1);
  assert.deepEqual(Array.from(open.edge), [0, 1, 2, 3, 4, 5]);
});

test('a group id never takes a node id', () => {
  const g = graphOf({ stage: 'hlir', schema: 1, meta: {},
    nodes: [{ id: 'group:layer', layer: true }, { id: 'a', layer: true }, { id: "group:layer'" }], edges: [] });
  const scene = makeScene(g, { grouping: groupNodes(g, 'layer') });
  const group = scene.graph.nodes.find(n => n.kind === 'group');
  assert.equal(group.id, "group:layer''");
  assert.equal(group.label, 'layer · 2 nodes', 'no copies in meta: no ×N');
});

test('fold by layer in an LLIR: one group per copy, shared kernels apart', () => {
  const kernels = [
    { id: 'k0' }, { id: 'k1', copy: 0 }, { id: 'k2', copy: 0 }, { id: 'k3', copy: 1 }, { id: 'k4', copy: 1 },
    { id: 'k5', copy: null }, { id: 'k6', copy: 2 }
  ];
  const edges = [edge('k0', 'k1'), edge('k1', 'k2'), edge('k2', 'k3'), edge('k5', 'k3'), edge('k5', 'k1'), edge('k3', 'k4'),
    edge('k4', 'k6'), edge('k2', 'k3')];
  const g = graphOf({ stage: 'llir', schema: 1, nodes: kernels, edges, meta: { layer: { copies: 3, folded: true } } });
  const grouping = groupNodes(g, 'layer');
  assert.deepEqual(grouping.groups.map(x => x.label), ['copy 0 · 2 kernels', 'copy 1 · 2 kernels'], 'copy 2 has one kernel: not a group');
  const scene = makeScene(g, { grouping });
  const name = id => scene.graph.node(id).group ?? id;
  assert.deepEqual(scene.graph.nodes.map(n => n.group ?? n.id), ['k0', 'copy 0', 'copy 1', 'k5', 'k6']);
  assert.deepEqual(scene.graph.edges.map(e => [name(e.source), name(e.target), e.merged]),
    [['k0', 'copy 0', 1], ['copy 0', 'copy 1', 2], ['k5', 'copy 1', 1], ['k5', 'copy 0', 1], ['copy 1', 'k6', 1]]);
  // expanding copy 1 only: its kernels come back, copy 0 stays folded
  const open = makeScene(g, { grouping, expanded: new Set(['copy 1']) });
  assert.deepEqual(open.graph.nodes.map(n => n.group ?? n.id), ['k0', 'copy 0', 'k3', 'k4', 'k5', 'k6']);
  assert.deepEqual(open.graph.edges.filter(e => e.merged === undefined).map(e => [e.source, e.target]),
    [['k5', 'k3'], ['k3', 'k4'], ['k4', 'k6']]);
  assert.deepEqual(Array.from(open.edge), [-1, -1, 3, -1, 5, 6]);
});

/**
 * A small e-graph: e-classes IR-1 (h3), IR-2 (h3, h7), IR-3 (h9), IR-4 (h10 and h2), E-5 (no HLIR), E-6 (read by
 * nothing), their e-nodes; each e-class's `group` is what Python's fold by HLIR node gave it (E-6 none).
 */
function egraph(extra = {}) {
  const eclass = (id, hlir, group, layer) => ({ id, kind: 'eclass', hlir, ...(group ? { group } : {}), ...(layer === undefined ? {} : { layer }) });
  const enode = (id, of) => ({ id, kind: 'enode', eclass: of });
  const nodes = [
    eclass('IR-1', ['h3'], 'h3', true), enode('n1', 'IR-1'), enode('n1b', 'IR-1'),
    eclass('IR-2', ['h7', 'h3'], 'h3', true), enode('n2', 'IR-2'),
    eclass('IR-3', ['h9'], 'h9', false), enode('n3', 'IR-3'),
    eclass('IR-4', ['h10', 'h2'], 'h2', true), enode('n4', 'IR-4'),
    eclass('E-5', [], 'h9'), enode('n5', 'E-5'),
    eclass('E-6', []), enode('n6', 'E-6')
  ];
  const edges = [edge('n2', 'IR-1'), edge('n3', 'IR-2'), edge('n3', 'E-5'), edge('n4', 'IR-3'), edge('n1', 'E-5')];
  return graphOf({ stage: 'egraph', schema: 1, nodes, edges, links: { hlir: { 'IR-4': ['h11'] } }, meta: { layer: { copies: 2 } }, ...extra });
}

test('fold by HLIR node in an e-graph: each e-class\'s group from the JSON, e-nodes with their e-class', () => {
  const g = egraph();
  assert.deepEqual(hlirOf(g, g.index.get('n4')), ['h11'], 'links.hlir first, for an e-node its e-class');
  assert.deepEqual(hlirOf(g, g.index.get('IR-2')), ['h7', 'h3'], 'else the node\'s own hlir field');
  const grouping = groupNodes(g, 'hlir');
  // E-6 has no group: drawn as itself
  assert.deepEqual(grouping.groups.map(x => [x.key, x.label, ids(g, x.members)]), [
    ['h3', 'h3 · 2 e-classes', ['IR-1', 'n1', 'n1b', 'IR-2', 'n2']],
    ['h9', 'h9 · 2 e-classes', ['IR-3', 'n3', 'E-5', 'n5']],
    ['h2', 'h2 · 1 e-class', ['IR-4', 'n4']]
  ]);
  assert.equal(grouping.groupOf[g.index.get('n6')], -1);
  const scene = makeScene(g, { grouping });
  assert.deepEqual(scene.graph.nodes.map(n => n.group ?? n.id), ['h3', 'h9', 'h2', 'E-6', 'n6']);
  const name = id => scene.graph.node(id).group ?? id;
  assert.deepEqual(scene.graph.edges.map(e => [name(e.source), name(e.target), e.merged]),
    [['h9', 'h3', 1], ['h2', 'h9', 1], ['h3', 'h9', 1]]);
  // expanded, membership survives for the e-class that joined
  const open = makeScene(g, { grouping, expanded: new Set(['h9']) });
  assert.equal(open.graph.eclassOf[open.graph.index.get('n5')], open.graph.index.get('E-5'));
});

test('fold by layer in an e-graph: the flagged e-classes and their e-nodes', () => {
  const g = egraph();
  const { groups } = groupNodes(g, 'layer');
  assert.equal(groups.length, 1);
  assert.equal(groups[0].label, 'layer ×2 · 3 e-classes');
  assert.deepEqual(ids(g, groups[0].members), ['IR-1', 'n1', 'n1b', 'IR-2', 'n2', 'IR-4', 'n4']);
});

test('focus: the k-hop neighbourhood of the folded scene, with its own edges only', () => {
  const g = rolledHlir();
  const at = id => g.index.get(id);
  const focus = makeScene(g, { focus: { node: at('h4'), depth: 1 } });
  assert.deepEqual(focus.graph.nodes.map(n => n.id), ['h3', 'h4']);
  assert.deepEqual(focus.graph.edges.map(e => [e.source, e.target]), [['h3', 'h4']]);
  assert.deepEqual(Array.from(focus.edge), [3]);
  assert.deepEqual(Array.from(focus.at), [-1, -1, -1, 0, 1, -1]);
  const two = makeScene(g, { focus: { node: at('h4'), depth: 2 } });
  assert.deepEqual(two.graph.nodes.map(n => n.id), ['h0', 'h2', 'h3', 'h4', 'h5'].filter(id => reference(g, 'h4', 2).includes(id)));
  assert.deepEqual(two.graph.nodes.map(n => n.id), reference(g, 'h4', 2));
  // folded, one step from h4 is the whole layer (one node); two steps reach h0 and h5 through it
  const grouping = groupNodes(g, 'layer');
  const folded = makeScene(g, { grouping, focus: { node: at('h4'), depth: 1 } });
  assert.deepEqual(folded.graph.nodes.map(n => n.group ?? n.id), ['layer', 'h4']);
  assert.deepEqual(makeScene(g, { grouping, focus: { node: at('h4'), depth: 2 } }).graph.nodes.map(n => n.group ?? n.id),
    ['h0', 'layer', 'h4', 'h5']);
  // focused on a node inside a folded group: the group is the centre
  const inside = makeScene(g, { grouping, focus: { node: at('h2'), depth: 1 } });
  assert.deepEqual(inside.graph.nodes.map(n => n.group ?? n.id), ['h0', 'layer', 'h4', 'h5']);
  assert.equal(inside.at[at('h2')], 1);
});

test('an e-graph opens at the most detailed view that reads at fit', () => {
  assert.equal(LABEL_MIN_SCALE, 0.4);
  assert.equal(openingFold(0.45, 9), 'none', 'the IR level reads at fit: unfolded');
  assert.equal(openingFold(LABEL_MIN_SCALE, 9), 'none', 'exactly at the label scale reads');
  assert.equal(openingFold(0.287, 9), 'hlir', 'too small to read: folded by HLIR node');
  assert.equal(openingFold(0.1, 0), 'none', 'no HLIR groups: unfolded all the same');
  assert.equal(openingFold(0.3, 3, 0.25), 'none', 'the threshold is a parameter');
});
