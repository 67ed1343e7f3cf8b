// app.js - the permitd admin UI: login, policies table with live bucket
// gauges, create/edit forms, delete, per-policy detail (live chart, bucket
// inspector, history). Talks to permit.v1.PolicyService and
// permit.v1.AdminAuthService with Connect JSON (see proto/permit/v1/admin.proto).
//
// Everything that comes from the server or the user is put into the page as
// text (dom.js builds nodes; no HTML strings anywhere).
import { rpc, RpcError, isAbort } from "./api.js";
import { h, s, append, replace, setText } from "./dom.js";
import * as fmt from "./format.js";

const POLICY = "PolicyService";
const AUTH = "AdminAuthService";
const LIST_POLL_MS = 1500;
const DETAIL_POLL_MS = 2000;
const HISTORY_LIMIT = 50;

const $ = (sel) => document.querySelector(sel);
const ui = {
  topbar: $("#topbar"),
  main: $("#main"),
  banner: $("#banner"),
  bannerText: $("#banner-text"),
  bannerClose: $("#banner-close"),
  toast: $("#toast"),
  userName: $("#user-name"),
  userRole: $("#user-role"),
  logout: $("#logout"),
};

const app = {
  user: null,          // { username, role }
  view: null,          // { dispose() }
  route: null,         // current hash
  prevRoute: null,     // the one before, to go back to after a form
  bannerSource: null,
  flashPolicy: null,   // a policy row to highlight once (just created)
  firstRender: true,
};

const isEditor = () => app.user?.role === "editor";

// ---------------------------------------------------------------- plumbing

async function call(service, method, body, signal) {
  try {
    return await rpc(service, method, body, { signal });
  } catch (err) {
    if (err instanceof RpcError && err.code === "unauthenticated" && app.user && method !== "Login") {
      sessionExpired();
    }
    throw err;
  }
}

function describeError(err) {
  if (!(err instanceof RpcError)) return String(err?.message || err);
  switch (err.code) {
    case "network":
      return err.message === "cannot reach permitd"
        ? "Cannot reach permitd. Check that it is running."
        : `${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}.`;
    case "unavailable":
      return `permitd's storage (MySQL or Redis) is unavailable: ${err.message}`;
    case "permission_denied":
      return `Not allowed for your account: ${err.message}`;
    case "unauthenticated":
      return "Your session has ended. Sign in again.";
    default:
      return err.message;
  }
}

function showBanner(text, source = "action") {
  app.bannerSource = source;
  setText(ui.bannerText, text);
  ui.banner.hidden = false;
}

function clearBanner(source) {
  if (source === undefined || app.bannerSource === source) {
    ui.banner.hidden = true;
    app.bannerSource = null;
  }
}

let toastTimer = null;
function toast(text) {
  setText(ui.toast, text);
  ui.toast.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => ui.toast.classList.remove("show"), 4000);
}

// Runs fn now and then every ms (never two at once) until signal aborts.
// Skips work while the tab is hidden. Returns { now() } to run it at once.
function poll(fn, ms, signal, onError = pollError) {
  let timer = null;
  let running = false;
  let again = false;
  const tick = async () => {
    clearTimeout(timer);
    if (signal.aborted) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      if (!document.hidden) {
        await fn();
        if (!signal.aborted) clearBanner("poll");
      }
    } catch (err) {
      if (!isAbort(err) && !signal.aborted) onError(err);
    } finally {
      running = false;
    }
    if (signal.aborted) return;
    if (again) {
      again = false;
      tick();
      return;
    }
    timer = setTimeout(tick, ms);
  };
  signal.addEventListener("abort", () => clearTimeout(timer));
  tick();
  return { now: tick };
}

function pollError(err) {
  if (err instanceof RpcError && err.code === "unauthenticated") return;
  showBanner(`Live data is not updating: ${describeError(err)} Retrying…`, "poll");
}

const policyHref = (name) => `#/policy/${encodeURIComponent(name)}`;
const editHref = (name) => `#/policy/${encodeURIComponent(name)}/edit`;

function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

// ---------------------------------------------------------------- small widgets

function icon(name) {
  const paths = {
    plus: "M8 3v10M3 8h10",
    back: "M10 3L5 8l5 5",
    edit: "M3 13h2.5L13 5.5 10.5 3 3 10.5V13z",
    trash: "M3 4.5h10M6.5 4.5V3h3v1.5M4.5 4.5l.7 8.5h5.6l.7-8.5",
    reset: "M3 8a5 5 0 1 0 1.5-3.5M3 3v2.5h2.5",
    alert: "M8 2.5l6 11H2l6-11zM8 7v3M8 11.8v.2",
  };
  return s("svg", { class: "icon", viewBox: "0 0 16 16", width: "16", height: "16", "aria-hidden": "true", focusable: "false" },
    s("path", { d: paths[name] }));
}

function logo() {
  return s("svg", { class: "logo", viewBox: "0 0 24 24", width: "24", height: "24", "aria-hidden": "true", focusable: "false" },
    s("rect", { x: "2", y: "2", width: "20", height: "20", rx: "5", class: "logo-bg" }),
    s("path", { d: "M7 16V9M11 16V6M15 16v-4M19 16v-2", class: "logo-fg" }));
}

function badge(text, kind, title) {
  return h("span", { class: `badge badge-${kind}`, title }, text);
}

