// app.js - the permitd admin UI's entry point (index.html loads it as an
// ES module; no build step). The UI: login, policies table with live bucket
// gauges, create/edit forms, delete, per-policy detail (live chart, bucket
// inspector, history), the apps and their API keys. Talks to
// permit.v1.PolicyService, permit.v1.AppService and
// permit.v1.AdminAuthService with Connect JSON (see proto/permit/v1/admin.proto).
//
// One module per page and per shared piece, all beside this file (the
// server serves /ui/NAME only, no subfolders):
//   page.js      the fixed elements of index.html
//   api.js       Connect calls        session.js  who is signed in, call()
//   notices.js   banner, toast, error texts
//   poll.js      live data            router.js   #/… → page, focus
//   dom.js       nodes without HTML   widgets.js  shared bits of page
//   format.js    validation and formatting (no DOM; the e2e test imports it)
//   dialogs.js   confirm delete
//   rowdialog.js the create/edit dialog of a gateway rule or an Envoy descriptor
//   view-login.js, view-list.js, view-detail.js (with chart.js,
//   inspector.js, history.js), view-edit.js, view-apps.js, view-gateway.js,
//   view-envoy.js, view-instances.js, view-audit.js, view-users.js (admins),
//   view-missing.js: the pages.
//
// Everything that comes from the server or the user is put into the page as
// text (dom.js builds nodes; no HTML strings anywhere).
import { rpc, RpcError } from "./api.js";
import { replace } from "./dom.js";
import { clearBanner, describeError } from "./notices.js";
import { ui } from "./page.js";
import { startRouter } from "./router.js";
import { AUTH, onSessionExpired } from "./session.js";
import { enterApp, sessionExpired, showLogin, signOut } from "./view-login.js";
import { detailView } from "./view-detail.js";
import { editView } from "./view-edit.js";
import { listView } from "./view-list.js";
import { appsView } from "./view-apps.js";
import { gatewayView } from "./view-gateway.js";
import { envoyView } from "./view-envoy.js";
import { instancesView } from "./view-instances.js";
import { auditView } from "./view-audit.js";
import { usersView } from "./view-users.js";
import { missingView } from "./view-missing.js";
import { overviewView } from "./view-overview.js";
import { appView } from "./view-app.js";
import { errorState, loadingState } from "./widgets.js";

onSessionExpired(sessionExpired);
ui.logout.addEventListener("click", signOut);
ui.bannerClose.addEventListener("click", () => clearBanner());
// The skip link focuses the page rather than following its "#main" (which
// the router would read as an address).
ui.skipLink.addEventListener("click", (e) => {
  e.preventDefault();
  ui.main.focus();
});
startRouter({ list: listView, detail: detailView, edit: editView, apps: appsView, gateway: gatewayView,
              envoy: envoyView, instances: instancesView, audit: auditView, users: usersView,
              missing: missingView, overview: overviewView, app: appView });

// Asks who the session cookie belongs to: the page the address names, or
// the sign-in page; if permitd does not answer, an error with Retry.
async function boot() {
  try {
    const r = await rpc(AUTH, "WhoAmI", {});
    enterApp({ username: r.username || "", role: r.role || "viewer" });
  } catch (err) {
    if (err instanceof RpcError && err.code === "unauthenticated") {
      showLogin();
      return;
    }
    replace(ui.main, errorState(`Cannot start: ${describeError(err)}`, () => {
      replace(ui.main, loadingState("Connecting…"));
      boot();
    }));
  }
}

boot();
