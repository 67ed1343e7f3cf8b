// scale-ui.mjs - the admin UI at scale, in headless Chromium (issue 22):
// how long the overview (the UI's home, issue 39) takes to fill every card
// after a page load, how long the policy list takes to show its first row,
// and how long a filter keystroke and clearing the filter take. Run by
// tests/bench/scale.py; playwright-core comes from tests/e2e/ui's
// node_modules (its pinned version), the browser is Debian's chromium,
// exactly as the UI's end-to-end test runs them.
//
// Environment: SCALE_ADMIN (http://127.0.0.1:PORT of the admin listener),
// SCALE_USER, SCALE_PASSWORD, SCALE_FILTER (a policy name to filter for),
// PERMITD_CHROMIUM (another Chromium binary); SCALE_OVERRIDES_POLICY (a
// policy with many overrides, issue 37) and SCALE_OVERRIDES_SEARCH (a
// search that leaves a few of them). Prints one JSON line:
//   {"overview_ms":..,"overview_series_rpc_ms":..,"overview_totals_rpc_ms":..,
//    "first_paint_ms":..,"rows_first":..,"all_rows_ms":..,"rows":..,
//    "filter_ms":..,"clear_ms":..,"refresh_bytes":..,"refresh_rpc_ms":..,
//    "refresh_rpc_bytes":..,"filter_rpc_ms":..,
//    "overrides_first_row_ms":..,"overrides_search_ms":..,"overrides_rpc_ms":..,
//    "overrides_rpc_bytes":..,"overrides_traffic_rpc_ms":..,"overrides_search_rpc_ms":..}
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../e2e/ui/package.json"));
const { chromium } = require("playwright-core");

const ADMIN = process.env.SCALE_ADMIN;
const USER = process.env.SCALE_USER;
const PASSWORD = process.env.SCALE_PASSWORD;
const FILTER = process.env.SCALE_FILTER || "s04567";
const CHROMIUM = process.env.PERMITD_CHROMIUM || "/usr/bin/chromium";
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];

