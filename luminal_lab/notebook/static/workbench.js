// comp.workbench(): the anywidget view (provenance.js comes first). A tab per stage; a click sets `selected`,
// Python answers with `highlighted` and `cuda_lines`, which are painted. The last tab is the program's `search`,
// redrawn whenever Python sends it again. Data reaches the page as text only.

function svgOf(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  return document.importNode(doc.documentElement, true);
}

function listing(kernels) {
  const box = document.createElement("div");
  for (const kernel of kernels) {
    const block = document.createElement("div");
    block.className = "ll-kernel";
    block.dataset.node = kernel.id;
    const title = document.createElement("div");
    title.textContent = `${kernel.label} (${kernel.id})`;
    const pre = document.createElement("pre");
    pre.className = "ll-source";
    kernel.lines.forEach((text, i) => {
      const line = document.createElement("span");
      line.className = "ll-line";
      line.dataset.line = String(i + 1);
      const number = document.createElement("span");
      number.className = "ll-lineno";
      number.textContent = String(i + 1);
      line.append(number, text);
      pre.append(line);
    });
    block.append(title, pre);
    box.append(block);
  }
  return box;
}

function table(columns, rows) {
  const box = document.createElement("table");
  box.className = "ll-table";
  const head = document.createElement("tr");
  for (const [title] of columns) {
    const cell = document.createElement("th");
    cell.textContent = title;
    head.append(cell);
  }
  box.append(head);
  for (const row of rows) {
    const line = document.createElement("tr");
    line.className = `ll-outcome-${row.outcome}`;
    for (const [, key] of columns) {
      const cell = document.createElement("td");
      const value = row[key];
      cell.textContent = value === null || value === undefined ? "" : key === "ms" ? value.toFixed(3) : String(value);
      line.append(cell);
    }
    box.append(line);
  }
  return box;
}

function searchTab(box, search) {
  const summary = document.createElement("div");
  summary.className = "ll-summary";
  summary.textContent = search.summary;
  const measured = document.createElement("h4");
  measured.textContent = `Candidates measured: ${search.candidates.length}`;
  const history = document.createElement("h4");
  history.textContent = "History";
  const note = document.createElement("div");
  note.className = "ll-note";
  note.textContent = search.note;
  box.replaceChildren(
    summary, measured,
    table([["#", "index"], ["generation", "generation"], ["outcome", "outcome"], ["ms", "ms"],
      ["reason", "reason"]], search.candidates),
    history, note,
    table([["genome", "hash"], ["device", "device"], ["outcome", "outcome"], ["ms", "ms"],
      ["machine", "machine"]], search.history));
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "ll-workbench";
  const tabs = document.createElement("div");
  tabs.className = "ll-tabs";
  const status = document.createElement("div");
  status.className = "ll-status";
  root.append(tabs, status);
  const panes = model.get("panes").map((pane) => {
    const tab = document.createElement("button");
    const badge = document.createElement("span");
    badge.className = "ll-linked";
    tab.append(pane.title, badge);
    const box = document.createElement("div");
    box.className = "ll-pane";
    const summary = document.createElement("div");
    summary.className = "ll-summary";
    summary.textContent = pane.summary;
    const picture = document.createElement("div");
    picture.className = "ll-stage-picture";
    if (pane.svg) picture.append(svgOf(pane.svg));
    if (pane.kernels) picture.append(listing(pane.kernels));
    if (pane.note) {
      const note = document.createElement("div");
      note.className = "ll-note";
      note.textContent = pane.note;
      picture.append(note);
    }
    box.append(summary, picture);
    const nodes = llIndex(box, pane.targets);
    box.addEventListener("click", (event) => {
      const hit = llTarget(event, box, nodes, pane.targets);
      if (hit) {
        model.set("selected", hit);
        model.save_changes();
      }
    });
    tabs.append(tab);
    root.append(box);
    return { pane, tab, badge, box, nodes };
  });
  const search = { tab: document.createElement("button"), box: document.createElement("div") };
  search.tab.textContent = "Search";
  search.tab.title = "The program's search: the one behind its calls, and the tuning records of earlier ones";
  search.box.className = "ll-search";
  tabs.append(search.tab);
  root.append(search.box);
  const drawSearch = () => searchTab(search.box, model.get("search"));
  const show = (active) => {
    for (const p of [...panes, search]) {
      p.box.hidden = p !== active;
      p.tab.classList.toggle("ll-active", p === active);
    }
  };
  [...panes, search].forEach((p) => p.tab.addEventListener("click", () => show(p)));
  const paint = () => {
    const highlighted = model.get("highlighted");
    const selected = model.get("selected");
    for (const p of panes) {
      llPaint(p.nodes, p.pane.targets, highlighted, selected.stage ? selected : null);
      // the badge counts one thing, as the pipeline's does: another stage's nodes linked to the selection
      const count = p.pane.stage === selected.stage ? 0 : (highlighted[p.pane.stage] || []).length;
      p.badge.textContent = count ? String(count) : "";
      p.tab.title = count && selected.stage
        ? `${count} node${count === 1 ? "" : "s"} linked to the selected ${selected.stage} ${selected.id}`
        : `${p.pane.title}: click a node to see its counterparts in every stage`;
    }
    llPaintLines(root, model.get("cuda_lines"));
    status.textContent = selected.stage
      ? `selected ${selected.stage} ${selected.id}`
      : "Click a node to see its counterparts in every stage.";
  };
  const events = ["change:selected", "change:highlighted", "change:cuda_lines"];
  events.forEach((name) => model.on(name, paint));
  model.on("change:search", drawSearch);
  show(panes[0]);
  paint();
  drawSearch();
  el.append(root);
  return () => {
    events.forEach((name) => model.off(name, paint));
    model.off("change:search", drawSearch);
  };
}

export default { render };
