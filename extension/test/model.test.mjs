// Envelope validation, search, neighbours, details and provenance (on lib/model.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  detailsOf, drawnCount, linkedCount, parseEnvelope, Provenance, StageGraph, visualKind, SCHEMA_VERSION
} from '../lib/model.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const pipeline = fixture('pipeline_fused.json');
const table = pipeline.meta.provenance; // luminal_lab.compiler.provenance.Provenance.table (scripts/extension_fixtures.py)
const stageOf = name => structuredClone(pipeline.stages.find(s => s.stage === name));

function errorOf(value) {
  const result = parseEnvelope(value);
  assert.equal(result.ok, false, 'expected a validation error');
  return result.error;
}

function tiny() {
  return {
    stage: 'hlir', schema: 1, summary: 'HLIR: 3 nodes',
    nodes: [{ id: 'h0', label: 'Input x' }, { id: 'h1', label: 'Exp' }, { id: 'h2', label: 'Output y' }],
    edges: [{ source: 'h0', target: 'h1' }, { source: 'h1', target: 'h2' }],
    links: {}, meta: {}
  };
}

test('valid stage and pipeline envelopes parse', () => {
  for (const stage of pipeline.stages) {
    const result = parseEnvelope(stage);
    assert.ok(result.ok, result.error);
    assert.equal(result.envelope.stage, stage.stage);
    assert.equal(result.envelope.nodes.length, stage.nodes.length);
  }
  const whole = parseEnvelope(pipeline);
  assert.ok(whole.ok, whole.error);
  assert.equal(whole.envelope.stage, 'pipeline');
  assert.deepEqual(whole.envelope.stages.map(s => s.stage), ['hlir', 'egraph', 'llir', 'regions', 'cuda']);
  assert.deepEqual(whole.envelope.meta.provenance.hlir.h3.lines, { cu7: [11] });
  // a JSON string is read too; label defaults to the id; links/meta/edges may be left out
  const minimal = parseEnvelope(JSON.stringify({ stage: 'x', schema: 1, nodes: [{ id: 'a' }] }));
  assert.ok(minimal.ok, minimal.error);
  assert.equal(minimal.envelope.nodes[0].label, 'a');
  assert.deepEqual(minimal.envelope.edges, []);
  assert.deepEqual(minimal.envelope.links, {});
  assert.equal(minimal.envelope.summary, '');
});

test('validation errors name what is wrong and where', () => {
  assert.equal(SCHEMA_VERSION, 1);
  assert.equal(errorOf(42), 'the envelope is not a JSON object');
  assert.equal(errorOf([tiny()]), 'the envelope is not a JSON object');
  assert.equal(errorOf('{not json'), errorOf('{not json')); // stable
  assert.match(errorOf('{not json'), /^the envelope is not valid JSON: /);
  assert.equal(errorOf({ ...tiny(), stage: undefined }), 'the envelope has no string "stage"');
  assert.equal(errorOf({ ...tiny(), schema: '1' }), 'has no integer "schema"');
  assert.equal(errorOf({ ...tiny(), schema: 2 }), 'schema 2 is newer than this renderer (1)');
  assert.equal(errorOf({ ...tiny(), schema: 0 }), 'schema 0 is not a valid version');
  assert.equal(errorOf({ ...tiny(), summary: 5 }), '"summary" is not a string');
  assert.equal(errorOf({ ...tiny(), nodes: {} }), 'the envelope has no array "nodes"');

  let env = tiny();
  env.nodes.push({ id: 'h3' }, 'h4');
  assert.equal(errorOf(env), 'nodes[4] is not an object');
  env = tiny();
  env.nodes.push({ label: 'no id' });
  assert.equal(errorOf(env), 'nodes[3] has no string "id"');
  env = tiny();
  env.nodes[2].id = 7;
  assert.equal(errorOf(env), 'nodes[2] has no string "id"');
  env = tiny();
  env.nodes.push({ id: 'h0' });
  assert.equal(errorOf(env), 'nodes[3].id "h0" is not unique');
  env = tiny();
  env.nodes[1].label = ['Exp'];
  assert.equal(errorOf(env), 'nodes[1].label is not a string');

  env = tiny();
  env.edges.push({ source: 'h0', target: 'h9' });
  assert.equal(errorOf(env), 'edges[2].target "h9" is not a node');
  env = tiny();
  env.edges[0] = { target: 'h1' };
  assert.equal(errorOf(env), 'edges[0] has no string "source"');
  env = tiny();
  env.edges[1].source = 'nope';
  assert.equal(errorOf(env), 'edges[1].source "nope" is not a node');
  assert.equal(errorOf({ ...tiny(), edges: 'x' }), '"edges" is not an array');

  assert.equal(errorOf({ ...tiny(), links: { egraph: { h1: 'IR-1' } } }), 'links.egraph["h1"] is not an array of strings');
  assert.equal(errorOf({ ...tiny(), links: [] }), '"links" is not an object');
  assert.equal(errorOf({ ...tiny(), meta: 3 }), '"meta" is not an object');
});

