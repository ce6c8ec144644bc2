// Volcano Global admin console: a dependency-free single page over the REST API.
// Views re-fetch their data every 2 seconds and redraw over what is shown (live updates, dom.js's
// `redraw`); forms are drawn once (`fill`) and never redrawn by it.

import { badge, fill, fmt, h, redraw, s, when } from "./dom.js";
import { dataPage, jobDataPanel } from "./data.js";
import {
  capacityBar, CLUSTERS_PER_PAGE, clusterFilters, clusterPage, clusterTable, ratioBar, resetClusterPager,
  topologyLevels, topologyTree,
} from "./fleet.js";
import { historyPage } from "./history.js";

const REFRESH_MS = 2000;
const TOKEN_KEY = "vglobal-token";
const TERMINAL = new Set(["Succeeded", "Failed", "Cancelled"]);
const MAX_LINK_GRAPH = 24; // clusters beyond which the ring of the link graph is unreadable
const MAX_DEPTH = 8;
const JOB_FILTERS = ["queue", "state", "cluster", "text"]; // queue tree indentation classes in style.css (.depth-0 .. .depth-8)
const STATES = ["Pending", "Placed", "Dispatched", "Running", "Succeeded", "Failed", "Cancelled"];

let timer = null;
let generation = 0; // bumps on navigation so a late response never draws on the wrong page
let pressed = null; // while a pointer button is down: a promise of its release
let release = () => {};
let presser = null; // the pointer whose press it is: another finger's release does not end it

// How long a job's run ran (started to finished, or to now while it runs).
function duration(timestamps) {
  if (!timestamps.startedAt) return "-";
  const end = timestamps.finishedAt ? new Date(timestamps.finishedAt) : new Date();
  const seconds = Math.max(0, Math.round((end - new Date(timestamps.startedAt)) / 1000));
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

// ---------------------------------------------------------------- API
class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = { Authorization: `Bearer ${token}`, ...(options.headers || {}) };
  const response = await fetch(path, { ...options, headers });
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (response.status === 401) {
    logout("Your token was refused; log in again.");
    throw new ApiError(401, body);
  }
  if (!response.ok) throw new ApiError(response.status, body);
  if (pressed) await pressed; // the view draws from it: not between a click's press and release
  return body;
}

// ---------------------------------------------------------------- charts (SVG)
function linkGraph(clusters, links) {
  const size = 380, cx = size / 2, cy = size / 2 - 6, r = 130;
  const svg = s("svg", { width: size, height: size, role: "img", "aria-label": "inter-cluster links",
    "data-testid": "link-graph" });
  const pos = {};
  clusters.forEach((c, i) => {
    const angle = (2 * Math.PI * i) / Math.max(clusters.length, 1) - Math.PI / 2;
    pos[c.name] = [cx + r * Math.cos(angle), cy + r * Math.sin(angle)];
  });
  const maxCap = Math.max(1, ...links.map((l) => l.capacityGbps));
  for (const link of links) {
    const a = pos[link.clusterA], b = pos[link.clusterB];
    if (!a || !b) continue;
    const busy = link.reservedGbps > 0;
    svg.append(s("line", { class: `edge${busy ? " busy" : ""}`, x1: a[0], y1: a[1], x2: b[0], y2: b[1],
      "stroke-width": 2 + (6 * link.capacityGbps) / maxCap, "stroke-opacity": 0.75 }));
    const mx = (a[0] + b[0]) / 2, my = (a[1] + b[1]) / 2;
    svg.append(s("text", { x: mx, y: my - 4, "text-anchor": "middle" },
      `${fmt(link.reservedGbps)} / ${fmt(link.capacityGbps)} Gbps`));
  }
  for (const c of clusters) {
    const [x, y] = pos[c.name];
    const node = s("g", {});
    node.append(
      s("circle", { class: "node", cx: x, cy: y, r: 24 }),
      s("text", { x, y: y + 40, "text-anchor": "middle" }, c.name),
    );
    svg.append(node);
  }
  return svg;
}

