// The IR level of an e-graph (on lib/model.js): which nodes and edges it keeps, edge ids, operand order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { groupNodes, hasIrLevel, irLevel, StageGraph } from '../lib/model.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const egraph = () => structuredClone(fixture('pipeline_fused.json').stages.find(s => s.stage === 'egraph'));

const eclass = (id, sort) => ({ id, label: id, kind: 'eclass', sort });
const enode = (id, cls, inputs) => ({ id, label: id, kind: 'enode', eclass: cls, ...(inputs ? { ir: { names: [], inputs, new: false } } : {}) });
const edge = (source, target, index) => ({ id: `${source}-${target}-${index}`, source, target, index });

/** IR-2's Op reads IR-3, IR-1, IR-3 through its IList; an Input reads IR-3 directly (a kept envelope edge). */
function tiny() {
  return {
    stage: 'egraph', schema: 1, summary: '', links: {}, meta: {},
    nodes: [
      eclass('IR-1', 'IR'), enode('f-0-Input', 'IR-1', []),
      eclass('OpKind-1', 'OpKind'), enode('f-4-KernelAdd', 'OpKind-1'),
      eclass('IR-2', 'IR'), enode('f-1-Op', 'IR-2', ['IR-3', 'IR-1', 'IR-3']),
      eclass('IList-1', 'IList'), enode('f-3-ICons', 'IList-1'),
      eclass('IR-3', 'IR'), enode('f-2-Input', 'IR-3', []),
      eclass('Expression-1', 'Expression'), enode('f-5-MNum', 'Expression-1')
    ],
    edges: [
      edge('f-0-Input', 'IR-3', 0), edge('f-1-Op', 'OpKind-1', 0), edge('f-1-Op', 'IList-1', 1),
      edge('f-1-Op', 'IR-1', 2), edge('f-3-ICons', 'IR-1', 0), edge('f-2-Input', 'Expression-1', 0)
    ]
  };
}

test('the IR level keeps the IR e-classes and their e-nodes, in envelope order', () => {
  const level = irLevel(tiny());
  assert.deepEqual(level.nodes.map(n => n.id), ['IR-1', 'f-0-Input', 'IR-2', 'f-1-Op', 'IR-3', 'f-2-Input']);
  assert.equal(level.stage, 'egraph');
});

test('an e-node reads each distinct IR input once, in operand order, then kept envelope edges', () => {
  const level = irLevel(tiny());
  assert.deepEqual(level.edges.map(e => [e.id, e.source, e.target, e.input]), [
    ['f-1-Op>IR-3', 'f-1-Op', 'IR-3', 0],
    ['f-1-Op>IR-1', 'f-1-Op', 'IR-1', 1],
    ['f-0-Input-IR-3-0', 'f-0-Input', 'IR-3', undefined]
  ]);
  // the envelope's f-1-Op -> IR-1 edge is the same read: not drawn twice
  const graph = new StageGraph(level);
  assert.deepEqual(graph.successors('f-1-Op'), ['IR-1', 'IR-3']);
  assert.deepEqual(graph.predecessors('IR-3'), ['f-0-Input', 'f-1-Op']);
});

test('only e-graphs with IR e-classes have an IR level', () => {
  assert.equal(hasIrLevel(tiny()), true);
  assert.equal(hasIrLevel({ ...tiny(), stage: 'hlir' }), false);
  assert.equal(hasIrLevel({ ...tiny(), nodes: tiny().nodes.filter(n => n.sort !== 'IR' && n.kind === 'eclass') }), false);
});

test('a real e-graph: every IR input is an edge, nothing else of another sort is drawn', () => {
  const envelope = egraph();
  const level = irLevel(envelope);
  const ir = new Set(envelope.nodes.filter(n => n.kind === 'eclass' && n.sort === 'IR').map(n => n.id));
  assert.ok(ir.size > 0 && level.nodes.length < envelope.nodes.length);
  for (const node of level.nodes) {
    assert.ok(ir.has(node.kind === 'enode' ? node.eclass : node.id), node.id);
  }
  const wanted = level.nodes.flatMap(n => [...new Set(n.ir?.inputs ?? [])].map(i => `${n.id}>${i}`));
  assert.ok(wanted.length > 0);
  assert.deepEqual(level.edges.map(e => e.id).filter(id => id.includes('>')), wanted);
  assert.ok(level.edges.every(e => ir.has(e.target)));
  // folding works on the level
  assert.ok(groupNodes(new StageGraph(level), 'hlir').groups.length > 0);
});

test('a capped e-graph (IR e-classes only: few envelope edges join them) gets its reads', () => {
  const envelope = egraph();
  const ir = new Set(envelope.nodes.filter(n => n.kind === 'eclass' && n.sort === 'IR').map(n => n.id));
  const nodes = envelope.nodes.filter(n => ir.has(n.kind === 'enode' ? n.eclass : n.id));
  const kept = new Set(nodes.map(n => n.id));
  const capped = { ...envelope, nodes, edges: envelope.edges.filter(e => kept.has(e.source) && kept.has(e.target)),
    meta: { ...envelope.meta, capped: { reason: 'test' } } };
  const level = irLevel(capped);
  assert.equal(level.nodes.length, nodes.length);
  assert.deepEqual(level.edges, irLevel(envelope).edges);
  assert.ok(level.edges.length > 2 * capped.edges.length, `${level.edges.length} edges, ${capped.edges.length} in the envelope`);
});
