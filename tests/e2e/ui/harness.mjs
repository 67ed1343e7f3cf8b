// The pieces every admin-UI suite needs (ui.test.mjs, the policies, apps,
// users and audit pages; fleet.test.mjs, the fleet pages over several
// instances; gateway.test.mjs, the Gateway rules page; envoy.test.mjs, the
// Envoy descriptors page): real permitd instances on free ports with the
// suite's own MySQL database and Redis prefix, real headless Chromium
// (Debian's, through playwright-core), axe-core checks in light and dark,
// sign-in, calls of the admin RPCs from the signed-in page, and a screenshot
// of the page when a step fails. One module, so the suites test their pages
// and not copies of the harness; starting and stopping permitd is
// ../permitd.mjs, shared with the Connect and gRPC suites.
//
// Environment (ctest sets it; see tests/e2e/CMakeLists.txt): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_MYSQL_SOCKET, PERMITD_UI_SCREENSHOTS,
// PERMITD_CHROMIUM.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { freePort, httpOk, requireEnv, serverOutput, spawnPermitd, stepper, stopPermitd, waitReady } from "../permitd.mjs";

export { freePort };

const HOW = "run the suite through tests/e2e/ui/run.sh under ctest";
export const PERMITD_BIN = requireEnv("PERMITD_BIN", HOW);
export const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", HOW);
export const MYSQL_SOCKET = requireEnv("PERMITD_TEST_MYSQL_SOCKET", HOW);
export const SHOTS = process.env.PERMITD_UI_SCREENSHOTS || fs.mkdtempSync(path.join(os.tmpdir(), "permitd-ui-shots-"));
export const CHROMIUM = process.env.PERMITD_CHROMIUM || "/usr/bin/chromium";
export const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];

// axe-core as npm installed it beside this file. The admin UI's
// Content-Security-Policy (script-src 'self') refuses the inline <script>
// that page.addScriptTag({path}) would add, so the file is served to the
// page from its own origin by a route and added with addScriptTag({url}):
// the policy stays enforced while axe runs.
const AXE_FILE = fileURLToPath(new URL("./node_modules/axe-core/axe.min.js", import.meta.url));
const AXE_PATH = "/__ui-test__/axe.min.js";
const AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

export function mariadb(sql) {
  return execFileSync("mariadb", ["--no-defaults", "-S", MYSQL_SOCKET, "-uroot", "-e", sql], { encoding: "utf8" });
}

