// view-list.js - the policies table (#/): one row per policy with a live
// gauge of its shared bucket, a filter, edit/delete for editors, and the
// rows of MySQL the sync skipped. Rows are updated in place on every poll,
// so focus and the filter survive a refresh.
import { RpcError } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import { confirmDelete } from "./dialogs.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { LIST_POLL_MS, poll, pollError } from "./poll.js";
import { editHref, nav, policyHref } from "./router.js";
import { POLICY, call, isEditor } from "./session.js";
import { appChips, emptyState, errorState, icon, loadingState, makeGauge, pageHead, statusBadges } from "./widgets.js";

export function listView(main) {
  document.title = "Policies · permitd admin";
  const ac = new AbortController();
  const editor = isEditor();
  const rows = new Map(); // name → { tr, gauge, sig, policy }
  let loaded = false;
  let policies = [];

  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const filter = h("input", { type: "search", id: "policy-filter", class: "filter", placeholder: "Filter by name, app or description", "aria-label": "Filter policies" });
  // Says how many rows a filter leaves; changes only when that count does.
  const filterStatus = h("p", { class: "sr-only", role: "status", id: "policy-filter-status" });
  const tbody = h("tbody");
  const headers = ["Name", "Apps", "Max permits", "Limit", "Shared bucket", "Status"];
  const table = h("table", { class: "policies", "aria-busy": "true" },
    h("caption", { class: "sr-only" }, "Policies, with the live number of permits in each shared bucket"),
    h("thead", {}, h("tr", {},
      headers.map((t, i) => h("th", { scope: "col", class: i === 2 ? "num" : null }, t)),
      editor && h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
    tbody);
  const stateBox = h("div", { class: "table-state" }, loadingState("Loading policies…"));
  const card = h("div", { class: "card table-card" }, h("div", { class: "table-scroll" }, table), stateBox);
  // Rows of MySQL the sync skips (read-only: they are fixed in MySQL).
  const skipped = h("div", { class: "notice", id: "skipped-rows", role: "status", hidden: true });

  append(main,
    pageHead(h("h1", { tabindex: "-1" }, "Policies"), sub,
      editor && h("a", { class: "btn btn-primary", href: "#/new", id: "new-policy" }, icon("plus"), "New policy")),
    skipped,
    h("div", { class: "toolbar" }, filter, filterStatus),
    card);

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
    const { tr, gauge } = entry;
    const cells = [
      h("td", { class: "cell-name", "data-label": "Name" },
        h("a", { href: policyHref(p.name), class: "policy-link" }, p.name),
        p.description ? h("span", { class: "desc", title: p.description }, p.description) : null),
      h("td", { "data-label": "Apps" }, appChips(p.apps)),
      h("td", { class: "num", "data-label": "Max permits" }, fmt.formatNumber(Number(p.maxPermits ?? 0), 0)),
      h("td", { "data-label": "Limit" },
        h("span", { class: "rate", title: fmt.describeLimits(p) }, fmt.limitsShort(p)),
        h("span", { class: "algo" }, fmt.algorithmInfo(fmt.algorithmOf(p)).label)),
      h("td", { class: "cell-gauge", "data-label": "Shared bucket" }, gauge.el),
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

  function applyFilter(typed = false) {
    const text = filter.value.trim();
    const q = text.toLowerCase();
    let shown = 0;
    for (const [name, e] of rows) {
      const p = e.policy;
      const hay = [name, ...(p.apps || []), p.description || ""].join("\n").toLowerCase();
      const vis = !q || hay.includes(q);
      e.tr.hidden = !vis;
      if (vis) shown++;
    }
    if (!loaded) return;
    const n = policies.length;
    if (q) setText(filterStatus, shown === 0 ? `No policies match “${text}”.` : `${shown} of ${n} ${n === 1 ? "policy matches" : "policies match"} “${text}”.`);
    else if (typed && filterStatus.textContent) setText(filterStatus, `All ${n} ${n === 1 ? "policy" : "policies"} shown.`);
    if (policies.length === 0) {
      table.hidden = true;
      replace(stateBox, emptyState("No policies yet",
        editor ? "A policy is a named token bucket that applications acquire permits from."
          : "An editor can create the first one.",
        editor && h("a", { class: "btn btn-primary", href: "#/new" }, icon("plus"), "Create the first policy")));
    } else if (shown === 0) {
      table.hidden = false;
      replace(stateBox, emptyState("No policies match the filter", `Nothing matches “${filter.value.trim()}”.`));
    } else {
      table.hidden = false;
      stateBox.replaceChildren();
    }
  }
  filter.addEventListener("input", () => applyFilter(true));

  function update(list, buckets) {
    policies = list;
    // Rows of deleted policies go first: left in place, they would make the
    // rows after them look out of place below, and moving a row that holds
    // focus loses it.
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
        e = { tr: h("tr", { dataset: { policy: name } }), gauge: makeGauge(`Permits available in the shared bucket of ${name}`), sig: "", policy: p };
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
      else e.gauge.set(b, p.maxPermits, fmt.algorithmOf(p));
      // Keep rows in server order; move a row only when it is out of place
      // (moving the row that holds focus would lose it).
      const want = tbody.children[i];
      if (want !== e.tr) tbody.insertBefore(e.tr, want || null);
    });
    loaded = true;
    table.setAttribute("aria-busy", "false");
    setText(sub, list.length === 1 ? "1 policy · bucket levels update live" : `${list.length} policies · bucket levels update live`);
    applyFilter();
  }

  const refresher = poll(async () => {
    const r = await call(POLICY, "ListPolicies", { includeBuckets: true }, ac.signal);
    if (ac.signal.aborted) return;
    update(r.policies || [], r.buckets || []);
    showSkipped(r.skippedRows || []);
    card.classList.remove("stale");
  }, LIST_POLL_MS, ac.signal, (err) => {
    if (err instanceof RpcError && err.code === "unauthenticated") return;
    if (!loaded) {
      table.hidden = true;
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
