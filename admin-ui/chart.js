// chart.js - the detail page's traffic chart: allowed and denied Acquire
// calls per bucket (1 s, 10 s or 1 min: the fleet's ranges of 5 minutes,
// an hour, a day), drawn as SVG (no library), with a text summary for
// screen readers and a legend of the totals.
import { h, replace, s } from "./dom.js";
import * as fmt from "./format.js";

// Rounds up to 1, 2 or 5 × 10^n.
function niceMax(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// The span of n buckets of step seconds, in words.
function spanWords(n, step) {
  const secs = n * step;
  if (secs >= 86400) return secs === 86400 ? "1 day" : `${secs / 86400} days`;
  if (secs >= 3600) return secs === 3600 ? "1 h" : `${secs / 3600} h`;
  return secs >= 120 ? `${secs / 60} min` : `${secs} s`;
}

// stats: { allowed: [...], denied: [...] }, n buckets of step seconds each,
// the newest last. since: { from, text } counts the legend's totals from
// bucket from on (a shadow switch inside the range, issue 39: one scope
// with the page's banner), marked on the chart and named in the legend
// ("since TEXT"), with the denials before it said apart.
export function drawChart(box, legend, stats, n, step = 1, since = null) {
  const pad = (arr) => {
    const a = (arr || []).map((x) => Number(x) || 0).slice(-n);
    return [...new Array(n - a.length).fill(0), ...a];
  };
  const A = pad(stats.allowed);
  const D = pad(stats.denied);
  const from = since ? Math.min(Math.max(0, since.from), n - 1) : 0;
  const totalA = A.slice(from).reduce((x, y) => x + y, 0);
  const totalD = D.slice(from).reduce((x, y) => x + y, 0);
  const beforeD = D.slice(0, from).reduce((x, y) => x + y, 0);
  const peak = Math.max(...A, ...D, 0);
  const max = niceMax(peak);

  const W = Math.max(240, Math.floor(box.clientWidth || 600));
  const H = 150;
  const L = 40, R = 8, T = 8, B = 22;
  const x = (i) => L + (i / (n - 1)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (arr) => arr.map((v, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join("");
  const area = (arr) => `${line(arr)}L${x(n - 1).toFixed(1)},${y(0).toFixed(1)}L${x(0).toFixed(1)},${y(0).toFixed(1)}Z`;
  const span = spanWords(n, step);
  const per = step === 1 ? "per second" : step === 60 ? "per minute" : `per ${step} s`;

  const grid = [0, max / 2, max].map((v) => [
    s("line", { x1: L, x2: W - R, y1: y(v).toFixed(1), y2: y(v).toFixed(1), class: "grid-line" }),
    s("text", { x: L - 6, y: (y(v) + 4).toFixed(1), class: "axis", "text-anchor": "end" }, fmt.formatNumber(v, 1)),
  ]);
  const xlabels = [
    s("text", { x: L, y: H - 6, class: "axis", "text-anchor": "start" }, `−${span}`),
    s("text", { x: W - R, y: H - 6, class: "axis", "text-anchor": "end" }, "now"),
  ];
  const scope = since ? `since ${since.text}` : `in the last ${span}`;
  const summary = `${since ? `Last ${span}; since ${since.text}` : `Last ${span}`}: ${totalA} allowed, ${totalD} denied; peak ${peak} ${per}.`;
  const mark = since && s("line", { x1: x(from).toFixed(1), x2: x(from).toFixed(1), y1: T, y2: H - B, class: "marker marker-shadow", "data-marker": "shadow" });
  const chart = s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary },
    grid, xlabels,
    s("path", { d: area(A), class: "area-allowed" }),
    s("path", { d: line(A), class: "line-allowed" }),
    s("path", { d: area(D), class: "area-denied" }),
    s("path", { d: line(D), class: "line-denied" }), mark);
  box.replaceChildren(chart);

  const pct = totalA + totalD > 0 ? ` (${fmt.formatNumber((100 * totalD) / (totalA + totalD), 1)} % denied)` : "";
  replace(legend,
    h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-allowed", "aria-hidden": "true" }),
      "Allowed ", h("strong", { id: "total-allowed" }, fmt.formatNumber(totalA, 0))),
    h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-denied", "aria-hidden": "true" }),
      "Denied ", h("strong", { id: "total-denied" }, fmt.formatNumber(totalD, 0))),
    h("span", { class: "muted", id: "totals-scope" }, `${scope}${pct}, every permitd instance` +
      (since ? " (a would-be denial counted as allowed, as it was answered)" : "") +
      (since && beforeD > 0 ? `; ${fmt.formatNumber(beforeD, 0)} denied before it, while enforced` : "")));
}
