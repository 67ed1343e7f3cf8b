// view-detail.js - one policy (#/policy/NAME): its settings (the algorithm
// and its limits, in words), the live gauge of its shared bucket, the
// traffic chart, the bucket inspector and the history; edit/delete for
// editors. Polls the policy and redraws the settings and the history only
// when its version changes. The chart is the fleet's (issue 23): every
// instance's counts summed (FleetService.GetFleetStats), over 5 minutes,
// an hour or a day, with each instance's share on demand. In shadow mode
// one scope for every figure (issue 39): the banner's would-be denials are
// the fleet's since the switch (the traffic history), the chart's totals
// count from the same switch, and the hot keys say their own minutes.
import { isAbort } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import { drawChart } from "./chart.js";
import { confirmDelete } from "./dialogs.js";
import * as fmt from "./format.js";
import { renderHistory } from "./history.js";
import { shadowDenials, trafficCard } from "./view-traffic.js";
import { clockUtc, dayUtc } from "./trafficchart.js";
import { keyedOnly, loadTrends } from "./listtraffic.js";
import { hotKeysCard } from "./hotkeys.js";
import { bucketInspector } from "./inspector.js";
import { overridesCard } from "./overrides.js";
import { describeError } from "./notices.js";
import { DETAIL_POLL_MS, poll } from "./poll.js";
import { LIST, editHref, go } from "./router.js";
import { FLEET, POLICY, call, isEditor } from "./session.js";
import { appChips, emptyState, errorState, icon, loadingState, makeGauge, pageHead, statusBadges } from "./widgets.js";

// The shadow banner's figure comes from the traffic history, which gains
// a minute a minute: asked for every 5 s (and at a switch).
const SHADOW_POLL_MS = 5000;
const HISTORY_LIMIT = 50;