function roundsChart(rounds) {
  const width = 420, height = 130, pad = 24;
  const svg = s("svg", { width, height, role: "img", "aria-label": "scheduling rounds" });
  const items = [...rounds].reverse();
  const maxWall = Math.max(0.001, ...items.map((r) => r.wallSeconds));
  const bw = (width - pad) / Math.max(items.length, 1);
  items.forEach((r, i) => {
    const bh = ((height - pad) * r.wallSeconds) / maxWall;
    const bar = s("rect", { class: r.placed ? "used" : "bar", x: pad + i * bw + 1, y: height - pad - bh,
      width: Math.max(bw - 2, 1), height: bh });
    bar.append(s("title", {}, `round ${r.generation}: ${(r.wallSeconds * 1000).toFixed(0)} ms, placed ${r.placed}`));
    svg.append(bar);
  });
  svg.append(
    s("text", { x: 0, y: 10, class: "muted" }, `${(maxWall * 1000).toFixed(0)} ms`),
    s("text", { x: pad, y: height - 6, class: "muted" }, "older"),
    s("text", { x: width, y: height - 6, class: "muted", "text-anchor": "end" }, "newest"),
  );
  return svg;
}

function placementChart(shares) {
  // One bar per cluster, segmented by topology domain (pods per domain).
  const width = 620, rowH = 34;
  const svg = s("svg", { width, height: shares.length * rowH + 8, role: "img",
    "aria-label": "placement", "data-testid": "placement-chart" });
  const maxPods = Math.max(1, ...shares.map((x) => x.pods));
  const barX = 130, barW = width - barX - 10;
  shares.forEach((share, i) => {
    const y = i * rowH + 4;
    svg.append(s("text", { x: 0, y: y + 16 }, share.cluster));
    let x = barX;
    const domains = Object.entries(share.domains || {});
    const parts = domains.length ? domains : [[share.cluster, share.pods]];
    parts.forEach(([domain, pods], j) => {
      const w = (barW * pods) / maxPods;
      const rect = s("rect", { class: j % 2 ? "held" : "used", x, y, width: Math.max(w - 1, 1), height: 22, rx: 2 });
      rect.append(s("title", {}, `${domain}: ${pods} pods`));
      svg.append(rect);
      if (w > 46) svg.append(s("text", { x: x + 4, y: y + 15 }, `${pods}`));
      x += w;
    });
  });
  return svg;
}

