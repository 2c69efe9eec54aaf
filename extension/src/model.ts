/**
 * The stage envelope (`application/vnd.luminal-lab.stage+json`): parsing, validation and the
 * queries the view needs (neighbours, search, details, provenance across a pipeline).
 *
 * Pure: no DOM and no Lumino, so the node:test suite imports it from lib/.
 */

export const MIME_TYPE = 'application/vnd.luminal-lab.stage+json';
/** The newest envelope schema this renderer reads (luminal_lab.core.stage.SCHEMA_VERSION). */
export const SCHEMA_VERSION = 1;
/** Pipeline order of the stages luminal_lab knows, and their titles (luminal_lab.compiler.provenance.TITLES). */
export const STAGE_ORDER = ['hlir', 'egraph', 'llir', 'regions', 'cuda'];
export const TITLES: Record<string, string> = {
  hlir: 'HLIR',
  egraph: 'E-graph',
  llir: 'LLIR',
  regions: 'Regions',
  cuda: 'CUDA'
};

export function stageTitle(stage: string): string {
  return Object.prototype.hasOwnProperty.call(TITLES, stage) ? TITLES[stage] : stage;
}

/** What the nodes of each kind are, counted (an e-graph stage draws its e-classes and their e-nodes). */
const KIND_NAMES: Record<string, string> = { eclass: 'e-classes', enode: 'e-nodes' };

/**
 * What a pipeline tab's number counts, in words: the nodes its stage draws, by kind where it has several
 * ("121 nodes drawn: 15 e-classes, 106 e-nodes"). The linked count beside it has one meaning too
 * (`linkedCount`).
 */