// One suite's state: its database (`${tag}_<pid>`), Redis prefix, the
// permitd instances it started (t.server: the first since setUp(), the one
// t.login() and t.adminBase() use unless told another), the page a failed
// step photographs, and the script errors pages raised. stopGraceMs: how
// long a permitd has to exit on SIGTERM before it is killed.
export function harness(tag, { stopGraceMs = 5000 } = {}) {
  const t = {
    db: `${tag}_${process.pid}`,
    prefix: `${tag}${process.pid}:`,
    server: null,
    servers: [],
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

  // A test step (90 s unless told); on failure, a screenshot of t.currentPage.
  t.step = stepper(t, {
    timeout: 90_000,
    onFailure: async (name) => {
      const file = path.join(SHOTS, `FAILED-${tag}-${name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 60)}.png`);
      await t.currentPage?.screenshot({ path: file, fullPage: true }).then(
        () => console.error(`screenshot of the failure: ${file}`), () => {});
    },
  });

  // Starts a permitd on the suite's database and prefix, on free API and
  // admin ports, and waits (15 s each) for both to answer /healthz.
  // extra: more arguments (e.g. --grpc-listen on a port of freePort());
  // appAuth: its --app-auth; redisUrl: another Redis (one that does not
  // answer). Returns the server (../permitd.mjs: spawnPermitd()).
  t.startPermitd = async (extra = [], { appAuth = "off", redisUrl = REDIS_URL } = {}) => {
    const apiPort = await freePort();
    const adminPort = await freePort();
    const args = ["--listen", `127.0.0.1:${apiPort}`, "--admin-listen", `127.0.0.1:${adminPort}`,
      "--redis-url", redisUrl, "--redis-prefix", t.prefix, "--mysql-url", t.mysqlUrl, "--sync-interval-ms", "500",
      "--app-auth", appAuth, ...extra];
    const srv = spawnPermitd(args, { apiPort, adminPort });
    t.servers.push(srv);
    t.server ??= srv;
    await waitReady(srv, "API listener: /healthz 200", httpOk(`http://127.0.0.1:${apiPort}/healthz`), 15_000);
    await waitReady(srv, "admin listener: /healthz 200", httpOk(`http://127.0.0.1:${adminPort}/healthz`), 15_000);
    return srv;
  };

  t.stopPermitd = (srv = t.server) => stopPermitd(srv, stopGraceMs);

  t.adminBase = (srv = t.server) => `http://127.0.0.1:${srv.adminPort}`;

  // Uncaught exceptions and console errors (a CSP violation is one) of page
  // go to t.pageErrors; failed requests are expected (401, 403, 409 …) and
  // are left out.
  t.watch = (page, label) => {
    page.on("pageerror", (err) => t.pageErrors.push(`${label}: ${err.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error" && !/^Failed to load resource/.test(msg.text())) t.pageErrors.push(`${label}: console: ${msg.text()}`);
    });
    return page;
  };

  // Signs in from the policy list's address (#/policies; #/, the home, is
  // the overview since issue 39) and waits for the list.
  t.login = async (page, user, srv = t.server) => {
    await page.goto(`${t.adminBase(srv)}/#/policies`);
    await page.getByLabel("Username").fill(user.name);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
  };

  // A new database with its migrations and the users [{name, password,
  // role}] (no role: the command line's default). Returns what each
  // add-user printed.
  t.setUp = (users) => {
    fs.mkdirSync(SHOTS, { recursive: true });
    mariadb(`DROP DATABASE IF EXISTS ${t.db}; CREATE DATABASE ${t.db}`);
    t.permitdCli(["migrate", "up"]);
    return users.map((u) => t.permitdCli(["admin", "add-user", u.name, ...(u.role ? ["--role", u.role] : [])], `${u.password}\n`));
  };

  // Stops every permitd the suite started (the last first), drops the
  // database, and prints each server's output when a step failed.
  t.tearDown = async () => {
    for (const srv of [...t.servers].reverse()) await t.stopPermitd(srv);
    try {
      mariadb(`DROP DATABASE IF EXISTS ${t.db}`);
    } catch (err) {
      console.error(`could not drop database ${t.db}: ${err.message}`);
    }
    if (t.failed) for (const srv of t.servers) console.error(`--- permitd output (${PERMITD_BIN} ${srv.args.join(" ")}) ---\n${serverOutput(srv)}`);
    t.servers = [];
    t.server = null;
  };
  return t;
}

// Runs axe-core (WCAG 2.0/2.1 A and AA) on the page as it is now, once in
// the light and once in the dark colour scheme, and fails on any serious or
// critical violation with one line per element: rule id, impact, the
// element's selector and axe's summary. The colour scheme is left as it was
// found (no override).
const axeRouted = new WeakSet();
export async function checkA11y(page, state) {
  const ctx = page.context();
  if (!axeRouted.has(ctx)) {
    axeRouted.add(ctx);
    await ctx.route(`**${AXE_PATH}`, (route) => route.fulfill({ path: AXE_FILE, contentType: "text/javascript; charset=utf-8" }));
  }
  // A toast caught mid-fade is half transparent: axe would weigh the
  // contrast of a state the page never rests in (seen: 1.08 against the page
  // while the "saved" toast of the step before faded). Wait for its
  // transition to end, whichever way it runs.
  await page.waitForFunction(() => {
    const t = document.getElementById("toast");
    return !t || t.getAnimations().every((a) => a.playState !== "running");
  }, null, { timeout: 5000 });
  const problems = [];
  try {
    // Reduced motion too: no toast starts fading between the wait above
    // and axe's run (its 4 s timer may end while the light scheme is
    // checked; seen: a dark run at contrast 1.79 mid-fade).
    for (const scheme of ["light", "dark"]) {
      await page.emulateMedia({ colorScheme: scheme, reducedMotion: "reduce" });
      if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ url: AXE_PATH });
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
    }
  } finally {
    await page.emulateMedia({ colorScheme: null, reducedMotion: null });
  }
  assert.equal(problems.length, 0, `axe-core: ${problems.length} serious or critical violation(s) on "${state}":\n${problems.join("\n")}`);
}

// An answer's body: its JSON, or { raw: text } when it is not JSON.
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return { raw: text };
  }
}

// An admin RPC from inside the signed-in page ("PolicyService/CreatePolicy"):
// same origin, the page's cookies. Answers { status, json } (parseJson()).
export async function pageRpc(page, method, body) {
  const { status, text } = await page.evaluate(async ([m, b]) => {
    const res = await fetch(`/permit.v1.${m}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(b), credentials: "same-origin",
    });
    return { status: res.status, text: await res.text() };
  }, [method, body]);
  return { status, json: parseJson(text) };
}
