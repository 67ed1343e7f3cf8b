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
// they create; a failed step prints permitd's output at the end.
//
// Accessibility: every page and state the steps visit is checked with
// axe-core (WCAG 2.0/2.1 A and AA rules) in the light and the dark colour
// scheme, and a serious or critical violation fails the step; the
// keyboard-only paths assert where focus is after each key.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

import * as fmt from "../../../admin-ui/format.js";

function requireEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`ui.test.mjs: environment variable ${name} is not set (run it through tests/e2e/ui/run.sh under ctest)`);
  return v;
}

const PERMITD_BIN = requireEnv("PERMITD_BIN");
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL");
const MYSQL_SOCKET = requireEnv("PERMITD_TEST_MYSQL_SOCKET");
const SHOTS = process.env.PERMITD_UI_SCREENSHOTS || fs.mkdtempSync(path.join(os.tmpdir(), "permitd-ui-shots-"));
const CHROMIUM = process.env.PERMITD_CHROMIUM || "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];

// axe-core as npm installed it beside this file. The admin UI's
// Content-Security-Policy (script-src 'self') refuses the inline <script>
// that page.addScriptTag({path}) would add, so the file is served to the
// page from its own origin by a route and added with addScriptTag({url}):
// the policy stays enforced while axe runs.
const AXE_FILE = fileURLToPath(new URL("./node_modules/axe-core/axe.min.js", import.meta.url));
const AXE_PATH = "/__ui-test__/axe.min.js";
const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

const DB = `ui_${process.pid}`;
const MYSQL_URL = `mysql://root@localhost/${DB}?socket=${MYSQL_SOCKET}`;
const PREFIX = `ui${process.pid}:`;
const EDITOR = { name: "alice", password: crypto.randomBytes(12).toString("hex") };
const VIEWER = { name: "bob", password: crypto.randomBytes(12).toString("hex") };

const LIST_POLL_MS_TEST = 1600; // a little more than app.js's LIST_POLL_MS

const POLICY = "ui-e2e";
const XSS_POLICY = "ui-xss";
const OFF_POLICY = "ui-off";
const APP = "ui-app";
const XSS = "<img src=x onerror=alert(1)>";

// ---------------------------------------------------------------- helpers

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function mariadb(sql) {
  return execFileSync("mariadb", ["--no-defaults", "-S", MYSQL_SOCKET, "-uroot", "-e", sql], { encoding: "utf8" });
}

function permitdCli(args, input) {
  try {
    return execFileSync(PERMITD_BIN, args, {
      input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, PERMITD_MYSQL_URL: MYSQL_URL },
    });
  } catch (err) {
    throw new Error(`${PERMITD_BIN} ${args.join(" ")} failed (status ${err.status}):\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  }
}

let server = null; // { child, apiPort, adminPort, output, exit, args }
let failed = false;
const pageErrors = [];
let currentPage = null; // screenshotted when a step fails

function serverOutput() {
  if (!server) return "(permitd not started)";
  const text = server.output.join("");
  const tail = text.length > 65536 ? "…" + text.slice(-65536) : text;
  return tail || "(no output)";
}

// it() that remembers failures, so after() can print the server's output.
function step(name, fn, timeout = 90_000) {
  it(name, { timeout }, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      failed = true;
      const file = path.join(SHOTS, `FAILED-${name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 60)}.png`);
      await currentPage?.screenshot({ path: file, fullPage: true }).then(
        () => console.error(`screenshot of the failure: ${file}`), () => {});
      throw err;
    }
  });
}

async function waitHealthy(url, what) {
  const deadline = Date.now() + 15_000;
  let last = "no attempt";
  while (Date.now() < deadline) {
    if (server.exited) {
      throw new Error(`permitd exited before ${what} was healthy (${JSON.stringify(server.exited)})\n` +
        `command: ${PERMITD_BIN} ${server.args.join(" ")}\n--- permitd output ---\n${serverOutput()}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    await sleep(100);
  }
  throw new Error(`permitd's ${what} did not answer 200 on ${url} within 15 s (last: ${last})\n` +
    `command: ${PERMITD_BIN} ${server.args.join(" ")}\n--- permitd output ---\n${serverOutput()}`);
}