export function drawnCount(stage: StageEnvelope): string {
  const kinds = new Map<string, number>();
  for (const node of stage.nodes) {
    const kind = typeof node.kind === 'string' ? node.kind : '';
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  const parts = [...kinds].filter(([kind]) => kind).map(([kind, n]) => `${n} ${KIND_NAMES[kind] ?? kind}`);
  const total = `${stage.nodes.length} node${stage.nodes.length === 1 ? '' : 's'} drawn`;
  return parts.length > 1 ? `${total}: ${parts.join(', ')}` : total;
}

/** What a tab's badge counts, in words: the stage's nodes linked to the selected node by provenance. */
export function linkedCount(n: number, selected: string): string {
  return `${n} node${n === 1 ? '' : 's'} linked to the selected ${selected}`;
}

export interface StageNode {
  id: string;
  label: string;
  kind?: string;
  [field: string]: unknown;
}

export interface StageEdge {
  source: string;
  target: string;
  [field: string]: unknown;
}

/** stage name -> id of this stage -> ids there. */
export type Links = Record<string, Record<string, string[]>>;

export interface StageEnvelope {
  stage: string;
  schema: number;
  summary: string;
  nodes: StageNode[];
  edges: StageEdge[];
  links: Links;
  meta: Record<string, unknown>;
}

/** What a node of a pipeline links to: ids in other stages, and CUDA kernel id -> 1-based source lines. */
export interface Counterparts {
  counterparts?: Record<string, string[]>;
  lines?: Record<string, number[]>;
}

/** stage -> node id -> its counterparts (nodes with none left out): `luminal_lab.compiler.provenance.Provenance.table`. */
export type ProvenanceTable = Record<string, Record<string, Counterparts>>;

export interface PipelineEnvelope {
  stage: 'pipeline';
  schema: number;
  summary: string;
  stages: StageEnvelope[];
  meta: Record<string, unknown> & { provenance: ProvenanceTable };
}

export type Envelope = StageEnvelope | PipelineEnvelope;

export type ParseResult = { ok: true; envelope: Envelope } | { ok: false; error: string };

export function isPipeline(envelope: Envelope): envelope is PipelineEnvelope {
  return envelope.stage === 'pipeline';
}

// ---- validation ------------------------------------------------------------------------------

class EnvelopeError extends Error {}

function fail(message: string): never {
  throw new EnvelopeError(message);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const has = (object: object, key: string): boolean => Object.prototype.hasOwnProperty.call(object, key);

/** A short JSON rendering of a value for error messages. */
function show(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 40 ? text.slice(0, 39) + '…' : text;
}

function checkSchema(value: Record<string, unknown>, where: string): number {
  const schema = value.schema;
  if (typeof schema !== 'number' || !Number.isInteger(schema)) {
    fail(`${where}has no integer "schema"`);
  }
  if (schema > SCHEMA_VERSION) {
    fail(`${where}schema ${schema} is newer than this renderer (${SCHEMA_VERSION})`);
  }
  if (schema < 1) {
    fail(`${where}schema ${schema} is not a valid version`);
  }
  return schema;
}

function checkSummary(value: Record<string, unknown>, where: string): string {
  if (!has(value, 'summary') || value.summary === null) {
    return '';
  }
  if (typeof value.summary !== 'string') {
    fail(`${where}"summary" is not a string`);
  }
  return value.summary;
}

function checkMeta(value: Record<string, unknown>, where: string): Record<string, unknown> {
  if (!has(value, 'meta') || value.meta === null) {
    return {};
  }
  if (!isObject(value.meta)) {
    fail(`${where}"meta" is not an object`);
  }
  return value.meta;
}

/** Validate one stage envelope; `where` prefixes messages (e.g. `stages[2] (llir): `). */
function checkStage(value: unknown, where: string): StageEnvelope {
  if (!isObject(value)) {
    fail(`${where}the envelope is not a JSON object`);
  }
  if (typeof value.stage !== 'string' || value.stage === '') {
    fail(`${where}the envelope has no string "stage"`);
  }
  const schema = checkSchema(value, where);
  const summary = checkSummary(value, where);
  if (!Array.isArray(value.nodes)) {
    fail(`${where}the envelope has no array "nodes"`);
  }
  const nodes: StageNode[] = [];
  const ids = new Set<string>();
  value.nodes.forEach((node: unknown, i: number) => {
    if (!isObject(node)) {
      fail(`${where}nodes[${i}] is not an object`);
    }
    if (typeof node.id !== 'string' || node.id === '') {
      fail(`${where}nodes[${i}] has no string "id"`);
    }
    if (ids.has(node.id)) {
      fail(`${where}nodes[${i}].id ${show(node.id)} is not unique`);
    }
    ids.add(node.id);
    if (has(node, 'label') && node.label !== null && typeof node.label !== 'string') {
      fail(`${where}nodes[${i}].label is not a string`);
    }
    if (has(node, 'kind') && node.kind !== null && typeof node.kind !== 'string') {
      fail(`${where}nodes[${i}].kind is not a string`);
    }
    const label = typeof node.label === 'string' ? node.label : node.id;
    nodes.push({ ...node, id: node.id, label } as StageNode);
  });
  const edgesValue = has(value, 'edges') && value.edges !== null ? value.edges : [];
  if (!Array.isArray(edgesValue)) {
    fail(`${where}"edges" is not an array`);
  }
  const edges: StageEdge[] = [];
  edgesValue.forEach((edge: unknown, i: number) => {
    if (!isObject(edge)) {
      fail(`${where}edges[${i}] is not an object`);
    }
    for (const end of ['source', 'target']) {
      const id = edge[end];
      if (typeof id !== 'string') {
        fail(`${where}edges[${i}] has no string "${end}"`);
      }
      if (!ids.has(id)) {
        fail(`${where}edges[${i}].${end} ${show(id)} is not a node`);
      }
    }
    edges.push(edge as StageEdge);
  });
  const links: Links = {};
  if (has(value, 'links') && value.links !== null) {
    if (!isObject(value.links)) {
      fail(`${where}"links" is not an object`);
    }
    for (const [other, mapping] of Object.entries(value.links)) {
      if (!isObject(mapping)) {
        fail(`${where}links.${other} is not an object`);
      }
      const checked: Record<string, string[]> = {};
      for (const [id, targets] of Object.entries(mapping)) {
        if (!Array.isArray(targets) || !targets.every(t => typeof t === 'string')) {
          fail(`${where}links.${other}[${show(id)}] is not an array of strings`);
        }
        checked[id] = targets as string[];
      }
      links[other] = checked;
    }
  }
  const meta = checkMeta(value, where);
  return { stage: value.stage, schema, summary, nodes, edges, links, meta };
}

/** `meta.provenance` of a pipeline: stage -> id -> {counterparts: stage -> ids, lines: kernel -> line numbers}. */
function checkProvenance(meta: Record<string, unknown>): ProvenanceTable {
  const value = meta.provenance ?? {};
  const map = <T>(value: unknown, where: string, item: (value: unknown, where: string) => T): Record<string, T> => {
    if (!isObject(value)) {
      fail(`${where} is not an object`);
    }
    return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, item(v, `${where}[${show(key)}]`)]));
  };
  const list = <T>(test: (v: unknown) => boolean, what: string) => (value: unknown, where: string): T[] =>
    Array.isArray(value) && value.every(test) ? (value as T[]) : fail(`${where} is not an array of ${what}`);
  const ids = list<string>(v => typeof v === 'string', 'strings');
  const lines = list<number>(v => typeof v === 'number' && Number.isInteger(v) && v >= 1, 'line numbers');
  return map(value, 'meta.provenance', (stage, at) => map(stage, at, (node, where) => {
    if (!isObject(node)) {
      fail(`${where} is not an object`);
    }
    return { counterparts: map(node.counterparts ?? {}, `${where}.counterparts`, ids), lines: map(node.lines ?? {}, `${where}.lines`, lines) };
  }));
}

