// view-envoy.js - the Envoy descriptors page (#/envoy, issue 25): which
// policy, and which bucket key, a descriptor that Envoy's ratelimit filter
// sends to permitd's ShouldRateLimit (the gRPC listener) is limited by. The
// rows are EnvoyDescriptorService's (proto/permit/v1/envoy.proto, MySQL
// table envoy_descriptors, migration 0011), listed by domain, then
// descriptor, as the server keeps them.
//
// A page of its own beside "Gateway rules", not a second section of it: the
// two are different doors (HTTP forward-auth rules matched on host, path
// and method, in order, all applying; Envoy descriptors matched on their
// entries, the most specific row winning), configured in different places
// of a gateway's config, and an operator who runs one of them has nothing
// to read in the other. They share the look and the dialog (rowdialog.js).
//
// A row is named by its domain and descriptor: an edit keeps both (they are
// read-only in the dialog; to move a row, create the new one and delete the
// old) and sends the version it started from, so a row changed meanwhile
// is reported, not overwritten. The server's Put with version 0 would
// replace a row of the same domain and descriptor, so the dialog refuses
// to create one the list already holds. Viewers see the table without the
// controls.
import { isAbort } from "./api.js";
import { confirmAction } from "./appdialogs.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError, toast } from "./notices.js";
import { brokenBadge, policyNames, rowDialog } from "./rowdialog.js";
import { call, isEditor } from "./session.js";
import { emptyState, errorState, icon, loadingState, pageHead } from "./widgets.js";

const ENVOY = "EnvoyDescriptorService";

const FIELDS = [
  { key: "domain", json: "domain", label: "Domain", hint: "The domain of Envoy's ratelimit filter (its domain: setting); every request it asks about carries it." },
  { key: "descriptor", json: "descriptor", label: "Descriptor entries", hint: "The entries of one descriptor, in the order Envoy's actions produce them, comma-separated: key for any value, key=value for that value only. E.g. remote_address, or generic_key=api,user_id." },
  { key: "policy", json: "policy", label: "Policy", hint: "The policy every matching descriptor draws from (hits_addend permits a request; one that exists); it must list Envoy's app.", policies: true },
  { key: "key_entry", json: "keyEntry", label: "Key entry (optional)", hint: "The entry whose value is the bucket key, e.g. user_id: a bucket per user. Empty: one bucket shared by every matching descriptor." },
  { key: "description", json: "description", label: "Description (optional)" },
];

// "generic_key=api,user_id" → [["generic_key", "api"], ["user_id", null]]
const entriesOf = (descriptor) => descriptor.split(",").map((e) => {
  const i = e.indexOf("=");
  return i < 0 ? [e, null] : [e.slice(0, i), e.slice(i + 1)];
});

// The row in words: what Envoy's descriptor becomes.
function inWords(d) {
  const entries = entriesOf(d.descriptor).map(([k, v]) => (v === null ? `${k} = any value` : `${k} = "${v}"`));
  const bucket = d.keyEntry ? `one bucket per value of ${d.keyEntry}` : "one bucket shared by all of them";
  return `A descriptor of domain ${d.domain} with exactly (${entries.join(", ")}) takes its hits from policy ${d.policy}: ${bucket}.`;
}

function entryChips(descriptor) {
  return h("span", { class: "chips" }, entriesOf(descriptor).map(([k, v]) => (v === null
    ? h("span", { class: "chip", title: "any value" }, k)
    : h("span", { class: "chip", title: "this value only" }, `${k}=${v}`))));
}

// The row's dialog: new (d null) or an edit of d; rows: the list shown, to
// refuse a second row of one domain and descriptor. done(the row saved, or
// null).
function descriptorDialog({ d, rows, done }) {
  const name = d && `${d.domain} ${d.descriptor}`;
  let saved = null;
  rowDialog({
    id: "envoy-dialog", prefix: "e", saveId: "envoy-save",
    title: d ? `Edit descriptor ${name}` : "New Envoy descriptor",
    saveLabel: d ? "Save descriptor" : "Create descriptor",
    fields: d ? FIELDS.map((f) => (f.key === "domain" || f.key === "descriptor" ? { ...f, readonly: true } : f)) : FIELDS,
    values: d || { domain: rows[0]?.domain || "" },
    check(body, fields) {
      const same = !d && rows.find((r) => r.domain === body.domain && r.descriptor === body.descriptor);
      if (same) {
        fields.descriptor.error(`Descriptor entries: domain ${same.domain} already maps "${same.descriptor}" (to policy ${same.policy}): edit that row instead.`);
        fields.descriptor.control.focus();
        return false;
      }
      body.version = d ? d.version : "0";
      return true;
    },
    async save(body) {
      saved = (await call(ENVOY, "PutEnvoyDescriptor", { descriptor: body })).descriptor || body;
      return d ? `Saved descriptor ${name}.` : `Created descriptor ${body.domain} ${body.descriptor}.`;
    },
    done: (ok) => done?.(ok ? saved : null),
    focus: d ? "policy" : "domain",
  });
}

