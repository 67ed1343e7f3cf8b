// End-to-end test of the admin web UI (admin-ui/) in real headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core), against a real
// permitd with its own MySQL database and Redis prefix.
//
// Environment (ctest provides it; see tests/e2e/CMakeLists.txt):
//   PERMITD_BIN                the permitd binary
//   PERMITD_TEST_REDIS_URL     redis://127.0.0.1:PORT of the throw-away redis-server
//   PERMITD_TEST_MYSQL_SOCKET  the throw-away MariaDB's socket (root, no password)
//   PERMITD_UI_SCREENSHOTS     where the screenshots of the main screens go
//   PERMITD_CHROMIUM           optional: another Chromium binary
//
// The steps run in order and share one permitd, one browser and the policies
// they create; a failed step prints permitd's output at the end. The
// harness (permitd, Chromium, axe, sign-in) is harness.mjs, shared with the
// other UI suites.
//
// Accessibility: every page and state the steps visit is checked with
// axe-core (WCAG 2.0/2.1 A and AA rules) in the light and the dark colour
// scheme, and a serious or critical violation fails the step; the
// keyboard-only paths assert where focus is after each key.
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

import * as fmt from "../../../admin-ui/format.js";
import { CHROMIUM, CHROMIUM_ARGS, SHOTS, checkA11y, harness, mariadb, pageRpc, parseJson } from "./harness.mjs";

const T = harness("ui");
const { step, login, watch } = T;
const DB = T.db;
const EDITOR = { name: "alice", password: crypto.randomBytes(12).toString("hex"), role: "editor" };
const VIEWER = { name: "bob", password: crypto.randomBytes(12).toString("hex"), role: "viewer" };

const LIST_POLL_MS_TEST = 1600; // a little more than app.js's LIST_POLL_MS

const POLICY = "ui-e2e";
const XSS_POLICY = "ui-xss";
const OFF_POLICY = "ui-off";
const APP = "ui-app";
const XSS = "<img src=x onerror=alert(1)>";

// ---------------------------------------------------------------- helpers

const adminBase = () => T.adminBase();
// The second permitd, on the same MySQL and Redis prefix, with --app-auth
// keys: the steps of the Apps page acquire from it with the keys they issue.
let keyed = null;

// Acquire from Node, as an application would (plain Connect JSON).
async function acquire(body) {
  const res = await fetch(`http://127.0.0.1:${T.server.apiPort}/permit.v1.RateLimitService/Acquire`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ bucket: POLICY, app: APP, ...body }),
  });
  const json = await res.json();
  assert.equal(res.status, 200, `Acquire ${JSON.stringify(body)} answered ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// An admin RPC from Node (not the browser): headers are ours to choose.
async function adminRpc(method, body, headers) {
  const res = await fetch(`${adminBase()}/permit.v1.${method}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: parseJson(await res.text()), headers: res.headers };
}

async function shot(page, name) {
  // Toasts are position: fixed; in a full-page shot they would float
  // mid-page. (Hidden through the CSSOM: the page's Content-Security-Policy
  // refuses the <style> that screenshot({style}) would inject.)
  await page.evaluate(() => document.getElementById("toast")?.style.setProperty("visibility", "hidden"));
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  await page.evaluate(() => document.getElementById("toast")?.style.removeProperty("visibility"));
}

// The element that has focus, described for assertions and messages.
function focused(page) {
  return page.evaluate(() => {
    const el = document.activeElement;
    if (!el) return { tag: "none" };
    return {
      tag: el.tagName.toLowerCase(), id: el.id, label: el.getAttribute("aria-label") || "",
      text: (el.textContent || "").trim().slice(0, 80), cls: el.className || "",
      policy: el.closest("tr[data-policy]")?.dataset.policy ?? null,
    };
  });
}

// Presses Tab until the focused element passes want (at most max times),
// asserting on the way that focus never falls to <body>.
async function tabTo(page, want, what, max = 40) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    const f = await focused(page);
    assert.notEqual(f.tag, "body", `Tab #${i + 1} on the way to ${what} left focus on <body>`);
    if (want(f)) return f;
  }
  throw new Error(`${what} not reached with ${max} presses of Tab`);
}

// Waits (up to 5 s: the list refreshes every 1.5 s) for focus to be on
// something other than <body> after what.
async function focusLeavesBody(page, what) {
  await page.waitForFunction(() => document.activeElement && document.activeElement !== document.body, null, { timeout: 5000 })
    .catch(() => assert.fail(`after ${what} focus is lost to <body>`));
}

const row = (page, name) => page.locator(`tr[data-policy="${name}"]`);
const gaugeOf = (page, name) => row(page, name).getByRole("meter");

async function gaugeValue(page, name) {
  return Number(await gaugeOf(page, name).getAttribute("aria-valuenow"));
}

// The apps picker's checkbox of app (issue 21: apps are picked from the
// apps that exist, never typed).
const appBox = (page, app) => page.locator(`#f-apps-list input[type=checkbox][value="${app}"]`);

async function fillPolicyForm(page, { name, apps, max, rate, unit, description }) {
  if (name !== undefined) await page.locator("#f-name").fill(name);
  if (apps !== undefined) {
    for (const a of [apps].flat()) await appBox(page, a).check();
  }
  if (max !== undefined) await page.locator("#f-max").fill(String(max));
  if (rate !== undefined) await page.locator("#f-rate").fill(String(rate));
  if (unit !== undefined) await page.locator("#f-rate-unit").selectOption(unit);
  if (description !== undefined) await page.locator("#f-desc").fill(description);
}

// ---------------------------------------------------------------- the test

