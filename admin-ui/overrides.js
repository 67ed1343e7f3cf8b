// overrides.js - a policy's overrides (issue 37, OverrideService): the
// Overrides tab of the policy page (a page of the list at a time, searched
// and sorted by the server: by match, by traffic from the hot keys, by last
// change or by expiry), the create/edit dialog (also opened from a hot key's
// row and from the bucket inspector with the key filled in), the delete
// after a confirmation, the CSV export and import, and the line of an app's
// overrides on the Apps page. Viewers see all of it but the controls that
// write; the server refuses their writes anyway.
//
// An import sends the file in pieces of PIECE bytes (a request body is at
// most --max-body-bytes, 64 KiB by default): the server holds them and
// applies the file at the last one, all or nothing, and names the line and
// column of the first row it refuses, which the import dialog shows.
import { isAbort } from "./api.js";
import { confirmAction } from "./appdialogs.js";
import { h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { policyHref } from "./router.js";
import { rowDialog } from "./rowdialog.js";
import { call } from "./session.js";
import { badge, emptyState, errorState, icon, loadingState } from "./widgets.js";

export const OVERRIDES = "OverrideService";
const PAGE = 50;
const PIECE = 32 * 1024;

const KINDS = [["key", "Exact key"], ["prefix", "Key prefix (premium_*)"], ["app", "App"]];
const ACTIONS = [["limit", "Other limits"], ["block", "Block: deny every request"], ["exempt", "Exempt: always allow (still counted)"]];

// What the override matches, as the list shows it.
export function matchText(o) {
  if (o.matchKind === "prefix") return `${o.matchValue}*`;
  if (o.matchKind === "app") return `app ${o.matchValue}`;
  return o.matchValue;
}

// What the override does, in words, for a policy of algorithm alg.
export function actionText(o, alg) {
  if (o.action === "block") return "Blocked: every request denied";
  if (o.action === "exempt") return "Exempt: always allowed, still counted";
  const max = Number(o.maxPermits ?? 0) > 0 ? fmt.formatNumber(Number(o.maxPermits), 0) : "the policy's";
  const win = o.window ? fmt.durationWords(fmt.parseDuration(o.window)?.ms ?? 0) : "the policy's window";
  if (alg === "token_bucket") return `${max} burst, ${o.rate ? fmt.describeRate(o.rate).text : "the policy's rate"}`;
  if (alg === "concurrency") return `${max} held at once${o.window ? `, leases of ${win}` : ""}`;
  return `${max} per ${win}`;
}

// The create or edit dialog. o: { policy, algorithm, override (to edit) or
// key (a new one's exact key, from a hot key or the inspector), done(saved) }.
export function overrideDialog({ policy, algorithm, override, key, done }) {
  const alg = algorithm || fmt.DEFAULT_ALGORITHM;
  const v = override || { policy, matchKind: "key", matchValue: key ?? "", action: "limit" };
  const windowed = alg !== "token_bucket";
  rowDialog({
    id: "override-dialog", prefix: "o", saveId: "override-save",
    title: override ? `Edit override of ${matchText(override)}` : "New override",
    saveLabel: override ? "Save override" : "Create override",
    fields: [
      { key: "policy", json: "policy", label: "Policy", readonly: true },
      { key: "match_kind", json: "matchKind", label: "Match by", select: KINDS },
      { key: "match_value", json: "matchValue", label: "Key, prefix or app",
        hint: "An exact key, a prefix without the * (premium_ matches premium_anything), or an app's name." },
      { key: "action", json: "action", label: "Action", select: ACTIONS },
      { key: "max_permits", json: "maxPermits", label: alg === "concurrency" ? "Max held at once" : windowed ? "Max permits per window" : "Max permits (burst)", type: "number",
        hint: "Empty: the policy's. A limit sets one number at least." },
      { key: "rate", json: "rate", label: "Rate (permits per second)", hint: "A decimal: 10, 0.5, 0.016666666667 (1 a minute). Empty: the policy's." },
      { key: "window", json: "window", label: alg === "concurrency" ? "Lease time-to-live (optional)" : "Window (optional)",
        hint: "A duration: 250ms, 1s, 90s, 1m, 1h, 1d. Empty: the policy's." },
      { key: "expires_at", json: "expiresAt", label: "Expires (optional)",
        hint: "In UTC, as 2026-12-01T18:00:00Z. Empty: never. After it the policy's limits apply again." },
      { key: "description", json: "description", label: "Description (optional)" },
    ],
    values: { ...v, policy, maxPermits: v.action === "limit" && Number(v.maxPermits ?? 0) > 0 ? v.maxPermits : "" },
    setup(f) {
      const sync = () => {
        const limit = f.action.control.value === "limit";
        f.max_permits.wrap.hidden = !limit;
        f.rate.wrap.hidden = !limit || windowed;
        f.window.wrap.hidden = !limit || !windowed;
      };
      f.action.control.addEventListener("change", sync);
      sync();
    },
    check(body, f) {
      if (body.action !== "limit") {
        body.maxPermits = "0";
        body.rate = "";
        body.window = "";
      } else if (windowed) {
        body.rate = "";
      } else {
        body.window = "";
      }
      if (body.matchKind === "prefix" && body.matchValue.endsWith("*")) body.matchValue = body.matchValue.slice(0, -1);
      if (body.matchValue === "") {
        f.match_value.error("Key, prefix or app: required.");
        f.match_value.control.focus();
        return false;
      }
      return true;
    },
    async save(body) {
      if (override) {
        await call(OVERRIDES, "UpdateOverride", { override: { ...body, id: override.id, version: override.version } });
        return `Saved the override of ${matchText(body)}.`;
      }
      await call(OVERRIDES, "CreateOverride", { override: body });
      return `Created an override of ${matchText(body)} on ${policy}.`;
    },
    done,
    focus: override || key === undefined ? "match_value" : "max_permits",
  });
}

// The import dialog: a file, whether it replaces the policy's overrides,
// and the server's verdict (the line and column of a refused row).
function importDialog(policy, done) {
  const file = h("input", { type: "file", id: "import-file", accept: ".csv,text/csv", "aria-describedby": "import-hint" });
  const replaceBox = h("input", { type: "checkbox", id: "import-replace" });
  const msg = h("p", { class: "form-error", role: "alert", id: "import-error", hidden: true });
  const progress = h("p", { class: "small muted", role: "status", id: "import-progress" });
  const cancel = h("button", { type: "button", class: "btn", id: "import-cancel" }, "Cancel");
  const ok = h("button", { type: "submit", class: "btn btn-primary", id: "import-confirm" }, "Import");
  const form = h("form", { method: "dialog", class: "policy-form dialog-form", novalidate: true },
    h("div", { class: "field" }, h("label", { for: "import-file" }, "CSV file"), file,
      h("p", { class: "hint", id: "import-hint" },
        "The header names the columns: match_kind, match_value and any of action, max_permits, rate, window, expires_at, description (as Export writes them). All rows are written, or none.")),
    h("div", { class: "field" }, h("label", { for: "import-replace", class: "check" }, replaceBox,
      " Replace: delete this policy's overrides that are not in the file")),
    msg, progress,
    h("div", { class: "dialog-actions" }, cancel, ok));
  const dlg = h("dialog", { class: "dialog", id: "import-dialog", "aria-labelledby": "import-title" },
    h("h2", { id: "import-title" }, `Import overrides of ${policy}`), form);
  let imported = false;
  dlg.addEventListener("close", () => {
    dlg.remove();
    done(imported);
  });
  cancel.addEventListener("click", () => dlg.close());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.hidden = true;
    const f = file.files?.[0];
    if (!f) {
      setText(msg, "Choose a CSV file first.");
      msg.hidden = false;
      file.focus();
      return;
    }
    ok.disabled = true;
    try {
      const bytes = new Uint8Array(await f.arrayBuffer());
      let uploadId = "";
      let r = {};
      for (let at = 0; ; at += PIECE) {
        const piece = bytes.subarray(at, at + PIECE);
        const last = at + PIECE >= bytes.length;
        let bin = "";
        for (const b of piece) bin += String.fromCharCode(b);
        setText(progress, `Sending ${fmt.formatNumber(Math.min(bytes.length, at + PIECE), 0)} of ${fmt.formatNumber(bytes.length, 0)} bytes…`);
        r = await call(OVERRIDES, "ImportOverridesCsv", { policy, csv: btoa(bin), uploadId, last, replace: replaceBox.checked });
        if (last) break;
        uploadId = r.uploadId;
      }
      imported = true;
      toast(`Imported overrides of ${policy}: ${Number(r.created ?? 0)} created, ${Number(r.updated ?? 0)} updated, ${Number(r.deleted ?? 0)} deleted.`);
      dlg.close();
    } catch (err) {
      if (err.code === "unauthenticated") return;
      ok.disabled = false;
      setText(progress, "");
      setText(msg, `Nothing was imported. ${describeError(err)}`);
      msg.hidden = false;
    }
  });
  document.body.append(dlg);
  dlg.showModal();
  file.focus();
}

