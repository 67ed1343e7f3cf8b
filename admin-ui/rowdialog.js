// rowdialog.js - the create/edit dialog of one row of a gateway table: the
// Gateway rules page's rules and the Envoy descriptors page's mappings
// (issue 25). Both are a few text fields checked by the server, which names
// the field it refuses ("host: ...", "key_entry: ..."); the message is
// shown at that field (aria-invalid, described by it, focused), anything
// else above the buttons. One module so the two pages look and behave
// alike.
import { h, setText } from "./dom.js";
import { describeError, toast } from "./notices.js";
import { call } from "./session.js";

// Every policy's name (ListPolicies, page by page), for the policy fields'
// pickers and for telling a row whose policy is gone (issue 40).
export async function policyNames(signal) {
  const names = [];
  let token = "";
  do {
    const r = await call("PolicyService", "ListPolicies", { pageSize: 500, pageToken: token }, signal);
    for (const p of r.policies || []) names.push(p.name);
    token = r.nextPageToken || "";
  } while (token);
  return names;
}

// A row's policy that is gone: the word shown next to it in the tables.
export function brokenBadge(policy) {
  return h("span", { class: "badge badge-danger broken-policy", title: `No policy is named ${policy}: requests this row matches are not limited as meant.` },
    "broken: no such policy");
}

// Opens the dialog and returns nothing; done(saved) runs when it closes.
//   id          the dialog's id (its buttons are `${id}-cancel`, save button saveId)
//   prefix      the fields' id prefix: the input of field key "key_entry" is `${prefix}-key-entry`
//   title       the heading
//   fields      [{ key, json, label, hint?, type?: "number", select?: [[value, text]], readonly?, policies? }]:
//               key is the proto field name (as the server's messages start), json the JSON name;
//               policies: true makes the field a picker of existing policies (a datalist of
//               ListPolicies' names; a name that is none of them is refused before the call)
//   values      the starting values by JSON name
//   saveId, saveLabel
//   setup(fields)        optional: wire fields together (fields[key].control/.wrap/.error(text))
//   check(body, fields)  optional: a local check before the call; false stops the save
//   save(body)           the call; its RpcError is shown; resolves to the toast's text
//   focus                the key of the field focused first
export function rowDialog({ id, prefix, title, fields: spec, values, saveId, saveLabel, setup, check, save, done, focus }) {
  const fields = {};
  const pickers = [];
  const rows = spec.map((f) => {
    const fid = `${prefix}-${f.key.replaceAll("_", "-")}`;
    const control = f.select
      ? h("select", {}, f.select.map(([v, t]) => h("option", { value: v }, t)))
      : h("input", { type: f.type || "text", autocomplete: "off", spellcheck: "false", autocapitalize: "none" });
    if (f.type === "number") control.setAttribute("inputmode", "numeric");
    if (f.readonly) control.readOnly = true;
    control.id = fid;
    const list = f.policies && h("datalist", { id: `${fid}-options` });
    if (list) {
      control.setAttribute("list", list.id);
      pickers.push({ key: f.key, label: f.label, list });
    }
    const err = h("p", { class: "field-error", id: `${fid}-error`, hidden: true });
    control.setAttribute("aria-describedby", [f.hint && `${fid}-hint`, `${fid}-error`].filter(Boolean).join(" "));
    const wrap = h("div", { class: "field" }, h("label", { for: fid }, f.label), control, list,
      f.hint && h("p", { class: "hint", id: `${fid}-hint` }, f.hint), err);
    fields[f.key] = {
      control, wrap,
      error(text) {
        err.hidden = !text;
        setText(err, text || "");
        control.setAttribute("aria-invalid", text ? "true" : "false");
      },
    };
    const v = values[f.json];
    control.value = v === undefined || v === null ? "" : String(v);
    control.addEventListener("input", () => fields[f.key].error(""));
    return wrap;
  });
  setup?.(fields);
  // The pickers' options: a failed load leaves the field free text (the
  // server still refuses a policy that does not exist).
  let known = null;
  if (pickers.length) {
    policyNames().then((names) => {
      known = new Set(names);
      for (const p of pickers) p.list.replaceChildren(...names.map((n) => h("option", { value: n })));
    }, () => {});
  }
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: `${id}-cancel` }, "Cancel");
  const ok = h("button", { type: "submit", class: "btn btn-primary", id: saveId }, saveLabel);
  const form = h("form", { method: "dialog", class: "policy-form dialog-form", novalidate: true }, rows, msg,
    h("div", { class: "dialog-actions" }, cancel, ok));
  const dlg = h("dialog", { class: "dialog", id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title), form);
  let saved = false;
  dlg.addEventListener("close", () => {
    dlg.remove();
    done?.(saved);
  });
  document.body.append(dlg);
  dlg.showModal();
  cancel.addEventListener("click", () => dlg.close());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.hidden = true;
    for (const f of Object.values(fields)) f.error("");
    const body = {};
    for (const f of spec) {
      const v = fields[f.key].control.value.trim();
      body[f.json] = f.type === "number" ? (v === "" ? "0" : v) : v;
    }
    if (check && check(body, fields) === false) return;
    for (const p of pickers) {
      const v = body[spec.find((f) => f.key === p.key).json];
      if (known && !known.has(v)) {
        fields[p.key].error(`${p.label}: no policy is named "${v}"; pick one of the list.`);
        fields[p.key].control.focus();
        return;
      }
    }
    ok.disabled = true;
    setText(ok, "Saving…");
    try {
      toast(await save(body));
      saved = true;
      dlg.close();
    } catch (err) {
      if (err.code === "unauthenticated") return;
      ok.disabled = false;
      setText(ok, saveLabel);
      // "host: ..." names its field: the message goes there.
      const m = /^([a-z_]+): (.*)$/s.exec(err.message || "");
      const target = (err.code === "invalid_argument" || err.code === "failed_precondition") && m && fields[m[1]];
      if (target && !target.wrap.hidden) {
        const label = spec.find((f) => f.key === m[1]).label.replace(/ \(optional\)$/, "");
        target.error(`${label}: ${m[2]}`);
        target.control.focus();
      } else {
        setText(msg, describeError(err));
        msg.hidden = false;
      }
    }
  });
  fields[focus]?.control.focus();
}
