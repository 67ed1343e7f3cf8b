// view-gateway.js - the Gateway rules page (#/gateway, issue 25): which
// policy, key and permits a request seen by a gateway (nginx auth_request,
// Traefik, Caddy, Envoy ext_authz calling permitd's /v1/forward-auth) is
// limited by. Every rule is a row, in the order permitd evaluates them;
// every rule that matches a request applies, and all must allow.
//
// Editors create, edit and delete rules in a dialog; the server checks each
// field (GatewayService answers "host: ...", "path_prefix: ...") and its
// message is shown at the field it names, as the policy form does. Edits
// send the version they started from: a rule changed meanwhile is reported,
// not overwritten. Viewers see the same table without the controls.
import { isAbort } from "./api.js";
import { confirmAction } from "./appdialogs.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { brokenBadge, rowDialog } from "./rowdialog.js";
import { call, isEditor } from "./session.js";
import { emptyState, errorState, icon, loadingState, pageHead } from "./widgets.js";

const GATEWAY = "GatewayService";

// The form's fields: the proto's field name (as the server's messages
// start), the JSON name, and how each is shown.
const FIELDS = [
  { key: "position", json: "position", label: "Position", hint: "Rules are evaluated and listed by position (ties: oldest first).", type: "number" },
  { key: "host", json: "host", label: "Host (optional)", hint: "The original request's host, exactly, without a port. Empty: any host." },
  { key: "path_prefix", json: "pathPrefix", label: "Path prefix", hint: "The original path starts with it. \"/\" matches every path; end it with \"/\" for a whole segment." },
  { key: "method", json: "method", label: "Method (optional)", hint: "GET, POST, … in capitals. Empty: any method." },
  { key: "policy", json: "policy", label: "Policy", hint: "The policy that decides (one that exists); it must list the gateway's app.", policies: true },
  { key: "key_source", json: "keySource", label: "Key", select: [["client", "the client's address"], ["header", "a request header"], ["none", "none: one bucket for all"]] },
  { key: "key_header", json: "keyHeader", label: "Header", hint: "The header whose value is the key, e.g. X-Api-Key or X-Tenant." },
  { key: "hash_key", json: "hashKey", label: "Key stored as", select: [["false", "the value itself"], ["true", "its SHA-256 (h:…): no raw value in Redis"]], hint: "Hash a key that is a secret, such as an API key in a header." },
  { key: "permits", json: "permits", label: "Permits per request", type: "number" },
  { key: "description", json: "description", label: "Description (optional)" },
];

const keyText = (r) => (r.keySource === "header" ? `header ${r.keyHeader}` : r.keySource === "none" ? "none (shared)" : "client address") +
  (r.hashKey && r.keySource !== "none" ? ", hashed" : "");

// The rule's dialog (rowdialog.js): new (rule null) or an edit of rule.
// done(saved).
function ruleDialog({ rule, done }) {
  rowDialog({
    id: "rule-dialog", prefix: "r", saveId: "rule-save",
    title: rule ? `Edit rule ${rule.id}` : "New gateway rule",
    saveLabel: rule ? "Save rule" : "Create rule",
    fields: FIELDS,
    values: rule || { position: "0", pathPrefix: "/", keySource: "client", permits: "1" },
    setup(fields) {
      const headerWrap = fields.key_header.wrap;
      const showHeader = () => { headerWrap.hidden = fields.key_source.control.value !== "header"; };
      fields.key_source.control.addEventListener("change", showHeader);
      showHeader();
      if (fields.hash_key.control.value === "") fields.hash_key.control.value = "false";
    },
    check(body, fields) {
      if (body.keySource !== "header") body.keyHeader = "";
      body.hashKey = body.hashKey === "true";
      if (!/^-?\d+$/.test(body.position)) {
        fields.position.error("Position: a whole number.");
        fields.position.control.focus();
        return false;
      }
      body.position = Number(body.position);
      if (!/^\d+$/.test(body.permits)) {
        fields.permits.error("Permits per request: a whole number, at least 1.");
        fields.permits.control.focus();
        return false;
      }
      if (rule) Object.assign(body, { id: rule.id, version: rule.version });
      return true;
    },
    async save(body) {
      await call(GATEWAY, rule ? "UpdateGatewayRule" : "CreateGatewayRule", { rule: body });
      return rule ? `Saved rule ${rule.id}.` : "Created the rule.";
    },
    done,
    focus: rule ? "path_prefix" : "policy",
  });
}

