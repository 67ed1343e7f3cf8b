// view-overview.js - the fleet at a glance, the UI's home (#/, issue 39): the
// first question an operator asks, "which limits are hitting right now,
// and who is being denied?", answered on one page, each item a link to its
// page:
//   - the fleet's decisions per second, allowed and denied (the last 5 full
//     minutes), and its chart of the last hour (decisions per minute);
//   - the policies denying most, by count and by share denied;
//   - the apps denied most, across policies;
//   - the keys denied most, across the policies denying most (hot keys:
//     the last minute or two);
//   - policies in shadow mode that would deny;
//   - errors and failure-mode passes, per policy;
//   - the instances' health.
// Every figure says its scope in the card's first line. Numbers from the
// traffic history (TrafficService, MySQL, every instance) except the hot
// keys and the instances (Redis, live). Polled every 30 s.
import { RpcError } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { poll, pollError } from "./poll.js";
import { policyHref } from "./router.js";
import { FLEET, TRAFFIC, call } from "./session.js";
import { clockUtc, showTrafficChart } from "./trafficchart.js";
import { appHref, HISTORY_POLL_MS, shareText, totalsTable } from "./view-traffic.js";
import { loadingState, pageHead } from "./widgets.js";

const TOP = 10;
const HOT_POLICIES = 5;       // policies whose hot keys are merged for "keys denied most"

// scope: the card's first line, a string or a node (updated with the data).
function card(id, title, scope, ...body) {
  return h("section", { class: "card", "aria-labelledby": `${id}-h`, id },
    h("h2", { id: `${id}-h` }, title), scope instanceof Node ? scope : h("p", { class: "muted small scope" }, scope), ...body);
}

// "Since 15:00 UTC (this hour and the last), every permitd instance
// (traffic history)." for a totals answer's start.
function hoursScope(startUnix, extra = "") {
  return `Since ${clockUtc(startUnix)} UTC (the hour before this one and this one so far), every permitd instance (traffic history).${extra}`;
}

