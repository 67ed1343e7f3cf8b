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
// delete after a confirmation, a viewer without controls, a policy's delete
// dialog listing what names it (rules, descriptors, "N overrides") and its
// recent calls; every state
// checked with axe-core (WCAG 2.x A/AA, light and dark), and no script
// error or CSP violation on the way. The harness (permitd, Chromium, axe,
// sign-in) is harness.mjs, shared with envoy.test.mjs.
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";

import { chromium } from "playwright-core";

import * as fmt from "../../../admin-ui/format.js";
import { CHROMIUM, CHROMIUM_ARGS, SHOTS, checkA11y, harness, mariadb, pageRpc } from "./harness.mjs";

const T = harness("uigw");
const { step, login } = T;
const EDITOR = { name: "alice", password: crypto.randomBytes(12).toString("hex"), role: "editor" };
const VIEWER = { name: "bob", password: crypto.randomBytes(12).toString("hex"), role: "viewer" };
const POLICY = "gw-ui";
const adminBase = () => T.adminBase();

// The gateway's sub-request, as nginx sends it (a denial: 403, nginx's style).
async function forwardAuth(uri, headers = {}) {
  const res = await fetch(`http://127.0.0.1:${T.server.apiPort}/v1/forward-auth/nginx`, {
    headers: { "X-Original-URI": uri, "X-Original-Method": "GET", ...headers },
  });
  await res.arrayBuffer();
  return res.status;
}

