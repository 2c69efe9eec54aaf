// End-to-end driver for the luminal-lab JupyterLab extension: headless Chromium (playwright-core)
// against a running JupyterLab.
//
//   node ui-tests/lab.mjs SCENARIO BASE_URL TOKEN [OUT_DIR]
//
// SCENARIO is one of: stages, malicious, large, deep, workbench (see SCENARIOS below). The driver only
// acts and measures; it prints one line `RESULT {json}` with what it saw (facts, timings, every
// request that left this machine, console and page errors) and exits 0, or exits 1 with `error`
// set when a step failed (a wait timed out, an element was missing).
// tests/extension/test_lab_e2e.py runs it and makes the assertions. On failure a screenshot goes to
// OUT_DIR/SCENARIO.png.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const CHROMIUM = process.env.LUMINAL_LAB_CHROMIUM || '/usr/bin/chromium';
export const LAUNCH_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-default-apps', '--disable-domain-reliability',
  '--no-pings', '--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication',
];
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);
const LOCAL_SCHEMES = new Set(['data:', 'blob:', 'about:', 'chrome:', 'chrome-extension:', 'devtools:']);

/** Whether a URL stays on this machine: data:/blob: or a loopback host. */
export function isLocal(url) {
  let parsed;
  try { parsed = new URL(url); } catch { return false; }
  if (LOCAL_SCHEMES.has(parsed.protocol)) return true;
  return LOCAL_HOSTS.has(parsed.hostname);
}

const STAGE = '.jp-LuminalStage';
const READY = `${STAGE}[data-status="ready"]`;

// ---- page helpers ----------------------------------------------------------------------------

async function openNotebook(page, ctx, name) {
  const started = Date.now();
  await page.goto(`${ctx.base}/lab/tree/${encodeURIComponent(name)}?token=${ctx.token}&reset`);
  await page.locator('.jp-NotebookPanel .jp-Cell').first().waitFor({ timeout: 60000 });
  ctx.timings.notebook_open_ms = Date.now() - started;
  return started;
}

// A notebook saved without a kernelspec makes JupyterLab ask for a kernel: answer "No Kernel".
async function declineKernel(page, ctx, wait = 8000) {
  const dialog = page.locator('.jp-Dialog');
  try {
    await dialog.waitFor({ timeout: wait });
  } catch {
    ctx.facts.kernel_dialog = null;
    return;
  }
  ctx.facts.kernel_dialog = (await dialog.locator('.jp-Dialog-header').textContent())?.trim() ?? '';
  await dialog.locator('.jp-Dialog-footer button', { hasText: 'No Kernel' }).click();
  await dialog.waitFor({ state: 'detached', timeout: 10000 });
}

async function api(page, ctx, path) {
  return page.evaluate(async ([url, token]) => {
    const response = await fetch(url, { headers: { Authorization: `token ${token}` } });
    return response.json();
  }, [`${ctx.base}/api/${path}`, ctx.token]);
}