function checkPipeline(value: Record<string, unknown>): PipelineEnvelope {
  const schema = checkSchema(value, 'pipeline: ');
  const summary = checkSummary(value, 'pipeline: ');
  if (!Array.isArray(value.stages)) {
    fail('pipeline: the envelope has no array "stages"');
  }
  const names = new Set<string>();
  const stages = value.stages.map((stage: unknown, i: number) => {
    const name = isObject(stage) && typeof stage.stage === 'string' ? ` (${stage.stage})` : '';
    const checked = checkStage(stage, `stages[${i}]${name}: `);
    if (checked.stage === 'pipeline') {
      fail(`stages[${i}]: a pipeline cannot hold a pipeline`);
    }
    if (names.has(checked.stage)) {
      fail(`stages[${i}]: stage "${checked.stage}" appears twice`);
    }
    names.add(checked.stage);
    return checked;
  });
  const meta = checkMeta(value, 'pipeline: ');
  return { stage: 'pipeline', schema, summary, stages, meta: { ...meta, provenance: checkProvenance(meta) } };
}

/** Parse and validate an envelope (a stage or a pipeline); the error names what is wrong and where. */
export function parseEnvelope(value: unknown): ParseResult {
  try {
    if (typeof value === 'string') {
      try {
        value = JSON.parse(value);
      } catch (error) {
        fail(`the envelope is not valid JSON: ${(error as Error).message}`);
      }
    }
    if (isObject(value) && value.stage === 'pipeline') {
      return { ok: true, envelope: checkPipeline(value) };
    }
    return { ok: true, envelope: checkStage(value, '') };
  } catch (error) {
    if (error instanceof EnvelopeError) {
      return { ok: false, error: error.message };
    }
    return { ok: false, error: `the envelope could not be read: ${String(error)}` };
  }
}

// ---- one stage -------------------------------------------------------------------------------