// ---------------------------------------------------------------- views
const views = {
  async overview(main, token) {
    const [overview, clusters, links, rounds] = await Promise.all([
      api("/api/v1/overview"),
      api(`/api/v1/clusters?limit=${CLUSTERS_PER_PAGE}`),
      api("/api/v1/links"),
      api("/api/v1/scheduling/rounds?limit=20"),
    ]);
    if (token !== generation) return;
    const j = overview.jobs;
    const active = j.Placed + j.Dispatched;
    const finished = j.Succeeded + j.Failed + j.Cancelled;
    const clusterCount = Object.values(overview.clusters).reduce((a, b) => a + b, 0);
    redraw(main,
      h("h1", {}, "Overview"),
      h("div", { class: "counters" },
        counter("Pending", fmt(j.Pending), "counter-pending"),
        counter("Placed / dispatched", fmt(active), "counter-placed"),
        counter("Running", fmt(j.Running), "counter-running"),
        counter("Finished", fmt(finished), "counter-finished"),
        counter("Clusters ready", `${overview.clusters.Ready} / ${clusterCount}`, "counter-clusters"),
      ),
      h("div", { class: "grid" },
        h("section", { class: "panel" }, h("h2", {}, "GPUs by model"), capacityBar(overview.gpus, 520),
          h("div", { class: "legend" }, h("span", {}, h("i", { class: "used" }), "used"),
            h("span", {}, h("i", { class: "track" }), "free")),
          h("p", {}, h("a", { href: "#/history" }, "Allocation, queue length and waits over time"))),
        h("section", { class: "panel" }, h("h2", {}, "Inter-cluster links (reserved / capacity)"),
          overviewLinks(clusters.items, links.items)),
      ),
      h("section", { class: "panel" },
        h("h2", {}, clusterCount > clusters.items.length
          ? `Clusters (the first ${clusters.items.length} of ${clusterCount} by name)` : "Clusters"),
        clusterTable(clusters.items),
        clusterCount > clusters.items.length
          ? h("p", {}, h("a", { href: "#/clusters", "data-testid": "all-clusters" }, `Search all ${clusterCount} clusters`))
          : null),
      h("section", { class: "panel" }, h("h2", {}, "Last scheduling rounds"),
        rounds.items.length ? roundsChart(rounds.items) : h("p", { class: "muted" }, "no round yet"),
        roundsTable(rounds.items)),
    );
  },

  async clusters(main, token) {
    let form = main.querySelector("form.filters");
    if (!form || main.dataset.view !== "clusters") {
      main.dataset.view = "clusters";
      form = clusterFilters(refresh);
      fill(main, h("h1", {}, "Clusters"), form, h("section", { id: "cluster-page", class: "panel" }));
    }
    const page = await clusterPage(api, form, refresh);
    if (token !== generation) return;
    redraw(main.querySelector("#cluster-page"), ...page);
  },

  async links(main, token) {
    const [clusters, links] = await Promise.all([api("/api/v1/clusters"), api("/api/v1/links")]);
    if (token !== generation) return;
    redraw(main, h("h1", {}, "Links"),
      h("section", { class: "panel" }, h("h2", {}, "Inter-cluster links (reserved / capacity)"),
        linkGraph(clusters.items, links.items)),
      h("section", { class: "panel" }, links.items.length ? linkTable(links.items)
        : h("p", { class: "muted" }, "no link: a job splits only over linked clusters (vglobal links add A B GBPS)")));
  },

  async cluster(main, token, name) {
    const [cluster, levels, events] = await Promise.all([
      api(`/api/v1/clusters/${encodeURIComponent(name)}`),
      topologyLevels(api, name),
      api(`/api/v1/clusters/${encodeURIComponent(name)}/events`),
    ]);
    if (token !== generation) return;
    // The top tier holds every node: its domains' lists of nodes not ready cover the cluster.
    const notReady = levels.get("").flatMap((d) => d.nodesNotReady.map((n) => [n, d.name]));
    redraw(main,
      h("h1", {}, `Cluster ${cluster.name} `, badge(cluster.state)),
      h("p", { class: "muted" },
        `${fmt(cluster.nodes.ready)} of ${fmt(cluster.nodes.total)} nodes ready · inventory generation ${cluster.inventoryGeneration}`
        + " · last heartbeat ", when(cluster.lastHeartbeatAt), " · "
        + Object.entries(cluster.labels).map(([k, v]) => `${k}=${v}`).join(", ")),
      h("section", { class: "panel" }, h("h2", {}, "Capacity"), capacityBar(cluster.capacity, 560)),
      h("section", { class: "panel", "data-testid": "topology" },
        h("h2", {}, "Topology (HyperNode tiers) with free GPUs per domain: open a domain for the tier below"),
        topologyTree(levels, refresh)),
      h("section", { class: "panel" }, h("h2", {}, `Nodes not ready (${notReady.length})`),
        notReady.length
          ? h("table", {}, h("tr", {}, h("th", {}, "node"), h("th", {}, "domain")),
            notReady.slice(0, 200).map(([n, d]) => h("tr", {}, h("td", {}, n), h("td", {}, d))))
          : h("p", { class: "muted" }, "every node is ready")),
      h("section", { class: "panel" }, h("h2", {}, "Recent events"), timeline(events.items.slice(0, 50))),
    );
  },

  async jobs(main, token, _arg, query) {
    const drawn = main.dataset.view === "jobs" ? main.querySelector("form.filters") : null;
    const params = jobParams(drawn ? new FormData(drawn) : query);
    const cursor = pager.cursors[pager.cursors.length - 1];
    if (cursor) params.set("continue", cursor);
    params.set("limit", "25");
    const page = await api(`/api/v1/jobs?${params}`);
    if (token !== generation) return;
    if (!drawn) {
      main.dataset.view = "jobs";
      const form = jobFilters(query);
      fill(main, h("h1", {}, "Jobs"), form, h("div", { id: "job-table", class: "panel" }));
      jobChoices(form).catch(() => {}); // a filter still works by the address without them
    }
    const table = main.querySelector("#job-table");
    redraw(table, jobTable(page.items), h("div", { class: "pager" },
      h("button", { disabled: pager.cursors.length <= 1, onclick: () => { pager.cursors.pop(); refresh(); } }, "Previous"),
      h("span", { class: "muted" }, `page ${pager.cursors.length}`),
      h("button", { "data-testid": "next-page", disabled: !page.metadata.continue,
        onclick: () => { pager.cursors.push(page.metadata.continue); refresh(); } }, "Next")));
  },

  async job(main, token, uid) {
    const [job, events, data] = await Promise.all([
      api(`/api/v1/jobs/${uid}`),
      api(`/api/v1/jobs/${uid}/events`),
      // A replica from before the data sub-resource (a rolling upgrade) answers 404: no panel.
      api(`/api/v1/jobs/${uid}/data`).catch((error) => {
        if (error.status === 404) return null;
        throw error;
      }),
    ]);
    if (token !== generation) return;
    const placement = job.placement;
    // A finished job has nothing to cancel: no button (`vglobal delete` frees its name).
    const cancel = TERMINAL.has(job.state) ? null : h("button", { class: "danger", "data-testid": "cancel-job",
      onclick: async (event) => {
        event.target.disabled = true;
        generation += 1; // an answer read before the cancel would draw the button enabled again
        try { await api(`/api/v1/jobs/${uid}/cancel`, { method: "POST" }); } catch (e) { alert(e.message); }
        refresh();
      } }, "Cancel job");
    redraw(main, 
      h("div", { class: "title" }, h("h1", {}, `${job.namespace}/${job.name} `, badge(job.state)), cancel),
      h("p", { class: "muted" },
        `${job.kind} in queue ${job.queue} · priority ${job.priority} · ${job.totalPods} pods · `
        + `${fmt(job.totalGpus)} ${job.gpuModel || ""} GPUs · split ${job.splitPolicy.mode}`
        + (job.splitPolicy.mode === "auto" ? ` (unit ${job.splitPolicy.unitPods} pods, up to ${job.splitPolicy.maxClusters} clusters)` : "")
        + (job.requeues ? ` · requeued ${job.requeues}×` : "")),
      h("p", { class: "muted", "data-testid": "job-times" }, "submitted ", when(job.timestamps.submittedAt),
        job.timestamps.startedAt ? [" · started ", when(job.timestamps.startedAt)] : null,
        job.timestamps.finishedAt ? [" · finished ", when(job.timestamps.finishedAt)] : null,
        job.timestamps.startedAt ? ` · ran ${duration(job.timestamps)}` : null),
      job.state === "Pending"
        ? h("div", { class: "why", "data-testid": "why-pending" }, h("strong", {}, "Why it is pending: "),
          plainReason(job.pendingReason))
        : job.stateMessage ? h("p", {}, job.stateMessage) : null,
      placement
        ? h("section", { class: "panel", "data-testid": "placement" },
          h("h2", {}, `Placement (round ${placement.generation}, ${placement.state})`),
          placementChart(placement.shares),
          h("p", { class: "legend" }, "one bar per cluster; each segment is a leaf HyperNode (hover for its pods)"),
          h("table", {}, h("tr", {}, h("th", {}, "cluster"), h("th", { class: "num" }, "pods"),
            h("th", { class: "num" }, "GPUs"), h("th", { class: "num" }, "ranks"), h("th", {}, "phase"),
            h("th", {}, "domains (pods)")),
          placement.shares.map((sh) => h("tr", { "data-testid": `share-${sh.cluster}` },
            h("td", {}, h("a", { href: `#/clusters/${sh.cluster}` }, sh.cluster)),
            h("td", { class: "num" }, sh.pods), h("td", { class: "num" }, sh.gpus),
            h("td", { class: "num" }, `${sh.rankOffset}-${sh.rankOffset + sh.pods - 1}`),
            h("td", {}, badge(sh.phase), sh.message ? h("span", { class: "muted" }, ` ${sh.message}`) : null),
            h("td", { class: "muted" }, Object.entries(sh.domains).map(([d, p]) => `${d}: ${p}`).join(", "))))),
          placement.linkReservations.length
            ? h("p", {}, "Link bandwidth held: ", placement.linkReservations
              .map((r) => `${fmt(r.gbps)} Gbps on ${r.clusterA} ↔ ${r.clusterB}${r.staging ? " (staging, until the copy ends)" : ""}`).join("; "))
            : h("p", { class: "muted" }, "No inter-cluster bandwidth held (one cluster)."))
        : null,
      data ? jobDataPanel(data, job.clusters) : null,
      h("section", { class: "panel" }, h("h2", {}, "Timeline"), timeline(events.items)),
    );
  },

  async queues(main, token) {
    const [queues, classes] = await Promise.all([api("/api/v1/queues"), api("/api/v1/priorityclasses")]);
    if (token !== generation) return;
    redraw(main, h("h1", {}, "Queues"), h("section", { class: "panel" },
      h("table", { "data-testid": "queues" },
        h("tr", {}, h("th", {}, "queue"), h("th", {}, "state"), h("th", { class: "num" }, "weight"),
          h("th", { class: "num" }, "priority"), h("th", { class: "num" }, "capability"),
          h("th", { class: "num" }, "guarantee"), h("th", { class: "num" }, "deserved"),
          h("th", { class: "num" }, "allocated"), h("th", { class: "num" }, "share"),
          h("th", {}, "allocated vs deserved"), h("th", { class: "num" }, "pending jobs"),
          h("th", { class: "num" }, "pending GPUs")),
        queueTree(queues.items).map(([q, depth]) => h("tr", { "data-queue": q.name },
          h("td", { class: `depth-${Math.min(depth, MAX_DEPTH)}` },
            q.leaf ? h("a", { href: `#/jobs?queue=${q.name}` }, q.name) : h("strong", {}, q.name)),
          h("td", {}, badge(q.state)),
          h("td", { class: "num" }, q.weight), h("td", { class: "num" }, q.priority),
          h("td", { class: "num" }, q.gpuQuota === null ? "unlimited" : fmt(q.gpuQuota)),
          h("td", { class: "num" }, fmt(q.guaranteeGpus)),
          h("td", { class: "num", "data-testid": `deserved-${q.name}` }, fmt(q.deservedGpus)),
          h("td", { class: "num" }, fmt(q.allocatedGpus)),
          h("td", { class: "num" }, q.share === null ? "over" : q.share.toFixed(2)),
          h("td", {}, ratioBar(q.allocatedGpus, Math.max(q.deservedGpus, q.allocatedGpus, 1))),
          h("td", { class: "num" }, q.usage.pendingJobs), h("td", { class: "num" }, fmt(q.usage.pendingGpus))))),
      h("p", { class: "muted" }, "Deserved: each queue's parent's GPUs (the root's: every ready cluster's) divided by "
        + "weight among the children that want GPUs, with guarantee and deserved as floors and capability as a cap "
        + "(Volcano's proportion and capacity plugins); share = allocated / deserved. Jobs go to leaf queues only; "
        + "a Closed queue takes no new jobs.")),
    h("section", { class: "panel" }, h("h2", {}, "Priority classes"),
      h("table", { "data-testid": "priority-classes" },
        h("tr", {}, h("th", {}, "class"), h("th", { class: "num" }, "value"), h("th", {}, "preemption"),
          h("th", {}, "default"), h("th", {}, "description")),
        classes.items.map((c) => h("tr", {},
          h("td", {}, c.metadata.name), h("td", { class: "num" }, fmt(c.value)), h("td", {}, c.preemptionPolicy),
          h("td", {}, c.globalDefault ? "global default" : ""), h("td", {}, c.description))))));
  },

  async data(main, token) {
    const [sources, claims, staging] = await Promise.all([
      api("/api/v1/datasources"), api("/api/v1/datasourceclaims"), api("/api/v1/staging"),
    ]);
    if (token !== generation) return;
    redraw(main, dataPage(sources.items, claims.items, staging.items, staging.copies || []));
  },

  async history(main, token, _arg, query) {
    const page = await historyPage(api, query);
    if (token !== generation) return;
    redraw(main, ...page);
  },

  submit(main) {
    if (main.dataset.view === "submit") return; // a form is never redrawn
    main.dataset.view = "submit";
    const result = h("div", { "data-testid": "submit-result" });
    const text = h("textarea", { name: "document", "data-testid": "yaml", spellcheck: "false",
      placeholder: "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n..." });
    const form = h("form", { onsubmit: async (event) => {
      event.preventDefault();
      result.replaceChildren(h("p", { class: "muted" }, "submitting..."));
      try {
        const job = await api("/api/v1/jobs", { method: "POST", body: text.value,
          headers: { "Content-Type": "application/yaml" } });
        result.replaceChildren(h("p", { class: "ok" }, "Submitted ",
          h("a", { href: `#/jobs/${job.uid}`, "data-testid": "submitted-link" }, `${job.namespace}/${job.name}`),
          ` (${job.totalPods} pods, ${fmt(job.totalGpus)} GPUs).`));
      } catch (error) {
        const causes = (error.body && error.body.details && error.body.details.causes) || [];
        result.replaceChildren(h("div", { class: "error", "data-testid": "submit-error" },
          h("strong", {}, `Refused (${error.status}): `), error.message,
          causes.length ? h("ul", { class: "causes" }, causes.map((c) => h("li", {}, h("code", {}, c.field), `: ${c.message}`))) : null));
      }
    } }, text, h("p", {}, h("button", { class: "primary", type: "submit" }, "Submit")));
    fill(main, h("h1", {}, "Submit a job"),
      h("p", { class: "muted" }, "A Volcano Job or HyperJob document as you would kubectl apply it; the same validation as the API."),
      h("section", { class: "panel" }, form, result));
  },
};

