// dialogs.js - the modal dialogs that confirm deleting a policy and
// resetting a bucket (a native <dialog>: focus is kept inside and Escape
// closes it), shared by the policies table, the detail page, the hot keys
// and the bucket inspector. A delete lists what names the policy (gateway
// rules, Envoy descriptors, "N overrides": GetPolicy's references) and the calls that
// named it in the last 5 minutes (this instance's GetPolicyStats); the
// server refuses the delete while any of them names it, unless
// the box that deletes them with it is ticked.
import { isAbort } from "./api.js";
import { h, setText } from "./dom.js";
import { describeError, toast } from "./notices.js";
import { POLICY, call } from "./session.js";

export function confirmDelete(p, onDeleted) {
  const refsText = h("p", { id: "delete-refs-text" });
  const removeBox = h("input", { type: "checkbox", id: "delete-refs-remove" });
  const refs = h("div", { class: "delete-refs", hidden: true }, refsText,
    h("label", { for: "delete-refs-remove" }, removeBox, " Also delete them (audited)"));
  const showRefs = (count, words) => {
    setText(refsText, `${count === 1 ? "1 reference names" : `${count} references name`} it: ${words}. Rules and descriptors would match requests with no policy to decide them; overrides would come back with a policy made again under this name.`);
    refs.hidden = false;
  };
  call(POLICY, "GetPolicy", { name: p.name }).then((r) => {
    if (r.referenceCount > 0) showRefs(r.referenceCount, r.references);
  }, () => {});
  // Recent calls: what would start getting not_found. Said only when this
  // instance has figures (known); "0 calls" is a measurement too.
  const calls = h("p", { id: "delete-calls", hidden: true });
  call(POLICY, "GetPolicyStats", { name: p.name, seconds: 300 }).then((r) => {
    if (!r.known) return;
    const sum = (a) => (a || []).reduce((t, x) => t + Number(x), 0);
    const n = sum(r.allowed) + sum(r.denied) + sum(r.shadowDenied);
    setText(calls, `${n.toLocaleString("en")} ${n === 1 ? "call" : "calls"} named it in the last 5 minutes (this instance).`);
    calls.hidden = false;
  }, () => {});
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const cancel = h("button", { type: "button", class: "btn", id: "delete-cancel" }, "Cancel");
  const del = h("button", { type: "submit", class: "btn btn-danger", id: "delete-confirm" }, "Delete policy");
  const form = h("form", { method: "dialog" },
    h("h2", { id: "delete-title" }, "Delete policy?"),
    h("p", { id: "delete-desc" },
      "This permanently deletes ", h("strong", { class: "break" }, p.name),
      ` (version ${p.version ?? "?"}). Applications that still name it in Acquire will get not_found.`),
    calls,
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

// Asks before a bucket reset (ResetBucket gives the key its whole limit
// back, and is audited): names the key and what its bucket holds now, as
// GetBucket reads it when the dialog opens. o: { policy, key ("" for the
// shared bucket), action (the button's words), load() -> the bucket,
// reset() -> a promise, done(result) after it }. Cancel or Escape calls
// nothing.
export function confirmReset(o) {
  const who = o.key === "" ? `The shared bucket of ${o.policy}` : o.key;
  const msg = h("p", { class: "form-error", role: "alert", hidden: true });
  const holds = h("p", { id: "reset-holds" }, "Reading the bucket…");
  const cancel = h("button", { type: "button", class: "btn", id: "reset-cancel" }, "Cancel");
  const go = h("button", { type: "submit", class: "btn btn-danger", id: "reset-confirm" }, o.action);
  const form = h("form", { method: "dialog" },
    h("h2", { id: "reset-title" }, o.key === "" ? "Reset the shared bucket?" : "Reset the bucket of ",
      o.key === "" ? null : h("code", { class: "break" }, o.key), o.key === "" ? null : "?"),
    h("div", { id: "reset-desc" }, holds,
      h("p", { class: "small muted" }, "The reset is recorded in the audit with the bucket as it was.")),
    msg,
    h("div", { class: "dialog-actions" }, cancel, go));
  const dlg = h("dialog", { class: "dialog", id: "reset-dialog", "aria-labelledby": "reset-title", "aria-describedby": "reset-desc" }, form);
  dlg.addEventListener("close", () => dlg.remove());
  cancel.addEventListener("click", () => dlg.close());
  o.load().then((b) => {
    const limit = Number(b?.limit ?? 0);
    setText(holds, `${who} holds ${Number(b?.remaining ?? 0)} of ${limit}; reset gives back ${limit}.`);
  }, (err) => setText(holds, `${who}: its bucket could not be read (${describeError(err)}).`));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    msg.hidden = true;
    go.disabled = true;
    try {
      const r = await o.reset();
      dlg.close();
      o.done(r);
    } catch (err) {
      go.disabled = false;
      if (err.code === "unauthenticated" || isAbort(err)) return;
      setText(msg, `Could not reset: ${describeError(err)}`);
      msg.hidden = false;
    }
  });
  document.body.append(dlg);
  dlg.showModal();
  cancel.focus();
}
