// End-to-end test of the admin UI's fleet pages (issue 23, "Fleet-wide
// traffic", "Instances and health") in real headless Chromium, against two
// permitd instances on one MySQL database and one Redis prefix, and a third
// whose Redis does not answer (a port nothing listens on).
//
//   - the Instances page (nav link) lists both instances with their fields
//     and marks the one serving the page; one stopped leaves it;
//   - the policy page's chart sums both instances' Acquires, at each range
//     of the picker (5 min, 1 hour, 1 day), with the per-instance table on
//     demand; the list's traffic column is the fleet's;
//   - while Redis does not answer, the list shows a banner and "unknown"
//     gauges (not "0 / N"), and the chart says the traffic is unknown;
//   - a viewer sees the same pages without the editors' controls.
// Every state is checked with axe-core in both colour schemes.
//
// Environment: as ui.test.mjs (run through tests/e2e/ui/run.sh fleet.test.mjs
// under ctest: e2e_fleet_ui).
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { chromium } from "playwright-core";

import { CHROMIUM, CHROMIUM_ARGS, SHOTS, checkA11y, freePort, harness, mariadb, pageRpc } from "./harness.mjs";

// Each instance has 8 s to exit on SIGTERM.
const T = harness("fleetui", { stopGraceMs: 8000 });
const { step, watch } = T;
const DB = T.db;
const EDITOR = { name: "carol", password: crypto.randomBytes(12).toString("hex"), role: "editor" };
const VIEWER = { name: "dave", password: crypto.randomBytes(12).toString("hex"), role: "viewer" };
const POLICY = "fleet-e2e";
const APP = "fleet-app";
// Every instance's flags beyond the harness's: a short heartbeat TTL (a
// stopped instance leaves the page soon) and a short Redis timeout.
// The list's traffic column is the traffic history's (issue 39): flushed
// every second here.
const FLEET_ARGS = ["--fleet-heartbeat-ttl", "5", "--redis-timeout-ms", "300", "--traffic-flush-ms", "1000"];