// ---------------------------------------------------------------- pieces
function counter(label, value, testid) {
  return h("div", { class: "counter", "data-testid": testid }, h("div", { class: "n" }, value), h("div", { class: "l" }, label));
}

// The link graph, or (past MAX_LINK_GRAPH clusters on it, where the ring is unreadable) the
// busiest links: the Links page lists them all.
function overviewLinks(clusters, links) {
  const names = new Set([...clusters.map((c) => c.name), ...links.flatMap((l) => [l.clusterA, l.clusterB])]);
  if (names.size <= MAX_LINK_GRAPH) return linkGraph([...names].map((name) => ({ name })), links);
  const busiest = [...links].sort((a, b) => b.reservedGbps - a.reservedGbps).slice(0, 10);
  return [linkTable(busiest), h("p", {}, h("a", { href: "#/links" }, `All ${links.length} links`))];
}

function linkTable(links) {
  return h("table", { "data-testid": "links" },
    h("tr", {}, h("th", {}, "link"), h("th", { class: "num" }, "capacity"), h("th", { class: "num" }, "reserved"),
      h("th", { class: "num" }, "free"), h("th", { class: "num" }, "latency"), h("th", {}, "reserved of capacity")),
    links.map((l) => h("tr", { "data-testid": `link-${l.clusterA}-${l.clusterB}` },
      h("td", {}, h("a", { href: `#/clusters/${l.clusterA}` }, l.clusterA), " ↔ ",
        h("a", { href: `#/clusters/${l.clusterB}` }, l.clusterB)),
      h("td", { class: "num" }, `${fmt(l.capacityGbps)} Gbps`), h("td", { class: "num" }, `${fmt(l.reservedGbps)} Gbps`),
      h("td", { class: "num" }, `${fmt(l.freeGbps)} Gbps`), h("td", { class: "num" }, `${fmt(l.latencyMs)} ms`),
      h("td", {}, ratioBar(l.reservedGbps, l.capacityGbps)))));
}

