// view-apps.js - the Apps page (#/apps, issue 21): every app with its
// description, state, the policies whose apps list names it, and its API
// keys (prefix, created, expires, last used roughly, revoked or expired).
// Editors create apps, issue keys (the secret shown once, in its dialog:
// appdialogs.js), revoke them after a confirmation that names the key's
// prefix, and enable or disable an app after one that says what stops.
// Viewers see the same apps and prefixes with none of those controls (and
// AppService refuses their writes anyway). A secret never reaches this
// page: ListApps carries prefixes only.
//
// The list is loaded when the page opens and again after each change made
// here; "last used" is written by the server once per sync pass, so a
// live poll would add nothing. After a change focus goes to the control
// or heading of the app it was about, found again in the rebuilt list.
import { isAbort } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import { confirmAction, createAppDialog, issueKeyDialog } from "./appdialogs.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { policyHref } from "./router.js";
import { appOverridesLine } from "./overrides.js";
import { appHref } from "./view-traffic.js";
import { APPS, call, isEditor } from "./session.js";
import { badge, emptyState, errorState, icon, loadingState, pageHead } from "./widgets.js";

export function appsView(main) {
  document.title = "Apps · permitd admin";
  const ac = new AbortController();
  const editor = isEditor();
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const newApp = editor && h("button", { type: "button", class: "btn btn-primary", id: "new-app" }, icon("plus"), "New app");
  const anyNote = h("div", { class: "notice", id: "any-app-policies", hidden: true });
  const box = h("div", { class: "apps", id: "apps" }, loadingState("Loading apps…"));
  append(main, pageHead(h("h1", { tabindex: "-1" }, "Apps"), sub, newApp), anyNote, box);

  if (newApp) {
    newApp.addEventListener("click", () => createAppDialog({
      done: (app) => (app ? load(() => headingOf(app.name)) : newApp.focus()),
    }));
  }

  // An app's card, heading, or the element of its card that matches sel
  // (else its heading), in the list as it is now.
  const cardOf = (name) => [...box.querySelectorAll("section[data-app]")].find((s) => s.dataset.app === name) || null;
  const headingOf = (name) => cardOf(name)?.querySelector("h2");
  const controlOf = (name, sel) => cardOf(name)?.querySelector(sel) || headingOf(name);

  function keyRow(app, k) {
    const state = k.revokedAt
      ? badge("Revoked", "danger", `revoked ${fmt.formatTimestamp(k.revokedAt)}${k.revokedBy ? ` by ${k.revokedBy}` : ""}`)
      : k.expired ? badge("Expired", "muted", `expired ${fmt.formatTimestamp(k.expiresAt)}`) : badge("Active", "ok");
    const when = (t) => (t ? h("time", { datetime: t, title: fmt.formatTimestamp(t) }, fmt.relativeTime(t) || fmt.formatTimestamp(t)) : null);
    return h("tr", { dataset: { key: k.prefix || "" } },
      h("td", { "data-label": "Key" }, h("code", { class: "key-prefix" }, k.prefix || "")),
      h("td", { "data-label": "Created" }, when(k.createdAt) || "—", k.createdBy ? h("span", { class: "muted" }, ` by ${k.createdBy}`) : null),
      h("td", { "data-label": "Expires" }, k.expiresAt ? fmt.formatTimestamp(k.expiresAt) : h("span", { class: "muted" }, "never")),
      h("td", { "data-label": "Last used" }, when(k.lastUsedAt) || h("span", { class: "muted" }, "not seen")),
      h("td", { "data-label": "State" }, state,
        k.revokedAt ? h("span", { class: "muted small" }, ` ${fmt.formatTimestamp(k.revokedAt)}${k.revokedBy ? ` by ${k.revokedBy}` : ""}`) : null),
      editor && h("td", { class: "cell-actions" }, !k.revokedAt && h("button", {
        type: "button", class: "btn btn-small btn-danger-quiet revoke-key", "aria-label": `Revoke key ${k.prefix}`,
        onclick: () => confirmAction({
          id: "revoke", title: `Revoke key ${k.prefix}?`,
          text: [`Key ${k.prefix} of ${app.name} stops working at once: applications that send it get unauthenticated (401). `,
            "This cannot be undone; the app's other keys keep working."].join(""),
          confirmLabel: "Revoke key", busyLabel: "Revoking…",
          run: async () => {
            await call(APPS, "RevokeKey", { prefix: k.prefix }, ac.signal);
            toast(`Revoked key ${k.prefix}.`);
          },
          done: (ok) => (ok ? load(() => headingOf(app.name)) : controlOf(app.name, `tr[data-key="${k.prefix}"] .revoke-key`)?.focus()),
        }),
      }, icon("trash"), h("span", {}, "Revoke"))));
  }

  function appCard(app, i) {
    const hid = `app-${i}-h`;
    const keys = app.keys || [];
    const live = keys.filter((k) => !k.revokedAt && !k.expired).length;
    const actions = editor && h("div", { class: "page-actions" },
      h("button", {
        type: "button", class: "btn btn-small issue-key", "aria-label": `Issue key for ${app.name}`,
        onclick: () => issueKeyDialog({ app: app.name, done: (issued) => (issued ? load(() => controlOf(app.name, ".issue-key")) : controlOf(app.name, ".issue-key")?.focus()) }),
      }, icon("plus"), h("span", {}, "Issue key")),
      h("button", {
        type: "button", class: "btn btn-small toggle-app", "aria-label": `${app.enabled ? "Disable" : "Enable"} ${app.name}`,
        onclick: () => {
          const change = async () => {
            await call(APPS, "UpdateApp", { name: app.name, state: app.enabled ? "APP_STATE_DISABLED" : "APP_STATE_ENABLED" }, ac.signal);
            toast(`${app.enabled ? "Disabled" : "Enabled"} app ${app.name}.`);
          };
          const after = (ok) => (ok ? load(() => controlOf(app.name, ".toggle-app")) : controlOf(app.name, ".toggle-app")?.focus());
          if (!app.enabled) {
            change().then(() => after(true), (err) => {
              if (!isAbort(err) && err.code !== "unauthenticated") toast(`Could not enable ${app.name}: ${describeError(err)}`);
            });
            return;
          }
          confirmAction({
            id: "disable", title: `Disable ${app.name}?`,
            text: `Every key of ${app.name} answers unauthenticated (401) until it is enabled again; its keys are kept.`,
            confirmLabel: "Disable app", busyLabel: "Disabling…", run: change, done: after,
          });
        },
      }, app.enabled ? "Disable" : "Enable"));
    const policies = app.policies || [];
    return h("section", { class: "card app-card", dataset: { app: app.name }, "aria-labelledby": hid },
      h("div", { class: "card-head" },
        h("div", { class: "title-row" }, h("h2", { id: hid, tabindex: "-1", class: "break" }, app.name),
          app.enabled ? badge("Enabled", "ok") : badge("Disabled", "muted", "its keys answer unauthenticated")),
        actions),
      app.description ? h("p", { class: "policy-desc" }, app.description) : null,
      // The name the audit shows for its newest change (its keys' too).
      app.updatedBy ? h("p", { class: "app-changed muted small" }, "Last changed by ", h("span", { class: "actor" }, app.updatedBy),
        app.updatedAt ? ` · ${fmt.formatTimestamp(app.updatedAt)}` : "") : null,
      h("p", { class: "app-policies" }, h("span", { class: "muted" }, "Policies: "),
        policies.length
          ? policies.map((p, j) => [j ? ", " : "", h("a", { href: policyHref(p) }, p)])
          : h("span", { class: "muted" }, "no policy lists it")),
      // Its overrides across policies (issue 37).
      appOverridesLine(app.name, ac.signal),
      // What its requests were answered, per policy (issue 39: view-app.js).
      h("p", { class: "app-traffic" }, h("a", { class: "btn btn-small", href: appHref(app.name) }, `Traffic of ${app.name}`)),
      keys.length
        ? h("div", { class: "table-scroll" }, h("table", { class: "keys" },
          h("caption", {}, `Keys of ${app.name}: ${live} in use${keys.length > live ? `, ${keys.length - live} revoked or expired` : ""}`),
          h("thead", {}, h("tr", {}, ["Key", "Created", "Expires", "Last used", "State"].map((t) => h("th", { scope: "col" }, t)),
            editor && h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
          h("tbody", {}, keys.map((k) => keyRow(app, k)))))
        : h("p", { class: "muted no-keys" }, "No keys yet: its requests are refused until an editor issues one."));
  }

  // Loads the apps and rebuilds the list; then focus goes to where(), the
  // element the last change was about (if it is still there).
  async function load(where) {
    let r;
    try {
      r = await call(APPS, "ListApps", {}, ac.signal);
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      setText(sub, "Could not load apps");
      replace(box, errorState(`Could not load apps: ${describeError(err)}`, () => {
        replace(box, loadingState("Loading apps…"));
        load(where);
      }));
      return;
    }
    if (ac.signal.aborted) return;
    const all = r.apps || [];
    // "*" is a row of its own (any app): it holds no key, so it is no card,
    // but the policies open to any app are worth a line.
    const any = all.find((a) => a.name === "*");
    const apps = all.filter((a) => a.name !== "*");
    const anyPolicies = any?.policies || [];
    anyNote.hidden = anyPolicies.length === 0;
    replace(anyNote, anyPolicies.length === 0 ? [] : [
      `${anyPolicies.length === 1 ? "1 policy is" : `${anyPolicies.length} policies are`} open to any app (*): `,
      anyPolicies.map((p, j) => [j ? ", " : "", h("a", { href: policyHref(p) }, p)])]);
    setText(sub, `${apps.length === 1 ? "1 app" : `${fmt.formatNumber(apps.length, 0)} apps`} · keys are shown by their prefix only`);
    if (apps.length === 0) {
      replace(box, emptyState("No apps yet",
        editor ? "An app is what a policy's apps list names; its API keys prove who is calling." : "An editor can create the first one."));
    } else {
      replace(box, apps.map(appCard));
    }
    where?.()?.focus();
  }
  load();
  return { dispose: () => ac.abort() };
}
