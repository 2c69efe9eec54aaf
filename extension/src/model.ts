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

/** cuda kernel id -> LLIR kernel id -> 1-based source lines. */
export type CudaLines = Record<string, Record<string, number[]>>;

export interface PipelineEnvelope {
  stage: 'pipeline';
  schema: number;
  summary: string;
  stages: StageEnvelope[];
  meta: Record<string, unknown> & { cuda_lines: CudaLines };
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

function checkCudaLines(meta: Record<string, unknown>): CudaLines {
  const value = meta.cuda_lines;
  if (value === undefined || value === null) {
    return {};
  }
  if (!isObject(value)) {
    fail('meta.cuda_lines is not an object');
  }
  const lines: CudaLines = {};
  for (const [kernel, byLlir] of Object.entries(value)) {
    if (!isObject(byLlir)) {
      fail(`meta.cuda_lines[${show(kernel)}] is not an object`);
    }
    lines[kernel] = {};
    for (const [llir, numbers] of Object.entries(byLlir)) {
      if (!Array.isArray(numbers) || !numbers.every(n => typeof n === 'number' && Number.isInteger(n) && n >= 1)) {
        fail(`meta.cuda_lines[${show(kernel)}][${show(llir)}] is not an array of line numbers`);
      }
      lines[kernel][llir] = numbers as number[];
    }
  }
  return lines;
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
  return { stage: 'pipeline', schema, summary, stages, meta: { ...meta, cuda_lines: checkCudaLines(meta) } };
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

const KINDS = new Set(['input', 'output', 'constant', 'kernel', 'fused', 'eclass', 'enode', 'op']);

/** The kind a node is drawn as: input, output, constant, kernel, fused, eclass, enode or op. */
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

// ---- a pipeline ------------------------------------------------------------------------------

/**
 * The cross-stage map of a pipeline, read from its stages' links (a port of
 * luminal_lab.compiler.provenance.Provenance): links are read both ways and followed transitively along
 * chains that visit each stage at most once; an e-node stands for its e-class.
 */
export class Provenance {
  readonly stages: string[];
  private readonly order = new Map<string, Map<string, number>>();
  private readonly eclassOf = new Map<string, string>();
  /** stage -> other stage -> id -> linked ids there */
  private readonly links = new Map<string, Map<string, Map<string, Set<string>>>>();
  readonly cudaLines: CudaLines;

  constructor(stages: StageEnvelope[], cudaLines: CudaLines = {}) {
    this.stages = stages.map(s => s.stage);
    this.cudaLines = cudaLines;
    for (const envelope of stages) {
      const order = new Map<string, number>();
      envelope.nodes.forEach((node, i) => order.set(node.id, i));
      this.order.set(envelope.stage, order);
      this.links.set(envelope.stage, new Map());
    }
    const egraph = stages.find(s => s.stage === 'egraph');
    for (const node of egraph ? egraph.nodes : []) {
      if (node.kind === 'enode' && typeof node.eclass === 'string') {
        this.eclassOf.set(node.id, node.eclass);
      }
    }
    const relation = (from: string, to: string): Map<string, Set<string>> => {
      const byTarget = this.links.get(from)!;
      let map = byTarget.get(to);
      if (!map) {
        map = new Map();
        byTarget.set(to, map);
      }
      return map;
    };
    const add = (map: Map<string, Set<string>>, key: string, value: string): void => {
      let set = map.get(key);
      if (!set) {
        set = new Set();
        map.set(key, set);
      }
      set.add(value);
    };
    for (const envelope of stages) {
      for (const [target, mapping] of Object.entries(envelope.links)) {
        if (!this.links.has(target) || target === envelope.stage) {
          continue;
        }
        const forward = relation(envelope.stage, target);
        const backward = relation(target, envelope.stage);
        for (const [sid, tids] of Object.entries(mapping)) {
          for (const tid of tids) {
            add(forward, sid, tid);
            add(backward, tid, sid);
          }
        }
      }
    }
  }

  static of(pipeline: PipelineEnvelope): Provenance {
    return new Provenance(pipeline.stages, pipeline.meta.cuda_lines);
  }

  /** Whether `stage` has a node `id`. */
  has(stage: string, id: string): boolean {
    const order = this.order.get(stage);
    return order !== undefined && order.has(id);
  }

  /**
   * For each other stage (pipeline order), the ids corresponding to `id` of `stage`, in that stage's
   * node order (empty when none). Throws for an unknown stage or id.
   */
  counterparts(stage: string, id: string): Record<string, string[]> {
    const order = this.order.get(stage);
    if (!order) {
      throw new Error(`unknown stage "${stage}"; the stages are ${this.stages.join(', ')}`);
    }
    if (!order.has(id)) {
      throw new Error(`the ${stage} stage has no node "${id}"`);
    }
    const found = new Map<string, Set<string>>();
    for (const name of this.stages) {
      if (name !== stage) {
        found.set(name, new Set());
      }
    }
    const walk = (at: string, ids: Set<string>, seen: Set<string>): void => {
      for (const [target, relation] of this.links.get(at)!) {
        if (seen.has(target)) {
          continue;
        }
        const reached = new Set<string>();
        for (const i of ids) {
          const linked = relation.get(i);
          if (linked) {
            linked.forEach(l => reached.add(l));
          }
        }
        if (reached.size > 0) {
          reached.forEach(r => found.get(target)!.add(r));
          walk(target, reached, new Set([...seen, target]));
        }
      }
    };
    const start = stage === 'egraph' ? this.eclassOf.get(id) ?? id : id;
    walk(stage, new Set([start]), new Set([stage]));
    const result: Record<string, string[]> = {};
    for (const [name, ids] of found) {
      result[name] = this.ordered(name, ids);
    }
    return result;
  }

  /**
   * CUDA kernel id -> the sorted 1-based source lines computing the LLIR kernels that correspond to
   * `id` of `stage` (for a CUDA kernel itself: every LLIR kernel it implements); kernels with no such
   * line are left out. `found` is `counterparts(stage, id)` when already known.
   */
  lines(stage: string, id: string, found?: Record<string, string[]>): Record<string, number[]> {
    found = found ?? this.counterparts(stage, id);
    const kernels = stage === 'cuda' ? [id] : found.cuda ?? [];
    const llir = new Set([...(found.llir ?? []), ...(stage === 'llir' ? [id] : [])]);
    const result: Record<string, number[]> = {};
    for (const kernel of kernels) {
      const byLlir = Object.prototype.hasOwnProperty.call(this.cudaLines, kernel) ? this.cudaLines[kernel] : {};
      const numbers = new Set<number>();
      for (const k of llir) {
        if (Object.prototype.hasOwnProperty.call(byLlir, k)) {
          byLlir[k].forEach(n => numbers.add(n));
        }
      }
      if (numbers.size > 0) {
        result[kernel] = [...numbers].sort((a, b) => a - b);
      }
    }
    return result;
  }

  private ordered(stage: string, ids: Set<string>): string[] {
    const order = this.order.get(stage)!;
    const size = order.size;
    return [...ids].sort((a, b) => {
      const d = (order.get(a) ?? size) - (order.get(b) ?? size);
      return d !== 0 ? d : a < b ? -1 : a > b ? 1 : 0;
    });
  }
}
