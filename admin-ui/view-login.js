// view-login.js - the sign-in page, entering the app once signed in (top
// bar with the user's name and role, then the page the address names),
// signing out, and the way back here when the session expires.
import { rpc } from "./api.js";
import { h, replace, setText } from "./dom.js";
import { clearBanner, describeError } from "./notices.js";
import { ui } from "./page.js";
import { closeView, nav, render } from "./router.js";
import { AUTH, call, session } from "./session.js";
import { logo } from "./widgets.js";

export function showLogin(notice) {
  closeView();
  session.user = null;
  document.body.classList.add("logged-out");
  document.body.classList.remove("booting");
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
export function enterApp(user, fromLogin = false) {
  session.user = user;
  document.body.classList.remove("logged-out", "booting");
  ui.topbar.hidden = false;
  setText(ui.userName, user.username);
  // On narrow screens CSS hides .role-name: a viewer's badge reads "read-only".
  if (user.role === "editor" || user.role === "admin") replace(ui.userRole, user.role);
  else replace(ui.userRole, h("span", { class: "role-name" }, "viewer · "), "read-only");
  ui.userRole.className = `badge ${user.role === "viewer" ? "badge-muted" : "badge-info"}`;
  // Users is for admins only (UserService refuses the others anyway).
  ui.navUsers.hidden = user.role !== "admin";
  if (!location.hash || location.hash === "#") history.replaceState(null, "", "#/");
  nav.firstRender = !fromLogin;
  render();
}

export function sessionExpired() {
  showLogin("Your session has expired. Sign in again to continue.");
}

// The top bar's "Log out" button.
export async function signOut() {
  ui.logout.disabled = true;
  try {
    await rpc(AUTH, "Logout", {});
  } catch {
    // Signed out either way on this side; the session expires on its own.
  } finally {
    ui.logout.disabled = false;
  }
  showLogin("You have signed out.");
}
