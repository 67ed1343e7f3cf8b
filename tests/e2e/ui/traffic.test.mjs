// End-to-end test of the traffic history's pages (issue 39) in real
// headless Chromium, against a permitd that adds its counts to MySQL every
// second (--traffic-flush-ms 1000):
//   - the Overview page (nav link): the fleet's decisions, the policies
//     denying most (count and share), the apps denied most, the shadow
//     policies that would deny, the instances, each a link;
//   - the policy list: each row's allowed and denied and its trend, sorted by
//     the fleet's denials and share denied;
//   - the policy page's traffic history: the unit on screen, time ticks,
//     exact values by keyboard (the chart is a slider: each bucket's counts
//     read back add up to what the instance answered) and on hover, markers
//     at the edit and the shadow switch (from the audit), per-app table;
//   - an app's page (#/app/NAME): the policies it uses.
// Every state is checked with axe-core in both colour schemes.
//
// Environment: as ui.test.mjs (tests/e2e/ui/run.sh traffic.test.mjs under
// ctest: e2e_traffic_ui).
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { chromium } from "playwright-core";

import { CHROMIUM, CHROMIUM_ARGS, SHOTS, checkA11y, harness, pageRpc } from "./harness.mjs";

const T = harness("trafficui");
const { step, watch } = T;
const EDITOR = { name: "carol", password: crypto.randomBytes(12).toString("hex"), role: "editor" };
const POLICY = "history-e2e";

const POLICY2 = "history-e2e-b";

async function acquire(srv, app, bucket = POLICY) {
  const res = await fetch(`http://127.0.0.1:${srv.apiPort}/permit.v1.RateLimitService/Acquire`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ bucket, app }),
  });
  const json = await res.json();
  assert.equal(res.status, 200, `Acquire answered ${res.status} ${JSON.stringify(json)}`);
  return json.allowed === true;
}

// The sums of a GetTrafficSeries answer.
const sums = (s) => Object.fromEntries(["allowed", "denied", "shadowDenied"].map((k) => [k, (s[k] || []).reduce((p, v) => p + Number(v), 0)]));

