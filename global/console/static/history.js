// The History page: allocation (GPUs allocated of total), queue length (waiting jobs) and waits
// over time, from the samples the scheduling loop keeps (GET /api/v1/history; one at most
// every 30 s, kept 7 days). Hand-drawn SVG line charts: the console loads nothing from elsewhere.

import { fmt, h, s } from "./dom.js";

// Range -> [seconds back, seconds per bucket]: about 120-360 points a chart.
const RANGES = { "1h": [3600, 30], "6h": [6 * 3600, 60], "24h": [86400, 300], "7d": [7 * 86400, 1800] };
const WIDTH = 640, HEIGHT = 170, LEFT = 56, BOTTOM = 22, TOP = 10;

export async function historyPage(api, query) {
  const range = RANGES[query.get("range")] ? query.get("range") : "6h";
  const [back, step] = RANGES[range];
  const since = new Date(Date.now() - back * 1000).toISOString();
  const history = await api(`/api/v1/history?since=${encodeURIComponent(since)}&step=${step}`);
  const points = history.items.map((p) => ({ ...p, t: new Date(p.at).getTime() }));
  const domain = [Date.parse(history.since), Date.now()];
  return [
    h("h1", {}, "History"),
    h("p", { class: "filters" }, "Range: ", Object.keys(RANGES).map((r) => r === range
      ? h("strong", { "data-testid": `range-${r}` }, r)
      : h("a", { href: `#/history?range=${r}`, "data-testid": `range-${r}` }, r))
      .flatMap((el, i) => (i ? [" · ", el] : [el]))),
    points.length ? null : h("p", { class: "muted", "data-testid": "history-empty" },
      "No sample in this range: the scheduling loop samples the federation every 30 s while it runs."),
    panel("GPUs allocated (% of total)", "history-allocation", lineChart(points, domain, [
      { cls: "used", label: "allocated", value: (p) => (p.gpusTotal ? (100 * p.gpusAllocated) / p.gpusTotal : 0),
        tip: (p) => `${fmt(Math.round(p.gpusAllocated))} of ${fmt(Math.round(p.gpusTotal))} GPUs` },
    ], (v) => `${Math.round(v)} %`, 100)),
    panel("Queue length (waiting jobs)", "history-queue", lineChart(points, domain, [
      { cls: "info", label: "waiting jobs", value: (p) => p.waitingJobs,
        tip: (p) => `${fmt(Math.round(p.waitingJobs))} jobs asking for ${fmt(Math.round(p.waitingGpus))} GPUs` },
    ], (v) => fmt(Math.round(v)))),
    panel("Waits of the waiting jobs", "history-waits", lineChart(points, domain, [
      { cls: "warn", label: "oldest", value: (p) => p.oldestWaitSeconds, tip: (p) => `oldest ${span(p.oldestWaitSeconds)}` },
      { cls: "info", label: "median", value: (p) => p.medianWaitSeconds, tip: (p) => `median ${span(p.medianWaitSeconds)}` },
    ], span)),
  ];
}

function panel(title, testid, chart) {
  return h("section", { class: "panel", "data-testid": testid }, h("h2", {}, title), chart);
}

// A duration as people say it: 45 s, 12 min, 3.5 h, 2.1 d.
export function span(seconds) {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 2 * 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

// One line per series over the time `domain` ([from, to] in ms); y from 0 to `top` (default:
// the largest value). A gap in the samples (no leader, loop stopped) breaks the line.
function lineChart(points, [from, to], series, label, top = null) {
  const svg = s("svg", { width: WIDTH, height: HEIGHT, role: "img", class: "history" });
  const max = top ?? Math.max(1e-9, ...series.flatMap((se) => points.map(se.value)));
  const x = (t) => LEFT + ((WIDTH - LEFT - 8) * (t - from)) / Math.max(1, to - from);
  const y = (v) => HEIGHT - BOTTOM - ((HEIGHT - BOTTOM - TOP) * v) / max;
  for (const frac of [0, 0.5, 1]) {
    svg.append(s("line", { class: "grid", x1: LEFT, x2: WIDTH - 8, y1: y(max * frac), y2: y(max * frac) }),
      s("text", { class: "muted", x: LEFT - 6, y: y(max * frac) + 4, "text-anchor": "end" }, label(max * frac)));
  }
  svg.append(s("text", { class: "muted", x: LEFT, y: HEIGHT - 6 }, clock(from)),
    s("text", { class: "muted", x: WIDTH - 8, y: HEIGHT - 6, "text-anchor": "end" }, "now"));
  const gap = 3 * (points.length > 1 ? Math.min(...points.slice(1).map((p, i) => p.t - points[i].t)) : 0);
  for (const se of series) {
    const d = points.map((p, i) => `${i && p.t - points[i - 1].t <= gap ? "L" : "M"}${x(p.t).toFixed(1)},${y(se.value(p)).toFixed(1)}`);
    svg.append(s("path", { class: `line ${se.cls}`, d: d.join(" "), "data-series": se.label }));
    for (const p of points) {
      const dot = s("circle", { class: `dot ${se.cls}`, cx: x(p.t), cy: y(se.value(p)), r: 2.5 });
      dot.append(s("title", {}, `${clock(p.t)}: ${se.tip(p)}`));
      svg.append(dot);
    }
  }
  const legend = series.map((se) => h("span", {}, h("i", { class: se.cls }), se.label));
  return [svg, h("div", { class: "legend" }, legend)];
}

const clock = (ms) => new Date(ms).toISOString().slice(5, 16).replace("T", " ") + " UTC";
