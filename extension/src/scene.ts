/**
 * The drawing of a stage's `Scene` (model.ts) from its layout, in SVG: `svg.lx-graph > g.lx-viewport` holding
 * `g.lx-boxes` (the e-classes' boxes, under everything), the edges, then the nodes (the DOM contract in the
 * README). Drawn elements are indexed by scene index. Text from the JSON reaches the DOM only as textContent, as
 * the value of a fixed attribute name, or in dataset.
 */

import { Scene, visualKind } from './model.js';
import { BOX_TITLE, edgePath, holdsInner, labelText, Layout } from './layout.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element with a class. */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, className?: string): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  if (className) {
    element.setAttribute('class', className);
  }
  return element;
}

/** `v` to two decimals, for attributes. */
export function round(v: number): string {
  return (Math.round(v * 100) / 100).toString();
}

/** How a drawn node or edge is marked by the view's state (selection, matches, hover...). */
export interface Marks {
  /** set the state classes of scene node `i`, drawn as `g` */
  node(i: number, g: SVGGElement): void;
  /** whether scene edge `e` is drawn `.lx-neighbour` */
  neighbourEdge(e: number): boolean;
}

/**
 * The SVG of one scene, drawn a slice at a time (`drawSome`). A scene drawn over another (`begin` with
 * `offscreen`) goes into a fragment that replaces the old drawing when complete (`commit`): the old one stays on
 * screen meanwhile (`svg.lx-busy`, not clickable), and the browser does not render a growing drawing.
 */
export class SceneDrawing {
  readonly svg: SVGSVGElement;
  readonly viewport: SVGGElement;
  /** the scene drawn, and its layout once known */
  scene: Scene;
  layout: Layout | null = null;
  /** nodes drawn so far (in scene order, then the edges) */
  drawn = 0;
  private edgesDrawn = 0;
  /** by scene index */
  nodeEls: (SVGGElement | undefined)[] = [];
  edgeEls: (SVGPathElement | undefined)[] = [];
  /** where nodes and edges are drawn: the viewport, or a fragment that replaces its content when done */
  private target: Node;
  private boxLayer: SVGGElement;
  private firstNodeEl: SVGGElement | null = null;
  private readonly indexOfEl = new WeakMap<Element, number>();

  constructor(private readonly stage: string, label: string, scene: Scene) {
    this.scene = scene;
    this.svg = svg('svg', 'lx-graph');
    this.svg.setAttribute('role', 'img');
    this.svg.setAttribute('aria-label', label);
    this.viewport = svg('g', 'lx-viewport');
    this.svg.appendChild(this.viewport);
    this.boxLayer = svg('g', 'lx-boxes');
    this.viewport.appendChild(this.boxLayer);
    this.target = this.viewport;
  }

  /** Start drawing `scene` from scratch, `offscreen` over the current drawing; its layout is to be set. */
  begin(scene: Scene, offscreen: boolean): void {
    this.scene = scene;
    if (offscreen) {
      this.target = document.createDocumentFragment();
      this.boxLayer = svg('g', 'lx-boxes');
      this.target.appendChild(this.boxLayer);
      this.svg.classList.add('lx-busy');
    }
    this.layout = null;
    this.firstNodeEl = null;
    this.drawn = 0;
    this.edgesDrawn = 0;
    this.nodeEls = new Array(scene.graph.size);
    this.edgeEls = new Array(scene.graph.edges.length);
  }

  /** Whether the drawing in progress replaces another when done. */
  get offscreen(): boolean {
    return this.target !== this.viewport;
  }

  /** Put a complete offscreen drawing on screen; false when it was drawn there already. */
  commit(): boolean {
    if (!this.offscreen) {
      return false;
    }
    this.viewport.replaceChildren(this.target);
    this.target = this.viewport;
    this.svg.classList.remove('lx-busy');
    return true;
  }

  isComplete(): boolean {
    return this.drawn >= this.scene.graph.size && this.edgesDrawn >= this.edgeEls.length;
  }

  /** Draw nodes, then edges, until `deadline` (ms, performance.now()). */
  drawSome(deadline: number, marks: Marks): void {
    const n = this.scene.graph.size;
    let count = 0;
    while (this.drawn < n) {
      this.drawNode(this.drawn++, marks);
      if (++count % 64 === 0 && now() > deadline) {
        break;
      }
    }
    if (this.drawn < n) {
      return;
    }
    while (this.edgesDrawn < this.layout!.edges.length) {
      this.drawEdge(this.edgesDrawn++, marks);
      if (++count % 64 === 0 && now() > deadline) {
        break;
      }
    }
  }

