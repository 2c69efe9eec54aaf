/**
 * A luminal_lab picture in a cell (`application/vnd.luminal-lab.picture+json`): the Graphviz SVG of
 * `comp.egraph.picture(...)`, `comp.hlir.picture(...)` or `comp.llir().picture(...)`, which the same output
 * bundle carries as `image/svg+xml`, shown to pan (drag), zoom (wheel, − and +) and fit (Fit; 1:1 for Graphviz's
 * own size). It opens fitted to the output's width, never larger than drawn. Hovering a node, cluster or edge
 * shows its Graphviz tooltip; clicking one shows that text in the details panel beside the picture.
 *
 * The SVG is parsed, not inserted as markup: scripts, foreign objects, event handlers and links out of the
 * picture are dropped before it enters the page.
 */

import { html } from './panels.js';

export const PICTURE_MIME = 'application/vnd.luminal-lab.picture+json';
export const PICTURE_SCHEMA = 1;

const SVG_NS = 'http://www.w3.org/2000/svg';
const XLINK_NS = 'http://www.w3.org/1999/xlink';
/** The tallest a picture's area opens (px); a taller picture opens fitted into it. */
export const MAX_HEIGHT = 600;
const MIN_HEIGHT = 80;
const MIN_ZOOM = 0.02;
const MAX_ZOOM = 8;

/** A rectangle in the picture's own units (Graphviz points), as an SVG viewBox. */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** What the picture mime carries besides the SVG. */
export interface PictureData {
  schema: number;
  caption: string;
  what: string;
}

/** The picture mime's data, or an error saying what is wrong with it. */
export function parsePicture(data: unknown): { ok: true; picture: PictureData } | { ok: false; error: string } {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    return { ok: false, error: 'the picture data is not an object' };
  }
  const raw = data as Record<string, unknown>;
  if (raw.schema !== PICTURE_SCHEMA) {
    return { ok: false, error: `picture schema ${String(raw.schema)}, this renderer reads schema ${PICTURE_SCHEMA}` };
  }
  if (typeof raw.caption !== 'string' || typeof raw.what !== 'string') {
    return { ok: false, error: 'the picture data needs a string caption and what' };
  }
  return { ok: true, picture: { schema: raw.schema, caption: raw.caption, what: raw.what } };
}

/** An SVG viewBox attribute's rectangle, or null when it is missing or not four numbers with a positive size. */
export function parseViewBox(value: string | null): Box | null {
  const parts = (value ?? '').trim().split(/[\s,]+/).map(Number);
  if (parts.length !== 4 || parts.some(p => !Number.isFinite(p)) || parts[2] <= 0 || parts[3] <= 0) {
    return null;
  }
  return { x: parts[0], y: parts[1], width: parts[2], height: parts[3] };
}

/**
 * The height (px) a picture of `natural` size opens at in an area `width` px wide: its height when fitted to the
 * width (never enlarged past its drawn size), at most `MAX_HEIGHT`, at least `MIN_HEIGHT`.
 */
export function openingHeight(natural: Box, width: number): number {
  const scale = Math.min(1, width / natural.width);
  return Math.round(Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, natural.height * scale)));
}

/** Pixels per picture unit when `box` is shown in an area of `width` × `height` px (the SVG "meet" rule). */
export function scaleOf(box: Box, width: number, height: number): number {
  return Math.min(width / box.width, height / box.height);
}

/** The picture point under area pixel (`px`, `py`) when `box` is shown in `width` × `height` px, centred. */
export function pointAt(box: Box, width: number, height: number, px: number, py: number): { x: number; y: number } {
  const s = scaleOf(box, width, height);
  return {
    x: box.x + (px - (width - box.width * s) / 2) / s,
    y: box.y + (py - (height - box.height * s) / 2) / s
  };
}

/** `box` zoomed by `factor` (> 1: closer) about the picture point (`x`, `y`), which stays where it is. */
export function zoomBox(box: Box, factor: number, x: number, y: number): Box {
  return {
    x: x - (x - box.x) / factor,
    y: y - (y - box.y) / factor,
    width: box.width / factor,
    height: box.height / factor
  };
}

