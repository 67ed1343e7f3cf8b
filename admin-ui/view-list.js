// view-list.js - the policies table (#/policies): one page of policies at a time
// (issue 22: 10,000 of them cannot be one table), each row with a live gauge
// of its shared bucket; a filter the server applies as you type (each
// keystroke asks at once, and a request still on its way for an older filter
// or a refresh is dropped rather than waited for),
// an order (name, traffic, bucket level), previous/next and "51–100 of
// 10,000"; edit/delete for editors, and the rows of MySQL the sync skipped.
// Each row's traffic is the fleet's (issue 39): every instance's decisions
// since the start of the hour before this one, allowed and denied, from the
// traffic history (TrafficService.GetTrafficTrends), with a trend of the
// last hour; the orders by decisions, denials and share denied sort by the
// same numbers (ListPolicies' fleet orders). While Redis does not answer, a
// banner says so and the gauges read "unknown": a level of 0 / N would say
// every bucket is empty.
// A refresh asks for the page on screen only. Rows are updated in place on
// every poll, so focus and the filter survive a refresh.
import { RpcError } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import { confirmDelete } from "./dialogs.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { LIST_POLL_MS, poll, pollError } from "./poll.js";
import { editHref, nav, policyHref } from "./router.js";
import { POLICY, call, isEditor } from "./session.js";
import { keyedOnly, loadTrends, trendCell } from "./listtraffic.js";
import { appChips, emptyState, errorState, icon, loadingState, makeGauge, pageHead, statusBadges } from "./widgets.js";