describe("the Gateway rules page in headless Chromium", () => {
  let browser;
  let page;

  before(async () => {
    T.setUp([EDITOR, VIEWER]);
    await T.startPermitd();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(15_000);
    page = T.watch(await ctx.newPage(), "alice");
    T.currentPage = page;
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await T.tearDown();
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
    assert.equal(await page.locator("#r-hash-key").inputValue(), "false");
    await page.locator("#r-hash-key").selectOption("true");
    await page.locator("#rule-save").click();
    await dlg.waitFor({ state: "detached" });
    const row = page.locator("#rules tbody tr");
    await row.first().waitFor();
    assert.equal(await row.count(), 1);
    const text = await row.first().textContent();
    assert.match(text, /\/api\//);
    assert.match(text, /header X-Api-Key, hashed/);
    assert.match(text, new RegExp(POLICY));
    await checkA11y(page, "gateway rules, one rule");
  });

  step("the rule is in force on /v1/forward-auth at once", async () => {
    assert.equal(await forwardAuth("/api/x", { "X-Api-Key": "k1" }), 200);
    assert.equal(await forwardAuth("/api/x", { "X-Api-Key": "k1" }), 403);
    assert.equal(await forwardAuth("/api/x", { "X-Api-Key": "k2" }), 200);
    assert.equal(await forwardAuth("/other", { "X-Api-Key": "k1" }), 200);
  });

  step("edit: another key source, saved at its version", async () => {
    await page.locator("#rules .edit-rule").click();
    await page.locator("#rule-dialog").waitFor();
    assert.equal(await page.locator("#r-key-header").inputValue(), "X-Api-Key");
    assert.equal(await page.locator("#r-hash-key").inputValue(), "true");
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
    assert.equal(await forwardAuth("/api/y", { "X-Api-Key": "k4" }), 403);
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
    const vpage = T.watch(await ctx.newPage(), "bob");
    T.currentPage = vpage;
    await login(vpage, VIEWER);
    await vpage.goto(`${adminBase()}/#/gateway`);
    await vpage.locator("#rules tbody tr").first().waitFor();
    assert.equal(await vpage.locator("#new-rule").count(), 0);
    assert.equal(await vpage.locator(".edit-rule, .delete-rule").count(), 0);
    await checkA11y(vpage, "gateway rules, viewer");
    await vpage.screenshot({ path: path.join(SHOTS, "gateway-rules-viewer.png"), fullPage: true });
    await ctx.close();
    T.currentPage = page;
  });

  step("the policy is picked from existing ones; a rule whose policy is gone shows as broken", async () => {
    // A rule naming no policy, as plain SQL can write it (issue 40).
    mariadb(`INSERT INTO \`${T.db}\`.gateway_rules (path_prefix, policy, key_source) VALUES ('/gone/', 'gw-gone', 'none')`);
    await page.goto(`${adminBase()}/#/gateway`);
    await page.reload();
    const broken = page.locator("#rules tbody tr", { hasText: "/gone/" }).locator(".broken-policy");
    await broken.waitFor();
    assert.equal(await page.locator("#rules tbody tr", { hasText: "/v/" }).locator(".broken-policy").count(), 0);
    await page.locator("#new-rule").click();
    await page.locator("#rule-dialog").waitFor();
    await page.locator(`#r-policy-options option[value="${POLICY}"]`).waitFor({ state: "attached" });
    assert.deepEqual(await page.locator("#r-policy-options option").evaluateAll((o) => o.map((x) => x.value)), [POLICY]);
    await page.locator("#r-policy").fill("gw-gone");
    await page.locator("#rule-save").click();
    await page.locator("#r-policy-error").waitFor();
    assert.match(await page.locator("#r-policy-error").textContent(), /no policy is named "gw-gone"/);
    await checkA11y(page, "rule dialog, policy picker");
    await page.locator("#rule-dialog-cancel").click();
    await page.locator("#rule-dialog").waitFor({ state: "detached" });
  });

  step("a policy's delete dialog lists its gateway rules, Envoy descriptors, overrides and recent calls; ticked, they go with it, audited", async () => {
    // Issue 40, point 3. The descriptor's entries hold a comma: the list is
    // the server's words, not split on commas.
    const DEL = "gw-del";
    let r = await pageRpc(page, "PolicyService/CreatePolicy", { policy: {
      name: DEL, apps: ["gateway"], maxPermits: "100", rate: "1", enabled: true, failureMode: "closed" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    r = await pageRpc(page, "GatewayService/CreateGatewayRule", { rule: { pathPrefix: "/del/", policy: DEL, keySource: "none" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const ruleId = r.json.rule.id;
    r = await pageRpc(page, "EnvoyDescriptorService/PutEnvoyDescriptor", { descriptor: {
      domain: "edge", descriptor: "generic_key=del,user_id", policy: DEL, keyEntry: "user_id" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    // Issue 37: overrides name it too, counted in the dialog ("2 overrides").
    for (const v of ["vip", "premium_"]) {
      r = await pageRpc(page, "OverrideService/CreateOverride", { override: {
        policy: DEL, matchKind: v === "vip" ? "key" : "prefix", matchValue: v, action: "limit", maxPermits: "1000", rate: "10" } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
    for (let i = 0; i < 3; i++) assert.equal(await forwardAuth("/del/x"), 200);
    // The calls are counted by the second: wait until this instance has all three.
    const sum = (a) => (a || []).reduce((t, x) => t + Number(x), 0);
    for (let tries = 0; ; tries++) {
      const st = await pageRpc(page, "PolicyService/GetPolicyStats", { name: DEL, seconds: 300 });
      if (st.json.known && sum(st.json.allowed) + sum(st.json.denied) === 3) break;
      assert.ok(tries < 600, `GetPolicyStats never counted the 3 calls: ${JSON.stringify(st.json)}`);
      await new Promise((res) => setTimeout(res, 100));
    }
    await page.goto(`${adminBase()}/#/policy/${DEL}`);
    await page.locator("#delete-policy").click();
    const refs = page.locator("#delete-refs-text");
    await refs.waitFor();
    const words = await refs.textContent();
    assert.match(words, /^4 references name it: /);
    assert.ok(words.includes(`gateway rule ${ruleId}`), words);
    assert.ok(words.includes("envoy descriptor edge/generic_key=del,user_id"), words);
    assert.ok(words.includes("2 overrides"), words);
    const calls = page.locator("#delete-calls");
    await calls.waitFor();
    assert.equal(await calls.textContent(), "3 calls named it in the last 5 minutes (this instance).");
    await checkA11y(page, "delete dialog with its references and recent calls");
    await page.screenshot({ path: path.join(SHOTS, "gateway-delete-policy-references.png") });
    // Unticked: the server refuses, naming them, and the dialog says so.
    await page.locator("#delete-confirm").click();
    const err = page.getByRole("dialog").locator(".form-error");
    await err.waitFor();
    assert.match(await err.textContent(), new RegExp(`gateway rule ${ruleId}`));
    assert.match(await err.textContent(), /2 overrides/);
    assert.equal((await pageRpc(page, "PolicyService/GetPolicy", { name: DEL })).status, 200);
    assert.equal((await pageRpc(page, "OverrideService/ListOverrides", { policy: DEL })).json.overrides.length, 2);
    await checkA11y(page, "delete dialog, refused while named");
    await page.locator("#delete-refs-remove").check();
    await page.locator("#delete-confirm").click();
    await page.getByRole("dialog").waitFor({ state: "detached" });
    assert.equal((await pageRpc(page, "PolicyService/GetPolicy", { name: DEL })).json.code, "not_found");
    const rules = (await pageRpc(page, "GatewayService/ListGatewayRules", {})).json.rules || [];
    assert.deepEqual(rules.filter((x) => x.policy === DEL), []);
    const descs = (await pageRpc(page, "EnvoyDescriptorService/ListEnvoyDescriptors", { domain: "edge" })).json.descriptors || [];
    assert.deepEqual(descs.filter((x) => x.policy === DEL), []);
    // Audited: the rule's delete by alice, the descriptor whole in the policy's delete row.
    const audit = mariadb(`SELECT action, actor FROM \`${T.db}\`.gateway_rule_audit WHERE rule_id = ${ruleId} ORDER BY id`);
    assert.match(audit, /create\s+alice\s+delete\s+alice/);
    const ovAudit = mariadb(`SELECT action, actor FROM \`${T.db}\`.override_audit WHERE policy = '${DEL}' AND action = 'delete' ORDER BY id`);
    assert.match(ovAudit, /^action\s+actor\s+delete\s+alice\s+delete\s+alice\s*$/);
    // Made again under the name, the policy has no override of the old one.
    r = await pageRpc(page, "PolicyService/CreatePolicy", { policy: {
      name: DEL, apps: ["gateway"], maxPermits: "100", rate: "1", enabled: true, failureMode: "closed" } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual((await pageRpc(page, "OverrideService/ListOverrides", { policy: DEL })).json.overrides || [], []);
    const old = mariadb(`SELECT JSON_EXTRACT(old_value, '$.removed_envoy_descriptors[0].descriptor') FROM \`${T.db}\`.policy_audit WHERE name = '${DEL}' AND action = 'delete'`);
    assert.match(old, /"generic_key=del,user_id"/);
    // The policy's history says it in words.
    const hist = await pageRpc(page, "PolicyService/ListPolicyHistory", { name: DEL });
    assert.equal(hist.status, 200, JSON.stringify(hist.json));
    const gone = (hist.json.changes || []).find((c) => c.action === "delete");
    assert.ok(gone, JSON.stringify(hist.json));
    const row = fmt.diffChange(gone).rows.find((r) => r.field === "removed_envoy_descriptors");
    assert.deepEqual(row && [row.label, row.old], ["Envoy descriptors deleted with it", "edge/generic_key=del,user_id (key user_id)"]);
  });

  step("the page raised no script errors and broke no Content-Security-Policy", () => {
    assert.deepEqual(T.pageErrors, []);
  });
});
