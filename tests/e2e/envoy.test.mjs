// End-to-end: Envoy's rate limit service (envoy.service.ratelimit.v3
// ShouldRateLimit) on permitd's gRPC listener (issue 25), called with
// @grpc/grpc-js from the copy of Envoy's rls.proto under proto/envoy, as
// Envoy's `ratelimit` filter calls it. The descriptor mapping lives in MySQL
// (migration 0011): rows written by SQL reach permitd through the sync; rows
// written through EnvoyDescriptorService on the admin listener work at once.
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_MYSQL_ROOT_URL (root over the socket).
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

import grpc from "@grpc/grpc-js";

import {
  databaseUrl, httpOk, listeners, mariadb, requireEnv, spawnPermitd, stepper, stopAndReport, waitReady,
} from "./permitd.mjs";
import { loadProto } from "./proto.mjs";

const HINT = "envoy.test.mjs: run it under ctest: e2e_grpc";
const PERMITD_BIN = requireEnv("PERMITD_BIN", HINT);
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", HINT);
const ROOT_URL = requireEnv("PERMITD_TEST_MYSQL_ROOT_URL", HINT);
const DB = `envoy_${process.pid}`;
const PREFIX = `e2e-envoy-${process.pid}:`;
const DOMAIN = "edge";
const SYNC_MS = 300;

const rls = loadProto("envoy/service/ratelimit/v3/rls.proto", { enums: String }).envoy.service.ratelimit.v3;

// ---------------------------------------------------------------- helpers

function sql(text, database = DB) {
  return mariadb(ROOT_URL, text, database);
}

function dbUrl() {
  return databaseUrl(ROOT_URL, DB);
}

function cli(args, input = "") {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PERMITD_")));
  env.PERMITD_MYSQL_URL = dbUrl();
  const r = spawnSync(PERMITD_BIN, args, { input, env, encoding: "utf8" });
  assert.equal(r.status, 0, `permitd ${args.join(" ")}: ${r.stdout}${r.stderr}`);
}

function putPolicy(name, maxPermits) {
  sql(`INSERT INTO policies (name, max_permits, rate) VALUES ('${name}', ${maxPermits}, 0.001);
       INSERT INTO policy_apps (policy_id, app) SELECT id, '${DOMAIN}' FROM policies WHERE name = '${name}';`);
}

function putMapping(descriptor, policy, keyEntry) {
  sql(`INSERT INTO envoy_descriptors (domain, descriptor, policy, key_entry)
       VALUES ('${DOMAIN}', '${descriptor}', '${policy}', '${keyEntry}');`);
}

let server = null; // spawnPermitd()'s, with grpcPort and adminPort
const run = { failed: false };
const step = stepper(run);

async function startPermitd() {
  const l = await listeners();
  const args = [...l.args, "--threads", "2",
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--mysql-url", dbUrl(),
                "--sync-interval-ms", String(SYNC_MS), "--app-auth", "off"];
  server = spawnPermitd(args, l.ports);
  await waitReady(server, "admin listener: /readyz 200", httpOk(`http://127.0.0.1:${l.ports.adminPort}/readyz`), 15_000);
}

let client = null;

