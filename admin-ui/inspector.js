// inspector.js - the detail page's bucket inspector: the live state of the
// bucket of any key of a policy (or of its shared bucket), and "Reset to
// full" for editors.
import { isAbort } from "./api.js";
import { h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { DETAIL_POLL_MS, poll } from "./poll.js";
import { POLICY, call } from "./session.js";
import { errorState, icon, loadingState, makeGauge } from "./widgets.js";

export function bucketInspector(name, editor, signal) {
  const key = h("input", { id: "inspect-key", name: "key", autocomplete: "off", spellcheck: "false", placeholder: "e.g. user-42", "aria-describedby": "inspect-hint" });
  const submit = h("button", { type: "submit", class: "btn" }, "Inspect");
  // The result refreshes every 2 s, so it is not a live region: announce
  // says what was found once per Inspect, status what a reset or an error did.
  const result = h("div", { class: "inspect-result" });
  const announce = h("p", { class: "sr-only", role: "status", id: "inspect-announce" });
  const form = h("form", { class: "inspect-form", novalidate: true },
    h("label", { for: "inspect-key" }, "Key"),
    h("div", { class: "input-row" }, key, submit),
    h("p", { class: "hint", id: "inspect-hint" }, "Each key (a user id, an IP, a tenant) has its own bucket with this policy's limits. Leave it empty for the shared bucket."));
  let ac = null;

  const gauge = makeGauge("Permits available in the inspected bucket", true);
  const tokens = h("dd", { id: "inspect-tokens" });
  const remaining = h("dd", { id: "inspect-remaining" });
  const full = h("dd", { id: "inspect-full" });
  const which = h("p", { class: "inspect-which" });
  const status = h("p", { class: "small muted", role: "status", id: "inspect-status" });
  const reset = editor && h("button", { type: "button", class: "btn btn-small", id: "inspect-reset" }, icon("reset"), "Reset to full");

  function show(b, k) {
    const limit = Number(b.limit ?? 0);
    gauge.set(b, limit);
    replace(which, k === "" ? "Shared bucket of " : "Key ", h("strong", { class: "break" }, k === "" ? name : k));
    setText(tokens, fmt.formatNumber(Number(b.tokens ?? 0), 3));
    setText(remaining, `${fmt.formatNumber(Number(b.remaining ?? 0), 0)} of ${fmt.formatNumber(limit, 0)}`);
    const ms = Number(b.resetAfterMs ?? 0);
    setText(full, ms > 0 ? `in ${fmt.formatDuration(ms)}` : "now (full)");
  }

  function start(k) {
    ac?.abort();
    ac = new AbortController();
    const mine = AbortSignal.any([signal, ac.signal]);
    status.textContent = "";
    announce.textContent = "";
    replace(result, loadingState("Loading bucket…"));
    let shown = false;
    poll(async () => {
      const r = await call(POLICY, "GetBucket", { name, key: k }, mine);
      if (mine.aborted) return;
      if (!shown) {
        shown = true;
        replace(result, which, gauge.el,
          h("dl", { class: "kv" },
            h("dt", {}, "Tokens now"), tokens,
            h("dt", {}, "Whole permits"), remaining,
            h("dt", {}, "Full again"), full),
          reset, status);
        const b = r.bucket || {};
        setText(announce, `${k === "" ? "Shared bucket" : `Key ${k}`}: ${fmt.formatNumber(Number(b.remaining ?? 0), 0)} of ${fmt.formatNumber(Number(b.limit ?? 0), 0)} permits available.`);
      }
      show(r.bucket || {}, k);
    }, DETAIL_POLL_MS, mine, (err) => {
      if (err.code === "unauthenticated") return;
      if (!shown) replace(result, errorState(describeError(err)));
      else setText(status, `Not updating: ${describeError(err)}`);
    });
    if (reset) {
      reset.onclick = async () => {
        reset.disabled = true;
        try {
          const r = await call(POLICY, "ResetBucket", { name, key: k }, mine);
          if (r.bucket) show(r.bucket, k);
          setText(status, `Reset: the bucket is full again (${new Date().toLocaleTimeString()}).`);
        } catch (err) {
          if (!isAbort(err)) setText(status, `Could not reset: ${describeError(err)}`);
        } finally {
          reset.disabled = false;
        }
      };
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    start(key.value);
  });
  return { el: h("div", {}, form, announce, result) };
}
