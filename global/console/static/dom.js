// DOM helpers of the console's modules: elements (HTML and SVG) from tags, attributes and
// children, and the small pieces every page draws (state badges, numbers, times).

const SVG_NS = "http://www.w3.org/2000/svg";

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export const badge = (state) => h("span", { class: `badge ${state}`, "data-state": state }, state);
export const fmt = (n) => Number(n).toLocaleString("en-US");

export function ago(iso) {
  if (!iso) return "-";
  const seconds = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return absolute(iso);
}

// The moment itself, in UTC to the second: what a log, kubectl or an incident note says.
export function absolute(iso) {
  return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// A relative time with the absolute one in its title (hover) and datetime attribute.
export function when(iso) {
  if (!iso) return h("span", {}, "-");
  return h("time", { datetime: iso, title: absolute(iso) }, ago(iso));
}
