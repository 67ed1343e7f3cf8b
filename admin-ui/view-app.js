// view-app.js - one app's traffic (#/app/NAME, issue 39): which policies it
// uses and how many of its decisions each allowed and denied, over the
// traffic history's ranges (view-traffic.js), every instance summed. The
// app's keys stay on the Apps page (#/apps).
import { append, h } from "./dom.js";
import { icon, pageHead } from "./widgets.js";
import { trafficCard } from "./view-traffic.js";

export function appView(main, { app: name }) {
  document.title = `${name} · app · permitd admin`;
  const ac = new AbortController();
  const card = trafficCard({ app: name }, ac.signal);
  append(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: "#/apps" }, icon("back"), "All apps")),
    pageHead(h("h1", { tabindex: "-1", class: "break" }, `App ${name}`),
      h("p", { class: "page-sub muted" }, "The policies this app's requests named, and what they answered.")),
    h("div", { class: "grid" }, card.el));
  return { dispose: () => ac.abort() };
}