function appChips(apps) {
  const list = apps && apps.length ? apps : [];
  if (!list.length) return h("span", { class: "muted" }, "none");
  return h("span", { class: "chips" },
    list.map((a) => a === "*"
      ? h("span", { class: "chip chip-any", title: "any application" }, "* any app")
      : h("span", { class: "chip" }, a)));
}

function statusBadges(p) {
  return h("span", { class: "badges" },
    p.enabled ? badge("Enabled", "ok") : badge("Disabled", "muted", "Acquire answers failed_precondition"),
    p.failureMode === "closed"
      ? badge("fails closed", "plain", "While Redis is unreachable, Acquire answers unavailable")
      : badge(p.failureMode === "open" ? "fails open" : "failure mode unset", "plain",
        "While Redis is unreachable, Acquire allows requests"));
}

// A horizontal meter of tokens in a bucket.
function makeGauge(label, large = false) {
  const fill = h("span", { class: "gauge-fill" });
  const text = h("span", { class: "gauge-text" }, "—");
  const el = h("div", {
    class: large ? "gauge gauge-lg" : "gauge",
    role: "meter", "aria-label": label,
    "aria-valuemin": "0", "aria-valuemax": "1", "aria-valuenow": "0",
  }, h("span", { class: "gauge-track", "aria-hidden": "true" }, fill), text);
  return {
    el,
    set(bucket, fallbackLimit) {
      if (!bucket) {
        this.unknown();
        return;
      }
      const limit = Number(bucket.limit ?? fallbackLimit ?? 0) || Number(fallbackLimit) || 0;
      const tokens = Math.max(0, Math.min(Number(bucket.tokens ?? 0) || 0, limit || Infinity));
      const pct = limit > 0 ? tokens / limit : 0;
      fill.style.width = `${(pct * 100).toFixed(2)}%`;
      el.classList.toggle("low", pct < 0.2);
      el.classList.toggle("mid", pct >= 0.2 && pct < 0.5);
      el.classList.remove("unknown");
      setText(text, `${fmt.formatTokens(tokens)} / ${fmt.formatNumber(limit, 0)}`);
      el.setAttribute("aria-valuemax", String(limit));
      el.setAttribute("aria-valuenow", String(Math.round(tokens * 1000) / 1000));
      el.setAttribute("aria-valuetext", `${fmt.formatTokens(tokens)} of ${limit} permits available`);
      const reset = Number(bucket.resetAfterMs ?? 0);
      el.title = reset > 0 ? `full again in ${fmt.formatDuration(reset)}` : "full";
    },
    unknown(label = "—", why = "bucket state unknown") {
      fill.style.width = "0%";
      el.classList.add("unknown");
      el.classList.remove("low", "mid");
      setText(text, label);
      el.setAttribute("aria-valuenow", "0");
      el.setAttribute("aria-valuetext", why);
      el.title = why;
    },
  };
}

function emptyState(title, text, action) {
  return h("div", { class: "empty-state" },
    h("p", { class: "empty-title" }, title),
    text && h("p", { class: "muted" }, text),
    action);
}

function loadingState(text) {
  return h("div", { class: "loading-state", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), text);
}

function errorState(text, retry) {
  return h("div", { class: "error-state", role: "alert" },
    icon("alert"), h("span", {}, text),
    retry && h("button", { type: "button", class: "btn btn-small", onclick: retry }, "Retry"));
}

// ---------------------------------------------------------------- login

function showLogin(notice) {
  app.view?.dispose();
  app.view = null;
  app.user = null;
  document.body.classList.add("logged-out");
  ui.topbar.hidden = true;
  clearBanner();
  document.title = "Sign in · permitd admin";

  const error = h("p", { class: "form-error", id: "login-error", role: "alert", hidden: true });
  const user = h("input", { id: "login-username", name: "username", autocomplete: "username", autocapitalize: "none", spellcheck: "false", required: true });
  const pass = h("input", { id: "login-password", name: "password", type: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "btn btn-primary btn-block" }, "Sign in");
  const form = h("form", { class: "card login-card", novalidate: true, "aria-labelledby": "login-title" },
    h("div", { class: "login-brand" }, logo(), h("span", {}, "permitd")),
    h("h1", { id: "login-title" }, "Sign in"),
    h("p", { class: "muted login-sub" }, "Rate-limit policy administration"),
    notice && h("p", { class: "notice", role: "status" }, notice),
    error,
    h("div", { class: "field" }, h("label", { for: "login-username" }, "Username"), user),
    h("div", { class: "field" }, h("label", { for: "login-password" }, "Password"), pass),
    submit);

  const fail = (text) => {
    setText(error, text);
    error.hidden = false;
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.hidden = true;
    if (!user.value || !pass.value) {
      fail("Enter your username and password.");
      (user.value ? pass : user).focus();
      return;
    }
    submit.disabled = true;
    setText(submit, "Signing in…");
    try {
      const r = await call(AUTH, "Login", { username: user.value, password: pass.value });
      enterApp({ username: r.username || user.value, role: r.role || "viewer" }, true);
    } catch (err) {
      submit.disabled = false;
      setText(submit, "Sign in");
      pass.value = "";
      if (err.code === "unauthenticated") fail("Wrong username or password.");
      else if (err.code === "resource_exhausted") fail(`Too many failed sign-in attempts. ${err.message}`);
      else fail(describeError(err));
      pass.focus();
    }
  });
  replace(ui.main, h("div", { class: "login-wrap" }, form));
  user.focus();
}