  /** Draw scene node `i` (a stage node, or a folded group: `g.lx-node.lx-group[data-group][data-size]`). */
  private drawNode(i: number, marks: Marks): void {
    const layout = this.layout!;
    const scene = this.scene.graph;
    const node = scene.nodes[i];
    const w = layout.width[i];
    const h = layout.heights[i];
    const box = holdsInner(scene, i); // drawn as a box holding its members, which are drawn after it
    const g = svg('g', box ? 'lx-node lx-box' : 'lx-node');
    const group = this.scene.group[i] >= 0;
    if (group) {
      g.classList.add('lx-group');
      g.dataset.group = String(node.group);
      g.dataset.size = String(node.size);
    } else {
      g.dataset.id = node.id;
    }
    g.dataset.kind = visualKind(this.stage, node);
    if (node.subsumed === true) {
      g.dataset.subsumed = 'true';
    }
    const owner = scene.eclassOf[i];
    if (owner >= 0 && holdsInner(scene, owner)) {
      g.dataset.eclass = scene.nodes[owner].id; // drawn inside that e-class's box, at the layout's row and column
      const q = layout.nodeInner?.[i] ?? -1;
      if (q >= 0) {
        g.dataset.row = String(layout.innerRow[q]);
        g.dataset.column = String(layout.innerColumn[q]);
      }
    }
    g.setAttribute('transform', `translate(${round(layout.x[i] - w / 2)},${round(layout.y[i] - h / 2)})`);
    const shape = svg('rect', 'lx-shape');
    shape.setAttribute('width', String(w));
    shape.setAttribute('height', String(h));
    const radius = box ? 7 : node.kind === 'enode' ? h / 2 : node.kind === 'eclass' ? 9 : group ? 2 : 5;
    shape.setAttribute('rx', String(radius));
    shape.setAttribute('ry', String(radius));
    g.appendChild(shape);
    const text = svg('text', 'lx-label');
    text.setAttribute('x', String(w / 2));
    text.setAttribute('y', String(box ? BOX_TITLE / 2 + 1 : h / 2));
    const drawnLabel = labelText(node.label);
    text.textContent = drawnLabel;
    g.appendChild(text);
    if (drawnLabel !== node.label || group) {
      const tip = svg('title');
      tip.textContent = group ? `${node.label} (click to expand)` : node.label;
      g.appendChild(tip);
    }
    marks.node(i, g);
    this.nodeEls[i] = g;
    this.indexOfEl.set(g, i);
    if (box) {
      this.boxLayer.appendChild(g);
      return;
    }
    this.target.appendChild(g);
    if (this.firstNodeEl === null) {
      this.firstNodeEl = g;
    }
  }

  private drawEdge(e: number, marks: Marks): void {
    const route = this.layout!.edges[e];
    const scene = this.scene.graph;
    const edge = scene.edges[e];
    const index = this.scene.edge[e];
    const path = svg('path', (route.reversed ? 'lx-edge lx-back' : 'lx-edge') + (index < 0 ? ' lx-merged' : ''));
    if (index >= 0) {
      path.dataset.index = String(index);
    } else {
      path.dataset.merged = String(edge.merged);
    }
    const end = (id: string): string => {
      const v = scene.index.get(id)!;
      return this.scene.group[v] >= 0 ? `group ${String(scene.nodes[v].group)}` : id;
    };
    path.dataset.source = end(edge.source);
    path.dataset.target = end(edge.target);
    path.setAttribute('d', edgePath(route));
    this.edgeEls[e] = path;
    if (marks.neighbourEdge(e)) {
      path.classList.add('lx-neighbour');
    }
    this.target.insertBefore(path, this.firstNodeEl);
  }

  /** The element drawing the stage's node `i` itself (not its folded group), if drawn. */
  nodeEl(i: number): SVGGElement | undefined {
    const v = i >= 0 ? this.scene.at[i] : -1;
    return v >= 0 && this.scene.node[v] === i ? this.nodeEls[v] : undefined;
  }

  /** The scene index of the node (or group) element at or above `target`, or -1. */
  indexAt(target: EventTarget | null): number {
    let element = target as Element | null;
    while (element && element !== this.svg) {
      if (element instanceof SVGGElement && element.classList.contains('lx-node')) {
        const i = this.indexOfEl.get(element);
        return i === undefined ? -1 : i;
      }
      element = element.parentNode as Element | null;
    }
    return -1;
  }
}

/** The time in ms (performance.now()). */
export const now = (): number => (typeof performance !== 'undefined' ? performance.now() : Date.now());