export function overviewView(main) {
  document.title = "Overview · permitd admin";
  const ac = new AbortController();
  // The totals' scope: whole hours (TrafficService reads the hourly rows).
  const hourScopes = [];
  const HOUR = (extra = "") => {
    const p = h("p", { class: "muted small scope" }, "Whole hours, every permitd instance (traffic history).");
    hourScopes.push([p, extra]);
    return p;
  };
  const figures = h("div", { class: "big-figures", id: "fleet-figures" }, loadingState("Loading…"));
  const chartBox = h("div", { id: "fleet-chart" });
  const denying = h("div", {}, loadingState("Loading…"));
  const sharing = h("div", {}, loadingState("Loading…"));
  const apps = h("div", {}, loadingState("Loading…"));
  const keys = h("div", {}, loadingState("Loading…"));
  const shadow = h("div", {}, loadingState("Loading…"));
  const failures = h("div", {}, loadingState("Loading…"));
  const instances = h("div", {}, loadingState("Loading…"));
  append(main,
    pageHead(h("h1", { tabindex: "-1" }, "Overview"),
      h("p", { class: "page-sub muted" }, "Which limits are hitting, and who is being denied.")),
    h("div", { class: "overview-grid" },
      h("section", { class: "card span-3", "aria-labelledby": "fleet-h", id: "fleet" },
        h("h2", { id: "fleet-h" }, "Fleet decisions"),
        h("p", { class: "muted small scope" }, "Every permitd instance, from the traffic history; per second over the last 5 full minutes, the chart over the last hour."),
        figures, chartBox),
      card("denying", "Policies denying most", HOUR(), denying),
      card("denying-share", "Policies denying the largest share", HOUR(), sharing),
      card("apps-denied", "Apps denied most", HOUR(" Across every policy."), apps),
      card("keys-denied", "Keys denied most", `Last 1-2 minutes (hot keys, every instance), of the ${HOT_POLICIES} policies denying most.`, keys),
      card("shadow-deny", "Shadow policies that would deny", HOUR(" Answered allowed: the limit is in shadow mode."), shadow),
      card("failures", "Errors and failure-mode passes", HOUR(" Passes: let through by failure_mode open while Redis did not decide."), failures),
      card("health", "Instances", "Live heartbeats (Redis).", instances)));

  function perSecond(series) {
    const step = Number(series.stepSeconds || 60);
    const A = (series.allowed || []).map(Number), D = (series.denied || []).map(Number);
    // The last bucket is still filling: the 5 before it.
    const a = A.slice(-6, -1).reduce((p, v) => p + v, 0), d = D.slice(-6, -1).reduce((p, v) => p + v, 0);
    const secs = 5 * step;
    return { a: a / secs, d: d / secs, share: shareText(a, d) };
  }

  async function hotKeys(top) {
    const lists = await Promise.all(top.slice(0, HOT_POLICIES).map((t) =>
      call("HotKeyService", "GetHotKeys", { name: t.policy, limit: 10 }, ac.signal)
        .then((r) => (r.denied || []).map((k) => ({ policy: t.policy, key: k.key, count: Number(k.count || 0) })), () => [])));
    const all = lists.flat().filter((k) => k.count > 0).sort((x, y) => y.count - x.count).slice(0, TOP);
    if (all.length === 0) return h("p", { class: "muted small", id: "keys-denied-list" }, "No key denied in the last minutes.");
    return h("table", { class: "top-list", id: "keys-denied-list" },
      h("caption", { class: "sr-only" }, "Keys denied most"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Key"), h("th", { scope: "col" }, "Policy"), h("th", { scope: "col", class: "num" }, "Denied"))),
      h("tbody", {}, all.map((k) => h("tr", {},
        h("th", { scope: "row", class: "break" }, h("a", { href: policyHref(k.policy) }, k.key || "(shared bucket)")),
        h("td", { class: "break" }, h("a", { href: policyHref(k.policy) }, k.policy)),
        h("td", { class: "num" }, fmt.formatNumber(k.count, 0))))));
  }

  function countList(id, rows, field, label) {
    const shown = rows.filter((t) => Number(t[field] || 0) > 0);
    if (shown.length === 0) return h("p", { class: "muted small", id }, "None in these hours.");
    return h("ul", { class: "top-simple", id }, shown.map((t) => h("li", {},
      h("a", { href: policyHref(t.policy) }, t.policy), `: ${fmt.formatNumber(Number(t[field]), 0)} ${label}`)));
  }

  let hoursStart = 0;
  const totals = (msg) => call(TRAFFIC, "GetTrafficTotals", { range: "1h", limit: TOP, ...msg }, ac.signal).then((r) => {
    hoursStart = Number(r.startUnix || 0);
    return r.totals || [];
  });

  const refresher = poll(async () => {
    const [series, byDenied, byShare, byApp, byShadow, byErrors, byPasses] = await Promise.all([
      call(TRAFFIC, "GetTrafficSeries", { range: "1h" }, ac.signal),
      totals({ orderBy: "denied" }), totals({ orderBy: "denied_share" }), totals({ groupBy: "app", orderBy: "denied" }),
      totals({ orderBy: "shadow_denied" }), totals({ orderBy: "errors" }), totals({ orderBy: "passes" }),
    ]);
    if (ac.signal.aborted) return;
    for (const [p, extra] of hourScopes) setText(p, hoursScope(hoursStart, extra));
    const ps = perSecond(series);
    replace(figures,
      h("div", {}, h("strong", { id: "fleet-allowed" }, fmt.formatNumber(ps.a, 2)), h("span", { class: "muted small" }, "allowed per second")),
      h("div", {}, h("strong", { id: "fleet-denied" }, fmt.formatNumber(ps.d, 2)), h("span", { class: "muted small" }, "denied per second")),
      h("div", {}, h("strong", { id: "fleet-share" }, ps.share), h("span", { class: "muted small" }, "denied")));
    showTrafficChart(chartBox, series, [], "Fleet decisions, last hour");
    const named = (rows) => rows.filter((t) => Number(t.denied || 0) > 0).map((t) => ({ ...t, name: t.policy }));
    replace(denying, totalsTable("denying-list", "Policies denying most", "Policy", named(byDenied), policyHref));
    replace(sharing, totalsTable("denying-share-list", "Policies denying the largest share", "Policy", named(byShare), policyHref));
    replace(apps, totalsTable("apps-denied-list", "Apps denied most", "App",
      byApp.filter((t) => Number(t.denied || 0) > 0).map((t) => ({ ...t, name: t.app })), appHref));
    replace(shadow, countList("shadow-deny-list", byShadow, "shadowDenied", "would have been denied"));
    replace(failures,
      h("h3", { class: "small-head" }, "Errors"), countList("errors-list", byErrors, "errors", "errors"),
      h("h3", { class: "small-head" }, "Failure-mode passes"), countList("passes-list", byPasses, "passes", "passes"));
    replace(keys, await hotKeys(byDenied.filter((t) => Number(t.denied || 0) > 0)));
    call(FLEET, "ListInstances", {}, ac.signal).then((r) => {
      if (ac.signal.aborted) return;
      const list = r.instances || [];
      const bad = list.filter((i) => i.redis !== "ok" || (i.mysql !== "ok" && i.mysql !== "off"));
      replace(instances, h("p", { id: "health-summary" },
        h("a", { href: "#/instances" }, `${list.length} ${list.length === 1 ? "instance" : "instances"}`),
        bad.length === 0 ? ": every one sees Redis and MySQL." : `: ${bad.length} with a problem.`),
      bad.length ? h("ul", {}, bad.map((i) => h("li", { class: "break" }, `${i.id}: redis ${i.redis}, mysql ${i.mysql}`))) : null);
    }, (err) => replace(instances, h("p", { class: "muted small" }, `Unknown: ${describeError(err)}`)));
  }, HISTORY_POLL_MS, ac.signal, (err) => {
    if (err instanceof RpcError && err.code === "unauthenticated") return;
    setText(figures, `Traffic history unavailable: ${describeError(err)}`);
    pollError(err);
  });
  void refresher;

  return { dispose: () => ac.abort() };
}
