// The console at fleet scale (100 clusters of 5,000 nodes): the clusters a page at a time with
// a search by name and state, and a cluster's topology as a tree collapsed by default, each
// level fetched when it is opened (`?top=true`, then `?parent=NAME`), never 600 ToRs at once.
// The views in app.js call these with their `api` function.

import { badge, fmt, h, s, when } from "./dom.js";

export const CLUSTERS_PER_PAGE = 20;
const CLUSTER_STATES = ["Ready", "NotReady", "Unknown"]; // ClusterState (db/models/clusters.py)

// ---------------------------------------------------------------- bars (SVG)
export function capacityBar(capacity, width = 360) {
  // One row per GPU model: used (accent) then free (green) on a track.
  const rows = capacity.length ? capacity : [{ gpuModel: "no GPUs", total: 0, used: 0, free: 0 }];
  const height = rows.length * 22;
  const svg = s("svg", { width, height, role: "img", "aria-label": "GPU capacity" });
  const barX = 70, barW = width - barX - 150;
  rows.forEach((row, i) => {
    const y = i * 22 + 4;
    const used = row.total ? (row.used / row.total) * barW : 0;
    svg.append(
      s("text", { x: 0, y: y + 11 }, row.gpuModel),
      s("rect", { class: "track", x: barX, y, width: barW, height: 14, rx: 3 }),
      s("rect", { class: "used", x: barX, y, width: used, height: 14, rx: 3 }),
      s("text", { x: barX + barW + 8, y: y + 11, class: "muted" },
        `${fmt(row.free)} free / ${fmt(row.total)}`),
    );
  });
  return svg;
}

export function ratioBar(value, total, width = 160, cls = "used") {
  const svg = s("svg", { width, height: 12 });
  const w = total ? Math.min(1, value / total) * width : 0;
  svg.append(
    s("rect", { class: "track", x: 0, y: 0, width, height: 12, rx: 3 }),
    s("rect", { class: cls, x: 0, y: 0, width: w, height: 12, rx: 3 }),
  );
  return svg;
}

// ---------------------------------------------------------------- clusters, a page at a time
export function clusterTable(clusters) {
  if (!clusters.length) return h("p", { class: "muted" }, "no cluster matches");
  return h("table", { "data-testid": "clusters" },
    h("tr", {}, h("th", {}, "cluster"), h("th", {}, "state"), h("th", { class: "num" }, "nodes ready"),
      h("th", {}, "GPUs (used of total)"), h("th", {}, "heartbeat")),
    clusters.map((c) => h("tr", { "data-testid": `cluster-${c.name}` },
      h("td", {}, h("a", { href: `#/clusters/${encodeURIComponent(c.name)}` }, c.name)),
      h("td", {}, badge(c.state)),
      h("td", { class: "num" }, `${fmt(c.nodes.ready)}/${fmt(c.nodes.total)}`),
      h("td", {}, capacityBar(c.capacity, 420)),
      h("td", { class: "muted" }, when(c.lastHeartbeatAt)))));
}

// The Clusters page's state: its search (kept across the 2-second refreshes) and the tokens of
// the pages seen, to go back.
const clusterPager = { cursors: [null] };

export function resetClusterPager() {
  clusterPager.cursors = [null];
}

// The search form, drawn once per visit (a refresh never redraws what one types in).
export function clusterFilters(onChange) {
  let typing = null;
  const changed = () => { resetClusterPager(); onChange(); };
  return h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); changed(); } },
    h("input", { name: "text", type: "search", placeholder: "cluster name", "aria-label": "cluster name",
      oninput: () => { clearTimeout(typing); typing = setTimeout(changed, 300); } }),
    h("select", { name: "state", "aria-label": "state", onchange: changed },
      h("option", { value: "" }, "any state"), CLUSTER_STATES.map((st) => h("option", { value: st }, st))));
}