/** The text Graphviz gives an element of the picture as its tooltip (its link's title, else its own title). */
function tooltipOf(element: Element): string {
  const link = element.querySelector('a');
  const title = link?.getAttributeNS(XLINK_NS, 'title') ?? link?.getAttribute('title') ?? null;
  return title ?? element.querySelector(':scope > title')?.textContent ?? '';
}

/**
 * The picture's root element from SVG text, safe to put into the page: nothing that runs or links out of it is
 * kept. Each node, cluster and edge gets its tooltip as its `<title>` (what a browser shows on hover), in place
 * of Graphviz's internal name.
 */
export function cleanSvg(text: string): SVGSVGElement | null {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const root = doc.documentElement;
  if (root.namespaceURI !== SVG_NS || root.localName !== 'svg' || doc.querySelector('parsererror')) {
    return null;
  }
  root.querySelectorAll('script, foreignObject, iframe, object, embed, use').forEach(e => e.remove());
  for (const element of [root, ...Array.from(root.querySelectorAll('*'))]) {
    for (const attribute of Array.from(element.attributes)) {
      const name = attribute.localName.toLowerCase();
      if (name.startsWith('on') || ((name === 'href' || name === 'src') && !attribute.value.startsWith('#'))) {
        element.removeAttributeNode(attribute);
      }
    }
  }
  root.querySelectorAll('g.node, g.cluster, g.edge').forEach(group => {
    const text = tooltipOf(group);
    group.querySelectorAll(':scope > title').forEach(t => t.remove());
    group.querySelectorAll('a').forEach(a => a.removeAttributeNS(XLINK_NS, 'title'));
    const title = doc.createElementNS(SVG_NS, 'title');
    title.textContent = text;
    group.insertBefore(title, group.firstChild);
  });
  return document.importNode(root, true) as unknown as SVGSVGElement;
}

/** The picture, its toolbar (caption, zoom, Fit, 1:1) and its details panel. */
export class PictureView {
  readonly node: HTMLDivElement;
  private readonly area: HTMLDivElement;
  private readonly details: HTMLDivElement;
  private readonly svgEl: SVGSVGElement;
  private readonly natural: Box;
  private box: Box;
  private sized = false;
  private picked: Element | null = null;

  constructor(picture: PictureData, svgText: string) {
    const svgEl = cleanSvg(svgText);
    const natural = svgEl ? parseViewBox(svgEl.getAttribute('viewBox')) : null;
    if (svgEl === null || natural === null) {
      throw new Error(`the ${picture.what} picture is not an SVG with a viewBox`);
    }
    this.svgEl = svgEl;
    this.natural = natural;
    this.box = { ...natural };
    this.node = html('div', 'jp-LuminalPicture');
    this.node.dataset.status = 'ready';
    this.node.dataset.what = picture.what;
    const toolbar = html('div', 'lx-toolbar');
    toolbar.appendChild(html('span', 'lx-summary lx-caption', picture.caption));
    toolbar.appendChild(html('span', 'lx-spacer'));
    const button = (cls: string, label: string, title: string, action: () => void): void => {
      const b = html('button', `lx-button ${cls}`, label);
      b.title = title;
      b.addEventListener('click', action);
      toolbar.appendChild(b);
    };
    button('lx-zoom-out', '−', 'Zoom out', () => this.zoomBy(1 / 1.25));
    button('lx-zoom-in', '+', 'Zoom in', () => this.zoomBy(1.25));
    button('lx-fit', 'Fit', 'Fit the picture to the view', () => this.fit());
    button('lx-actual', '1:1', 'Graphviz’s own size', () => this.actualSize());
    this.node.appendChild(toolbar);
    const body = html('div', 'lx-body');
    this.area = html('div', 'lx-picture-area');
    svgEl.removeAttribute('width');
    svgEl.removeAttribute('height');
    svgEl.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    svgEl.classList.add('lx-picture');
    this.area.appendChild(svgEl);
    this.details = html('div', 'lx-details lx-picture-details');
    this.details.appendChild(html('div', 'lx-hint', 'Hover a node for its tooltip; click it to keep it here. Drag to pan, wheel to zoom.'));
    body.append(this.area, this.details);
    this.node.appendChild(body);
    this.wire();
    this.apply();
  }

