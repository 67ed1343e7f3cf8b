// view-missing.js - the page for an address the router does not know.
import { append, h } from "./dom.js";
import { LIST } from "./router.js";

export function missingView(main) {
  document.title = "Not found · permitd admin";
  append(main, h("h1", { tabindex: "-1" }, "Page not found"),
    h("p", {}, h("a", { href: LIST }, "Back to all policies")));
  return { dispose() {} };
}