// One page of the clusters matching `form`, with its Previous / Next buttons.
export async function clusterPage(api, form, onChange) {
  const params = new URLSearchParams({ limit: String(CLUSTERS_PER_PAGE) });
  for (const [key, value] of new FormData(form)) if (value) params.set(key, value);
  const cursor = clusterPager.cursors[clusterPager.cursors.length - 1];
  if (cursor) params.set("continue", cursor);
  const page = await api(`/api/v1/clusters?${params}`);
  return [clusterTable(page.items), h("div", { class: "pager" },
    h("button", { disabled: clusterPager.cursors.length <= 1,
      onclick: () => { clusterPager.cursors.pop(); onChange(); } }, "Previous"),
    h("span", { class: "muted" }, `page ${clusterPager.cursors.length}`),
    h("button", { "data-testid": "clusters-next", disabled: !page.metadata.continue,
      onclick: () => { clusterPager.cursors.push(page.metadata.continue); onChange(); } }, "Next"))];
}

// ---------------------------------------------------------------- topology, one level at a time
// The domains opened on the page shown (cluster name -> set of domain names): a refresh
// fetches the top tier and each opened domain's children again, so free GPUs stay live.
const opened = { cluster: null, names: new Set() };

// The cluster's top tier and the children of every opened domain: name -> its children.
export async function topologyLevels(api, cluster) {
  if (opened.cluster !== cluster) Object.assign(opened, { cluster, names: new Set() });
  const base = `/api/v1/clusters/${encodeURIComponent(cluster)}/topology`;
  const names = [...opened.names];
  const [top, ...children] = await Promise.all([
    api(`${base}?top=true`),
    // 422: the domain left the inventory since it was opened (the level is dropped below).
    ...names.map((n) => api(`${base}?parent=${encodeURIComponent(n)}`).catch((e) => {
      if (e.status === 422) return null;
      throw e;
    })),
  ]);
  const levels = new Map([["", top.domains]]);
  names.forEach((n, i) => {
    if (children[i]) levels.set(n, children[i].domains);
    else opened.names.delete(n);
  });
  return levels;
}

// The tree of `levels`; opening or closing a domain calls `onToggle` (the view redraws).
export function topologyTree(levels, onToggle) {
  const roots = levels.get("") || [];
  if (!roots.length) return h("p", { class: "muted" }, "no topology reported");
  const node = (d) => {
    const total = d.capacity.reduce((a, c) => a + c.total, 0);
    const free = d.capacity.reduce((a, c) => a + c.free, 0);
    const open = levels.has(d.name);
    const toggle = d.children
      ? h("button", { class: "toggle", "aria-expanded": String(open), "data-testid": `toggle-${d.name}`,
        title: open ? "collapse" : `show its ${d.children} domains`,
        onclick: () => { if (open) opened.names.delete(d.name); else opened.names.add(d.name); onToggle(); } },
      open ? "▾" : "▸")
      : h("span", { class: "toggle" });
    return h("li", { "data-testid": `domain-${d.name}` },
      h("div", { class: "row" }, toggle, h("span", { class: "name" }, d.name),
        h("span", { class: "muted" }, `tier ${d.tier}${d.tierName ? ` (${d.tierName})` : ""}`),
        h("span", { class: "muted" }, `${fmt(d.nodes)} nodes${d.children ? `, ${d.children} below` : ""}`),
        ratioBar(free, total, 120, "free"), h("span", {}, `${fmt(free)} / ${fmt(total)} free`),
        d.nodesNotReady.length ? h("span", { class: "error" }, `${d.nodesNotReady.length} not ready`) : null),
      open ? h("ul", { class: "tree" }, sorted(levels.get(d.name) || []).map(node)) : null);
  };
  return h("ul", { class: "tree" }, sorted(roots).map(node));
}

const collator = new Intl.Collator("en", { numeric: true });
const sorted = (domains) => [...domains].sort((a, b) => collator.compare(a.name, b.name)); // tor2 < tor10
