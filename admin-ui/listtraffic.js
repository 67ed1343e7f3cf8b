// listtraffic.js - the policy list's traffic cell (issue 39): a page's
// policies' decisions over the fleet since the start of the hour before
// this one (allowed and denied, the numbers ListPolicies' fleet orders sort
// by) and a trend of the last hour in 12 bars of 5 minutes, both from the
// traffic history (TrafficService.GetTrafficTrends, one call for the
// page). The history gains a minute a minute: the answer is kept for
// TRENDS_MS and asked again sooner only for another page of names.
import { h, replace, s, setText } from "./dom.js";
import * as fmt from "./format.js";
import { TRAFFIC, call } from "./session.js";
import { clockUtc } from "./trafficchart.js";

const TRENDS_MS = 30000;
let last = { key: "", at: 0, by: new Map(), hoursStart: 0, failed: false };

// A new, empty cell: { el } with its parts.
export function trendCell() {
  const total = h("span", { class: "traffic" }, "…");
  const split = h("span", { class: "trend-split" });
  const bars = h("span", { class: "trend-bars" });
  return h("span", { class: "trend-cell" }, total, split, bars);
}

function bars(t, start, step) {
  const A = (t.allowed || []).map(Number), D = (t.denied || []).map(Number);
  const n = Math.max(A.length, D.length);
  const max = Math.max(1, ...A.map((a, i) => a + (D[i] || 0)));
  const W = 60, H = 16, bw = W / Math.max(1, n);
  const words = `Last hour in 5-minute buckets from ${clockUtc(start)} UTC, allowed/denied: ${A.map((a, i) => `${a}/${D[i] || 0}`).join(", ")}`;
  return s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": words, class: "trend" },
    s("title", {}, words),
    A.flatMap((a, i) => {
      const d = D[i] || 0;
      const ha = (a / max) * H, hd = (d / max) * H;
      return [
        s("rect", { x: (i * bw + 0.5).toFixed(1), y: (H - ha - hd).toFixed(1), width: (bw - 1).toFixed(1), height: ha.toFixed(1), class: "trend-allowed" }),
        s("rect", { x: (i * bw + 0.5).toFixed(1), y: (H - hd).toFixed(1), width: (bw - 1).toFixed(1), height: hd.toFixed(1), class: "trend-denied" }),
      ];
    }));
}

function show(cell, t, r) {
  const [total, split, trend] = cell.children;
  if (!t) {
    setText(total, "unknown");
    total.title = "the traffic history could not be read";
    replace(split);
    replace(trend);
    return;
  }
  const a = Number(t.hoursAllowed || 0), d = Number(t.hoursDenied || 0);
  setText(total, fmt.formatNumber(a + d, 0));
  total.title = `${fmt.formatNumber(a, 0)} allowed, ${fmt.formatNumber(d, 0)} denied since ${clockUtc(Number(r.hoursStartUnix || 0))} UTC, all instances`;
  setText(split, a + d > 0 ? `${fmt.formatNumber(d, 0)} denied (${fmt.formatNumber((100 * d) / (a + d), 1)} %)` : "");
  replace(trend, bars(t, Number(r.startUnix || 0), Number(r.stepSeconds || 300)));
}

// Whether every decision of t (these hours) named a key: the shared
// bucket is then not what the callers use, and its gauge would read full.
export function keyedOnly(t) {
  const k = Number(t?.hoursKeyed || 0);
  return k > 0 && k >= Number(t.hoursAllowed || 0) + Number(t.hoursDenied || 0);
}

// names: the page's; cellOf(name): its cell (trendCell()) or undefined;
// onTrend(name, t): each policy's answer (null when unknown), after its cell.
export async function loadTrends(names, cellOf, signal, onTrend = () => {}) {
  const key = names.join("\n");
  if (key !== last.key || Date.now() - last.at > TRENDS_MS || last.failed) {
    let r = null;
    if (names.length > 0) {
      try {
        r = await call(TRAFFIC, "GetTrafficTrends", { policies: names }, signal);
      } catch {
        r = null;
      }
    }
    if (signal.aborted) return;
    last = { key, at: Date.now(), r, by: new Map((r?.trends || []).map((t) => [t.policy, t])), failed: r === null };
  }
  for (const name of names) {
    const cell = cellOf(name);
    if (cell) show(cell, last.failed ? null : last.by.get(name), last.r || {});
    onTrend(name, last.failed ? null : last.by.get(name) || null);
  }
}
