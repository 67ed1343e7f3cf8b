// dialogs.js - the modal dialog that confirms deleting a policy (a native
// <dialog>: focus is kept inside and Escape closes it), shared by the
// policies table and the detail page. What names the policy (gateway rules,
// Envoy descriptors: GetPolicy's references, issue 40) is listed; the
// server refuses the delete while any does, unless the box that deletes
// them with it is ticked.
import { h, setText } from "./dom.js";
import { describeError, toast } from "./notices.js";
import { POLICY, call } from "./session.js";

export function confirmDelete(p, onDeleted) {
  const refsText = h("p", { id: "delete-refs-text" });
  const removeBox = h("input", { type: "checkbox", id: "delete-refs-remove" });
  const refs = h("div", { class: "delete-refs", hidden: true }, refsText,
    h("label", { for: "delete-refs-remove" }, removeBox, " Also delete them (audited)"));
  const showRefs = (count, words) => {
    setText(refsText, `${count === 1 ? "1 gateway rule or Envoy descriptor names" : `${count} gateway rules and Envoy descriptors name`} it: ${words}. They would match requests with no policy to decide them.`);
    refs.hidden = false;
  };
  call(POLICY, "GetPolicy", { name: p.name }).then((r) => {
    if (r.referenceCount > 0) showRefs(r.referenceCount, r.references);
  }, () => {});
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: "delete-cancel" }, "Cancel");
  const del = h("button", { type: "submit", class: "btn btn-danger", id: "delete-confirm" }, "Delete policy");
  const form = h("form", { method: "dialog" },
    h("h2", { id: "delete-title" }, "Delete policy?"),
    h("p", { id: "delete-desc" },
      "This permanently deletes ", h("strong", { class: "break" }, p.name),
      ` (version ${p.version ?? "?"}). Applications that still name it in Acquire will get not_found.`),
    refs,
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
      await call(POLICY, "DeletePolicy", { name: p.name, version: String(p.version ?? "0"), removeReferences: !refs.hidden && removeBox.checked });
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
