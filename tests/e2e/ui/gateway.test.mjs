// End-to-end test of the admin UI's "Gateway rules" page (issue 25) in real
// headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core),
// against a real permitd with its own MySQL database and Redis prefix. A file
// of its own beside ui.test.mjs (ctest e2e_gateway_ui), so the two suites
// grow without meeting.
//
// Environment: as ui.test.mjs (PERMITD_BIN, PERMITD_TEST_REDIS_URL,
// PERMITD_TEST_MYSQL_SOCKET, PERMITD_UI_SCREENSHOTS, PERMITD_CHROMIUM).
//
// Steps, in order, on one permitd: the page from the top bar (empty state),
// a rule created in the dialog with the server's field errors shown at
// their fields, the rule in force on /v1/forward-auth at once, an edit, a
// delete after a confirmation, a viewer without controls; every state
// checked with axe-core (WCAG 2.x A/AA, light and dark), and no script
// error or CSP violation on the way.
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

function requireEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`gateway.test.mjs: environment variable ${name} is not set (run it through tests/e2e/ui/run.sh under ctest)`);
  return v;
}

const PERMITD_BIN = requireEnv("PERMITD_BIN");
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL");
const MYSQL_SOCKET = requireEnv("PERMITD_TEST_MYSQL_SOCKET");
const SHOTS = process.env.PERMITD_UI_SCREENSHOTS || fs.mkdtempSync(path.join(os.tmpdir(), "permitd-ui-shots-"));
const CHROMIUM = process.env.PERMITD_CHROMIUM || "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];
const AXE_FILE = fileURLToPath(new URL("./node_modules/axe-core/axe.min.js", import.meta.url));
const AXE_PATH = "/__ui-test__/axe.min.js";
const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

const DB = `uigw_${process.pid}`;
const MYSQL_URL = `mysql://root@localhost/${DB}?socket=${MYSQL_SOCKET}`;
const PREFIX = `uigw${process.pid}:`;
const EDITOR = { name: "alice", password: crypto.randomBytes(12).toString("hex") };
const VIEWER = { name: "bob", password: crypto.randomBytes(12).toString("hex") };
const POLICY = "gw-ui";

let server = null;
let failed = false;
let currentPage = null;
const pageErrors = [];

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
      input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, PERMITD_MYSQL_URL: MYSQL_URL },
    });
  } catch (err) {
    throw new Error(`${PERMITD_BIN} ${args.join(" ")} failed (status ${err.status}):\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  }
}

function step(name, fn, timeout = 90_000) {
  it(name, { timeout }, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      failed = true;
      const file = path.join(SHOTS, `FAILED-gateway-${name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 60)}.png`);
      await currentPage?.screenshot({ path: file, fullPage: true }).then(
        () => console.error(`screenshot of the failure: ${file}`), () => {});
      throw err;
    }
  });
}

async function waitHealthy(url) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (server.exited) throw new Error(`permitd exited: ${server.output.join("")}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not yet
    }
    await sleep(100);
  }
  throw new Error(`permitd did not answer on ${url}:\n${server.output.join("")}`);
}

