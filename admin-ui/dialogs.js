// dialogs.js - the modal dialog that confirms deleting a policy (a native
// <dialog>: focus is kept inside and Escape closes it), shared by the
// policies table and the detail page.
import { h, setText } from "./dom.js";
import { describeError, toast } from "./notices.js";
import { POLICY, call } from "./session.js";

export function confirmDelete(p, onDeleted) {
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