function roundsTable(rounds) {
  return h("table", {},
    h("tr", {}, h("th", {}, "round"), h("th", {}, "when"), h("th", { class: "num" }, "duration"),
      h("th", { class: "num" }, "solver"), h("th", { class: "num" }, "admitted"), h("th", { class: "num" }, "pending"),
      h("th", {}, "status"), h("th", { class: "num" }, "gap")),
    rounds.slice(0, 10).map((r) => h("tr", {},
      h("td", {}, r.generation), h("td", { class: "muted" }, when(r.finishedAt)),
      h("td", { class: "num" }, `${(r.wallSeconds * 1000).toFixed(0)} ms`),
      h("td", { class: "num" }, `${(r.solveSeconds * 1000).toFixed(0)} ms`),
      h("td", { class: "num" }, r.placed), h("td", { class: "num" }, r.pending),
      h("td", {}, r.status),
      h("td", { class: "num" }, r.gap === null ? "-" : `${(r.gap * 100).toFixed(2)} %`))));
}

function timeline(events) {
  if (!events.length) return h("p", { class: "muted" }, "no events");
  return h("ul", { class: "timeline", "data-testid": "timeline" }, events.map((e) =>
    h("li", { class: e.type }, h("span", { class: "when" }, when(e.lastSeenAt || e.createdAt)),
      h("strong", {}, e.reason), e.count > 1 ? h("span", { class: "muted" }, ` ×${e.count}`) : null, " ", e.message)));
}