async function startPermitd() {
  const apiPort = await freePort();
  const adminPort = await freePort();
  const args = ["--listen", `127.0.0.1:${apiPort}`, "--admin-listen", `127.0.0.1:${adminPort}`,
    "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--mysql-url", MYSQL_URL, "--sync-interval-ms", "500",
    "--app-auth", "off"];
  const child = spawn(PERMITD_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  const output = [];
  child.stdout.setEncoding("utf8").on("data", (d) => output.push(d));
  child.stderr.setEncoding("utf8").on("data", (d) => output.push(d));
  server = { child, apiPort, adminPort, output, args, exited: null };
  server.exit = new Promise((resolve) => child.on("exit", (code, signal) => resolve((server.exited = { code, signal }))));
  await waitHealthy(`http://127.0.0.1:${apiPort}/healthz`);
  await waitHealthy(`http://127.0.0.1:${adminPort}/healthz`);
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

// The gateway's sub-request, as nginx sends it.
async function forwardAuth(uri, headers = {}) {
  const res = await fetch(`http://127.0.0.1:${server.apiPort}/v1/forward-auth`, {
    headers: { "X-Original-URI": uri, "X-Original-Method": "GET", ...headers },
  });
  await res.arrayBuffer();
  return res.status;
}

function watch(page, label) {
  page.on("pageerror", (err) => pageErrors.push(`${label}: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error" && !/^Failed to load resource/.test(msg.text())) pageErrors.push(`${label}: console: ${msg.text()}`);
  });
  return page;
}

const axeRouted = new WeakSet();
async function checkA11y(page, state) {
  const ctx = page.context();
  if (!axeRouted.has(ctx)) {
    axeRouted.add(ctx);
    await ctx.route(`**${AXE_PATH}`, (route) => route.fulfill({ path: AXE_FILE, contentType: "text/javascript; charset=utf-8" }));
  }
  await page.waitForFunction(() => {
    const t = document.getElementById("toast");
    return !t || t.getAnimations().every((a) => a.playState !== "running");
  }, null, { timeout: 5000 });
  const problems = [];
  try {
    for (const scheme of ["light", "dark"]) {
      await page.emulateMedia({ colorScheme: scheme });
      if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ url: AXE_PATH });
      const found = await page.evaluate(async (tags) => {
        const r = await window.axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
        return r.violations.flatMap((v) => v.nodes
          .filter((n) => ["serious", "critical"].includes(n.impact || v.impact))
          .map((n) => `${v.id} at ${n.target.join(" ")}: ${(n.failureSummary || v.help).replace(/\s+/g, " ").trim()}`));
      }, AXE_TAGS);
      for (const f of found) problems.push(`  [${scheme}] ${f}`);
    }
  } finally {
    await page.emulateMedia({ colorScheme: null });
  }
  assert.equal(problems.length, 0, `axe-core on "${state}":\n${problems.join("\n")}`);
}

async function login(page, user) {
  await page.goto(`${adminBase()}/`);
  await page.getByLabel("Username").fill(user.name);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
}

function pageRpc(page, method, body) {
  return page.evaluate(async ([m, b]) => {
    const res = await fetch(`/permit.v1.${m}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b), credentials: "same-origin",
    });
    return { status: res.status, json: await res.json().catch(() => null) };
  }, [method, body]);
}

