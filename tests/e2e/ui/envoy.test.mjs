// End-to-end test of the admin UI's "Envoy descriptors" page (issue 25) in
// real headless Chromium, against a real permitd (with its gRPC listener)
// on its own MySQL database and Redis prefix: a suite of its own (ctest
// e2e_envoy_ui), on the harness it shares with gateway.test.mjs.
//
// Steps, in order, on one permitd: the page from the top bar (empty state,
// the explanation in words), a mapping created in the dialog with the
// server's field errors shown at their fields, the mapping in force on
// ShouldRateLimit over gRPC at once (Envoy's call, made here with node's
// http2 and a hand-encoded RateLimitRequest), a second row of one domain and
// descriptor refused, an edit (domain and descriptor read-only) and an edit
// that lost a race (aborted, shown in the dialog), a delete after a
// confirmation, a viewer without controls, at 1280 and 390 px, a row whose
// policy is gone marked broken and named on /readyz; every state
// checked with axe-core (WCAG 2.x A/AA, light and dark), and no script
// error or CSP violation on the way.
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import http2 from "node:http2";
import path from "node:path";

import { chromium } from "playwright-core";

import { CHROMIUM, CHROMIUM_ARGS, SHOTS, checkA11y, freePort, harness, mariadb, pageRpc } from "./harness.mjs";

const T = harness("uienvoy");
const { step, login } = T;
const EDITOR = { name: "carol", password: crypto.randomBytes(12).toString("hex"), role: "editor" };
const VIEWER = { name: "dave", password: crypto.randomBytes(12).toString("hex"), role: "viewer" };
const POLICY = "envoy-ui";
const DOMAIN = "edge";   // with --app-auth off the domain stands for the app
let grpcPort = 0;

// protobuf, as much as RateLimitRequest needs: length-delimited fields and a varint.
function varint(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return Buffer.from(out);
}
const field = (tag, bytes) => Buffer.concat([Buffer.from([(tag << 3) | 2]), varint(bytes.length), bytes]);

// Envoy's ShouldRateLimit: domain, one descriptor of entries [[key, value]].
// Resolves to the response's overall_code: "OK" or "OVER_LIMIT".
function shouldRateLimit(domain, entries) {
  // RateLimitDescriptor: its entries (field 1, each key 1 and value 2)
  const desc = Buffer.concat(entries.map(([k, v]) => field(1, Buffer.concat([field(1, Buffer.from(k)), field(2, Buffer.from(v))]))));
  const msg = Buffer.concat([field(1, Buffer.from(domain)), field(2, desc)]);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(msg.length, 1);
  return new Promise((resolve, reject) => {
    const client = http2.connect(`http://127.0.0.1:${grpcPort}`);
    client.on("error", reject);
    const req = client.request({
      ":method": "POST", ":path": "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
      "content-type": "application/grpc", te: "trailers",
    });
    const chunks = [];
    let status = null;
    let message = "";
    const meta = (h) => {
      if (h["grpc-status"] !== undefined) {
        status = h["grpc-status"];
        message = decodeURIComponent(h["grpc-message"] || "");
      }
    };
    req.on("response", meta);
    req.on("trailers", meta);
    req.on("data", (c) => chunks.push(c));
    req.on("error", reject);
    req.on("end", () => {
      client.close();
      if (status !== "0") return reject(new Error(`ShouldRateLimit: grpc-status ${status}: ${message}`));
      const body = Buffer.concat(chunks).subarray(5);
      // overall_code is field 1, a varint: OK 1, OVER_LIMIT 2
      const code = body[0] === 0x08 ? body[1] : 0;
      resolve({ 1: "OK", 2: "OVER_LIMIT" }[code] || `code ${code}`);
    });
    req.end(Buffer.concat([prefix, msg]));
  });
}
const user = (id) => [["generic_key", "api"], ["user_id", id]];

