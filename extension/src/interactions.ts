/**
 * How the user moves about a stage's drawing: the view transform (`Camera`: pan, zoom, fit, centre), the pointer
 * (drag to pan, wheel to zoom, click and hover a node), the search box's keys and the hover marks.
 */

import { LABEL_MIN_SCALE } from './model.js';
import type { Layout } from './layout.js';
import { round, SceneDrawing } from './scene.js';

const MAX_SCALE = 4;
const MIN_SCALE = 0.02;

export function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}

/** The transform of a drawing's viewport in its SVG; `root` shows its scale (`data-scale`). */
export class Camera {
  scale = 1;
  tx = 0;
  ty = 0;
  /** whether the drawing was fitted, and whether the user moved it since */
  fitted = false;
  userMoved = false;

  constructor(private readonly svg: SVGSVGElement, private readonly viewport: SVGGElement, private readonly root: HTMLElement) {}

  apply(): void {
    this.viewport.setAttribute('transform', `translate(${round(this.tx)},${round(this.ty)}) scale(${this.scale.toFixed(4)})`);
    this.svg.classList.toggle('lx-lod', this.scale < LABEL_MIN_SCALE);
    this.root.dataset.scale = this.scale.toFixed(3);
  }

  size(): { width: number; height: number } {
    return { width: this.svg.clientWidth, height: this.svg.clientHeight };
  }

  /** Whether the graph area is laid out on screen (not display:none). */
  isVisible(): boolean {
    const { width, height } = this.size();
    return width > 0 && height > 0;
  }

  /** The scale at which `layout` fits the graph area (as `fit` sets it). */
  fitScale(layout: Layout): number {
    const { width, height } = this.size();
    const pad = 16;
    const gw = Math.max(1, layout.totalWidth);
    const gh = Math.max(1, layout.totalHeight);
    return clamp(Math.min((width - 2 * pad) / gw, (height - 2 * pad) / gh, 1.5), MIN_SCALE, MAX_SCALE);
  }

  /** Fit the whole of `layout` to the view (at most 1.5x); deferred until the view has a size. */
  fit(layout: Layout): void {
    const { width, height } = this.size();
    if (width === 0 || height === 0) {
      this.fitted = false;
      return;
    }
    const pad = 16;
    this.scale = this.fitScale(layout);
    this.tx = (width - Math.max(1, layout.totalWidth) * this.scale) / 2;
    this.ty = Math.max(pad, (height - Math.max(1, layout.totalHeight) * this.scale) / 2);
    this.fitted = true;
    this.userMoved = false;
    this.apply();
  }

  /** Zoom by `factor` about the point (cx, cy) of the graph area. */
  zoomAt(factor: number, cx: number, cy: number): void {
    const scale = clamp(this.scale * factor, MIN_SCALE, MAX_SCALE);
    const k = scale / this.scale;
    this.tx = cx - (cx - this.tx) * k;
    this.ty = cy - (cy - this.ty) * k;
    this.scale = scale;
    this.userMoved = true;
    this.apply();
  }

  /** Zoom by `factor` about the graph area's centre. */
  zoomBy(factor: number): void {
    const { width, height } = this.size();
    this.zoomAt(factor, width / 2, height / 2);
  }

  /** Centre the point (x, y) of `layout` in the view, zooming in to a readable scale if needed. */
  centre(layout: Layout, x: number, y: number): void {
    if (!this.fitted) {
      this.fit(layout);
    }
    const { width, height } = this.size();
    if (width === 0) {
      return;
    }
    this.scale = Math.max(this.scale, 0.8);
    this.tx = width / 2 - x * this.scale;
    this.ty = height / 2 - y * this.scale;
    this.userMoved = true;
    this.apply();
  }
}

/** What the pointer does on a drawing: click a scene node (-1: the background), hover one (-1: none). */
export interface PointerActions {
  click(i: number): void;
  hover(i: number): void;
  hovered(): number;
}

/**
 * Drag to pan, wheel to zoom, click and hover the drawing's nodes. A click whose press and release land on
 * different elements (nodes a fraction of a pixel tall in a large graph) goes to the node pressed.
 */