describe("the Gateway rules page in headless Chromium", () => {
  let browser;
  let page;

  before(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    mariadb(`DROP DATABASE IF EXISTS ${DB}; CREATE DATABASE ${DB}`);
    permitdCli(["migrate", "up"]);
    permitdCli(["admin", "add-user", EDITOR.name, "--role", "editor"], `${EDITOR.password}\n`);
    permitdCli(["admin", "add-user", VIEWER.name, "--role", "viewer"], `${VIEWER.password}\n`);
    await startPermitd();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    page = watch(await ctx.newPage(), "alice");
    currentPage = page;
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await stopPermitd();
    try {
      mariadb(`DROP DATABASE IF EXISTS ${DB}`);
    } catch (err) {
      console.error(`could not drop database ${DB}: ${err.message}`);
    }
    if (failed) console.error(`--- permitd output ---\n${server?.output.join("")}`);
  });

  step("the page is in the top bar and starts empty", async () => {
    await login(page, EDITOR);
    // With --app-auth off, forward-auth acts as app "gateway": the policy lists it.
    const r = await pageRpc(page, "PolicyService/CreatePolicy", { policy: {
      name: POLICY, apps: ["gateway"], maxPermits: "1", rate: "0.001", enabled: true, failureMode: "closed" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    await page.getByRole("link", { name: "Gateway rules" }).click();
    await page.getByRole("heading", { name: "Gateway rules", level: 1 }).waitFor();
    await page.getByText("No gateway rules yet").waitFor();
    assert.equal(await page.locator("#nav-gateway").getAttribute("aria-current"), "page");
    await checkA11y(page, "gateway rules, empty");
  });

  step("the server's validation errors are shown at their fields, then the rule is created", async () => {
    await page.locator("#new-rule").click();
    const dlg = page.locator("#rule-dialog");
    await dlg.waitFor();
    await page.locator("#r-path-prefix").fill("/api/");
    await page.locator("#r-method").fill("get");
    await page.locator("#r-policy").fill(POLICY);
    await page.locator("#r-key-source").selectOption("header");
    assert.equal(await page.locator("#r-key-header").isVisible(), true);
    await page.locator("#rule-save").click();
    const methodErr = page.locator("#r-method-error");
    await methodErr.waitFor();
    assert.match(await methodErr.textContent(), /^Method: "get" is not an HTTP method in capitals/);
    assert.equal(await page.locator("#r-method").getAttribute("aria-invalid"), "true");
    assert.equal(await page.evaluate(() => document.activeElement.id), "r-method");
    await checkA11y(page, "rule dialog with a field error");
    await page.locator("#r-method").fill("GET");
    assert.equal(await methodErr.isHidden(), true);
    await page.locator("#rule-save").click();
    const headerErr = page.locator("#r-key-header-error");
    await headerErr.waitFor();
    assert.match(await headerErr.textContent(), /^Header: "" is not a header name/);
    await page.locator("#r-key-header").fill("X-Api-Key");
    await page.locator("#rule-save").click();
    await dlg.waitFor({ state: "detached" });
    const row = page.locator("#rules tbody tr");
    await row.first().waitFor();
    assert.equal(await row.count(), 1);
    const text = await row.first().textContent();
    assert.match(text, /\/api\//);
    assert.match(text, /header X-Api-Key/);
    assert.match(text, new RegExp(POLICY));
    await checkA11y(page, "gateway rules, one rule");
  });

  step("the rule is in force on /v1/forward-auth at once", async () => {
    assert.equal(await forwardAuth("/api/x", { "X-Api-Key": "k1" }), 200);
    assert.equal(await forwardAuth("/api/x", { "X-Api-Key": "k1" }), 429);
    assert.equal(await forwardAuth("/api/x", { "X-Api-Key": "k2" }), 200);
    assert.equal(await forwardAuth("/other", { "X-Api-Key": "k1" }), 200);
  });

  step("edit: another key source, saved at its version", async () => {
    await page.locator("#rules .edit-rule").click();
    await page.locator("#rule-dialog").waitFor();
    assert.equal(await page.locator("#r-key-header").inputValue(), "X-Api-Key");
    await page.locator("#r-key-source").selectOption("none");
    assert.equal(await page.locator("#r-key-header").isVisible(), false);
    await page.locator("#r-description").fill("everyone shares one");
    await page.locator("#rule-save").click();
    await page.locator("#rule-dialog").waitFor({ state: "detached" });
    await page.getByText("none (shared)").waitFor();
    await page.getByText("everyone shares one").waitFor();
    // Focus comes back to the row's Edit button.
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains("edit-rule")), true);
    // One shared bucket now: k3 is no bucket of its own.
    assert.equal(await forwardAuth("/api/y", { "X-Api-Key": "k3" }), 200);
    assert.equal(await forwardAuth("/api/y", { "X-Api-Key": "k4" }), 429);
  });

  step("delete asks first, then the rule is gone everywhere", async () => {
    await page.locator("#rules .delete-rule").click();
    await page.locator("#delete-rule").waitFor();
    await checkA11y(page, "delete rule confirmation");
    await page.locator("#delete-rule-confirm").click();
    await page.getByText("No gateway rules yet").waitFor();
    assert.equal(await forwardAuth("/api/z"), 200);
    assert.equal(await forwardAuth("/api/z"), 200);
  });

  step("a viewer sees the rules without write controls", async () => {
    const r = await pageRpc(page, "GatewayService/CreateGatewayRule", { rule: { pathPrefix: "/v/", policy: POLICY, keySource: "client" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    const vpage = watch(await ctx.newPage(), "bob");
    currentPage = vpage;
    await login(vpage, VIEWER);
    await vpage.goto(`${adminBase()}/#/gateway`);
    await vpage.locator("#rules tbody tr").first().waitFor();
    assert.equal(await vpage.locator("#new-rule").count(), 0);
    assert.equal(await vpage.locator(".edit-rule, .delete-rule").count(), 0);
    await checkA11y(vpage, "gateway rules, viewer");
    await vpage.screenshot({ path: path.join(SHOTS, "gateway-rules-viewer.png"), fullPage: true });
    await ctx.close();
    currentPage = page;
  });

  step("the page raised no script errors and broke no Content-Security-Policy", () => {
    assert.deepEqual(pageErrors, []);
  });
});