/** Compact text for a field value: strings as they are, everything else as compact JSON. */
export function fieldText(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  if (value === undefined) {
    return 'undefined';
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** [key, text] for every field of a node (or edge), in the node's own order. */
export function detailsOf(node: Record<string, unknown>): [string, string][] {
  return Object.keys(node).map(key => [key, fieldText(node[key])] as [string, string]);
}

const KINDS = new Set(['input', 'output', 'constant', 'kernel', 'fused', 'eclass', 'enode', 'op', 'group']);

/** The kind a node is drawn as: input, output, constant, kernel, fused, eclass, enode, op or group (a folded group). */
export function visualKind(stage: string, node: StageNode): string {
  const op = typeof node.op === 'string' ? node.op : '';
  if (node.kind === 'eclass' || node.kind === 'enode' || node.kind === 'input' || node.kind === 'output') {
    return node.kind;
  }
  if (node.kind === 'constant' || op === 'Constant') {
    return 'constant';
  }
  if (node.fused === true || stage === 'regions' || /^Fus(ed|ion)/.test(op)) {
    return 'fused';
  }
  if (stage === 'llir' || stage === 'cuda') {
    return 'kernel';
  }
  return typeof node.kind === 'string' && KINDS.has(node.kind) ? node.kind : 'op';
}

/** Index and adjacency of one validated stage envelope. */
export class StageGraph {
  readonly envelope: StageEnvelope;
  readonly stage: string;
  readonly nodes: StageNode[];
  readonly edges: StageEdge[];
  /** node id -> its index in `nodes` */
  readonly index: Map<string, number>;
  /** for each node index: indices of edges leaving / entering it */
  readonly outEdges: number[][];
  readonly inEdges: number[][];
  /** e-graph: e-node index -> index of its e-class (-1 when none), and e-class index -> its e-node indices */
  readonly eclassOf: Int32Array;
  readonly members: number[][];
  private searchText: string[] | null = null;

  constructor(envelope: StageEnvelope) {
    this.envelope = envelope;
    this.stage = envelope.stage;
    this.nodes = envelope.nodes;
    this.edges = envelope.edges;
    const n = this.nodes.length;
    this.index = new Map();
    this.nodes.forEach((node, i) => this.index.set(node.id, i));
    this.outEdges = Array.from({ length: n }, () => []);
    this.inEdges = Array.from({ length: n }, () => []);
    this.edges.forEach((edge, e) => {
      this.outEdges[this.index.get(edge.source)!].push(e);
      this.inEdges[this.index.get(edge.target)!].push(e);
    });
    this.eclassOf = new Int32Array(n).fill(-1);
    this.members = Array.from({ length: n }, () => []);
    this.nodes.forEach((node, i) => {
      if (node.kind === 'enode' && typeof node.eclass === 'string') {
        const c = this.index.get(node.eclass);
        if (c !== undefined && c !== i) {
          this.eclassOf[i] = c;
          this.members[c].push(i);
        }
      }
    });
  }

  get size(): number {
    return this.nodes.length;
  }

  node(id: string): StageNode | undefined {
    const i = this.index.get(id);
    return i === undefined ? undefined : this.nodes[i];
  }

  /** Ids of the nodes with an edge into `id` (in node order, each once). */
  predecessors(id: string): string[] {
    const i = this.index.get(id);
    if (i === undefined) {
      return [];
    }
    return this.inOrder(this.inEdges[i].map(e => this.index.get(this.edges[e].source)!));
  }

  /** Ids of the nodes `id` has an edge to (in node order, each once). */
  successors(id: string): string[] {
    const i = this.index.get(id);
    if (i === undefined) {
      return [];
    }
    return this.inOrder(this.outEdges[i].map(e => this.index.get(this.edges[e].target)!));
  }

  /**
   * The in and out neighbours of `id` (node order, without `id` itself unless it has a self-loop) and the
   * indices of the edges joining them to it. With `membership`, an e-node's e-class and an e-class's e-nodes
   * count too (their joining edges are not in `edges`).
   */
  neighbours(id: string, membership = false): { nodes: string[]; edges: number[] } {
    const i = this.index.get(id);
    if (i === undefined) {
      return { nodes: [], edges: [] };
    }
    const found: number[] = [];
    const edges = [...this.inEdges[i], ...this.outEdges[i]].sort((a, b) => a - b);
    for (const e of edges) {
      const edge = this.edges[e];
      found.push(this.index.get(edge.source === id ? edge.target : edge.source)!);
    }
    if (membership) {
      if (this.eclassOf[i] >= 0) {
        found.push(this.eclassOf[i]);
      }
      found.push(...this.members[i]);
    }
    return { nodes: this.inOrder(found), edges };
  }

  private inOrder(indices: number[]): string[] {
    return [...new Set(indices)].sort((a, b) => a - b).map(i => this.nodes[i].id);
  }

  /**
   * Ids (in node order) of the nodes whose id, label, op, kind or any other string field contains
   * `query`, case-insensitively; nothing for an empty query.
   */
  search(query: string): string[] {
    const q = query.trim().toLowerCase();
    if (q === '') {
      return [];
    }
    if (this.searchText === null) {
      this.searchText = this.nodes.map(node => {
        const parts: string[] = [];
        for (const key of Object.keys(node)) {
          const value = node[key];
          if (typeof value === 'string') {
            parts.push(value.toLowerCase());
          }
        }
        return parts.join('\u0000');
      });
    }
    const found: string[] = [];
    this.searchText.forEach((text, i) => {
      if (text.includes(q)) {
        found.push(this.nodes[i].id);
      }
    });
    return found;
  }
}

// ---- e-graph levels --------------------------------------------------------------------------

/** What an e-graph stage draws: its IR e-classes (the SVG picture's level, the default) or every e-class. */
export type Level = 'ir' | 'all';
export const LEVELS: Level[] = ['ir', 'all'];

const isIrClass = (node: StageNode): boolean => node.kind === 'eclass' && node.sort === 'IR';

/** Whether `envelope` is an e-graph with IR e-classes, so it can be drawn at the IR level. */
export function hasIrLevel(envelope: StageEnvelope): boolean {
  return envelope.stage === 'egraph' && envelope.nodes.some(isIrClass);
}

/**
 * The IR level of an e-graph envelope: its IR e-classes and their e-nodes (in envelope order); an edge
 * (`id` `${enode}>${eclass}`, `input` its first operand position) from each e-node to each distinct IR e-class of
 * its `ir.inputs`, in operand order (the Expression, EList, IList, OpKind... e-classes between them are left out);
 * then the envelope's edges joining two kept nodes that are not joined already.
 */
export function irLevel(envelope: StageEnvelope): StageEnvelope {
  const classes = new Set(envelope.nodes.filter(isIrClass).map(node => node.id));
  const nodes = envelope.nodes.filter(
    node => classes.has(node.id) || (node.kind === 'enode' && typeof node.eclass === 'string' && classes.has(node.eclass))
  );
  const kept = new Set(nodes.map(node => node.id));
  const edges: StageEdge[] = [];
  const joined = new Set<string>();
  for (const node of nodes) {
    const inputs = isObject(node.ir) && Array.isArray(node.ir.inputs) ? node.ir.inputs : [];
    inputs.forEach((input: unknown, k: number) => {
      const id = `${node.id}>${String(input)}`;
      if (typeof input === 'string' && classes.has(input) && !joined.has(id)) {
        joined.add(id);
        edges.push({ id, source: node.id, target: input, input: k });
      }
    });
  }
  for (const edge of envelope.edges) {
    if (kept.has(edge.source) && kept.has(edge.target) && !joined.has(`${edge.source}>${edge.target}`)) {
      edges.push(edge);
    }
  }
  return { ...envelope, nodes, edges };
}

// ---- focus and folding ----------------------------------------------------------------------

/**
 * Indices (ascending) of the nodes at most `depth` steps from node `start`, along edges either way and, in
 * an e-graph, e-class membership (an e-node's e-class and an e-class's e-nodes are one step apart).
 */
export function kHop(graph: StageGraph, start: number, depth: number): number[] {
  if (start < 0 || start >= graph.size) {
    return [];
  }
  const seen = new Uint8Array(graph.size);
  seen[start] = 1;
  let frontier = [start];
  const visit = (v: number, next: number[]): void => {
    if (!seen[v]) {
      seen[v] = 1;
      next.push(v);
    }
  };
  for (let step = 0; step < depth && frontier.length; step++) {
    const next: number[] = [];
    for (const u of frontier) {
      for (const e of graph.outEdges[u]) {
        visit(graph.index.get(graph.edges[e].target)!, next);
      }
      for (const e of graph.inEdges[u]) {
        visit(graph.index.get(graph.edges[e].source)!, next);
      }
      if (graph.eclassOf[u] >= 0) {
        visit(graph.eclassOf[u], next);
      }
      for (const v of graph.members[u]) {
        visit(v, next);
      }
    }
    frontier = next;
  }
  const found: number[] = [];
  seen.forEach((s, i) => s && found.push(i));
  return found;
}

/** How a stage's nodes are folded: not at all, by the rolled layer (LLIR: by copy), or by HLIR node. */
export type FoldMode = 'none' | 'layer' | 'hlir';
export const FOLD_MODES: FoldMode[] = ['none', 'layer', 'hlir'];

/** Below this zoom the labels are hidden (level of detail; view.ts). */
export const LABEL_MIN_SCALE = 0.4;

/**
 * The fold an e-graph opens with: the most detailed view that reads at fit. `fitScale` is the scale at which its
 * IR level, unfolded, fits the graph area; below `minScale` (labels hidden) it opens folded by HLIR node, when it
 * has HLIR groups (`hlirGroups`), else unfolded all the same.
 */
export function openingFold(fitScale: number, hlirGroups: number, minScale = LABEL_MIN_SCALE): FoldMode {
  return fitScale >= minScale || hlirGroups === 0 ? 'none' : 'hlir';
}

export interface Group {
  /** names the group (`layer`, `copy 3`, `h5`); unique within a grouping */
  key: string;
  /** e.g. `layer ×8 · 57 nodes`, `copy 3 · 40 kernels`, `h5 · 14 e-classes` */
  label: string;
  /** node indices, ascending */
  members: number[];
}

export interface Grouping {
  groups: Group[];
  /** node index -> index of its group in `groups`, -1 when in none */
  groupOf: Int32Array;
}

/** `a` before `b` in HLIR order (`h2` < `h10`); ids that are not `h<number>` after those, as strings. */
export function compareHlirIds(a: string, b: string): number {
  const ma = /^h(\d+)$/.exec(a);
  const mb = /^h(\d+)$/.exec(b);
  if (ma && mb) {
    return Number(ma[1]) - Number(mb[1]) || (a < b ? -1 : a > b ? 1 : 0);
  }
  if (ma || mb) {
    return ma ? -1 : 1;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The HLIR ids of node `i`: its `links.hlir` entry, else its own `hlir` field (an e-node: its e-class's). */
export function hlirOf(graph: StageGraph, i: number): string[] {
  const c = graph.eclassOf[i];
  const node = graph.nodes[c >= 0 ? c : i];
  const links = graph.envelope.links.hlir;
  if (links && has(links, node.id)) {
    return links[node.id];
  }
  const field = node.hlir;
  return Array.isArray(field) ? field.filter((h): h is string => typeof h === 'string') : [];
}

function countNoun(stage: string, graph: StageGraph, members: number[]): string {
  if (stage === 'egraph') {
    const n = members.filter(i => graph.nodes[i].kind === 'eclass').length;
    return `${n} ${n === 1 ? 'e-class' : 'e-classes'}`;
  }
  const n = members.length;
  if (stage === 'llir' || stage === 'cuda') {
    return `${n} ${n === 1 ? 'kernel' : 'kernels'}`;
  }
  return `${n} ${n === 1 ? 'node' : 'nodes'}`;
}

/**
 * The groups of `mode` (none for `none`); a group has at least two nodes, and an e-node is always in its
 * e-class's group. By layer: the nodes marked `layer: true` (an e-graph: its e-classes so marked), or in an
 * LLIR each value of `copy`. By HLIR node: in an e-graph each e-class's `group` (computed in Python, as the SVG
 * picture's ``fold="hlir"`` draws it), elsewhere the nodes whose first HLIR id (`hlirOf`, in HLIR order) is the same.
 */
export function groupNodes(graph: StageGraph, mode: FoldMode): Grouping {
  const n = graph.size;
  const keyOf: (string | null)[] = new Array(n).fill(null);
  let copies: unknown = null;
  const layer = graph.envelope.meta.layer;
  if (layer && typeof layer === 'object' && typeof (layer as Record<string, unknown>).copies === 'number') {
    copies = (layer as Record<string, unknown>).copies;
  }
  for (let i = 0; i < n; i++) {
    const c = graph.eclassOf[i];
    const node = graph.nodes[c >= 0 ? c : i];
    if (mode === 'layer') {
      if (typeof node.copy === 'number' && Number.isInteger(node.copy)) {
        keyOf[i] = `copy ${node.copy}`;
      } else if (node.layer === true) {
        keyOf[i] = 'layer';
      }
    } else if (mode === 'hlir' && graph.stage === 'egraph') {
      keyOf[i] = typeof node.group === 'string' ? node.group : null;
    } else if (mode === 'hlir') {
      const ids = hlirOf(graph, i);
      if (ids.length) {
        keyOf[i] = ids.reduce((a, b) => (compareHlirIds(b, a) < 0 ? b : a));
      }
    }
  }
  const byKey = new Map<string, number[]>();
  keyOf.forEach((key, i) => {
    if (key !== null) {
      let members = byKey.get(key);
      if (!members) {
        members = [];
        byKey.set(key, members);
      }
      members.push(i);
    }
  });
  const groups: Group[] = [];
  const groupOf = new Int32Array(n).fill(-1);
  for (const [key, members] of byKey) {
    if (members.length < 2) {
      continue;
    }
    const name = key === 'layer' && copies !== null ? `layer ×${copies}` : key;
    members.forEach(i => (groupOf[i] = groups.length));
    groups.push({ key, label: `${name} · ${countNoun(graph.stage, graph, members)}`, members });
  }
  return { groups, groupOf };
}

/** What a stage view draws: its nodes with groups folded and, when focused, only a neighbourhood. */
export interface Scene {
  /** the drawn graph: the stage's own node and edge objects, and one node (`kind: "group"`) per folded group */
  graph: StageGraph;
  /** drawn node -> the stage's node index, -1 for a folded group */
  node: Int32Array;
  /** drawn node -> the index of its folded group in the grouping, -1 for a node */
  group: Int32Array;
  /** the stage's node index -> the drawn node showing it (itself or its folded group), -1 when not drawn */
  at: Int32Array;
  /** drawn edge -> the stage's edge index, -1 for a merged edge (to or from a folded group) */
  edge: Int32Array;
}

export interface SceneOptions {
  /** the groups to fold (null: none) */
  grouping?: Grouping | null;
  /** keys of groups drawn expanded, node by node */
  expanded?: ReadonlySet<string>;
  /** show only what is within `depth` steps of node index `node` (or of its folded group) */
  focus?: { node: number; depth: number } | null;
}

/**
 * The scene of `graph`: each folded group drawn as one node where its first member was, the edges to and from
 * it merged (one per other end and direction, `merged` counting the stage's edges it stands for; edges inside
 * the group dropped); then, with `focus`, the part of that within `depth` steps of the focused node.
 */
export function makeScene(graph: StageGraph, options: SceneOptions = {}): Scene {
  const n = graph.size;
  const grouping = options.grouping ?? null;
  const expanded = options.expanded ?? new Set<string>();
  const focus = options.focus;
  const focused = focus && focus.node >= 0 && focus.node < n;
  if (!focused && (!grouping || grouping.groups.every(group => expanded.has(group.key)))) {
    const identity = Int32Array.from({ length: n }, (_, i) => i);
    return { graph, node: identity, group: new Int32Array(n).fill(-1), at: identity, edge: Int32Array.from(graph.edges, (_, e) => e) };
  }
  const folded = (i: number): number => {
    const g = grouping ? grouping.groupOf[i] : -1;
    return g >= 0 && !expanded.has(grouping!.groups[g].key) ? g : -1;
  };
  // the folded graph: vertex per node or folded group, in node order (a group where its first member is)
  const nodes: StageNode[] = [];
  const vNode: number[] = [];
  const vGroup: number[] = [];
  const at = new Int32Array(n).fill(-1);
  const groupVertex = new Map<number, number>();
  const taken = new Set(graph.index.keys());
  for (let i = 0; i < n; i++) {
    const g = folded(i);
    if (g < 0) {
      at[i] = nodes.length;
      nodes.push(graph.nodes[i]);
      vNode.push(i);
      vGroup.push(-1);
    } else if (groupVertex.has(g)) {
      at[i] = groupVertex.get(g)!;
    } else {
      const group = grouping!.groups[g];
      let id = `group:${group.key}`;
      while (taken.has(id)) {
        id += "'";
      }
      taken.add(id);
      groupVertex.set(g, nodes.length);
      at[i] = nodes.length;
      nodes.push({ id, label: group.label, kind: 'group', group: group.key, size: group.members.length });
      vNode.push(-1);
      vGroup.push(g);
    }
  }
  const edges: StageEdge[] = [];
  const edgeIndex: number[] = [];
  const merged = new Map<string, StageEdge>();
  graph.edges.forEach((edge, e) => {
    const a = at[graph.index.get(edge.source)!];
    const b = at[graph.index.get(edge.target)!];
    if (vGroup[a] < 0 && vGroup[b] < 0) {
      edges.push(edge);
      edgeIndex.push(e);
      return;
    }
    if (a === b) {
      return;
    }
    const key = `${a} ${b}`;
    const known = merged.get(key);
    if (known) {
      (known.merged as number)++;
      return;
    }
    const joined: StageEdge = { id: `merged:${nodes[a].id}>${nodes[b].id}`, source: nodes[a].id, target: nodes[b].id, merged: 1, first: e };
    merged.set(key, joined);
    edges.push(joined);
    edgeIndex.push(-1);
  });
  const envelope: StageEnvelope = { ...graph.envelope, nodes, edges };
  let scene: Scene = {
    graph: new StageGraph(envelope),
    node: Int32Array.from(vNode),
    group: Int32Array.from(vGroup),
    at,
    edge: Int32Array.from(edgeIndex)
  };
  if (focus && focused) {
    scene = subScene(scene, kHop(scene.graph, at[focus.node], Math.max(0, focus.depth)));
  }
  return scene;
}

/** The part of `scene` made of its drawn nodes `keep` (ascending) and the edges between them. */
function subScene(scene: Scene, keep: number[]): Scene {
  const where = new Int32Array(scene.graph.size).fill(-1);
  keep.forEach((v, k) => (where[v] = k));
  const graph = scene.graph;
  const nodes = keep.map(v => graph.nodes[v]);
  const edges: StageEdge[] = [];
  const edgeIndex: number[] = [];
  graph.edges.forEach((edge, e) => {
    if (where[graph.index.get(edge.source)!] >= 0 && where[graph.index.get(edge.target)!] >= 0) {
      edges.push(edge);
      edgeIndex.push(scene.edge[e]);
    }
  });
  return {
    graph: new StageGraph({ ...graph.envelope, nodes, edges }),
    node: Int32Array.from(keep, v => scene.node[v]),
    group: Int32Array.from(keep, v => scene.group[v]),
    at: scene.at.map(v => (v >= 0 ? where[v] : -1)),
    edge: Int32Array.from(edgeIndex)
  };
}

// ---- a pipeline ------------------------------------------------------------------------------

/**
 * The cross-stage map of a pipeline, as its envelope's `meta.provenance` gives it
 * (`luminal_lab.compiler.provenance.Provenance`, which follows the stages' links; an e-node stands for its e-class).
 */
export class Provenance {
  readonly stages: string[];
  private readonly ids = new Map<string, Set<string>>();

  constructor(stages: StageEnvelope[], private readonly table: ProvenanceTable = {}) {
    this.stages = stages.map(s => s.stage);
    stages.forEach(envelope => this.ids.set(envelope.stage, new Set(envelope.nodes.map(node => node.id))));
  }

  static of(pipeline: PipelineEnvelope): Provenance {
    return new Provenance(pipeline.stages, pipeline.meta.provenance);
  }

  /** Whether `stage` has a node `id`. */
  has(stage: string, id: string): boolean {
    return this.ids.get(stage)?.has(id) ?? false;
  }

  /**
   * For each other stage (pipeline order), the ids corresponding to `id` of `stage`, in that stage's
   * node order (empty when none). Throws for an unknown stage or id.
   */
  counterparts(stage: string, id: string): Record<string, string[]> {
    const found = this.entry(stage, id).counterparts ?? {};
    return Object.fromEntries(this.stages.filter(s => s !== stage).map(s => [s, has(found, s) ? found[s] : []]));
  }

  /** CUDA kernel id -> the sorted 1-based source lines computing what corresponds to `id` of `stage`. */
  lines(stage: string, id: string): Record<string, number[]> {
    return this.entry(stage, id).lines ?? {};
  }

  private entry(stage: string, id: string): Counterparts {
    const ids = this.ids.get(stage);
    if (!ids) {
      throw new Error(`unknown stage "${stage}"; the stages are ${this.stages.join(', ')}`);
    }
    if (!ids.has(id)) {
      throw new Error(`the ${stage} stage has no node "${id}"`);
    }
    const byId = has(this.table, stage) ? this.table[stage] : {};
    return has(byId, id) ? byId[id] : {};
  }
}