describe("the Envoy descriptors page in headless Chromium", () => {
  let browser;
  let page;

  before(async () => {
    T.setUp([EDITOR, VIEWER]);
    grpcPort = await freePort();
    await T.startPermitd(["--grpc-listen", `127.0.0.1:${grpcPort}`]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    page = T.watch(await ctx.newPage(), "carol");
    T.currentPage = page;
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await T.tearDown();
  });

  step("the page is in the top bar, starts empty and says what a row does", async () => {
    await login(page, EDITOR);
    const r = await pageRpc(page, "PolicyService/CreatePolicy", { policy: {
      name: POLICY, apps: [DOMAIN], maxPermits: "1", rate: "0.001", enabled: true, failureMode: "closed" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    await page.getByRole("link", { name: "Envoy descriptors" }).click();
    await page.getByRole("heading", { name: "Envoy descriptors", level: 1 }).waitFor();
    await page.getByText("No Envoy descriptors yet").waitFor();
    assert.equal(await page.locator("#nav-envoy").getAttribute("aria-current"), "page");
    assert.match(await page.locator("main").textContent(), /rate_limits actions build/);
    assert.match(await page.locator("main").textContent(), /the one pinning the most values wins/);
    await checkA11y(page, "envoy descriptors, empty");
  });

  step("the server's validation errors are shown at their fields, then the mapping is created", async () => {
    await page.locator("#new-descriptor").click();
    const dlg = page.locator("#envoy-dialog");
    await dlg.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.id), "e-domain");
    await page.locator("#e-domain").fill(DOMAIN);
    await page.locator("#e-descriptor").fill("generic_key=api,,user_id");
    await page.locator("#e-policy").fill(POLICY);
    await page.locator("#e-key-entry").fill("user_id");
    await page.locator("#envoy-save").click();
    const descErr = page.locator("#e-descriptor-error");
    await descErr.waitFor();
    assert.match(await descErr.textContent(), /^Descriptor entries: "generic_key=api,,user_id" is not a comma-separated list/);
    assert.equal(await page.locator("#e-descriptor").getAttribute("aria-invalid"), "true");
    assert.equal(await page.evaluate(() => document.activeElement.id), "e-descriptor");
    await checkA11y(page, "envoy dialog with a field error");
    await page.locator("#e-descriptor").fill("generic_key=api,user_id");
    assert.equal(await descErr.isHidden(), true);
    await page.locator("#e-key-entry").fill("generic_key");
    await page.locator("#envoy-save").click();
    const keyErr = page.locator("#e-key-entry-error");
    await keyErr.waitFor();
    assert.match(await keyErr.textContent(), /^Key entry: "generic_key" is not an entry of descriptor "generic_key=api,user_id" whose value varies/);
    assert.equal(await page.evaluate(() => document.activeElement.id), "e-key-entry");
    await page.locator("#e-key-entry").fill("user_id");
    await page.locator("#envoy-save").click();
    await dlg.waitFor({ state: "detached" });
    const row = page.locator("#descriptors tbody tr");
    await row.first().waitFor();
    assert.equal(await row.count(), 1);
    const text = await row.first().textContent();
    assert.match(text, /generic_key=api/);
    assert.match(text, new RegExp(POLICY));
    assert.match(text, /value of user_id/);
    assert.match(text, /A descriptor of domain edge with exactly \(generic_key = "api", user_id = any value\) takes its hits from policy envoy-ui: one bucket per value of user_id\./);
    // Focus lands on the new row's Edit button.
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains("edit-descriptor")), true);
    await checkA11y(page, "envoy descriptors, one row");
  });

  step("the mapping is in force on ShouldRateLimit at once", async () => {
    assert.equal(await shouldRateLimit(DOMAIN, user("u1")), "OK");
    assert.equal(await shouldRateLimit(DOMAIN, user("u1")), "OVER_LIMIT");
    assert.equal(await shouldRateLimit(DOMAIN, user("u2")), "OK");
    // No row for it: answered OK, as envoyproxy/ratelimit answers a descriptor it has no limit for.
    assert.equal(await shouldRateLimit(DOMAIN, [["remote_address", "10.0.0.1"]]), "OK");
    assert.equal(await shouldRateLimit(DOMAIN, [["remote_address", "10.0.0.1"]]), "OK");
  });

  step("a second row of one domain and descriptor is refused, not written over the first", async () => {
    await page.locator("#new-descriptor").click();
    await page.locator("#envoy-dialog").waitFor();
    assert.equal(await page.locator("#e-domain").inputValue(), DOMAIN);
    await page.locator("#e-descriptor").fill("generic_key=api,user_id");
    await page.locator("#e-policy").fill("other-policy");
    await page.locator("#envoy-save").click();
    const err = page.locator("#e-descriptor-error");
    await err.waitFor();
    assert.match(await err.textContent(), /already maps "generic_key=api,user_id" \(to policy envoy-ui\): edit that row instead/);
    await page.locator("#envoy-dialog-cancel").click();
    await page.locator("#envoy-dialog").waitFor({ state: "detached" });
    const r = await pageRpc(page, "EnvoyDescriptorService/ListEnvoyDescriptors", {});
    assert.deepEqual(r.json.descriptors.map((d) => d.policy), [POLICY]);
  });

  step("edit: one shared bucket, saved at its version; the row's name cannot change", async () => {
    await page.locator("#descriptors .edit-descriptor").click();
    await page.locator("#envoy-dialog").waitFor();
    assert.equal(await page.locator("#e-domain").getAttribute("readonly"), "");
    assert.equal(await page.locator("#e-descriptor").getAttribute("readonly"), "");
    assert.equal(await page.locator("#e-key-entry").inputValue(), "user_id");
    await page.locator("#e-key-entry").fill("");
    await page.locator("#e-description").fill("every API user shares one");
    await page.locator("#envoy-save").click();
    await page.locator("#envoy-dialog").waitFor({ state: "detached" });
    await page.getByText("none (shared)").waitFor();
    await page.getByText("every API user shares one").waitFor();
    assert.match(await page.locator("#descriptors tbody tr").textContent(), /one bucket shared by all of them/);
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains("edit-descriptor")), true);
    assert.equal(await shouldRateLimit(DOMAIN, user("u3")), "OK");
    assert.equal(await shouldRateLimit(DOMAIN, user("u4")), "OVER_LIMIT");
  });

  step("an edit of a row changed meanwhile is refused in the dialog", async () => {
    await page.locator("#descriptors .edit-descriptor").click();
    await page.locator("#envoy-dialog").waitFor();
    const r = await pageRpc(page, "EnvoyDescriptorService/PutEnvoyDescriptor", { descriptor: {
      domain: DOMAIN, descriptor: "generic_key=api,user_id", policy: POLICY, keyEntry: "", description: "changed in another tab" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    await page.locator("#e-description").fill("mine");
    await page.locator("#envoy-save").click();
    const msg = page.locator("#envoy-dialog .form-error");
    await msg.waitFor();
    assert.match(await msg.textContent(), /no longer at version/);
    await checkA11y(page, "envoy dialog, edit refused");
    await page.locator("#envoy-dialog-cancel").click();
    await page.reload();
    await page.getByText("changed in another tab").waitFor();
  });

  step("delete asks first, then the mapping is gone", async () => {
    await page.locator("#descriptors .delete-descriptor").click();
    await page.locator("#delete-descriptor").waitFor();
    assert.match(await page.locator("#delete-descriptor").textContent(), /ShouldRateLimit answers them OK/);
    await checkA11y(page, "delete descriptor confirmation");
    await page.locator("#delete-descriptor-confirm").click();
    await page.getByText("No Envoy descriptors yet").waitFor();
    assert.equal(await shouldRateLimit(DOMAIN, user("u4")), "OK");
    assert.equal(await shouldRateLimit(DOMAIN, user("u4")), "OK");
  });

  step("a viewer sees the mappings without write controls, also at 390 px", async () => {
    const r = await pageRpc(page, "EnvoyDescriptorService/PutEnvoyDescriptor", { descriptor: {
      domain: DOMAIN, descriptor: "remote_address", policy: POLICY, keyEntry: "remote_address" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    const vpage = T.watch(await ctx.newPage(), "dave");
    T.currentPage = vpage;
    await login(vpage, VIEWER);
    await vpage.goto(`${T.adminBase()}/#/envoy`);
    await vpage.locator("#descriptors tbody tr").first().waitFor();
    assert.match(await vpage.locator("#descriptors tbody tr").textContent(), /one bucket per value of remote_address/);
    assert.equal(await vpage.locator("#new-descriptor").count(), 0);
    assert.equal(await vpage.locator(".edit-descriptor, .delete-descriptor").count(), 0);
    await checkA11y(vpage, "envoy descriptors, viewer");
    await vpage.screenshot({ path: path.join(SHOTS, "envoy-descriptors-viewer.png"), fullPage: true });
    await vpage.setViewportSize({ width: 390, height: 844 });
    assert.ok(await vpage.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), "no horizontal scrolling at 390 px");
    await checkA11y(vpage, "envoy descriptors at 390 px");
    await ctx.close();
    T.currentPage = page;
  });

  step("a descriptor whose policy is gone shows as broken, and /readyz names it", async () => {
    // As plain SQL can leave one (issue 40): the API refuses to write it.
    mariadb(`INSERT INTO \`${T.db}\`.envoy_descriptors (domain, descriptor, policy) VALUES ('${DOMAIN}', 'generic_key=gone', 'envoy-gone')`);
    await page.goto(`${T.adminBase()}/#/envoy`);
    await page.reload();
    const gone = page.locator("#descriptors tbody tr", { hasText: "generic_key" }).filter({ hasText: "envoy-gone" });
    await gone.locator(".broken-policy").waitFor();
    assert.equal(await page.locator("#descriptors tbody tr", { hasText: "remote_address" }).locator(".broken-policy").count(), 0);
    await checkA11y(page, "envoy descriptors, one broken");
    const want = `descriptor ${DOMAIN}/generic_key=gone names policy envoy-gone`;
    let body = "";
    for (let tries = 0; !body.includes(want); tries++) {
      assert.ok(tries < 600, `/readyz never named the broken descriptor:\n${body}`);
      if (tries) await new Promise((res) => setTimeout(res, 100));
      const res = await fetch(`${T.adminBase()}/readyz`);
      body = await res.text();
      assert.equal(res.status, 200, body);
    }
    assert.equal(await shouldRateLimit(DOMAIN, [["generic_key", "gone"]]), "OK");
  });

  step("the page raised no script errors and broke no Content-Security-Policy", () => {
    assert.deepEqual(T.pageErrors, []);
  });
});