test('pipeline validation errors name the stage', () => {
  const broken = structuredClone(pipeline);
  broken.stages[1].nodes[4] = { label: 'lost' };
  assert.equal(errorOf(broken), 'stages[1] (egraph): nodes[4] has no string "id"');
  const edge = structuredClone(pipeline);
  edge.stages[2].edges[3].target = 'k99';
  assert.equal(errorOf(edge), 'stages[2] (llir): edges[3].target "k99" is not a node');
  assert.equal(errorOf({ ...pipeline, schema: 3 }), 'pipeline: schema 3 is newer than this renderer (1)');
  assert.equal(errorOf({ ...pipeline, stages: undefined }), 'pipeline: the envelope has no array "stages"');
  assert.equal(errorOf({ ...pipeline, stages: [tiny(), tiny()] }), 'stages[1]: stage "hlir" appears twice');
  assert.equal(errorOf({ ...pipeline, meta: { provenance: { hlir: { h3: { lines: { cu7: [0] } } } } } }),
    'meta.provenance["hlir"]["h3"].lines["cu7"] is not an array of line numbers');
  assert.equal(errorOf({ ...pipeline, meta: { provenance: { hlir: { h3: { counterparts: { llir: 'k5' } } } } } }),
    'meta.provenance["hlir"]["h3"].counterparts["llir"] is not an array of strings');
  assert.equal(errorOf({ ...pipeline, meta: { provenance: { hlir: [] } } }), 'meta.provenance["hlir"] is not an object');
  const newer = structuredClone(pipeline);
  newer.stages[4].schema = 2;
  assert.equal(errorOf(newer), 'stages[4] (cuda): schema 2 is newer than this renderer (1)');
});

test('search is case-insensitive over string fields, in node order', () => {
  const hlir = new StageGraph(parseEnvelope(stageOf('hlir')).envelope);
  assert.deepEqual(hlir.search('sin'), ['h3']);
  assert.deepEqual(hlir.search('SIN'), ['h3']);
  assert.deepEqual(hlir.search('input'), ['h0', 'h1']); // label and kind
  assert.deepEqual(hlir.search('output'), ['h5', 'h7']);
  assert.deepEqual(hlir.search('h6'), ['h6']); // id
  assert.deepEqual(hlir.search('sumreduce'), ['h6']); // op
  assert.deepEqual(hlir.search('f32'), ['h0', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'h7']); // dtype
  assert.deepEqual(hlir.search('  '), []);
  assert.deepEqual(hlir.search('no such thing'), []);
  const egraph = new StageGraph(parseEnvelope(stageOf('egraph')).envelope);
  const found = egraph.search('kernelsin');
  assert.ok(found.includes('function-0-Op'));
  const order = egraph.nodes.map(n => n.id);
  assert.deepEqual([...found].sort((a, b) => order.indexOf(a) - order.indexOf(b)), found);
});

test('neighbours, predecessors and successors', () => {
  const hlir = new StageGraph(parseEnvelope(stageOf('hlir')).envelope);
  assert.deepEqual(hlir.predecessors('h2'), ['h0', 'h1']);
  assert.deepEqual(hlir.successors('h2'), ['h3']);
  assert.deepEqual(hlir.successors('h4'), ['h5', 'h6']);
  const around = hlir.neighbours('h4');
  assert.deepEqual(around.nodes, ['h3', 'h5', 'h6']);
  assert.deepEqual(around.edges.map(e => `${hlir.edges[e].source}-${hlir.edges[e].target}`), ['h3-h4', 'h4-h5', 'h4-h6']);
  assert.deepEqual(hlir.neighbours('h0').nodes, ['h2']);
  assert.deepEqual(hlir.neighbours('missing'), { nodes: [], edges: [] });
  // e-graph: membership counts only when asked
  const egraph = new StageGraph(parseEnvelope(stageOf('egraph')).envelope);
  assert.ok(!egraph.neighbours('function-30-Op').nodes.includes('IR-20'));
  assert.ok(egraph.neighbours('function-30-Op', true).nodes.includes('IR-20'));
  assert.ok(egraph.neighbours('IR-20', true).nodes.includes('function-30-Op'));
  assert.equal(egraph.members[egraph.index.get('IR-20')].length, 4);
});

test('details rows cover every field, compact JSON for non-strings', () => {
  const hlir = new StageGraph(parseEnvelope(stageOf('hlir')).envelope);
  assert.deepEqual(detailsOf(hlir.node('h0')), [
    ['id', 'h0'], ['op', 'Input'], ['label', 'Input a'], ['shape', '["4","8"]'], ['dtype', 'f32'],
    ['origin', 'null'], ['kind', 'input']
  ]);
  const enode = new StageGraph(parseEnvelope(stageOf('egraph')).envelope).node('function-30-Op');
  const rows = Object.fromEntries(detailsOf(enode));
  assert.equal(rows.subsumed, 'true');
  assert.equal(rows.ir, '{"names":["Sin"],"inputs":["IR-17"],"new":false}');
  assert.equal(rows.literals, '[]');
  assert.equal(Object.keys(rows).length, Object.keys(enode).length);
});

