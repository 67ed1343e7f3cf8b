// trafficchart.js - a chart of the traffic history (issue 39): allowed and
// denied decisions per minute over 1 h to 30 days, as TrafficService's
// GetTrafficSeries answers them (fixed buckets: 1, 5, 30 or 120 minutes).
// One unit whatever the range, written on screen above the chart:
// "decisions per minute", a bucket's count divided by its minutes. Time
// ticks in UTC under it. Exact values: on hover (a tooltip) and by keyboard
// (the chart is a slider: Left/Right, Home/End, PageUp/PageDown move from
// bucket to bucket; its value text and the readout line say the bucket's
// time, both figures per minute and the counts behind them). Markers:
// vertical lines at the policy's edits and shadow-mode switches (from the
// audit), named in the readout when the bucket holds one and listed below.
import { h, replace, s, setText } from "./dom.js";
import * as fmt from "./format.js";

const pad2 = (n) => String(n).padStart(2, "0");
const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// "14:05" (UTC) of a Unix time in seconds.
export function clockUtc(unix) {
  const d = new Date(unix * 1000);
  return `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
}

// "Mon 28 Nov" (UTC).
export function dayUtc(unix) {
  const d = new Date(unix * 1000);
  return `${DAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`;
}

// A bucket's span in words: "Mon 28 Nov 14:05–14:10 UTC".
export function bucketWords(start, step) {
  const end = start + step;
  const sameDay = dayUtc(start) === dayUtc(end - 1);
  return sameDay
    ? `${dayUtc(start)} ${clockUtc(start)}–${clockUtc(end)} UTC`
    : `${dayUtc(start)} ${clockUtc(start)} – ${dayUtc(end)} ${clockUtc(end)} UTC`;
}

// "1 minute", "5 minutes", "2 hours".
export function stepWords(step) {
  const m = step / 60;
  if (m < 60) return m === 1 ? "1 minute" : `${m} minutes`;
  return m === 60 ? "1 hour" : `${m / 60} hours`;
}

function niceMax(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// Where the ticks of a range go: every `every` seconds, labelled by `label`.
function tickPlan(span) {
  if (span <= 3600) return { every: 600, label: clockUtc };
  if (span <= 86400) return { every: 4 * 3600, label: clockUtc };
  if (span <= 7 * 86400) return { every: 86400, label: dayUtc };
  return { every: 5 * 86400, label: dayUtc };
}

// The audit's entries of a policy as markers: { t, kind: "edit"|"shadow", text }.
export function markersOf(entries, diff) {
  const out = [];
  for (const e of entries || []) {
    const t = Math.floor(Date.parse(e.changedAt) / 1000);
    if (!Number.isFinite(t) || e.kind !== "policy") continue;
    const d = diff(e);
    const shadow = d.rows.find((r) => r.field === "shadow");
    const who = e.actor ? ` by ${e.actor}` : "";
    if (e.action === "create") out.push({ t, kind: "edit", text: `created${who}` });
    else if (shadow) out.push({ t, kind: "shadow", text: `shadow mode switched ${shadow.new === "yes" ? "on" : "off"}${who}` });
    else out.push({ t, kind: "edit", text: `edited${who}${d.rows.length ? ` (${d.rows.map((r) => r.label.toLowerCase()).join(", ")})` : ""}` });
  }
  return out.sort((a, b) => a.t - b.t);
}

// series: GetTrafficSeries' answer. markers: markersOf(). label: what the
// chart shows, for its accessible name ("Traffic of pay").
// Returns { el } (the chart, its unit, readout, tooltip and markers list).
export function trafficChart(series, markers, label, width = 720) {
  const step = Number(series.stepSeconds || 60);
  const start = Number(series.startUnix || 0);
  const A = (series.allowed || []).map(Number);
  const D = (series.denied || []).map(Number);
  const n = Math.max(A.length, D.length, 1);
  while (A.length < n) A.push(0);
  while (D.length < n) D.push(0);
  const perMin = step / 60;
  const a = A.map((v) => v / perMin);
  const d = D.map((v) => v / perMin);
  const peak = Math.max(...a, ...d, 0);
  const max = niceMax(peak);
  const span = n * step;
  const inRange = (markers || []).filter((m) => m.t >= start && m.t < start + span);

  const W = Math.max(320, Math.floor(width)), H = 180;
  const L = 48, R = 10, T = 10, B = 24;
  const x = (i) => L + ((i + 0.5) / n) * (W - L - R);
  const xt = (t) => L + ((t - start) / span) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (arr) => arr.map((v, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join("");
  const area = (arr) => `${line(arr)}L${x(n - 1).toFixed(1)},${y(0).toFixed(1)}L${x(0).toFixed(1)},${y(0).toFixed(1)}Z`;

  const plan = tickPlan(span);
  const ticks = [];
  for (let t = Math.ceil(start / plan.every) * plan.every; t <= start + span; t += plan.every) {
    ticks.push(s("line", { x1: xt(t).toFixed(1), x2: xt(t).toFixed(1), y1: H - B, y2: H - B + 4, class: "grid-line" }));
    ticks.push(s("text", { x: xt(t).toFixed(1), y: H - 6, class: "axis", "text-anchor": "middle" }, plan.label(t)));
  }
  const grid = [0, max / 2, max].map((v) => [
    s("line", { x1: L, x2: W - R, y1: y(v).toFixed(1), y2: y(v).toFixed(1), class: "grid-line" }),
    s("text", { x: L - 6, y: (y(v) + 4).toFixed(1), class: "axis", "text-anchor": "end" }, fmt.formatNumber(v, 1)),
  ]);
  const marks = inRange.map((m) => s("line", {
    x1: xt(m.t).toFixed(1), x2: xt(m.t).toFixed(1), y1: T, y2: H - B,
    class: `marker marker-${m.kind}`, "data-marker": m.kind,
  }));
  const cursor = s("line", { x1: 0, x2: 0, y1: T, y2: H - B, class: "chart-cursor", visibility: "hidden" });
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "traffic-svg", "aria-hidden": "true", focusable: "false" },
    grid, ticks,
    s("path", { d: area(a), class: "area-allowed" }), s("path", { d: line(a), class: "line-allowed" }),
    s("path", { d: area(d), class: "area-denied" }), s("path", { d: line(d), class: "line-denied" }),
    marks, cursor);

  const marksIn = (i) => inRange.filter((m) => m.t >= start + i * step && m.t < start + (i + 1) * step);
  const words = (i) => {
    const extra = marksIn(i).map((m) => ` Marker: ${m.text}.`).join("");
    return `${bucketWords(start + i * step, step)}: ${fmt.formatNumber(a[i], 2)} allowed and ${fmt.formatNumber(d[i], 2)} denied decisions per minute (${fmt.formatNumber(A[i], 0)} allowed, ${fmt.formatNumber(D[i], 0)} denied in ${stepWords(step)}).${extra}`;
  };
  const readout = h("p", { class: "chart-readout small", "aria-live": "polite" },
    "Point at the chart, or focus it and use the arrow keys, for a bucket's exact values.");
  const tip = h("div", { class: "chart-tip", role: "presentation", hidden: true });
  let at = n - 1;
  const slider = h("div", {
    class: "chart traffic-chart", tabindex: "0", role: "slider",
    "aria-label": `${label}: decisions per minute, one bucket of ${stepWords(step)} at a time`,
    "aria-valuemin": "0", "aria-valuemax": String(n - 1), "aria-valuenow": String(at),
    "aria-valuetext": words(at),
  }, svg, tip);
  function show(i, pointer) {
    at = Math.max(0, Math.min(n - 1, i));
    slider.setAttribute("aria-valuenow", String(at));
    slider.setAttribute("aria-valuetext", words(at));
    setText(readout, words(at));
    cursor.setAttribute("x1", x(at).toFixed(1));
    cursor.setAttribute("x2", x(at).toFixed(1));
    cursor.setAttribute("visibility", "visible");
    setText(tip, words(at));
    tip.hidden = false;
    tip.style.left = `${Math.min(70, (100 * x(at)) / W)}%`;
    if (!pointer) tip.dataset.by = "keyboard";
    else delete tip.dataset.by;
  }
  slider.addEventListener("keydown", (e) => {
    const jump = Math.max(1, Math.round(n / 10));
    const to = { ArrowLeft: at - 1, ArrowDown: at - 1, ArrowRight: at + 1, ArrowUp: at + 1, Home: 0, End: n - 1,
      PageDown: at - jump, PageUp: at + jump }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    show(to, false);
  });
  slider.addEventListener("focus", () => show(at, false));
  slider.addEventListener("blur", () => { tip.hidden = true; cursor.setAttribute("visibility", "hidden"); });
  slider.addEventListener("mousemove", (e) => {
    const r = svg.getBoundingClientRect();
    const px = ((e.clientX - r.left) / Math.max(1, r.width)) * W;
    show(Math.floor(((px - L) / (W - L - R)) * n), true);
  });
  slider.addEventListener("mouseleave", () => {
    if (document.activeElement !== slider) { tip.hidden = true; cursor.setAttribute("visibility", "hidden"); }
  });

  const totalA = A.reduce((p, v) => p + v, 0);
  const totalD = D.reduce((p, v) => p + v, 0);
  const share = totalA + totalD > 0 ? `, ${fmt.formatNumber((100 * totalD) / (totalA + totalD), 1)} % denied` : "";
  const el = h("div", { class: "traffic-history" },
    h("p", { class: "chart-unit" }, h("strong", {}, "Decisions per minute"),
      h("span", { class: "muted" }, ` · each point a ${stepWords(step)} bucket · times in UTC`)),
    slider,
    h("div", { class: "chart-legend" },
      h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-allowed", "aria-hidden": "true" }),
        "Allowed ", h("strong", { class: "history-allowed" }, fmt.formatNumber(totalA, 0))),
      h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-denied", "aria-hidden": "true" }),
        "Denied ", h("strong", { class: "history-denied" }, fmt.formatNumber(totalD, 0))),
      h("span", { class: "muted" }, `decisions in the whole range${share}`),
      inRange.length ? h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-marker", "aria-hidden": "true" }), "Edit or shadow switch") : null),
    readout,
    inRange.length
      ? h("ul", { class: "chart-markers small", "aria-label": "Markers" },
        inRange.map((m) => h("li", { dataset: { kind: m.kind } }, `${dayUtc(m.t)} ${clockUtc(m.t)} UTC: ${m.text}`)))
      : null);
  return { el };
}

// Replaces box's content with a chart, or says why there is none.
export function showTrafficChart(box, series, markers, label) {
  replace(box, trafficChart(series, markers, label, box.clientWidth || 720).el);
}
