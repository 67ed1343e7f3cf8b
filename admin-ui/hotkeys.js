// hotkeys.js - the detail page's hot keys (issue 23): the keys of a policy
// most allowed and most denied over the last minute or two, summed over
// every permitd instance (HotKeyService/GetHotKeys), each with its bucket's
// level now and, for editors, a reset (PolicyService/ResetBucket). Keys are
// user data: the server gives them to signed-in users only.
import { confirmReset } from "./dialogs.js";
import { h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { DETAIL_POLL_MS, poll } from "./poll.js";
import { policyHref } from "./router.js";
import { POLICY, call } from "./session.js";
import { errorState, loadingState } from "./widgets.js";

const HOT = "HotKeyService";

// onInspect(key): shows the key in the bucket inspector (each key is a link
// to it, issue 40); onOverride(key): opens a new override of the key
// (editors, issue 37).
export function hotKeysCard(name, editor, signal, onInspect, onOverride) {
  const status = h("p", { class: "small muted", id: "hot-status" });
  const done = h("p", { class: "small", id: "hot-done", "aria-live": "polite" });
  const body = h("div", { class: "hot-lists" }, loadingState("Loading hot keys…"));
  let last = null;

  function level(k) {
    if (k.levelKnown !== true) return h("span", { class: "muted" }, "unknown");
    return `${fmt.formatNumber(Number(k.remaining ?? 0), 0)} / ${fmt.formatNumber(Number(k.limit ?? 0), 0)} left`;
  }

  function list(id, title, what, keys) {
    if (keys.length === 0) {
      return h("section", { class: "hot-list", id, "aria-label": title },
        h("h3", { class: "inspect-sub" }, title), h("p", { class: "small muted" }, `No key ${what} in the last minutes.`));
    }
    return h("section", { class: "hot-list", id },
      h("h3", { class: "inspect-sub", id: `${id}-h` }, title),
      h("table", { class: "hot-table", "aria-labelledby": `${id}-h` },
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Key"), h("th", { scope: "col", class: "num" }, what[0].toUpperCase() + what.slice(1)),
          h("th", { scope: "col" }, "Bucket now"), editor ? h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")) : null)),
        h("tbody", {}, keys.map((k) => h("tr", { dataset: { key: k.key } },
          h("td", { class: "break" }, h("a", {
            href: policyHref(name), class: "hot-key", title: `Inspect the bucket of ${k.key}`,
            onclick: (e) => {
              e.preventDefault();
              onInspect(k.key);
            },
          }, h("code", {}, k.key))),
          h("td", { class: "num" }, fmt.formatNumber(Number(k.count ?? 0), 0)),
          h("td", {}, level(k)),
          editor ? h("td", { class: "hot-actions" }, h("button", {
            type: "button", class: "btn btn-small", "aria-label": `Reset the bucket of ${k.key}`,
            onclick: (e) => reset(e.currentTarget, k.key),
          }, "Reset"), onOverride && h("button", {
            type: "button", class: "btn btn-small hot-override", "aria-label": `Override the limits of ${k.key}`,
            onclick: () => onOverride(k.key),
          }, "Override")) : null)))));
  }

  function render(r) {
    last = r;
    replace(body,
      list("hot-denied", "Most denied", "denied", r.denied || []),
      list("hot-allowed", "Most allowed", "allowed", r.allowed || []));
    const n = Number(r.instances ?? 0);
    setText(status, n > 0
      ? `Takes of the last ${fmt.formatDuration(Number(r.windowSeconds ?? 120) * 1000)} at most, summed over ${n} permitd instance${n === 1 ? "" : "s"}.`
      : "No instance has counted takes of a key of this policy in the last minutes.");
  }

  // Asks first (dialogs.js: the key and what it holds now), then resets.
  function reset(button, key) {
    confirmReset({
      policy: name, key, action: "Reset",
      load: async () => (await call(POLICY, "GetBucket", { name, key }, signal)).bucket || {},
      reset: () => call(POLICY, "ResetBucket", { name, key }, signal),
      done: () => {
        setText(done, `Reset the bucket of ${key} (${new Date().toLocaleTimeString()}).`);
        hotPoll.now();
        button.focus();
      },
    });
  }

  const hotPoll = poll(async () => {
    const r = await call(HOT, "GetHotKeys", { name, limit: 10 }, signal);
    if (signal.aborted) return;
    render(r);
  }, DETAIL_POLL_MS, signal, (err) => {
    if (err.code === "unauthenticated") return;
    if (!last) replace(body, errorState(`Could not load the hot keys: ${describeError(err)}`));
    else setText(status, `Not updating: ${describeError(err)}`);
  });

  return { el: h("div", {}, status, done, body) };
}
