// comp.report(path): makes the self-contained page's stages clickable from its #ll-provenance JSON
// (provenance.js comes first); #select=llir:k5 in the address selects a node on load.

(() => {
  const data = JSON.parse(document.getElementById("ll-provenance").textContent);
  const status = document.querySelector(".ll-status");
  const panes = [...document.querySelectorAll("section.ll-stage")].map((section) => {
    const targets = data.targets[section.dataset.stage];
    return { section, targets, nodes: llIndex(section, targets) };
  });
  const select = (hit) => {
    const entry = hit && (data.selections[hit.stage] || {})[hit.id];
    const highlighted = entry ? entry.highlighted : {};
    for (const p of panes) llPaint(p.nodes, p.targets, highlighted, entry ? hit : null);
    llPaintLines(document, entry ? entry.cuda_lines : {});
    status.textContent = entry
      ? `selected ${hit.stage} ${hit.id}: ` + Object.entries(highlighted).map(([s, ids]) => `${s} ${ids.join(" ")}`)
        .join(" · ")
      : "Click a node in any stage to highlight its counterparts in the others.";
  };
  for (const p of panes) {
    p.section.addEventListener("click", (event) => {
      const hit = llTarget(event, p.section, p.nodes, p.targets);
      if (hit) select(hit);
    });
  }
  const wanted = new URLSearchParams(location.hash.slice(1)).get("select");
  const colon = wanted ? wanted.indexOf(":") : -1;
  select(colon > 0 ? { stage: wanted.slice(0, colon), id: wanted.slice(colon + 1) } : null);
  document.body.dataset.ready = "1";
})();