describe("admin web UI in headless Chromium", () => {
  let browser;
  let editorCtx;
  let page;      // alice's main tab
  let dialogs = 0;

  before(async () => {
    T.setUp([EDITOR, VIEWER]);
    // The traffic history every second: the shadow banner reads it.
    await T.startPermitd(["--hotkeys-publish-ms", "300", "--traffic-flush-ms", "1000"]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    editorCtx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    editorCtx.setDefaultTimeout(15_000);
    page = watch(await editorCtx.newPage(), "alice");
    T.currentPage = page;
    page.on("dialog", async (d) => {
      dialogs++;
      await d.dismiss();
    });
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await T.tearDown();
    console.log(`screenshots: ${SHOTS}`);
  });

  step("format.js: rates, names and apps as the server counts them", () => {
    assert.equal(fmt.rateToPerSecond("1", "min").rate, "0.016666666667");
    assert.equal(fmt.rateToPerSecond("2", "min").rate, "0.033333333333");
    assert.equal(fmt.rateToPerSecond("1", "h").rate, "0.000277777778");
    assert.equal(fmt.rateToPerSecond("50", "s").rate, "50");
    assert.equal(fmt.rateToPerSecond("0.5", "s").rate, "0.5");
    assert.ok(fmt.rateToPerSecond("0", "s").error.startsWith("rate:"));
    assert.ok(fmt.rateToPerSecond("-1", "s").error.startsWith("rate:"));
    assert.ok(fmt.rateToPerSecond("abc", "s").error.startsWith("rate:"));
    assert.equal(fmt.describeRate("0.016666666667").text, "1 / min");
    assert.equal(fmt.describeRate("0.033333333333").text, "2 / min");
    assert.equal(fmt.describeRate("0.000277777778").text, "1 / h");
    assert.equal(fmt.describeRate("50").text, "50 / s");
    assert.equal(fmt.describeRate("0.5").text, "0.5 / s");
    assert.deepEqual(fmt.rateForEditing("0.016666666667"), { value: "1", unit: "min" });
    assert.deepEqual(fmt.rateForEditing("0.5"), { value: "0.5", unit: "s" });
    assert.equal(fmt.validateName("a"), "");
    assert.equal(fmt.validateName("A1._-z"), "");
    assert.equal(fmt.validateName("x".repeat(128)), "");
    for (const bad of ["", "-a", ".a", "a b", "a/b", "x".repeat(129), "é"]) {
      assert.ok(fmt.validateName(bad).startsWith("name:"), `name ${JSON.stringify(bad)} should be refused`);
    }
    assert.deepEqual(fmt.parseApps("web, mobile  api,web").apps, ["web", "mobile", "api"]);
    assert.deepEqual(fmt.parseApps("*").apps, ["*"]);
    assert.ok(fmt.parseApps(" , ").error.startsWith("apps:"));
    assert.ok(fmt.parseApps("web b@d").error.startsWith("apps:"));
    assert.equal(fmt.parseMaxPermits("10").value, "10");
    for (const bad of ["0", "-1", "1.5", "x", ""]) assert.ok(fmt.parseMaxPermits(bad).error.startsWith("max_permits:"));
    assert.equal(fmt.fieldOfMessage("max_permits: 0 is less than 1"), "max_permits");
    assert.equal(fmt.fieldOfMessage("failure_mode: must be open or closed"), "failure_mode");
    assert.equal(fmt.fieldOfMessage("no field here"), null);
    // formatNumber is written out (a page's first Intl.NumberFormat costs
    // 30-60 ms of ICU loading before the list shows): it must say what
    // Intl.NumberFormat("en-US") says, but "0" where Intl says "-0".
    const intl = (v, d) => Number(v.toPrecision(12)).toLocaleString("en-US", { maximumFractionDigits: d });
    const values = [0, 1, 0.5, 1.5, 2.5, 0.0005, 1.0005, 0.9995, 999.9995, 999999.5, 1234.5, 1e-7, 5e-7,
      1e20, 9.99999e20, 123456789012, 0.1 + 0.2, 1 / 3, -1234.5678, -2.5, 99.95, 2 ** 53 + 2];
    let seed = 42;
    for (let i = 0; i < 20000; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      const v = (seed / 2147483648 - 0.25) * 10 ** ((i % 24) - 9);
      values.push(v, Math.round(v * 1000) / 1000 + 0.0005);
    }
    for (const v of values) {
      for (const d of [0, 1, 3]) {
        const want = intl(v, d);
        assert.equal(fmt.formatNumber(v, d), want === "-0" ? "0" : want, `formatNumber(${v}, ${d})`);
      }
    }
    assert.equal(fmt.formatNumber(1234567.891), "1,234,567.891");
    assert.equal(fmt.formatNumber(Infinity), "Infinity");
    // index.html preloads every module app.js reaches (one round trip, not
    // one an import level at a time, before the first RPC).
    const uiDir = fileURLToPath(new URL("../../../admin-ui/", import.meta.url));
    const html = fs.readFileSync(path.join(uiDir, "index.html"), "utf8");
    for (const f of fs.readdirSync(uiDir).filter((n) => n.endsWith(".js") && n !== "app.js")) {
      assert.ok(html.includes(`<link rel="modulepreload" href="/ui/${f}">`), `index.html preloads /ui/${f}`);
    }
    assert.equal(fmt.validateDescription("é".repeat(1024)), "");
    assert.ok(fmt.validateDescription("é".repeat(1025)).startsWith("description:"));
    // The audit JSON as policy_audit keeps it (apps comma-joined, enabled 0/1, rate a number).
    const d = fmt.diffChange({
      action: "update",
      oldValue: '{"name": "p", "apps": "a", "max_permits": 5, "rate": 0.016666666667, "description": "d", "enabled": 1, "failure_mode": "open", "version": 1}',
      newValue: '{"name": "p", "apps": "a,b", "max_permits": 6, "rate": 0.500000000000, "description": "d", "enabled": 0, "failure_mode": "open", "version": 2}',
    });
    assert.deepEqual(d.rows.map((r) => [r.field, r.old, r.new]), [
      ["apps", "a", "a, b"],
      ["max_permits", "5", "6"],
      ["rate", "1 / min (0.016666666667 / s)", "0.5 / s"],
      ["enabled", "yes", "no"],
    ]);
    assert.equal(d.fromVersion, "1");
    assert.equal(d.toVersion, "2");
    // Issue 40: words, not the audit JSON's names (window_ms, colocate 0).
    assert.deepEqual(d.rows.map((r) => r.label), ["Apps", "Max permits", "Rate", "Enabled"]);
    const w = fmt.diffChange({
      action: "update",
      oldValue: '{"name": "p", "algorithm": "token_bucket", "window_ms": 0, "colocate": 0, "failure_mode": "open", "version": 1}',
      newValue: '{"name": "p", "algorithm": "sliding_window", "window_ms": 90000, "colocate": 1, "failure_mode": "closed", "version": 2}',
    });
    assert.deepEqual(w.rows.map((r) => [r.label, r.old, r.new]), [
      ["Algorithm", "Token bucket", "Sliding window"],
      ["Window", "none", "90 seconds"],
      ["When Redis is unreachable", "fail open", "fail closed"],
      ["Keep all buckets together", "no", "yes"],
    ]);
    // Migration 0019: a plain-SQL change of a reservation or lease setting,
    // in words (NULL local_lease: the instance's own --local-leases).
    const r = fmt.diffChange({
      action: "update",
      oldValue: '{"name": "p", "reserve_ttl_ms": 300000, "debt_floor": 0, "reserve_expiry": "keep", "local_lease": null, "local_lease_permits": null, "version": 1}',
      newValue: '{"name": "p", "reserve_ttl_ms": 60000, "debt_floor": 50, "reserve_expiry": "refund", "local_lease": "on", "local_lease_permits": null, "version": 2}',
    });
    assert.deepEqual(r.rows.map((x) => [x.label, x.old, x.new]), [
      ["Longest reservation", "5 minutes", "1 minute"],
      ["Debt floor", "0", "50"],
      ["An expired reservation's estimate", "kept", "refunded"],
      ["Local leases", "as the instance's setting", "on"],
    ]);
    assert.deepEqual(fmt.timeAttrs("2026-11-28 14:20:01.123456").datetime, new Date(Date.parse("2026-11-28 14:20:01.123456")).toISOString());
    assert.doesNotMatch(fmt.timeAttrs("2026-11-28 14:20:01.123456").title, /123456/);
  });

  step("the login page refuses a wrong password", async () => {
    await page.goto(`${adminBase()}/`);
    await page.getByLabel("Username").waitFor();
    await shot(page, "01-login");
    await checkA11y(page, "login");
    // The page says it has a dark scheme, so a dark browser does not paint
    // it white before the stylesheet arrives.
    assert.equal(await page.evaluate(() => document.querySelector('meta[name="color-scheme"]')?.content ?? null), "light dark",
      '<meta name="color-scheme" content="light dark"> in the page head');
    await page.getByLabel("Username").fill(EDITOR.name);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    const error = page.locator("#login-error");
    await error.waitFor();
    assert.match(await error.textContent(), /wrong username or password/i);
    await shot(page, "02-login-refused");
    await checkA11y(page, "login, wrong password");
    const who = await pageRpc(page, "AdminAuthService/WhoAmI", {});
    assert.equal(who.status, 401, `WhoAmI after a refused login: ${JSON.stringify(who)}`);
    assert.equal(who.json.code, "unauthenticated");
  });

  step("an editor logs in to the overview, the home, and sees the empty list under Policies", async () => {
    await page.getByLabel("Username").fill(EDITOR.name);
    await page.getByLabel("Password").fill(EDITOR.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    // The UI's home (issue 39): #/ is the overview; the list is #/policies.
    await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
    assert.equal(new URL(page.url()).hash, "#/");
    let f = await focused(page);
    assert.deepEqual([f.tag, f.text], ["h1", "Overview"], `after signing in focus is on the page's heading, not ${JSON.stringify(f)}`);
    assert.equal(await page.locator("#nav-overview").getAttribute("aria-current"), "page");
    assert.equal(await page.locator("#nav-overview").getAttribute("href"), "#/");
    await page.locator("#nav-policies").click();
    await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
    assert.equal(new URL(page.url()).hash, "#/policies");
    assert.equal(await page.locator("#nav-policies").getAttribute("aria-current"), "page");
    await page.getByText("No policies yet").waitFor();
    f = await focused(page);
    assert.deepEqual([f.tag, f.text], ["h1", "Policies"], `after the nav's link focus is on the page's heading, not ${JSON.stringify(f)}`);
    assert.equal(await page.locator("#user-name").textContent(), EDITOR.name);
    assert.match(await page.locator("#user-role").textContent(), /editor/);
    await shot(page, "03-empty");
    await checkA11y(page, "policies, empty");
  });

  step("the create form validates inline, and creating shows the policy in the table", async () => {
    const writes = [];
    const onRequest = (r) => {
      if (r.url().includes("/permit.v1.PolicyService/CreatePolicy")) writes.push(r.url());
    };
    page.on("request", onRequest);
    await page.getByRole("link", { name: "New policy" }).click();
    await page.locator("#f-name").waitFor();
    // Required fields say so to assistive technology and on screen.
    assert.equal(await page.locator("#f-apps legend .required-mark").isVisible(), true, "the Apps legend shows a required marker");
    for (const id of ["f-name", "f-max", "f-rate"]) {
      const input = page.locator(`#${id}`);
      assert.equal(await input.getAttribute("required"), "", `#${id} is required`);
      assert.equal(await input.getAttribute("aria-required"), "true", `#${id} has aria-required`);
      const marker = page.locator(`label[for="${id}"] .required-mark`);
      assert.ok(await marker.isVisible(), `the label of #${id} shows a required marker`);
    }
    assert.equal(await page.locator("#f-desc").getAttribute("required"), null, "the description is optional");
    assert.equal(await page.locator("label[for=f-desc] .required-mark").count(), 0);
    assert.ok(await page.locator(".policy-form .required-note").isVisible(), "the form says what the marker means");
    // No app ticked: there is none yet but "*", and apps cannot be typed.
    await page.locator("#f-apps-list input[value='*']").waitFor();
    assert.equal(await page.locator("input[name=apps], textarea[name=apps]").count(), 0, "no free-text apps field");
    await fillPolicyForm(page, { name: "bad name!", max: "0", rate: "0" });
    await page.locator("#save-policy").click();
    for (const id of ["#f-name-error", "#f-apps-error", "#f-max-error", "#f-rate-error"]) {
      await page.locator(id).waitFor();
      assert.ok((await page.locator(id).textContent()).length > 5, `${id} names the problem`);
    }
    assert.equal(await page.locator("#f-name").getAttribute("aria-invalid"), "true");
    await shot(page, "04-create-invalid");
    await checkA11y(page, "new policy with errors");
    assert.deepEqual(writes, [], "an invalid form sends nothing");

    // The app does not exist yet: it is created on the spot, from the
    // picker, with the name typed in its search box, and comes back ticked.
    await page.locator("#f-apps-search").fill(APP);
    await page.getByRole("button", { name: "New app" }).click();
    const appDlg = page.getByRole("dialog", { name: "New app" });
    await appDlg.waitFor();
    assert.equal((await focused(page)).id, "app-name", "the new app dialog opens on its name");
    assert.equal(await page.locator("#app-name").inputValue(), APP, "the name typed in the search box");
    await checkA11y(page, "new app dialog from the policy form");
    await page.locator("#app-desc").fill("the UI test's app");
    await page.keyboard.press("Enter");
    await appDlg.waitFor({ state: "detached" });
    assert.equal(await appBox(page, APP).isChecked(), true, "the app created on the spot is ticked");
    assert.equal((await focused(page)).id, await appBox(page, APP).getAttribute("id"), "focus is on its checkbox");
    assert.equal(await page.locator("#f-apps-error").isVisible(), false, "ticking an app clears the error");
    await fillPolicyForm(page, { name: POLICY, max: 10, rate: 2, unit: "min", description: "Created by the UI test" });
    await page.locator("#f-name").blur();
    assert.equal(await page.locator("#f-name-error").isVisible(), false, "fixing the name clears its error");
    assert.match(await page.locator("#f-rate-preview").textContent(), /0\.033333333333 permits per second/);
    await shot(page, "05-create-form");
    await checkA11y(page, "new policy, filled in");
    await page.locator("#save-policy").click();
    await row(page, POLICY).waitFor();
    page.off("request", onRequest);
    assert.equal(writes.length, 1);
    assert.equal(new URL(page.url()).hash, "#/policies");
    const cells = row(page, POLICY).locator("td");
    assert.equal(await cells.nth(1).innerText(), APP);
    assert.equal((await cells.nth(2).innerText()).trim(), "10");
    assert.equal((await cells.nth(3).locator(".rate").innerText()).trim(), "2 / min");
    assert.equal((await cells.nth(3).locator(".algo").innerText()).trim(), "Token bucket");
    assert.equal(await cells.nth(3).locator(".rate").getAttribute("title"),
      "Bursts of up to 10 permits, refilled at 2 per minute; empty to full in 5 min.");

    const got = await pageRpc(page, "PolicyService/GetPolicy", { name: POLICY });
    assert.equal(got.status, 200, JSON.stringify(got));
    assert.equal(got.json.policy.maxPermits, "10");
    assert.ok(Math.abs(Number(got.json.policy.rate) * 60 - 2) < 1e-9, `rate ${got.json.policy.rate} is 2 per minute`);
    assert.equal(got.json.policy.createdBy, EDITOR.name);
    assert.equal(got.json.policy.failureMode, "open");
    assert.equal(got.json.policy.enabled, true);
  });

  step("the server's error is shown next to the field it names (duplicate name)", async () => {
    await page.getByRole("link", { name: "New policy" }).click();
    await fillPolicyForm(page, { name: POLICY, apps: APP, max: 1, rate: 1, unit: "s" });
    await page.locator("#save-policy").click();
    const err = page.locator("#f-name-error");
    await err.waitFor();
    assert.ok((await err.textContent()).trim().length > 0);
    assert.match(new URL(page.url()).hash, /^#\/new$/, "the form stays open");
    await page.getByRole("link", { name: "Cancel" }).click();
    await row(page, POLICY).waitFor();
  });

  step("the gauge of the shared bucket drops while a client acquires permits", async () => {
    const gauge = gaugeOf(page, POLICY);
    await gauge.waitFor();
    await page.waitForFunction((n) => Number(document.querySelector(`tr[data-policy="${n}"] [role=meter]`)?.getAttribute("aria-valuenow")) >= 9.9, POLICY);
    assert.equal(await gauge.getAttribute("aria-valuemax"), "10");
    for (let i = 0; i < 6; i++) {
      const r = await acquire({});
      assert.equal(r.allowed, true, `Acquire #${i + 1}: ${JSON.stringify(r)}`);
    }
    await page.waitForFunction((n) => Number(document.querySelector(`tr[data-policy="${n}"] [role=meter]`)?.getAttribute("aria-valuenow")) <= 5,
      POLICY, { timeout: 6000 });
    const v = await gaugeValue(page, POLICY);
    assert.ok(v >= 4 && v <= 5, `gauge shows ${v} tokens after 6 of 10 were taken at 2/min`);
    assert.match((await gauge.innerText()).trim(), /^4(\.\d)? \/ 10$/);
    await shot(page, "06-table");
    await page.emulateMedia({ colorScheme: "dark" });
    await shot(page, "06b-table-dark");
    await page.emulateMedia({ colorScheme: null });
    await checkA11y(page, "policies");
  });

  step("the detail page charts allowed and denied calls and inspects a key's bucket", async () => {
    let denied = 0;
    for (let i = 0; i < 6; i++) if (!(await acquire({})).allowed) denied++;
    assert.ok(denied >= 1, "the bucket ran dry");
    for (let i = 0; i < 3; i++) assert.equal((await acquire({ key: "user-42" })).allowed, true);

    await row(page, POLICY).getByRole("link", { name: POLICY, exact: true }).click();
    await page.getByRole("heading", { name: POLICY, level: 1 }).waitFor();
    await page.waitForFunction(() => Number(document.querySelector("#total-denied")?.textContent.replace(/,/g, "")) >= 1
      && Number(document.querySelector("#total-allowed")?.textContent.replace(/,/g, "")) >= 10, null, { timeout: 8000 });
    assert.equal(await page.locator("#traffic-chart svg").count(), 1);

    await page.getByLabel("Key", { exact: true }).fill("user-42");
    await page.getByRole("button", { name: "Inspect", exact: true }).click();
    await page.locator("#inspect-remaining").waitFor();
    await page.waitForFunction(() => /^7 of 10$/.test(document.querySelector("#inspect-remaining")?.textContent || ""));
    assert.match(await page.locator("#inspect-full").textContent(), /^in /);
    // The result is announced once, politely; the figures that refresh every
    // 2 s are not inside any live region (a screen reader would read them
    // again and again).
    const tokensBefore = await page.locator("#inspect-tokens").textContent();
    await page.evaluate(() => {
      const live = "[aria-live]:not([aria-live=off]), [role=status], [role=alert], [role=log], [role=timer], [role=marquee]";
      const box = document.querySelector("#inspect-key").closest("section");
      window.__liveChanges = [];
      window.__liveObserver = new MutationObserver((records) => {
        for (const r of records) {
          const el = r.target.nodeType === Node.ELEMENT_NODE ? r.target : r.target.parentElement;
          const region = el?.closest(live);
          if (region && box.contains(region)) window.__liveChanges.push(`${region.className || region.id}: ${region.textContent.trim().slice(0, 60)}`);
        }
      });
      window.__liveObserver.observe(box, { subtree: true, childList: true, characterData: true });
    });
    await sleep(4500);
    const liveChanges = await page.evaluate(() => {
      window.__liveObserver.disconnect();
      return window.__liveChanges;
    });
    assert.notEqual(await page.locator("#inspect-tokens").textContent(), tokensBefore, "the inspected bucket refilled meanwhile");
    assert.deepEqual(liveChanges, [], "the inspector's polling changes no live region");
    const announce = await page.evaluate(() => {
      const el = document.querySelector("#inspect-announce");
      return el && { role: el.getAttribute("role"), text: el.textContent };
    });
    assert.equal(announce?.role, "status", "a polite status announces the inspected bucket once");
    assert.match(announce.text, /user-42.*7 of 10/);
    await shot(page, "07-detail-bucket-inspector");
    await checkA11y(page, "detail with the bucket inspector");
    // A reset asks first (issue 40), naming the key and what it holds.
    await page.locator("#inspect-reset").click();
    await page.waitForFunction(() => /^user-42 holds \d+ of 10; reset gives back 10\.$/.test(document.querySelector("#reset-holds")?.textContent || ""));
    await page.locator("#reset-confirm").click();
    await page.waitForFunction(() => /^10 of 10$/.test(document.querySelector("#inspect-remaining")?.textContent || ""));
    const b = await pageRpc(page, "PolicyService/GetBucket", { name: POLICY, key: "user-42" });
    assert.equal(b.status, 200, JSON.stringify(b));
    assert.equal(b.json.bucket.remaining, "10");
  });

  step("saving over a change made in another tab shows the conflict message", async () => {
    await page.goto(`${adminBase()}/#/policy/${POLICY}/edit`);
    await page.waitForFunction(() => document.querySelector("#f-max")?.value === "10");
    assert.equal(await page.locator("#f-rate").inputValue(), "2");
    assert.equal(await page.locator("#f-rate-unit").inputValue(), "min");
    await shot(page, "08-edit-form");
    await checkA11y(page, "edit");

    const other = watch(await editorCtx.newPage(), "alice (second tab)");
    await other.goto(`${adminBase()}/#/policy/${POLICY}/edit`);
    await other.waitForFunction(() => document.querySelector("#f-max")?.value === "10");
    await other.locator("#f-max").fill("20");
    await other.locator("#save-policy").click();
    await other.waitForFunction(() => !location.hash.endsWith("/edit"));
    await other.close();

    await page.locator("#f-desc").fill("edited in the stale tab");
    await page.locator("#save-policy").click();
    const conflict = page.locator("#conflict");
    await conflict.waitFor();
    const text = await conflict.innerText();
    assert.match(text, /someone else changed this policy/i);
    assert.match(text, /not saved/i);
    assert.match(text, /max_permits/, "the conflict shows what the other tab changed");
    await shot(page, "09-conflict");
    await checkA11y(page, "edit, conflict");
    const stale = await pageRpc(page, "PolicyService/GetPolicy", { name: POLICY });
    assert.equal(stale.json.policy.maxPermits, "20", "the second tab's save stands");
    assert.equal(stale.json.policy.description, "Created by the UI test", "the stale save changed nothing");

    await page.getByRole("button", { name: "Load the latest version" }).click();
    assert.equal(await page.locator("#f-max").inputValue(), "20");
    assert.equal(await conflict.isVisible(), false);
    await page.locator("#f-desc").fill("edited after reloading");
    await page.locator("#save-policy").click();
    await page.waitForFunction(() => !location.hash.endsWith("/edit"));
    const now = await pageRpc(page, "PolicyService/GetPolicy", { name: POLICY });
    assert.equal(now.json.policy.description, "edited after reloading");
    assert.equal(now.json.policy.maxPermits, "20");
  });

  step("after a limit edit, the policy page says when its buckets' expiry was adjusted", async () => {
    // Issue 22: the settle that follows an edit of max_permits (the step
    // above: 10 -> 20) runs in the background; the policy page shows where
    // it is (running: how many done; waiting; or when the last one ended).
    await page.goto(`${adminBase()}/#/policy/${POLICY}`);
    await page.waitForFunction(() => /^Expiry of existing buckets adjusted at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+ buckets? in /
      .test(document.querySelector("#settle-state")?.textContent ?? ""), null, { timeout: 20_000 });
    const st = await pageRpc(page, "PolicyService/GetPolicyStats", { name: POLICY, seconds: 60 });
    assert.equal(st.status, 200, JSON.stringify(st));
    const settle = st.json.settle ?? {};
    assert.ok(Number(settle.finishedUnixMs) > 0 && settle.running !== true, JSON.stringify(settle));
    assert.ok(Number(settle.keysDone) >= 1, `the shared bucket at least: ${JSON.stringify(settle)}`);
    const text = await page.locator("#settle-state").innerText();
    assert.ok(text.includes(`(${Number(settle.keysDone).toLocaleString("en-US")} bucket`), text);
    await checkA11y(page, "detail, settle state");
    await shot(page, "09b-settle-state");
  });

  step("the history shows the create and the updates with who made them", async () => {
    await page.goto(`${adminBase()}/#/policy/${POLICY}`);
    const entries = page.locator("#history .change");
    await page.waitForFunction(() => document.querySelectorAll("#history .change").length >= 3);
    const texts = await entries.allInnerTexts();
    assert.equal(texts.length, 3, texts.join("\n----\n"));
    assert.match(texts[0], /Updated/);
    assert.match(texts[0], /Description/);
    assert.match(texts[0], /edited after reloading/);
    assert.match(texts[1], /Updated/);
    assert.match(texts[1], /Max permits\s+10\s+→\s+20/);
    assert.match(texts[2], /Created/);
    for (const t of texts) assert.match(t, new RegExp(`by ${EDITOR.name}`));
    // Every column header of the before/after tables has a name (the arrow
    // column's is visually hidden).
    const headers = await page.locator("#history table.diff thead th").evaluateAll((ths) => ths.map((th) => th.textContent.trim()));
    assert.ok(headers.length >= 4, `headers: ${JSON.stringify(headers)}`);
    for (const t of headers) assert.ok(t.length > 0, `a history column header is empty: ${JSON.stringify(headers)}`);
    await page.locator("#history").scrollIntoViewIfNeeded();
    await shot(page, "10-history");
    await page.emulateMedia({ colorScheme: "dark" });
    await shot(page, "10b-history-dark");
    await page.emulateMedia({ colorScheme: null });
    await checkA11y(page, "detail with history");
  });

  step("colocate is a checkbox with its help text, saved with the policy", async () => {
    await page.goto(`${adminBase()}/#/policy/${POLICY}/edit`);
    await page.waitForFunction(() => document.querySelector("#f-max")?.value === "20");
    const box = page.getByLabel(/Keep all buckets together/);
    assert.equal(await box.isChecked(), false, "off unless set");
    const hint = await page.locator("#f-colocate-hint").innerText();
    assert.match(hint, /all-or-nothing AcquireBatch/);
    assert.match(hint, /spreads over every Redis master/);
    await box.check();
    await checkA11y(page, "edit, colocate checked");
    await page.locator("#save-policy").click();
    await page.waitForFunction(() => !location.hash.endsWith("/edit"));
    const got = await pageRpc(page, "PolicyService/GetPolicy", { name: POLICY });
    assert.equal(got.json.policy.colocate, true, JSON.stringify(got.json));
    await page.goto(`${adminBase()}/#/policy/${POLICY}/edit`);
    await page.waitForFunction(() => document.querySelector("#f-colocate")?.checked === true);
  });

  step("a description with markup is shown as text, never run", async () => {
    await page.goto(`${adminBase()}/#/new`);
    await fillPolicyForm(page, { name: XSS_POLICY, apps: APP, max: 5, rate: 1, unit: "s", description: XSS });
    await page.locator("#save-policy").click();
    const r = row(page, XSS_POLICY);
    await r.waitFor();
    await r.getByText(XSS, { exact: true }).waitFor();
    assert.equal(await r.locator("img").count(), 0, "no <img> element inside the row");
    await r.getByRole("link", { name: XSS_POLICY, exact: true }).click();
    await page.locator(".policy-desc").getByText(XSS, { exact: true }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll("#history .change").length >= 1);
    assert.match(await page.locator("#history").innerText(), /<img src=x onerror=alert\(1\)>/);
    await sleep(1000);
    assert.equal(await page.locator("img").count(), 0, "no <img> element anywhere on the page");
    assert.equal(dialogs, 0, "no dialog (alert) fired");
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
    await shot(page, "11-xss-as-text");
    await checkA11y(page, "policies, two");
  });

  step("a policy this instance has no figures for says so, not zero traffic", async () => {
    // Issue 22: the chart read zeros for a policy outside the stats table
    // although it was serving. XSS_POLICY has had no Acquire: the API says
    // known false, and the page says "No figures yet" in words; after one
    // Acquire the chart is drawn and counts it.
    const stats = await pageRpc(page, "PolicyService/GetPolicyStats", { name: XSS_POLICY, seconds: 60 });
    assert.equal(stats.status, 200, JSON.stringify(stats));
    assert.notEqual(stats.json.known, true, JSON.stringify(stats.json));
    await row(page, XSS_POLICY).getByRole("link", { name: XSS_POLICY, exact: true }).click();
    const note = page.locator("#traffic-chart #chart-no-figures");
    await note.waitFor();
    assert.match(await note.innerText(), /^No figures yet\./);
    assert.equal(await page.locator("#traffic-chart svg").count(), 0, "no chart of zeros");
    assert.equal(await page.locator("#total-allowed").count(), 0, "no total of 0 allowed");
    await checkA11y(page, "detail, no figures yet");
    await shot(page, "11b-no-figures");
    assert.equal((await acquire({ bucket: XSS_POLICY })).allowed, true);
    await page.locator("#traffic-chart svg").waitFor({ timeout: 8000 });
    await page.waitForFunction(() => document.querySelector("#total-allowed")?.textContent === "1");
    assert.equal(await note.count(), 0);
    const after = await pageRpc(page, "PolicyService/GetPolicyStats", { name: XSS_POLICY, seconds: 60 });
    assert.equal(after.json.known, true, JSON.stringify(after.json));
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
  });

  step("shadow mode: a switch with its explanation; the page shows what the limit would have denied", async () => {
    // Issue 23: a policy in shadow mode decides and counts every Acquire
    // but refuses none; its page says how many it would have denied.
    const SHADOW_POLICY = "ui-shadow";
    await page.goto(`${adminBase()}/#/new`);
    await fillPolicyForm(page, { name: SHADOW_POLICY, apps: APP, max: 2, rate: 1, unit: "h" });
    const box = page.getByLabel(/Shadow mode/);
    assert.equal(await box.isChecked(), false, "enforcing unless switched");
    const hint = await page.locator("#f-shadow-hint").innerText();
    assert.match(hint, /none is refused/);
    assert.match(hint, /would have denied/);
    assert.match(hint, /Switch it off to enforce/);
    await box.check();
    await checkA11y(page, "new policy, shadow mode on");
    await page.locator("#save-policy").click();
    await row(page, SHADOW_POLICY).waitFor();
    assert.match(await row(page, SHADOW_POLICY).innerText(), /Shadow mode/);
    const got = await pageRpc(page, "PolicyService/GetPolicy", { name: SHADOW_POLICY });
    assert.equal(got.json.policy.shadow, true, JSON.stringify(got.json));
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await acquire({ bucket: SHADOW_POLICY }));
    assert.deepEqual(answers.map((a) => a.allowed), [true, true, true, true, true], JSON.stringify(answers));
    assert.deepEqual(answers.map((a) => a.shadow === true), [false, false, true, true, true], JSON.stringify(answers));
    await row(page, SHADOW_POLICY).getByRole("link", { name: SHADOW_POLICY, exact: true }).click();
    // One scope (issue 39): since the switch (here the creation), every
    // instance, from the traffic history; the chart's totals from the same
    // switch, the hot keys' own minutes said apart.
    await page.waitForFunction(() => document.querySelector("#shadow-denied")?.textContent === "3", null, { timeout: 90_000 });
    assert.match(await page.locator("#shadow-note").innerText(),
      /^Shadow mode: would have denied 3 since it was switched on at \w+ \d+ \w+ \d\d:\d\d UTC, every permitd instance \(traffic history, whole minutes\); allowed all the same/);
    // 2 allowed and 3 would-be denials, all answered allowed.
    await page.waitForFunction(() => document.querySelector("#total-allowed")?.textContent === "5" &&
      /^since /.test(document.querySelector("#totals-scope")?.textContent || ""));
    assert.equal(await page.locator("#total-denied").innerText(), "0");
    assert.match(await page.locator("#totals-scope").innerText(),
      /^since \w+ \d+ \w+ \d\d:\d\d UTC \(0(\.0)? % denied\), every permitd instance \(a would-be denial counted as allowed, as it was answered\)$/);
    assert.equal(await page.locator('#traffic-chart svg line[data-marker="shadow"]').count(), 1);
    assert.match(await page.locator("#hot-shadow-scope").innerText(), /would have denied/);
    assert.match(await page.locator(".settings").innerText(), /Mode\s+shadow: decided and counted, never refused/);
    await checkA11y(page, "detail, shadow mode with would-be denials");
    await shot(page, "11c-shadow-mode");
    // Switched off: saved, audited in the history, enforced at once.
    await page.goto(`${adminBase()}/#/policy/${SHADOW_POLICY}/edit`);
    await page.waitForFunction(() => document.querySelector("#f-shadow")?.checked === true);
    await page.getByLabel(/Shadow mode/).uncheck();
    await page.locator("#save-policy").click();
    await page.waitForFunction(() => !location.hash.endsWith("/edit"));
    await page.goto(`${adminBase()}/#/policy/${SHADOW_POLICY}`);
    await page.waitForFunction(() => document.querySelectorAll("#history .change").length >= 2);
    assert.match(await page.locator("#history .change").first().innerText(), /Shadow mode\s+yes\s+→\s+no/);
    assert.match(await page.locator(".settings").innerText(), /Mode\s+enforcing/);
    const refused = await acquire({ bucket: SHADOW_POLICY });
    assert.equal(refused.allowed, false, JSON.stringify(refused));
    assert.notEqual(refused.shadow, true);
    // The denials it would have made stay on the page while the range holds them.
    await page.waitForFunction(() => /before the limit was enforced/.test(document.querySelector("#shadow-note")?.textContent || ""));
    assert.match(await page.locator("#shadow-note").innerText(),
      /^Shadow mode: would have denied 3 from \w+ \d+ \w+ \d\d:\d\d UTC until \w+ \d+ \w+ \d\d:\d\d UTC, every permitd instance/);
    assert.equal(await page.locator("#hot-shadow-scope").isVisible(), false);
    const cur = await pageRpc(page, "PolicyService/GetPolicy", { name: SHADOW_POLICY });
    const del = await pageRpc(page, "PolicyService/DeletePolicy", { name: SHADOW_POLICY, version: cur.json.policy.version });
    assert.equal(del.status, 200, JSON.stringify(del));
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
  });

  step("hot keys: the most denied and allowed keys with their level, and a reset button", async () => {
    // Issue 23: per policy, the keys taken most (summed over instances),
    // each with its bucket now; an editor resets one from the list.
    const HOT_POLICY = "ui-hot";
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: HOT_POLICY, apps: [APP], maxPermits: "2", rate: "0.0003", failureMode: "closed", enabled: true },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    for (let i = 0; i < 4; i++) await acquire({ bucket: HOT_POLICY, key: "k-alice" });
    await acquire({ bucket: HOT_POLICY, key: "k-bob" });
    await page.goto(`${adminBase()}/#/policy/${HOT_POLICY}`);
    const denied = page.locator('#hot-denied tr[data-key="k-alice"]');
    await denied.waitFor({ timeout: 15_000 });
    await page.waitForFunction(() => /k-alice\s+2\s+0 \/ 2 left/.test(document.querySelector('#hot-denied tr[data-key="k-alice"]')?.innerText || ""));
    // Waited for, not read once: the lists refresh as the counts arrive, and
    // a loaded machine showed k-alice before k-bob (issue 33).
    await page.waitForFunction(() => [...document.querySelectorAll("#hot-allowed tbody tr")]
      .map((tr) => tr.dataset.key).join(",") === "k-alice,k-bob", null, { timeout: 30_000 })
      .catch(async () => assert.deepEqual(await page.locator("#hot-allowed tbody tr")
        .evaluateAll((trs) => trs.map((tr) => tr.dataset.key)), ["k-alice", "k-bob"]));
    assert.match(await page.locator("#hot-status").innerText(), /summed over 1 permitd instance\b/);
    await checkA11y(page, "detail, hot keys");
    await page.locator("#hot-lists, .hot-lists").scrollIntoViewIfNeeded();
    await shot(page, "11d-hot-keys");
    // Issue 40: a reset asks first, naming the key and what it holds;
    // Cancel changes nothing (the bucket, the audit); confirmed, it is
    // audited with the state before.
    const resets = async () => {
      const r = await pageRpc(page, "AuditService/ListAudit", { policy: HOT_POLICY, kind: "bucket" });
      assert.equal(r.status, 200, JSON.stringify(r));
      return r.json.entries || [];
    };
    await denied.getByRole("button", { name: "Reset the bucket of k-alice" }).click();
    await page.locator("#reset-dialog").waitFor();
    assert.match(await page.locator("#reset-title").innerText(), /Reset the bucket of k-alice\?/);
    await page.waitForFunction(() => document.querySelector("#reset-holds")?.textContent === "k-alice holds 0 of 2; reset gives back 2.");
    await page.locator("#reset-cancel").click();
    await page.locator("#reset-dialog").waitFor({ state: "detached" });
    const kept = await pageRpc(page, "PolicyService/GetBucket", { name: HOT_POLICY, key: "k-alice" });
    assert.equal(kept.json.bucket.remaining ?? "0", "0", "Cancel did not reset");
    assert.deepEqual(await resets(), [], "Cancel wrote no audit row");
    await denied.getByRole("button", { name: "Reset the bucket of k-alice" }).click();
    await page.waitForFunction(() => document.querySelector("#reset-holds")?.textContent === "k-alice holds 0 of 2; reset gives back 2.");
    await page.locator("#reset-confirm").click();
    await page.waitForFunction(() => /2 \/ 2 left/.test(document.querySelector('#hot-denied tr[data-key="k-alice"]')?.innerText || ""));
    assert.match(await page.locator("#hot-done").innerText(), /Reset the bucket of k-alice/);
    assert.equal((await acquire({ bucket: HOT_POLICY, key: "k-alice" })).allowed, true, "the reset bucket takes again");
    const audited = await resets();
    assert.deepEqual(audited.map((e) => [e.keyPrefix, e.action, e.actor]), [["k-alice", "reset", EDITOR.name]]);
    assert.equal(JSON.parse(audited[0].oldValue).limit, "2");
    const cur = await pageRpc(page, "PolicyService/GetPolicy", { name: HOT_POLICY });
    const del = await pageRpc(page, "PolicyService/DeletePolicy", { name: HOT_POLICY, version: cur.json.policy.version });
    assert.equal(del.status, 200, JSON.stringify(del));
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
  });

  step("a disabled policy shows no bucket, and its page raises no error", async () => {
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: OFF_POLICY, apps: ["*"], maxPermits: "7", rate: "1", failureMode: "closed", enabled: false },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, OFF_POLICY).waitFor();
    assert.match(await row(page, OFF_POLICY).innerText(), /\* any app/);
    await checkA11y(page, "policies, one disabled for any app");
    assert.equal((await gaugeOf(page, OFF_POLICY).innerText()).trim(), "disabled");
    assert.match(await row(page, OFF_POLICY).innerText(), /Disabled/);
    await row(page, OFF_POLICY).getByRole("link", { name: OFF_POLICY, exact: true }).click();
    await page.getByText("The policy is disabled").waitFor();
    await sleep(2500);
    assert.equal(await page.locator("#banner").isVisible(), false, "no error banner for a disabled policy");
    const del = await pageRpc(page, "PolicyService/DeletePolicy", { name: OFF_POLICY, version: "1" });
    assert.equal(del.status, 200, JSON.stringify(del));
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
  });

  step("filtering the list announces how many policies match", async () => {
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
    await row(page, POLICY).waitFor();
    const status = page.locator("#policy-filter-status");
    assert.equal(await page.evaluate(() => document.querySelector("#policy-filter-status")?.getAttribute("role") ?? null), "status",
      "#policy-filter-status, a polite live region, is on the list page");
    const filter = page.getByLabel("Filter policies");
    await filter.fill("xss");
    await page.waitForFunction(() => document.querySelector("#policy-filter-status")?.textContent === "1 of 2 policies match “xss”.", null, { timeout: 5000 })
      .catch(async () => assert.fail(`#policy-filter-status says ${JSON.stringify(await page.evaluate(() => document.querySelector("#policy-filter-status")?.textContent ?? null))}`));
    assert.equal(await row(page, POLICY).isVisible(), false);
    await filter.fill("no-such-thing");
    await page.waitForFunction(() => document.querySelector("#policy-filter-status")?.textContent === "No policies match “no-such-thing”.");
    await page.getByText("No policies match the filter").waitFor();
    await checkA11y(page, "policies, filtered to none");
    await sleep(LIST_POLL_MS_TEST);
    assert.equal(await status.textContent(), "No policies match “no-such-thing”.", "a refresh of the list says nothing new");
    await filter.fill("");
    await page.waitForFunction(() => document.querySelector("#policy-filter-status")?.textContent === "All 2 policies shown.");
    assert.ok(await row(page, POLICY).isVisible());
  });

  step("keyboard only: sign in, edit and save, delete from a row, with focus followed at each step", async () => {
    const KEYS = "ui-keys";
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: KEYS, apps: [APP], maxPermits: "5", rate: "1", failureMode: "open", enabled: true },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    try {
      const kp = watch(await ctx.newPage(), "alice (keyboard)");
      T.currentPage = kp;
      // Sign in.
      await kp.goto(`${adminBase()}/#/policies`);
      await kp.getByLabel("Username").waitFor();
      assert.equal((await focused(kp)).id, "login-username", "the username field has focus on load");
      await kp.keyboard.type(EDITOR.name);
      await kp.keyboard.press("Tab");
      assert.equal((await focused(kp)).id, "login-password");
      await kp.keyboard.type(EDITOR.password);
      await kp.keyboard.press("Enter");
      await row(kp, KEYS).waitFor();
      let f = await focused(kp);
      assert.deepEqual([f.tag, f.text], ["h1", "Policies"], `after signing in focus is on the heading, not ${JSON.stringify(f)}`);

      // Edit and save.
      await tabTo(kp, (x) => x.label === `Edit ${KEYS}`, `the Edit link of ${KEYS}`);
      await kp.keyboard.press("Enter");
      await kp.waitForFunction(() => document.activeElement?.id === "f-apps-search");
      await tabTo(kp, (x) => x.id === "f-alg-token_bucket", "the algorithm chosen, after the apps", 12);
      await kp.keyboard.press("Tab");
      assert.equal((await focused(kp)).id, "f-max", "Tab goes from the algorithms (one stop) to Max permits");
      await kp.keyboard.press("Control+A");
      await kp.keyboard.type("12");
      await kp.keyboard.press("Enter");
      await kp.waitForFunction(() => location.hash === "#/policies" && document.activeElement?.tagName === "H1");
      f = await focused(kp);
      assert.deepEqual([f.tag, f.text], ["h1", "Policies"], `after saving focus is on the list's heading, not ${JSON.stringify(f)}`);
      const saved = await pageRpc(kp, "PolicyService/GetPolicy", { name: KEYS });
      assert.equal(saved.json.policy.maxPermits, "12", "the keyboard edit was saved");
      await row(kp, KEYS).waitFor();
      await kp.waitForFunction((n) => document.querySelector(`tr[data-policy="${n}"] .rate`) !== null, KEYS);

      // Delete from the row.
      const order = await kp.locator("tr[data-policy]").evaluateAll((trs) => trs.map((tr) => tr.dataset.policy));
      const at = order.indexOf(KEYS);
      const expect = order[at + 1] ?? order[at - 1];
      await tabTo(kp, (x) => x.label === `Delete ${KEYS}`, `the Delete button of ${KEYS}`);
      await kp.keyboard.press("Enter");
      await kp.getByRole("dialog").waitFor();
      assert.equal((await focused(kp)).id, "delete-cancel", "the dialog opens with focus on Cancel");
      await kp.keyboard.press("Tab");
      assert.equal((await focused(kp)).id, "delete-confirm", "Tab moves to the Delete button");
      await kp.keyboard.press("Enter");
      await kp.getByRole("dialog").waitFor({ state: "detached" });
      await row(kp, KEYS).waitFor({ state: "detached" });
      await focusLeavesBody(kp, `deleting ${KEYS}`);
      f = await focused(kp);
      assert.equal(f.policy, expect, `after deleting ${KEYS} focus is on the neighbouring row (${expect}), not ${JSON.stringify(f)}`);
      assert.match(f.cls, /policy-link/, `focus is on ${expect}'s link: ${JSON.stringify(f)}`);
      await sleep(2 * LIST_POLL_MS_TEST);
      f = await focused(kp);
      assert.equal(f.policy, expect, `focus stays there across list refreshes: ${JSON.stringify(f)}`);
      const gone = await pageRpc(kp, "PolicyService/GetPolicy", { name: KEYS });
      assert.equal(gone.status, 404, JSON.stringify(gone));
    } finally {
      T.currentPage = page;
      await ctx.close();
    }
  });

  step("delete asks for confirmation and sends the version shown", async () => {
    await page.getByRole("button", { name: `Delete ${POLICY}` }).click();
    const dlg = page.getByRole("dialog");
    await dlg.waitFor();
    // version 4: created, two saves in the conflict step, colocate checked
    assert.match(await dlg.innerText(), new RegExp(`${POLICY}[\\s\\S]*version 4`));
    await shot(page, "12-delete-confirm");
    await checkA11y(page, "delete dialog");
    await dlg.getByRole("button", { name: "Cancel" }).click();
    await dlg.waitFor({ state: "detached" });
    assert.equal(await row(page, POLICY).count(), 1, "cancel keeps the policy");

    const sent = page.waitForRequest((req) => req.url().endsWith("/permit.v1.PolicyService/DeletePolicy"));
    await page.getByRole("button", { name: `Delete ${POLICY}` }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete policy" }).click();
    const body = JSON.parse((await sent).postData());
    assert.deepEqual({ name: body.name, version: String(body.version) }, { name: POLICY, version: "4" });
    await row(page, POLICY).waitFor({ state: "detached" });
    await focusLeavesBody(page, `deleting ${POLICY}`);
    const f = await focused(page);
    assert.equal(f.policy, XSS_POLICY, `after deleting ${POLICY} focus moves to the remaining row: ${JSON.stringify(f)}`);
    const gone = await pageRpc(page, "PolicyService/GetPolicy", { name: POLICY });
    assert.equal(gone.status, 404, JSON.stringify(gone));
    assert.equal(gone.json.code, "not_found");
  });

  step("the table and the detail page fit a phone-width window", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
    await sleep(300);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      "no horizontal scrolling at 390 px");
    assert.ok(await row(page, XSS_POLICY).getByRole("button", { name: `Delete ${XSS_POLICY}` }).isVisible());
    await shot(page, "13-phone-table");
    await checkA11y(page, "policies at 390 px");
    await page.goto(`${adminBase()}/#/policy/${XSS_POLICY}`);
    await page.locator("#traffic-chart svg").waitFor();
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      "no horizontal scrolling on the detail page at 390 px");
    await shot(page, "14-phone-detail");
    await checkA11y(page, "detail at 390 px");
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  step("a viewer sees no write controls and the server refuses its writes", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    try {
      const vp = watch(await ctx.newPage(), "bob");
      // Keyboard only: the username field has focus, Tab moves on, Enter submits.
      await vp.goto(`${adminBase()}/#/policies`);
      await vp.getByLabel("Username").waitFor();
      assert.equal(await vp.evaluate(() => document.activeElement?.id), "login-username");
      await vp.keyboard.type(VIEWER.name);
      await vp.keyboard.press("Tab");
      assert.equal(await vp.evaluate(() => document.activeElement?.id), "login-password");
      await vp.keyboard.type(VIEWER.password);
      await vp.keyboard.press("Enter");
      await row(vp, XSS_POLICY).waitFor();
      // …and Tab reaches the policy's link.
      let reached = false;
      for (let i = 0; i < 12 && !reached; i++) {
        await vp.keyboard.press("Tab");
        reached = await vp.evaluate((n) => document.activeElement?.textContent === n && document.activeElement.tagName === "A", XSS_POLICY);
      }
      assert.ok(reached, "the policy link is reachable with Tab");
      assert.match(await vp.locator("#user-role").textContent(), /viewer/);
      assert.equal(await vp.getByRole("link", { name: "New policy" }).count(), 0);
      assert.equal(await vp.getByRole("link", { name: /^Edit/ }).count(), 0);
      assert.equal(await vp.getByRole("button", { name: /^Delete/ }).count(), 0);
      await shot(vp, "15-viewer-table");
      await checkA11y(vp, "viewer, policies");

      await row(vp, XSS_POLICY).getByRole("link", { name: XSS_POLICY, exact: true }).click();
      await vp.getByRole("heading", { name: XSS_POLICY, level: 1 }).waitFor();
      await vp.getByRole("button", { name: "Inspect", exact: true }).click();
      await vp.locator("#inspect-remaining").waitFor();
      assert.equal(await vp.locator("#edit-policy").count(), 0);
      assert.equal(await vp.locator("#delete-policy").count(), 0);
      assert.equal(await vp.locator("#inspect-reset").count(), 0);
      await checkA11y(vp, "viewer, detail");

      await vp.goto(`${adminBase()}/#/policy/${XSS_POLICY}/edit`);
      await vp.getByText("can view policies but not change them").waitFor();
      assert.equal(await vp.locator("#save-policy").count(), 0);
      await checkA11y(vp, "viewer, edit refused");

      // At 420 px and below the role badge must still say the access is read-only.
      for (const width of [420, 360]) {
        await vp.setViewportSize({ width, height: 800 });
        await vp.goto(`${adminBase()}/#/policies`);
        await row(vp, XSS_POLICY).waitFor();
        const role = vp.locator("#user-role");
        assert.ok(await role.isVisible(), `the viewer's role badge is visible at ${width} px`);
        assert.match(await role.innerText(), /read-only/, `the badge at ${width} px says read-only`);
        assert.ok(await vp.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
          `no horizontal scrolling for a viewer at ${width} px`);
      }
      await shot(vp, "15b-viewer-phone");
      await vp.emulateMedia({ colorScheme: "dark" });
      await shot(vp, "15c-viewer-phone-dark");
      await vp.emulateMedia({ colorScheme: null });
      await checkA11y(vp, "viewer, policies at 360 px");
      await vp.setViewportSize({ width: 1280, height: 800 });

      const version = (await pageRpc(vp, "PolicyService/GetPolicy", { name: XSS_POLICY })).json.policy.version;
      const upd = await pageRpc(vp, "PolicyService/UpdatePolicy", {
        policy: { name: XSS_POLICY, apps: [APP], maxPermits: "1", rate: "1", failureMode: "open", enabled: true, version },
      });
      assert.equal(upd.status, 403, JSON.stringify(upd));
      assert.equal(upd.json.code, "permission_denied");
      const del = await pageRpc(vp, "PolicyService/DeletePolicy", { name: XSS_POLICY, version });
      assert.equal(del.status, 403, JSON.stringify(del));
      assert.equal(del.json.code, "permission_denied");
      const reset = await pageRpc(vp, "PolicyService/ResetBucket", { name: XSS_POLICY, key: "" });
      assert.equal(reset.status, 403, JSON.stringify(reset));
      const still = await pageRpc(vp, "PolicyService/GetPolicy", { name: XSS_POLICY });
      assert.equal(still.json.policy.version, version, "the viewer's writes changed nothing");
    } finally {
      await ctx.close();
    }
  });

  step("cross-origin POSTs are refused even with a valid session cookie", async () => {
    const cookies = await editorCtx.cookies(adminBase());
    assert.ok(cookies.length > 0, "the editor has a session cookie");
    const session = cookies.find((c) => c.name === "permitd_session");
    assert.ok(session, `cookie permitd_session is set (got ${cookies.map((c) => c.name).join(", ")})`);
    assert.equal(session.httpOnly, true, "the session cookie is HttpOnly");
    assert.equal(session.sameSite, "Strict", "the session cookie is SameSite=Strict");
    const cookie = cookies.map((c) => `${c.name}=${c.value}`).join("; ");

    const ok = await adminRpc("AdminAuthService/WhoAmI", {}, { Cookie: cookie, Origin: adminBase() });
    assert.equal(ok.status, 200, `the cookie works from the right origin: ${JSON.stringify(ok.json)}`);
    assert.equal(ok.json.username, EDITOR.name);

    const evilPolicy = { policy: { name: "evil", apps: ["*"], maxPermits: "1000000", rate: "1000", failureMode: "open", enabled: true } };
    const evil = await adminRpc("PolicyService/CreatePolicy", evilPolicy, { Cookie: cookie, Origin: "http://evil.example" });
    assert.equal(evil.status, 403, JSON.stringify(evil.json));
    assert.equal(evil.json.code, "permission_denied");
    assert.equal(evil.headers.get("access-control-allow-origin"), null, "no CORS headers");

    const bare = await adminRpc("PolicyService/CreatePolicy", evilPolicy, { Cookie: cookie });
    assert.equal(bare.status, 403, `no Origin at all: ${JSON.stringify(bare.json)}`);
    assert.equal(bare.json.code, "permission_denied");

    const delEvil = await adminRpc("PolicyService/DeletePolicy", { name: XSS_POLICY }, { Cookie: cookie, Origin: "http://evil.example" });
    assert.equal(delEvil.status, 403, JSON.stringify(delEvil.json));

    const list = await pageRpc(page, "PolicyService/ListPolicies", {});
    const names = (list.json.policies || []).map((p) => p.name);
    assert.ok(!names.includes("evil"), `no policy was created: ${names.join(", ")}`);
    assert.ok(names.includes(XSS_POLICY), "nothing was deleted");
  });

  // ---- the algorithms of issue 20 (each step leaves the list page and
  // the policies as it found them)

  step("format.js: each algorithm's limits and live state in words", () => {
    const L = (p) => fmt.describeLimits(p);
    assert.equal(L({ maxPermits: "10", rate: "0.033333333333" }),
      "Bursts of up to 10 permits, refilled at 2 per minute; empty to full in 5 min.");
    assert.equal(L({ algorithm: "fixed_window", maxPermits: "100", window: "1m" }),
      "At most 100 per 1 minute window, resetting at :00 every minute.");
    assert.equal(L({ algorithm: "fixed_window", maxPermits: "100", window: "1h" }),
      "At most 100 per 1 hour window, resetting at :00 every hour (UTC).");
    assert.equal(L({ algorithm: "fixed_window", maxPermits: "10000", window: "month" }),
      "At most 10,000 per calendar month (UTC), resetting at 00:00 UTC on the 1st of every month.");
    assert.equal(L({ algorithm: "fixed_window", maxPermits: "5", window: "15m" }),
      "At most 5 per 15 minute window, resetting every 15 minutes, on the clock (counted from 00:00 UTC).");
    assert.equal(L({ algorithm: "fixed_window", maxPermits: "5", window: "7s" }),
      "At most 5 per 7 second window, resetting every 7 seconds (windows counted from 1 January 1970 UTC, the same for every key).");
    assert.match(L({ algorithm: "sliding_window", maxPermits: "50", window: "90s" }), /^At most about 50 in any 90 seconds: /);
    assert.equal(L({ algorithm: "sliding_log", maxPermits: "5", window: "250ms" }),
      "At most 5 in any 250 milliseconds, exactly: each permit taken counts until it is 250 milliseconds old.");
    assert.equal(L({ algorithm: "concurrency", maxPermits: "10", leaseTtl: "30s" }),
      "At most 10 held at once; a lease not released expires after 30 seconds.");
    assert.equal(L({ algorithm: "concurrency", maxPermits: "1" }),
      "At most 1 held at once; a lease not released expires after 30 seconds.", "the server's default lease time-to-live");
    assert.equal(fmt.limitsShort({ algorithm: "fixed_window", maxPermits: "100", window: "1m" }), "100 / 1 minute window");
    assert.equal(fmt.limitsShort({ algorithm: "fixed_window", maxPermits: "100", window: "day" }), "100 / calendar day");
    assert.equal(fmt.limitsShort({ algorithm: "concurrency", maxPermits: "3" }), "3 held at once");
    assert.equal(fmt.limitsShort({ maxPermits: "3", rate: "0.5" }), "0.5 / s");

    assert.deepEqual(fmt.durationToSend("window", "90", "s"), { text: "90s", error: "" });
    assert.deepEqual(fmt.durationToSend("window", "1", "month"), { text: "month", error: "" });
    for (const bad of ["", "0", "1.5", "-1", "x"]) {
      assert.ok(fmt.durationToSend("window", bad, "m").error.startsWith("window:"), `window ${JSON.stringify(bad)} should be refused`);
    }
    assert.deepEqual(fmt.durationForEditing("90s"), { value: "90", unit: "s" });
    assert.deepEqual(fmt.durationForEditing("1d"), { value: "1", unit: "d" });
    assert.deepEqual(fmt.durationForEditing("month"), { value: "1", unit: "month" });
    assert.equal(fmt.parseDuration("250ms").ms, 250);
    assert.equal(fmt.parseDuration("1.5s"), null);

    assert.equal(fmt.fieldOfMessage('window "401d" is no duration: a whole number and a unit'), "window");
    assert.equal(fmt.fieldOfMessage("lease_ttl: refused for algorithm fixed_window"), "lease_ttl");
    assert.equal(fmt.fieldOfMessage("leaseTtl: x"), "lease_ttl");
    assert.equal(fmt.fieldOfMessage('algorithm "leaky" is not one of token_bucket, ...'), "algorithm");
    assert.equal(fmt.fieldOfMessage("rate: must be empty for algorithm fixed_window"), "rate");

    const B = (alg, b) => fmt.describeBucket(alg, b);
    assert.equal(B("fixed_window", { limit: "100", remaining: "97", resetAfterMs: "12000" }).summary,
      "97 of 100 left in this window, resets in 12 s");
    assert.equal(B("sliding_log", { limit: "5", remaining: "5" }).summary, "5 of 5 left now, nothing counted");
    assert.equal(B("concurrency", { limit: "10", remaining: "7", resetAfterMs: "30000" }).summary, "3 of 10 held");
    assert.equal(B("concurrency", { limit: "10", remaining: "7" }).level, 7, "the gauge shows the free slots");
    assert.equal(B("token_bucket", { limit: "10", tokens: 4.5, remaining: "4", resetAfterMs: "1000" }).summary,
      "4.5 tokens · full again in 1 s");
  });

  step("the form shows only the fields that fit the chosen algorithm, and says what the limits mean", async () => {
    const writes = [];
    const onRequest = (r) => {
      if (r.url().includes("/permit.v1.PolicyService/CreatePolicy")) writes.push(r.url());
    };
    page.on("request", onRequest);
    await page.goto(`${adminBase()}/#/new`);
    await page.locator("#f-name").waitFor();
    const shown = async () => ({
      rate: await page.locator("#f-rate").isVisible(),
      window: await page.locator("#f-window-unit").isVisible(),
      lease: await page.locator("#f-lease").isVisible(),
    });
    const summary = () => page.locator("#f-summary").textContent();
    assert.equal(await page.locator("#f-alg-token_bucket").isChecked(), true, "the token bucket is the default");
    assert.deepEqual(await shown(), { rate: true, window: false, lease: false });
    await fillPolicyForm(page, { max: 10, rate: 2, unit: "min" });
    assert.equal(await summary(), "Bursts of up to 10 permits, refilled at 2 per minute; empty to full in 5 min.");

    await page.locator("#f-alg-fixed_window").check();
    assert.deepEqual(await shown(), { rate: false, window: true, lease: false });
    assert.equal((await page.locator("label[for=f-max]").innerText()).replace("*", "").trim(), "Max permits per window");
    assert.equal(await page.locator("#f-window-unit option[value=month]").count(), 1, "a fixed window offers calendar units");
    await page.locator("#f-max").fill("100");
    await page.locator("#f-window").fill("1");
    await page.locator("#f-window-unit").selectOption("m");
    assert.equal(await summary(), "At most 100 per 1 minute window, resetting at :00 every minute.");
    await page.locator("#f-window-unit").selectOption("month");
    assert.equal(await page.locator("#f-window").isVisible(), false, "a calendar unit takes no number");
    assert.equal(await summary(), "At most 100 per calendar month (UTC), resetting at 00:00 UTC on the 1st of every month.");
    await shot(page, "05b-create-fixed-window");
    await checkA11y(page, "new policy, fixed window by the calendar");

    await page.locator("#f-alg-sliding_window").check();
    assert.equal(await page.locator("#f-window-unit option[value=month]").count(), 0, "only a fixed window offers calendar units");
    assert.equal(await page.locator("#f-window-unit").inputValue(), "m");
    assert.equal(await page.locator("#f-window").isVisible(), true);
    assert.match(await summary(), /^At most about 100 in any 1 minute: /);

    await page.locator("#f-alg-sliding_log").check();
    assert.equal(await summary(), "At most 100 in any 1 minute, exactly: each permit taken counts until it is 1 minute old.");
    await page.locator("#f-max").fill("20000");
    await fillPolicyForm(page, { name: "ui-log-too-big", apps: APP });
    await page.locator("#save-policy").click();
    await page.locator("#f-max-error").waitFor();
    assert.match(await page.locator("#f-max-error").textContent(), /at most 10,000 for a sliding log/i);
    assert.deepEqual(writes, [], "an invalid form sends nothing");

    await page.locator("#f-alg-concurrency").check();
    assert.deepEqual(await shown(), { rate: false, window: false, lease: true });
    assert.equal(await page.locator("#f-max-error").isVisible(), false, "20,000 held at once is a valid limit");
    assert.equal((await page.locator("label[for=f-max]").innerText()).replace("*", "").trim(), "Max held at once");
    assert.deepEqual([await page.locator("#f-lease").inputValue(), await page.locator("#f-lease-unit").inputValue()], ["30", "s"],
      "the lease time-to-live starts at the server's default");
    await page.locator("#f-max").fill("10");
    assert.equal(await summary(), "At most 10 held at once; a lease not released expires after 30 seconds.");
    await shot(page, "05c-create-concurrency");
    await checkA11y(page, "new policy, concurrency");

    await page.locator("#f-alg-token_bucket").check();
    assert.deepEqual(await shown(), { rate: true, window: false, lease: false });
    page.off("request", onRequest);
    await page.getByRole("link", { name: "Cancel" }).click();
    await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
  });

  step("each algorithm is created through the form and shown in words in the list and on its page", async () => {
    const made = [
      { name: "ui-fixed", alg: "fixed_window", label: "Fixed window", max: 100, window: ["1", "m"],
        stored: { window: "1m" }, short: "100 / 1 minute window",
        sentence: "At most 100 per 1 minute window, resetting at :00 every minute." },
      { name: "ui-month", alg: "fixed_window", label: "Fixed window", max: 10000, window: [null, "month"],
        stored: { window: "month" }, short: "10,000 / calendar month",
        sentence: "At most 10,000 per calendar month (UTC), resetting at 00:00 UTC on the 1st of every month." },
      { name: "ui-sliding", alg: "sliding_window", label: "Sliding window", max: 50, window: ["90", "s"],
        stored: { window: "90s" }, short: "~50 / 90 seconds, sliding" },
      { name: "ui-log", alg: "sliding_log", label: "Sliding log", max: 5, window: ["2", "h"],
        stored: { window: "2h" }, short: "5 in any 2 hours",
        sentence: "At most 5 in any 2 hours, exactly: each permit taken counts until it is 2 hours old." },
      { name: "ui-conc", alg: "concurrency", label: "Concurrency", max: 3, lease: ["2", "m"],
        stored: { leaseTtl: "2m" }, short: "3 held at once",
        sentence: "At most 3 held at once; a lease not released expires after 2 minutes." },
    ];
    try {
      for (const m of made) {
        await page.goto(`${adminBase()}/#/new`);
        await page.locator("#f-name").waitFor();
        await fillPolicyForm(page, { name: m.name, apps: APP, max: m.max });
        await page.locator(`#f-alg-${m.alg}`).check();
        if (m.window) {
          await page.locator("#f-window-unit").selectOption(m.window[1]);
          if (m.window[0] !== null) await page.locator("#f-window").fill(m.window[0]);
        }
        if (m.lease) {
          await page.locator("#f-lease").fill(m.lease[0]);
          await page.locator("#f-lease-unit").selectOption(m.lease[1]);
        }
        const sent = page.waitForRequest((r) => r.url().endsWith("/permit.v1.PolicyService/CreatePolicy"));
        await page.locator("#save-policy").click();
        const body = JSON.parse((await sent).postData()).policy;
        assert.equal(body.algorithm, m.alg);
        assert.equal(body.rate, undefined, `no rate is sent for ${m.alg}: ${JSON.stringify(body)}`);
        assert.equal(body.window, m.stored.window, `the window sent for ${m.name}`);
        assert.equal(body.leaseTtl, m.stored.leaseTtl, `the lease time-to-live sent for ${m.name}`);
        await row(page, m.name).waitFor();
        const got = await pageRpc(page, "PolicyService/GetPolicy", { name: m.name });
        assert.equal(got.status, 200, JSON.stringify(got));
        assert.equal(got.json.policy.algorithm, m.alg, JSON.stringify(got.json));
        for (const [k, v] of Object.entries(m.stored)) assert.equal(got.json.policy[k], v, `${m.name}.${k}: ${JSON.stringify(got.json)}`);
        assert.ok(!got.json.policy.rate, `${m.name} has no rate: ${JSON.stringify(got.json)}`);
        const cell = row(page, m.name).locator("td").nth(3);
        assert.equal((await cell.locator(".rate").innerText()).trim(), m.short);
        assert.equal((await cell.locator(".algo").innerText()).trim(), m.label);
      }
      await shot(page, "06c-table-algorithms");
      await checkA11y(page, "policies of every algorithm");

      for (const m of made.filter((x) => x.sentence)) {
        await page.goto(`${adminBase()}/#/policy/${m.name}`);
        await page.locator("#limits-sentence").waitFor();
        assert.equal(await page.locator("#limits-sentence").textContent(), m.sentence);
        assert.match(await page.locator(".settings").innerText(), new RegExp(`Algorithm\\s+${m.label}`));
      }

      // The edit form comes back with the algorithm and its limits.
      await page.goto(`${adminBase()}/#/policy/ui-month/edit`);
      await page.locator("#f-apps-search").waitFor();
      assert.equal(await page.locator("#f-alg-fixed_window").isChecked(), true);
      assert.equal(await page.locator("#f-window-unit").inputValue(), "month");
      assert.equal(await page.locator("#f-rate").isVisible(), false);
      await page.locator("#f-window-unit").selectOption("d");
      await page.locator("#f-window").fill("7");
      await page.locator("#save-policy").click();
      await page.waitForFunction(() => location.hash === "#/policies");
      const edited = await pageRpc(page, "PolicyService/GetPolicy", { name: "ui-month" });
      assert.equal(edited.json.policy.window, "7d", JSON.stringify(edited.json));
      assert.equal(edited.json.policy.algorithm, "fixed_window");
    } finally {
      for (const m of made) {
        const p = await pageRpc(page, "PolicyService/GetPolicy", { name: m.name });
        if (p.status === 200) await pageRpc(page, "PolicyService/DeletePolicy", { name: m.name, version: p.json.policy.version });
      }
    }
  });

  step("the inspector speaks each algorithm's state: a window's count and reset, the log's entries, the leases held", async () => {
    const made = [];
    try {
      for (const [name, p] of [["ui-win", { algorithm: "fixed_window", window: "1h" }], ["ui-lease", { algorithm: "concurrency", leaseTtl: "1m" }],
        ["ui-log", { algorithm: "sliding_log", window: "1h" }]]) {
        const r = await pageRpc(page, "PolicyService/CreatePolicy", {
          policy: { name, apps: [APP], maxPermits: "10", failureMode: "open", enabled: true, ...p },
        });
        assert.equal(r.status, 200, JSON.stringify(r));
        made.push(r.json.policy);
      }
      for (let i = 0; i < 3; i++) assert.equal((await acquire({ bucket: "ui-win" })).allowed, true);
      const leases = [];
      for (let i = 0; i < 2; i++) {
        const r = await acquire({ bucket: "ui-lease", permits: i + 1 });
        assert.equal(r.allowed, true);
        leases.push(r.leaseId);
        await new Promise((ok) => setTimeout(ok, 20));   // so that their expiries differ
      }
      assert.equal((await acquire({ bucket: "ui-log", permits: 2 })).allowed, true);
      await new Promise((ok) => setTimeout(ok, 1200));
      assert.equal((await acquire({ bucket: "ui-log" })).allowed, true);

      await page.goto(`${adminBase()}/#/policy/ui-win`);
      await page.getByRole("button", { name: "Inspect", exact: true }).click();
      await page.waitForFunction(() => /^7 of 10 left in this window, resets in \d/.test(document.querySelector("#inspect-summary")?.textContent || ""));
      assert.equal(await page.locator("#inspect-taken").textContent(), "3");
      assert.match(await page.locator("section[aria-labelledby=shared-h] [role=meter]").getAttribute("aria-valuetext"),
        /^7 of 10 left in this window/);
      assert.equal(await page.locator("#inspect-reset").innerText(), "Reset the count");
      assert.match(await page.locator("#inspect-window").textContent(), /^The current window ends in \d.*; the count starts again from 0 then\.$/);
      await checkA11y(page, "detail, fixed window inspected");
      await page.locator("#inspect-reset").click();
      await page.waitForFunction(() => / holds 7 of 10; reset gives back 10\.$/.test(document.querySelector("#reset-holds")?.textContent || ""));
      assert.equal(await page.locator("#reset-confirm").innerText(), "Reset the count");
      await page.locator("#reset-confirm").click();
      await page.waitForFunction(() => /^10 of 10 left in this window/.test(document.querySelector("#inspect-summary")?.textContent || ""));
      assert.equal(await page.locator("#inspect-reservations").textContent(), "No reservation of this policy is outstanding.");
      // the policy page's own card says so too, without the inspector (GetPolicyReservations)
      await page.waitForFunction(() => document.querySelector("#policy-reservations")?.textContent === "No reservation of this policy is outstanding.");
      // a reservation (issue 38): the inspector says what the policy's outstanding ones hold
      const rsv = await fetch(`http://127.0.0.1:${T.server.apiPort}/permit.v1.RateLimitService/Reserve`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ app: APP, items: [{ bucket: "ui-win", key: "someone", estimate: 2 }] }),
      });
      assert.equal((await rsv.json()).allowed, true);
      await page.waitForFunction(() => /^Outstanding reservations of this policy \(all keys\): 1 holding 2 permits, the oldest held for /
        .test(document.querySelector("#inspect-reservations")?.textContent || ""));
      await page.waitForFunction(() => /^1 reservation holds 2 permits; the oldest was made .+ ago\.$/
        .test(document.querySelector("#policy-reservations")?.textContent || ""));
      await checkA11y(page, "detail with an outstanding reservation");

      await page.goto(`${adminBase()}/#/policy/ui-lease`);
      await page.getByRole("button", { name: "Inspect", exact: true }).click();
      await page.waitForFunction(() => document.querySelector("#inspect-summary")?.textContent === "3 of 10 held");
      assert.match(await page.locator("#inspect-full").textContent(), /^in .* at the latest$/);
      assert.equal(await page.locator("#inspect-reset").innerText(), "Free all leases");
      // the leases held, soonest expiry first, each by the start of its id only
      const rows = page.locator("#inspect-leases tbody tr");
      await rows.nth(1).waitFor();
      assert.equal(await rows.count(), 2);
      for (const [i, id] of leases.entries()) {
        const cells = await rows.nth(i).locator("td").allInnerTexts();
        assert.equal(cells[0], `${id.slice(0, 8)}…`);
        assert.equal(cells[1], String(i + 1));
        assert.match(cells[2], /^(5\d s|1 min)$/, `lease ${i} expires in about a minute: ${cells[2]}`);
      }
      const html = await page.content();
      for (const id of leases) assert.ok(!html.includes(id.slice(0, 9)), "no lease id is shown beyond its first 8 characters");
      await shot(page, "08b-inspector-concurrency");
      await checkA11y(page, "detail, concurrency inspected");

      // the log's entries: a take of 2, then one of 1, newest first, on a timeline
      await page.goto(`${adminBase()}/#/policy/ui-log`);
      await page.getByRole("button", { name: "Inspect", exact: true }).click();
      const lines = page.locator("#inspect-log li");
      await lines.nth(1).waitFor();
      const said = await lines.allInnerTexts();
      assert.equal(said.length, 2, said.join(" | "));
      assert.match(said[0], /^1 permit (just now|\d+ ms ago|\d+(\.\d)? s ago)$/);
      assert.match(said[1], /^2 permits \d+(\.\d)? s ago$/);
      assert.equal(await page.locator(".log-timeline .log-mark").count(), 2);
      assert.equal(await page.getByRole("list", { name: "Entries in the log" }).count(), 1);
      await shot(page, "08c-inspector-sliding-log");
      await checkA11y(page, "detail, sliding log inspected");
    } finally {
      for (const p of made) await pageRpc(page, "PolicyService/DeletePolicy", { name: p.name, version: p.version });
    }
  });

  step("a server validation error of a limit is shown at its field", async () => {
    await page.goto(`${adminBase()}/#/new`);
    await page.locator("#f-name").waitFor();
    await fillPolicyForm(page, { name: "ui-too-long", apps: APP, max: 5 });
    await page.locator("#f-alg-sliding_log").check();
    // 401 days: the form checks the form of a duration; its range (1ms to
    // 400d) is the server's, whose message names the field and the value.
    await page.locator("#f-window").fill("401");
    await page.locator("#f-window-unit").selectOption("d");
    await page.locator("#save-policy").click();
    const err = page.locator("#f-window-error");
    await err.waitFor();
    assert.match(await err.textContent(), /401d/, "the server's message names the value");
    assert.equal(await page.locator("#f-window").getAttribute("aria-invalid"), "true");
    assert.equal((await focused(page)).id, "f-window", "focus goes to the field the server refused");
    assert.equal(await page.locator("#form-error").isVisible(), false, "the error is at the field, not above the form");
    await shot(page, "05d-create-server-error");
    await checkA11y(page, "new policy, window refused by the server");
    await page.locator("#f-window").fill("40");
    await page.locator("#f-window").blur();
    assert.equal(await err.isVisible(), false, "changing the value clears the server's error");
    await page.getByRole("link", { name: "Cancel" }).click();
    await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
    const gone = await pageRpc(page, "PolicyService/GetPolicy", { name: "ui-too-long" });
    assert.equal(gone.status, 404, "nothing was created");
  });

  step("10,000 policies: a page at a time, filtered and sorted on the server, paged on", async () => {
    // Issue 22. Made quickly with one INSERT ... SELECT from MariaDB's
    // sequence table; "aaa-" sorts them before the policies of the steps.
    const BIG = 10000;
    mariadb(`USE \`${DB}\`; INSERT INTO policies (name, max_permits, rate, description, created_by, updated_by) ` +
      `SELECT CONCAT('aaa-bulk-', LPAD(seq, 5, '0')), 10, 1, CONCAT('bulk policy ', seq), 'test', 'test' FROM seq_1_to_${BIG}`);
    // Gone again however this step ends: left in place, they would take the
    // first page from the steps after it.
    try {
      await page.goto(`${adminBase()}/#/policy/${XSS_POLICY}`);
      await page.getByRole("heading", { name: XSS_POLICY, level: 1 }).waitFor();
      let t = Date.now();
      await page.goto(`${adminBase()}/#/policies`);
      await row(page, "aaa-bulk-00001").waitFor();
      const firstPaint = Date.now() - t;
      assert.equal(await page.locator("tbody tr").count(), 50, "one page of 50 rows, not 10,000");
      await page.locator("#page-status").filter({ hasText: /^1–50 of 10,0\d\d$/ }).waitFor();
      await page.getByRole("button", { name: "Next" }).click();
      await row(page, "aaa-bulk-00051").waitFor();
      await page.locator("#page-status").filter({ hasText: /^51–100 of / }).waitFor();
      assert.equal(await row(page, "aaa-bulk-00001").count(), 0);
      await checkA11y(page, "policies, second page of 10,000");
      await page.getByRole("button", { name: "Previous" }).click();
      await row(page, "aaa-bulk-00001").waitFor();
      // A filter keystroke: the server filters. The page asks at once (it
      // waited 120 ms for more typing, most of the 150 ms a keystroke may
      // take): the ListPolicies request starts within the keystroke's own
      // task (its listener or the promise jobs after it), before any timer
      // could run. Told by order, not by the clock, so a loaded machine
      // cannot fail it: the flag is cleared by a 0 ms timer set in the
      // input event, which runs only after that task and its jobs.
      const filter = page.getByLabel("Filter policies");
      await page.evaluate(() => {
        window.__askedInKeystroke = null;
        const fetch0 = window.fetch;
        window.fetch = function (input, init) {
          const url = typeof input === "string" ? input : input.url;
          if (window.__askedInKeystroke === null && window.__inKeystroke !== undefined && url.endsWith("/ListPolicies"))
            window.__askedInKeystroke = window.__inKeystroke;
          return fetch0.call(this, input, init);
        };
        // (capturing: before the page's own listener, which may ask at once)
        document.addEventListener("input", () => {
          window.__inKeystroke = true;
          setTimeout(() => { window.__inKeystroke = false; }, 0);
        }, { capture: true, once: true });
      });
      t = Date.now();
      await filter.fill("bulk policy 9999");
      await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 1 &&
        document.querySelector('tr[data-policy="aaa-bulk-09999"]'));
      const filterMs = Date.now() - t;
      const askedInKeystroke = await page.evaluate(() => window.__askedInKeystroke);
      assert.equal(askedInKeystroke, true, "the filter was asked for in the keystroke's task, not after a timer");
      await page.waitForFunction(() => document.querySelector("#policy-filter-status")?.textContent?.startsWith("1 of 10,0") ||
        /^1 of 100\d\d policies match/.test(document.querySelector("#policy-filter-status")?.textContent ?? ""));
      // What a live refresh moves: the page on screen with its gauges.
      const refresh = await page.evaluate(async () => {
        const t0 = performance.now();
        const r = await fetch("/permit.v1.PolicyService/ListPolicies", {
          method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ includeBuckets: true, pageSize: 50 }) });
        const text = await r.text();
        return { status: r.status, bytes: text.length, ms: performance.now() - t0 };
      });
      assert.equal(refresh.status, 200);
      console.log(`10,000 policies: first paint ${firstPaint} ms, a filter ${filterMs} ms (asked within the keystroke: ${askedInKeystroke}), ` +
        `a refresh ${refresh.bytes} bytes in ${refresh.ms.toFixed(1)} ms`);
      // Generous: the targets (1 s, 150 ms, 100 KB) are measured above, on a
      // machine shared with other builds.
      assert.ok(firstPaint < 10_000, `first paint ${firstPaint} ms`);
      assert.ok(filterMs < 5_000, `filter ${filterMs} ms`);
      assert.ok(refresh.bytes < 100 * 1024, `a refresh moved ${refresh.bytes} bytes`);
      // Sorted by bucket level on the server; then back to names.
      await filter.fill("");
      await page.getByLabel("Sort by").selectOption("level");
      await page.locator("#page-status").filter({ hasText: /^1–50 of 10,0\d\d$/ }).waitFor();
      await checkA11y(page, "policies, 10,000 sorted by level");
      await page.getByLabel("Sort by").selectOption("name");
      await row(page, "aaa-bulk-00001").waitFor({ timeout: 30_000 });
    } finally {
      mariadb(`DELETE FROM \`${DB}\`.policies WHERE name LIKE 'aaa-bulk-%'`);
    }
  }, 180_000);

  // ---- apps and their API keys (issue 21). The main permitd runs with
  // --app-auth off; these steps start a second one on the same MySQL and
  // Redis prefix with --app-auth keys and acquire from it with the keys
  // issued in the UI (it learns of a key, a revoke, a disable from the
  // change notice, or within one 500 ms sync pass).

  const KEY_APP = "ui-keyed-app";
  const KEY_POLICY = "ui-keyed";
  let issuedPrefix = "";

  // Acquire from the keyed permitd with key (or none): the HTTP status and body.
  async function keyedAcquire(key) {
    const res = await fetch(`http://127.0.0.1:${keyed.apiPort}/permit.v1.RateLimitService/Acquire`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(key ? { Authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ bucket: KEY_POLICY }),
    });
    return { status: res.status, json: await res.json().catch(() => null) };
  }
  // Until the keyed permitd answers want (it reloads keys on a notice, or
  // every 500 ms): the last answer.
  async function keyedAcquireUntil(key, want, what) {
    const deadline = Date.now() + 5000;
    let r;
    do {
      r = await keyedAcquire(key);
      if (r.status === want) return r;
      await sleep(100);
    } while (Date.now() < deadline);
    assert.fail(`${what}: Acquire with the key answered ${r.status} ${JSON.stringify(r.json)}, not ${want}, within 5 s`);
  }
  const appCard = (p, name) => p.locator(`section[data-app="${name}"]`);
  // Until the last toast has faded out: axe would weigh the contrast of a
  // toast caught half-transparent, which is no state of the page.
  async function toastGone(p) {
    await p.waitForFunction(() => !document.querySelector("#toast")?.classList.contains("show"), null, { timeout: 6000 });
    await sleep(400);
  }

  step("the Apps page: create an app, issue a key shown once with a copy button, and the key acquires", async () => {
    keyed = await T.startPermitd(["--hotkeys-publish-ms", "300"], { appAuth: "keys" });
    await page.goto(`${adminBase()}/#/policies`);
    await page.getByRole("link", { name: "Apps", exact: true }).click();
    await page.getByRole("heading", { name: "Apps", level: 1 }).waitFor();
    assert.equal(await page.getByRole("link", { name: "Apps", exact: true }).getAttribute("aria-current"), "page");
    await appCard(page, APP).waitFor();
    assert.match(await appCard(page, APP).innerText(), new RegExp(`Policies:\\s+${XSS_POLICY}`), "the policies that list the app");
    assert.equal(await appCard(page, "*").count(), 0, "* is no app card");

    // Create an app.
    await page.getByRole("button", { name: "New app" }).click();
    await page.getByRole("dialog", { name: "New app" }).waitFor();
    await page.locator("#app-name").fill("bad name!");
    await page.locator("#app-create").click();
    await page.locator("#app-name-error").waitFor();
    assert.match(await page.locator("#app-name-error").textContent(), /letters, digits/);
    assert.equal((await focused(page)).id, "app-name");
    await page.locator("#app-name").fill(KEY_APP);
    await page.locator("#app-desc").fill("issues keys in the UI test");
    await page.locator("#app-create").click();
    await appCard(page, KEY_APP).waitFor();
    await page.waitForFunction((n) => document.activeElement?.closest("section[data-app]")?.dataset.app === n
      && document.activeElement.tagName === "H2", KEY_APP);
    assert.match(await appCard(page, KEY_APP).innerText(), /No keys yet/);
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: KEY_POLICY, apps: [KEY_APP], maxPermits: "100", rate: "10", failureMode: "open", enabled: true },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    assert.equal((await keyedAcquire(null)).status, 401, "without a key the keyed permitd answers 401");

    // Issue a key, by keyboard from the app's button.
    await editorCtx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: adminBase() });
    await page.goto(`${adminBase()}/#/apps`);
    await appCard(page, KEY_APP).waitFor();
    await appCard(page, KEY_APP).getByRole("button", { name: `Issue key for ${KEY_APP}` }).focus();
    await page.keyboard.press("Enter");
    const dlg = page.getByRole("dialog");
    await dlg.waitFor();
    assert.equal((await focused(page)).id, "key-expiry", "the dialog opens on the expiry");
    await checkA11y(page, "issue key dialog");
    await page.locator("#key-expiry").selectOption({ label: "30 days" });
    const answered = page.waitForResponse((r) => r.url().endsWith("/permit.v1.AppService/IssueKey"));
    await page.locator("#key-issue").click();
    const issued = await (await answered).json();
    const key = issued.key;
    issuedPrefix = issued.info.prefix;
    assert.match(key, /^pk_[0-9a-f]{16}_/, `IssueKey answered a key: ${JSON.stringify(issued.info)}`);
    assert.ok(key.startsWith(`${issuedPrefix}_`));
    const days = (Date.parse(issued.info.expiresAt) - Date.now()) / 86400e3;
    assert.ok(days > 29.9 && days < 30.1, `the key expires in 30 days: ${issued.info.expiresAt}`);

    // Shown once: the whole key in a read-only field that has focus, the
    // warning that it cannot be shown again, a copy button that copies it.
    await page.locator("#issued-key").waitFor();
    assert.equal(await page.locator("#issued-key").inputValue(), key);
    assert.equal(await page.locator("#issued-key").getAttribute("readonly"), "");
    assert.equal((await focused(page)).id, "issued-key", "focus is on the key");
    assert.match(await page.locator("#key-warning").innerText(), /cannot be shown again/);
    await shot(page, "17-key-issued");
    await checkA11y(page, "key issued, shown once");
    await page.getByRole("button", { name: "Copy key" }).click();
    await page.locator("#key-copied").filter({ hasText: "Copied" }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key, "the copy button copied the whole key");
    await page.keyboard.press("Escape");
    await dlg.waitFor({ state: "detached" });
    await page.waitForFunction(() => document.activeElement?.classList.contains("issue-key"));
    assert.equal((await focused(page)).label, `Issue key for ${KEY_APP}`, "focus goes back to the Issue key button");

    // After closing it is nowhere: not in the page, not in the list, not
    // after a reload; the prefix is.
    const row = appCard(page, KEY_APP).locator(`tr[data-key="${issuedPrefix}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /Active/);
    assert.match(await row.innerText(), /not seen/);
    const secret = key.slice(issuedPrefix.length + 1);
    for (const when of ["after closing", "after a reload"]) {
      const html = await page.content();
      assert.ok(html.includes(issuedPrefix), `the prefix is listed ${when}`);
      assert.ok(!html.includes(secret), `the secret is not in the page ${when}`);
      assert.equal(await page.locator("#toast").evaluate((t, x) => t.textContent.includes(x), secret), false);
      if (when === "after closing") {
        await page.reload();
        await appCard(page, KEY_APP).locator(`tr[data-key="${issuedPrefix}"]`).waitFor();
      }
    }
    const list = await pageRpc(page, "AppService/ListApps", {});
    assert.ok(!JSON.stringify(list.json).includes(secret), "ListApps carries no secret");
    await shot(page, "18-apps");
    await checkA11y(page, "apps with a key");

    // The key works: an Acquire with Authorization: Bearer on the keyed permitd.
    const ok = await keyedAcquireUntil(key, 200, "the issued key");
    assert.equal(ok.json.allowed, true, JSON.stringify(ok.json));

    // Disable the app (after a confirmation): its key answers 401; enable: 200.
    await appCard(page, KEY_APP).getByRole("button", { name: `Disable ${KEY_APP}` }).click();
    const dis = page.getByRole("dialog", { name: `Disable ${KEY_APP}?` });
    await dis.waitFor();
    assert.equal((await focused(page)).id, "disable-cancel");
    await dis.getByRole("button", { name: "Disable app" }).click();
    await dis.waitFor({ state: "detached" });
    await appCard(page, KEY_APP).getByRole("button", { name: `Enable ${KEY_APP}` }).waitFor();
    assert.match(await appCard(page, KEY_APP).innerText(), /Disabled/);
    await keyedAcquireUntil(key, 401, "the key of a disabled app");
    await appCard(page, KEY_APP).getByRole("button", { name: `Enable ${KEY_APP}` }).click();
    await appCard(page, KEY_APP).getByRole("button", { name: `Disable ${KEY_APP}` }).waitFor();
    await keyedAcquireUntil(key, 200, "the key of the app enabled again");

    // Revoke it, after a confirmation that names the prefix: then 401.
    await appCard(page, KEY_APP).getByRole("button", { name: `Revoke key ${issuedPrefix}` }).click();
    const rev = page.getByRole("dialog");
    await rev.waitFor();
    assert.equal(await page.locator("#revoke-title").textContent(), `Revoke key ${issuedPrefix}?`);
    assert.match(await rev.innerText(), new RegExp(`Key ${issuedPrefix} of ${KEY_APP} stops working`));
    assert.equal((await focused(page)).id, "revoke-cancel", "the dialog opens on Cancel");
    await shot(page, "19-revoke-confirm");
    await checkA11y(page, "revoke key dialog");
    await page.keyboard.press("Tab");
    assert.equal((await focused(page)).id, "revoke-confirm");
    await page.keyboard.press("Enter");
    await rev.waitFor({ state: "detached" });
    await appCard(page, KEY_APP).locator(`tr[data-key="${issuedPrefix}"]`).filter({ hasText: "Revoked" }).waitFor();
    assert.equal(await appCard(page, KEY_APP).getByRole("button", { name: `Revoke key ${issuedPrefix}` }).count(), 0,
      "a revoked key has no Revoke button");
    await focusLeavesBody(page, "revoking a key");
    const gone = await keyedAcquireUntil(key, 401, "the revoked key");
    assert.equal(gone.json.code, "unauthenticated", JSON.stringify(gone.json));
    await checkA11y(page, "apps with a revoked key");
  });

  step("the policy form picks apps from the list: searchable, * for any app", async () => {
    await toastGone(page);
    await page.goto(`${adminBase()}/#/new`);
    await appBox(page, KEY_APP).waitFor();
    const search = page.getByLabel("Find an app");
    await search.fill("keyed");
    await page.waitForFunction(() => /^1 of \d+ apps shown for “keyed”\.$/.test(document.querySelector("#f-apps-status")?.textContent || ""));
    assert.equal(await appBox(page, KEY_APP).isVisible(), true);
    assert.equal(await appBox(page, APP).isVisible(), false, "the search hides the apps that do not match");
    await search.press("Enter"); // ticks the one app left, does not submit
    assert.equal(await appBox(page, KEY_APP).isChecked(), true);
    assert.equal(new URL(page.url()).hash, "#/new", "Enter in the search did not submit the form");
    await search.fill("");
    await appBox(page, "*").check();
    assert.match(await page.locator("#f-apps-picked").textContent(), new RegExp(`Picked: \\* \\(any app\\), ${KEY_APP}\\.`));
    await checkA11y(page, "new policy, apps picked");
    await fillPolicyForm(page, { name: "ui-picked", max: 3, rate: 1, unit: "s" });
    const sent = page.waitForRequest((r) => r.url().endsWith("/permit.v1.PolicyService/CreatePolicy"));
    await page.locator("#save-policy").click();
    assert.deepEqual(JSON.parse((await sent).postData()).policy.apps, ["*", KEY_APP]);
    await row(page, "ui-picked").waitFor();
    // The edit form comes back with them ticked.
    await page.goto(`${adminBase()}/#/policy/ui-picked/edit`);
    await page.waitForFunction(() => document.querySelector("#f-max")?.value === "3");
    assert.equal(await appBox(page, KEY_APP).isChecked(), true);
    assert.equal(await appBox(page, "*").isChecked(), true);
    assert.equal(await appBox(page, APP).isChecked(), false);
    const p = await pageRpc(page, "PolicyService/GetPolicy", { name: "ui-picked" });
    await pageRpc(page, "PolicyService/DeletePolicy", { name: "ui-picked", version: p.json.policy.version });
  });

  step("a viewer sees apps and key prefixes, no issue or revoke control, and the server refuses its writes", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    try {
      const vp = watch(await ctx.newPage(), "bob (apps)");
      await login(vp, VIEWER);
      await vp.getByRole("link", { name: "Apps", exact: true }).click();
      await appCard(vp, KEY_APP).locator(`tr[data-key="${issuedPrefix}"]`).waitFor();
      assert.match(await appCard(vp, KEY_APP).innerText(), new RegExp(issuedPrefix));
      for (const name of [/^New app/, /^Issue/, /^Revoke/, /^Disable/, /^Enable/]) {
        assert.equal(await vp.getByRole("button", { name }).count(), 0, `no ${name} button for a viewer`);
      }
      await shot(vp, "20-viewer-apps");
      await checkA11y(vp, "viewer, apps");
      for (const [m, body] of [["CreateApp", { name: "ui-viewer-app" }], ["IssueKey", { app: KEY_APP }],
        ["RevokeKey", { prefix: issuedPrefix }], ["UpdateApp", { name: KEY_APP, state: "APP_STATE_DISABLED" }]]) {
        const r = await pageRpc(vp, `AppService/${m}`, body);
        assert.equal(r.status, 403, `${m} by a viewer: ${JSON.stringify(r)}`);
        assert.equal(r.json.code, "permission_denied");
      }
    } finally {
      await ctx.close();
    }
  });

  step("the Apps page fits a phone-width window, its link in the top bar", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
    await page.getByRole("link", { name: "Apps", exact: true }).click();
    await appCard(page, KEY_APP).waitFor();
    await toastGone(page);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), "no horizontal scrolling at 390 px");
    await shot(page, "21-phone-apps");
    await checkA11y(page, "apps at 390 px");
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  step("log out ends the session, and a second tab falls back to the login page", async () => {
    await page.goto(`${adminBase()}/#/policies`);
    await row(page, XSS_POLICY).waitFor();
    const second = watch(await editorCtx.newPage(), "alice (second tab)");
    await second.goto(`${adminBase()}/#/policy/${XSS_POLICY}`);
    await second.getByRole("heading", { name: XSS_POLICY, level: 1 }).waitFor();
    const cookies = await editorCtx.cookies(adminBase());
    const cookie = cookies.map((c) => `${c.name}=${c.value}`).join("; ");
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByLabel("Username").waitFor();
    await second.getByText("Your session has expired").waitFor({ timeout: 6000 });
    await second.getByLabel("Username").waitFor();
    await shot(second, "16-session-expired");
    await checkA11y(second, "login, session expired");
    await second.close();
    const who = await pageRpc(page, "AdminAuthService/WhoAmI", {});
    assert.equal(who.status, 401, JSON.stringify(who));
    const old = await adminRpc("AdminAuthService/WhoAmI", {}, { Cookie: cookie, Origin: adminBase() });
    assert.equal(old.status, 401, `the old session cookie no longer works: ${JSON.stringify(old.json)}`);
  });

  step("the UI raised no script errors and broke no Content-Security-Policy", () => {
    assert.deepEqual(T.pageErrors, []);
  });
});

