// dom.js - building DOM nodes without HTML strings. Children that are not
// nodes become text nodes, so data from the server is always shown as text
// (never parsed as markup).

export function h(tag, props, ...children) {
  return build(document.createElement(tag), props, children);
}

const SVG_NS = "http://www.w3.org/2000/svg";
export function s(tag, props, ...children) {
  return build(document.createElementNS(SVG_NS, tag), props, children);
}

function build(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "text") el.textContent = String(v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, ...children);
  return el;
}

export function append(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, ...children);
}

export function setText(el, text) {
  const t = String(text);
  if (el.textContent !== t) el.textContent = t;
}