// After a sign-in (fromLogin) the first page takes focus like any later one:
// the form that had it is gone. On a plain page load it does not.
function enterApp(user, fromLogin = false) {
  app.user = user;
  document.body.classList.remove("logged-out");
  ui.topbar.hidden = false;
  setText(ui.userName, user.username);
  // On narrow screens CSS hides .role-name: a viewer's badge reads "read-only".
  if (user.role === "editor") replace(ui.userRole, "editor");
  else replace(ui.userRole, h("span", { class: "role-name" }, "viewer · "), "read-only");
  ui.userRole.className = `badge ${user.role === "editor" ? "badge-info" : "badge-muted"}`;
  if (!location.hash || location.hash === "#") history.replaceState(null, "", "#/");
  app.firstRender = !fromLogin;
  render();
}

function sessionExpired() {
  showLogin("Your session has expired. Sign in again to continue.");
}

ui.logout.addEventListener("click", async () => {
  ui.logout.disabled = true;
  try {
    await rpc(AUTH, "Logout", {});
  } catch {
    // Signed out either way on this side; the session expires on its own.
  } finally {
    ui.logout.disabled = false;
  }
  showLogin("You have signed out.");
});

ui.bannerClose.addEventListener("click", () => clearBanner());

// ---------------------------------------------------------------- router

function parseRoute(hash) {
  let parts;
  try {
    parts = hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  } catch {
    return { name: "missing" };
  }
  if (parts.length === 1 && parts[0] === "") return { name: "list" };
  if (parts.length === 1 && parts[0] === "new") return { name: "edit", policy: null };
  if (parts[0] === "policy" && parts[1]) {
    if (parts.length === 2) return { name: "detail", policy: parts[1] };
    if (parts.length === 3 && parts[2] === "edit") return { name: "edit", policy: parts[1] };
  }
  return { name: "missing" };
}