async function startPermitd() {
  const apiPort = await freePort();
  const adminPort = await freePort();
  const args = ["--listen", `127.0.0.1:${apiPort}`, "--admin-listen", `127.0.0.1:${adminPort}`,
    "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--mysql-url", MYSQL_URL, "--sync-interval-ms", "500",
    // the UI is the subject; the API's app keys are tested in test_apps.py (issue 21)
    "--app-auth", "off"];
  const child = spawn(PERMITD_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  const output = [];
  child.stdout.setEncoding("utf8").on("data", (d) => output.push(d));
  child.stderr.setEncoding("utf8").on("data", (d) => output.push(d));
  server = { child, apiPort, adminPort, output, args, exited: null };
  server.exit = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve((server.exited = { code, signal })));
    child.on("error", (err) => {
      output.push(`spawn error: ${err.message}\n`);
      resolve((server.exited = { code: null, signal: null, error: err.message }));
    });
  });
  await waitHealthy(`http://127.0.0.1:${apiPort}/healthz`, "API listener");
  await waitHealthy(`http://127.0.0.1:${adminPort}/healthz`, "admin listener");
}

async function stopPermitd() {
  if (!server) return;
  const { child, exit } = server;
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGTERM");
    const res = await Promise.race([exit, sleep(5000, null, { ref: false })]);
    if (res === null) {
      child.kill("SIGKILL");
      await exit;
    }
  }
}

const adminBase = () => `http://127.0.0.1:${server.adminPort}`;