test('visual kinds', () => {
  const kinds = stage => { const g = new StageGraph(parseEnvelope(stageOf(stage)).envelope); return g.nodes.map(n => visualKind(stage, n)); };
  assert.deepEqual(kinds('hlir'), ['input', 'input', 'op', 'op', 'op', 'output', 'op', 'output']);
  assert.deepEqual(kinds('cuda'), ['fused', 'kernel']);
  assert.deepEqual(kinds('regions'), ['fused']);
  const llir = kinds('llir');
  assert.equal(llir[4], 'fused'); // k4 FusedAdd
  assert.equal(llir[9], 'kernel'); // k9 SumReduce
  assert.ok(kinds('egraph').every(k => k === 'eclass' || k === 'enode'));
});

test('counterparts and lines are read from the pipeline, every other stage listed in pipeline order', () => {
  const provenance = Provenance.of(parseEnvelope(pipeline).envelope);
  let checked = 0;
  for (const stage of pipeline.stages) {
    for (const node of stage.nodes) {
      const entry = table[stage.stage]?.[node.id] ?? {};
      const found = provenance.counterparts(stage.stage, node.id);
      assert.deepEqual(Object.keys(found), pipeline.stages.map(s => s.stage).filter(s => s !== stage.stage));
      for (const [other, ids] of Object.entries(found)) {
        assert.deepEqual(ids, entry.counterparts?.[other] ?? [], `${stage.stage} ${node.id} in ${other}`);
      }
      assert.deepEqual(provenance.lines(stage.stage, node.id), entry.lines ?? {});
      checked++;
    }
  }
  assert.equal(checked, pipeline.stages.reduce((n, s) => n + s.nodes.length, 0));
});

test('an HLIR node reaches its LLIR kernel, region and CUDA kernel and lines', () => {
  const provenance = Provenance.of(parseEnvelope(pipeline).envelope);
  const sin = provenance.counterparts('hlir', 'h3');
  assert.deepEqual(sin.llir, ['k5']);
  assert.deepEqual(sin.regions, ['r0']);
  assert.deepEqual(sin.cuda, ['cu7']);
  assert.ok(sin.egraph.includes('IR-20'));
  assert.deepEqual(Object.keys(sin), ['egraph', 'llir', 'regions', 'cuda']); // pipeline order, not itself
  assert.deepEqual(provenance.lines('hlir', 'h3'), { cu7: [11] });
  assert.deepEqual(provenance.lines('cuda', 'cu7'), { cu7: [8, 9, 10, 11, 12, 13] });
  assert.deepEqual(provenance.lines('llir', 'k9'), { cu9: [30] });
  assert.deepEqual(provenance.counterparts('cuda', 'cu9'), { hlir: ['h6'], egraph: table.cuda.cu9.counterparts.egraph, llir: ['k9'], regions: [] });
  assert.deepEqual(provenance.counterparts('hlir', 'h0').cuda, []);
  assert.throws(() => provenance.counterparts('hlir', 'h99'), /the hlir stage has no node "h99"/);
  assert.throws(() => provenance.counterparts('ptx', 'x'), /unknown stage "ptx"/);
});

test('an e-node stands for its e-class', () => {
  const provenance = Provenance.of(parseEnvelope(pipeline).envelope);
  const enode = provenance.counterparts('egraph', 'function-30-Op'); // Sin, in e-class IR-20
  assert.deepEqual(enode, provenance.counterparts('egraph', 'IR-20'));
  assert.ok(enode.hlir.includes('h3'));
  assert.deepEqual(enode.cuda, ['cu7']);
});

test('a pipeline without provenance links nothing', () => {
  const stage = (name, ids) => ({ stage: name, schema: 1, summary: '', nodes: ids.map(id => ({ id, label: id })), edges: [], links: {}, meta: {} });
  const provenance = new Provenance([stage('a', ['a0']), stage('b', ['b0'])]);
  assert.deepEqual(provenance.counterparts('a', 'a0'), { b: [] });
  assert.deepEqual(provenance.lines('a', 'a0'), {});
  assert.equal(provenance.has('b', 'b0'), true);
  assert.equal(provenance.has('b', 'a0'), false);
});

test('a tab counts the nodes its stage draws, by kind, and its badge the nodes linked to the selection', () => {
  assert.equal(drawnCount(tiny()), '3 nodes drawn');
  const egraph = stageOf('egraph');
  const classes = egraph.nodes.filter(n => n.kind === 'eclass').length;
  const enodes = egraph.nodes.filter(n => n.kind === 'enode').length;
  assert.ok(classes > 0 && enodes > 0);
  assert.equal(drawnCount(egraph), `${egraph.nodes.length} nodes drawn: ${classes} e-classes, ${enodes} e-nodes`);
  assert.equal(linkedCount(1, 'HLIR h5'), '1 node linked to the selected HLIR h5');
  assert.equal(linkedCount(12, 'HLIR h5'), '12 nodes linked to the selected HLIR h5');
});