export function gatewayView(main) {
  document.title = "Gateway rules · permitd admin";
  const ac = new AbortController();
  const editor = isEditor();
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const newRule = editor && h("button", { type: "button", class: "btn btn-primary", id: "new-rule" }, icon("plus"), "New rule");
  const box = h("div", { id: "rules" }, loadingState("Loading gateway rules…"));
  const intro = h("p", { class: "policy-desc" },
    "Gateways ask permitd's /v1/forward-auth about each request; every rule that matches it applies, and all must allow.");
  append(main, pageHead(h("h1", { tabindex: "-1" }, "Gateway rules"), sub, newRule), intro, box);

  const rowOf = (id) => box.querySelector(`tr[data-rule="${id}"]`);
  if (newRule) newRule.addEventListener("click", () => ruleDialog({ rule: null, done: (ok) => (ok ? load(() => box.querySelector("tbody tr:last-child .edit-rule") || newRule) : newRule.focus()) }));

  function ruleRow(r) {
    const any = (v) => (v ? v : h("span", { class: "muted" }, "any"));
    return h("tr", { dataset: { rule: String(r.id) } },
      h("td", { "data-label": "Position" }, String(r.position || 0)),
      h("td", { "data-label": "Host" }, any(r.host)),
      h("td", { "data-label": "Path prefix" }, h("code", {}, r.pathPrefix || "/")),
      h("td", { "data-label": "Method" }, any(r.method)),
      h("td", { "data-label": "Policy" }, h("a", { href: `#/policy/${encodeURIComponent(r.policy)}` }, r.policy),
        r.policyMissing && [" ", brokenBadge(r.policy)]),
      h("td", { "data-label": "Key" }, keyText(r)),
      h("td", { "data-label": "Permits", class: "num" }, fmt.formatNumber(Number(r.permits || 1), 0)),
      h("td", { "data-label": "Description" }, r.description || ""),
      editor && h("td", { class: "cell-actions" },
        h("button", {
          type: "button", class: "btn btn-small edit-rule", "aria-label": `Edit rule ${r.id} (${r.pathPrefix})`,
          onclick: () => ruleDialog({ rule: r, done: (ok) => (ok ? load(() => rowOf(r.id)?.querySelector(".edit-rule")) : rowOf(r.id)?.querySelector(".edit-rule")?.focus()) }),
        }, "Edit"),
        h("button", {
          type: "button", class: "btn btn-small btn-danger-quiet delete-rule", "aria-label": `Delete rule ${r.id} (${r.pathPrefix})`,
          onclick: () => confirmAction({
            id: "delete-rule", title: `Delete rule ${r.id}?`,
            text: `Requests to ${r.host || "any host"}${r.pathPrefix} are no longer limited by ${r.policy} through gateways, on every instance within moments.`,
            confirmLabel: "Delete rule", busyLabel: "Deleting…",
            run: async () => {
              await call(GATEWAY, "DeleteGatewayRule", { id: r.id, version: r.version }, ac.signal);
              toast(`Deleted rule ${r.id}.`);
            },
            done: (ok) => (ok ? load(() => newRule || main.querySelector("h1")) : rowOf(r.id)?.querySelector(".delete-rule")?.focus()),
          }),
        }, icon("trash"), h("span", {}, "Delete"))));
  }

  async function load(where) {
    let r;
    try {
      r = await call(GATEWAY, "ListGatewayRules", {}, ac.signal);
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      setText(sub, "Could not load gateway rules");
      replace(box, errorState(`Could not load gateway rules: ${describeError(err)}`, () => {
        replace(box, loadingState("Loading gateway rules…"));
        load(where);
      }));
      return;
    }
    if (ac.signal.aborted) return;
    const rules = r.rules || [];
    setText(sub, rules.length === 1 ? "1 rule" : `${fmt.formatNumber(rules.length, 0)} rules`);
    if (rules.length === 0) {
      replace(box, emptyState("No gateway rules yet",
        editor ? "Without a rule, forward-auth allows every request." : "Without a rule, forward-auth allows every request; an editor can add one."));
    } else {
      replace(box, h("div", { class: "table-scroll" }, h("table", { class: "keys rules" },
        h("caption", { class: "sr-only" }, "Gateway rules, in evaluation order"),
        h("thead", {}, h("tr", {}, ["Position", "Host", "Path prefix", "Method", "Policy", "Key", "Permits", "Description"].map((t) => h("th", { scope: "col" }, t)),
          editor && h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
        h("tbody", {}, rules.map(ruleRow)))));
    }
    where?.()?.focus();
  }
  load();
  return { dispose: () => ac.abort() };
}