describe("the traffic history's pages in headless Chromium", () => {
  let browser;
  let a;
  let page;
  const sent = { allowed: 0, denied: 0 };

  before(async () => {
    T.setUp([EDITOR]);
    a = await T.startPermitd(["--traffic-flush-ms", "1000"]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    ctx.setDefaultTimeout(15_000);
    page = watch(await ctx.newPage(), "carol");
    T.currentPage = page;
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await T.tearDown();
    assert.deepEqual(T.pageErrors, [], "no script errors on any page");
  });

  step("traffic, an edit and a shadow switch reach the history", async () => {
    await T.login(page, EDITOR, a);
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: POLICY, apps: ["*"], maxPermits: "3", rate: "0.001", failureMode: "closed", enabled: true },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`http://127.0.0.1:${a.apiPort}/permit.v1.RateLimitService/Peek`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ bucket: POLICY, app: "web" }),
      });
      await res.arrayBuffer();
      if (res.status === 200) break;
      await sleep(100);
    }
    for (const app of ["web", "web", "web", "web", "web", "jobs", "jobs"]) sent[(await acquire(a, app)) ? "allowed" : "denied"]++;
    assert.deepEqual(sent, { allowed: 3, denied: 4 });
    let p = made.json.policy;
    const edited = await pageRpc(page, "PolicyService/UpdatePolicy", { policy: { ...p, description: "edited by the test" } });
    assert.equal(edited.status, 200, JSON.stringify(edited));
    p = edited.json.policy;
    // The switch in a later 10 s bucket of the live chart's hour than the
    // denials (its totals count from the switch's bucket).
    await sleep(10_500);
    const shadowed = await pageRpc(page, "PolicyService/UpdatePolicy", { policy: { ...p, shadow: true } });
    assert.equal(shadowed.status, 200, JSON.stringify(shadowed));
    // In shadow mode the limit only says what it would have done.
    await sleep(300);
    for (let i = 0; i < 2; i++) assert.equal(await acquire(a, "web"), true);
    for (let i = 0; i < 120; i++) {
      const r = await pageRpc(page, "TrafficService/GetTrafficSeries", { policy: POLICY, range: "1h" });
      assert.equal(r.status, 200, JSON.stringify(r));
      const got = sums(r.json);
      if (got.allowed === 3 && got.denied === 4 && got.shadowDenied === 2) return;
      await sleep(500);
    }
    assert.fail("the history never held 3 allowed, 4 denied, 2 shadow-denied");
  });

  step("the overview answers who is being denied, each item a link", async () => {
    await page.getByRole("link", { name: "Overview" }).click();
    await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
    assert.equal(new URL(page.url()).hash, "#/", "the overview is the UI's home");
    assert.equal(await page.locator("#nav-overview").getAttribute("aria-current"), "page");
    const row = page.locator(`#denying-list tr[data-name="${POLICY}"]`);
    await row.waitFor();
    assert.deepEqual((await row.locator("td").allInnerTexts()).map((x) => x.trim()), ["3", "4", "57.1 %"]);
    assert.equal(await row.getByRole("link", { name: POLICY }).getAttribute("href"), `#/policy/${POLICY}`);
    await page.locator(`#denying-share-list tr[data-name="${POLICY}"]`).waitFor();
    const apps = Object.fromEntries(await page.locator("#apps-denied-list tbody tr").evaluateAll((rows) =>
      rows.map((r) => [r.dataset.name, r.querySelectorAll("td")[1].textContent])));
    assert.deepEqual(apps, { web: "2", jobs: "2" });
    assert.equal(await page.locator('#apps-denied-list a[href="#/app/web"]').count(), 1);
    assert.match(await page.locator("#shadow-deny-list").innerText(), new RegExp(`${POLICY}: 2 would have been denied`));
    assert.match(await page.locator("#health-summary").innerText(), /^1 instance: every one sees Redis and MySQL\.$/);
    assert.match(await page.locator("#fleet .scope").innerText(), /Every permitd instance/);
    assert.match(await page.locator("#denying .scope").innerText(),
      /^Since \d\d:\d\d UTC \(the hour before this one and this one so far\), every permitd instance \(traffic history\)\.$/);
    await page.locator("#keys-denied-list").waitFor();
    await checkA11y(page, "overview");
    await page.screenshot({ path: path.join(SHOTS, "traffic-01-overview.png"), fullPage: true });
  });

  step("the policy's history: unit, ticks, exact values by keyboard and hover, markers", async () => {
    await page.goto(`${T.adminBase(a)}/#/policy/${POLICY}`);
    const card = page.locator("#traffic-history");
    await card.waitFor();
    const slider = card.getByRole("slider");
    await slider.waitFor();
    assert.match(await card.locator(".chart-unit").innerText(), /^Decisions per minute · each point a 1 minute bucket · times in UTC$/);
    const ticks = await card.locator("svg text.axis").evaluateAll((els) => els.map((e) => e.textContent));
    assert.ok(ticks.filter((t) => /^\d\d:\d\d$/.test(t)).length >= 5, `time ticks: ${ticks.join(", ")}`);
    // Markers: the creation, the edit, the shadow switch (the audit's).
    const marks = await card.locator(".chart-markers li").allInnerTexts();
    assert.ok(marks.some((m) => /: edited by carol \(description\)$/.test(m)), marks.join(" | "));
    assert.ok(marks.some((m) => /: shadow mode switched on by carol$/.test(m)), marks.join(" | "));
    assert.equal(await card.locator('svg line[data-marker="shadow"]').count(), 1);
    // Every bucket by keyboard: its counts add up to what was answered.
    await slider.focus();
    await page.keyboard.press("Home");
    const n = Number(await slider.getAttribute("aria-valuemax")) + 1;
    assert.equal(n, 60);
    let allowed = 0, denied = 0, markerSeen = false;
    for (let i = 0; i < n; i++) {
      if (i) await page.keyboard.press("ArrowRight");
      assert.equal(Number(await slider.getAttribute("aria-valuenow")), i);
      const text = await slider.getAttribute("aria-valuetext");
      const m = /decisions per minute \((\d+) allowed, (\d+) denied in 1 minute\)/.exec(text);
      assert.ok(m, text);
      allowed += Number(m[1]);
      denied += Number(m[2]);
      markerSeen ||= /Marker: shadow mode switched on by carol\./.test(text);
    }
    assert.deepEqual({ allowed, denied }, sent);
    assert.ok(markerSeen, "the bucket of the shadow switch names it");
    assert.equal(await card.locator(".chart-readout").innerText(), await slider.getAttribute("aria-valuetext"));
    // Shadow mode's would-be denials (issue 39: "Denied 105", "24 on this
    // instance" and 129 were three scopes): one scope, the fleet's since
    // the switch, in the banner; the live chart's totals from the same
    // switch, the denials before it said apart; the hot keys' own minutes.
    await page.waitForFunction(() => document.querySelector("#shadow-denied")?.textContent === "2");
    assert.match(await page.locator("#shadow-note").innerText(),
      /^Shadow mode: would have denied 2 since it was switched on at \w+ \d+ \w+ \d\d:\d\d UTC, every permitd instance \(traffic history, whole minutes\)/);
    assert.equal(await card.locator("#history-shadow").count(), 0, "the history card does not say it a second time");
    // The page's layout settled (the banner, the chart's scope) before the hover.
    await page.waitForFunction(() => /the banner's scope|the whole range in shadow mode/.test(document.querySelector("#chart-scope")?.textContent || ""));
    // On hover: the tooltip with the same words.
    const box = await card.locator("svg").boundingBox();
    await page.mouse.move(box.x + box.width - 12, box.y + box.height / 2);
    const tip = card.locator(".chart-tip");
    await tip.waitFor({ state: "visible" });
    assert.match(await tip.innerText(), /UTC: [\d.,]+ allowed and [\d.,]+ denied decisions per minute \(\d+ allowed, \d+ denied in 1 minute\)/);
    // Per app, the same range.
    const perApp = Object.fromEntries(await page.locator("#history-apps-table tbody tr").evaluateAll((rows) =>
      rows.map((r) => [r.dataset.name, [...r.querySelectorAll("td")].map((td) => td.textContent)])));
    assert.deepEqual(perApp, { web: ["3", "2", "40 %"], jobs: ["0", "2", "100 %"] });
    await page.locator('.segmented[aria-label="Chart range"] button[data-range="1h"]').click();
    await page.waitForFunction(() => /^since .*4 denied before it, while enforced$/.test(document.querySelector("#totals-scope")?.textContent || ""));
    assert.equal(await page.locator("#total-denied").innerText(), "0");
    // The 2 takes since the switch: would-be denials, answered allowed.
    assert.equal(await page.locator("#total-allowed").innerText(), "2");
    assert.equal(await page.locator('#traffic-chart svg line[data-marker="shadow"]').count(), 1);
    assert.match(await page.locator("#chart-scope").innerText(), /since shadow mode was switched on \(\w+ \d+ \w+ \d\d:\d\d UTC\), the banner's scope/);
    assert.equal(await page.locator("#hot-shadow-scope").isVisible(), true);
    await checkA11y(page, "detail, traffic history");
    await page.screenshot({ path: path.join(SHOTS, "traffic-02-policy.png"), fullPage: true });
    // The 30-day range: the same unit, buckets of 2 hours.
    await card.getByRole("group", { name: "History range" }).getByRole("button", { name: "30 days" }).click();
    await page.waitForFunction(() => /each point a 2 hours bucket/.test(document.querySelector("#traffic-history .chart-unit")?.textContent || ""));
    assert.equal(await card.getByRole("slider").getAttribute("aria-valuemax"), "359");
  });

  step("the list shows each policy's allowed and denied with a trend, and sorts by them", async () => {
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: POLICY2, apps: ["*"], maxPermits: "1", rate: "0.001", failureMode: "closed", enabled: true },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    let got = [];
    for (let i = 0; i < 100 && got.length < 4; i++) {
      const res = await fetch(`http://127.0.0.1:${a.apiPort}/permit.v1.RateLimitService/Acquire`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ bucket: POLICY2, app: "web" }),
      });
      const json = await res.json();
      if (res.status === 200) got.push(json.allowed === true);
      else await sleep(100);
    }
    assert.deepEqual(got, [true, false, false, false]);   // 1 allowed, 3 denied: 75 %
    await page.goto(`${T.adminBase(a)}/#/policies`);
    await page.locator("#policy-filter").fill("history-e2e");
    const cell = (p) => page.locator(`tr[data-policy="${p}"] .trend-cell`);
    // POLICY: 3 allowed, 4 denied (the shadow-mode takes were answered allowed
    // and are not denials); POLICY2's history comes within a flush.
    await page.waitForFunction(([p, q]) => document.querySelector(`tr[data-policy="${p}"] .traffic`)?.textContent === "7" &&
      document.querySelector(`tr[data-policy="${q}"] .traffic`)?.textContent === "4", [POLICY, POLICY2], { timeout: 60_000 });
    assert.equal(await cell(POLICY).locator(".trend-split").innerText(), "4 denied (57.1 %)");
    assert.equal(await cell(POLICY2).locator(".trend-split").innerText(), "3 denied (75 %)");
    assert.match(await cell(POLICY).getByRole("img").getAttribute("aria-label"),
      /^Last hour in 5-minute buckets from \d\d:\d\d UTC, allowed\/denied: (\d+\/\d+, ){11}\d+\/\d+$/);
    const order = () => page.locator("tbody tr[data-policy]").evaluateAll((rows) => rows.map((r) => r.dataset.policy));
    await page.locator("#policy-direction").click();          // descending
    await page.locator("#policy-order").selectOption("denied");
    await page.waitForFunction(([p, q]) => [...document.querySelectorAll("tbody tr[data-policy]")].map((r) => r.dataset.policy).join() === `${p},${q}`, [POLICY, POLICY2]);
    await page.locator("#policy-order").selectOption("denied_share");
    await page.waitForFunction(([p, q]) => [...document.querySelectorAll("tbody tr[data-policy]")].map((r) => r.dataset.policy).join() === `${q},${p}`, [POLICY, POLICY2]);
    assert.deepEqual(await order(), [POLICY2, POLICY]);
    await checkA11y(page, "policies, fleet traffic column");
    await page.screenshot({ path: path.join(SHOTS, "traffic-03-list.png"), fullPage: true });
    // A policy whose callers send keys: its shared bucket, never touched,
    // would read full; the gauge says "per key" instead.
    const KEYS = "keys-e2e";
    const k = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: KEYS, apps: ["*"], maxPermits: "5", rate: "1", failureMode: "closed", enabled: true },
    });
    assert.equal(k.status, 200, JSON.stringify(k));
    let sentKeys = 0;
    for (let i = 0; i < 100 && sentKeys < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${a.apiPort}/permit.v1.RateLimitService/Acquire`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ bucket: KEYS, app: "web", key: `user-${i}` }),
      });
      await res.arrayBuffer();
      if (res.status === 200) sentKeys++;
      else await sleep(100);
    }
    await page.locator("#policy-filter").fill(KEYS);
    const gauge = page.locator(`tr[data-policy="${KEYS}"]`).getByRole("meter");
    await page.waitForFunction((p) => document.querySelector(`tr[data-policy="${p}"] .traffic`)?.textContent === "3", KEYS, { timeout: 60_000 });
    await page.waitForFunction((p) => /per key/.test(document.querySelector(`tr[data-policy="${p}"] [role=meter]`)?.textContent || ""), KEYS);
    assert.match(await gauge.getAttribute("aria-valuetext"), /every decision of these hours named a key/);
    // The shared-bucket policies keep their gauge.
    await page.locator("#policy-filter").fill("history-e2e");
    await page.locator(`tr[data-policy="${POLICY2}"]`).waitFor();
    assert.doesNotMatch(await page.locator(`tr[data-policy="${POLICY2}"]`).getByRole("meter").innerText(), /per key/);
    await page.goto(`${T.adminBase(a)}/#/policy/${KEYS}`);
    await page.locator('section[aria-labelledby="shared-h"] p.muted').filter({ hasText: /^Not in use: every decision/ }).waitFor();
    assert.match(await page.locator('section[aria-labelledby="shared-h"]').getByRole("meter").innerText(), /per key/);
  });

  step("an app's page lists the policies it uses", async () => {
    // Reached from the Apps page (an app made there: with --app-auth off
    // the name a request gives needs none).
    const made = await pageRpc(page, "AppService/CreateApp", { name: "web", description: "the web tier" });
    assert.equal(made.status, 200, JSON.stringify(made));
    await page.goto(`${T.adminBase(a)}/#/apps`);
    const link = page.getByRole("link", { name: "Traffic of web" });
    assert.equal(await link.getAttribute("href"), "#/app/web");
    await link.click();
    await page.getByRole("heading", { name: "App web", level: 1 }).waitFor();
    const row = page.locator(`#history-policies-table tr[data-name="${POLICY}"]`);
    await row.waitFor();
    assert.deepEqual((await row.locator("td").allInnerTexts()).map((x) => x.trim()), ["3", "2", "40 %"]);
    await checkA11y(page, "app traffic");
  });
});
