// appdialogs.js - the modal dialogs of apps and their API keys (issue 21):
// create an app (from the Apps page, or on the spot from the policy form's
// app picker), issue a key, and confirm a revoke or a disable. Native
// <dialog>s as in dialogs.js: focus is kept inside, Escape closes, and
// focus goes back where the caller says when they close.
//
// An issued key's secret exists in the page only inside its dialog: shown
// once with a copy button and a warning that it cannot be shown again;
// closing the dialog removes it from the document, and no list, toast or
// later page carries it (the server keeps only its hash).
import { h, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { APPS, call } from "./session.js";

// A dialog put in the page and opened; removed from it when it closes,
// then onClose() (which moves focus back: the element that opened it may
// have been rebuilt meanwhile).
function openDialog(id, title, body, onClose) {
  const dlg = h("dialog", { class: "dialog", id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title), body);
  dlg.addEventListener("close", () => {
    dlg.remove();
    onClose?.();
  });
  document.body.append(dlg);
  dlg.showModal();
  return dlg;
}

// Asks before an action that applications notice (revoking a key,
// disabling an app). run() does it and may throw an RpcError, shown in
// the dialog; then done(true) after it succeeded, done(false) on Cancel.
export function confirmAction({ id, title, text, confirmLabel, busyLabel, run, done }) {
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: `${id}-cancel` }, "Cancel");
  const ok = h("button", { type: "submit", class: "btn btn-danger", id: `${id}-confirm` }, confirmLabel);
  const form = h("form", { method: "dialog" }, h("p", { id: `${id}-desc` }, text), msg,
    h("div", { class: "dialog-actions" }, cancel, ok));
  let succeeded = false;
  const dlg = openDialog(id, title, form, () => done?.(succeeded));
  dlg.setAttribute("aria-describedby", `${id}-desc`);
  cancel.addEventListener("click", () => dlg.close());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.hidden = true;
    ok.disabled = true;
    setText(ok, busyLabel);
    try {
      await run();
      succeeded = true;
      dlg.close();
    } catch (err) {
      if (err.code === "unauthenticated") return;
      ok.disabled = false;
      setText(ok, confirmLabel);
      setText(msg, describeError(err));
      msg.hidden = false;
    }
  });
  cancel.focus();
}

// A labelled input with its hint and error below it, for the dialogs.
function dialogField(id, label, control, hint) {
  const err = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  control.id = id;
  control.setAttribute("aria-describedby", [hint && `${id}-hint`, `${id}-error`].filter(Boolean).join(" "));
  return {
    wrap: h("div", { class: "field" }, h("label", { for: id }, label), control,
      hint && h("p", { class: "hint", id: `${id}-hint` }, hint), err),
    error(text) {
      err.hidden = !text;
      setText(err, text || "");
      control.setAttribute("aria-invalid", text ? "true" : "false");
    },
  };
}

// Creates an app: its name (the rule of policy names, checked as typed and
// by the server) and an optional description. done(app) with the app the
// server answered, or done(null) on Cancel.
export function createAppDialog({ name = "", done }) {
  const nameIn = h("input", { type: "text", autocomplete: "off", spellcheck: "false", autocapitalize: "none", maxlength: "128", required: true, "aria-required": "true" });
  const descIn = h("input", { type: "text", autocomplete: "off", maxlength: "1024" });
  nameIn.value = name;
  const nameF = dialogField("app-name", "Name", nameIn, "What the app's keys and the policies' apps lists call it. Letters, digits, '.', '_' and '-'.");
  const descF = dialogField("app-desc", "Description (optional)", descIn);
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: "app-cancel" }, "Cancel");
  const ok = h("button", { type: "submit", class: "btn btn-primary", id: "app-create" }, "Create app");
  const form = h("form", { method: "dialog", class: "policy-form dialog-form", novalidate: true }, nameF.wrap, descF.wrap, msg,
    h("div", { class: "dialog-actions" }, cancel, ok));
  let made = null;
  const dlg = openDialog("app-dialog", "New app", form, () => done?.(made));
  cancel.addEventListener("click", () => dlg.close());
  nameIn.addEventListener("input", () => nameF.error(""));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.hidden = true;
    const bad = fmt.validateName(nameIn.value);
    if (bad) {
      nameF.error(bad.replace(/^name: /, "Name: "));
      nameIn.focus();
      return;
    }
    ok.disabled = true;
    setText(ok, "Creating…");
    try {
      const r = await call(APPS, "CreateApp", { name: nameIn.value, description: descIn.value });
      made = r.app || { name: nameIn.value, description: descIn.value, enabled: true, keys: [], policies: [] };
      toast(`Created app ${made.name}.`);
      dlg.close();
    } catch (err) {
      if (err.code === "unauthenticated") return;
      ok.disabled = false;
      setText(ok, "Create app");
      if (["invalid_argument", "already_exists"].includes(err.code) && !/^description/.test(err.message)) {
        nameF.error(err.message);
        nameIn.focus();
        return;
      }
      setText(msg, describeError(err));
      msg.hidden = false;
    }
  });
  nameIn.focus();
}