// Visible policy rows, counted in the page.
const visibleRows = () => [...document.querySelectorAll("tr[data-policy]")].filter((r) => !r.hidden && r.offsetParent !== null).length;

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
const out = {};
try {
  const ctx = await browser.newContext();
  const login = await ctx.newPage();
  await login.goto(`${ADMIN}/#/policies`);
  await login.getByLabel("Username").fill(USER);
  await login.getByLabel("Password").fill(PASSWORD);
  await login.getByRole("button", { name: "Sign in" }).click();
  await login.getByRole("heading", { name: "Policies", level: 1 }).waitFor({ timeout: 120_000 });
  await login.close();

  // The overview, the home: navigation until every card has its figures
  // (no loading state left, the instances' health shown); then the
  // server's part of it, the fleet's series and one top list (medians of 5).
  const ov = await ctx.newPage();
  let t0 = Date.now();
  await ov.goto(`${ADMIN}/`);
  await ov.locator("#fleet-allowed").waitFor({ timeout: 120_000 });
  await ov.locator("#health-summary").waitFor({ timeout: 120_000 });
  await ov.waitForFunction(() => !document.querySelector("#main .loading-state"), null, { timeout: 120_000 });
  out.overview_ms = Date.now() - t0;
  const median5 = (svc, body) => ov.evaluate(async ([u, b]) => {
    const ms = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const r = await fetch(u, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b) });
      await r.text();
      ms.push(performance.now() - t);
    }
    ms.sort((x, y) => x - y);
    return Math.round(ms[2] * 10) / 10;
  }, [`/permit.v1.TrafficService/${svc}`, body]);
  out.overview_series_rpc_ms = await median5("GetTrafficSeries", { range: "1h" });
  out.overview_totals_rpc_ms = await median5("GetTrafficTotals", { range: "1h", limit: 10, orderBy: "denied" });
  await ov.close();

  // A fresh page with the session: navigation to the first row shown.
  const page = await ctx.newPage();
  t0 = Date.now();
  await page.goto(`${ADMIN}/#/policies`);
  await page.locator("tr[data-policy]").first().waitFor({ timeout: 120_000 });
  out.first_paint_ms = Date.now() - t0;
  out.rows_first = await page.evaluate(visibleRows);
  // Until the row count stops changing (a list that renders in parts).
  let rows = -1;
  for (;;) {
    const n = await page.evaluate(visibleRows);
    if (n === rows) break;
    rows = n;
    await page.waitForTimeout(300);
  }
  out.all_rows_ms = Date.now() - t0 - 300;
  out.rows = rows;

  // One refresh of the list: the bytes the page downloads in one poll.
  const poll = await page.waitForResponse((r) => r.url().includes("ListPolicies"), { timeout: 60_000 })
    .catch(() => null);
  out.refresh_bytes = poll ? (await poll.body()).length : -1;

  // A filter: the whole name typed at once (one input event), until only
  // the matching row shows; then cleared, until the rows are back.
  const filter = page.locator("#policy-filter");
  t0 = Date.now();
  await filter.fill(FILTER);
  await page.waitForFunction((want) => [...document.querySelectorAll("tr[data-policy]")]
    .filter((r) => !r.hidden && r.offsetParent !== null).length === want, 1,
  { timeout: 120_000, polling: "raf" });
  out.filter_ms = Date.now() - t0;
  t0 = Date.now();
  await filter.fill("");
  await page.waitForFunction((want) => [...document.querySelectorAll("tr[data-policy]")]
    .filter((r) => !r.hidden && r.offsetParent !== null).length >= want, Math.min(rows, 2),
  { timeout: 120_000, polling: "raf" });
  out.clear_ms = Date.now() - t0;

  // The server's part, from the page: a live refresh (the first page with
  // its gauges) and the filtered page, each the median of 5 fetches.
  const timed = async (body) => page.evaluate(async (b) => {
    const ms = [];
    let bytes = 0;
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const r = await fetch("/permit.v1.PolicyService/ListPolicies", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b) });
      bytes = (await r.text()).length;
      ms.push(performance.now() - t);
    }
    ms.sort((x, y) => x - y);
    return { ms: Math.round(ms[2] * 10) / 10, bytes };
  }, body);
  const refresh = await timed({ includeBuckets: true, pageSize: 50 });
  out.refresh_rpc_ms = refresh.ms;
  out.refresh_rpc_bytes = refresh.bytes;
  out.filter_rpc_ms = (await timed({ includeBuckets: true, pageSize: 50, filter: FILTER })).ms;

  // The Overrides tab of a policy with many (issue 37): navigation to its
  // first row, a search keystroke until its rows show, and the server's
  // part of a page, a page by traffic and a search (medians of 5).
  const OVR = process.env.SCALE_OVERRIDES_POLICY;
  if (OVR) {
    const search = process.env.SCALE_OVERRIDES_SEARCH || "u-0500";
    const op = await ctx.newPage();
    t0 = Date.now();
    await op.goto(`${ADMIN}/#/policy/${OVR}`);
    await op.locator("#tab-overrides").click();
    await op.locator("#overrides tr[data-match]").first().waitFor({ timeout: 120_000 });
    out.overrides_first_row_ms = Date.now() - t0;
    t0 = Date.now();
    await op.locator("#override-search").fill(search);
    await op.waitForFunction((s) => [...document.querySelectorAll("#overrides tr[data-match]")].every((r) => r.dataset.match.includes(s)),
      search, { timeout: 120_000, polling: "raf" });
    out.overrides_search_ms = Date.now() - t0;
    const timedOvr = async (body) => op.evaluate(async (b) => {
      const ms = [];
      let bytes = 0;
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        const r = await fetch("/permit.v1.OverrideService/ListOverrides", {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b) });
        bytes = (await r.text()).length;
        ms.push(performance.now() - t);
      }
      ms.sort((x, y) => x - y);
      return { ms: Math.round(ms[2] * 10) / 10, bytes };
    }, body);
    const page1 = await timedOvr({ policy: OVR, pageSize: 50 });
    out.overrides_rpc_ms = page1.ms;
    out.overrides_rpc_bytes = page1.bytes;
    out.overrides_traffic_rpc_ms = (await timedOvr({ policy: OVR, pageSize: 50, sort: "traffic" })).ms;
    out.overrides_search_rpc_ms = (await timedOvr({ policy: OVR, pageSize: 50, search })).ms;
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