function render() {
  if (!app.user) return;
  app.view?.dispose();
  app.view = null;
  clearBanner("poll");
  const hash = location.hash || "#/";
  if (hash !== app.route) {
    app.prevRoute = app.route;
    app.route = hash;
  }
  const route = parseRoute(hash);
  for (const a of document.querySelectorAll(".nav-link")) {
    if (route.name === "list") a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  ui.main.replaceChildren();
  const views = { list: listView, detail: detailView, edit: editView, missing: missingView };
  app.view = views[route.name](ui.main, route);
  if (!app.firstRender) {
    const target = ui.main.querySelector("[data-autofocus]") || ui.main.querySelector("h1");
    target?.focus();
  }
  app.firstRender = false;
}

window.addEventListener("hashchange", render);

function missingView(main) {
  document.title = "Not found · permitd admin";
  append(main, h("h1", { tabindex: "-1" }, "Page not found"),
    h("p", {}, h("a", { href: "#/" }, "Back to all policies")));
  return { dispose() {} };
}

function pageHead(title, sub, ...actions) {
  return h("div", { class: "page-head" },
    h("div", { class: "page-title" }, title, sub),
    actions.length ? h("div", { class: "page-actions" }, actions) : null);
}

// ---------------------------------------------------------------- policies table

function listView(main) {
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
  const headers = ["Name", "Apps", "Max permits", "Rate", "Shared bucket", "Status"];
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

  const signature = (p) => JSON.stringify([p.version, p.name, p.apps, p.maxPermits, p.rate, p.enabled, p.failureMode, p.description]);

  function fillRow(entry, p) {
    const { tr, gauge } = entry;
    const cells = [
      h("td", { class: "cell-name", "data-label": "Name" },
        h("a", { href: policyHref(p.name), class: "policy-link" }, p.name),
        p.description ? h("span", { class: "desc", title: p.description }, p.description) : null),
      h("td", { "data-label": "Apps" }, appChips(p.apps)),
      h("td", { class: "num", "data-label": "Max permits" }, fmt.formatNumber(Number(p.maxPermits ?? 0), 0)),
      h("td", { "data-label": "Rate" }, h("span", { class: "rate", title: `${p.rate ?? "?"} permits per second` }, fmt.describeRate(p.rate).text)),
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
        if (app.flashPolicy === name) {
          e.tr.classList.add("flash");
          app.flashPolicy = null;
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
      else e.gauge.set(b, p.maxPermits);
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

// ---------------------------------------------------------------- delete

function confirmDelete(p, onDeleted) {
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: "delete-cancel" }, "Cancel");
  const del = h("button", { type: "submit", class: "btn btn-danger", id: "delete-confirm" }, "Delete policy");
  const form = h("form", { method: "dialog" },
    h("h2", { id: "delete-title" }, "Delete policy?"),
    h("p", { id: "delete-desc" },
      "This permanently deletes ", h("strong", { class: "break" }, p.name),
      ` (version ${p.version ?? "?"}). Applications that still name it in Acquire will get not_found.`),
    msg,
    h("div", { class: "dialog-actions" }, cancel, del));
  const dlg = h("dialog", { class: "dialog", "aria-labelledby": "delete-title", "aria-describedby": "delete-desc" }, form);
  let deleted = false;
  dlg.addEventListener("close", () => {
    dlg.remove();
    if (deleted) onDeleted();
  });
  cancel.addEventListener("click", () => dlg.close());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.hidden = true;
    del.disabled = true;
    setText(del, "Deleting…");
    try {
      await call(POLICY, "DeletePolicy", { name: p.name, version: String(p.version ?? "0") });
      deleted = true;
      toast(`Deleted policy ${p.name}.`);
      dlg.close();
    } catch (err) {
      if (err.code === "unauthenticated") return;
      del.disabled = false;
      setText(del, "Delete policy");
      if (err.code === "not_found") {
        deleted = true;
        toast(`Policy ${p.name} was already deleted.`);
        dlg.close();
        return;
      }
      if (err.code === "aborted") {
        setText(msg, `Someone else changed ${p.name} after version ${p.version} was loaded, so it was not deleted. Close this, review the current settings and delete again if you still want to.`);
        deleted = true; // refresh the page behind the dialog when it closes
        del.hidden = true;
        setText(cancel, "Close");
      } else {
        setText(msg, describeError(err));
      }
      msg.hidden = false;
    }
  });
  document.body.append(dlg);
  dlg.showModal();
  cancel.focus();
}

// ---------------------------------------------------------------- policy detail

function detailView(main, { policy: name }) {
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
          h("h2", { id: "settings-h" }, "Settings"), settings),
        h("section", { class: "card", "aria-labelledby": "shared-h" },
          h("h2", { id: "shared-h" }, "Shared bucket"),
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
    const rate = fmt.describeRate(p.rate);
    const refill = Number(p.rate) > 0 ? (Number(p.maxPermits ?? 0) / Number(p.rate)) * 1000 : 0;
    const who = (by, at) => [at ? fmt.formatTimestamp(at) : "—", by ? ` by ${by}` : ""].join("");
    const item = (label, ...value) => [h("dt", {}, label), h("dd", {}, ...value)];
    replace(settings,
      item("Apps", appChips(p.apps)),
      item("Max permits (burst)", fmt.formatNumber(Number(p.maxPermits ?? 0), 0)),
      item("Rate", h("span", { class: "rate" }, rate.text),
        rate.unit !== "s" && h("span", { class: "muted" }, ` · ${p.rate ?? "?"} permits/s`)),
      item("Empty → full", refill > 0 ? fmt.formatDuration(refill) : "—"),
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
    sharedGauge.set(bucket, policy.maxPermits);
    const reset = Number(bucket.resetAfterMs ?? 0);
    setText(sharedInfo, reset > 0 ? `${fmt.formatNumber(Number(bucket.tokens ?? 0), 3)} tokens · full again in ${fmt.formatDuration(reset)}` : "Full");
  }, DETAIL_POLL_MS, ac.signal);

  async function loadStats() {
    const r = await call(POLICY, "GetPolicyStats", { name, seconds: chartSeconds }, ac.signal);
    if (ac.signal.aborted) return;
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

// Rounds up to 1, 2 or 5 × 10^n.
function niceMax(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function drawChart(box, legend, stats, seconds) {
  const n = seconds;
  const pad = (arr) => {
    const a = (arr || []).map((x) => Number(x) || 0).slice(-n);
    return [...new Array(n - a.length).fill(0), ...a];
  };
  const A = pad(stats.allowed);
  const D = pad(stats.denied);
  const totalA = A.reduce((x, y) => x + y, 0);
  const totalD = D.reduce((x, y) => x + y, 0);
  const peak = Math.max(...A, ...D, 0);
  const max = niceMax(peak);

  const W = Math.max(240, Math.floor(box.clientWidth || 600));
  const H = 150;
  const L = 40, R = 8, T = 8, B = 22;
  const x = (i) => L + (i / (n - 1)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (arr) => arr.map((v, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join("");
  const area = (arr) => `${line(arr)}L${x(n - 1).toFixed(1)},${y(0).toFixed(1)}L${x(0).toFixed(1)},${y(0).toFixed(1)}Z`;
  const span = n >= 120 ? `${n / 60} min` : `${n} s`;

  const grid = [0, max / 2, max].map((v) => [
    s("line", { x1: L, x2: W - R, y1: y(v).toFixed(1), y2: y(v).toFixed(1), class: "grid-line" }),
    s("text", { x: L - 6, y: (y(v) + 4).toFixed(1), class: "axis", "text-anchor": "end" }, fmt.formatNumber(v, 1)),
  ]);
  const xlabels = [
    s("text", { x: L, y: H - 6, class: "axis", "text-anchor": "start" }, `−${span}`),
    s("text", { x: W - R, y: H - 6, class: "axis", "text-anchor": "end" }, "now"),
  ];
  const summary = `Last ${span}: ${totalA} allowed, ${totalD} denied; peak ${peak} per second.`;
  const chart = s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary },
    grid, xlabels,
    s("path", { d: area(A), class: "area-allowed" }),
    s("path", { d: line(A), class: "line-allowed" }),
    s("path", { d: area(D), class: "area-denied" }),
    s("path", { d: line(D), class: "line-denied" }));
  box.replaceChildren(chart);

  const pct = totalA + totalD > 0 ? ` (${fmt.formatNumber((100 * totalD) / (totalA + totalD), 1)} % denied)` : "";
  replace(legend,
    h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-allowed", "aria-hidden": "true" }),
      "Allowed ", h("strong", { id: "total-allowed" }, fmt.formatNumber(totalA, 0))),
    h("span", { class: "legend-item" }, h("span", { class: "swatch swatch-denied", "aria-hidden": "true" }),
      "Denied ", h("strong", { id: "total-denied" }, fmt.formatNumber(totalD, 0))),
    h("span", { class: "muted" }, `in the last ${span}${pct}`));
}

function bucketInspector(name, editor, signal) {
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

  const gauge = makeGauge("Permits available in the inspected bucket", true);
  const tokens = h("dd", { id: "inspect-tokens" });
  const remaining = h("dd", { id: "inspect-remaining" });
  const full = h("dd", { id: "inspect-full" });
  const which = h("p", { class: "inspect-which" });
  const status = h("p", { class: "small muted", role: "status", id: "inspect-status" });
  const reset = editor && h("button", { type: "button", class: "btn btn-small", id: "inspect-reset" }, icon("reset"), "Reset to full");

  function show(b, k) {
    const limit = Number(b.limit ?? 0);
    gauge.set(b, limit);
    replace(which, k === "" ? "Shared bucket of " : "Key ", h("strong", { class: "break" }, k === "" ? name : k));
    setText(tokens, fmt.formatNumber(Number(b.tokens ?? 0), 3));
    setText(remaining, `${fmt.formatNumber(Number(b.remaining ?? 0), 0)} of ${fmt.formatNumber(limit, 0)}`);
    const ms = Number(b.resetAfterMs ?? 0);
    setText(full, ms > 0 ? `in ${fmt.formatDuration(ms)}` : "now (full)");
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
      if (!shown) {
        shown = true;
        replace(result, which, gauge.el,
          h("dl", { class: "kv" },
            h("dt", {}, "Tokens now"), tokens,
            h("dt", {}, "Whole permits"), remaining,
            h("dt", {}, "Full again"), full),
          reset, status);
        const b = r.bucket || {};
        setText(announce, `${k === "" ? "Shared bucket" : `Key ${k}`}: ${fmt.formatNumber(Number(b.remaining ?? 0), 0)} of ${fmt.formatNumber(Number(b.limit ?? 0), 0)} permits available.`);
      }
      show(r.bucket || {}, k);
    }, DETAIL_POLL_MS, mine, (err) => {
      if (err.code === "unauthenticated") return;
      if (!shown) replace(result, errorState(describeError(err)));
      else setText(status, `Not updating: ${describeError(err)}`);
    });
    if (reset) {
      reset.onclick = async () => {
        reset.disabled = true;
        try {
          const r = await call(POLICY, "ResetBucket", { name, key: k }, mine);
          if (r.bucket) show(r.bucket, k);
          setText(status, `Reset: the bucket is full again (${new Date().toLocaleTimeString()}).`);
        } catch (err) {
          if (!isAbort(err)) setText(status, `Could not reset: ${describeError(err)}`);
        } finally {
          reset.disabled = false;
        }
      };
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    start(key.value);
  });
  return { el: h("div", {}, form, announce, result) };
}

function renderHistory(box, changes) {
  if (!changes.length) {
    replace(box, emptyState("No changes recorded", null));
    return;
  }
  const labels = { create: "Created", update: "Updated", delete: "Deleted" };
  const kinds = { create: "ok", update: "info", delete: "danger" };
  const list = h("ol", { class: "changes" });
  for (const c of changes) {
    const d = fmt.diffChange(c);
    const at = c.changedAt || "";
    const versions = d.fromVersion && d.toVersion ? `v${d.fromVersion} → v${d.toVersion}` : d.toVersion ? `v${d.toVersion}` : "";
    const head = h("div", { class: "change-head" },
      badge(labels[d.action] || d.action, kinds[d.action] || "plain"),
      h("span", {}, "by ", h("strong", { class: "actor" }, c.actor || "unknown")),
      h("time", { datetime: at, title: at }, fmt.formatTimestamp(at)),
      h("span", { class: "muted small" }, fmt.relativeTime(at)),
      versions && h("span", { class: "muted small version" }, versions));
    let bodyEl;
    if (d.unreadable) {
      bodyEl = h("div", { class: "raw" },
        c.oldValue && h("pre", {}, `before: ${c.oldValue}`),
        c.newValue && h("pre", {}, `after: ${c.newValue}`));
    } else if (!d.rows.length) {
      bodyEl = h("p", { class: "muted small" }, d.action === "update" ? "No visible field changed." : "");
    } else if (d.action === "update") {
      bodyEl = h("table", { class: "diff" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, "Before"), h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Change")), h("th", { scope: "col" }, "After"))),
        h("tbody", {}, d.rows.map((r) => h("tr", {},
          h("th", { scope: "row" }, r.field),
          h("td", { class: "old" }, r.old),
          h("td", { class: "arrow", "aria-label": "changed to" }, "→"),
          h("td", { class: "new" }, r.new)))));
    } else {
      const which = d.action === "delete" ? "old" : "new";
      bodyEl = h("table", { class: "diff" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, d.action === "delete" ? "Last value" : "Value"))),
        h("tbody", {}, d.rows.map((r) => h("tr", {}, h("th", { scope: "row" }, r.field), h("td", {}, r[which])))));
    }
    list.append(h("li", { class: `change change-${d.action}` }, head, bodyEl));
  }
  replace(box, list);
}