export function detailView(main, { policy: name }) {
  document.title = `${name} · permitd admin`;
  const ac = new AbortController();
  const editor = isEditor();
  let policy = null;
  let shownVersion = null;
  let chartRange = "5m";
  let perInstance = false;
  let lastStats = null;
  // The last shadow period's would-be denials (shadowDenials()): the
  // banner's figure, and the chart's totals count from its switch.
  let shadow = null;

  const title = h("h1", { tabindex: "-1", class: "break" }, name);
  const badgesBox = h("span", { class: "title-badges" });
  const actions = editor
    ? [h("a", { class: "btn", href: editHref(name), id: "edit-policy" }, icon("edit"), "Edit"),
      h("button", {
        type: "button", class: "btn btn-danger-quiet", id: "delete-policy",
        onclick: () => policy && confirmDelete(policy, () => go(LIST)),
      }, icon("trash"), "Delete")]
    : [];
  const desc = h("p", { class: "policy-desc" });
  // What names the policy (GetPolicy's references, issue 40): a delete is
  // refused while anything does, unless it deletes them too.
  const refsLine = h("p", { class: "muted small", id: "policy-refs" });
  const settings = h("dl", { class: "settings" });
  const limitsSentence = h("p", { class: "limits-summary", id: "limits-sentence" });
  // The settle after a limit edit (issue 22): the buckets that existed get
  // the new limits' expiry in the background, on whichever instance.
  const settleLine = h("p", { class: "muted small", id: "settle-state", role: "status" });
  settleLine.hidden = true;
  const sharedHeading = h("h2", { id: "shared-h" }, "Shared bucket");
  const body = h("div", { class: "detail" });

  // shared bucket
  const sharedGauge = makeGauge(`Permits available in the shared bucket of ${name}`, true);
  const sharedInfo = h("p", { class: "muted small" }, "—");
  // Outstanding reservations (issue 38: Reserve holds an estimate until
  // its Commit, Cancel or expiry), every key, without the inspector.
  const reservationsLine = h("p", { class: "small", id: "policy-reservations", role: "status" }, "—");

  // chart
  const chartBox = h("div", { class: "chart", id: "traffic-chart" });
  const chartLegend = h("div", { class: "chart-legend" });
  // Shadow mode (issue 23): the denials the limit would have made, one
  // scope (issue 39): since the switch, every instance, from the traffic
  // history; the chart's totals count from the same switch.
  const shadowNote = h("p", { class: "shadow-note", id: "shadow-note", role: "status", hidden: true });
  const chartScope = h("p", { class: "muted small", id: "chart-scope" }, "Acquire calls answered by every permitd instance of the fleet, summed");
  const RANGES = [["5m", "5 min"], ["1h", "1 hour"], ["1d", "1 day"]];
  const rangeButtons = RANGES.map(([key, label]) => {
    const b = h("button", { type: "button", class: "seg", dataset: { range: key }, "aria-pressed": String(key === chartRange) }, label);
    b.addEventListener("click", () => {
      chartRange = key;
      for (const x of rangeButtons) x.setAttribute("aria-pressed", String(x === b));
      statsPoll.now();
    });
    return b;
  });
  // Each instance's share of the range: asked for only while shown.
  const breakdownButton = h("button", { type: "button", class: "btn btn-small", id: "per-instance", "aria-pressed": "false", "aria-controls": "instance-breakdown" }, "Per instance");
  const breakdown = h("div", { id: "instance-breakdown", class: "breakdown", hidden: true });
  breakdownButton.addEventListener("click", () => {
    perInstance = !perInstance;
    breakdownButton.setAttribute("aria-pressed", String(perInstance));
    breakdown.hidden = !perInstance;
    statsPoll.now();
  });

  // overrides (issue 37): a tab of their own; a hot key's row and the
  // inspector open a new one with the key filled in.
  const overrides = overridesCard(name, editor, ac.signal);

  // inspector
  const inspector = bucketInspector(name, editor, ac.signal, (k) => overrides.create(k));

  // hot keys (issue 23); in shadow mode their denied counts are what the
  // limit would have denied over their own minutes: said so.
  const hotShadowScope = h("p", { class: "muted small", id: "hot-shadow-scope", hidden: true },
    "In shadow mode a key's “denied” is what the limit would have denied (answered allowed), over the hot keys' last minutes below, not the span of the banner above.");
  const hot = hotKeysCard(name, editor, ac.signal, (k) => inspector.inspect(k), (k) => overrides.create(k));

  // The page's two tabs: the policy (its settings, traffic, buckets,
  // history) and its overrides, loaded when first shown.
  const tabs = [["overview", "Overview"], ["overrides", "Overrides"]].map(([id, label]) =>
    h("button", { type: "button", role: "tab", class: "tab", id: `tab-${id}`, "aria-controls": `panel-${id}`, "aria-selected": String(id === "overview"), tabindex: id === "overview" ? "0" : "-1" }, label));
  const panels = { overview: h("div", { role: "tabpanel", id: "panel-overview", "aria-labelledby": "tab-overview" }),
    overrides: h("section", { role: "tabpanel", id: "panel-overrides", "aria-labelledby": "tab-overrides", class: "card overrides-card", hidden: true }, overrides.el) };
  let overridesLoaded = false;
  function selectTab(id, focus) {
    for (const t of tabs) {
      const on = t.id === `tab-${id}`;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      if (on && focus) t.focus();
    }
    panels.overview.hidden = id !== "overview";
    panels.overrides.hidden = id !== "overrides";
    if (id === "overrides" && !overridesLoaded) {
      overridesLoaded = true;
      overrides.load();
    }
  }
  tabs.forEach((t, i) => {
    t.addEventListener("click", () => selectTab(t.id.slice(4)));
    t.addEventListener("keydown", (e) => {
      const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
      if (!step) return;
      e.preventDefault();
      selectTab(tabs[(i + step + tabs.length) % tabs.length].id.slice(4), true);
    });
  });
  const tablist = h("div", { role: "tablist", class: "tabs", "aria-label": `Sections of ${name}` }, tabs);

  // history
  const historyBox = h("div", { class: "history", id: "history" }, loadingState("Loading history…"));

  append(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: LIST }, icon("back"), "All policies")),
    pageHead(h("div", { class: "title-row" }, title, badgesBox), null, ...actions),
    body);

  const loadingBox = loadingState("Loading policy…");
  append(body, loadingBox);

  function renderLayout() {
    panels.overview.replaceChildren(
      h("div", { class: "grid" },
        h("section", { class: "card span-2", "aria-labelledby": "settings-h" },
          h("h2", { id: "settings-h" }, "Settings"), limitsSentence, settings, refsLine, settleLine),
        h("section", { class: "card", "aria-labelledby": "shared-h" },
          sharedHeading,
          sharedGauge.el, sharedInfo),
        h("section", { class: "card span-2", "aria-labelledby": "traffic-h" },
          h("div", { class: "card-head" },
            h("h2", { id: "traffic-h" }, "Traffic"),
            h("div", { class: "segmented", role: "group", "aria-label": "Chart range" }, rangeButtons)),
          shadowNote, chartScope, chartBox, chartLegend,
          h("div", { class: "breakdown-head" }, breakdownButton), breakdown),
        trafficCard({ policy: name }, ac.signal).el,
        h("section", { class: "card", "aria-labelledby": "reservations-h" },
          h("h2", { id: "reservations-h" }, "Reservations"), reservationsLine),
        h("section", { class: "card", "aria-labelledby": "inspect-h" },
          h("h2", { id: "inspect-h" }, "Bucket inspector"), inspector.el),
        h("section", { class: "card span-3", "aria-labelledby": "hot-h" },
          h("h2", { id: "hot-h" }, "Hot keys"), hotShadowScope, hot.el),
        h("section", { class: "card span-3", "aria-labelledby": "history-h" },
          h("h2", { id: "history-h" }, "History"), historyBox)));
    body.replaceChildren(desc, tablist, panels.overview, panels.overrides);
  }

  function renderSettings(p) {
    document.title = `${p.name} · permitd admin`;
    replace(badgesBox, statusBadges(p));
    if (p.description) {
      setText(desc, p.description);
      desc.hidden = false;
    } else {
      desc.hidden = true;
    }
    const who = (by, at) => [at ? fmt.formatTimestamp(at) : "—", by ? ` by ${by}` : ""].join("");
    const item = (label, ...value) => [h("dt", {}, label), h("dd", {}, ...value)];
    const alg = fmt.algorithmOf(p);
    const max = fmt.formatNumber(Number(p.maxPermits ?? 0), 0);
    const duration = (text) => {
      const d = fmt.parseDuration(text);
      if (!d) return text ? String(text) : "—";
      return d.calendar ? `${fmt.CALENDAR_UNITS.find((c) => c.unit === d.calendar).label} (UTC)` : fmt.durationWords(d.ms);
    };
    let limits;
    if (alg === "token_bucket") {
      const rate = fmt.describeRate(p.rate);
      const refill = Number(p.rate) > 0 ? (Number(p.maxPermits ?? 0) / Number(p.rate)) * 1000 : 0;
      limits = [item("Max permits (burst)", max),
        item("Rate", h("span", { class: "rate" }, rate.text),
          rate.unit !== "s" && h("span", { class: "muted" }, ` · ${p.rate ?? "?"} permits/s`)),
        item("Empty → full", refill > 0 ? fmt.formatDuration(refill) : "—")];
    } else if (alg === "concurrency") {
      limits = [item("Max held at once", max), item("Lease time-to-live", duration(p.leaseTtl || fmt.DEFAULT_LEASE_TTL))];
    } else {
      limits = [item("Max permits per window", max), item("Window", duration(p.window))];
    }
    setText(limitsSentence, fmt.describeLimits(p));
    hotShadowScope.hidden = !p.shadow;
    inspector.setAlgorithm(alg);
    overrides.setAlgorithm(alg);
    setText(sharedHeading, alg === "concurrency" ? "Shared leases" : alg === "token_bucket" ? "Shared bucket" : "Shared window");
    replace(settings,
      item("Apps", appChips(p.apps)),
      item("Algorithm", fmt.algorithmInfo(alg).label),
      limits,
      item("Mode", p.shadow ? "shadow: decided and counted, never refused" : "enforcing"),
      item("When Redis is down", p.failureMode === "closed" ? "refuse (fail closed)" : p.failureMode === "open" ? "allow (fail open)" : "—"),
      item("Version", String(p.version ?? "—")),
      item("Created", who(p.createdBy, p.createdAt)),
      item("Last changed", who(p.updatedBy, p.updatedAt)));
  }

  async function loadHistory() {
    try {
      const r = await call(POLICY, "ListPolicyHistory", { name, limit: HISTORY_LIMIT }, ac.signal);
      if (ac.signal.aborted) return;
      renderHistory(historyBox, r.changes || []);
    } catch (err) {
      if (isAbort(err) || ac.signal.aborted || err.code === "unauthenticated") return;
      replace(historyBox, errorState(`Could not load the history: ${describeError(err)}`, loadHistory));
    }
  }

  let statsPoll = { now() {} };
  let shadowPoll = { now() {} };
  const policyPoll = poll(async () => {
    let r;
    try {
      r = await call(POLICY, "GetPolicy", { name }, ac.signal);
    } catch (err) {
      if (err.code === "not_found") {
        ac.abort();
        body.replaceChildren(emptyState("This policy does not exist",
          policy ? "It was deleted, perhaps by another administrator." : `There is no policy named “${name}”.`,
          h("a", { class: "btn", href: LIST }, "All policies")));
        for (const a of actions) a.hidden = true;
        badgesBox.replaceChildren();
        return;
      }
      if (!policy) {
        replace(body, errorState(`Could not load the policy: ${describeError(err)}`, () => {
          replace(body, loadingBox);
          policyPoll.now();
        }));
      }
      throw err;
    }
    if (ac.signal.aborted) return;
    const first = policy === null;
    policy = r.policy || {};
    if (first) renderLayout();
    setText(refsLine, r.referenceCount > 0 ? `Named by ${r.references}.` : "No gateway rule, Envoy descriptor or override names it.");
    if (String(policy.version) !== shownVersion) {
      shownVersion = String(policy.version);
      renderSettings(policy);
      loadHistory();
      if (!first) shadowPoll.now();
    }
    if (first) {
      statsPoll = poll(loadStats, DETAIL_POLL_MS, ac.signal);
      shadowPoll = poll(loadShadow, SHADOW_POLL_MS, ac.signal, shadowError);
    }
    showReservations();
    if (!policy.enabled) {
      sharedGauge.unknown("disabled", "the policy is disabled: no bucket in use");
      setText(sharedInfo, "The policy is disabled: Acquire answers failed_precondition and no bucket is kept.");
      return;
    }
    const b = await call(POLICY, "GetBucket", { name, key: "" }, ac.signal);
    if (ac.signal.aborted) return;
    const bucket = b.bucket || {};
    const alg = fmt.algorithmOf(policy);
    sharedGauge.set(bucket, policy.maxPermits, alg);
    setText(sharedInfo, fmt.describeBucket(alg, { limit: policy.maxPermits, ...bucket }).summary);
    // Callers that send keys leave the shared bucket full (issue 39).
    await loadTrends([name], () => undefined, ac.signal, (_, t) => {
      if (!keyedOnly(t)) return;
      sharedGauge.unknown("per key", "every decision of these hours named a key");
      setText(sharedInfo, "Not in use: every decision since the hour before this one named a key, and each key has a bucket of its own (see Hot keys, or inspect a key).");
    });
  }, DETAIL_POLL_MS, ac.signal);

  // The range's totals per instance, as a table (who serves how much).
  function renderBreakdown(r) {
    const list = r.instances || [];
    const total = (x, k) => (x?.[k] || []).reduce((a, v) => a + Number(v || 0), 0);
    if (list.length === 0) {
      replace(breakdown, h("p", { class: "muted small" }, "No instance counted an Acquire of this policy in this range."));
      return;
    }
    const all = total(r.fleet, "allowed") + total(r.fleet, "denied") + total(r.fleet, "errors") + total(r.fleet, "passes");
    replace(breakdown, h("table", { class: "policies breakdown-table" },
      h("caption", { class: "sr-only" }, "Acquire calls of this range per permitd instance"),
      h("thead", {}, h("tr", {}, ["Instance", "Allowed", "Denied", "Errors", "Failure-mode passes", "Share"].map((t, i) =>
        h("th", { scope: "col", class: i ? "num" : null }, t)))),
      h("tbody", {}, list.map((x) => {
        const mine = total(x, "allowed") + total(x, "denied") + total(x, "errors") + total(x, "passes");
        return h("tr", { dataset: { instance: x.instance || "" } },
          h("td", { "data-label": "Instance" }, h("code", { class: "break" }, x.instance || "")),
          ["allowed", "denied", "errors", "passes"].map((k) => h("td", { class: "num", "data-label": k }, fmt.formatNumber(total(x, k), 0))),
          h("td", { class: "num", "data-label": "Share" }, all > 0 ? `${fmt.formatNumber((100 * mine) / all, 1)} %` : "—"));
      }))));
  }

  // What the settle of the policy's existing buckets is at: running (how
  // many done), waiting, or when the last one ended; nothing when none is
  // known (none in the last 7 days, or Redis could not say).
  function renderSettle(st) {
    let text = "";
    if (st?.running) {
      text = `Adjusting expiry of existing buckets: ${fmt.formatNumber(Number(st.keysDone ?? 0), 0)} done`;
    } else if (st?.pending) {
      text = "Adjusting expiry of existing buckets: waiting to start";
    } else if (Number(st?.finishedUnixMs ?? 0) > 0) {
      const n = Number(st.keysDone ?? 0);
      text = `Expiry of existing buckets adjusted at ${fmt.formatTimestamp(new Date(Number(st.finishedUnixMs)).toISOString())}` +
        ` (${fmt.formatNumber(n, 0)} bucket${n === 1 ? "" : "s"} in ${fmt.formatDuration(Number(st.durationMs ?? 0))})`;
    }
    if (settleLine.textContent !== text) setText(settleLine, text);
    settleLine.hidden = text === "";
  }

  async function loadStats() {
    let r;
    try {
      r = await call(FLEET, "GetFleetStats", { policy: name, range: chartRange, perInstance }, ac.signal);
    } catch (err) {
      if (isAbort(err) || ac.signal.aborted || err.code === "unauthenticated") throw err;
      // Redis not answering: the fleet's figures are unknown, not zero.
      lastStats = null;
      chartBox.replaceChildren(h("p", { class: "chart-empty", id: "chart-unavailable", role: "status" },
        h("strong", {}, "Traffic unknown."), ` The fleet's counts could not be read: ${describeError(err)}`));
      chartLegend.replaceChildren();
      breakdown.replaceChildren();
      return;
    }
    if (ac.signal.aborted) return;
    await showLocal();
    const fleet = r.fleet || {};
    const n = (fleet.allowed || []).length;
    const step = Number(r.stepSeconds || 1);
    const any = ["allowed", "denied", "errors", "passes"].some((k) => (fleet[k] || []).some((v) => Number(v) !== 0));
    if (perInstance) renderBreakdown(r);
    // Nothing counted in the whole range, by any instance: say so in words
    // rather than draw a flat line (issue 22).
    if (!any || n < 2) {
      lastStats = null;
      if (!chartBox.querySelector("#chart-no-figures")) {
        chartBox.replaceChildren(h("p", { class: "chart-empty muted", id: "chart-no-figures" },
          h("strong", {}, "No figures yet."),
          " No permitd instance has counted an Acquire of this policy in this range",
          " (each publishes its counts every second; one started with --fleet-publish-ms 0 is not counted)."));
        chartLegend.replaceChildren();
      }
      return;
    }
    const since = shadowSince(Number(r.endUnix || 0), n, step);
    const allShadow = !since && policy?.shadow && shadow && shadow.off === null;
    setText(chartScope, since
      ? `Acquire calls answered by every permitd instance of the fleet, summed; the totals since shadow mode was switched on (${since.text}), the banner's scope.`
      : allShadow ? "Acquire calls answered by every permitd instance of the fleet, summed; the whole range in shadow mode (see the banner for since when)."
        : "Acquire calls answered by every permitd instance of the fleet, summed");
    lastStats = { stats: fleet, n, step, since };
    drawChart(chartBox, chartLegend, fleet, n, step, since);
  }

  // The chart's totals count from the shadow switch when the range holds
  // it (the bucket it fell in on): one scope with the banner. endUnix: the
  // start of the chart's last bucket.
  function shadowSince(endUnix, n, step) {
    if (!policy?.shadow || !shadow || shadow.off !== null || shadow.older || !endUnix) return null;
    const first = endUnix - (n - 1) * step;
    if (shadow.on < first) return null;
    const from = Math.min(n - 1, Math.floor((shadow.on - first) / step));
    return { from, text: `${dayUtc(shadow.on)} ${clockUtc(shadow.on)} UTC` };
  }

  // The banner: what the limit would have denied since it was switched to
  // shadow mode (while it is), or in its last shadow period (for a day
  // after it was enforced again), over every instance, from the traffic
  // history (each instance adds its minutes within --traffic-flush-ms).
  async function loadShadow() {
    const r = await shadowDenials(name, !!policy?.shadow, ac.signal);
    if (ac.signal.aborted) return;
    shadow = r;
    const now = Date.now() / 1000;
    const shown = r && (r.off === null ? !!policy?.shadow : now - r.off < 86400 && r.n > 0);
    shadowNote.hidden = !shown;
    if (!shown) return;
    const at = (t) => `${dayUtc(t)} ${clockUtc(t)} UTC`;
    replace(shadowNote,
      "Shadow mode: would have denied ", h("strong", { id: "shadow-denied" }, fmt.formatNumber(r.n, 0)),
      r.off === null
        ? (r.older ? " in the last 30 days (switched on before them)" : ` since it was switched on at ${at(r.on)}`)
        : ` from ${at(r.on)} until ${at(r.off)}`,
      h("span", { class: "muted", id: "shadow-scope" }, ", every permitd instance (traffic history, whole minutes)",
        r.off === null ? "; allowed all the same: the limit is not enforced yet." : ", before the limit was enforced."));
  }

  // Unknown is not zero: the banner says the figure could not be read.
  function shadowError(err) {
    if (err?.code === "unauthenticated") return;
    shadow = null;
    shadowNote.hidden = !policy?.shadow;
    replace(shadowNote, h("strong", {}, "Shadow mode: "), `what the limit would have denied is unknown: ${describeError(err)}`);
  }

  // What this instance's GetPolicyStats tells beside the fleet's chart:
  // the settle of the policy's buckets (any instance's, from Redis).
  async function showLocal() {
    let r;
    try {
      r = await call(POLICY, "GetPolicyStats", { name, seconds: 300 }, ac.signal);
    } catch (err) {
      if (isAbort(err) || ac.signal.aborted || err.code === "unauthenticated") throw err;
      return;
    }
    if (ac.signal.aborted) return;
    renderSettle(r.settle);
  }

  // GetPolicyReservations (the policy's reservation index in Redis): how
  // many items are held, the permits they hold, and the oldest's age.
  async function showReservations() {
    let r;
    try {
      r = await call(POLICY, "GetPolicyReservations", { name }, ac.signal);
    } catch (err) {
      if (isAbort(err) || ac.signal.aborted || err.code === "unauthenticated") return;
      setText(reservationsLine, `Could not read the reservations: ${describeError(err)}`);
      return;
    }
    if (ac.signal.aborted) return;
    const n = Number(r.count ?? 0);
    if (n <= 0) {
      reservationsLine.className = "small muted";
      setText(reservationsLine, "No reservation of this policy is outstanding.");
      return;
    }
    reservationsLine.className = "small";
    replace(reservationsLine,
      h("strong", { id: "reservations-count" }, fmt.formatNumber(n, 0)), n === 1 ? " reservation holds " : " reservations hold ",
      h("strong", { id: "reservations-amount" }, fmt.formatNumber(Number(r.amount ?? 0), 0)), " permits; the oldest was made ",
      h("strong", {}, fmt.formatDuration(Number(r.oldestMs ?? 0))), " ago.");
  }

  const onResize = () => lastStats && drawChart(chartBox, chartLegend, lastStats.stats, lastStats.n, lastStats.step, lastStats.since);
  window.addEventListener("resize", onResize);

  return {
    dispose() {
      ac.abort();
      window.removeEventListener("resize", onResize);
    },
  };
}
