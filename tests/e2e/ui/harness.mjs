// The pieces every admin-UI suite of issue 25 needs (gateway.test.mjs, the
// Gateway rules page; envoy.test.mjs, the Envoy descriptors page): a real
// permitd on free ports with its own MySQL database and Redis prefix, real
// headless Chromium (Debian's, through playwright-core), axe-core checks in
// light and dark, sign-in, calls of the admin RPCs from the signed-in page,
// and a screenshot of the page when a step fails. One module, so the suites
// test their pages and not copies of the harness.
//
// Environment (ctest sets it; see tests/e2e/CMakeLists.txt): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_MYSQL_SOCKET, PERMITD_UI_SCREENSHOTS,
// PERMITD_CHROMIUM.
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

function requireEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`environment variable ${name} is not set (run the suite through tests/e2e/ui/run.sh under ctest)`);
  return v;
}

export const PERMITD_BIN = requireEnv("PERMITD_BIN");
export const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL");
export const MYSQL_SOCKET = requireEnv("PERMITD_TEST_MYSQL_SOCKET");
export const SHOTS = process.env.PERMITD_UI_SCREENSHOTS || fs.mkdtempSync(path.join(os.tmpdir(), "permitd-ui-shots-"));
export const CHROMIUM = process.env.PERMITD_CHROMIUM || "/usr/bin/chromium";
export const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];
const AXE_FILE = fileURLToPath(new URL("./node_modules/axe-core/axe.min.js", import.meta.url));
const AXE_PATH = "/__ui-test__/axe.min.js";
const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

export function freePort() {
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

export function mariadb(sql) {
  return execFileSync("mariadb", ["--no-defaults", "-S", MYSQL_SOCKET, "-uroot", "-e", sql], { encoding: "utf8" });
}

// One suite's state: its database (`${tag}_<pid>`), Redis prefix, permitd,
// the page a failed step photographs, and the script errors pages raised.
export function harness(tag) {
  const t = {
    db: `${tag}_${process.pid}`,
    prefix: `${tag}${process.pid}:`,
    server: null,
    failed: false,
    currentPage: null,
    pageErrors: [],
  };
  t.mysqlUrl = `mysql://root@localhost/${t.db}?socket=${MYSQL_SOCKET}`;

  t.permitdCli = (args, input) => {
    try {
      return execFileSync(PERMITD_BIN, args, {
        input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, PERMITD_MYSQL_URL: t.mysqlUrl },
      });
    } catch (err) {
      throw new Error(`${PERMITD_BIN} ${args.join(" ")} failed (status ${err.status}):\n${err.stdout ?? ""}${err.stderr ?? ""}`);
    }
  };

  // A test step; on failure, a screenshot of t.currentPage.
  t.step = (name, fn, timeout = 90_000) => {
    it(name, { timeout }, async (tc) => {
      try {
        await fn(tc);
      } catch (err) {
        t.failed = true;
        const file = path.join(SHOTS, `FAILED-${tag}-${name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 60)}.png`);
        await t.currentPage?.screenshot({ path: file, fullPage: true }).then(
          () => console.error(`screenshot of the failure: ${file}`), () => {});
        throw err;
      }
    });
  };

  async function waitHealthy(url) {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      if (t.server.exited) throw new Error(`permitd exited: ${t.server.output.join("")}`);
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
        await res.arrayBuffer();
        if (res.status === 200) return;
      } catch {
        // not yet
      }
      await sleep(100);
    }
    throw new Error(`permitd did not answer on ${url}:\n${t.server.output.join("")}`);
  }

  // Starts permitd on free API and admin ports (more listeners: extra
  // arguments, e.g. --grpc-listen on a port of freePort()).
  t.startPermitd = async (extra = []) => {
    const apiPort = await freePort();
    const adminPort = await freePort();
    const args = ["--listen", `127.0.0.1:${apiPort}`, "--admin-listen", `127.0.0.1:${adminPort}`,
      "--redis-url", REDIS_URL, "--redis-prefix", t.prefix, "--mysql-url", t.mysqlUrl, "--sync-interval-ms", "500",
      "--app-auth", "off", ...extra];
    const child = spawn(PERMITD_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
    const output = [];
    child.stdout.setEncoding("utf8").on("data", (d) => output.push(d));
    child.stderr.setEncoding("utf8").on("data", (d) => output.push(d));
    t.server = { child, apiPort, adminPort, output, args, exited: null };
    t.server.exit = new Promise((resolve) => child.on("exit", (code, signal) => resolve((t.server.exited = { code, signal }))));
    await waitHealthy(`http://127.0.0.1:${apiPort}/healthz`);
    await waitHealthy(`http://127.0.0.1:${adminPort}/healthz`);
  };

  t.stopPermitd = async () => {
    if (!t.server) return;
    const { child, exit } = t.server;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const res = await Promise.race([exit, sleep(5000, null, { ref: false })]);
      if (res === null) {
        child.kill("SIGKILL");
        await exit;
      }
    }
  };

  t.adminBase = () => `http://127.0.0.1:${t.server.adminPort}`;

  // Script errors and console errors of page go to t.pageErrors.
  t.watch = (page, label) => {
    page.on("pageerror", (err) => t.pageErrors.push(`${label}: ${err.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error" && !/^Failed to load resource/.test(msg.text())) t.pageErrors.push(`${label}: console: ${msg.text()}`);
    });
    return page;
  };

  t.login = async (page, user) => {
    await page.goto(`${t.adminBase()}/`);
    await page.getByLabel("Username").fill(user.name);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
  };

  // A new database with its migrations and the users [{name, password, role}].
  t.setUp = (users) => {
    fs.mkdirSync(SHOTS, { recursive: true });
    mariadb(`DROP DATABASE IF EXISTS ${t.db}; CREATE DATABASE ${t.db}`);
    t.permitdCli(["migrate", "up"]);
    for (const u of users) t.permitdCli(["admin", "add-user", u.name, "--role", u.role], `${u.password}\n`);
  };

  t.tearDown = async () => {
    await t.stopPermitd();
    try {
      mariadb(`DROP DATABASE IF EXISTS ${t.db}`);
    } catch (err) {
      console.error(`could not drop database ${t.db}: ${err.message}`);
    }
    if (t.failed) console.error(`--- permitd output ---\n${t.server?.output.join("")}`);
  };
  return t;
}

// axe-core (WCAG 2.x A/AA) on page in light and dark: no serious or
// critical violation. Waits for the toast's animation first.
const axeRouted = new WeakSet();
export async function checkA11y(page, state) {
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

// An admin RPC from the signed-in page ("PolicyService/CreatePolicy").
export function pageRpc(page, method, body) {
  return page.evaluate(async ([m, b]) => {
    const res = await fetch(`/permit.v1.${m}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b), credentials: "same-origin",
    });
    return { status: res.status, json: await res.json().catch(() => null) };
  }, [method, body]);
}
