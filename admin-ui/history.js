// history.js - the detail page's history: one entry per recorded change of
// a policy (who, when, versions), with a table of the fields it changed.
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { badge, emptyState } from "./widgets.js";

export function renderHistory(box, changes) {
  if (!changes.length) {
    replace(box, emptyState("No changes recorded", null));
    return;
  }
  const labels = { create: "Created", update: "Updated", delete: "Deleted" };
  const kinds = { create: "ok", update: "info", delete: "danger" };
  const list = h("ol", { class: "changes" });
  for (const c of changes) {
    const d = fmt.diffChange(c);
    const at = c.changedAt || "";
    const versions = d.fromVersion && d.toVersion ? `v${d.fromVersion} → v${d.toVersion}` : d.toVersion ? `v${d.toVersion}` : "";
    const head = h("div", { class: "change-head" },
      badge(labels[d.action] || d.action, kinds[d.action] || "plain"),
      h("span", {}, "by ", h("strong", { class: "actor" }, c.actor || "unknown")),
      h("time", fmt.timeAttrs(at), fmt.formatTimestamp(at)),
      h("span", { class: "muted small" }, fmt.relativeTime(at)),
      versions && h("span", { class: "muted small version" }, versions));
    let bodyEl;
    if (d.unreadable) {
      bodyEl = h("div", { class: "raw" },
        c.oldValue && h("pre", {}, `before: ${c.oldValue}`),
        c.newValue && h("pre", {}, `after: ${c.newValue}`));
    } else if (!d.rows.length) {
      bodyEl = h("p", { class: "muted small" }, d.action === "update" ? "No visible field changed." : "");
    } else if (d.action === "update") {
      bodyEl = h("table", { class: "diff" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, "Before"), h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Change")), h("th", { scope: "col" }, "After"))),
        h("tbody", {}, d.rows.map((r) => h("tr", {},
          h("th", { scope: "row", dataset: { field: r.field } }, r.label),
          h("td", { class: "old" }, r.old),
          h("td", { class: "arrow", "aria-label": "changed to" }, "→"),
          h("td", { class: "new" }, r.new)))));
    } else {
      const which = d.action === "delete" ? "old" : "new";
      bodyEl = h("table", { class: "diff" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, d.action === "delete" ? "Last value" : "Value"))),
        h("tbody", {}, d.rows.map((r) => h("tr", {}, h("th", { scope: "row", dataset: { field: r.field } }, r.label), h("td", {}, r[which])))));
    }
    list.append(h("li", { class: `change change-${d.action}` }, head, bodyEl));
  }
  replace(box, list);
}