async function acquire(srv, body = {}) {
  const res = await fetch(`http://127.0.0.1:${srv.apiPort}/permit.v1.RateLimitService/Acquire`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ bucket: POLICY, app: APP, ...body }),
  });
  const json = await res.json();
  assert.equal(res.status, 200, `Acquire answered ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const login = (page, srv, user) => T.login(page, user, srv);
const stopPermitd = (srv) => T.stopPermitd(srv);
const instanceRow = (page, srv) => page.locator("#instances tbody tr").filter({ hasText: `127.0.0.1:${srv.apiPort}` });
const total = (page, id) => page.evaluate((i) => Number(document.querySelector(`#${i}`)?.textContent.replace(/,/g, "") ?? -1), id);

describe("the admin UI's fleet pages in headless Chromium", () => {
  let browser;
  let a;
  let b;
  let down;
  let page;

  before(async () => {
    T.setUp([EDITOR, VIEWER]);
    a = await T.startPermitd(FLEET_ARGS);
    b = await T.startPermitd(FLEET_ARGS);
    // Redis "down": a port nothing listens on.
    down = await T.startPermitd(FLEET_ARGS, { redisUrl: `redis://127.0.0.1:${await freePort()}` });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    page = watch(await ctx.newPage(), "carol");
    T.currentPage = page;
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await T.tearDown();
    assert.deepEqual(T.pageErrors, [], "no script errors on any page");
  });

  step("the Instances page lists both instances, this one marked", async () => {
    await login(page, a, EDITOR);
    await page.getByRole("link", { name: "Instances" }).click();
    await page.getByRole("heading", { name: "Instances", level: 1 }).waitFor();
    await instanceRow(page, a).waitFor();
    await instanceRow(page, b).waitFor();
    const mine = await instanceRow(page, a).locator("td").allInnerTexts();
    const other = await instanceRow(page, b).locator("td").allInnerTexts();
    assert.match(mine[0], /This one/, mine.join(" | "));
    assert.doesNotMatch(other[0], /This one/, other.join(" | "));
    for (const cells of [mine, other]) {
      assert.match(cells[1], new RegExp(`admin 127\\.0\\.0\\.1:\\d+`), cells.join(" | "));
      assert.match(cells[2], /\d+\.\d+/, `version: ${cells.join(" | ")}`);
      assert.match(cells[7], /^OK$/, `redis: ${cells.join(" | ")}`);
      assert.match(cells[8], /^OK$/, `mysql: ${cells.join(" | ")}`);
      assert.match(cells[9], /^\d+ \/ [\d,]+$/, `connections: ${cells.join(" | ")}`);
    }
    assert.equal(await page.locator("#nav-instances").getAttribute("aria-current"), "page");
    assert.match(await page.locator("#skipped-list").innerText(), /^None: every row of MySQL is in use\./);
    // A row the sync skips (a name that is not valid) is listed with why.
    mariadb(`INSERT INTO ${DB}.policies (name, max_permits, rate) VALUES ('fleet bad', 1, 1)`);
    await page.locator("#skipped-list li").filter({ hasText: "fleet bad" }).waitFor({ timeout: 10_000 });
    mariadb(`DELETE FROM ${DB}.policies WHERE name = 'fleet bad'`);
    await checkA11y(page, "instances");
    await page.screenshot({ path: path.join(SHOTS, "fleet-01-instances.png"), fullPage: true });
  });

  step("the policy page charts the fleet's totals at every range, per instance on demand", async () => {
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: POLICY, apps: ["*"], maxPermits: "100", rate: "1", failureMode: "closed", enabled: true },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    // Both instances hold it (the write-through reached Redis; b reloads).
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`http://127.0.0.1:${b.apiPort}/permit.v1.RateLimitService/Peek`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ bucket: POLICY, app: APP }),
      });
      await res.arrayBuffer();
      if (res.status === 200) break;
      await sleep(100);
    }
    for (let i = 0; i < 3; i++) assert.equal((await acquire(a)).allowed, true);
    for (let i = 0; i < 2; i++) assert.equal((await acquire(b)).allowed, true);
    await page.goto(`http://127.0.0.1:${a.adminPort}/#/policy/${POLICY}`);
    await page.getByRole("heading", { name: POLICY, level: 1 }).waitFor();
    await page.waitForFunction(() => document.querySelector("#total-allowed")?.textContent === "5", null, { timeout: 10_000 });
    assert.match(await page.locator("#chart-scope").innerText(), /every permitd instance/);
    assert.match(await page.locator("#traffic-chart svg").getAttribute("aria-label"), /^Last 5 min: 5 allowed, 0 denied/);
    await checkA11y(page, "detail, fleet chart");
    for (const [label, words] of [["1 hour", "1 h"], ["1 day", "1 day"]]) {
      const button = page.getByRole("group", { name: "Chart range" }).getByRole("button", { name: label });
      await button.click();
      assert.equal(await button.getAttribute("aria-pressed"), "true");
      await page.waitForFunction((w) => document.querySelector("#traffic-chart svg")?.getAttribute("aria-label").startsWith(`Last ${w}:`), words);
      assert.equal(await total(page, "total-allowed"), 5, label);
    }
    await page.getByRole("button", { name: "Per instance" }).click();
    assert.equal(await page.locator("#per-instance").getAttribute("aria-pressed"), "true");
    const rows = page.locator("#instance-breakdown tbody tr");
    await page.waitForFunction(() => document.querySelectorAll("#instance-breakdown tbody tr").length === 2);
    const counts = (await Promise.all([0, 1].map(async (i) => (await rows.nth(i).locator("td").allInnerTexts())[1]))).map(Number).sort();
    assert.deepEqual(counts, [2, 3], "each instance's allowed");
    await checkA11y(page, "detail, per instance");
    await page.screenshot({ path: path.join(SHOTS, "fleet-02-chart-per-instance.png"), fullPage: true });
    // The list's column is the fleet's, from the traffic history.
    await page.goto(`http://127.0.0.1:${a.adminPort}/#/policies`);
    await page.waitForFunction((p) => document.querySelector(`tr[data-policy="${p}"] .traffic`)?.textContent === "5", POLICY, { timeout: 60_000 });
  });

  step("while Redis does not answer the list says so and gauges read unknown", async () => {
    const p2 = watch(await page.context().newPage(), "carol on the instance without redis");
    T.currentPage = p2;
    // The session lives in MySQL: the same cookie works on every instance.
    await p2.goto(`http://127.0.0.1:${down.adminPort}/#/policies`);
    const banner = p2.locator("#redis-down");
    await banner.waitFor({ state: "visible" });
    assert.match(await banner.innerText(), /^Redis is not answering: bucket levels are unknown/);
    const row = p2.locator(`tr[data-policy="${POLICY}"]`);
    await row.waitFor();
    const gauge = row.getByRole("meter");
    // The traffic column is MySQL's history: still known.
    await p2.waitForFunction((p) => document.querySelector(`tr[data-policy="${p}"] .traffic`)?.textContent === "5", POLICY);
    assert.equal((await gauge.innerText()).trim(), "unknown");
    assert.doesNotMatch(await row.innerText(), /0 \/ 100/);
    await checkA11y(p2, "policies, redis down");
    await p2.screenshot({ path: path.join(SHOTS, "fleet-03-redis-down.png"), fullPage: true });
    await p2.goto(`http://127.0.0.1:${down.adminPort}/#/policy/${POLICY}`);
    const note = p2.locator("#chart-unavailable");
    await note.waitFor();
    assert.match(await note.innerText(), /^Traffic unknown\./);
    assert.equal(await p2.locator("#traffic-chart svg").count(), 0, "no chart of zeros");
    await checkA11y(p2, "detail, redis down");
    await p2.close();
    T.currentPage = page;
  });

  step("a viewer sees the Instances page and the fleet chart, without editors' controls", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    const vp = watch(await ctx.newPage(), "dave");
    T.currentPage = vp;
    await login(vp, a, VIEWER);
    await vp.getByRole("link", { name: "Instances" }).click();
    await instanceRow(vp, a).waitFor();
    await instanceRow(vp, b).waitFor();
    await checkA11y(vp, "instances, viewer");
    await vp.goto(`http://127.0.0.1:${a.adminPort}/#/policy/${POLICY}`);
    await vp.waitForFunction(() => document.querySelector("#total-allowed")?.textContent === "5", null, { timeout: 10_000 });
    assert.equal(await vp.locator("#edit-policy").count(), 0, "no Edit for a viewer");
    assert.equal(await vp.locator("#per-instance").count(), 1, "the breakdown is for viewers too");
    await checkA11y(vp, "detail, viewer");
    await ctx.close();
    T.currentPage = page;
  });

  step("an instance that stops leaves the Instances page", async () => {
    await page.goto(`http://127.0.0.1:${a.adminPort}/#/instances`);
    await instanceRow(page, b).waitFor();
    await stopPermitd(b);
    assert.equal(b.exited.code, 0, b.output.join(""));
    await instanceRow(page, b).waitFor({ state: "detached", timeout: 8000 });
    await instanceRow(page, a).waitFor();
  });
});
