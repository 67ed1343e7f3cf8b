// view-audit.js - the Audit page (#/audit, issue 23): every change to
// policies (deleted ones included), apps and their keys, users, overrides,
// Envoy descriptors and gateway rules, and every bucket reset, newest
// first, from AuditService.ListAudit: when, what, the action, by whom (an
// admin's user name, "cli:<OS user>" for the command line, or the MySQL
// user of a plain SQL statement) and what changed (before → after).
//
// Filters (policy, user, kind, a time range in local time, sent as UTC)
// apply when the form is submitted; pages are the server's: "Older" sends
// the page's next cursor, "Newer" goes back to the cursor before (kept
// here), so changes made meanwhile never shift the pages. Every logged-in
// user may read it. A policy's name links to its page (or says it is
// deleted when the newest entry deletes it).
import { isAbort } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { policyHref } from "./router.js";
import { AUDIT, call } from "./session.js";
import { badge, emptyState, errorState, loadingState, pageHead } from "./widgets.js";

const PAGE_SIZE = 25;
const KINDS = [["", "Any"], ["policy", "Policies"], ["app", "Apps"], ["key", "Keys"], ["user", "Users"], ["bucket", "Bucket resets"],
  ["override", "Overrides"], ["envoy", "Envoy descriptors"], ["gateway", "Gateway rules"]];
const ACTION_KIND = { reset: "danger", create: "ok", issue: "ok", enable: "ok", delete: "danger", revoke: "danger", disable: "danger" };