// ---------------------------------------------------------------- users and audit (issue 23)
//
// A fresh database and permitd of their own (the suite above drops its
// own at its end): the admin carol, the editor alice and the viewer bob.
describe("users and audit pages in headless Chromium", () => {
  const ADMIN = { name: "carol", password: crypto.randomBytes(12).toString("hex") };
  const DAVE = { name: "dave", password: crypto.randomBytes(12).toString("hex") };
  let browser;
  let adminCtx;
  let page;

  const userRow = (p, name) => p.locator(`tr[data-user="${name}"]`);
  const sqlOne = (sql) => mariadb(`USE ${DB}; SELECT ${sql}`).trim().split("\n").slice(1).join("\n");

  async function signIn(ctx, user, heading = "Policies") {
    const p = watch(await ctx.newPage(), user.name);
    await p.goto(`${adminBase()}/#/policies`);
    await p.getByLabel("Username").fill(user.name);
    await p.getByLabel("Password").fill(user.password);
    await p.getByRole("button", { name: "Sign in" }).click();
    await p.getByRole("heading", { name: heading, level: 1 }).waitFor();
    return p;
  }

  before(async () => {
    // The first user, with no --role: an admin.
    const [out] = T.setUp([ADMIN, EDITOR, VIEWER]);
    assert.match(out, /\(admin\)/);
    await T.startPermitd(["--hotkeys-publish-ms", "300"]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    adminCtx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    adminCtx.setDefaultTimeout(15_000);
    page = await signIn(adminCtx, ADMIN);
    T.currentPage = page;
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await T.tearDown();
  });

  step("an admin adds a user, changes its role, resets its password, ends its sessions, disables, enables and deletes it", async () => {
    assert.equal(await page.locator("#user-role").innerText(), "admin");
    await page.getByRole("link", { name: "Users", exact: true }).click();
    await page.getByRole("heading", { name: "Users", level: 1 }).waitFor();
    for (const n of [ADMIN.name, EDITOR.name, VIEWER.name]) await userRow(page, n).waitFor();
    assert.equal(await userRow(page, ADMIN.name).getByLabel(`Role of ${ADMIN.name}`).inputValue(), "admin");
    await checkA11y(page, "users");

    // The password rule is the command line's.
    await page.getByLabel("User name").fill(DAVE.name);
    await page.locator("#nu-password").fill("short");
    await page.getByRole("button", { name: "Add user" }).click();
    await page.locator("#nu-error").getByText("at least 8").waitFor();
    await page.locator("#nu-password").fill(DAVE.password);
    await page.locator("#nu-role").selectOption("viewer");
    await page.getByRole("button", { name: "Add user" }).click();
    await userRow(page, DAVE.name).waitFor();
    assert.equal(sqlOne(`role, enabled FROM admin_users WHERE username = '${DAVE.name}'`), "viewer\t1");
    assert.equal(await userRow(page, DAVE.name).locator('td[data-label="Last changed by"]').innerText().then((t) => t.split(" ")[0]), ADMIN.name);

    // Role: the live session of dave follows.
    const daveCtx = await browser.newContext();
    const dave = await signIn(daveCtx, DAVE);
    await userRow(page, DAVE.name).getByLabel(`Role of ${DAVE.name}`).selectOption("editor");
    await page.locator("#toast").getByText(`${DAVE.name} is now editor`).waitFor();
    assert.equal((await pageRpc(dave, "AdminAuthService/WhoAmI", {})).json.role, "editor");

    // End sessions: dave's tab is signed out.
    await page.reload();
    await userRow(page, DAVE.name).getByRole("button", { name: `End sessions of ${DAVE.name}` }).click();
    await page.locator("#toast").getByText(`Ended the sessions of ${DAVE.name}`).waitFor();
    assert.equal((await pageRpc(dave, "AdminAuthService/WhoAmI", {})).status, 401);

    // Reset password: the new one works, the old one not.
    const fresh = crypto.randomBytes(12).toString("hex");
    await userRow(page, DAVE.name).getByRole("button", { name: `Reset password of ${DAVE.name}` }).click();
    await page.locator("#rp-password").fill(fresh);
    await checkA11y(page, "users, reset password dialog");
    await page.getByRole("button", { name: "Set password", exact: true }).click();
    await page.locator("#toast").getByText(`New password set for ${DAVE.name}`).waitFor();
    const wrong = await adminRpc("AdminAuthService/Login", { username: DAVE.name, password: DAVE.password }, { Origin: adminBase() });
    assert.equal(wrong.status, 401);
    DAVE.password = fresh;
    await daveCtx.close();
    const dave2Ctx = await browser.newContext();
    const dave2 = await signIn(dave2Ctx, DAVE);

    // Disable (asked first): signed out, no sign-in; enable again. The
    // state is read in the State cell, exactly: the row's own text has
    // "DisableDelete" (the buttons' text run together), which a substring
    // match of "Disabled" finds before the disable answered; the WhoAmI
    // below then raced SetUserEnabled and got 200 under load.
    const state = (text) => userRow(page, DAVE.name).locator('td[data-label="State"]').getByText(text, { exact: true });
    assert.equal(await state("Disabled").count(), 0);
    await userRow(page, DAVE.name).getByRole("button", { name: `Disable ${DAVE.name}` }).click();
    await page.getByRole("button", { name: "Disable user", exact: true }).click();
    await state("Disabled").waitFor();
    assert.equal((await pageRpc(dave2, "AdminAuthService/WhoAmI", {})).status, 401);
    const refused = await adminRpc("AdminAuthService/Login", { username: DAVE.name, password: DAVE.password }, { Origin: adminBase() });
    assert.equal(refused.status, 401);
    await userRow(page, DAVE.name).getByRole("button", { name: `Enable ${DAVE.name}` }).click();
    await state("Enabled").waitFor();
    await dave2Ctx.close();

    // The last enabled admin stays one: the refusal is shown as the server words it.
    await userRow(page, ADMIN.name).getByLabel(`Role of ${ADMIN.name}`).selectOption("editor");
    await page.locator("#users-error").getByText("last enabled admin").waitFor();
    assert.equal(await userRow(page, ADMIN.name).getByLabel(`Role of ${ADMIN.name}`).inputValue(), "admin");
    await shot(page, "30-users");
    await checkA11y(page, "users, last admin refused");

    // Delete (asked first).
    await userRow(page, DAVE.name).getByRole("button", { name: `Delete ${DAVE.name}` }).click();
    await page.getByRole("button", { name: "Delete user", exact: true }).click();
    await userRow(page, DAVE.name).waitFor({ state: "detached" });
    assert.equal(sqlOne(`COUNT(*) FROM admin_users WHERE username = '${DAVE.name}'`), "0");
    assert.equal(sqlOne(`GROUP_CONCAT(action ORDER BY id) FROM user_audit WHERE username = '${DAVE.name}'`),
      "create,role,sessions,password,disable,enable,delete");
  });

  step("editors and viewers neither see the Users page nor can use UserService", async () => {
    for (const who of [EDITOR, VIEWER]) {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const p = await signIn(ctx, who);
      assert.equal(await p.locator("#nav-users").isVisible(), false, `${who.name} sees the Users link`);
      await p.goto(`${adminBase()}/#/users`);
      await p.locator("#users-admins-only").waitFor();
      assert.equal(await p.locator("#users-table").count(), 0);
      await checkA11y(p, `users as ${who.name}`);
      for (const [m, b] of [["ListUsers", {}], ["SetUserRole", { username: who.name, role: "admin" }],
        ["AddUser", { username: "mallory", role: "admin", password: "long-enough-1" }]]) {
        const r = await pageRpc(p, `UserService/${m}`, b);
        assert.equal(r.status, 403, `${who.name} ${m}: ${JSON.stringify(r.json)}`);
      }
      await ctx.close();
    }
    assert.equal(sqlOne(`role FROM admin_users WHERE username = '${VIEWER.name}'`), "viewer");
  });

  step("the Audit page lists every kind by whom, with filters and pages", async () => {
    const ed = await signIn(await browser.newContext({ viewport: { width: 1280, height: 800 } }), EDITOR);
    const pol = { name: "audit-e2e", apps: ["*"], maxPermits: "10", rate: "1", enabled: true, failureMode: "closed" };
    let r = await pageRpc(ed, "PolicyService/CreatePolicy", { policy: pol });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    r = await pageRpc(ed, "PolicyService/UpdatePolicy", { policy: { ...r.json.policy, maxPermits: "20" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal((await pageRpc(ed, "AppService/CreateApp", { name: "audit-app" })).status, 200);
    assert.equal((await pageRpc(ed, "AppService/IssueKey", { app: "audit-app" })).status, 200);
    // Plain SQL: the MySQL user is the actor, and a deleted policy stays listed.
    mariadb(`USE ${DB}; UPDATE policies SET description = 'by hand' WHERE name = 'audit-e2e'`);
    // More than one page of changes.
    for (let i = 0; i < 26; i++) {
      r = await pageRpc(ed, "PolicyService/CreatePolicy", { policy: { ...pol, name: `audit-many-${String(i).padStart(2, "0")}` } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
    mariadb(`USE ${DB}; DELETE FROM policies WHERE name = 'audit-e2e'`);

    const v = await signIn(await browser.newContext({ viewport: { width: 1280, height: 800 } }), VIEWER);
    await v.getByRole("link", { name: "Audit", exact: true }).click();
    await v.getByRole("heading", { name: "Audit", level: 1 }).waitFor();
    const rows = v.locator("#audit-table tbody tr");
    await rows.first().waitFor();
    assert.equal(await rows.count(), 25);
    const first = rows.first();
    assert.equal(await first.getAttribute("data-action"), "delete");
    assert.equal(await first.locator("td.actor").innerText(), "root@localhost");
    await checkA11y(v, "audit");

    // Pages: older, then newer again; none shared.
    const page1 = await rows.allInnerTexts();
    await v.getByRole("button", { name: "Older →" }).click();
    await v.locator("#audit-page").getByText("Page 2").waitFor();
    const page2 = await rows.allInnerTexts();
    assert.ok(page2.length > 0);
    assert.equal(page1.filter((t) => page2.includes(t)).length, 0, "a row on two pages");
    await v.getByRole("button", { name: "← Newer" }).click();
    await v.locator("#audit-page").getByText("Page 1").waitFor();
    assert.deepEqual(await rows.allInnerTexts(), page1);

    // Filter by policy: its whole history, the deleted policy's too.
    await v.getByLabel("Policy").fill("audit-e2e");
    await v.getByRole("button", { name: "Apply filters" }).click();
    await v.locator("#audit-page").getByText("Page 1").waitFor();
    await v.waitForFunction(() => document.querySelectorAll("#audit-table tbody tr").length === 4);
    assert.deepEqual(await rows.evaluateAll((trs) => trs.map((t) => [t.dataset.action, t.querySelector("td.actor").textContent])),
      [["delete", "root@localhost"], ["update", "root@localhost"], ["update", EDITOR.name], ["create", EDITOR.name]]);
    await rows.nth(2).getByText("Max permits").waitFor();
    await shot(v, "31-audit-policy");

    // By whom, and kind.
    await v.getByLabel("Policy").fill("");
    await v.getByLabel("Changed by").fill(ADMIN.name);
    await v.getByLabel("Kind").selectOption("user");
    await v.getByRole("button", { name: "Apply filters" }).click();
    await v.waitForFunction(() => [...document.querySelectorAll("#audit-table tbody tr")].length > 0
      && [...document.querySelectorAll("#audit-table tbody tr")].every((t) => t.dataset.kind === "user"));
    assert.ok((await v.locator("#audit-table td.actor").allInnerTexts()).every((t) => t === ADMIN.name));
    await v.getByLabel("Kind").selectOption("key");
    await v.getByLabel("Changed by").fill(EDITOR.name);
    await v.getByRole("button", { name: "Apply filters" }).click();
    await v.waitForFunction(() => document.querySelector("#audit-table tbody tr")?.dataset.kind === "key");
    assert.equal(await rows.count(), 1);

    // Time: nothing from a future hour on; everything until then.
    await v.getByLabel("Kind").selectOption("");
    await v.getByLabel("Changed by").fill("");
    await v.getByLabel("From (local time)").fill("2099-01-01T00:00");
    await v.getByRole("button", { name: "Apply filters" }).click();
    await v.getByText("No change matches the filters").waitFor();
    await checkA11y(v, "audit, nothing matches");
    await v.getByRole("button", { name: "Clear" }).click();
    await rows.first().waitFor();
    assert.equal(await rows.count(), 25);

    // "Last changed by" on the Apps page and the policy page: the audit's name.
    mariadb(`USE ${DB}; UPDATE policies SET description = 'by hand' WHERE name = 'audit-many-00'`);
    await v.goto(`${adminBase()}/#/apps`);
    await v.locator('section[data-app="audit-app"] .app-changed .actor').getByText(EDITOR.name, { exact: true }).waitFor();
    await v.goto(`${adminBase()}/#/policies`);
    await v.locator('tr[data-policy="audit-many-00"] .changed-by').getByText("changed by root@localhost", { exact: true }).waitFor();
    await v.locator('tr[data-policy="audit-many-01"] .changed-by').getByText(`changed by ${EDITOR.name}`, { exact: true }).waitFor();
    await checkA11y(v, "policy list with changed by");
    await v.goto(`${adminBase()}/#/policy/audit-many-00`);
    await v.waitForFunction(() => [...document.querySelectorAll("dt")].some((dt) => dt.textContent === "Last changed"
      && dt.nextElementSibling?.textContent.endsWith(" by root@localhost")));
  });

  // Issue 40: what axe cannot see. The policy list with long names, many
  // apps and every algorithm at 390, 1280, 1440 and 1920 wide, as viewer
  // and as editor (admin): nothing overflows, no word breaks, the Delete
  // buttons are whole; the form's radios take one click; the Users and
  // Audit controls are the 36 px of the rest; no Disable/Delete on one's
  // own row; the concurrency gauge fills with what is held; no layout shift
  // on load, and a skip link.
  const LONG = ["checkout-service-per-customer-burst", "search-api-sliding-window-per-tenant",
    "calendar-monthly-quota-for-partner-integrations", "exports-sliding-log-per-api-key", "payment-provider-concurrent-calls"];
  const APPS = ["storefront-web", "storefront-mobile", "partner-gateway", "internal-batch", "analytics-pipeline", "demo"];
  step("issue 40: the policy list fits at 390, 1280, 1440 and 1920 wide for viewers and editors", async () => {
    for (const a of APPS) assert.equal((await pageRpc(page, "AppService/CreateApp", { name: a })).status, 200);
    const base = { apps: APPS, enabled: true, failureMode: "closed", description: "Protects the service from a single noisy caller; ask the platform team." };
    const defs = [
      { name: LONG[0], algorithm: "token_bucket", maxPermits: "1000", rate: "16.666666666667" },
      { name: LONG[1], algorithm: "sliding_window", maxPermits: "50000", window: "90s", shadow: true },
      { name: LONG[2], algorithm: "fixed_window", maxPermits: "1000000", window: "month" },
      { name: LONG[3], algorithm: "sliding_log", maxPermits: "10000", window: "2h" },
      { name: LONG[4], algorithm: "concurrency", maxPermits: "5", leaseTtl: "2m" },
    ];
    for (const d of defs) {
      const r = await pageRpc(page, "PolicyService/CreatePolicy", { policy: { ...base, ...d } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
    const viewer = await signIn(await browser.newContext({ viewport: { width: 1280, height: 800 } }), VIEWER);
    const problems = [];
    for (const [who, p] of [["admin", page], ["viewer", viewer]]) {
      for (const width of [390, 1280, 1440, 1920]) {
        await p.setViewportSize({ width, height: 900 });
        await p.goto(`${adminBase()}/#/policies`);
        for (const n of LONG) await p.locator(`tr[data-policy="${n}"]`).waitFor();
        const found = await p.evaluate(() => {
          const out = [];
          const lines = (node, from, to) => {
            const r = document.createRange();
            r.setStart(node, from);
            r.setEnd(node, to);
            return new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top))).size;
          };
          const vw = document.documentElement.clientWidth;
          if (document.documentElement.scrollWidth > vw) out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${vw})`);
          const sc = document.querySelector(".table-scroll");
          if (sc.scrollWidth > sc.clientWidth) {
            const edge = sc.getBoundingClientRect().right;
            const wide = [...sc.querySelectorAll("td, td *")].filter((e) => e.getBoundingClientRect().right > edge + 0.5)
              .slice(0, 3).map((e) => `${e.tagName.toLowerCase()}.${e.className}`);
            out.push(`the table scrolls sideways (${sc.scrollWidth} > ${sc.clientWidth}; past the edge: ${wide.join(", ")})`);
          }
          for (const a of document.querySelectorAll(".policy-link")) {
            const t = a.firstChild;
            for (const m of t.data.matchAll(/[^-_.]+/g)) {
              if (lines(t, m.index, m.index + m[0].length) > 1) out.push(`"${m[0]}" of ${t.data} breaks mid-word`);
            }
          }
          for (const c of document.querySelectorAll(".policies .chip")) {
            if (lines(c.firstChild, 0, c.firstChild.data.length) > 1) out.push(`app chip ${c.textContent} wraps`);
          }
          const box = sc.getBoundingClientRect();
          for (const b of document.querySelectorAll(".cell-actions .btn")) {
            const r = b.getBoundingClientRect();
            if (r.right > Math.min(vw, box.right) + 0.5 || r.left < box.left - 0.5) out.push(`${b.getAttribute("aria-label")} is cut (${r.left}–${r.right} of ${box.left}–${box.right})`);
          }
          return out;
        });
        for (const f of found) problems.push(`${who} at ${width}: ${f}`);
        if (width === 1280) await shot(p, `40-list-${who}-${width}`);
      }
      await p.setViewportSize({ width: 1280, height: 800 });
    }
    assert.deepEqual(problems, []);
    await viewer.context().close();
  });

  step("issue 40: a click on an algorithm radio checks it while the field before shows its error", async () => {
    // Tall enough that the radio is on screen unscrolled: scrolled, the
    // browser's scroll anchoring would keep it under the pointer.
    await page.setViewportSize({ width: 1280, height: 1400 });
    await page.goto(`${adminBase()}/#/new`);
    await page.locator("#f-apps-list input").first().waitFor();
    await page.locator("#f-name").fill("-not-a-name");
    await page.locator("#f-alg-sliding_window").click();
    assert.equal(await page.locator("#f-alg-sliding_window").isChecked(), true, "one click on Sliding window did not check it");
    await page.locator("#f-name-error").waitFor();
    // Tabbing away still checks at once.
    await page.locator("#f-name").fill("");
    await page.locator("#f-name").press("Tab");
    await page.locator("#f-name-error").getByText(/./).waitFor();
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  step("issue 40: Users and Audit controls are 36 px like the rest; no Disable or Delete on one's own row", async () => {
    await page.goto(`${adminBase()}/#/users`);
    await userRow(page, ADMIN.name).waitFor();
    const heights = async (p, sel) => p.locator(sel).evaluateAll((els) => els.filter((e) => e.offsetParent)
      .map((e) => [e.id || e.getAttribute("aria-label") || e.name, Math.round(e.getBoundingClientRect().height * 2) / 2]));
    const bad = [];
    for (const [n, hgt] of await heights(page, "#users-table select, #add-user input, #add-user select")) if (hgt !== 36) bad.push(`users: ${n} is ${hgt} px`);
    const own = userRow(page, ADMIN.name);
    for (const what of ["Disable", "Delete"]) {
      const b = own.getByRole("button", { name: `${what} ${ADMIN.name}` });
      if (await b.count() > 0 && await b.isEnabled()) bad.push(`${what} is offered on the admin's own row`);
    }
    await page.goto(`${adminBase()}/#/audit`);
    await page.locator("#audit-table tbody tr").first().waitFor();
    for (const [n, hgt] of await heights(page, ".audit-filters input, .audit-filters select")) if (hgt !== 36) bad.push(`audit: ${n} is ${hgt} px`);
    assert.deepEqual(bad, []);
  });

  step("issue 40: the concurrency gauge fills with the leases held, as its words say", async () => {
    const name = LONG[4];
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`http://127.0.0.1:${T.server.apiPort}/permit.v1.RateLimitService/Acquire`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ bucket: name, app: APPS[0] }),
      });
      assert.equal(res.status, 200, await res.text());
    }
    await page.goto(`${adminBase()}/#/policies`);
    const g = page.locator(`tr[data-policy="${name}"]`).getByRole("meter");
    await page.waitForFunction((n) => /held/.test(document.querySelector(`tr[data-policy="${n}"] .gauge-text`)?.textContent || ""), name);
    const seen = await g.evaluate((el) => ({
      fill: parseFloat(el.querySelector(".gauge-fill").style.width),
      now: el.getAttribute("aria-valuenow"), text: el.querySelector(".gauge-text").textContent, label: el.getAttribute("aria-label"),
    }));
    const held = Number(seen.now);
    assert.equal(held, 4, JSON.stringify(seen));
    assert.match(seen.text, new RegExp(`^${held} held`), JSON.stringify(seen));
    assert.equal(Math.round(seen.fill), Math.round((held / 5) * 100), JSON.stringify(seen));
    assert.match(seen.label, /held/, JSON.stringify(seen));
  });

  step("issue 40: the policy list does not shift while it loads, and a skip link leads to the page", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.addInitScript(() => {
      window.__cls = 0;
      window.__shifts = [];
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) {
          if (e.hadRecentInput) continue;
          window.__cls += e.value;
          window.__shifts.push({ v: e.value, s: e.sources.map((x) => x.node?.nodeName + "." + (x.node?.className || "")) });
        }
      }).observe({ type: "layout-shift", buffered: true });
    });
    const p = await signIn(ctx, ADMIN);
    for (const vp of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
      await p.setViewportSize(vp);
      await p.reload();
      await p.locator(`tr[data-policy="${LONG[0]}"] .gauge-text`).getByText(/\d/).waitFor();
      await p.locator(`tr[data-policy="${LONG[0]}"] .traffic`).getByText(/\d/).waitFor();
      await sleep(500);
      const { cls, shifts } = await p.evaluate(() => ({ cls: window.__cls, shifts: window.__shifts }));
      console.log(`list page layout shift at ${vp.width} wide: ${cls.toFixed(4)}`);
      assert.ok(cls < 0.1, `layout shift ${cls.toFixed(3)} at ${vp.width} wide (under 0.1 wanted): ${JSON.stringify(shifts)}`);
    }
    // The first Tab reaches "Skip to main content", which moves focus to the page.
    await p.setViewportSize({ width: 1280, height: 800 });
    await p.reload();
    await p.locator(`tr[data-policy="${LONG[0]}"]`).waitFor();
    await p.keyboard.press("Tab");
    const first = await p.evaluate(() => ({ text: document.activeElement.textContent.trim(), visible: document.activeElement.getBoundingClientRect().height > 0 }));
    assert.deepEqual(first, { text: "Skip to main content", visible: true });
    await p.keyboard.press("Enter");
    assert.equal(await p.evaluate(() => document.activeElement.id), "main");
    await p.keyboard.press("Tab");
    assert.ok(await p.evaluate(() => document.getElementById("main").contains(document.activeElement)), "Tab after the skip link stays in the page");
    await ctx.close();
  });

  step("issue 40: Instances fits at 1280 with ids on one line; history and audit in words; hot keys open the inspector", async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${adminBase()}/#/instances`);
    await page.locator("#instances tbody tr").first().waitFor();
    const inst = await page.evaluate(() => {
      const out = [];
      const sc = document.querySelector(".table-scroll");
      if (sc.scrollWidth > sc.clientWidth) out.push(`the table scrolls sideways (${sc.scrollWidth} > ${sc.clientWidth})`);
      const edge = Math.min(sc.getBoundingClientRect().right, document.documentElement.clientWidth);
      for (const td of document.querySelectorAll('#instances td[data-label="Last heartbeat"]')) {
        if (td.getBoundingClientRect().right > edge + 0.5) out.push("the last heartbeat is cut");
      }
      // An id (host:port@start) breaks between its parts at most.
      for (const c of document.querySelectorAll("#instances td.cell-name code")) {
        for (const t of [...c.childNodes].filter((n) => n.nodeType === 3)) {
          for (const m of t.data.matchAll(/[^:@]+/g)) {
            const r = document.createRange();
            r.setStart(t, m.index);
            r.setEnd(t, m.index + m[0].length);
            const lines = new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top))).size;
            if (lines > 1) out.push(`"${m[0]}" of the id ${c.textContent} wraps`);
          }
        }
      }
      return out;
    });
    assert.deepEqual(inst, []);

    // The audit of the policies made above: field names in words, times without microseconds.
    await page.goto(`${adminBase()}/#/audit`);
    await page.locator("#audit-table tbody tr").first().waitFor();
    const audit = await page.evaluate(() => ({
      names: [...document.querySelectorAll("#audit-table .field-name")].map((e) => e.textContent),
      times: [...document.querySelectorAll("#audit-table time")].map((t) => `${t.getAttribute("datetime")} | ${t.title} | ${t.textContent}`),
    }));
    assert.ok(audit.names.length > 0);
    assert.deepEqual(audit.names.filter((n) => /_|^[a-z]/.test(n)), [], "raw field names in the audit");
    assert.deepEqual(audit.times.filter((t) => /\.\d{4,}/.test(t)), [], "microseconds in the audit's times");

    // Hot keys: each row leads to the inspector with its key.
    const pol = LONG[0];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${T.server.apiPort}/permit.v1.RateLimitService/Acquire`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ bucket: pol, app: APPS[0], key: "user-hot-42" }),
      });
      assert.equal(res.status, 200, await res.text());
    }
    await page.goto(`${adminBase()}/#/policy/${pol}`);
    const hot = page.locator('#hot-allowed tr[data-key="user-hot-42"]');
    await hot.waitFor({ timeout: 30_000 });
    await hot.getByRole("link", { name: "user-hot-42" }).click();
    await page.waitForFunction(() => document.getElementById("inspect-key")?.value === "user-hot-42");
    await page.locator(".inspect-which").getByText("user-hot-42").waitFor();
    assert.ok(await page.evaluate(() => document.activeElement?.closest("section")?.querySelector("#inspect-h") !== null
      || document.activeElement?.id === "inspect-key"), "focus is not on the inspector");
  });

  step("the users and audit pages raised no script errors", () => {
    assert.deepEqual(T.pageErrors, []);
  });
});
