// view-traffic.js - the traffic history's card (issue 39), on a policy's
// page (its traffic per app) and an app's page (the policies it uses):
// a range picker (1 hour, 24 hours, 7 days, 30 days), one stated scope
// ("every permitd instance, from the traffic history in MySQL"), the chart
// (trafficchart.js: decisions per minute, markers at the policy's edits and
// shadow switches) and a table of allowed and denied per app or per policy
// over the same range. Polled every 30 s (the history gains a minute a
// minute); a failure says so in the card, never as zeros. shadowDenials()
// is the policy page's one figure of shadow mode: what the limit would have
// denied since the switch, every instance (the page's banner).
import { h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { poll } from "./poll.js";
import { policyHref } from "./router.js";
import { AUDIT, TRAFFIC, call } from "./session.js";
import { clockUtc, dayUtc, markersOf, showTrafficChart } from "./trafficchart.js";
import { loadingState } from "./widgets.js";

export const HISTORY_POLL_MS = 30000;
export const RANGES = [["1h", "1 hour"], ["24h", "24 hours"], ["7d", "7 days"], ["30d", "30 days"]];
const RANGE_SECONDS = { "1h": 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400 };

export const appHref = (name) => `#/app/${encodeURIComponent(name)}`;

// "12.5 %" of denied in allowed + denied; "—" without decisions.
export function shareText(allowed, denied) {
  const all = allowed + denied;
  return all > 0 ? `${fmt.formatNumber((100 * denied) / all, 1)} %` : "—";
}

// A table of GetTrafficTotals' rows: name (a link), allowed, denied, share.
export function totalsTable(id, caption, first, rows, href) {
  if (rows.length === 0) return h("p", { class: "muted small", id }, "No decisions in this range.");
  return h("table", { class: "top-list", id },
    h("caption", { class: "sr-only" }, caption),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, first), h("th", { scope: "col", class: "num" }, "Allowed"),
      h("th", { scope: "col", class: "num" }, "Denied"), h("th", { scope: "col", class: "num" }, "Share denied"))),
    h("tbody", {}, rows.map((t) => {
      const name = t.name;
      const a = Number(t.allowed || 0), d = Number(t.denied || 0);
      return h("tr", { dataset: { name } },
        h("th", { scope: "row", class: "break" }, href && name ? h("a", { href: href(name) }, name) : (name || "(no app)")),
        h("td", { class: "num" }, fmt.formatNumber(a, 0)), h("td", { class: "num" }, fmt.formatNumber(d, 0)),
        h("td", { class: "num" }, shareText(a, d)));
    })));
}

const isoUnix = (t) => new Date(t * 1000).toISOString().replace(/\.\d+Z$/, "Z");

// The policy's last shadow period from its audit entries (any order):
// { on, off } in Unix seconds (off null while it lasts), or null when no
// entry switched shadow mode on (a create in shadow mode does).
export function lastShadowPeriod(entries, diff) {
  const timed = (entries || []).filter((e) => e.kind === "policy")
    .map((e) => ({ e, t: Math.floor(Date.parse(e.changedAt) / 1000) }))
    .filter((x) => Number.isFinite(x.t)).sort((a, b) => a.t - b.t);
  let on = null, off = null;
  for (const { e, t } of timed) {
    if (e.action === "delete") continue;
    const row = diff(e).rows.find((r) => r.field === "shadow");
    if (!row) continue;
    if (row.new === "yes" && row.old !== "yes") {
      on = t;
      off = null;
    } else if (row.new !== "yes" && row.old === "yes" && on !== null && off === null) {
      off = t;
    }
  }
  return on === null ? null : { on, off };
}

// What policy would have denied in its last shadow period (the last 30
// days), summed over every instance from the traffic history, counted from
// the switch's minute: { n, on, off, older } or null without such a period.
// inShadow: the policy is in shadow mode now; switched on before the
// audit's last 30 days, its period is those 30 days (older: true).
export async function shadowDenials(policy, inShadow, signal) {
  const now = Math.floor(Date.now() / 1000);
  const a = await call(AUDIT, "ListAudit", { policy, kind: "policy", since: isoUnix(now - RANGE_SECONDS["30d"]), pageSize: 500 }, signal);
  let period = lastShadowPeriod(a.entries || [], fmt.diffChange);
  if (!period && inShadow) period = { on: now - RANGE_SECONDS["30d"], off: null, older: true };
  if (!period) return null;
  const range = RANGES.map(([k]) => k).find((k) => RANGE_SECONDS[k] >= now - period.on + 60) || "30d";
  const s = await call(TRAFFIC, "GetTrafficSeries", { policy, range }, signal);
  const step = Number(s.stepSeconds || 60), start = Number(s.startUnix || 0);
  const S = (s.shadowDenied || []).map(Number);
  const from = Math.max(0, Math.floor((period.on - start) / step));
  const to = period.off === null ? S.length : Math.min(S.length, Math.floor((period.off - start) / step) + 1);
  return { older: false, ...period, n: S.slice(from, to).reduce((p, v) => p + v, 0) };
}