// "2026-11-25T10:00" (a datetime-local value, local time) → UTC RFC 3339.
function toUtc(local) {
  if (!local) return "";
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

export function auditView(main) {
  document.title = "Audit · permitd admin";
  const ac = new AbortController();
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const field = (id, label, control) => {
    control.id = id;
    return h("div", { class: "field" }, h("label", { for: id }, label), control);
  };
  const policy = h("input", { name: "policy", autocomplete: "off", spellcheck: "false" });
  const user = h("input", { name: "user", autocomplete: "off", spellcheck: "false" });
  const kind = h("select", { name: "kind" }, KINDS.map(([v, t]) => h("option", { value: v }, t)));
  const since = h("input", { name: "since", type: "datetime-local", step: "1" });
  const until = h("input", { name: "until", type: "datetime-local", step: "1" });
  const formError = h("p", { class: "form-error", id: "audit-error", role: "alert", hidden: true });
  const apply = h("button", { type: "submit", class: "btn btn-primary", id: "audit-apply" }, "Apply filters");
  const clear = h("button", { type: "button", class: "btn", id: "audit-clear" }, "Clear");
  const form = h("form", { class: "card audit-filters", id: "audit-filters", "aria-label": "Filters", novalidate: true },
    h("div", { class: "audit-filter-fields" },
      field("af-policy", "Policy", policy), field("af-user", "Changed by", user), field("af-kind", "Kind", kind),
      field("af-since", "From (local time)", since), field("af-until", "Until (local time)", until)),
    formError, h("div", { class: "form-actions" }, clear, apply));
  const box = h("div", { id: "audit" }, loadingState("Loading the audit…"));
  const newer = h("button", { type: "button", class: "btn btn-small", id: "audit-newer", disabled: true }, "← Newer");
  const older = h("button", { type: "button", class: "btn btn-small", id: "audit-older", disabled: true }, "Older →");
  const pageNo = h("span", { class: "muted small", id: "audit-page", "aria-live": "polite" }, "");
  const pager = h("nav", { class: "pager", "aria-label": "Audit pages" }, newer, pageNo, older);
  append(main, pageHead(h("h1", { tabindex: "-1" }, "Audit"), sub), form, box, pager);

  let filters = {};
  let cursors = [""];       // cursors[i]: the cursor of page i+1
  let next = "";

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const s = toUtc(since.value);
    const u = toUtc(until.value);
    if (s === null || u === null) {
      setText(formError, "Give the times as a date and a time.");
      formError.hidden = false;
      return;
    }
    formError.hidden = true;
    filters = {};
    if (policy.value.trim()) filters.policy = policy.value.trim();
    if (user.value.trim()) filters.user = user.value.trim();
    if (kind.value) filters.kind = kind.value;
    if (s) filters.since = s;
    if (u) filters.until = u;
    cursors = [""];
    load();
  });
  clear.addEventListener("click", () => {
    for (const c of [policy, user, since, until]) c.value = "";
    kind.value = "";
    formError.hidden = true;
    filters = {};
    cursors = [""];
    load();
  });
  older.addEventListener("click", () => {
    cursors.push(next);
    load(older);
  });
  newer.addEventListener("click", () => {
    cursors.pop();
    load(newer);
  });

  function subject(e) {
    if (e.kind === "policy") {
      return e.action === "delete" ? [h("span", { class: "break" }, e.subject), " ", badge("deleted", "muted")]
        : h("a", { href: policyHref(e.subject), class: "break" }, e.subject);
    }
    if (e.kind === "key") return [h("span", { class: "break" }, e.subject), " ", h("code", { class: "key-prefix" }, e.keyPrefix || "")];
    if (e.kind === "bucket") {
      return [h("a", { href: policyHref(e.subject), class: "break" }, e.subject), " ",
        e.keyPrefix ? h("code", { class: "break bucket-key" }, e.keyPrefix) : h("span", { class: "muted small" }, "shared bucket")];
    }
    // An override (issue 37): its policy and its match in words.
    if (e.kind === "override") {
      return [h("a", { href: policyHref(e.subject), class: "break" }, e.subject), " ",
        h("code", { class: "break override-match" }, fmt.overrideMatchWords(e.keyPrefix || ""))];
    }
    if (e.kind === "envoy") return h("code", { class: "break envoy-descriptor" }, `${e.subject}/${e.keyPrefix || ""}`);
    if (e.kind === "gateway") return [h("span", { class: "gateway-rule" }, e.subject), " → ", h("code", { class: "break" }, e.keyPrefix || "")];
    return h("span", { class: "break" }, e.subject);
  }

  // A reset's row: the bucket as it was (ResetBucket's audit, issue 40).
  function bucketBefore(e) {
    let b;
    try {
      b = JSON.parse(e.oldValue || "");
    } catch {
      return h("code", { class: "small" }, e.oldValue || "");
    }
    return h("span", { class: "small bucket-before" },
      `Before: ${Number(b.remaining ?? 0)} of ${Number(b.limit ?? 0)} left; reset gave back ${Number(b.limit ?? 0)}`);
  }

  function changes(e) {
    if (e.kind === "bucket") return bucketBefore(e);
    const both = e.oldValue && e.newValue;
    const d = fmt.diffChange({ action: both ? "update" : e.action === "delete" ? "delete" : "create", oldValue: e.oldValue || "", newValue: e.newValue || "" });
    if (d.unreadable) return h("code", { class: "small" }, e.newValue || e.oldValue || "");
    if (!d.rows.length) return h("span", { class: "muted small" }, both ? "no field changed" : "—");
    return h("ul", { class: "audit-diff" }, d.rows.map((r) => h("li", {},
      h("span", { class: "field-name", dataset: { field: r.field } }, r.label), ": ",
      both ? [h("span", { class: "old" }, r.old), " → ", h("span", { class: "new" }, r.new)]
        : h("span", {}, e.action === "delete" ? r.old : r.new))));
  }

  function row(e) {
    const at = e.changedAt || "";
    return h("tr", { class: "audit-row", dataset: { kind: e.kind || "", action: e.action || "" } },
      h("td", { "data-label": "When" }, h("time", fmt.timeAttrs(at), fmt.formatTimestamp(at))),
      h("td", { "data-label": "What" }, h("span", { class: "muted small kind" }, `${e.kind} `), subject(e)),
      h("td", { "data-label": "Action" }, badge(e.action || "", ACTION_KIND[e.action] || "info")),
      h("td", { "data-label": "By", class: "actor" }, e.actor || ""),
      h("td", { "data-label": "Change" }, changes(e)));
  }

  async function load(focusAfter) {
    const msg = { ...filters, pageSize: PAGE_SIZE };
    const cursor = cursors[cursors.length - 1];
    if (cursor) msg.cursor = cursor;
    newer.disabled = older.disabled = true;
    let r;
    try {
      r = await call(AUDIT, "ListAudit", msg, ac.signal);
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      if (err.code === "invalid_argument") {
        setText(formError, describeError(err));
        formError.hidden = false;
      }
      setText(sub, "Could not load the audit");
      replace(box, errorState(`Could not load the audit: ${describeError(err)}`, () => load(focusAfter)));
      return;
    }
    if (ac.signal.aborted) return;
    const entries = r.entries || [];
    next = r.nextCursor || "";
    const filtered = Object.keys(filters).length > 0;
    setText(sub, `Every change to policies, apps, keys, users, overrides, Envoy descriptors and gateway rules, and every bucket reset${filtered ? " that matches the filters" : ""}, newest first`);
    setText(pageNo, `Page ${cursors.length}`);
    newer.disabled = cursors.length <= 1;
    older.disabled = !next;
    if (!entries.length) {
      replace(box, emptyState(filtered ? "No change matches the filters" : "No changes recorded", null));
    } else {
      replace(box, h("div", { class: "table-scroll" }, h("table", { class: "audit", id: "audit-table" },
        h("caption", { class: "sr-only" }, `Changes, page ${cursors.length}`),
        h("thead", {}, h("tr", {}, ["When", "What", "Action", "By", "Change"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, entries.map(row)))));
    }
    if (focusAfter && focusAfter.disabled) main.querySelector("h1")?.focus();
    else focusAfter?.focus();
  }
  load();
  return { dispose: () => ac.abort() };
}