// Every stage root of the page, in document order: its attributes and what it draws.
async function describeStages(page) {
  return page.locator(STAGE).evaluateAll((roots) => roots.map((root) => {
    const nodes = [...root.querySelectorAll('g.lx-node')];
    return {
      stage: root.dataset.stage ?? null,
      status: root.dataset.status ?? null,
      level: root.dataset.level ?? null,
      fold: root.dataset.fold ?? null,
      scale: root.dataset.scale === undefined ? null : Number(root.dataset.scale),
      opening_scale: root.dataset.openingScale === undefined ? null : Number(root.dataset.openingScale),
      summary: root.querySelector('.lx-summary')?.textContent ?? null,
      node_count: root.dataset.nodeCount === undefined ? null : Number(root.dataset.nodeCount),
      drawn: root.dataset.drawn === undefined ? null : Number(root.dataset.drawn),
      in_pipeline: Boolean(root.closest('.jp-LuminalPipeline')),
      cell: [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')]
        .findIndex((cell) => cell.contains(root)),
      svg: root.querySelectorAll('svg.lx-graph').length,
      viewport: root.querySelectorAll('svg.lx-graph > g.lx-viewport').length,
      nodes: nodes.length,
      ids: nodes.map((node) => node.getAttribute('data-id')),
      labelled: nodes.filter((node) => node.querySelector('text')).length,
      edges: root.querySelectorAll('path.lx-edge').length,
      edges_with_ends: root.querySelectorAll('path.lx-edge[data-source][data-target]').length,
      toolbar: ['input.lx-search', 'span.lx-search-count', 'button.lx-fit', 'button.lx-zoom-in',
        'button.lx-zoom-out', 'div.lx-summary'].filter((sel) => root.querySelector(sel)),
      summary: root.querySelector('.lx-summary')?.textContent ?? null,
      error: root.querySelector('.lx-error')?.textContent ?? null,
    };
  }));
}

// A locator for the node `id` in the stage root number `index` (document order).
function nodeLocator(page, index, id) {
  const quoted = id.replace(/["\\]/g, '\\$&').replace(/\n/g, '\\a ');
  return page.locator(STAGE).nth(index).locator(`g.lx-node[data-id="${quoted}"]`);
}

async function classIds(page, index, cls) {
  return page.locator(STAGE).nth(index).evaluate((root, c) => ({
    nodes: [...root.querySelectorAll(`g.lx-node.${c}`)].map((n) => n.getAttribute('data-id')),
    edges: [...root.querySelectorAll(`path.lx-edge.${c}`)]
      .map((e) => [e.getAttribute('data-source'), e.getAttribute('data-target')]),
  }), cls);
}

async function details(page, index) {
  return page.locator(STAGE).nth(index).evaluate((root) => {
    const box = root.querySelector('.lx-details');
    if (!box) return null;
    return {
      text: box.textContent,
      fields: [...box.querySelectorAll('table.lx-fields tr')].map((tr) => [...tr.children].map((c) => c.textContent)),
      source_lines: box.querySelectorAll('pre.lx-source span.lx-line[data-line]').length,
      hits: [...box.querySelectorAll('pre.lx-source span.lx-line.lx-hit')].map((l) => Number(l.dataset.line)),
      links: [...box.querySelectorAll('a.lx-link')].map((a) => ({ stage: a.dataset.stage, id: a.dataset.id,
        href: a.getAttribute('href'), text: a.textContent })),
    };
  });
}

const pause = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

async function waitReady(page, index, timeout = 30000) {
  const root = page.locator(STAGE).nth(index);
  await root.scrollIntoViewIfNeeded({ timeout });
  await page.waitForFunction(([sel, i]) => {
    const el = document.querySelectorAll(sel)[i];
    return el && (el.dataset.status === 'ready' || el.dataset.status === 'error');
  }, [STAGE, index], { timeout, polling: 100 });
}

// Colours of stage `index`: its effective background, text, a node's shape fill and label fill.
async function colours(page, index) {
  return page.locator(STAGE).nth(index).evaluate((root) => {
    const background = (el) => {
      for (let at = el; at; at = at.parentElement) {
        const c = getComputedStyle(at).backgroundColor;
        if (c && c !== 'transparent' && !/rgba\(.*,\s*0\)$/.test(c)) return c;
      }
      return 'rgb(255, 255, 255)';
    };
    const node = root.querySelector('g.lx-node');
    const shape = node?.querySelector('rect, path, ellipse, polygon, circle');
    const text = node?.querySelector('text');
    const edge = root.querySelector('path.lx-edge');
    const graph = root.querySelector('svg.lx-graph');
    return {
      background: background(root), color: getComputedStyle(root).color,
      graph_background: graph ? background(graph) : null,
      node_fill: shape ? getComputedStyle(shape).fill : null, node_stroke: shape ? getComputedStyle(shape).stroke : null,
      label_fill: text ? getComputedStyle(text).fill : null, edge_stroke: edge ? getComputedStyle(edge).stroke : null,
    };
  });
}

async function setTheme(page, theme) {
  await page.evaluate((t) => window.jupyterapp.commands.execute('apputils:change-theme', { theme: t }), theme);
  const light = theme !== 'JupyterLab Dark';
  await page.waitForFunction((l) => document.body.dataset.jpThemeLight === String(l), light, { timeout: 20000 });
  await page.waitForTimeout(300);
  await pause(page);
}

// ---- scenarios -------------------------------------------------------------------------------

// stages.ipynb: the saved outputs of every stage and the pipeline, rendered with no kernel.
// ctx.expect (from argv[5] JSON) names the nodes to act on: {hlir: {click, hover, search},
// cuda: {click}, pipeline: {click}}.
async function stages(page, ctx) {
  const started = await openNotebook(page, ctx, 'stages.ipynb');
  await page.locator(READY).first().waitFor({ timeout: 60000 });
  ctx.timings.first_ready_ms = Date.now() - started;
  await declineKernel(page, ctx, 3000);
  const total = await page.locator(STAGE).count();
  for (let i = 0; i < total; i++) {
    const inPipeline = await page.locator(STAGE).nth(i).evaluate((el) => Boolean(el.closest('.jp-LuminalPipeline')));
    if (!inPipeline) await waitReady(page, i);
  }
  ctx.timings.all_ready_ms = Date.now() - started;
  ctx.facts.roots = await describeStages(page);
  ctx.facts.pipelines = await page.locator('.jp-LuminalPipeline').evaluateAll((els) => els.map((p) => ({
    tabs: [...p.querySelectorAll('.lx-tabs button.lx-tab')].map((b) => ({ stage: b.dataset.stage,
      count: b.querySelector('.lx-tab-count')?.textContent ?? null, text: b.textContent, title: b.title,
      size: b.querySelector('.lx-tab-size')?.textContent ?? null,
      size_title: b.querySelector('.lx-tab-size')?.title ?? null })),
    stages: p.querySelectorAll('.jp-LuminalStage').length,
  })));
  const roots = ctx.facts.roots;
  const indexOf = (stage) => roots.findIndex((r) => r.stage === stage && !r.in_pipeline);
  const plan = ctx.expect;

  // click: details show the node's id and label
  const hlir = indexOf('hlir');
  const root = page.locator(STAGE).nth(hlir);
  await root.locator('button.lx-fit').click();
  await pause(page);
  await nodeLocator(page, hlir, plan.hlir.click).click();
  await root.locator('.lx-details').waitFor({ timeout: 5000 });
  ctx.facts.click = { selected: (await classIds(page, hlir, 'lx-selected')).nodes, details: await details(page, hlir) };

  // hover: neighbours (nodes and connecting edges)
  await nodeLocator(page, hlir, plan.hlir.hover).hover();
  await pause(page);
  ctx.facts.hover = await classIds(page, hlir, 'lx-neighbour');
  await page.mouse.move(1, 1);
  await pause(page);
  ctx.facts.hover_after_leave = (await classIds(page, hlir, 'lx-neighbour')).nodes.length;

  // search
  await root.locator('input.lx-search').fill(plan.hlir.search);
  await page.waitForTimeout(400);
  ctx.facts.search = { matches: (await classIds(page, hlir, 'lx-match')).nodes,
    count_text: await root.locator('span.lx-search-count').textContent() };
  await root.locator('input.lx-search').fill('');
  await page.waitForTimeout(400);
  ctx.facts.search_cleared = (await classIds(page, hlir, 'lx-match')).nodes.length;

  // zoom buttons change the viewport's transform
  const transform = () => root.locator('g.lx-viewport').getAttribute('transform');
  const before = await transform();
  await root.locator('button.lx-zoom-in').click();
  await pause(page);
  const zoomedIn = await transform();
  await root.locator('button.lx-zoom-out').click();
  await root.locator('button.lx-zoom-out').click();
  await pause(page);
  const zoomedOut = await transform();
  await root.locator('button.lx-fit').click();
  await pause(page);
  ctx.facts.zoom = { before, zoomed_in: zoomedIn, zoomed_out: zoomedOut, fit: await transform() };

  // CUDA: a kernel's details list its source with line numbers
  const cuda = indexOf('cuda');
  await page.locator(STAGE).nth(cuda).locator('button.lx-fit').click();
  await nodeLocator(page, cuda, plan.cuda.click).click();
  await page.locator(STAGE).nth(cuda).locator('.lx-details').waitFor({ timeout: 5000 });
  ctx.facts.cuda_click = await details(page, cuda);

  // e-graph: each e-class a box holding its e-nodes; an e-node and a box's title row answer clicks, hover, search
  if (plan.egraph) {
    const eg = indexOf('egraph');
    const egRoot = page.locator(STAGE).nth(eg);
    await egRoot.scrollIntoViewIfNeeded();
    await egRoot.locator('button.lx-fit').click();
    await pause(page);
    ctx.facts.egraph_level = await egRoot.evaluate((root) => ({ level: root.dataset.level ?? null,
      fold: root.dataset.fold ?? null, opening_scale: Number(root.dataset.openingScale),
      scale: Number(root.dataset.scale), options: [...root.querySelectorAll('select.lx-level option')].map((o) => o.value) }));
    ctx.facts.egraph_geometry = await egRoot.evaluate((root) => {
      const rectOf = (g) => g.querySelector(':scope > .lx-shape').getBoundingClientRect();
      const byId = new Map([...root.querySelectorAll('g.lx-node')].map((g) => [g.dataset.id, g]));
      const boxes = [...root.querySelectorAll('g.lx-node.lx-box')];
      const outside = [];
      let inside = 0;
      for (const g of root.querySelectorAll('g.lx-node[data-kind="enode"]')) {
        const box = byId.get(g.dataset.eclass ?? '') ?? null;
        if (!box) { outside.push(g.dataset.id); continue; }
        const a = rectOf(g);
        const b = rectOf(box);
        if (a.left >= b.left && a.right <= b.right && a.top >= b.top && a.bottom <= b.bottom) inside++;
        else outside.push(g.dataset.id);
      }
      return { boxes: boxes.map((b) => b.dataset.id), box_kinds: [...new Set(boxes.map((b) => b.dataset.kind))],
        inside, outside, box_layer_first: root.querySelector('g.lx-viewport > g')?.classList.contains('lx-boxes') ?? false };
    });
    await nodeLocator(page, eg, plan.egraph.enode).click();
    await pause(page);
    ctx.facts.egraph_enode_click = { selected: (await classIds(page, eg, 'lx-selected')).nodes, details: await details(page, eg) };
    await nodeLocator(page, eg, plan.egraph.enode).hover();
    await pause(page);
    ctx.facts.egraph_hover = await classIds(page, eg, 'lx-neighbour');
    // the middle of the e-class's title row (its label lets clicks through to the box), zoomed in around it
    const eclass = nodeLocator(page, eg, plan.egraph.eclass);
    const titlePoint = () => eclass.evaluate((g) => {
      const rect = g.querySelector(':scope > .lx-shape');
      const box = rect.getBoundingClientRect();
      const factor = box.height / Number(rect.getAttribute('height'));
      return { x: box.left + box.width / 2, y: box.top + Number(g.querySelector(':scope > text').getAttribute('y')) * factor };
    });
    let point = await titlePoint();
    await page.mouse.move(point.x, point.y);
    for (let k = 0; k < 3; k++) {
      await page.mouse.wheel(0, -200);
      await pause(page);
    }
    point = await titlePoint();
    await page.mouse.click(point.x, point.y);
    await pause(page);
    ctx.facts.egraph_eclass_click = { selected: (await classIds(page, eg, 'lx-selected')).nodes, details: await details(page, eg) };
    await egRoot.locator('input.lx-search').fill(plan.egraph.eclass);
    await page.waitForTimeout(400);
    ctx.facts.egraph_search = (await classIds(page, eg, 'lx-match')).nodes;
    await egRoot.locator('input.lx-search').fill('');
    // a search for a node the IR level hides: the count says so, and Enter draws every e-class and selects it
    const search = egRoot.locator('input.lx-search');
    await search.fill(plan.egraph.hidden);
    await page.waitForTimeout(400);
    const countText = await egRoot.locator('span.lx-search-count').textContent();
    await search.press('Enter');
    await waitReady(page, eg);
    ctx.facts.egraph_hidden = { count_text: countText, level: await egRoot.getAttribute('data-level'),
      selected: (await classIds(page, eg, 'lx-selected')).nodes };
    await search.fill('');
    // back to the IR level, then Level: All e-classes draws every node of the envelope
    await egRoot.locator('select.lx-level').selectOption('ir');
    await waitReady(page, eg);
    ctx.facts.egraph_ir_again = (await describeStages(page))[eg];
    await egRoot.locator('select.lx-level').selectOption('all');
    await waitReady(page, eg);
    ctx.facts.egraph_all = (await describeStages(page))[eg];
  }

  // pipeline: select an HLIR node; counterparts are linked in the other stages; a link navigates
  const pipeline = page.locator('.jp-LuminalPipeline').first();
  await pipeline.scrollIntoViewIfNeeded();
  const pipeIndex = (stage) => roots.findIndex((r) => r.stage === stage && r.in_pipeline);
  await pipeline.locator('button.lx-tab[data-stage="hlir"]').click();
  const pHlir = pipeIndex('hlir');
  await waitReady(page, pHlir);
  await page.locator(STAGE).nth(pHlir).locator('button.lx-fit').click();
  await nodeLocator(page, pHlir, plan.pipeline.click).click();
  await page.locator(STAGE).nth(pHlir).locator('.lx-details').waitFor({ timeout: 5000 });
  await pause(page);
  const linked = {};
  for (const [i, r] of roots.entries()) {
    if (r.in_pipeline) linked[r.stage] = (await classIds(page, i, 'lx-linked')).nodes;
  }
  ctx.facts.pipeline_click = { selected: (await classIds(page, pHlir, 'lx-selected')).nodes, linked,
    details: await details(page, pHlir), cuda_details: await details(page, pipeIndex('cuda')),
    tabs: await pipeline.locator('button.lx-tab').evaluateAll((bs) => bs.map((b) => ({ stage: b.dataset.stage,
      count: b.querySelector('.lx-tab-count')?.textContent ?? null,
      count_title: b.querySelector('.lx-tab-count')?.title ?? null }))) };
  const links = ctx.facts.pipeline_click.details?.links ?? [];
  const target = links.find((l) => l.stage === plan.pipeline.follow) ?? links.find((l) => l.stage !== 'hlir');
  if (target) {
    await page.locator(STAGE).nth(pHlir).locator('a.lx-link').filter({ hasText: target.text }).first().click();
    const tIndex = pipeIndex(target.stage);
    await waitReady(page, tIndex);
    await pause(page);
    ctx.facts.link_follow = {
      link: target,
      visible: await page.locator(STAGE).nth(tIndex).isVisible(),
      hlir_visible: await page.locator(STAGE).nth(pHlir).isVisible(),
      active_tab: await pipeline.locator('button.lx-tab').evaluateAll((bs) => bs
        .filter((b) => b.classList.contains('lx-active') || b.getAttribute('aria-selected') === 'true')
        .map((b) => b.dataset.stage)),
      selected: (await classIds(page, tIndex, 'lx-selected')).nodes,
      details: await details(page, tIndex),
    };
  }

  await pictureFacts(page, ctx);

  // themes: the same stage in light and dark
  ctx.facts.theme = { light: await colours(page, hlir) };
  await setTheme(page, 'JupyterLab Dark');
  ctx.facts.theme.dark = await colours(page, hlir);
  await setTheme(page, 'JupyterLab Light');
  ctx.facts.theme.light_again = await colours(page, hlir);

  ctx.facts.kernels = await api(page, ctx, 'kernels');
  ctx.facts.sessions = await api(page, ctx, 'sessions');
}

// comp.egraph.picture(...) in a cell: its size in its output at opening (fitted to the width), each node's hover
// title (its tooltip), the details a click shows, and the scale after the zoom buttons, Fit, and a drag.
async function pictureFacts(page, ctx) {
  const picture = page.locator('.jp-LuminalPicture').first();
  await picture.scrollIntoViewIfNeeded();
  await pause(page);
  const scale = () => picture.evaluate((root) => Number(root.dataset.scale));
  const viewBox = () => picture.locator('svg.lx-picture').getAttribute('viewBox');
  ctx.facts.picture = await picture.evaluate((root) => {
    const svg = root.querySelector('svg.lx-picture');
    const output = root.closest('.jp-OutputArea-output');
    const box = svg.getBoundingClientRect();
    return { caption: root.querySelector('.lx-caption')?.textContent ?? null, scale: Number(root.dataset.scale),
      width: box.width, height: box.height, output_width: output?.getBoundingClientRect().width ?? null,
      view_box: svg.getAttribute('viewBox'), scripts: root.querySelectorAll('script, foreignObject').length,
      titles: [...svg.querySelectorAll('g.node.enode')].map((g) => g.querySelector(':scope > title')?.textContent ?? '') };
  });
  const node = picture.locator('g.node.enode').first();
  await node.hover();
  ctx.facts.picture.hovered = await node.evaluate((g) => g.querySelector(':scope > title')?.textContent ?? null);
  await node.click();
  await pause(page);
  ctx.facts.picture.details = await picture.locator('.lx-picture-details').textContent();
  ctx.facts.picture.picked = await picture.locator('g.node.lx-picked').count();
  await picture.locator('button.lx-zoom-in').click();
  ctx.facts.picture.zoomed_in = await scale();
  await picture.locator('button.lx-fit').click();
  ctx.facts.picture.fit = await scale();
  await picture.locator('button.lx-actual').click();
  ctx.facts.picture.actual = await scale();
  const before = await viewBox();
  const area = await picture.locator('svg.lx-picture').boundingBox();
  await page.mouse.move(area.x + area.width / 2, area.y + area.height / 2);
  await page.mouse.down();
  await page.mouse.move(area.x + area.width / 2 - 120, area.y + area.height / 2, { steps: 5 });
  await page.mouse.up();
  ctx.facts.picture.dragged = { before, after: await viewBox() };
}

// malicious.ipynb (trusted): markup in every string of the envelopes must stay text.
async function malicious(page, ctx) {
  await page.addInitScript(() => {
    // any script that runs records itself; the notebook's payloads set window.__pwned
    window.__e2eAlerts = [];
    for (const name of ['alert', 'confirm', 'prompt']) {
      window[name] = (...args) => { window.__e2eAlerts.push([name, String(args[0])]); };
    }
  });
  page.on('dialog', (d) => { ctx.facts.dialogs = (ctx.facts.dialogs ?? 0) + 1; d.dismiss().catch(() => {}); });
  const started = await openNotebook(page, ctx, 'malicious.ipynb');
  await page.locator(STAGE).first().waitFor({ timeout: 60000 });
  await declineKernel(page, ctx, 3000);
  const total = await page.locator(STAGE).count();
  for (let i = 0; i < total; i++) {
    const el = page.locator(STAGE).nth(i);
    if (await el.isVisible()) await waitReady(page, i, 20000).catch(() => {});
  }
  ctx.timings.all_ready_ms = Date.now() - started;
  // click and hover every drawn node of every shown stage (each pipeline tab in turn), search
  // for a payload, and follow a provenance link
  let clicks = 0;
  let groups = 0;
  let focused = 0;
  const exercise = async (root) => {
    const fit = root.locator('button.lx-fit');
    if (await fit.count()) await fit.click({ timeout: 2000 });
    const nodes = root.locator('g.lx-node');
    const n = await nodes.count();
    for (let k = 0; k < n; k++) {
      await nodes.nth(k).hover({ timeout: 1000 }).catch(() => {});
      await nodes.nth(k).click({ timeout: 1000 }).then(() => { clicks++; }).catch(() => {});
    }
    const search = root.locator('input.lx-search');
    if (await search.count()) await search.fill(ctx.expect.search ?? '<script>', { timeout: 2000 });
    // fold by each mode the stage offers (groups labelled by payloads), click the groups open, focus on a node
    const fold = root.locator('select.lx-fold');
    if (await fold.count()) {
      for (const mode of ['hlir', 'layer']) {
        if (!(await fold.locator(`option[value="${mode}"]:not([disabled])`).count())) continue;
        await fold.selectOption(mode, { timeout: 2000 });
        for (let k = 0; k < 4 && (await root.locator('g.lx-group').count()); k++) {
          await root.locator('g.lx-group').first().click({ timeout: 2000 }).then(() => { groups++; }).catch(() => {});
        }
      }
      await fold.selectOption('none', { timeout: 2000 });
      await root.locator('g.lx-node').first().click({ timeout: 2000 }).catch(() => {});
      await root.locator('button.lx-focus').click({ timeout: 2000 }).then(() => { focused++; }).catch(() => {});
      await root.locator('button.lx-show-all').click({ timeout: 2000 }).catch(() => {});
    }
  };
  for (const root of await page.locator(`${STAGE}:not(.jp-LuminalPipeline ${STAGE})`).all()) {
    await root.scrollIntoViewIfNeeded();
    await exercise(root);
  }
  for (const pipeline of await page.locator('.jp-LuminalPipeline').all()) {
    await pipeline.scrollIntoViewIfNeeded();
    const tabs = await pipeline.locator('button.lx-tab').all();
    for (const tab of tabs) {
      await tab.click({ timeout: 2000 });
      const shown = pipeline.locator(`${STAGE}:visible`).first();
      await exercise(shown);
    }
    await tabs[0]?.click({ timeout: 2000 });
    const shown = pipeline.locator(`${STAGE}:visible`).first();
    await shown.locator('g.lx-node').first().click({ timeout: 2000 }).catch(() => {});
    const link = pipeline.locator('.lx-details a.lx-link:visible').first();
    ctx.facts.followed = await link.count();
    if (ctx.facts.followed) await link.click({ timeout: 2000 });
  }
  ctx.facts.clicks = clicks;
  ctx.facts.group_clicks = groups;
  ctx.facts.focused = focused;
  await page.waitForTimeout(500);
  ctx.facts.roots = await describeStages(page);
  ctx.facts.pwned = await page.evaluate(() => (window.__pwned === undefined ? null : String(window.__pwned)));
  ctx.facts.alerts = await page.evaluate(() => window.__e2eAlerts);
  ctx.facts.inside = await page.locator(STAGE).evaluateAll((roots) => {
    const bad = [];
    const tags = 'script, img, iframe, object, embed, style, link, meta, foreignObject, b, form, input:not(.lx-search), video, audio, image, use';
    for (const root of roots) {
      for (const el of root.querySelectorAll(tags)) bad.push(`<${el.tagName.toLowerCase()} class="${el.getAttribute('class') ?? ''}">`);
      for (const el of root.querySelectorAll('*')) {
        for (const attr of el.attributes) {
          const value = attr.value.trim().toLowerCase();
          if (attr.name.startsWith('on')) bad.push(`${el.tagName.toLowerCase()}[${attr.name}]`);
          if (/href|src|action/.test(attr.name) && /^\s*(javascript|data|vbscript):/.test(value)) {
            bad.push(`${el.tagName.toLowerCase()}[${attr.name}=${attr.value}]`);
          }
        }
      }
    }
    return bad;
  });
  ctx.facts.foreign_b = await page.locator('b.ll-pwn').count();
  ctx.facts.text = await page.locator(STAGE).evaluateAll((roots) => roots.map((r) => r.textContent));
  ctx.facts.labels = await page.locator(`${STAGE} g.lx-node text`).evaluateAll((ts) => ts.map((t) => t.textContent));
  // the details of the node labelled with the first payload show the label as text
  const first = ctx.facts.roots.findIndex((r) => r.stage === 'hlir' && !r.in_pipeline);
  if (first >= 0) {
    const target = page.locator(STAGE).nth(first).locator('g.lx-node').first();
    await target.click();
    ctx.facts.first_details = await details(page, first);
  }
}

// large.ipynb: the time from the stage appearing to data-status="ready", and the longest task.
async function large(page, ctx) {
  await page.addInitScript((sel) => {
    window.__e2e = { tasks: [], appeared: null, ready: null, statuses: [] };
    try {
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__e2e.tasks.push([e.startTime, e.duration]);
      }).observe({ entryTypes: ['longtask'] });
    } catch (error) { window.__e2e.observer_error = String(error); }
    const poll = setInterval(() => {
      const el = document.querySelector(sel);
      if (!el) return;
      const now = performance.now();
      if (window.__e2e.appeared === null) window.__e2e.appeared = now;
      const status = el.dataset.status ?? null;
      const last = window.__e2e.statuses.at(-1);
      if (!last || last[0] !== status) window.__e2e.statuses.push([status, now, Number(el.dataset.drawn ?? -1)]);
      if (status === 'ready' || status === 'error') { window.__e2e.ready = now; clearInterval(poll); }
    }, 20);
  }, STAGE);
  const started = await openNotebook(page, ctx, 'large.ipynb');
  await page.locator(STAGE).first().waitFor({ timeout: 60000 });
  ctx.timings.appeared_ms = Date.now() - started;
  await page.waitForFunction(() => window.__e2e.ready !== null, null, { timeout: ctx.expect.limit_ms + 30000, polling: 250 });
  ctx.timings.ready_ms = Date.now() - started;
  const e2e = await page.evaluate(() => window.__e2e);
  ctx.timings.draw_ms = e2e.ready - e2e.appeared;
  ctx.timings.renderer_draw_ms = Number(await page.locator(STAGE).first().getAttribute('data-draw-ms'));
  const during = e2e.tasks.filter(([start, duration]) => start + duration >= e2e.appeared && start <= e2e.ready);
  ctx.timings.longest_task_ms = during.reduce((m, [, d]) => Math.max(m, d), 0);
  ctx.timings.longest_task_any_ms = e2e.tasks.reduce((m, [, d]) => Math.max(m, d), 0);
  ctx.facts.long_tasks = during.map(([s, d]) => [Math.round(s - e2e.appeared), Math.round(d)]);
  ctx.facts.statuses = e2e.statuses.map(([s, t, d]) => [s, Math.round(t - e2e.appeared), d]);
  ctx.facts.observer_error = e2e.observer_error ?? null;
  await declineKernel(page, ctx, 1000);
  ctx.facts.roots = (await describeStages(page)).map(({ ids, ...rest }) => ({ ...rest, ids: ids.length }));
  // the drawn graph still answers a click and a search
  const root = page.locator(STAGE).first();
  const clickStart = Date.now();
  await root.locator('button.lx-fit').click();
  await root.locator('input.lx-search').fill(ctx.expect.search);
  await page.waitForTimeout(500);
  ctx.facts.search = { matches: (await classIds(page, 0, 'lx-match')).nodes.length,
    count_text: await root.locator('span.lx-search-count').textContent() };
  // Enter in the search selects the match and centres on it; then a real click on it
  await root.locator('input.lx-search').fill(ctx.expect.find);
  await root.locator('input.lx-search').press('Enter');
  await root.locator('.lx-details .lx-details-id').waitFor({ timeout: 5000 });
  ctx.facts.found = { selected: (await classIds(page, 0, 'lx-selected')).nodes, details: (await details(page, 0))?.text ?? null };
  ctx.timings.find_ms = Date.now() - clickStart;
  // a real click on another node now on screen (inside the graph's box, not under the details)
  const onScreen = () => root.evaluate((el, skip) => {
    const box = el.querySelector('svg.lx-graph').getBoundingClientRect();
    const inside = (r) => r.width > 2 && r.height > 2 && r.left >= box.left && r.right <= box.right
      && r.top >= box.top && r.bottom <= box.bottom;
    const hit = [...el.querySelectorAll('g.lx-node')].find((g) => g.dataset.id !== skip && inside(g.getBoundingClientRect()));
    return hit ? hit.dataset.id : null;
  }, ctx.facts.found.selected[0] ?? '');
  let other = await onScreen();
  for (let zoom = 0; other === null && zoom < 8; zoom++) {  // zoom out until a neighbour is in view
    await root.locator('button.lx-zoom-out').click();
    other = await onScreen();
  }
  ctx.facts.click_target = other;
  ctx.facts.scale_at_click = await root.getAttribute('data-scale');
  if (other !== null) {
    await root.locator(`g.lx-node[data-id="${other}"]`).click({ timeout: 10000 });
    await root.locator('.lx-details .lx-details-id').filter({ hasText: other }).waitFor({ timeout: 5000 });
  }
  ctx.facts.clicked = (await classIds(page, 0, 'lx-selected')).nodes;
  ctx.facts.details = (await details(page, 0))?.text ?? null;
  ctx.timings.interaction_ms = Date.now() - clickStart;
  ctx.facts.kernels = await api(page, ctx, 'kernels');
}

// workbench.ipynb, run in a live kernel: the anywidget workbench and the ipywidgets render,
// and a click in the HLIR picture comes back from Python as highlights in the other stages.
async function workbench(page, ctx) {
  const started = await openNotebook(page, ctx, 'workbench.ipynb');
  ctx.facts.step = 'wait for the kernel';
  // the notebook's kernelspec (python3) starts a kernel; wait until it is connected and idle
  await page.waitForFunction(() => {
    const kernel = window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel;
    return kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
  }, null, { timeout: 60000, polling: 200 });
  ctx.facts.kernel_dialog = await page.locator('.jp-Dialog').count();
  ctx.timings.kernel_idle_ms = Date.now() - started;
  ctx.facts.step = 'run all';
  await page.evaluate(() => window.jupyterapp.commands.execute('notebook:run-all-cells'));
  const bench = page.locator('.ll-workbench');
  await bench.waitFor({ timeout: 90000 });
  ctx.timings.workbench_ms = Date.now() - started;
  ctx.facts.step = 'wait for every cell';
  // every cell ran: the kernel is idle again and the last cell has an execution count
  await page.waitForFunction(() => {
    const prompts = [...document.querySelectorAll('.jp-Cell .jp-InputArea-prompt')].map((p) => p.textContent);
    return prompts.length && prompts.every((p) => /\[\d+\]/.test(p));
  }, null, { timeout: 90000, polling: 250 });
  await page.waitForTimeout(1000);
  ctx.timings.all_cells_ms = Date.now() - started;
  ctx.facts.cells = await page.locator('.jp-NotebookPanel .jp-Cell.jp-CodeCell').evaluateAll((cells) => cells.map((c) => ({
    source: c.querySelector('.cm-content')?.textContent ?? '',
    widgets: c.querySelectorAll('.jp-OutputArea-output .jupyter-widgets, .jp-OutputArea-output .ll-workbench').length,
    errors: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], .jp-RenderedText[data-mime-type="application/vnd.jupyter.error"]')]
      .map((e) => e.textContent.slice(0, 2000)),
    text: c.querySelector('.jp-OutputArea')?.textContent.slice(0, 300) ?? '',
    buttons: [...c.querySelectorAll('.jp-OutputArea button')].map((b) => b.textContent.trim()).filter(Boolean).slice(0, 20),
  })));
  ctx.facts.panes = await bench.evaluate((root) => ({
    tabs: [...root.querySelectorAll('.ll-tabs button')].map((b) => b.textContent),
    panes: [...root.querySelectorAll('.ll-pane')].map((p) => ({ hidden: p.hidden, svg: p.querySelectorAll('svg').length,
      nodes: p.querySelectorAll('[data-ll-node]').length, kernels: p.querySelectorAll('.ll-kernel').length })),
  }));
  const wanted = bench.locator(`.ll-pane:not([hidden]) [data-ll-node="${ctx.expect.click ?? ''}"]`);
  const target = (await wanted.count()) ? wanted.first() : bench.locator('.ll-pane:not([hidden]) [data-ll-node]').first();
  const clicked = await target.getAttribute('data-ll-node');
  await target.click();
  await bench.locator('.ll-pane[hidden] .ll-highlight').first().waitFor({ state: 'attached', timeout: 20000 });
  ctx.timings.round_trip_ms = Date.now() - started - ctx.timings.all_cells_ms;
  ctx.facts.round_trip = await bench.evaluate((root, id) => ({
    clicked: id,
    status: root.querySelector('.ll-status')?.textContent ?? null,
    selected: [...root.querySelectorAll('.ll-selected')].map((e) => e.getAttribute('data-ll-node')),
    highlighted: [...root.querySelectorAll('.ll-pane')].map((p) => [...p.querySelectorAll('.ll-highlight')]
      .map((e) => e.getAttribute('data-ll-node'))),
    tabs: [...root.querySelectorAll('.ll-tabs button')].map((b) => ({ text: b.textContent, title: b.title,
      linked: b.querySelector('.ll-linked')?.textContent ?? null })),
    hits: root.querySelectorAll('.ll-line.ll-hit').length,
  }), clicked);
  // the stepper: two rounds; then its status, its table's title and its plot's last point name the same round
  const stepper = page.locator('.jp-Cell').filter({ hasText: 'fresh.egraph.stepper()' }).first();
  ctx.facts.stepper = [];
  for (let round = 1; round <= 2; round++) {
    ctx.facts.step = `stepper round ${round}`;
    await stepper.locator('button', { hasText: 'step round' }).click();
    await stepper.locator('span', { hasText: `round: step ${round};` }).first().waitFor({ timeout: 30000 });
    await page.waitForTimeout(300);
    ctx.facts.stepper.push(await stepper.evaluate((cell) => {
      const area = cell.querySelector('.jp-OutputArea');
      const svg = [...area.querySelectorAll('svg')].find((s) => s.querySelector('#ll-enodes'));
      const centre = (e) => { const r = e.getBoundingClientRect(); return r.left + r.width / 2; };
      return {
        status: [...area.querySelectorAll('span')].map((e) => e.textContent).find((t) => t.startsWith('round:')) ?? null,
        title: [...area.querySelectorAll('p > b')].map((b) => b.textContent).find((t) => t.startsWith('round')) ?? null,
        ticks: svg ? [...svg.querySelectorAll('g[id^="xtick_"] text')].map((t) => [t.textContent, centre(t)]) : null,
        markers: svg ? [...svg.querySelectorAll('#ll-enodes use')].map(centre) : null,
      };
    }));
  }

  // the inspector: a search for an op lists e-classes by their op, and an e-class's e-node rows name theirs
  ctx.facts.step = 'inspector';
  const inspector = page.locator('.jp-Cell').filter({ hasText: 'comp.egraph.inspector()' }).first();
  await inspector.locator('input[type="text"]').first().fill(ctx.expect.op);
  await inspector.locator('input[type="text"]').first().press('Enter');
  const list = inspector.locator('select').first();
  await page.waitForFunction((el) => el.options.length > 0, await list.elementHandle(), { timeout: 20000 });
  // by position: the list can be drawn again between reading an option's value and selecting it (a fresh-clone CI
  // run once timed out selecting a value no longer listed)
  await list.selectOption({ index: 0 });
  await inspector.locator('table.ll-enodes tbody tr').first().waitFor({ timeout: 20000 });
  ctx.facts.inspector = await inspector.evaluate((cell) => {
    const select = cell.querySelector('select');
    return {
      entries: [...select.options].map((o) => o.textContent),
      cut: select.scrollWidth > select.clientWidth + 1,
      rows: [...cell.querySelectorAll('table.ll-enodes tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)),
      buttons: [...cell.querySelectorAll('.jp-OutputArea button')].map((b) => b.textContent.trim()).filter((t) => t.includes(' · ')),
    };
  });

  // the profiler: a search launched from its button; the candidates listed with their spread, ranked by median
  ctx.facts.step = 'profiler';
  const profiler = page.locator('.jp-Cell').filter({ hasText: 'comp.profiler(' }).first();
  await profiler.locator('button', { hasText: 'Launch' }).click();
  await profiler.locator('span', { hasText: /^done:/ }).first().waitFor({ timeout: 90000 });
  await page.waitForTimeout(500);
  ctx.facts.profiler = await profiler.evaluate((cell) => ({
    status: [...cell.querySelectorAll('span')].map((e) => e.textContent).find((t) => t.startsWith('done:')) ?? null,
    options: [...cell.querySelectorAll('select option')].map((o) => o.textContent.replace(/\u00a0/g, ' ')),
    ranking: [...cell.querySelectorAll('table')].filter((t) => t.textContent.includes('median ms'))
      .flatMap((t) => [...t.querySelectorAll('tr')].slice(1).map((tr) => [...tr.children].map((td) => td.textContent))),
  }));
}

// deep.ipynb: a 2-layer Llama's HLIR, e-graph and LLIR. Focus on a node (depth 2, 3, 1, then Show all),
// fold by layer and expand a group by clicking it, fold the e-graph by HLIR node and click a group there.
// ctx.expect: {stages: [names in order], hlir: {focus, group}, llir: {group}, egraph: {focus, group}}; after each
// step the stage's state.
async function deep(page, ctx) {
  const plan = ctx.expect;
  ctx.facts.steps = {};
  // each stage is shown once in this notebook: its root by data-stage
  const rootOf = (stage) => page.locator(`${STAGE}[data-stage="${stage}"]`);
  const ready = async (stage) => {
    const root = rootOf(stage);
    await root.waitFor({ state: 'attached', timeout: 60000 });
    await root.scrollIntoViewIfNeeded();
    await page.waitForFunction((s) => document.querySelector(s)?.dataset.status === 'ready',
      `${STAGE}[data-stage="${stage}"]`, { timeout: 60000, polling: 50 });
    return root;
  };
  const started = await openNotebook(page, ctx, 'deep.ipynb');
  await page.locator(STAGE).first().waitFor({ timeout: 60000 });
  await declineKernel(page, ctx, 3000);
  for (const stage of plan.stages) await ready(stage);
  ctx.timings.all_ready_ms = Date.now() - started;
  ctx.facts.roots = (await describeStages(page)).map(({ ids, ...rest }) => ({ ...rest, ids: ids.length }));
  // the state of a stage once it is ready again: its data-* and what it draws
  const state = async (stage, withIds) => {
    const root = await ready(stage);
    return root.evaluate((el, ids) => ({
      status: el.dataset.status, drawn: Number(el.dataset.drawn), visible: Number(el.dataset.visible),
      fold: el.dataset.fold ?? null, focus: el.dataset.focus ?? null, depth: Number(el.dataset.focusDepth),
      groups_attr: Number(el.dataset.groups), expanded: Number(el.dataset.expanded),
      selected: el.dataset.selected ?? null,
      nodes: el.querySelectorAll('g.lx-node').length,
      ids: ids ? [...el.querySelectorAll('g.lx-node[data-id]')].map((g) => g.dataset.id) : null,
      groups: [...el.querySelectorAll('g.lx-node.lx-group')].map((g) => ({ key: g.dataset.group,
        size: Number(g.dataset.size), label: g.querySelector('text')?.textContent ?? null })),
      edges: el.querySelectorAll('path.lx-edge').length,
      merged: el.querySelectorAll('path.lx-edge.lx-merged').length,
    }), withIds);
  };
  const timed = async (name, stage, action, withIds = true) => {
    ctx.facts.step = name;
    const t = Date.now();
    await action(rootOf(stage));
    ctx.facts.steps[name] = await state(stage, withIds);
    ctx.timings[`${name}_ms`] = Date.now() - t;
  };
  const node = (root, id) => root.locator(`g.lx-node[data-id="${id.replace(/["\\]/g, '\\$&')}"]`);
  const group = (root, key) => root.locator(`g.lx-node.lx-group[data-group="${key.replace(/["\\]/g, '\\$&')}"]`);

  // HLIR: focus on a node, change the depth, show all; fold by layer, click the group, fold all
  await timed('hlir_select', 'hlir', async (root) => {
    await root.scrollIntoViewIfNeeded();
    await root.locator('button.lx-fit').click();
    await node(root, plan.hlir.focus).click();
  });
  await timed('hlir_focus', 'hlir', (root) => root.locator('button.lx-focus').click());
  await timed('hlir_depth_3', 'hlir', (root) => root.locator('button.lx-depth-more').click());
  await timed('hlir_depth_1', 'hlir', async (root) => {
    await root.locator('button.lx-depth-less').click();
    await root.locator('button.lx-depth-less').click();
  });
  await timed('hlir_show_all', 'hlir', (root) => root.locator('button.lx-show-all').click());
  await timed('hlir_fold_layer', 'hlir', (root) => root.locator('select.lx-fold').selectOption('layer'));
  await timed('hlir_expand', 'hlir', (root) => group(root, plan.hlir.group).click());
  await timed('hlir_fold_all', 'hlir', (root) => root.locator('button.lx-fold-all').click());

  // LLIR: fold by layer (one group per copy), expand one copy
  await timed('llir_fold_layer', 'llir', async (root) => {
    await root.scrollIntoViewIfNeeded();
    await root.locator('button.lx-fit').click();
    await root.locator('select.lx-fold').selectOption('layer');
  });
  await timed('llir_expand', 'llir', (root) => group(root, plan.llir.group).click());

  // e-graph (large, drawn over several frames): focus on an e-node, then fold by HLIR node and click a group
  // at the fitted (tiny) scale
  const egraph = rootOf('egraph');
  await egraph.scrollIntoViewIfNeeded();
  ctx.facts.egraph_options = await egraph.locator('select.lx-fold option')
    .evaluateAll((os) => os.map((o) => ({ value: o.value, disabled: o.disabled })));
  // it opened folded by HLIR node (too tall to read unfolded at fit): its fitted scale, then No folding
  await ready('egraph');
  await egraph.locator('button.lx-fit').click();
  ctx.facts.egraph_opening = await egraph.evaluate((el) => ({ fold: el.dataset.fold ?? null, level: el.dataset.level ?? null,
    scale: Number(el.dataset.scale), opening_scale: Number(el.dataset.openingScale),
    summary: el.querySelector('.lx-summary')?.textContent ?? null }));
  await timed('egraph_unfold', 'egraph', (root) => root.locator('select.lx-fold').selectOption('none'), false);
  await timed('egraph_select', 'egraph', async (root) => {
    const search = root.locator('input.lx-search');
    await search.fill(plan.egraph.focus);
    await search.press('Enter'); // selects (and centres on) the first match
  }, false);
  await timed('egraph_focus', 'egraph', async (root) => {
    await root.locator('button.lx-depth-less').click(); // depth 1
    await root.locator('button.lx-focus').click();
  });
  await timed('egraph_fold_hlir', 'egraph', async (root) => {
    await root.locator('button.lx-show-all').click();
    await root.locator('select.lx-level').selectOption('all'); // every e-class: the large-graph case
    await root.locator('select.lx-fold').selectOption('hlir');
  }, false);
  await timed('egraph_expand', 'egraph', async (root) => {
    await root.locator('button.lx-fit').click();
    ctx.facts.egraph_scale = Number(await root.getAttribute('data-scale'));
    await group(root, plan.egraph.group).click();
  }, false);
}

const SCENARIOS = { stages, malicious, large, deep, workbench };

// ---- main ------------------------------------------------------------------------------------

async function main() {
  const [scenario, base, token, outDir = '.', expectJson = '{}'] = process.argv.slice(2);
  if (!SCENARIOS[scenario] || !base || !token) {
    console.error(`usage: node lab.mjs {${Object.keys(SCENARIOS).join('|')}} BASE_URL TOKEN [OUT_DIR] [EXPECT_JSON]`);
    process.exit(2);
  }
  const ctx = { scenario, base, token, expect: JSON.parse(expectJson), facts: {}, timings: {},
    requests: 0, off_machine: [], console_errors: [], page_errors: [], error: null };
  const t0 = Date.now();
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: LAUNCH_ARGS });
  ctx.timings.launch_ms = Date.now() - t0;
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const note = (url) => { ctx.requests++; if (!isLocal(url)) ctx.off_machine.push(url); };
  context.on('request', (request) => note(request.url()));
  const page = await context.newPage();
  page.on('websocket', (ws) => note(ws.url()));
  page.on('console', (m) => { if (m.type() === 'error') ctx.console_errors.push(m.text().slice(0, 500)); });
  page.on('pageerror', (e) => ctx.page_errors.push(String(e).slice(0, 500)));
  page.setDefaultTimeout(30000);
  const deadline = Number(process.env.LUMINAL_LAB_E2E_DEADLINE_S || 150) * 1000;
  let timer;
  try {
    await Promise.race([
      SCENARIOS[scenario](page, ctx),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`the scenario ran past ${deadline / 1000} s`)), deadline); }),
    ]);
  } catch (error) {
    ctx.error = String(error?.stack ?? error).slice(0, 3000);
    try {
      mkdirSync(outDir, { recursive: true });
      await page.screenshot({ path: join(outDir, `${scenario}.png`), fullPage: false });
      ctx.screenshot = join(outDir, `${scenario}.png`);
    } catch { /* no screenshot */ }
    try {
      ctx.facts.cells_at_error = await page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').evaluateAll((cells) => cells
        .map((c) => `${c.querySelector('.jp-InputArea-prompt')?.textContent ?? ''} ${(c.querySelector('.jp-OutputArea')?.textContent ?? '').slice(0, 300)}`));
      ctx.facts.kernel_status = await page.locator('.jp-Notebook-ExecutionIndicator').first().getAttribute('data-status');
    } catch { /* page gone */ }
    try { ctx.facts.roots_at_error = (await describeStages(page)).map(({ ids, ...r }) => ({ ...r, ids: ids.length })); } catch { /* page gone */ }
  } finally {
    clearTimeout(timer);
    ctx.timings.total_ms = Date.now() - t0;
    await browser.close();
  }
  const { expect, token: _token, ...result } = ctx;
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
  process.exit(ctx.error ? 1 : 0);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