// Saves text as a file named name (the browser's download).
function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }));
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// The Overrides tab of policy name. Returns { el, create(key), setAlgorithm(alg), load() }.
export function overridesCard(name, editor, signal) {
  let algorithm = fmt.DEFAULT_ALGORITHM;
  let offset = 0;
  let total = 0;
  let seq = 0;
  const search = h("input", { type: "search", id: "override-search", class: "filter", placeholder: "Search by key, prefix or app", "aria-label": "Search overrides" });
  const sort = h("select", { id: "override-sort", class: "order" },
    h("option", { value: "match" }, "Match"),
    h("option", { value: "traffic" }, "Traffic (hot keys, last 2 min)"),
    h("option", { value: "updated" }, "Last changed"),
    h("option", { value: "expires" }, "Expires soonest"));
  const newBtn = !editor ? null : h("button", { type: "button", class: "btn btn-primary btn-small", id: "new-override" }, icon("plus"), "New override");
  const importBtn = !editor ? null : h("button", { type: "button", class: "btn btn-small", id: "import-overrides" }, "Import CSV");
  const exportBtn = h("button", { type: "button", class: "btn btn-small", id: "export-overrides" }, "Export CSV");
  const status = h("p", { class: "sr-only", role: "status", id: "override-status" });
  const tbody = h("tbody");
  const table = h("table", { class: "policies override-list", id: "overrides" },
    h("caption", { class: "sr-only" }, `Overrides of ${name}`),
    h("thead", {}, h("tr", {},
      ["Match", "Action and limits", "Traffic", "Expires", "Last changed"].map((t, i) => h("th", { scope: "col", class: i === 2 ? "num" : null }, t)),
      editor && h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
    tbody);
  const stateBox = h("div", { class: "table-state" });
  const prev = h("button", { type: "button", class: "btn btn-small", id: "override-prev", disabled: true }, "Previous");
  const next = h("button", { type: "button", class: "btn btn-small", id: "override-next", disabled: true }, "Next");
  const pageStatus = h("p", { class: "page-status muted", id: "override-page" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages of overrides" }, prev, pageStatus, next);

  function row(o) {
    const expires = o.expiresAt
      ? (o.expired ? badge("Expired", "muted", `expired ${fmt.formatTimestamp(o.expiresAt)}: not in force`) : fmt.formatTimestamp(o.expiresAt))
      : h("span", { class: "muted" }, "never");
    return h("tr", { dataset: { id: String(o.id), match: matchText(o) } },
      h("td", { "data-label": "Match", class: "cell-name" },
        h("code", { class: "break" }, matchText(o)), " ", badge(o.matchKind, "plain"),
        o.description ? h("span", { class: "desc" }, o.description) : null),
      h("td", { "data-label": "Action" }, actionText(o, algorithm)),
      h("td", { "data-label": "Traffic", class: "num" }, fmt.formatNumber(Number(o.traffic ?? 0), 0)),
      h("td", { "data-label": "Expires" }, expires),
      h("td", { "data-label": "Changed" }, o.updatedAt ? fmt.formatTimestamp(o.updatedAt) : "—",
        o.updatedBy ? h("span", { class: "changed-by" }, `by ${o.updatedBy}`) : null),
      editor && h("td", { class: "cell-actions" },
        h("button", {
          type: "button", class: "btn btn-small edit-override", "aria-label": `Edit the override of ${matchText(o)}`,
          onclick: (e) => edit(o, e.currentTarget),
        }, icon("edit"), h("span", {}, "Edit")),
        h("button", {
          type: "button", class: "btn btn-small btn-danger-quiet delete-override", "aria-label": `Delete the override of ${matchText(o)}`,
          onclick: (e) => remove(o, e.currentTarget),
        }, icon("trash"), h("span", {}, "Delete"))));
  }

  async function load() {
    const mine = ++seq;
    let r;
    try {
      r = await call(OVERRIDES, "ListOverrides", { policy: name, search: search.value, sort: sort.value, pageSize: PAGE, pageToken: offset ? String(offset) : "" }, signal);
    } catch (err) {
      if (isAbort(err) || signal.aborted || err.code === "unauthenticated") return;
      replace(stateBox, errorState(`Could not load the overrides: ${describeError(err)}`, load));
      return;
    }
    if (mine !== seq || signal.aborted) return;
    const list = r.overrides || [];
    total = Number(r.total ?? 0);
    tbody.replaceChildren(...list.map(row));
    table.hidden = list.length === 0;
    if (list.length === 0) {
      replace(stateBox, search.value
        ? emptyState("No override matches", `Nothing matches “${search.value}”.`)
        : emptyState("No overrides", editor ? "Every caller has the policy's limits. Add one here, or from a hot key or the bucket inspector." : "Every caller has the policy's limits."));
    } else {
      stateBox.replaceChildren();
    }
    prev.disabled = offset === 0;
    next.disabled = !r.nextPageToken;
    setText(pageStatus, total === 0 ? "" : `${fmt.formatNumber(offset + 1, 0)}–${fmt.formatNumber(offset + list.length, 0)} of ${fmt.formatNumber(total, 0)}`);
    setText(status, `${total === 1 ? "1 override" : `${fmt.formatNumber(total, 0)} overrides`}${search.value ? ` match “${search.value}”` : ""}.`);
  }

  // After a dialog: the list again (saved or not: a save refused as stale
  // means the list is old too), focus back where it was (or the search).
  const after = (back) => () => {
    load().then(() => (back?.isConnected ? back.focus() : search.focus()));
  };

  function edit(o, back) {
    overrideDialog({ policy: name, algorithm, override: o, done: after(back) });
  }

  function remove(o, back) {
    confirmAction({
      id: "delete-override", title: `Delete the override of ${matchText(o)}?`,
      text: `Callers it matches get the limits of ${name} again, on every instance at once. The delete is audited.`,
      confirmLabel: "Delete override", busyLabel: "Deleting…",
      run: async () => {
        await call(OVERRIDES, "DeleteOverride", { id: o.id, version: o.version }, signal);
        toast(`Deleted the override of ${matchText(o)}.`);
      },
      done: () => load().then(() => (back?.isConnected ? back.focus() : search.focus())),
    });
  }

  // Each keystroke asks at once, as the policy list does (load() drops an
  // answer that a newer question overtook).
  search.addEventListener("input", () => {
    offset = 0;
    load();
  });
  sort.addEventListener("change", () => {
    offset = 0;
    load();
  });
  prev.addEventListener("click", () => {
    offset = Math.max(0, offset - PAGE);
    load();
  });
  next.addEventListener("click", () => {
    offset += PAGE;
    load();
  });
  newBtn?.addEventListener("click", () => overrideDialog({ policy: name, algorithm, done: after(newBtn) }));
  importBtn?.addEventListener("click", () => importDialog(name, after(importBtn)));
  exportBtn.addEventListener("click", async () => {
    try {
      const r = await call(OVERRIDES, "ExportOverridesCsv", { policy: name }, signal);
      download(`${name}-overrides.csv`, r.csv || "");
      toast(`Exported ${Number(r.count ?? 0)} overrides of ${name}.`);
    } catch (err) {
      if (!isAbort(err) && err.code !== "unauthenticated") toast(`Could not export: ${describeError(err)}`);
    }
  });

  replace(stateBox, loadingState("Loading overrides…"));
  table.hidden = true;
  const el = h("div", { class: "overrides" },
    h("p", { class: "small muted" }, "Other limits for some callers: an exact key wins over the longest prefix, a prefix over an app, an app over the policy. A change is in force on every instance at once."),
    h("div", { class: "toolbar" }, search, h("label", { for: "override-sort", class: "order-label" }, "Sort by"), sort, newBtn, importBtn, exportBtn),
    status,
    h("div", { class: "table-scroll" }, table), stateBox, pager);
  return {
    el,
    load,
    // A new override of key (a hot key's or the inspector's).
    create(key) {
      overrideDialog({ policy: name, algorithm, key, done: (saved) => saved && load() });
    },
    setAlgorithm(alg) {
      algorithm = alg || fmt.DEFAULT_ALGORITHM;
    },
  };
}

// The overrides naming app (match by app) across policies, for its card on
// the Apps page: one line per policy, each linking to the policy.
export function appOverridesLine(app, signal) {
  const line = h("p", { class: "app-overrides", dataset: { app } }, h("span", { class: "muted" }, "Overrides: "), "loading…");
  call(OVERRIDES, "ListAppOverrides", { app, pageSize: 100 }, signal).then((r) => {
    const list = r.overrides || [];
    const n = Number(r.total ?? list.length);
    replace(line, h("span", { class: "muted" }, "Overrides: "),
      list.length === 0
        ? h("span", { class: "muted" }, "none")
        : list.map((o, i) => [i ? "; " : "", h("a", { href: policyHref(o.policy) }, o.policy), ": ",
          o.action === "limit" ? `max ${fmt.formatNumber(Number(o.maxPermits ?? 0), 0)}${o.rate ? `, ${o.rate}/s` : o.window ? ` per ${o.window}` : ""}` : o.action,
          o.expired ? " (expired)" : ""]),
      n > list.length ? ` and ${n - list.length} more` : "");
  }, (err) => {
    if (isAbort(err) || err.code === "unauthenticated") return;
    replace(line, h("span", { class: "muted" }, `Overrides: could not be read (${describeError(err)})`));
  });
  return line;
}