  /** Call when the picture may have become visible: it is sized to its area's width the first time. */
  onShow(): void {
    const width = this.area.clientWidth;
    if (this.sized || width === 0) {
      return;
    }
    this.sized = true;
    this.area.style.height = `${openingHeight(this.natural, width)}px`;
    this.fit();
  }

  /** The whole picture in view. */
  fit(): void {
    this.box = { ...this.natural };
    this.apply();
  }

  /** Graphviz's own size (1 px per point), about the view's centre. */
  actualSize(): void {
    const { width, height } = this.size();
    if (width > 0) {
      this.zoomBy(1 / scaleOf(this.box, width, height));
    }
  }

  zoomBy(factor: number): void {
    const { width, height } = this.size();
    this.zoomAt(factor, width / 2, height / 2);
  }

  private zoomAt(factor: number, px: number, py: number): void {
    const { width, height } = this.size();
    if (width === 0 || height === 0) {
      return;
    }
    const zoom = this.natural.width / this.box.width;
    const next = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, zoom * factor));
    const p = pointAt(this.box, width, height, px, py);
    this.box = zoomBox(this.box, next / zoom, p.x, p.y);
    this.apply();
  }

  private size(): { width: number; height: number } {
    return { width: this.svgEl.clientWidth, height: this.svgEl.clientHeight };
  }

  private apply(): void {
    const b = this.box;
    this.svgEl.setAttribute('viewBox', [b.x, b.y, b.width, b.height].map(v => +v.toFixed(2)).join(' '));
    const { width, height } = this.size();
    this.node.dataset.scale = width > 0 ? scaleOf(b, width, height).toFixed(3) : '';
  }

  private show(element: Element | null): void {
    this.picked?.classList.remove('lx-picked');
    this.picked = element;
    this.details.textContent = '';
    if (element === null) {
      this.details.appendChild(html('div', 'lx-hint', 'Nothing picked.'));
      return;
    }
    element.classList.add('lx-picked');
    const text = element.querySelector(':scope > title')?.textContent ?? '';
    const [head, ...rest] = text.split('\n');
    this.details.appendChild(html('div', 'lx-details-id', head));
    if (rest.length > 0) {
      this.details.appendChild(html('pre', 'lx-details-text', rest.join('\n')));
    }
  }

  private wire(): void {
    let down: { x: number; y: number; box: Box; id: number } | null = null;
    let dragged = false;
    const svg = this.svgEl;
    svg.addEventListener('pointerdown', event => {
      if (event.button === 0) {
        down = { x: event.clientX, y: event.clientY, box: { ...this.box }, id: event.pointerId };
        dragged = false;
      }
    });
    svg.addEventListener('pointermove', event => {
      if (!down || event.pointerId !== down.id) {
        return;
      }
      const dx = event.clientX - down.x;
      const dy = event.clientY - down.y;
      if (!dragged && Math.abs(dx) + Math.abs(dy) > 4) {
        dragged = true;
        svg.classList.add('lx-panning');
      }
      if (dragged) {
        const { width, height } = this.size();
        const s = scaleOf(down.box, width, height);
        this.box = { ...down.box, x: down.box.x - dx / s, y: down.box.y - dy / s };
        this.apply();
      }
    });
    const end = (): void => {
      down = null;
      svg.classList.remove('lx-panning');
    };
    svg.addEventListener('pointerup', end);
    svg.addEventListener('pointercancel', end);
    svg.addEventListener('click', event => {
      if (dragged) {
        dragged = false;
        return;
      }
      const target = event.target instanceof Element ? event.target.closest('g.node, g.cluster, g.edge') : null;
      this.show(target);
    });
    svg.addEventListener(
      'wheel',
      event => {
        event.preventDefault();
        const rect = svg.getBoundingClientRect();
        const delta = event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY;
        this.zoomAt(Math.exp(-Math.min(200, Math.max(-200, delta)) / 300), event.clientX - rect.left,
          event.clientY - rect.top);
      },
      { passive: false }
    );
  }
}
