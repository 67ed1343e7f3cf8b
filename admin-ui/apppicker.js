// apppicker.js - the policy form's Apps field (issue 21): the apps a
// policy allows are picked from the apps that exist (AppService.ListApps),
// as a checkbox list with a search box above it, "*" (any app) first; an
// editor who needs an app that is not there yet creates it on the spot
// (appdialogs.js) and finds it ticked. Nothing is typed freely, so a typo
// cannot make a policy name an app that no key belongs to.
//
// The search hides the apps that do not match (ticked ones stay in sight)
// and says how many are shown in a status; Enter in it ticks the one app
// left, instead of submitting the form.
import { isAbort } from "./api.js";
import { h, replace, setText } from "./dom.js";
import { createAppDialog } from "./appdialogs.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { APPS, call } from "./session.js";
import { errorState, icon, loadingState } from "./widgets.js";

// Returns the field: { wrap, control (what gets focus for an error), err,
// value() (the ticked names, "*" first), set(names), onChange(fn) }.
// The list is loaded at once; signal stops it with the page.
export function makeAppPicker({ signal, requiredMark }) {
  const options = new Map(); // name → { label, box }
  let changed = () => {};
  const search = h("input", {
    type: "search", id: "f-apps-search", class: "filter", autocomplete: "off", spellcheck: "false", autocapitalize: "none",
    placeholder: "Find an app", "aria-controls": "f-apps-list", "aria-describedby": "f-apps-hint f-apps-error",
  });
  const searchLabel = h("label", { for: "f-apps-search", class: "sr-only" }, "Find an app");
  const newBtn = h("button", { type: "button", class: "btn", id: "f-apps-new" }, icon("plus"), "New app");
  const status = h("p", { class: "sr-only", role: "status", id: "f-apps-status" });
  const list = h("div", { class: "app-options", id: "f-apps-list", role: "group", "aria-label": "Apps allowed" });
  const state = h("div", { class: "app-options-state" }, loadingState("Loading apps…"));
  const picked = h("p", { class: "hint", id: "f-apps-picked" });
  const err = h("p", { class: "field-error", id: "f-apps-error", hidden: true });
  const wrap = h("fieldset", { class: "field app-picker", id: "f-apps", dataset: { field: "apps" }, "aria-describedby": "f-apps-hint f-apps-picked f-apps-error" },
    h("legend", {}, "Apps", requiredMark()),
    h("p", { class: "hint", id: "f-apps-hint" }, "The applications allowed to use this policy, picked from the apps that exist. * allows any application."),
    h("div", { class: "input-row app-search" }, searchLabel, search, newBtn),
    status, list, state, picked, err);

  const value = () => [...options.entries()].filter(([, o]) => o.box.checked).map(([n]) => n)
    .sort((a, b) => (a === "*" ? -1 : b === "*" ? 1 : a.localeCompare(b)));

  function showPicked() {
    const v = value();
    setText(picked, v.length === 0 ? "None picked." : `Picked: ${v.map((n) => (n === "*" ? "* (any app)" : n)).join(", ")}.`);
  }

  // Adds an option for app (name, description) unless there is one.
  function add(name, description = "") {
    if (options.has(name)) return options.get(name);
    const id = `f-app-${options.size}`;
    const box = h("input", { type: "checkbox", name: "app", value: name, id });
    box.addEventListener("change", () => {
      showPicked();
      changed();
    });
    const label = h("label", { class: "check app-option", for: id, dataset: { app: name } }, box,
      name === "*"
        ? h("span", {}, h("strong", {}, "* any app"), h("span", { class: "muted" }, " — every application"))
        : h("span", { class: "break" }, h("strong", {}, name), description ? h("span", { class: "muted" }, ` — ${description}`) : null));
    const o = { label, box, description };
    options.set(name, o);
    // "*" first, then by name.
    const before = name === "*" ? list.firstChild
      : [...list.children].find((l) => l.dataset.app !== "*" && l.dataset.app.localeCompare(name) > 0);
    list.insertBefore(label, before || null);
    return o;
  }

  function applySearch(announce) {
    const q = search.value.trim().toLowerCase();
    let shown = 0;
    for (const [name, o] of options) {
      const hit = !q || name.toLowerCase().includes(q) || o.description.toLowerCase().includes(q) || o.box.checked;
      o.label.hidden = !hit;
      if (hit) shown++;
    }
    if (announce) setText(status, q ? `${shown} of ${options.size} apps shown for “${search.value.trim()}”.` : `All ${options.size} apps shown.`);
  }
  search.addEventListener("input", () => applySearch(true));
  search.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    e.preventDefault(); // Enter here picks, it does not submit the policy
    const q = search.value.trim().toLowerCase();
    const hits = [...options.entries()].filter(([n, o]) => !o.box.checked && n.toLowerCase().includes(q));
    if (q && hits.length === 1) {
      hits[0][1].box.checked = true;
      showPicked();
      changed();
      setText(status, `Picked ${hits[0][0]}.`);
    }
  });

  newBtn.addEventListener("click", () => {
    const typed = search.value.trim();
    createAppDialog({
      name: fmt.validateName(typed) ? "" : typed,
      done: (app) => {
        if (!app) {
          newBtn.focus();
          return;
        }
        const o = add(app.name, app.description || "");
        o.box.checked = true;
        search.value = "";
        applySearch(false);
        showPicked();
        changed();
        o.box.focus();
      },
    });
  });

  async function load() {
    try {
      const r = await call(APPS, "ListApps", {}, signal);
      if (signal.aborted) return;
      add("*");
      for (const a of r.apps || []) add(a.name, a.description || "");
      state.replaceChildren();
      applySearch(false);
    } catch (e) {
      if (isAbort(e) || e.code === "unauthenticated") return;
      replace(state, errorState(`Could not load the apps: ${describeError(e)}`, () => {
        replace(state, loadingState("Loading apps…"));
        load();
      }));
    }
  }
  load();
  showPicked();

  return {
    wrap, err, control: search,
    value,
    // Ticks exactly names (adding any the list lacks: a policy may name an
    // app created since the list was loaded).
    set(names) {
      const want = new Set(names || []);
      for (const n of want) add(n);
      for (const [n, o] of options) o.box.checked = want.has(n);
      applySearch(false);
      showPicked();
    },
    onChange(fn) {
      changed = fn;
    },
    setInvalid(bad) {
      search.setAttribute("aria-invalid", bad ? "true" : "false");
    },
  };
}

// What the form checks before sending: at least one app.
export function validateApps(names) {
  return names.length === 0 ? "apps: pick at least one app, or * for any app" : "";
}