// what: { policy } or { app }. Returns { el }; stops polling when signal aborts.
export function trafficCard(what, signal) {
  const byPolicy = what.policy !== undefined;
  const subject = byPolicy ? what.policy : what.app;
  let range = "1h";
  const chartBox = h("div", { id: "history-chart" }, loadingState("Loading the traffic history…"));
  const tableBox = h("div", { id: byPolicy ? "history-apps" : "history-policies" });
  const scope = h("p", { class: "muted small scope", id: "history-scope" },
    "Every permitd instance, from the traffic history in MySQL (each instance adds its minute within a minute).");
  const buttons = RANGES.map(([key, label]) => {
    const b = h("button", { type: "button", class: "seg", dataset: { range: key }, "aria-pressed": String(key === range) }, label);
    b.addEventListener("click", () => {
      range = key;
      for (const x of buttons) x.setAttribute("aria-pressed", String(x === b));
      refresher.now();
    });
    return b;
  });
  const tableHead = h("h3", { class: "small-head" }, byPolicy ? "Per app" : "Policies it uses");
  // The table's own scope: whole hours (TrafficService's totals).
  const tableScope = h("p", { class: "muted small scope", id: "history-table-scope" });
  const el = h("section", { class: "card span-3", "aria-labelledby": "history-traffic-h", id: "traffic-history" },
    h("div", { class: "card-head" },
      h("h2", { id: "history-traffic-h" }, "Traffic history"),
      h("div", { class: "segmented", role: "group", "aria-label": "History range" }, buttons)),
    scope, chartBox, tableHead, tableScope, tableBox);

  async function markers() {
    if (!byPolicy) return [];
    const since = isoUnix(Math.floor(Date.now() / 1000) - RANGE_SECONDS[range]);
    try {
      const r = await call(AUDIT, "ListAudit", { policy: subject, kind: "policy", since, pageSize: 500 }, signal);
      return markersOf(r.entries || [], fmt.diffChange);
    } catch {
      return [];          // the chart without markers rather than none
    }
  }

  const refresher = poll(async () => {
    const key = byPolicy ? { policy: subject } : { app: subject };
    const [series, totals, marks] = await Promise.all([
      call(TRAFFIC, "GetTrafficSeries", { ...key, range }, signal),
      call(TRAFFIC, "GetTrafficTotals", { ...key, range, groupBy: byPolicy ? "app" : "policy", orderBy: "decided", limit: 100 }, signal),
      markers(),
    ]);
    if (signal.aborted) return;
    const label = RANGES.find(([k]) => k === range)[1];
    setText(scope, `Last ${label}, every permitd instance, from the traffic history in MySQL (each instance adds its minute within ${fmt.formatDuration(Number(series.flushSeconds || 60) * 1000)}; kept ${series.retentionDays || 30} days).`);
    showTrafficChart(chartBox, series, marks, `Traffic of ${byPolicy ? "policy" : "app"} ${subject}, last ${label}`);
    const rows = (totals.totals || []).map((t) => ({ ...t, name: byPolicy ? t.app : t.policy }));
    const from = Number(totals.startUnix || 0);
    setText(tableScope, `Since ${dayUtc(from)} ${clockUtc(from)} UTC, in whole hours up to now, every permitd instance.`);
    replace(tableBox, totalsTable(byPolicy ? "history-apps-table" : "history-policies-table",
      byPolicy ? `Decisions per app of ${subject}, last ${label}` : `Policies ${subject} uses, last ${label}`,
      byPolicy ? "App" : "Policy", rows, byPolicy ? appHref : policyHref));
  }, HISTORY_POLL_MS, signal, (err) => {
    replace(chartBox, h("p", { class: "chart-empty", id: "history-unavailable" },
      h("strong", {}, "Traffic history unavailable."), ` ${describeError(err)}`));
  });
  return { el };
}
