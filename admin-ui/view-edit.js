// view-edit.js - the create form (#/new) and the edit form
// (#/policy/NAME/edit): validation as the user types that mirrors the
// server's (format.js), server errors shown next to their field, and the
// conflict panel when someone else saved the policy first (version check).
import { isAbort } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { go, nav, policyHref, render } from "./router.js";
import { POLICY, call, isEditor } from "./session.js";
import { emptyState, errorState, icon, loadingState, pageHead } from "./widgets.js";

export function editView(main, { policy: name }) {
  const creating = name === null;
  document.title = `${creating ? "New policy" : `Edit ${name}`} · permitd admin`;
  const ac = new AbortController();
  const back = (() => {
    const prev = nav.prevRoute;
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
  const colocateIn = h("input", { type: "checkbox", name: "colocate", id: "f-colocate", "aria-describedby": "f-colocate-hint" });
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
  const colocateWrap = h("div", { class: "field", dataset: { field: "colocate" } },
    h("label", { class: "check" }, colocateIn, h("span", {}, h("strong", {}, "Keep all buckets together"), " (colocate)")),
    h("p", { class: "hint", id: "f-colocate-hint" },
      "Keeps every key's bucket in one Redis Cluster slot, so an all-or-nothing AcquireBatch may take from several keys of this policy at once. " +
      "Leave it off unless callers need that: off, each key's bucket lives in a slot of its own and the policy's traffic spreads over every Redis master. " +
      "Changing it moves the keys' buckets: they start full once."));
  fields.colocate = { wrap: colocateWrap, err: h("p", { class: "field-error", hidden: true }), control: colocateIn };
  colocateWrap.append(fields.colocate.err);

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
    colocateWrap,
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
    colocateIn.checked = !!p.colocate;
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
      colocate: colocateIn.checked,
    };
    if (!creating) policy.version = String(loaded?.version ?? "0");
    save.disabled = true;
    setText(save, "Saving…");
    try {
      const r = await call(POLICY, creating ? "CreatePolicy" : "UpdatePolicy", { policy }, ac.signal);
      const v = r.policy?.version;
      toast(creating ? `Created policy ${policy.name}.` : `Saved ${policy.name}${v ? ` (version ${v})` : ""}.`);
      if (creating) nav.flashPolicy = policy.name;
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