// ---------------------------------------------------------------- create / edit

function editView(main, { policy: name }) {
  const creating = name === null;
  document.title = `${creating ? "New policy" : `Edit ${name}`} · permitd admin`;
  const ac = new AbortController();
  const back = (() => {
    const prev = app.prevRoute;
    if (!creating && prev === policyHref(name)) return prev;
    return "#/";
  })();

  const heading = h("h1", { tabindex: "-1", class: "break", id: "page-title" }, creating ? "New policy" : `Edit ${name}`);
  append(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: back }, icon("back"), back === "#/" ? "All policies" : name)),
    pageHead(heading, null));

  if (!isEditor()) {
    append(main, h("div", { class: "card notice-card", role: "note" },
      h("p", {}, "Your account can view policies but not change them. Ask an administrator for the editor role."),
      h("a", { class: "btn", href: back }, "Back")));
    return { dispose: () => ac.abort() };
  }

  let loaded = null;      // the policy as it was when the form was filled
  let rateTouched = false;

  // fields
  const nameIn = h("input", { name: "name", autocomplete: "off", spellcheck: "false", maxlength: "128", autocapitalize: "none" });
  const appsIn = h("input", { name: "apps", autocomplete: "off", spellcheck: "false", autocapitalize: "none", placeholder: "checkout, billing   or   *" });
  const maxIn = h("input", { name: "max_permits", inputmode: "numeric", autocomplete: "off", placeholder: "e.g. 100" });
  const rateIn = h("input", { name: "rate", inputmode: "decimal", autocomplete: "off", placeholder: "e.g. 2" });
  const unitIn = h("select", { name: "rate_unit", id: "f-rate-unit", "aria-label": "Rate unit" },
    fmt.RATE_UNITS.map((u) => h("option", { value: u.unit }, u.label)));
  const openIn = h("input", { type: "radio", name: "failure_mode", value: "open", id: "f-fm-open" });
  const closedIn = h("input", { type: "radio", name: "failure_mode", value: "closed", id: "f-fm-closed" });
  const enabledIn = h("input", { type: "checkbox", name: "enabled", id: "f-enabled" });
  const descIn = h("textarea", { name: "description", rows: "3" });
  const ratePreview = h("p", { class: "hint", id: "f-rate-preview", "aria-live": "polite" });

  // Required fields: required + aria-required for assistive technology, and
  // a marker in the label (hidden from it: the attribute already says so).
  const required = new Set(creating ? ["name", "apps", "max_permits", "rate"] : ["apps", "max_permits", "rate"]);
  const requiredMark = () => h("span", { class: "required-mark", "aria-hidden": "true" }, " *");
  const fields = {};
  function field(key, id, label, control, hint, extra) {
    const err = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
    const hintEl = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
    control.id = id;
    control.setAttribute("aria-describedby", [hintEl && `${id}-hint`, extra && extra.id, `${id}-error`].filter(Boolean).join(" "));
    if (required.has(key)) {
      control.required = true;
      control.setAttribute("aria-required", "true");
    }
    const wrap = h("div", { class: "field", dataset: { field: key } },
      h("label", { for: id }, label, required.has(key) && requiredMark()), control, extra, hintEl, err);
    fields[key] = { wrap, err, control };
    return wrap;
  }
  const rateGroup = h("div", { class: "input-group" }, rateIn, unitIn);
  const rateWrap = (() => {
    const err = h("p", { class: "field-error", id: "f-rate-error", hidden: true });
    rateIn.id = "f-rate";
    rateIn.setAttribute("aria-describedby", "f-rate-preview f-rate-error");
    rateIn.required = true;
    rateIn.setAttribute("aria-required", "true");
    const wrap = h("div", { class: "field", dataset: { field: "rate" } }, h("label", { for: "f-rate" }, "Rate (refill)", requiredMark()), rateGroup, ratePreview, err);
    fields.rate = { wrap, err, control: rateIn };
    return wrap;
  })();
  const fmErr = h("p", { class: "field-error", id: "f-fm-error", hidden: true });
  openIn.required = true;
  closedIn.required = true;
  const fmWrap = h("fieldset", { class: "field radios", dataset: { field: "failure_mode" }, "aria-describedby": "f-fm-error", role: "radiogroup", "aria-required": "true" },
    h("legend", {}, "When Redis is unreachable", requiredMark()),
    h("label", { class: "radio" }, openIn, h("span", {}, h("strong", {}, "Fail open"), " — allow requests (flagged in metrics)")),
    h("label", { class: "radio" }, closedIn, h("span", {}, h("strong", {}, "Fail closed"), " — refuse with unavailable (503)")),
    fmErr);
  fields.failure_mode = { wrap: fmWrap, err: fmErr, control: openIn };
  const enabledWrap = h("div", { class: "field", dataset: { field: "enabled" } },
    h("label", { class: "check" }, enabledIn, h("span", {}, h("strong", {}, "Enabled"), " — applications can acquire permits from this policy")));
  fields.enabled = { wrap: enabledWrap, err: h("p", { class: "field-error", hidden: true }), control: enabledIn };
  enabledWrap.append(fields.enabled.err);

  const formError = h("div", { class: "form-error", role: "alert", id: "form-error", hidden: true });
  const conflict = h("div", { class: "conflict", role: "alert", id: "conflict", hidden: true });
  const save = h("button", { type: "submit", class: "btn btn-primary", id: "save-policy" }, creating ? "Create policy" : "Save changes");
  const form = h("form", { class: "card policy-form", novalidate: true, "aria-labelledby": "page-title" },
    h("p", { class: "required-note" }, "Fields marked ", h("span", { class: "required-mark" }, "*"), " are required."),
    conflict, formError,
    field("name", "f-name", "Name", nameIn, creating
      ? "Applications name the policy in Acquire's bucket field. Letters, digits, '.', '_' and '-'; starts with a letter or digit; up to 128 characters."
      : "Names cannot be changed."),
    field("apps", "f-apps", "Apps", appsIn, "Applications allowed to use this policy, separated by commas or spaces. * allows any application."),
    h("div", { class: "field-row" },
      field("max_permits", "f-max", "Max permits (burst)", maxIn, "Bucket capacity: the most permits available at once."),
      rateWrap),
    fmWrap,
    enabledWrap,
    field("description", "f-desc", "Description", descIn, "Optional. For administrators: what the limit protects, who to ask."),
    h("div", { class: "form-actions" }, save, h("a", { class: "btn", href: back }, "Cancel")));

  if (creating) nameIn.dataset.autofocus = "";
  else nameIn.readOnly = true;

  function setError(key, message) {
    const f = fields[key];
    if (!f) return false;
    f.err.hidden = !message;
    setText(f.err, message || "");
    f.wrap.classList.toggle("has-error", !!message);
    if (key === "failure_mode") {
      openIn.setAttribute("aria-invalid", message ? "true" : "false");
      closedIn.setAttribute("aria-invalid", message ? "true" : "false");
    } else {
      f.control.setAttribute("aria-invalid", message ? "true" : "false");
    }
    return true;
  }
  const stripField = (m) => {
    const r = m.replace(/^[a-z_]+:\s*/, "");
    return r.charAt(0).toUpperCase() + r.slice(1);
  };

  function updatePreview() {
    const r = rateToSend();
    if (r.error) {
      setText(ratePreview, "Permits added per second, minute or hour.");
      return;
    }
    const max = Number(maxIn.value);
    const refill = Number.isFinite(max) && max >= 1 ? ` · empty → full in ${fmt.formatDuration((max / Number(r.rate)) * 1000)}` : "";
    setText(ratePreview, `= ${r.rate} permits per second (${fmt.describeRate(r.rate).text})${refill}`);
  }

  function rateToSend() {
    if (!creating && loaded && !rateTouched && loaded.rate) return { rate: String(loaded.rate), error: "" };
    return fmt.rateToPerSecond(rateIn.value, unitIn.value);
  }

  const validators = {
    name: () => (creating ? fmt.validateName(nameIn.value) : ""),
    apps: () => fmt.parseApps(appsIn.value).error,
    max_permits: () => fmt.parseMaxPermits(maxIn.value).error,
    rate: () => rateToSend().error,
    failure_mode: () => (openIn.checked || closedIn.checked ? "" : "failure_mode: choose open or closed"),
    description: () => fmt.validateDescription(descIn.value),
  };
  // A server error stays next to its field until the field's value changes
  // (tabbing away from it must not hide what the server said).
  const serverErrors = {};
  function validate(key) {
    const msg = validators[key]?.() || "";
    const server = serverErrors[key];
    if (!msg && server && server.value === fields[key].control.value) return true;
    delete serverErrors[key];
    setError(key, msg ? stripField(msg) : "");
    return !msg;
  }
  const touched = new Set();
  for (const [key, el] of [["name", nameIn], ["apps", appsIn], ["max_permits", maxIn], ["rate", rateIn], ["description", descIn]]) {
    el.addEventListener("blur", () => {
      if (el.value !== "" || touched.has(key)) {
        touched.add(key);
        validate(key);
      }
    });
    el.addEventListener("input", () => {
      if (fields[key].wrap.classList.contains("has-error")) validate(key);
    });
  }
  for (const el of [rateIn, unitIn]) {
    el.addEventListener("input", () => {
      rateTouched = true;
      updatePreview();
    });
    el.addEventListener("change", () => {
      rateTouched = true;
      updatePreview();
      if (touched.has("rate")) validate("rate");
    });
  }
  maxIn.addEventListener("input", updatePreview);
  for (const el of [openIn, closedIn]) el.addEventListener("change", () => validate("failure_mode"));

  function fill(p) {
    loaded = p;
    rateTouched = false;
    nameIn.value = p.name || "";
    appsIn.value = (p.apps || []).join(", ");
    maxIn.value = p.maxPermits !== undefined ? String(p.maxPermits) : "";
    const r = fmt.rateForEditing(p.rate);
    rateIn.value = r.value;
    unitIn.value = r.unit;
    openIn.checked = p.failureMode !== "closed";
    closedIn.checked = p.failureMode === "closed";
    enabledIn.checked = !!p.enabled;
    descIn.value = p.description || "";
    for (const k of Object.keys(fields)) {
      delete serverErrors[k];
      setError(k, "");
    }
    updatePreview();
  }

  async function showConflict() {
    formError.hidden = true;
    let latest = null;
    let gone = false;
    try {
      latest = (await call(POLICY, "GetPolicy", { name }, ac.signal)).policy || null;
    } catch (err) {
      if (err.code === "not_found") gone = true;
      else if (isAbort(err) || err.code === "unauthenticated") return;
    }
    const reload = h("button", { type: "button", class: "btn btn-primary", id: "conflict-reload" }, "Load the latest version");
    const items = [];
    if (latest) {
      const d = fmt.diffChange({ action: "update", oldValue: JSON.stringify(loaded || {}), newValue: JSON.stringify(latest) });
      for (const r of d.rows) items.push(h("li", {}, h("strong", {}, r.field), `: ${r.old} → ${r.new}`));
    }
    const who = latest?.updatedBy ? ` by ${latest.updatedBy}` : "";
    const when = latest?.updatedAt ? ` at ${fmt.formatTimestamp(latest.updatedAt)}` : "";
    replace(conflict,
      h("h2", {}, gone ? "This policy was deleted" : "Someone else changed this policy"),
      gone
        ? h("p", {}, `${name} was deleted after you opened it. Your changes were not saved.`)
        : h("p", {}, `${name} was changed${who}${when} (now version ${latest?.version ?? "?"}) after you opened version ${loaded?.version ?? "?"}. Your changes were not saved.`),
      items.length ? h("div", {}, h("p", { class: "small" }, "Their changes:"), h("ul", { class: "conflict-diff" }, items)) : null,
      gone
        ? h("div", { class: "form-actions" }, h("a", { class: "btn", href: "#/" }, "All policies"))
        : h("div", { class: "form-actions" }, reload,
          h("span", { class: "muted small" }, "Reloading replaces the form with their version; then make your change again.")));
    conflict.hidden = false;
    reload.addEventListener("click", () => {
      fill(latest);
      conflict.hidden = true;
      toast(`Loaded version ${latest.version} of ${name}.`);
      appsIn.focus();
    });
    conflict.scrollIntoView({ block: "nearest" });
    (gone ? conflict.querySelector("a") : reload).focus();
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    formError.hidden = true;
    conflict.hidden = true;
    let firstBad = null;
    for (const k of Object.keys(serverErrors)) {
      delete serverErrors[k];
      setError(k, "");
    }
    for (const key of Object.keys(validators)) {
      touched.add(key);
      if (!validate(key) && !firstBad) firstBad = fields[key].control;
    }
    if (firstBad) {
      firstBad.focus();
      return;
    }
    const policy = {
      name: nameIn.value,
      apps: fmt.parseApps(appsIn.value).apps,
      maxPermits: fmt.parseMaxPermits(maxIn.value).value,
      rate: rateToSend().rate,
      description: descIn.value,
      enabled: enabledIn.checked,
      failureMode: closedIn.checked ? "closed" : "open",
    };
    if (!creating) policy.version = String(loaded?.version ?? "0");
    save.disabled = true;
    setText(save, "Saving…");
    try {
      const r = await call(POLICY, creating ? "CreatePolicy" : "UpdatePolicy", { policy }, ac.signal);
      const v = r.policy?.version;
      toast(creating ? `Created policy ${policy.name}.` : `Saved ${policy.name}${v ? ` (version ${v})` : ""}.`);
      if (creating) app.flashPolicy = policy.name;
      go(back);
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      save.disabled = false;
      setText(save, creating ? "Create policy" : "Save changes");
      if (err.code === "aborted") {
        await showConflict();
        return;
      }
      let key = fmt.fieldOfMessage(err.message);
      if (!key && err.code === "already_exists") key = "name";
      if (key && fields[key] && ["invalid_argument", "already_exists", "out_of_range", "failed_precondition"].includes(err.code)) {
        setError(key, err.message);
        serverErrors[key] = { value: fields[key].control.value };
        fields[key].control.focus();
        return;
      }
      if (err.code === "not_found" && !creating) {
        replace(formError, `${name} no longer exists: someone deleted it. `, h("a", { href: "#/" }, "All policies"));
      } else {
        replace(formError, describeError(err), err.code === "network" || err.code === "unavailable" ? " Your changes are still here; try again." : "");
      }
      formError.hidden = false;
      formError.focus?.();
    }
  });
  formError.tabIndex = -1;

  if (creating) {
    openIn.checked = true;
    enabledIn.checked = true;
    unitIn.value = "s";
    updatePreview();
    append(main, form);
  } else {
    const box = h("div", {}, loadingState("Loading policy…"));
    append(main, box);
    (async () => {
      try {
        const r = await call(POLICY, "GetPolicy", { name }, ac.signal);
        if (ac.signal.aborted) return;
        fill(r.policy || {});
        box.replaceWith(form);
        if (document.activeElement === document.body || document.activeElement === heading) appsIn.focus();
      } catch (err) {
        if (isAbort(err) || err.code === "unauthenticated") return;
        replace(box, err.code === "not_found"
          ? emptyState("This policy does not exist", `There is no policy named “${name}”.`, h("a", { class: "btn", href: "#/" }, "All policies"))
          : errorState(`Could not load the policy: ${describeError(err)}`, () => render()));
      }
    })();
  }
  return { dispose: () => ac.abort() };
}

// ---------------------------------------------------------------- start

async function boot() {
  try {
    const r = await rpc(AUTH, "WhoAmI", {});
    enterApp({ username: r.username || "", role: r.role || "viewer" });
  } catch (err) {
    if (err instanceof RpcError && err.code === "unauthenticated") {
      showLogin();
      return;
    }
    replace(ui.main, errorState(`Cannot start: ${describeError(err)}`, () => {
      replace(ui.main, loadingState("Connecting…"));
      boot();
    }));
  }
}

boot();