function should(descriptors, { hits = 0, domain = DOMAIN } = {}) {
  return new Promise((resolve, reject) => {
    client.ShouldRateLimit({ domain, hits_addend: hits, descriptors: descriptors.map((d) => ({
      entries: Object.entries(d).map(([key, value]) => ({ key, value })) })) },
    { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

function header(res, name) {
  return res.response_headers_to_add.find((h) => h.key === name)?.value;
}

async function waitFor(what, fn, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(50);
  }
}

// ---------------------------------------------------------------- lifecycle

before(async () => {
  sql(`CREATE DATABASE \`${DB}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`, "");
  cli(["migrate", "up"]);
  cli(["admin", "add-user", "ed", "--role", "editor"], "editor-password-1\n");
  putPolicy("envoy-ip", 3);
  putPolicy("envoy-user", 2);
  putPolicy("envoy-vip", 100);
  putPolicy("envoy-path", 1);
  putMapping("remote_address", "envoy-ip", "remote_address");
  putMapping("generic_key=api,user_id", "envoy-user", "user_id");
  putMapping("generic_key=api,user_id=vip", "envoy-vip", "");
  await startPermitd();
  client = new rls.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
});

after(async () => {
  client?.close();
  await stopAndReport(server, run, 15_000);
  try {
    sql(`DROP DATABASE IF EXISTS \`${DB}\``, "");
  } catch {
    // best effort
  }
});

// ---------------------------------------------------------------- ShouldRateLimit

step("remote_address: exactly max_permits per address, then OVER_LIMIT with the limit, remaining, reset and headers", async () => {
  const answers = [];
  for (let i = 0; i < 4; i++) answers.push(await should([{ remote_address: "10.0.0.1" }]));
  assert.deepEqual(answers.map((a) => a.overall_code), ["OK", "OK", "OK", "OVER_LIMIT"]);
  assert.deepEqual(answers.map((a) => a.statuses[0].limit_remaining), [2, 1, 0, 0]);
  const st = answers[3].statuses[0];
  assert.equal(st.code, "OVER_LIMIT");
  assert.equal(st.current_limit.name, "envoy-ip");
  // 3 permits refilled at 0.001/s: 3 per 3000 s, i.e. 4 an hour (3.6 rounded)
  assert.deepEqual([st.current_limit.requests_per_unit, st.current_limit.unit], [4, "HOUR"]);
  assert.ok(Number(st.duration_until_reset.seconds) > 0);
  assert.equal(header(answers[0], "RateLimit-Policy"), '"envoy-ip";q=3;w=3000');
  assert.match(header(answers[3], "RateLimit"), /^"envoy-ip";r=0;t=\d+$/);
  assert.ok(Number(header(answers[3], "Retry-After")) >= 1);
  // another address has a bucket of its own
  const other = await should([{ remote_address: "10.0.0.2" }]);
  assert.equal(other.overall_code, "OK");
  assert.equal(other.statuses[0].limit_remaining, 2);
});

step("nested entries, the most specific row wins, hits_addend takes that many", async () => {
  const a = await should([{ generic_key: "api", user_id: "u1" }], { hits: 2 });
  assert.equal(a.overall_code, "OK");
  assert.equal(a.statuses[0].limit_remaining, 0);
  assert.equal(a.statuses[0].current_limit.name, "envoy-user");
  const b = await should([{ generic_key: "api", user_id: "u1" }]);
  assert.equal(b.overall_code, "OVER_LIMIT");
  const c = await should([{ generic_key: "api", user_id: "u2" }]);
  assert.equal(c.overall_code, "OK");
  const vip = await should([{ generic_key: "api", user_id: "vip" }], { hits: 10 });
  assert.equal(vip.statuses[0].current_limit.name, "envoy-vip");
  assert.equal(vip.statuses[0].limit_remaining, 90);
  // hits over max_permits can never pass
  const over = await should([{ generic_key: "api", user_id: "u3" }], { hits: 5 });
  assert.equal(over.overall_code, "OVER_LIMIT");
});

step("unknown descriptors and domains are OK without a limit; one over limit makes the whole answer OVER_LIMIT", async () => {
  const u = await should([{ generic_key: "web" }, { remote_address: "10.9.9.9", extra: "x" }]);
  assert.equal(u.overall_code, "OK");
  assert.equal(u.statuses.length, 2);
  assert.equal(u.statuses[0].code, "OK");
  assert.equal(u.statuses[0].current_limit, null);
  const d = await should([{ remote_address: "10.0.0.1" }], { domain: "other-domain" });
  assert.equal(d.overall_code, "OK");
  const mixed = await should([{ generic_key: "web" }, { remote_address: "10.0.0.1" }]);
  assert.equal(mixed.overall_code, "OVER_LIMIT");
  assert.deepEqual(mixed.statuses.map((s) => s.code), ["OK", "OVER_LIMIT"]);
});

step("a key value the key rules refuse (300 bytes, a TAB) is limited by its hash; the call's other descriptors still count", async () => {
  for (const [i, bad] of ["x".repeat(300), "a\tb"].entries()) {
    const ip = `10.7.0.${i}`;
    const codes = [];
    for (let n = 0; n < 3; n++) {
      const r = await should([{ remote_address: ip }, { generic_key: "api", user_id: bad }]);
      codes.push(r.statuses.map((s) => s.code));
    }
    // envoy-user allows 2 per user: the bad value is one user, limited
    assert.deepEqual(codes, [["OK", "OK"], ["OK", "OK"], ["OK", "OVER_LIMIT"]], `value #${i}`);
    // and the address (3 per address) counted on every call, the third too
    const ipOnly = await should([{ remote_address: ip }]);
    assert.equal(ipOnly.overall_code, "OVER_LIMIT", `value #${i}`);
  }
  // another value is another bucket: hashes, not one shared bucket for every bad value
  const other = await should([{ generic_key: "api", user_id: "y".repeat(300) }]);
  assert.equal(other.overall_code, "OK");
  assert.equal(other.statuses[0].limit_remaining, 1);
});

step("a request without a domain or descriptors is INVALID_ARGUMENT", async () => {
  await assert.rejects(should([{ remote_address: "1.2.3.4" }], { domain: "" }),
    (e) => e.code === grpc.status.INVALID_ARGUMENT && /domain/.test(e.details));
  await assert.rejects(should([]), (e) => e.code === grpc.status.INVALID_ARGUMENT && /descriptors/.test(e.details));
});

// A descriptor carrying Envoy's own `limit` (RateLimitOverride), once each.
function shouldLimit(entries, requestsPerUnit, unit) {
  return new Promise((resolve, reject) => {
    client.ShouldRateLimit({ domain: DOMAIN, descriptors: [{
      entries: Object.entries(entries).map(([key, value]) => ({ key, value })),
      limit: { requests_per_unit: requestsPerUnit, unit } }] },
    { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

step("a descriptor's own limit: honoured where its row allows it, ignored elsewhere (issue 37)", async () => {
  putPolicy("envoy-own", 1);
  putPolicy("envoy-own-ok", 1);
  putMapping("tenant", "envoy-own", "tenant");
  putMapping("team", "envoy-own-ok", "team");
  sql(`UPDATE envoy_descriptors SET allow_limit_override = 1 WHERE descriptor = 'team'`);
  await waitFor("the rows and the flag through the sync", async () =>
    (await shouldLimit({ team: "probe" }, 5, "MINUTE")).statuses[0].current_limit?.requests_per_unit === 5,
    SYNC_MS * 40);
  // refused: the row does not allow it, the policy's 1 stands
  const refused = [];
  for (let i = 0; i < 3; i++) refused.push(await shouldLimit({ tenant: "t1" }, 3, "MINUTE"));
  assert.deepEqual(refused.map((a) => a.overall_code), ["OK", "OVER_LIMIT", "OVER_LIMIT"]);
  // allowed: 3 a minute for this caller, then over
  const allowed = [];
  for (let i = 0; i < 4; i++) allowed.push(await shouldLimit({ team: "a" }, 3, "MINUTE"));
  assert.deepEqual(allowed.map((a) => a.overall_code), ["OK", "OK", "OK", "OVER_LIMIT"]);
  const lim = allowed[3].statuses[0].current_limit;
  assert.deepEqual([lim.requests_per_unit, lim.unit], [3, "MINUTE"]);
  // a limit that is none (0 requests, UNKNOWN unit) leaves the policy's
  const none = [];
  for (let i = 0; i < 2; i++) none.push(await shouldLimit({ team: "b" }, 0, "UNKNOWN"));
  assert.deepEqual(none.map((a) => a.overall_code), ["OK", "OVER_LIMIT"]);
});

step("a row written by SQL reaches permitd through the sync", async () => {
  const first = await should([{ path: "/login" }]);
  assert.equal(first.statuses[0].current_limit, null);
  putMapping("path", "envoy-path", "path");
  await waitFor("the sync's pass", async () => (await should([{ path: "/probe" }])).statuses[0].current_limit !== null,
    SYNC_MS * 20);
  const a = await should([{ path: "/login" }]);
  const b = await should([{ path: "/login" }]);
  assert.deepEqual([a.overall_code, b.overall_code], ["OK", "OVER_LIMIT"]);
});

step("EnvoyDescriptorService: a row put by an editor works at once; a bad one is refused naming it", async () => {
  const base = `http://127.0.0.1:${server.adminPort}`;
  const origin = { Origin: base, "Content-Type": "application/json" };
  const login = await fetch(`${base}/permit.v1.AdminAuthService/Login`, { method: "POST", headers: origin,
    body: JSON.stringify({ username: "ed", password: "editor-password-1" }) });
  assert.equal(login.status, 200, await login.text());
  const cookie = login.headers.get("set-cookie").split(";")[0];
  const rpc = (m, body) => fetch(`${base}/permit.v1.EnvoyDescriptorService/${m}`, { method: "POST",
    headers: { ...origin, Cookie: cookie }, body: JSON.stringify(body) });
  const bad = await rpc("PutEnvoyDescriptor", { descriptor: { domain: DOMAIN, descriptor: "tenant,,plan", policy: "envoy-ip" } });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).message, /tenant,,plan/);
  const badKey = await rpc("PutEnvoyDescriptor", { descriptor: { domain: DOMAIN, descriptor: "tenant", policy: "envoy-ip", keyEntry: "plan" } });
  assert.equal(badKey.status, 400);
  assert.match((await badKey.json()).message, /key_entry: "plan"/);
  const ok = await rpc("PutEnvoyDescriptor", { descriptor: { domain: DOMAIN, descriptor: "tenant", policy: "envoy-user", keyEntry: "tenant" } });
  assert.equal(ok.status, 200, await ok.clone().text());
  assert.equal((await ok.json()).descriptor.policy, "envoy-user");
  const a = await should([{ tenant: "t1" }], { hits: 2 });
  assert.equal(a.statuses[0].current_limit?.name, "envoy-user");
  const list = await rpc("ListEnvoyDescriptors", { domain: DOMAIN });
  assert.ok((await list.json()).descriptors.some((d) => d.descriptor === "tenant"));
  const del = await rpc("DeleteEnvoyDescriptor", { domain: DOMAIN, descriptor: "tenant" });
  assert.equal(del.status, 200);
  const gone = await should([{ tenant: "t1" }]);
  assert.equal(gone.statuses[0].current_limit, null);
  assert.equal(sql(`SELECT COUNT(*) FROM envoy_descriptors WHERE descriptor = 'tenant'`), "0");
});