function plainReason(reason) {
  if (!reason) return "waiting for the next scheduling round.";
  return reason;
}

const pager = { key: "", cursors: [null] };

// Queues in tree order (each parent before its children), with their depth.
function queueTree(items) {
  const names = new Set(items.map((q) => q.name));
  const children = new Map();
  for (const q of items) {
    const parent = q.parent && names.has(q.parent) ? q.parent : "";
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(q);
  }
  const out = [];
  const walk = (parent, depth) => {
    for (const q of children.get(parent) || []) {
      out.push([q, depth]);
      walk(q.name, depth + 1);
    }
  };
  walk("", 0);
  return out;
}

// The filters, drawn with the address's choices only (the queues and clusters to choose from
// arrive after the first page: `jobChoices`), so a refresh meanwhile keeps the filter.
function jobFilters(query) {
  const select = (name, label, options) => h("select", { name, "aria-label": label, onchange: resetPager },
    h("option", { value: "" }, `any ${label}`),
    options.map((o) => h("option", { value: o, selected: query.get(name) === o }, o)));
  const chosen = (name) => (query.get(name) ? [query.get(name)] : []);
  let typing = null;
  return h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); resetPager(); } },
    select("queue", "queue", chosen("queue")),
    select("state", "state", STATES),
    select("cluster", "cluster", chosen("cluster")),
    h("input", { name: "text", type: "search", placeholder: "name or namespace", "aria-label": "text",
      value: query.get("text") || "", oninput: () => { clearTimeout(typing); typing = setTimeout(resetPager, 300); } }));
}

