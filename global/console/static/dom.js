// DOM helpers of the console's modules: elements (HTML and SVG) from tags, attributes and
// children, and the small pieces every page draws (state badges, numbers, times).

const SVG_NS = "http://www.w3.org/2000/svg";
// Each element's event handlers, by event type: an element a redraw keeps takes the new
// drawing's handlers (their closures hold the data just read) without listening twice.
const HANDLERS = new WeakMap();

function dispatch(event) {
  const handler = HANDLERS.get(this)?.get(event.type);
  return handler ? handler.call(this, event) : undefined;
}

function listen(el, type, handler) {
  if (!HANDLERS.has(el)) HANDLERS.set(el, new Map());
  HANDLERS.get(el).set(type, handler);
  el.addEventListener(type, dispatch); // the same function twice is one listener
}

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
    if (key.startsWith("on")) listen(el, key.slice(2), value);
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

// `el` made to show `children`, as a live view's redraw does: the elements drawn again
// unchanged are kept (a text selection, a hover's tooltip, a pressed button, an input's focus
// and a scroll survive it); what changed is changed in place, what is new added, what is gone
// removed. A kept element's handlers are the new drawing's, so they must not hold the new
// drawing's elements (which are dropped): a handler reaches its element as `event.target`.
export function redraw(el, ...children) {
  const fresh = document.createElement("div");
  append(fresh, children);
  morphChildren(el, [...fresh.childNodes]);
}

function morphChildren(parent, fresh) {
  fresh.forEach((next, i) => {
    const old = parent.childNodes[i];
    if (!old) parent.append(next);
    else if (!morph(old, next)) old.replaceWith(next);
  });
  while (parent.childNodes.length > fresh.length) parent.lastChild.remove();
}

// Whether `old` could be made to show `next` (then it does); not across kinds of node, nor
// from one keyed element (a row's data-testid, an id) to another.
function morph(old, next) {
  if (old.nodeType !== next.nodeType || old.nodeName !== next.nodeName) return false;
  if (old.nodeType === Node.TEXT_NODE) {
    if (old.data !== next.data) old.data = next.data;
    return true;
  }
  if (old.nodeType !== Node.ELEMENT_NODE || old.namespaceURI !== next.namespaceURI) return false;
  if (key(old) !== key(next)) return false;
  for (const { name } of [...old.attributes]) if (!next.hasAttribute(name)) old.removeAttribute(name);
  for (const { name, value } of next.attributes) if (old.getAttribute(name) !== value) old.setAttribute(name, value);
  for (const [type, handler] of HANDLERS.get(next) || []) listen(old, type, handler);
  const gone = HANDLERS.get(old);
  if (gone) for (const type of gone.keys()) if (!HANDLERS.get(next)?.has(type)) gone.delete(type);
  morphChildren(old, [...next.childNodes]);
  return true;
}

const key = (el) => el.getAttribute("data-testid") ?? el.id;

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