export function envoyView(main) {
  document.title = "Envoy descriptors · permitd admin";
  const ac = new AbortController();
  const editor = isEditor();
  let rows = [];
  let known = null;               // every policy's name (issue 40); null: not known
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const newRow = editor && h("button", { type: "button", class: "btn btn-primary", id: "new-descriptor" }, icon("plus"), "New descriptor");
  const box = h("div", { id: "descriptors" }, loadingState("Loading Envoy descriptors…"));
  const intro = h("div", { class: "policy-desc" },
    h("p", {}, "Envoy's ratelimit filter asks permitd's ShouldRateLimit (the gRPC listener) about each request, with the filter's domain and the descriptors its route's rate_limits actions build: an action list of {remote_address: {}} sends the descriptor (remote_address, the client's IP); {generic_key: {descriptor_value: api}} then {request_headers: {header_name: x-user-id, descriptor_key: user_id}} sends (generic_key api, user_id the header's value)."),
    h("p", {}, "A row below turns such a descriptor into a permitd decision: a descriptor with exactly its entries, in its order, takes hits_addend permits (1 by default) from the row's policy, in the bucket of its key entry's value. Of several rows that match, the one pinning the most values wins. A descriptor no row matches is answered OK."));
  append(main, pageHead(h("h1", { tabindex: "-1" }, "Envoy descriptors"), sub, newRow), intro, box);

  const rowOf = (d) => [...box.querySelectorAll("tbody tr")].find((tr) => tr.dataset.domain === d.domain && tr.dataset.descriptor === d.descriptor);
  if (newRow) newRow.addEventListener("click", () => descriptorDialog({
    d: null, rows,
    done: (saved) => (saved ? load(() => rowOf(saved)?.querySelector(".edit-descriptor") || newRow) : newRow.focus()),
  }));

  function descriptorRow(d) {
    const name = `${d.domain} ${d.descriptor}`;
    return h("tr", { dataset: { domain: d.domain, descriptor: d.descriptor } },
      h("td", { "data-label": "Domain" }, d.domain),
      h("td", { "data-label": "Descriptor" }, entryChips(d.descriptor)),
      h("td", { "data-label": "Policy" }, h("a", { href: `#/policy/${encodeURIComponent(d.policy)}` }, d.policy),
        (d.policyMissing || (known && !known.has(d.policy))) && [" ", brokenBadge(d.policy)]),
      h("td", { "data-label": "Key" }, d.keyEntry ? ["value of ", h("code", {}, d.keyEntry)] : "none (shared)"),
      h("td", { "data-label": "In words", class: "in-words" }, inWords(d), d.description ? h("span", { class: "muted" }, ` ${d.description}`) : ""),
      editor && h("td", { class: "cell-actions" },
        h("button", {
          type: "button", class: "btn btn-small edit-descriptor", "aria-label": `Edit descriptor ${name}`,
          onclick: () => descriptorDialog({
            d, rows,
            done: (ok) => (ok ? load(() => rowOf(d)?.querySelector(".edit-descriptor")) : rowOf(d)?.querySelector(".edit-descriptor")?.focus()),
          }),
        }, "Edit"),
        h("button", {
          type: "button", class: "btn btn-small btn-danger-quiet delete-descriptor", "aria-label": `Delete descriptor ${name}`,
          onclick: () => confirmAction({
            id: "delete-descriptor", title: `Delete descriptor ${d.descriptor}?`,
            text: `Envoy's descriptors (${d.descriptor}) of domain ${d.domain} are no longer limited by ${d.policy}: ShouldRateLimit answers them OK, on every instance within a sync interval.`,
            confirmLabel: "Delete descriptor", busyLabel: "Deleting…",
            run: async () => {
              await call(ENVOY, "DeleteEnvoyDescriptor", { domain: d.domain, descriptor: d.descriptor }, ac.signal);
              toast(`Deleted descriptor ${name}.`);
            },
            done: (ok) => (ok ? load(() => newRow || main.querySelector("h1")) : rowOf(d)?.querySelector(".delete-descriptor")?.focus()),
          }),
        }, icon("trash"), h("span", {}, "Delete"))));
  }

  async function load(where) {
    let r;
    try {
      r = await call(ENVOY, "ListEnvoyDescriptors", {}, ac.signal);
      // The policies, to flag a row whose policy is gone (issue 40); the
      // table is shown without the flags if they cannot be listed.
      known = await policyNames(ac.signal).then((n) => new Set(n), (e) => (isAbort(e) ? Promise.reject(e) : null));
    } catch (err) {
      if (isAbort(err) || err.code === "unauthenticated") return;
      setText(sub, "Could not load Envoy descriptors");
      replace(box, errorState(`Could not load Envoy descriptors: ${describeError(err)}`, () => {
        replace(box, loadingState("Loading Envoy descriptors…"));
        load(where);
      }));
      return;
    }
    if (ac.signal.aborted) return;
    rows = r.descriptors || [];
    const domains = new Set(rows.map((d) => d.domain)).size;
    setText(sub, `${rows.length === 1 ? "1 descriptor" : `${fmt.formatNumber(rows.length, 0)} descriptors`}${rows.length ? `, ${domains === 1 ? "1 domain" : `${domains} domains`}` : ""}`);
    if (rows.length === 0) {
      replace(box, emptyState("No Envoy descriptors yet",
        editor ? "Without a row, ShouldRateLimit answers every descriptor OK." : "Without a row, ShouldRateLimit answers every descriptor OK; an editor can add one."));
    } else {
      replace(box, h("div", { class: "table-scroll" }, h("table", { class: "keys rules" },
        h("caption", { class: "sr-only" }, "Envoy descriptor mappings, by domain and descriptor"),
        h("thead", {}, h("tr", {}, ["Domain", "Descriptor", "Policy", "Key", "In words"].map((t) => h("th", { scope: "col" }, t)),
          editor && h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
        h("tbody", {}, rows.map(descriptorRow)))));
    }
    where?.()?.focus();
  }
  load();
  return { dispose: () => ac.abort() };
}