// The queues and clusters to filter by, added to the form's selects when they arrive (listing
// every cluster counts its nodes: 0.2 s at 100 clusters of 5,000, not to wait for).
async function jobChoices(form) {
  const [queues, clusters] = await Promise.all([api("/api/v1/queues"), api("/api/v1/clusters")]);
  for (const [name, items] of [["queue", queues.items], ["cluster", clusters.items]]) {
    const select = form.querySelector(`select[name=${name}]`);
    const present = new Set([...select.options].map((o) => o.value));
    select.append(...items.filter((i) => !present.has(i.name)).map((i) => h("option", { value: i.name }, i.name)));
  }
}

// The job list's filters, from the form (or, before it is drawn, the page's address).
function jobParams(entries) {
  const params = new URLSearchParams();
  for (const [key, value] of entries) if (value && JOB_FILTERS.includes(key)) params.set(key, value);
  return params;
}

function resetPager() {
  pager.cursors = [null];
  refresh();
}

function jobTable(jobs) {
  if (!jobs.length) return h("p", { class: "muted" }, "no jobs match");
  return h("table", { "data-testid": "jobs" },
    h("tr", {}, h("th", {}, "job"), h("th", {}, "queue"), h("th", {}, "state"), h("th", { class: "num" }, "pods"),
      h("th", { class: "num" }, "GPUs"), h("th", {}, "clusters"), h("th", {}, "submitted"), h("th", {}, "ran"),
      h("th", {}, "why pending")),
    jobs.map((j) => h("tr", { "data-testid": `job-${j.name}` },
      h("td", {}, h("a", { href: `#/jobs/${j.uid}` }, `${j.namespace}/${j.name}`)),
      h("td", {}, j.queue), h("td", {}, badge(j.state)), h("td", { class: "num" }, j.totalPods),
      h("td", { class: "num" }, `${fmt(j.totalGpus)} ${j.gpuModel || ""}`),
      h("td", {}, j.clusters.join(", ") || "-"), h("td", { class: "muted" }, when(j.timestamps.submittedAt)),
      h("td", { class: "muted" }, duration(j.timestamps)),
      h("td", { class: "muted" }, j.pendingReason || ""))));
}

