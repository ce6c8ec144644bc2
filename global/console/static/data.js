// The console's data (docs/data.md, "Seen by people"): the Data page (DataSources and where each
// is, DataSourceClaims, the staging in progress, the copies that belong to no share: prefetch)
// and the Data panel of a job's page. Drawing
// only: the views in app.js fetch and call these.

import { badge, fmt, h, when } from "./dom.js";

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

// Bytes in binary units, as the Global's messages and kubectl quantities read them (40 TiB).
export function size(bytes) {
  if (bytes === null || bytes === undefined) return "unknown";
  let value = Number(bytes);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${Number(value.toPrecision(3))} ${UNITS[unit]}`;
}

const clusterLink = (name) => h("a", { href: `#/clusters/${encodeURIComponent(name)}` }, name);

// The clusters that hold a dataset; those `here` (where the job runs) are marked.
function locality(clusters, here = []) {
  if (!clusters.length) return h("span", { class: "muted" }, "no cluster known");
  return clusters.flatMap((c, i) => [i ? ", " : null,
    here.includes(c) ? h("strong", { class: "here", title: "the job runs here" }, clusterLink(c)) : clusterLink(c)]);
}

const reads = (gbps) => (gbps === null ? "copied in before it starts" : `remotely at ${fmt(gbps)} Gbps`);

// One share's copies: "corpus-v3 (40 TiB) from west at 100 Gbps".
function copies(items) {
  return items.map((i) => `${i.dataSource} (${size(i.bytes)})`
    + (i.sourceCluster ? ` from ${i.sourceCluster}` : "") + (i.gbps ? ` at ${fmt(i.gbps)} Gbps` : "")).join("; ");
}

export function dataPage(sources, claims, staging, prefetch = []) {
  return [
    h("h1", {}, "Data"),
    h("section", { class: "panel" }, h("h2", {}, `Staging in progress (${staging.length})`),
      staging.length ? stagingTable(staging)
        : h("p", { class: "muted" }, "no share is copying its data now")),
    h("section", { class: "panel" }, h("h2", {}, `Copies without a share: prefetch and replicas (${prefetch.length})`),
      prefetch.length ? copyTable(prefetch, "copies")
        : h("p", { class: "muted" }, "no copy without a share (prefetch, replica) runs now")),
    h("section", { class: "panel" }, h("h2", {}, "Data sources"),
      sources.length ? sourceTable(sources)
        : h("p", { class: "muted" }, "no DataSource: vglobal apply -f datasource.yaml (docs/data.md)")),
    h("section", { class: "panel" }, h("h2", {}, "Claims (which job reads which data)"),
      claims.length ? claimTable(claims) : h("p", { class: "muted" }, "no DataSourceClaim")),
  ];
}

function sourceTable(sources) {
  return h("table", { "data-testid": "datasources" },
    h("tr", {}, h("th", {}, "data source"), h("th", { class: "num" }, "size"), h("th", {}, "held by (locality)"),
      h("th", {}, "system / type"), h("th", {}, "name in the system"), h("th", { class: "num" }, "claims"),
      h("th", {}, "updated")),
    sources.map((d) => h("tr", { "data-testid": `datasource-${d.name}` },
      h("td", {}, d.name), h("td", { class: "num" }, size(d.sizeBytes)),
      h("td", { "data-testid": `locality-${d.name}` }, locality(d.clusters)),
      h("td", {}, `${d.system} / ${d.type}`), h("td", { class: "muted" }, d.sourceName),
      h("td", { class: "num" }, d.boundClaims), h("td", { class: "muted" }, when(d.updatedAt)))));
}

function claimTable(claims) {
  return h("table", { "data-testid": "datasourceclaims" },
    h("tr", {}, h("th", {}, "claim"), h("th", {}, "workload"), h("th", {}, "asks for"), h("th", {}, "bound to"),
      h("th", {}, "reads it")),
    claims.map((c) => h("tr", { "data-testid": `claim-${c.namespace}-${c.name}` },
      h("td", {}, `${c.namespace}/${c.name}`),
      h("td", {}, `${c.workload.kind} `,
        h("a", { href: `#/jobs?text=${encodeURIComponent(c.workload.name)}` }, `${c.namespace}/${c.workload.name}`)),
      h("td", {}, c.dataSourceName),
      h("td", {}, c.boundDataSource || h("span", { class: "warning" }, "no DataSource yet")),
      h("td", {}, reads(c.readGbps)))));
}

function stagingTable(staging) {
  return h("table", { "data-testid": "staging" },
    h("tr", {}, h("th", {}, "job"), h("th", {}, "into cluster"), h("th", {}, "copies"), h("th", {}, "progress"),
      h("th", {}, "placed"), h("th", {}, "last report")),
    staging.map((st) => h("tr", { "data-testid": `staging-${st.namespace}-${st.name}-${st.cluster}` },
      h("td", {}, h("a", { href: `#/jobs/${st.jobUid}` }, `${st.namespace}/${st.name}`)),
      h("td", {}, clusterLink(st.cluster)), h("td", {}, copies(st.items)),
      h("td", {}, st.message || h("span", { class: "muted" }, "no progress reported yet")),
      h("td", { class: "muted" }, when(st.placedAt)), h("td", { class: "muted" }, when(st.reportedAt)))));
}

// Copies that belong to no share (a waiting job's data, copied without its GPUs; a popular
// dataset copied ahead of demand, for no job): a copy of no job shows its purpose.
function copyTable(rows, testid, withJob = true) {
  return h("table", { "data-testid": testid },
    h("tr", {}, withJob ? h("th", {}, "for job") : null, h("th", {}, "into cluster"), h("th", {}, "copy"),
      h("th", {}, "state"), h("th", {}, "progress"), h("th", {}, "started"), h("th", {}, "ended")),
    rows.map((c) => h("tr", { "data-testid": `copy-${c.dataSource}-${c.cluster}` },
      withJob ? h("td", {}, c.jobUid ? h("a", { href: `#/jobs/${c.jobUid}` }, `${c.namespace}/${c.name}`)
        : h("span", { class: "muted" }, c.purpose)) : null,
      h("td", {}, clusterLink(c.cluster)),
      h("td", {}, `${c.dataSource} (${size(c.bytes)}) from ${c.sourceCluster} at ${fmt(c.gbps)} Gbps`),
      h("td", {}, badge(c.state)),
      h("td", {}, c.reason || c.message || h("span", { class: "muted" }, "no progress reported yet")),
      h("td", { class: "muted" }, when(c.createdAt)), h("td", { class: "muted" }, when(c.endedAt)))));
}

// The Data panel of a job's page; `here`: the clusters the job runs in.
export function jobDataPanel(data, here) {
  const fetched = data.copies || [];
  const nothing = !data.datasets.length && !data.checkpoint && !data.staging.length && !fetched.length;
  return h("section", { class: "panel", "data-testid": "job-data" }, h("h2", {}, "Data"),
    nothing ? h("p", { class: "muted" },
      "No data: no DataSourceClaim names this job and its declaration lists no dataset or checkpoint.") : null,
    data.datasets.length ? datasetTable(data.datasets, here) : null,
    data.checkpoint ? h("p", { "data-testid": "job-checkpoint" }, `Checkpoint (${size(data.checkpoint.sizeBytes)}): `,
      data.checkpoint.cluster ? ["written in ", clusterLink(data.checkpoint.cluster)] : "not written yet") : null,
    data.staging.length ? shareStagingTable(data.staging) : null,
    fetched.length ? [h("h3", {}, "Copied while it waited"), copyTable(fetched, "job-copies", false)] : null);
}

function datasetTable(datasets, here) {
  return h("table", { "data-testid": "job-datasets" },
    h("tr", {}, h("th", {}, "dataset"), h("th", { class: "num" }, "size"), h("th", {}, "held by"),
      h("th", {}, "reads it"), h("th", {}, "needed by")),
    datasets.map((d) => h("tr", { "data-testid": `dataset-${d.name}` },
      h("td", {}, d.bound ? h("a", { href: "#/data" }, d.name) : d.name),
      h("td", { class: "num" }, size(d.sizeBytes)),
      h("td", {}, d.bound ? locality(d.clusters, here) : h("span", { class: "warning" }, "unknown: no DataSource of that name")),
      h("td", {}, reads(d.readGbps)),
      h("td", { class: "muted" }, d.claim ? `claim ${d.claim}` : "its declaration"))));
}

function shareStagingTable(shares) {
  return h("table", { "data-testid": "job-staging" },
    h("tr", {}, h("th", {}, "staging into"), h("th", {}, "phase"), h("th", {}, "copies"), h("th", {}, "progress"),
      h("th", {}, "copy ended")),
    shares.map((st) => h("tr", { "data-testid": `job-staging-${st.cluster}` },
      h("td", {}, clusterLink(st.cluster)), h("td", {}, badge(st.phase)), h("td", {}, copies(st.items)),
      h("td", {}, st.message || h("span", { class: "muted" }, "-")),
      h("td", { class: "muted" }, when(st.stagedAt)))));
}
