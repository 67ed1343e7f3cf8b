// view-users.js - the Users page (#/users, issue 23), for admins: every
// user with its role, state, live sessions and who changed it last (the
// name the audit shows); an admin adds users (the password rule of
// `permitd admin add-user`: at least 8 characters), changes a role, resets
// a password, ends a user's sessions, disables, enables and deletes.
// Every change is audited by the server. The last enabled admin cannot be
// demoted, disabled or deleted: the server refuses (failed_precondition)
// and its message is shown as it comes. Editors and viewers get a notice
// instead of the page (the nav link is hidden for them, and UserService
// refuses them anyway).
import { isAbort } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { USERS, call, isAdmin, session } from "./session.js";
import { badge, errorState, icon, loadingState, pageHead } from "./widgets.js";

const ROLES = ["viewer", "editor", "admin"];
const PASSWORD_MIN = 8;

export function usersView(main) {
  document.title = "Users · permitd admin";
  if (!isAdmin()) {
    append(main, pageHead(h("h1", { tabindex: "-1" }, "Users"), null),
      h("div", { class: "card notice-card", role: "note", id: "users-admins-only" },
        h("p", {}, "Only admins manage users. Ask an admin to change your role or another user's.")));
    return { dispose() {} };
  }
  const ac = new AbortController();
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const problem = h("p", { class: "form-error", id: "users-error", role: "alert", hidden: true });
  const box = h("div", { id: "users" }, loadingState("Loading users…"));

  // The add form.
  const name = h("input", { id: "nu-name", name: "username", autocomplete: "off", required: true, maxlength: "64", spellcheck: "false" });
  const role = h("select", { id: "nu-role", name: "role" }, ROLES.map((r) => h("option", { value: r }, r)));
  const pass = h("input", { id: "nu-password", name: "password", type: "password", autocomplete: "new-password", required: true, minlength: String(PASSWORD_MIN), "aria-describedby": "nu-password-hint" });
  const addError = h("p", { class: "form-error", id: "nu-error", role: "alert", hidden: true });
  const addBtn = h("button", { type: "submit", class: "btn btn-primary", id: "nu-submit" }, icon("plus"), "Add user");
  const form = h("form", { class: "card add-user", id: "add-user", "aria-labelledby": "add-user-h", novalidate: true },
    h("h2", { id: "add-user-h" }, "Add a user"),
    h("div", { class: "add-user-fields" },
      h("div", { class: "field" }, h("label", { for: "nu-name" }, "User name"), name),
      h("div", { class: "field" }, h("label", { for: "nu-role" }, "Role"), role),
      h("div", { class: "field" }, h("label", { for: "nu-password" }, "Password"), pass,
        h("p", { class: "hint", id: "nu-password-hint" }, `At least ${PASSWORD_MIN} characters.`))),
    addError, h("div", { class: "form-actions" }, addBtn));
  append(main, pageHead(h("h1", { tabindex: "-1" }, "Users"), sub), problem, box, form);

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    addError.hidden = true;
    const username = name.value.trim();
    let why = "";
    if (!username) why = "Give a user name.";
    else if (fmt.validateName(username)) why = `User name: ${fmt.validateName(username).replace(/^name: /, "")}`;
    else if (pass.value.length < PASSWORD_MIN) why = `The password must be at least ${PASSWORD_MIN} characters.`;
    if (why) {
      setText(addError, why);
      addError.hidden = false;
      (why.startsWith("The password") ? pass : name).focus();
      return;
    }
    addBtn.disabled = true;
    try {
      await call(USERS, "AddUser", { username, role: role.value, password: pass.value }, ac.signal);
      toast(`Added ${username} (${role.value}).`);
      name.value = "";
      pass.value = "";
      role.value = "viewer";
      await load(() => rowOf(username)?.querySelector("th"));
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      setText(addError, describeError(err));
      addError.hidden = false;
      name.focus();
    } finally {
      addBtn.disabled = false;
      pass.value = "";
    }
  });

  const rowOf = (username) => [...box.querySelectorAll("tr[data-user]")].find((r) => r.dataset.user === username) || null;

  // Runs one change; a refusal (the last admin, say) is shown above the
  // table as the server words it, then the list is loaded again either way.
  // undo puts a control the user moved back at once on a refusal (a role
  // select), so it never shows a change the server refused.
  async function change(what, run, focus, undo) {
    problem.hidden = true;
    try {
      await run();
      toast(what);
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      undo?.();
      setText(problem, describeError(err));
      problem.hidden = false;
    }
    await load(focus);
  }

  function confirmDialog({ id, title, text, confirmLabel, danger, body, onConfirm }) {
    const cancel = h("button", { type: "button", class: "btn", id: `${id}-cancel` }, "Cancel");
    const ok = h("button", { type: "submit", class: danger ? "btn btn-danger" : "btn btn-primary", id: `${id}-confirm` }, confirmLabel);
    const msg = h("p", { class: "form-error", role: "alert", hidden: true });
    const f = h("form", { method: "dialog" }, h("p", { id: `${id}-desc` }, text), body, msg, h("div", { class: "dialog-actions" }, cancel, ok));
    const dlg = h("dialog", { class: "dialog", id, "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-desc` }, h("h2", { id: `${id}-title` }, title), f);
    dlg.addEventListener("close", () => dlg.remove());
    cancel.addEventListener("click", () => dlg.close());
    f.addEventListener("submit", async (e) => {
      e.preventDefault();
      const bad = onConfirm.check?.();
      if (bad) {
        setText(msg, bad);
        msg.hidden = false;
        return;
      }
      dlg.close();
      await onConfirm.run();
    });
    document.body.append(dlg);
    dlg.showModal();
    (body ? dlg.querySelector("input") : cancel)?.focus();
  }

  function userRow(u) {
    const me = u.username === session.user?.username;
    const select = h("select", { class: "role-select", "aria-label": `Role of ${u.username}` },
      ROLES.map((r) => h("option", { value: r, selected: r === u.role }, r)));
    select.addEventListener("change", () => change(`${u.username} is now ${select.value}.`,
      () => call(USERS, "SetUserRole", { username: u.username, role: select.value }, ac.signal),
      () => rowOf(u.username)?.querySelector(".role-select"),
      () => { select.value = u.role; }));
    const act = (cls, label, aria, fn) => h("button", { type: "button", class: `btn btn-small ${cls}`, "aria-label": aria, onclick: fn }, label);
    const reset = act("reset-password", "Reset password", `Reset password of ${u.username}`, () => {
      const pw = h("input", { type: "password", id: "rp-password", autocomplete: "new-password", minlength: String(PASSWORD_MIN) });
      confirmDialog({
        id: "reset-password", title: `New password for ${u.username}`,
        text: `${u.username}'s sessions end; it signs in again with the new password.`,
        confirmLabel: "Set password",
        body: h("div", { class: "field" }, h("label", { for: "rp-password" }, "New password"), pw),
        onConfirm: {
          check: () => (pw.value.length < PASSWORD_MIN ? `The password must be at least ${PASSWORD_MIN} characters.` : ""),
          run: () => change(`New password set for ${u.username}.`,
            () => call(USERS, "ResetPassword", { username: u.username, password: pw.value }, ac.signal),
            () => rowOf(u.username)?.querySelector(".reset-password")),
        },
      });
    });
    const end = act("end-sessions", "End sessions", `End sessions of ${u.username}`, () => change(
      `Ended the sessions of ${u.username}.`,
      () => call(USERS, "EndSessions", { username: u.username }, ac.signal),
      () => rowOf(u.username)?.querySelector(".end-sessions")));
    const toggle = act("toggle-user", u.enabled ? "Disable" : "Enable", `${u.enabled ? "Disable" : "Enable"} ${u.username}`, () => {
      const run = () => change(`${u.enabled ? "Disabled" : "Enabled"} ${u.username}.`,
        () => call(USERS, "SetUserEnabled", { username: u.username, enabled: !u.enabled }, ac.signal),
        () => rowOf(u.username)?.querySelector(".toggle-user"));
      if (!u.enabled) return run();
      confirmDialog({ id: "disable-user", title: `Disable ${u.username}?`, danger: true,
        text: `${u.username} is signed out and cannot sign in until an admin enables it again.`,
        confirmLabel: "Disable user", onConfirm: { run } });
    });
    const del = act("btn-danger-quiet delete-user", "Delete", `Delete ${u.username}`, () => confirmDialog({
      id: "delete-user", title: `Delete ${u.username}?`, danger: true,
      text: `${u.username} is signed out and removed; the audit keeps what it changed.`,
      confirmLabel: "Delete user",
      onConfirm: { run: () => change(`Deleted ${u.username}.`, () => call(USERS, "DeleteUser", { username: u.username }, ac.signal), () => box.querySelector("h2, th")) },
    }));
    return h("tr", { dataset: { user: u.username } },
      h("th", { scope: "row", tabindex: "-1" }, u.username, me ? h("span", { class: "muted small" }, " (you)") : null),
      h("td", { "data-label": "Role" }, select),
      h("td", { "data-label": "State" }, u.enabled ? badge("Enabled", "ok") : badge("Disabled", "muted", "cannot sign in")),
      h("td", { "data-label": "Sessions", class: "num" }, String(u.sessions || 0)),
      h("td", { "data-label": "Last changed by" }, u.changedBy || h("span", { class: "muted" }, "—"),
        u.updatedAt ? h("span", { class: "muted small" }, ` ${fmt.relativeTime(u.updatedAt) || fmt.formatTimestamp(u.updatedAt)}`) : null),
      // One's own row: no Disable or Delete (issue 40: an admin locking
      // itself out with a click; another admin does it, or the command line).
      h("td", { class: "cell-actions" }, h("div", { class: "row-actions" }, reset, end, me ? null : toggle, me ? null : del)));
  }

  async function load(where) {
    let r;
    try {
      r = await call(USERS, "ListUsers", {}, ac.signal);
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      setText(sub, "Could not load users");
      replace(box, errorState(`Could not load users: ${describeError(err)}`, () => {
        replace(box, loadingState("Loading users…"));
        load(where);
      }));
      return;
    }
    if (ac.signal.aborted) return;
    const users = r.users || [];
    const admins = users.filter((u) => u.role === "admin" && u.enabled).length;
    setText(sub, `${users.length === 1 ? "1 user" : `${users.length} users`} · ${admins === 1 ? "1 enabled admin" : `${admins} enabled admins`}`);
    replace(box, h("div", { class: "table-scroll" }, h("table", { class: "users", id: "users-table" },
      h("caption", { class: "sr-only" }, "Users of the admin UI"),
      h("thead", {}, h("tr", {}, ["User", "Role", "State", "Sessions", "Last changed by"].map((t) => h("th", { scope: "col" }, t)),
        h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
      h("tbody", {}, users.map(userRow)))));
    where?.()?.focus();
  }
  load();
  return { dispose: () => ac.abort() };
}
