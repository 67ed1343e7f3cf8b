// router.js - the address after # names the page: #/ the overview, the
// UI's home (the fleet at a glance, issue 39; #/overview the same page, for
// old links), #/policies the policies, #/new the create form, #/apps the
// apps and their keys, #/gateway the gateway rules,
// #/envoy the Envoy descriptors, #/instances the permitd instances (issue 23),
// #/audit every change, #/users the users (admins), #/app/NAME an app's
// traffic (issue 39), #/policy/NAME its detail,
// #/policy/NAME/edit its form;
// anything else is "not found". render() disposes the page shown (its polls
// stop) and builds the one the address names, from the views that
// startRouter() was given, then moves focus to it (but not on the first
// page after a plain load).
import { ui } from "./page.js";
import { clearBanner } from "./notices.js";
import { session } from "./session.js";

// Navigation state shared by the views.
export const nav = {
  view: null,          // { dispose() } of the page shown
  route: null,         // current hash
  prevRoute: null,     // the one before, to go back to after a form
  flashPolicy: null,   // a policy row to highlight once (just created)
  firstRender: true,
};

let views = null;      // route name → view(main, route)

// views: { list, detail, edit, apps, gateway, envoy, instances, audit, users, missing },
// each (main, route) → { dispose() }.
export function startRouter(table) {
  views = table;
  window.addEventListener("hashchange", render);
}

// Disposes the page shown, if any (the login page replaces it).
export function closeView() {
  nav.view?.dispose();
  nav.view = null;
}

export const HOME = "#/";
export const LIST = "#/policies";
export const policyHref = (name) => `#/policy/${encodeURIComponent(name)}`;
export const editHref = (name) => `#/policy/${encodeURIComponent(name)}/edit`;

export function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

export function parseRoute(hash) {
  let parts;
  try {
    parts = hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  } catch {
    return { name: "missing" };
  }
  if (parts.length === 1 && (parts[0] === "" || parts[0] === "overview")) return { name: "overview" };
  if (parts.length === 1 && parts[0] === "policies") return { name: "list" };
  if (parts.length === 1 && parts[0] === "new") return { name: "edit", policy: null };
  if (parts.length === 1 && parts[0] === "apps") return { name: "apps" };
  if (parts.length === 1 && parts[0] === "gateway") return { name: "gateway" };
  if (parts.length === 1 && parts[0] === "envoy") return { name: "envoy" };
  if (parts.length === 1 && parts[0] === "instances") return { name: "instances" };
  if (parts.length === 1 && parts[0] === "users") return { name: "users" };
  if (parts.length === 1 && parts[0] === "audit") return { name: "audit" };
  if (parts.length === 2 && parts[0] === "app" && parts[1]) return { name: "app", app: parts[1] };
  if (parts[0] === "policy" && parts[1]) {
    if (parts.length === 2) return { name: "detail", policy: parts[1] };
    if (parts.length === 3 && parts[2] === "edit") return { name: "edit", policy: parts[1] };
  }
  return { name: "missing" };
}

export function render() {
  if (!session.user) return;
  closeView();
  clearBanner("poll");
  const hash = location.hash || "#/";
  if (hash !== nav.route) {
    nav.prevRoute = nav.route;
    nav.route = hash;
  }
  const route = parseRoute(hash);
  for (const a of document.querySelectorAll(".nav-link")) {
    if (route.name === a.dataset.route) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  ui.main.replaceChildren();
  nav.view = views[route.name](ui.main, route);
  if (!nav.firstRender) {
    const target = ui.main.querySelector("[data-autofocus]") || ui.main.querySelector("h1");
    target?.focus();
  }
  nav.firstRender = false;
}