// How long a new key lives; "" = never expires.
export const KEY_LIFETIMES = [
  { value: "", label: "Never expires" },
  { value: String(7 * 86400), label: "7 days" },
  { value: String(30 * 86400), label: "30 days" },
  { value: String(90 * 86400), label: "90 days" },
  { value: String(365 * 86400), label: "1 year" },
];

// Issues a key for app: first the expiry, then the key itself, shown this
// once with a copy button. done(issued) when the dialog closes: whether a
// key was issued (the caller reloads its list).
export function issueKeyDialog({ app, done }) {
  const expiry = h("select", {}, KEY_LIFETIMES.map((l) => h("option", { value: l.value }, l.label)));
  const expiryF = dialogField("key-expiry", "Expiry", expiry, "An expired key answers unauthenticated, like a revoked one. Rotate before then: an app may hold several keys.");
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: "key-cancel" }, "Cancel");
  const ok = h("button", { type: "submit", class: "btn btn-primary", id: "key-issue" }, "Issue key");
  const form = h("form", { method: "dialog", class: "policy-form dialog-form" },
    h("p", {}, "A new API key for ", h("strong", { class: "break" }, app), ". Its other keys keep working."),
    expiryF.wrap, msg, h("div", { class: "dialog-actions" }, cancel, ok));
  let issued = false;
  const dlg = openDialog("key-dialog", `Issue a key for ${app}`, form, () => done?.(issued));
  const title = dlg.querySelector("h2");
  expiry.focus();
  cancel.addEventListener("click", () => dlg.close());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (issued) return;
    msg.hidden = true;
    ok.disabled = true;
    setText(ok, "Issuing…");
    let r;
    try {
      r = await call(APPS, "IssueKey", { app, expiresInSeconds: expiry.value || "0" });
    } catch (err) {
      if (err.code === "unauthenticated") return;
      ok.disabled = false;
      setText(ok, "Issue key");
      setText(msg, describeError(err));
      msg.hidden = false;
      return;
    }
    issued = true;
    showSecret(r.key || "", r.info || {});
  });

  // The second step: the key, once. The text field is read-only and
  // selected so that it can be copied by hand too.
  function showSecret(key, info) {
    setText(title, `Key issued for ${app}`);
    const keyIn = h("input", { type: "text", readonly: true, spellcheck: "false", autocomplete: "off", class: "secret", "aria-describedby": "key-warning" });
    keyIn.value = key;
    const keyF = dialogField("issued-key", "API key", keyIn);
    const copied = h("p", { class: "hint", id: "key-copied", role: "status" });
    const copy = h("button", { type: "button", class: "btn", id: "key-copy" }, "Copy key");
    const close = h("button", { type: "submit", class: "btn btn-primary", id: "key-done" }, "Done");
    const expires = info.expiresAt ? `It expires ${fmt.formatTimestamp(info.expiresAt)}.` : "It does not expire.";
    form.replaceChildren(
      h("p", { class: "key-warning", id: "key-warning", role: "alert" },
        h("strong", {}, "Copy this key now: it cannot be shown again. "),
        "permitd keeps only its hash; if it is lost, issue a new key and revoke this one."),
      keyF.wrap,
      h("div", { class: "form-actions" }, copy, copied),
      h("p", { class: "small" }, "Applications send it as ", h("code", {}, "Authorization: Bearer <key>"),
        `. Its prefix ${info.prefix || ""} names it in lists and logs. ${expires}`),
      h("div", { class: "dialog-actions" }, close));
    form.onsubmit = (e) => {
      e.preventDefault();
      dlg.close();
    };
    copy.addEventListener("click", async () => {
      keyIn.select();
      try {
        await navigator.clipboard.writeText(key);
        setText(copied, "Copied to the clipboard.");
      } catch {
        setText(copied, "The browser refused the clipboard: the key is selected, press Ctrl+C (⌘C) to copy it.");
      }
    });
    keyIn.focus();
    keyIn.select();
  }
}
