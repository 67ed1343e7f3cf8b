// inspector.js - the detail page's bucket inspector: the live state of the
// bucket of any key of a policy (or of its shared bucket), in the words of
// the policy's algorithm, and a reset for editors.
//
// What is shown per algorithm lives in VIEWS (the words of each row come
// from format.js's describeBucket, from what GetBucket answers for every
// algorithm: remaining, limit, reset_after_ms, tokens). A view's
// more(bucket) returns the nodes shown below the rows, from what GetBucket
// answers for that algorithm alone: when a window ends, the sliding log's
// entries and their ages (a small timeline and a list), the leases held and
// when each expires. They are rebuilt on every refresh (every 2 s, which is
// the countdown's step), and are not a live region.
import { confirmReset } from "./dialogs.js";
import { h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { DETAIL_POLL_MS, poll } from "./poll.js";
import { POLICY, call } from "./session.js";
import { errorState, icon, loadingState, makeGauge } from "./widgets.js";

// A window's end (GetBucket's windowResetAfterMs), and what happens then.
function windowMore(then) {
  return (b) => {
    const left = Number(b.windowResetAfterMs ?? 0);
    if (!(left > 0)) return [];
    return h("p", { class: "small", id: "inspect-window" },
      "The current window ends in ", h("strong", {}, fmt.formatDuration(left)), `; ${then}.`);
  };
}

const LOG_LINES = 20;     // takes listed in words; the timeline shows every one received

// The sliding log: its entries (one per permit) by age, newest first; the
// entries of one take share their age, so they are listed as one line.
function logMore(b) {
  const events = Number(b.events ?? 0);
  const ages = (b.eventAgesMs || []).map(Number);
  if (events <= 0 || ages.length === 0) {
    return h("p", { class: "small muted", id: "inspect-log" }, "The log is empty: nothing taken within the window.");
  }
  const groups = [];
  for (const age of ages) {
    const g = groups.at(-1);
    if (g && g.age === age) g.n++;
    else groups.push({ age, n: 1 });
  }
  const oldest = Math.max(1, ages[ages.length - 1]);
  const shown = ages.length < events
    ? `the newest ${fmt.formatNumber(ages.length, 0)} of ${fmt.formatNumber(events, 0)} are listed`
    : `${fmt.formatNumber(events, 0)} in all`;
  const ago = (age) => (age <= 0 ? "just now" : `${fmt.formatDuration(age)} ago`);
  // the timeline: one mark per take, now at the right end, the oldest listed at the left
  const line = h("div", { class: "log-timeline", "aria-hidden": "true" });
  for (const g of groups) {
    const mark = h("span", { class: "log-mark" });
    mark.style.left = `${((1 - g.age / oldest) * 100).toFixed(2)}%`;
    line.append(mark);
  }
  return [
    h("h3", { class: "inspect-sub", id: "inspect-log-h" }, "Entries in the log"),
    h("p", { class: "small muted" }, `One entry per permit taken within the window, newest first; ${shown}.`),
    line,
    h("div", { class: "log-axis small muted", "aria-hidden": "true" }, h("span", {}, ago(oldest)), h("span", {}, "now")),
    h("ol", { class: "log-list", id: "inspect-log", "aria-labelledby": "inspect-log-h" },
      groups.slice(0, LOG_LINES).map((g) => h("li", {},
        h("span", { class: "log-n" }, g.n === 1 ? "1 permit" : `${fmt.formatNumber(g.n, 0)} permits`),
        " ", h("span", { class: "muted" }, ago(g.age))))),
    groups.length > LOG_LINES
      ? h("p", { class: "small muted" }, `and ${fmt.formatNumber(groups.length - LOG_LINES, 0)} older takes not listed`)
      : null,
  ];
}

// The leases held, soonest expiry first: each by the first 8 characters of
// its id only (the id lets its holder release the lease; the server never
// sends it whole), its permits and the time until it expires.
function leaseMore(b) {
  const leases = b.leases || [];
  if (leases.length === 0) return h("p", { class: "small muted", id: "inspect-leases" }, "No lease is held.");
  return [
    h("table", { class: "leases", id: "inspect-leases" },
      h("caption", {}, "Leases held, soonest expiry first"),
      h("thead", {}, h("tr", {},
        h("th", { scope: "col" }, "Lease id"), h("th", { scope: "col", class: "num" }, "Permits"),
        h("th", { scope: "col", class: "num" }, "Expires in"))),
      h("tbody", {}, leases.map((x) => h("tr", {},
        h("td", {}, h("code", {}, `${x.idPrefix ?? ""}…`)),
        h("td", { class: "num" }, fmt.formatNumber(Number(x.permits ?? 0), 0)),
        h("td", { class: "num" }, fmt.formatDuration(Number(x.expiresAfterMs ?? 0))))))),
    h("p", { class: "small muted" },
      "Only the start of each lease id is shown: the whole id lets its holder release or renew the lease.",
      leases.length >= 100 ? " The 100 leases expiring soonest are listed." : ""),
  ];
}

// The policy's outstanding reservations (issue 38: Reserve holds an
// estimate until its Commit), over all its keys: how many items, the
// permits they hold, and how long the oldest has been held.
function reservationsMore(b) {
  const n = Number(b.reservations ?? 0);
  if (n <= 0) return h("p", { class: "small muted", id: "inspect-reservations" }, "No reservation of this policy is outstanding.");
  return h("p", { class: "small", id: "inspect-reservations" },
    "Outstanding reservations of this policy (all keys): ",
    h("strong", {}, fmt.formatNumber(n, 0)), ` holding ${fmt.formatNumber(Number(b.reservedPermits ?? 0), 0)} permits, the oldest held for `,
    h("strong", {}, fmt.formatDuration(Number(b.oldestReservationMs ?? 0))), ".");
}

// reset: the button's words; done: what a reset did; more: see above.
const VIEWS = {
  token_bucket: { reset: "Reset to full", done: "the bucket is full again" },
  fixed_window: { reset: "Reset the count", done: "the window's count starts from 0 again",
    more: windowMore("the count starts again from 0 then") },
  sliding_window: { reset: "Reset the count", done: "both windows' counts start from 0 again",
    more: windowMore("its count then weighs less and less through the next window") },
  sliding_log: { reset: "Clear the log", done: "the log is empty again", more: logMore },
  concurrency: { reset: "Free all leases", done: "every lease is freed (their holders' releases become no-ops)",
    more: leaseMore },
};
const viewOf = (alg) => VIEWS[alg] || { reset: "Reset", done: "the state is cleared" };

// onOverride(key): opens a new override of the inspected key (editors,
// issue 37; not for the shared bucket, which no override matches by key).
export function bucketInspector(name, editor, signal, onOverride) {
  const key = h("input", { id: "inspect-key", name: "key", autocomplete: "off", spellcheck: "false", placeholder: "e.g. user-42", "aria-describedby": "inspect-hint" });
  const submit = h("button", { type: "submit", class: "btn" }, "Inspect");
  // The result refreshes every 2 s, so it is not a live region: announce
  // says what was found once per Inspect, status what a reset or an error did.
  const result = h("div", { class: "inspect-result" });
  const announce = h("p", { class: "sr-only", role: "status", id: "inspect-announce" });
  const form = h("form", { class: "inspect-form", novalidate: true },
    h("label", { for: "inspect-key" }, "Key"),
    h("div", { class: "input-row" }, key, submit),
    h("p", { class: "hint", id: "inspect-hint" }, "Each key (a user id, an IP, a tenant) has its own bucket with this policy's limits. Leave it empty for the shared bucket."));
  let ac = null;
  let algorithm = fmt.DEFAULT_ALGORITHM;

  const gauge = makeGauge("Permits available in the inspected bucket", true);
  const rows = h("dl", { class: "kv" });
  const more = h("div", { class: "inspect-more" });
  const summary = h("p", { class: "small", id: "inspect-summary" });
  const which = h("p", { class: "inspect-which" });
  const status = h("p", { class: "small muted", role: "status", id: "inspect-status" });
  const resetLabel = h("span", {}, viewOf(algorithm).reset);
  const reset = editor && h("button", { type: "button", class: "btn btn-small", id: "inspect-reset" }, icon("reset"), resetLabel);
  const override = editor && onOverride && h("button", { type: "button", class: "btn btn-small", id: "inspect-override" }, "Override this key");
  let shownRows = "";   // the ids of the rows in `rows`, to rebuild them only when they change
  const cells = {};

  function show(b, k) {
    const limit = Number(b.limit ?? 0);
    const view = viewOf(algorithm);
    const d = fmt.describeBucket(algorithm, { ...b, limit });
    gauge.set(b, limit, algorithm);
    replace(which, k === "" ? "Shared bucket of " : "Key ", h("strong", { class: "break" }, k === "" ? name : k));
    setText(summary, d.summary);
    const ids = d.rows.map((r) => r.id).join();
    if (ids !== shownRows) {
      shownRows = ids;
      rows.replaceChildren();
      for (const r of d.rows) {
        cells[r.id] = { dt: h("dt", {}), dd: h("dd", { id: `inspect-${r.id}` }) };
        rows.append(cells[r.id].dt, cells[r.id].dd);
      }
    }
    for (const r of d.rows) {
      setText(cells[r.id].dt, r.label);
      setText(cells[r.id].dd, r.text);
    }
    if (view.more) replace(more, view.more(b), reservationsMore(b));
    else replace(more, reservationsMore(b));
    return d;
  }

  function start(k) {
    ac?.abort();
    ac = new AbortController();
    const mine = AbortSignal.any([signal, ac.signal]);
    status.textContent = "";
    announce.textContent = "";
    replace(result, loadingState("Loading bucket…"));
    let shown = false;
    poll(async () => {
      const r = await call(POLICY, "GetBucket", { name, key: k }, mine);
      if (mine.aborted) return;
      const d = show(r.bucket || {}, k);
      if (!shown) {
        shown = true;
        replace(result, which, gauge.el, summary, rows, more, h("div", { class: "row-actions" }, reset, override), status);
        setText(announce, `${k === "" ? "Shared bucket" : `Key ${k}`}: ${d.said ?? d.summary}.`);
      }
    }, DETAIL_POLL_MS, mine, (err) => {
      if (err.code === "unauthenticated") return;
      if (!shown) replace(result, errorState(describeError(err)));
      else setText(status, `Not updating: ${describeError(err)}`);
    });
    if (override) {
      override.hidden = k === "";
      override.onclick = () => onOverride(k);
    }
    if (reset) {
      reset.onclick = () => confirmReset({
        policy: name, key: k, action: viewOf(algorithm).reset,
        load: async () => (await call(POLICY, "GetBucket", { name, key: k }, mine)).bucket || {},
        reset: () => call(POLICY, "ResetBucket", { name, key: k }, mine),
        done: (r) => {
          if (r.bucket) show(r.bucket, k);
          setText(status, `Reset: ${viewOf(algorithm).done} (${new Date().toLocaleTimeString()}).`);
          reset.focus();
        },
      });
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    start(key.value);
  });
  return {
    el: h("div", {}, form, announce, result),
    // The policy's algorithm (the detail page calls it whenever the policy
    // changes): the next refresh shows the bucket in its words.
    // Inspects key (a hot key's link): the form shows it, focus goes to it.
    inspect(k) {
      key.value = k;
      start(k);
      key.focus();
      key.scrollIntoView({ block: "center" });
    },
    setAlgorithm(alg) {
      algorithm = alg || fmt.DEFAULT_ALGORITHM;
      setText(resetLabel, viewOf(algorithm).reset);
    },
  };
}