export function listView(main) {
  document.title = "Policies · permitd admin";
  const ac = new AbortController();
  const editor = isEditor();
  const rows = new Map(); // name → { tr, gauge, traffic, sig, policy }
  let loaded = false;
  let policies = [];
  // The page on screen: tokens[i] is page i's page_token ("" the first).
  const PAGE_SIZE = 50;
  let tokens = [""];
  let page = 0;
  let total = 0;       // policies that match the filter
  let offset = 0;      // the page's first row among them
  let next = "";
  let everything = 0;  // policies in all (the last answer without a filter)
  let asked = "";      // the filter the page on screen was asked with

  // As long as the count it makes way for: the line does not grow when it comes.
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading policies · bucket levels update live");
  const filter = h("input", { type: "search", id: "policy-filter", class: "filter", placeholder: "Filter by name, app or description", "aria-label": "Filter policies" });
  // Says how many rows a filter leaves; changes only when that count does.
  const filterStatus = h("p", { class: "sr-only", role: "status", id: "policy-filter-status" });
  const tbody = h("tbody");
  const headers = ["Name", "Apps", "Max permits", "Limit", "Shared bucket", "Decisions (fleet, this hour and last)", "Status"];
  // Fixed column widths (style.css, .policy-list): the content that comes
  // with the data (names, gauges, traffic) cannot widen a column past the
  // page, nor move the columns beside it when it comes (issue 40).
  const cols = ["name", "apps", "max", "limit", "bucket", "traffic", "status"];
  const table = h("table", { class: `policies policy-list${editor ? " with-actions" : ""}`, "aria-busy": "true" },
    h("caption", { class: "sr-only" }, "Policies, with the live number of permits in each shared bucket"),
    h("thead", {}, h("tr", {},
      headers.map((t, i) => h("th", { scope: "col", class: `col-${cols[i]}${i === 2 || i === 5 ? " num" : ""}` }, t)),
      editor && h("th", { scope: "col", class: "col-actions" }, h("span", { class: "sr-only" }, "Actions")))),
    tbody);
  const order = h("select", { id: "policy-order", class: "order" },
    h("option", { value: "name" }, "Name"),
    // The fleet's, as the traffic column shows them (ListPolicies reads
    // the same hours of the traffic history).
    h("option", { value: "decided" }, "Decisions (fleet)"),
    h("option", { value: "denied" }, "Denied (fleet)"),
    h("option", { value: "denied_share" }, "Share denied (fleet)"),
    h("option", { value: "level" }, "Bucket level"));
  const orderLabel = h("label", { for: "policy-order", class: "order-label" }, "Sort by");
  const direction = h("button", { type: "button", class: "btn btn-small", id: "policy-direction", "aria-pressed": "false" }, "Descending");
  const prev = h("button", { type: "button", class: "btn btn-small", id: "page-prev", disabled: true }, "Previous");
  const nextBtn = h("button", { type: "button", class: "btn btn-small", id: "page-next", disabled: true }, "Next");
  const pageStatus = h("p", { class: "page-status muted", id: "page-status", "aria-live": "polite" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages of policies" }, prev, pageStatus, nextBtn);
  // Until the first page comes, rows of the height of a policy's hold its
  // place (issue 40: the rows replacing "Loading policies…" moved the page,
  // CLS 0.72); what is loading is said to assistive technology.
  const SKELETON_ROWS = 5;
  for (let i = 0; i < SKELETON_ROWS; i++) {
    tbody.append(h("tr", { class: "skeleton", "aria-hidden": "true" },
      [...headers, ...(editor ? [""] : [])].map((_, j) => h("td", {}, h("span", { class: j === 0 ? "bone bone-wide" : "bone" })))));
  }
  const stateBox = h("div", { class: "table-state" }, h("p", { class: "sr-only", role: "status" }, "Loading policies…"));
  const card = h("div", { class: "card table-card" }, h("div", { class: "table-scroll" }, table), stateBox);
  // Rows of MySQL the sync skips (read-only: they are fixed in MySQL).
  const skipped = h("div", { class: "notice", id: "skipped-rows", role: "status", hidden: true });
  // Redis not answering (the buckets could not be read).
  const redisDown = h("div", { class: "notice notice-warn", id: "redis-down", role: "alert", hidden: true });

  append(main,
    pageHead(h("h1", { tabindex: "-1" }, "Policies"), sub,
      editor && h("a", { class: "btn btn-primary", href: "#/new", id: "new-policy" }, icon("plus"), "New policy")),
    redisDown, skipped,
    h("div", { class: "toolbar" }, filter, filterStatus, orderLabel, order, direction),
    card, pager);

  function showSkipped(lines) {
    skipped.hidden = lines.length === 0;
    skipped.replaceChildren(...(lines.length === 0 ? [] : [
      h("p", {}, `${lines.length === 1 ? "1 row" : `${lines.length} rows`} of MySQL ${lines.length === 1 ? "is" : "are"} not in use: a name there is not valid. Fix ${lines.length === 1 ? "it" : "them"} in MySQL.`),
      h("ul", {}, lines.map((l) => h("li", { class: "break" }, l))),
    ]));
  }

  const signature = (p) => JSON.stringify([p.version, p.name, p.apps, p.maxPermits, p.rate, p.enabled, p.failureMode, p.description,
    p.algorithm, p.window, p.leaseTtl]);

  function fillRow(entry, p) {
    const { tr, gauge, traffic } = entry;
    const cells = [
      h("td", { class: "cell-name", "data-label": "Name" },
        h("a", { href: policyHref(p.name), class: "policy-link" }, p.name),
        p.description ? h("span", { class: "desc", title: p.description }, p.description) : null,
        // Who changed it last: the name the Audit page shows for its newest change.
        p.updatedBy ? h("span", { class: "changed-by" }, `changed by ${p.updatedBy}`) : null),
      h("td", { "data-label": "Apps" }, appChips(p.apps)),
      h("td", { class: "num", "data-label": "Max permits" }, fmt.formatNumber(Number(p.maxPermits ?? 0), 0)),
      h("td", { "data-label": "Limit" },
        h("span", { class: "rate", title: fmt.describeLimits(p) }, fmt.limitsShort(p)),
        h("span", { class: "algo" }, fmt.algorithmInfo(fmt.algorithmOf(p)).label)),
      h("td", { class: "cell-gauge", "data-label": "Shared bucket" }, gauge.el),
      h("td", { class: "num cell-traffic", "data-label": "Decisions (fleet, this hour and last)" }, traffic),
      h("td", { "data-label": "Status" }, statusBadges(p)),
    ];
    if (editor) {
      cells.push(h("td", { class: "cell-actions" },
        h("a", { class: "btn btn-small", href: editHref(p.name), "aria-label": `Edit ${p.name}` }, icon("edit"), h("span", {}, "Edit")),
        h("button", {
          type: "button", class: "btn btn-small btn-danger-quiet", "aria-label": `Delete ${p.name}`,
          onclick: () => {
            const pos = shownRows().indexOf(tr);
            confirmDelete(entry.policy, () => {
              focusAfterDelete(tr, pos);
              refresher.now();
            });
          },
        }, icon("trash"), h("span", {}, "Delete"))));
    }
    tr.replaceChildren(...cells);
  }

  const shownRows = () => [...tbody.children].filter((r) => !r.hidden);

  // The row whose Delete button had focus is about to go: focus moves to the
  // name of the row after it (else the one before), which stays in place
  // when the list refreshes; with no row left, to the heading. pos is the
  // row's place when Delete was pressed, for when a refresh removed it first.
  function focusAfterDelete(tr, pos) {
    const shown = shownRows();
    const i = shown.indexOf(tr);
    const next = i >= 0 ? shown[i + 1] || shown[i - 1] : shown[pos] || shown[pos - 1];
    (next?.querySelector(".policy-link") || main.querySelector("h1"))?.focus();
  }

  // What the table shows once a page came: the rows, or why there are none,
  // and (typed: the filter just changed) what the filter left, announced.
  function applyFilter(typed = false) {
    const text = asked;
    if (!loaded) return;
    const n = everything;
    if (text) setText(filterStatus, total === 0 ? `No policies match “${text}”.` : `${total} of ${n} ${n === 1 ? "policy matches" : "policies match"} “${text}”.`);
    else if (typed && filterStatus.textContent) setText(filterStatus, `All ${n} ${n === 1 ? "policy" : "policies"} shown.`);
    if (total === 0 && !text) {
      table.hidden = true;
      replace(stateBox, emptyState("No policies yet",
        editor ? "A policy is a named token bucket that applications acquire permits from."
          : "An editor can create the first one.",
        editor && h("a", { class: "btn btn-primary", href: "#/new" }, icon("plus"), "Create the first policy")));
    } else if (total === 0) {
      table.hidden = false;
      replace(stateBox, emptyState("No policies match the filter", `Nothing matches “${text}”.`));
    } else {
      table.hidden = false;
      stateBox.replaceChildren();
    }
    const first = policies.length ? offset + 1 : 0;
    setText(pageStatus, total === 0 ? "" : `${fmt.formatNumber(first, 0)}–${fmt.formatNumber(offset + policies.length, 0)} of ${fmt.formatNumber(total, 0)}`);
    prev.disabled = page === 0;
    nextBtn.disabled = !next;
  }

  // A new filter or order starts again from the first page.
  function restart() {
    tokens = [""];
    page = 0;
    refresher.now();
  }
  let typed = false;
  // The request on its way (its query and a way to drop it). A keystroke
  // does not wait for it: at 10,000 policies a refresh or an older filter
  // costs the server tens of ms, and the rows it brings are stale anyway.
  let inflight = null;
  filter.addEventListener("input", () => {
    typed = true;
    if (inflight && inflight.want !== filter.value.trim()) inflight.ctl.abort();
    restart();
  });
  order.addEventListener("change", restart);
  direction.addEventListener("click", () => {
    direction.setAttribute("aria-pressed", direction.getAttribute("aria-pressed") === "true" ? "false" : "true");
    restart();
  });
  prev.addEventListener("click", () => {
    if (page === 0) return;
    page--;
    refresher.now();
  });
  nextBtn.addEventListener("click", () => {
    if (!next) return;
    tokens[page + 1] = next;
    page++;
    refresher.now();
  });

  // The page's policies' decisions over the fleet (the traffic history),
  // into each row's traffic cell; "unknown" when MySQL cannot say.
  async function loadTraffic(list) {
    await loadTrends(list.map((p) => p.name || ""), (name) => rows.get(name)?.traffic, ac.signal, (name, t) => {
      // Callers that send keys never touch the shared bucket: its gauge
      // would read full and say nothing (issue 39). Said in words instead.
      const e = rows.get(name);
      if (e && e.policy.enabled && keyedOnly(t)) {
        e.gauge.unknown("per key", "every decision of these hours named a key: each key has a bucket of its own, and the shared one is not used");
      }
    });
  }

  function update(list, buckets, bucketsError) {
    policies = list;
    // Rows of deleted policies go first: left in place, they would make the
    // rows after them look out of place below, and moving a row that holds
    // focus loses it.
    for (const r of tbody.querySelectorAll("tr.skeleton")) r.remove();
    const seen = new Set(list.map((p) => p.name || ""));
    for (const [name, e] of rows) {
      if (!seen.has(name)) {
        e.tr.remove();
        rows.delete(name);
      }
    }
    list.forEach((p, i) => {
      const name = p.name || "";
      let e = rows.get(name);
      const sig = signature(p);
      if (!e) {
        e = { tr: h("tr", { dataset: { policy: name } }), gauge: makeGauge(`Permits available in the shared bucket of ${name}`), traffic: trendCell(), sig: "", policy: p };
        rows.set(name, e);
        if (nav.flashPolicy === name) {
          e.tr.classList.add("flash");
          nav.flashPolicy = null;
        }
      }
      e.policy = p;
      if (e.sig !== sig) {
        fillRow(e, p);
        e.sig = sig;
      }
      let b = buckets[i];
      if (b && b.policy && b.policy !== name) b = buckets.find((x) => x.policy === name);
      // A disabled policy keeps no bucket (Acquire answers failed_precondition).
      if (!p.enabled) e.gauge.unknown("disabled", "the policy is disabled: no bucket in use");
      else if (bucketsError) e.gauge.unknown("unknown", "Redis did not answer: the level is not known");
      else e.gauge.set(b, p.maxPermits, fmt.algorithmOf(p));
      // Keep rows in server order; move a row only when it is out of place
      // (moving the row that holds focus would lose it).
      const want = tbody.children[i];
      if (want !== e.tr) tbody.insertBefore(e.tr, want || null);
    });
    loaded = true;
    table.setAttribute("aria-busy", "false");
    setText(sub, everything === 1 ? "1 policy · bucket levels update live" : `${fmt.formatNumber(everything, 0)} policies · bucket levels update live`);
    applyFilter(typed);
    typed = false;
  }

  const refresher = poll(async () => {
    const want = filter.value.trim();
    const q = { includeBuckets: true, pageSize: PAGE_SIZE, filter: want, orderBy: order.value,
      descending: direction.getAttribute("aria-pressed") === "true", pageToken: tokens[page] };
    const ctl = new AbortController();
    const signal = AbortSignal.any([ac.signal, ctl.signal]);
    inflight = { want, ctl };
    let r;
    try {
      r = await call(POLICY, "ListPolicies", q, signal);
    } catch (err) {
      // Dropped for a newer filter: the next tick asks for that one.
      if (ctl.signal.aborted && !ac.signal.aborted) return;
      // A token the server no longer reads (a new permitd): the first page.
      if (!(err instanceof RpcError && err.code === "invalid_argument" && page > 0)) throw err;
      tokens = [""];
      page = 0;
      r = await call(POLICY, "ListPolicies", { ...q, pageToken: "" }, signal);
    } finally {
      if (inflight?.ctl === ctl) inflight = null;
    }
    if (signal.aborted) return;
    total = Number(r.totalSize ?? 0);
    offset = Number(r.offset ?? 0);
    next = r.nextPageToken || "";
    asked = want;
    if (!want) everything = total;
    else if (!loaded) everything = total;
    // The last page emptied (rows deleted): go back one.
    if ((r.policies || []).length === 0 && page > 0) {
      page--;
      refresher.now();
      return;
    }
    update(r.policies || [], r.buckets || [], r.bucketsError || "");
    redisDown.hidden = !r.bucketsError;
    if (r.bucketsError) {
      setText(redisDown, `Redis is not answering: bucket levels are unknown until it does (${r.bucketsError}). Acquire calls follow each policy's failure mode meanwhile; the traffic column comes from MySQL's history.`);
    }
    showSkipped(r.skippedRows || []);
    await loadTraffic(r.policies || []);
    card.classList.remove("stale");
  }, LIST_POLL_MS, ac.signal, (err) => {
    if (err instanceof RpcError && err.code === "unauthenticated") return;
    if (!loaded) {
      table.hidden = true;
      for (const r of tbody.querySelectorAll("tr.skeleton")) r.remove();
      setText(sub, "Could not load policies");
      replace(stateBox, errorState(`Could not load policies: ${describeError(err)}`, () => {
        replace(stateBox, loadingState("Loading policies…"));
        refresher.now();
      }));
    } else {
      setText(sub, "Showing the last data received; retrying…");
      card.classList.add("stale");
    }
    pollError(err);
  });

  return { dispose: () => ac.abort() };
}
