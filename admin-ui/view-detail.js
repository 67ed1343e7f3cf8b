// view-detail.js - one policy (#/policy/NAME): its settings (the algorithm
// and its limits, in words), the live gauge of its shared bucket, the
// traffic chart, the bucket inspector and the history; edit/delete for
// editors. Polls the policy and redraws the settings and the history only
// when its version changes.
import { isAbort } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import { drawChart } from "./chart.js";
import { confirmDelete } from "./dialogs.js";
import * as fmt from "./format.js";
import { renderHistory } from "./history.js";
import { bucketInspector } from "./inspector.js";
import { describeError } from "./notices.js";
import { DETAIL_POLL_MS, poll } from "./poll.js";
import { editHref, go } from "./router.js";
import { POLICY, call, isEditor } from "./session.js";
import { appChips, emptyState, errorState, icon, loadingState, makeGauge, pageHead, statusBadges } from "./widgets.js";

const HISTORY_LIMIT = 50;

export function detailView(main, { policy: name }) {
  document.title = `${name} · permitd admin`;
  const ac = new AbortController();
  const editor = isEditor();
  let policy = null;
  let shownVersion = null;
  let chartSeconds = 300;
  let lastStats = null;

  const title = h("h1", { tabindex: "-1", class: "break" }, name);
  const badgesBox = h("span", { class: "title-badges" });
  const actions = editor
    ? [h("a", { class: "btn", href: editHref(name), id: "edit-policy" }, icon("edit"), "Edit"),
      h("button", {
        type: "button", class: "btn btn-danger-quiet", id: "delete-policy",
        onclick: () => policy && confirmDelete(policy, () => go("#/")),
      }, icon("trash"), "Delete")]
    : [];
  const desc = h("p", { class: "policy-desc" });
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

  // chart
  const chartBox = h("div", { class: "chart", id: "traffic-chart" });
  const chartLegend = h("div", { class: "chart-legend" });
  const rangeButtons = [60, 300].map((sec) => {
    const b = h("button", { type: "button", class: "seg", "aria-pressed": String(sec === chartSeconds) },
      sec === 60 ? "1 min" : "5 min");
    b.addEventListener("click", () => {
      chartSeconds = sec;
      for (const x of rangeButtons) x.setAttribute("aria-pressed", String(x === b));
      statsPoll.now();
    });
    return b;
  });

  // inspector
  const inspector = bucketInspector(name, editor, ac.signal);

  // history
  const historyBox = h("div", { class: "history", id: "history" }, loadingState("Loading history…"));

  append(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: "#/" }, icon("back"), "All policies")),
    pageHead(h("div", { class: "title-row" }, title, badgesBox), null, ...actions),
    body);

  const loadingBox = loadingState("Loading policy…");
  append(body, loadingBox);

  function renderLayout() {
    body.replaceChildren(
      desc,
      h("div", { class: "grid" },
        h("section", { class: "card span-2", "aria-labelledby": "settings-h" },
          h("h2", { id: "settings-h" }, "Settings"), limitsSentence, settings, settleLine),
        h("section", { class: "card", "aria-labelledby": "shared-h" },
          sharedHeading,
          sharedGauge.el, sharedInfo),
        h("section", { class: "card span-2", "aria-labelledby": "traffic-h" },
          h("div", { class: "card-head" },
            h("h2", { id: "traffic-h" }, "Traffic"),
            h("div", { class: "segmented", role: "group", "aria-label": "Chart range" }, rangeButtons)),
          h("p", { class: "muted small" }, "Acquire calls per second answered by this permitd instance"),
          chartBox, chartLegend),
        h("section", { class: "card", "aria-labelledby": "inspect-h" },
          h("h2", { id: "inspect-h" }, "Bucket inspector"), inspector.el),
        h("section", { class: "card span-3", "aria-labelledby": "history-h" },
          h("h2", { id: "history-h" }, "History"), historyBox)));
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
    inspector.setAlgorithm(alg);
    setText(sharedHeading, alg === "concurrency" ? "Shared leases" : alg === "token_bucket" ? "Shared bucket" : "Shared window");
    replace(settings,
      item("Apps", appChips(p.apps)),
      item("Algorithm", fmt.algorithmInfo(alg).label),
      limits,
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
  const policyPoll = poll(async () => {
    let r;
    try {
      r = await call(POLICY, "GetPolicy", { name }, ac.signal);
    } catch (err) {
      if (err.code === "not_found") {
        ac.abort();
        body.replaceChildren(emptyState("This policy does not exist",
          policy ? "It was deleted, perhaps by another administrator." : `There is no policy named “${name}”.`,
          h("a", { class: "btn", href: "#/" }, "All policies")));
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
    if (String(policy.version) !== shownVersion) {
      shownVersion = String(policy.version);
      renderSettings(policy);
      loadHistory();
    }
    if (first) statsPoll = poll(loadStats, DETAIL_POLL_MS, ac.signal);
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
  }, DETAIL_POLL_MS, ac.signal);

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
    const r = await call(POLICY, "GetPolicyStats", { name, seconds: chartSeconds }, ac.signal);
    if (ac.signal.aborted) return;
    renderSettle(r.settle);
    // No figures is not zero traffic (issue 22): this instance has decided
    // none of the policy's Acquires since it started, or dropped its figures
    // for busier policies' (--stats-policies). Say so instead of a flat line.
    if (r.known !== true) {
      lastStats = null;
      if (!chartBox.querySelector("#chart-no-figures")) {
        chartBox.replaceChildren(h("p", { class: "chart-empty muted", id: "chart-no-figures" },
          h("strong", {}, "No figures yet."),
          " This instance has not counted any Acquire of this policy since it started",
          " (or has dropped its figures for busier policies'): the traffic is not known here, which is not the same as none."));
        chartLegend.replaceChildren();
      }
      return;
    }
    lastStats = r;
    drawChart(chartBox, chartLegend, r, chartSeconds);
  }

  const onResize = () => lastStats && drawChart(chartBox, chartLegend, lastStats, chartSeconds);
  window.addEventListener("resize", onResize);

  return {
    dispose() {
      ac.abort();
      window.removeEventListener("resize", onResize);
    },
  };
}