// ---------------------------------------------------------------- routing, login, refresh
function route() {
  const [path, queryString] = (location.hash.slice(1) || "/").split("?");
  const query = new URLSearchParams(queryString || "");
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "clusters" && parts[1]) return ["cluster", decodeURIComponent(parts[1]), query];
  if (parts[0] === "clusters") return ["clusters", null, query];
  if (parts[0] === "links") return ["links", null, query];
  if (parts[0] === "jobs" && parts[1]) return ["job", parts[1], query];
  if (parts[0] === "jobs") return ["jobs", null, query];
  if (parts[0] === "queues") return ["queues", null, query];
  if (parts[0] === "data") return ["data", null, query];
  if (parts[0] === "history") return ["history", null, query];
  if (parts[0] === "submit") return ["submit", null, query];
  return ["overview", null, query];
}

async function refresh() {
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const [view, arg, query] = route();
  const token = generation;
  try {
    await views[view](main, token, arg, query);
    live.classList.remove("stale");
    live.textContent = "live";
  } catch (error) {
    if (error.status === 401) return;
    live.classList.add("stale");
    live.textContent = `offline: ${error.message}`;
    if (token === generation && !main.childElementCount) fill(main, h("p", { class: "error" }, error.message));
  }
}

function navigate() {
  generation += 1;
  const main = document.getElementById("main");
  fill(main, );
  delete main.dataset.view;
  pager.cursors = [null];
  resetClusterPager();
  const [view] = route();
  for (const a of document.querySelectorAll("nav a")) {
    const section = { job: "jobs", cluster: "clusters" }[view] || view;
    a.classList.toggle("active", a.dataset.nav === section);
  }
  clearInterval(timer);
  refresh();
  timer = setInterval(liveTick, REFRESH_MS);
}

// A redraw between a click's press and its release replaces the element pressed, and the
// browser then sends no click: while a button is down no tick starts a redraw, and an answer
// that arrives meanwhile is handed to its view once the button is up (`api`).
function liveTick() {
  if (!pressed) refresh();
}

const HELD_AT_MOST_MS = 10000; // a press whose release never comes (a missed event) ends here

function press(event) {
  if (event.button !== 0 || !event.isPrimary || pressed) return;
  const held = new Promise((resolve) => { release = resolve; });
  pressed = held;
  presser = event.pointerId;
  setTimeout(() => { if (pressed === held) unpress(); }, HELD_AT_MOST_MS);
}

function unpress() {
  if (!pressed) return;
  const done = release;
  pressed = null;
  presser = null;
  setTimeout(done, 0); // a task of its own: after the browser has sent the click
}

// The pressing pointer's release ends a press (a second finger's does not: the first is still
// down). A context menu, a drag or leaving the window can end it with no pointerup: each ends
// it too, as does the pressing pointer moving with no button down.
function unpressBy(event) {
  if (event.pointerId === presser) unpress();
}

document.addEventListener("pointerdown", press, true);
for (const type of ["pointerup", "pointercancel"]) document.addEventListener(type, unpressBy, true);
for (const type of ["contextmenu", "dragstart"]) document.addEventListener(type, unpress, true);
document.addEventListener("pointermove", (event) => { if (event.buttons === 0) unpressBy(event); }, true);
window.addEventListener("blur", unpress);

function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(timer);
  showLogin(message);
}

function showLogin(message = "") {
  document.getElementById("nav").hidden = true;
  const input = h("input", { type: "password", name: "token", "data-testid": "token", autocomplete: "off",
    placeholder: "vg_..." });
  const error = h("p", { class: "error", "data-testid": "login-error" }, message);
  const form = h("form", { class: "panel login", onsubmit: async (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      await api("/api/v1/overview");
      start();
    } catch (e) {
      if (e.status !== 401) error.textContent = e.message;
    }
  } }, h("h1", {}, "Log in"), h("p", { class: "muted" }, "An admin token of this Global (VGLOBAL_ADMIN_TOKEN, or the one printed at first start)."),
  input, h("button", { class: "primary", type: "submit" }, "Log in"), error);
  fill(document.getElementById("main"), form);
  input.focus();
}

function start() {
  document.getElementById("nav").hidden = false;
  navigate();
}

window.addEventListener("hashchange", () => { if (sessionStorage.getItem(TOKEN_KEY)) navigate(); });
document.getElementById("logout").addEventListener("click", () => logout(""));
if (sessionStorage.getItem(TOKEN_KEY)) start(); else showLogin();
