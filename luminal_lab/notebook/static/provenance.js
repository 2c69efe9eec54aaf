// The browser half of provenance, shared by the workbench widget and the HTML report: find the node a
// click landed on, and mark the highlighted nodes and CUDA lines. (The Python half: luminal_lab.compiler.provenance.)

// Every element of a pane that draws a node: an SVG <g> whose id or class names a node of `targets`
// (node id -> stage; a constant drawn twice has its node id as class), or a CUDA kernel's listing
// (data-node). Returns element -> node ids.
function llIndex(root, targets) {
  const nodes = new Map();
  for (const el of root.querySelectorAll("g, [data-node]")) {
    const keys = el.dataset.node ? [el.dataset.node] : [el.id, ...el.classList];
    const known = [...new Set(keys.filter((key) => Object.hasOwn(targets, key)))];
    if (known.length) {
      nodes.set(el, known);
      el.setAttribute("data-ll-node", known[0]);
    }
  }
  return nodes;
}

// The node a click landed on, {stage, id}: the nearest indexed element up from the click; or null.
function llTarget(event, root, nodes, targets) {
  for (let el = event.target; el && el !== root; el = el.parentElement) {
    if (nodes.has(el)) {
      const id = nodes.get(el)[0];
      return { stage: targets[id], id };
    }
  }
  return null;
}

// Mark the nodes in `highlighted` (stage -> ids) and the `selected` one ({stage, id} or null).
function llPaint(nodes, targets, highlighted, selected) {
  for (const [el, keys] of nodes) {
    const on = keys.some((key) => (highlighted[targets[key]] || []).includes(key));
    const chosen = Boolean(selected) && keys.some((key) => selected.stage === targets[key] && selected.id === key);
    el.classList.toggle("ll-highlight", on);
    el.classList.toggle("ll-selected", chosen);
  }
}

// Mark the CUDA source lines in `lines` (CUDA kernel id -> line numbers) under `root`.
function llPaintLines(root, lines) {
  for (const block of root.querySelectorAll(".ll-kernel[data-node]")) {
    const wanted = lines[block.dataset.node] || [];
    for (const line of block.querySelectorAll(".ll-line")) {
      line.classList.toggle("ll-hit", wanted.includes(Number(line.dataset.line)));
    }
  }
}
