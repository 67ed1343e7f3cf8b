// widgets.js - small pieces of page that several views share: icons, the
// logo, badges, app chips, the bucket gauge, empty/loading/error states and
// the page heading. Each returns a new node (or, for the gauge, a node and
// the methods that update it).
import { h, s, setText } from "./dom.js";
import * as fmt from "./format.js";

export function icon(name) {
  const paths = {
    plus: "M8 3v10M3 8h10",
    back: "M10 3L5 8l5 5",
    edit: "M3 13h2.5L13 5.5 10.5 3 3 10.5V13z",
    trash: "M3 4.5h10M6.5 4.5V3h3v1.5M4.5 4.5l.7 8.5h5.6l.7-8.5",
    reset: "M3 8a5 5 0 1 0 1.5-3.5M3 3v2.5h2.5",
    alert: "M8 2.5l6 11H2l6-11zM8 7v3M8 11.8v.2",
  };
  return s("svg", { class: "icon", viewBox: "0 0 16 16", width: "16", height: "16", "aria-hidden": "true", focusable: "false" },
    s("path", { d: paths[name] }));
}

export function logo() {
  return s("svg", { class: "logo", viewBox: "0 0 24 24", width: "24", height: "24", "aria-hidden": "true", focusable: "false" },
    s("rect", { x: "2", y: "2", width: "20", height: "20", rx: "5", class: "logo-bg" }),
    s("path", { d: "M7 16V9M11 16V6M15 16v-4M19 16v-2", class: "logo-fg" }));
}

export function badge(text, kind, title) {
  return h("span", { class: `badge badge-${kind}`, title }, text);
}

export function appChips(apps) {
  const list = apps && apps.length ? apps : [];
  if (!list.length) return h("span", { class: "muted" }, "none");
  return h("span", { class: "chips" },
    list.map((a) => a === "*"
      ? h("span", { class: "chip chip-any", title: "any application" }, "* any app")
      : h("span", { class: "chip" }, a)));
}

export function statusBadges(p) {
  return h("span", { class: "badges" },
    p.enabled ? badge("Enabled", "ok") : badge("Disabled", "muted", "Acquire answers failed_precondition"),
    p.failureMode === "closed"
      ? badge("fails closed", "plain", "While Redis is unreachable, Acquire answers unavailable")
      : badge(p.failureMode === "open" ? "fails open" : "failure mode unset", "plain",
        "While Redis is unreachable, Acquire allows requests"),
    p.shadow && badge("Shadow mode", "info", "Decided and counted, never refused: see “would have denied”"));
}


// A horizontal meter of what a bucket has left: tokens for a token bucket,
// the whole permits left (remaining) for the windowed algorithms; for
// concurrency, the leases held (issue 40: it filled with the free ones
// while its words counted the held), its colour still by what is free.
export function makeGauge(label, large = false) {
  const named = label;
  const fill = h("span", { class: "gauge-fill" });
  const text = h("span", { class: "gauge-text" }, "—");
  const el = h("div", {
    class: large ? "gauge gauge-lg" : "gauge",
    role: "meter", "aria-label": label,
    "aria-valuemin": "0", "aria-valuemax": "1", "aria-valuenow": "0",
  }, h("span", { class: "gauge-track", "aria-hidden": "true" }, fill), text);
  return {
    el,
    set(bucket, fallbackLimit, algorithm = "token_bucket") {
      if (!bucket) {
        this.unknown();
        return;
      }
      const limit = Number(bucket.limit ?? fallbackLimit ?? 0) || Number(fallbackLimit) || 0;
      const level = fmt.describeBucket(algorithm, { limit, ...bucket }).level;
      const tokens = Math.max(0, Math.min(Number(level) || 0, limit || Infinity));
      const pct = limit > 0 ? tokens / limit : 0;
      const held = algorithm === "concurrency";
      const shown = held ? Math.max(0, limit - tokens) : tokens;
      fill.style.width = `${(limit > 0 ? (shown / limit) * 100 : 0).toFixed(2)}%`;
      el.classList.toggle("low", pct < 0.2);
      el.classList.toggle("mid", pct >= 0.2 && pct < 0.5);
      el.classList.remove("unknown");
      setText(text, held ? `${fmt.formatNumber(shown, 0)} held / ${fmt.formatNumber(limit, 0)}`
        : `${fmt.formatTokens(tokens)} / ${fmt.formatNumber(limit, 0)}`);
      el.setAttribute("aria-label", held ? named.replace(/^Permits available/, "Leases held") : named);
      el.setAttribute("aria-valuemax", String(limit));
      el.setAttribute("aria-valuenow", String(Math.round(shown * 1000) / 1000));
      const reset = Number(bucket.resetAfterMs ?? 0);
      if (algorithm === "token_bucket" || !algorithm) {
        el.setAttribute("aria-valuetext", `${fmt.formatTokens(tokens)} of ${limit} permits available`);
        el.title = reset > 0 ? `full again in ${fmt.formatDuration(reset)}` : "full";
      } else {
        const said = fmt.describeBucket(algorithm, { limit, ...bucket }).summary;
        el.setAttribute("aria-valuetext", said);
        el.title = said;
      }
    },
    unknown(label = "—", why = "bucket state unknown") {
      fill.style.width = "0%";
      el.classList.add("unknown");
      el.classList.remove("low", "mid");
      el.setAttribute("aria-label", named);
      setText(text, label);
      el.setAttribute("aria-valuenow", "0");
      el.setAttribute("aria-valuetext", why);
      el.title = why;
    },
  };
}

export function emptyState(title, text, action) {
  return h("div", { class: "empty-state" },
    h("p", { class: "empty-title" }, title),
    text && h("p", { class: "muted" }, text),
    action);
}

export function loadingState(text) {
  return h("div", { class: "loading-state", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), text);
}

export function errorState(text, retry) {
  return h("div", { class: "error-state", role: "alert" },
    icon("alert"), h("span", {}, text),
    retry && h("button", { type: "button", class: "btn btn-small", onclick: retry }, "Retry"));
}

export function pageHead(title, sub, ...actions) {
  return h("div", { class: "page-head" },
    h("div", { class: "page-title" }, title, sub),
    actions.length ? h("div", { class: "page-actions" }, actions) : null);
}
