// chart.js - the detail page's traffic chart: allowed and denied Acquire
// calls per second over the last 1 or 5 minutes, drawn as SVG (no library),
// with a text summary for screen readers and a legend of the totals.
import { h, replace, s } from "./dom.js";
import * as fmt from "./format.js";

// Rounds up to 1, 2 or 5 × 10^n.
function niceMax(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

export function drawChart(box, legend, stats, seconds) {
  const n = seconds;
  const pad = (arr) => {
    const a = (arr || []).map((x) => Number(x) || 0).slice(-n);
    return [...new Array(n - a.length).fill(0), ...a];
  };
  const A = pad(stats.allowed);
  const D = pad(stats.denied);
  const totalA = A.reduce((x, y) => x + y, 0);
  const totalD = D.reduce((x, y) => x + y, 0);
  const peak = Math.max(...A, ...D, 0);
  const max = niceMax(peak);

  const W = Math.max(240, Math.floor(box.clientWidth || 600));
  const H = 150;
  const L = 40, R = 8, T = 8, B = 22;
  const x = (i) => L + (i / (n - 1)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (arr) => arr.map((v, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join("");
  const area = (arr) => `${line(arr)}L${x(n - 1).toFixed(1)},${y(0).toFixed(1)}L${x(0).toFixed(1)},${y(0).toFixed(1)}Z`;
  const span = n >= 120 ? `${n / 60} min` : `${n} s`;

  const grid = [0, max / 2, max].map((v) => [
    s("line", { x1: L, x2: W - R, y1: y(v).toFixed(1), y2: y(v).toFixed(1), class: "grid-line" }),
    s("text", { x: L - 6, y: (y(v) + 4).toFixed(1), class: "axis", "text-anchor": "end" }, fmt.formatNumber(v, 1)),
  ]);
  const xlabels = [
    s("text", { x: L, y: H - 6, class: "axis", "text-anchor": "start" }, `−${span}`),
    s("text", { x: W - R, y: H - 6, class: "axis", "text-anchor": "end" }, "now"),
  ];
  const summary = `Last ${span}: ${totalA} allowed, ${totalD} denied; peak ${peak} per second.`;
  const chart = s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary },
    grid, xlabels,
    s("path", { d: area(A), class: "area-allowed" }),
    s("path", { d: line(A), class: "line-allowed" }),
    s("path", { d: area(D), class: "area-denied" }),
    s("path", { d: line(D), class: "line-denied" }));
  box.replaceChildren(chart);

  const pct = totalA + totalD > 0 ? ` (${fmt.formatNumber((100 * totalD) / (totalA + totalD), 1)} % denied)` : "";
  replace(legend,
    h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-allowed", "aria-hidden": "true" }),
      "Allowed ", h("strong", { id: "total-allowed" }, fmt.formatNumber(totalA, 0))),
    h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-denied", "aria-hidden": "true" }),
      "Denied ", h("strong", { id: "total-denied" }, fmt.formatNumber(totalD, 0))),
    h("span", { class: "muted" }, `in the last ${span}${pct}`));
}