export function wirePointer(drawing: SceneDrawing, camera: Camera, actions: PointerActions): void {
  const svg = drawing.svg;
  let down: { x: number; y: number; tx: number; ty: number; id: number } | null = null;
  let dragging = false;
  let suppressClick = false;
  let pressed = -1;
  svg.addEventListener('pointerdown', event => {
    if (event.button !== 0) {
      return;
    }
    down = { x: event.clientX, y: event.clientY, tx: camera.tx, ty: camera.ty, id: event.pointerId };
    dragging = false;
    pressed = drawing.indexAt(event.target);
  });
  svg.addEventListener('pointermove', event => {
    if (!down || event.pointerId !== down.id) {
      return;
    }
    const dx = event.clientX - down.x;
    const dy = event.clientY - down.y;
    if (!dragging && Math.abs(dx) + Math.abs(dy) > 4) {
      dragging = true;
      svg.classList.add('lx-panning');
      try {
        svg.setPointerCapture(event.pointerId);
      } catch {
        // the pointer may already be gone
      }
    }
    if (dragging) {
      camera.tx = down.tx + dx;
      camera.ty = down.ty + dy;
      camera.userMoved = true;
      camera.apply();
    }
  });
  const end = (event: PointerEvent): void => {
    if (!down || event.pointerId !== down.id) {
      return;
    }
    if (dragging) {
      suppressClick = true;
      svg.classList.remove('lx-panning');
    }
    down = null;
    dragging = false;
  };
  svg.addEventListener('pointerup', end);
  svg.addEventListener('pointercancel', end);
  svg.addEventListener('click', event => {
    if (suppressClick) {
      suppressClick = false;
      pressed = -1;
      return;
    }
    const at = drawing.indexAt(event.target);
    const v = at >= 0 ? at : pressed;
    pressed = -1;
    actions.click(v);
  });
  svg.addEventListener(
    'wheel',
    event => {
      event.preventDefault();
      const box = svg.getBoundingClientRect();
      const delta = event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY;
      camera.zoomAt(Math.exp(-clamp(delta, -200, 200) / 300), event.clientX - box.left, event.clientY - box.top);
    },
    { passive: false }
  );
  svg.addEventListener('pointerover', event => {
    const i = drawing.indexAt(event.target);
    if (i >= 0 && i !== actions.hovered()) {
      actions.hover(i);
    }
  });
  svg.addEventListener('pointerout', event => {
    if (actions.hovered() < 0) {
      return;
    }
    const to = drawing.indexAt(event.relatedTarget);
    if (to !== actions.hovered()) {
      actions.hover(to);
    }
  });
}

/** The search box filters as you type; Enter steps to the next match (`step(1)`), Shift+Enter back, Escape clears. */
export function wireSearch(input: HTMLInputElement, search: (query: string) => void, step: (by: number) => void): void {
  input.addEventListener('input', () => search(input.value));
  input.addEventListener('keydown', event => {
    if (event.key === 'Enter') {
      event.preventDefault();
      search(input.value);
      step(event.shiftKey ? -1 : 1);
    } else if (event.key === 'Escape') {
      input.value = '';
      search('');
    }
    event.stopPropagation();
  });
}

/** The hovered scene node and what it marks `.lx-neighbour`: its in/out neighbours and the edges joining them. */
export class Hover {
  node = -1;
  nodes: number[] = [];
  edges: number[] = [];

  /** Hover scene node `i` of `drawing` (-1: none). */
  set(i: number, drawing: SceneDrawing): void {
    for (const v of this.nodes) {
      drawing.nodeEls[v]?.classList.remove('lx-neighbour');
    }
    for (const e of this.edges) {
      drawing.edgeEls[e]?.classList.remove('lx-neighbour');
    }
    if (this.node >= 0) {
      drawing.nodeEls[this.node]?.classList.remove('lx-hover');
    }
    this.clear();
    this.node = i;
    if (i < 0) {
      return;
    }
    const scene = drawing.scene.graph;
    const { nodes, edges } = scene.neighbours(scene.nodes[i].id);
    this.nodes = nodes.map(id => scene.index.get(id)!).filter(v => v !== i);
    this.edges = edges;
    for (const v of this.nodes) {
      drawing.nodeEls[v]?.classList.add('lx-neighbour');
    }
    for (const e of edges) {
      drawing.edgeEls[e]?.classList.add('lx-neighbour');
    }
    drawing.nodeEls[i]?.classList.add('lx-hover');
  }

  /** Forget the marks (the drawing they were on is gone). */
  clear(): void {
    this.node = -1;
    this.nodes = [];
    this.edges = [];
  }
}