// Acquire from Node, as an application would (plain Connect JSON).
async function acquire(body) {
  const res = await fetch(`http://127.0.0.1:${server.apiPort}/permit.v1.RateLimitService/Acquire`, {
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
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = { raw: text };
  }
  return { status: res.status, json, headers: res.headers };
}

// An admin RPC from inside a page: same origin, the page's cookies.
function pageRpc(page, method, body) {
  return page.evaluate(async ([m, b]) => {
    const res = await fetch(`/permit.v1.${m}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b), credentials: "same-origin",
    });
    const text = await res.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = { raw: text };
    }
    return { status: res.status, json };
  }, [method, body]);
}

async function shot(page, name) {
  // Toasts are position: fixed; in a full-page shot they would float
  // mid-page. (Hidden through the CSSOM: the page's Content-Security-Policy
  // refuses the <style> that screenshot({style}) would inject.)
  await page.evaluate(() => document.getElementById("toast")?.style.setProperty("visibility", "hidden"));
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  await page.evaluate(() => document.getElementById("toast")?.style.removeProperty("visibility"));
}

// Uncaught exceptions and console errors (a CSP violation is one); failed
// requests are expected here (401, 403, 409 …) and are left out.
function watch(page, label) {
  page.on("pageerror", (err) => pageErrors.push(`${label}: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error" && !/^Failed to load resource/.test(msg.text())) pageErrors.push(`${label}: console: ${msg.text()}`);
  });
  return page;
}

// Runs axe-core on the page as it is now, once in the light and once in the
// dark colour scheme, and fails on any serious or critical violation with one
// line per element: rule id, impact, the element's selector and axe's summary.
// The colour scheme is left as it was found (no override).
const axeRouted = new WeakSet();
let axeChecks = 0;
async function checkA11y(page, state) {
  const ctx = page.context();
  if (!axeRouted.has(ctx)) {
    axeRouted.add(ctx);
    await ctx.route(`**${AXE_PATH}`, (route) => route.fulfill({ path: AXE_FILE, contentType: "text/javascript; charset=utf-8" }));
  }
  const problems = [];
  try {
    for (const scheme of ["light", "dark"]) {
      await page.emulateMedia({ colorScheme: scheme });
      if (!(await page.evaluate(() => typeof window.axe === "object"))) {
        await page.addScriptTag({ url: AXE_PATH });
      }
      const found = await page.evaluate(async (tags) => {
        const r = await window.axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
        return r.violations.flatMap((v) => v.nodes
          .filter((n) => ["serious", "critical"].includes(n.impact || v.impact))
          .map((n) => ({
            id: v.id,
            impact: n.impact || v.impact,
            target: n.target.join(" "),
            summary: (n.failureSummary || v.help).replace(/\s+/g, " ").trim(),
          })));
      }, AXE_TAGS);
      for (const f of found) problems.push(`  [${scheme}] ${f.id} (${f.impact}) at ${f.target}: ${f.summary}`);
      axeChecks++;
    }
  } finally {
    await page.emulateMedia({ colorScheme: null });
  }
  assert.equal(problems.length, 0, `axe-core: ${problems.length} serious or critical violation(s) on "${state}":\n${problems.join("\n")}`);
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

async function login(page, user) {
  await page.goto(`${adminBase()}/`);
  await page.getByLabel("Username").fill(user.name);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
}

const row = (page, name) => page.locator(`tr[data-policy="${name}"]`);
const gaugeOf = (page, name) => row(page, name).getByRole("meter");

async function gaugeValue(page, name) {
  return Number(await gaugeOf(page, name).getAttribute("aria-valuenow"));
}

async function fillPolicyForm(page, { name, apps, max, rate, unit, description }) {
  if (name !== undefined) await page.locator("#f-name").fill(name);
  if (apps !== undefined) await page.locator("#f-apps").fill(apps);
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
    fs.mkdirSync(SHOTS, { recursive: true });
    mariadb(`DROP DATABASE IF EXISTS ${DB}; CREATE DATABASE ${DB}`);
    permitdCli(["migrate", "up"]);
    permitdCli(["admin", "add-user", EDITOR.name, "--role", "editor"], `${EDITOR.password}\n`);
    permitdCli(["admin", "add-user", VIEWER.name, "--role", "viewer"], `${VIEWER.password}\n`);
    await startPermitd();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    editorCtx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    editorCtx.setDefaultTimeout(15_000);
    page = watch(await editorCtx.newPage(), "alice");
    currentPage = page;
    page.on("dialog", async (d) => {
      dialogs++;
      await d.dismiss();
    });
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await stopPermitd();
    try {
      mariadb(`DROP DATABASE IF EXISTS ${DB}`);
    } catch (err) {
      console.error(`could not drop database ${DB}: ${err.message}`);
    }
    console.log(`screenshots: ${SHOTS}`);
    if (failed) {
      console.error(`--- permitd output (${PERMITD_BIN} ${server?.args.join(" ")}) ---\n${serverOutput()}`);
    }
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

  step("an editor logs in and sees the empty state", async () => {
    await page.getByLabel("Username").fill(EDITOR.name);
    await page.getByLabel("Password").fill(EDITOR.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
    await page.getByText("No policies yet").waitFor();
    const f = await focused(page);
    assert.deepEqual([f.tag, f.text], ["h1", "Policies"], `after signing in focus is on the page's heading, not ${JSON.stringify(f)}`);
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
    for (const id of ["f-name", "f-apps", "f-max", "f-rate"]) {
      const input = page.locator(`#${id}`);
      assert.equal(await input.getAttribute("required"), "", `#${id} is required`);
      assert.equal(await input.getAttribute("aria-required"), "true", `#${id} has aria-required`);
      const marker = page.locator(`label[for="${id}"] .required-mark`);
      assert.ok(await marker.isVisible(), `the label of #${id} shows a required marker`);
    }
    assert.equal(await page.locator("#f-desc").getAttribute("required"), null, "the description is optional");
    assert.equal(await page.locator("label[for=f-desc] .required-mark").count(), 0);
    assert.ok(await page.locator(".policy-form .required-note").isVisible(), "the form says what the marker means");
    await fillPolicyForm(page, { name: "bad name!", apps: "web, b@d", max: "0", rate: "0" });
    await page.locator("#save-policy").click();
    for (const id of ["#f-name-error", "#f-apps-error", "#f-max-error", "#f-rate-error"]) {
      await page.locator(id).waitFor();
      assert.ok((await page.locator(id).textContent()).length > 5, `${id} names the problem`);
    }
    assert.equal(await page.locator("#f-name").getAttribute("aria-invalid"), "true");
    await shot(page, "04-create-invalid");
    await checkA11y(page, "new policy with errors");
    assert.deepEqual(writes, [], "an invalid form sends nothing");

    await fillPolicyForm(page, { name: POLICY, apps: APP, max: 10, rate: 2, unit: "min", description: "Created by the UI test" });
    await page.locator("#f-name").blur();
    assert.equal(await page.locator("#f-name-error").isVisible(), false, "fixing the name clears its error");
    assert.match(await page.locator("#f-rate-preview").textContent(), /0\.033333333333 permits per second/);
    await shot(page, "05-create-form");
    await checkA11y(page, "new policy, filled in");
    await page.locator("#save-policy").click();
    await row(page, POLICY).waitFor();
    page.off("request", onRequest);
    assert.equal(writes.length, 1);
    assert.equal(new URL(page.url()).hash, "#/");
    const cells = row(page, POLICY).locator("td");
    assert.equal(await cells.nth(1).innerText(), APP);
    assert.equal((await cells.nth(2).innerText()).trim(), "10");
    assert.equal((await cells.nth(3).innerText()).trim(), "2 / min");

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

    await page.getByLabel("Key").fill("user-42");
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
    await page.locator("#inspect-reset").click();
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

  step("the history shows the create and the updates with who made them", async () => {
    await page.goto(`${adminBase()}/#/policy/${POLICY}`);
    const entries = page.locator("#history .change");
    await page.waitForFunction(() => document.querySelectorAll("#history .change").length >= 3);
    const texts = await entries.allInnerTexts();
    assert.equal(texts.length, 3, texts.join("\n----\n"));
    assert.match(texts[0], /Updated/);
    assert.match(texts[0], /description/);
    assert.match(texts[0], /edited after reloading/);
    assert.match(texts[1], /Updated/);
    assert.match(texts[1], /max_permits\s+10\s+→\s+20/);
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
    await page.goto(`${adminBase()}/#/`);
    await row(page, XSS_POLICY).waitFor();
    await shot(page, "11-xss-as-text");
    await checkA11y(page, "policies, two");
  });

  step("a disabled policy shows no bucket, and its page raises no error", async () => {
    const made = await pageRpc(page, "PolicyService/CreatePolicy", {
      policy: { name: OFF_POLICY, apps: ["*"], maxPermits: "7", rate: "1", failureMode: "closed", enabled: false },
    });
    assert.equal(made.status, 200, JSON.stringify(made));
    await page.goto(`${adminBase()}/#/`);
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
    await page.goto(`${adminBase()}/#/`);
    await row(page, XSS_POLICY).waitFor();
  });

  step("filtering the list announces how many policies match", async () => {
    await page.goto(`${adminBase()}/#/`);
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
      currentPage = kp;
      // Sign in.
      await kp.goto(`${adminBase()}/`);
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
      await kp.waitForFunction(() => document.activeElement?.id === "f-apps");
      await kp.keyboard.press("Tab");
      assert.equal((await focused(kp)).id, "f-max", "Tab goes from Apps to Max permits");
      await kp.keyboard.press("Control+A");
      await kp.keyboard.type("12");
      await kp.keyboard.press("Enter");
      await kp.waitForFunction(() => location.hash === "#/" && document.activeElement?.tagName === "H1");
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
      currentPage = page;
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
    await page.goto(`${adminBase()}/#/`);
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
      await vp.goto(`${adminBase()}/`);
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
        await vp.goto(`${adminBase()}/#/`);
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

  step("log out ends the session, and a second tab falls back to the login page", async () => {
    await page.goto(`${adminBase()}/#/`);
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
    assert.deepEqual(pageErrors, []);
  });
});
