// End-to-end: one decision, four doors (issue 34). The same take goes in
// by each of permitd's doors: Connect (HTTP/1.1, api.c), gRPC (HTTP/2,
// grpcapi.c), Envoy's ShouldRateLimit (envoyrls.c) and forward-auth
// (forward.c, nginx style); each must be counted alike, because the
// decision service (server/decisions/service.c) counts it for all of them:
// in /metrics, in the fleet's counts (FleetService), on the hot-keys card
// (HotKeyService GetHotKeys) and in the access log. Then the same fault
// through each door must carry the same code and message (each door's
// wire keeping its own form: a Connect error body, a gRPC status,
// forward-auth's 500 with the Connect body and Permitd-Error, Envoy's
// per-descriptor answer where its semantics say so).
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_MYSQL_ROOT_URL.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import http2 from "node:http2";
import { setTimeout as sleep } from "node:timers/promises";

import grpc from "@grpc/grpc-js";

import {
  databaseUrl, httpOk, listeners, mariadb, metric, requireEnv, spawnPermitd, stepper, stopAndReport,
  waitReady,
} from "./permitd.mjs";
import { loadProto } from "./proto.mjs";

const HINT = "doors.test.mjs: run it under ctest: e2e_grpc";
const PERMITD_BIN = requireEnv("PERMITD_BIN", HINT);
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", HINT);
const ROOT_URL = requireEnv("PERMITD_TEST_MYSQL_ROOT_URL", HINT);
const DB = `doors_${process.pid}`;
const PREFIX = `e2e-doors-${process.pid}:`;
const APP = "door-app";             // Envoy's domain and forward-auth's Permitd-App too
const PUBLISH_MS = 200;

const rls = loadProto("envoy/service/ratelimit/v3/rls.proto", { enums: String }).envoy.service.ratelimit.v3;

// gRPC status numbers by the Connect code names permitd uses.
const GRPC_CODES = { 3: "invalid_argument", 5: "not_found", 7: "permission_denied", 11: "out_of_range" };

function sql(text, database = DB) {
  return mariadb(ROOT_URL, text, database);
}

function cli(args, input = "") {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PERMITD_")));
  env.PERMITD_MYSQL_URL = databaseUrl(ROOT_URL, DB);
  const r = spawnSync(PERMITD_BIN, args, { input, env, encoding: "utf8" });
  assert.equal(r.status, 0, `permitd ${args.join(" ")}: ${r.stdout}${r.stderr}`);
}

function putPolicy(name, maxPermits, app = APP) {
  sql(`INSERT INTO policies (name, max_permits, rate) VALUES ('${name}', ${maxPermits}, 0.001);
       INSERT INTO policy_apps (policy_id, app) SELECT id, '${app}' FROM policies WHERE name = '${name}';`);
}

// Every policy name a door is asked about: "door-take" for the take, the
// others for the faults. Each has an Envoy row (door=<what>,user) and a
// forward-auth rule (/<what>/, key from X-User).
const WHAT = { take: "door-take", missing: "door-missing", other: "door-other", small: "door-small" };

let server = null;
const run = { failed: false };
const step = stepper(run);
let envoy = null;
let h2 = null;
let cookie = null;

// ---------------------------------------------------------------- the doors

// A protobuf message by hand (so a key may hold bytes that are not
// UTF-8): [[field, string | Buffer | integer], ...].
function pb(list) {
  return Buffer.concat(list.map(([n, v]) => {
    if (typeof v === "number") return Buffer.from([n << 3, v]);        // a small varint
    const b = Buffer.isBuffer(v) ? v : Buffer.from(v);
    return Buffer.concat([Buffer.from([(n << 3) | 2, b.length]), b]);
  }));
}

function acquireMessage({ bucket, key, permits = 1 }) {
  return pb([[1, bucket], [2, APP], [3, key], [4, permits]]);
}

// Each door's take: { ok: allowed or not } or { code, message }.
async function viaConnect(req) {
  const r = await fetch(`http://127.0.0.1:${server.apiPort}/permit.v1.RateLimitService/Acquire`, {
    method: "POST", headers: { "Content-Type": "application/proto" }, body: acquireMessage(req) });
  if (r.status === 200) {
    await r.arrayBuffer();
    return { ok: true };
  }
  const e = await r.json();
  return { code: e.code, message: e.message };
}

function viaGrpc(req) {
  const msg = acquireMessage(req);
  const framed = Buffer.alloc(5 + msg.length);
  framed.writeUInt32BE(msg.length, 1);
  msg.copy(framed, 5);
  return new Promise((resolve) => {
    const r = { status: null, message: "" };
    const s = h2.request({ ":method": "POST", ":path": "/permit.v1.RateLimitService/Acquire",
                           "content-type": "application/grpc", te: "trailers" });
    const take = (h) => {
      if (h["grpc-status"] !== undefined) r.status = Number(h["grpc-status"]);
      if (h["grpc-message"] !== undefined) r.message = decodeURIComponent(h["grpc-message"]);
    };
    s.on("response", take);
    s.on("trailers", take);
    s.on("data", () => {});
    s.on("error", () => {});
    s.on("close", () => resolve(r.status === 0 ? { ok: true }
                                                : { code: GRPC_CODES[r.status] ?? `grpc ${r.status}`, message: r.message }));
    s.end(framed);
  });
}

function viaEnvoy({ bucket, key, permits = 1 }) {
  const what = Object.keys(WHAT).find((k) => WHAT[k] === bucket);
  return new Promise((resolve) => {
    envoy.ShouldRateLimit({ domain: APP, hits_addend: permits, descriptors: [{ entries: [
      { key: "door", value: what }, { key: "user", value: key }] }] }, { deadline: Date.now() + 10_000 },
    (err, res) => {
      if (err) resolve({ code: GRPC_CODES[err.code] ?? `grpc ${err.code}`, message: err.details });
      else resolve({ ok: true, envoy: res.statuses[0].code, limited: res.statuses[0].current_limit !== null });
    });
  });
}

async function viaForward({ bucket, key }) {
  const what = Object.keys(WHAT).find((k) => WHAT[k] === bucket);
  const r = await fetch(`http://127.0.0.1:${server.apiPort}/v1/forward-auth/nginx`, {
    headers: { "X-Original-URI": `/${what}/page`, "X-Original-Method": "GET", "Permitd-App": APP,
               "X-User": key } });
  if (r.status === 200 || r.status === 403) {
    await r.arrayBuffer();
    return { ok: true, status: r.status };
  }
  const e = await r.json();
  assert.equal(r.headers.get("permitd-error"), e.code, "forward-auth's Permitd-Error is the body's code");
  return { code: e.code, message: e.message, status: r.status };
}

const DOORS = [
  { name: "connect", take: viaConnect, logPath: "/permit.v1.RateLimitService/Acquire" },
  { name: "grpc", take: viaGrpc, logPath: "/permit.v1.RateLimitService/Acquire" },
  { name: "envoy", take: viaEnvoy,
    logPath: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" },
  { name: "forward", take: viaForward, logPath: "/v1/forward-auth/nginx" },
];

// ---------------------------------------------------------------- the admin side

async function admin(service, method, body) {
  const base = `http://127.0.0.1:${server.adminPort}`;
  const r = await fetch(`${base}/permit.v1.${service}/${method}`, { method: "POST",
    headers: { Origin: base, "Content-Type": "application/json", Cookie: cookie }, body: JSON.stringify(body) });
  assert.equal(r.status, 200, `${service}/${method}: ${r.status}`);
  return r.json();
}

async function waitFor(what, fn, ms = 20_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last === true) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (last: ${JSON.stringify(last)})`);
    await sleep(100);
  }
}

// ---------------------------------------------------------------- lifecycle

before(async () => {
  sql(`CREATE DATABASE \`${DB}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`, "");
  cli(["migrate", "up"]);
  cli(["admin", "add-user", "vi", "--role", "viewer"], "viewer-password-1\n");
  putPolicy(WHAT.take, 100);
  putPolicy(WHAT.small, 3);
  putPolicy(WHAT.other, 100, "someone-else");
  for (const [what, policy] of Object.entries(WHAT)) {
    sql(`INSERT INTO envoy_descriptors (domain, descriptor, policy, key_entry)
         VALUES ('${APP}', 'door=${what},user', '${policy}', 'user');
         INSERT INTO gateway_rules (path_prefix, policy, key_source, key_header, permits)
         VALUES ('/${what}/', '${policy}', 'header', 'X-User', ${what === "small" ? 5 : 1});`);
  }
  const l = await listeners();
  server = spawnPermitd([...l.args, "--threads", "2", "--redis-url", REDIS_URL, "--redis-prefix", PREFIX,
    "--mysql-url", databaseUrl(ROOT_URL, DB), "--app-auth", "off", "--access-log", "1",
    "--fleet-publish-ms", String(PUBLISH_MS), "--hotkeys-publish-ms", String(PUBLISH_MS)], l.ports);
  await waitReady(server, "admin listener: /readyz 200", httpOk(`http://127.0.0.1:${l.ports.adminPort}/readyz`), 15_000);
  envoy = new rls.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
  h2 = http2.connect(`http://127.0.0.1:${server.grpcPort}`);
  h2.on("error", () => {});
  const base = `http://127.0.0.1:${server.adminPort}`;
  const login = await fetch(`${base}/permit.v1.AdminAuthService/Login`, { method: "POST",
    headers: { Origin: base, "Content-Type": "application/json" },
    body: JSON.stringify({ username: "vi", password: "viewer-password-1" }) });
  assert.equal(login.status, 200, await login.text());
  cookie = login.headers.get("set-cookie").split(";")[0];
});

after(async () => {
  envoy?.close();
  h2?.close();
  await stopAndReport(server, run, 15_000);
  try {
    sql(`DROP DATABASE IF EXISTS \`${DB}\``, "");
  } catch {
    // best effort
  }
});

// ---------------------------------------------------------------- the take, counted alike

step("the same take through each door shows in /metrics, the fleet's counts, the hot keys and the access log", async () => {
  const allowed = `permitd_acquires_total{policy="${WHAT.take}",result="allowed"}`;
  for (const [i, door] of DOORS.entries()) {
    const key = `k-${door.name}`;
    const before = (await metric(server, allowed)) ?? 0;
    const res = await door.take({ bucket: WHAT.take, key });
    assert.equal(res.ok, true, `${door.name}: ${JSON.stringify(res)}`);
    // /metrics: this door's take, once
    assert.equal(await metric(server, allowed), before + 1, `${door.name}: /metrics counts its take once`);
    // the fleet's counts: every take so far (published each PUBLISH_MS)
    await waitFor(`${door.name}: the fleet counts ${i + 1}`, async () => {
      const t = (await admin("FleetService", "GetFleetTraffic", { policies: [WHAT.take] })).traffic ?? [];
      const n = Number(t[0]?.allowed ?? 0);
      return n === i + 1 || n;
    });
    // the hot keys: this door's key, taken once
    await waitFor(`${door.name}: its key on the hot-keys card`, async () => {
      const h = await admin("HotKeyService", "GetHotKeys", { name: WHAT.take, limit: 100 });
      const k = (h.allowed ?? []).find((x) => x.key === key);
      return (k !== undefined && Number(k.count) === 1) || (h.allowed ?? []).map((x) => x.key);
    });
    // the access log: the door's request, naming the app (each door's
    // line counted: the Connect and gRPC doors share a path)
    await waitFor(`${door.name}: its access log line`, () => {
      const lines = server.output.join("").split("\n").filter((l) =>
        l.includes(`path="${door.logPath}"`) && l.includes(`app=${APP}`) &&
        l.includes(`listener=${door.name === "connect" || door.name === "forward" ? "api" : "grpc"}`));
      return lines.length >= 1 || "no line";
    });
  }
});

// ---------------------------------------------------------------- faults, answered alike

// Each fault through the doors that can carry it: the same code and
// message, except where a door's wire has its own meaning for it
// (envoy: a policy gone limits nothing; hits over max_permits can never
// pass: OVER_LIMIT, as envoyrls.c says).
const FAULTS = [
  { name: "unknown policy", req: { bucket: WHAT.missing, key: "u" }, code: "not_found",
    envoy: (r) => assert.deepEqual([r.ok, r.envoy, r.limited], [true, "OK", false]) },
  { name: "app not allowed", req: { bucket: WHAT.other, key: "u" }, code: "permission_denied" },
  { name: "permits over max_permits", req: { bucket: WHAT.small, key: "u", permits: 5 }, code: "out_of_range",
    envoy: (r) => assert.deepEqual([r.ok, r.envoy], [true, "OVER_LIMIT"]) },
  { name: "key bytes that are not UTF-8", req: { bucket: WHAT.take, key: Buffer.from([0x6b, 0xff]) },
    code: "invalid_argument", only: ["connect", "grpc"] },
];

for (const fault of FAULTS) {
  step(`${fault.name}: every door answers the same code and message`, async () => {
    const seen = {};
    for (const door of DOORS) {
      if (fault.only && !fault.only.includes(door.name)) continue;
      const r = await door.take(fault.req);
      if (door.name === "envoy" && fault.envoy) {
        fault.envoy(r);
        continue;
      }
      assert.equal(r.code, fault.code, `${door.name}: ${JSON.stringify(r)}`);
      seen[door.name] = r.message;
    }
    const message = seen.connect;
    assert.ok(message, "Connect names the fault");
    for (const [door, m] of Object.entries(seen)) {
      // Envoy's status says which descriptor's policy failed, before the message.
      if (door === "envoy") assert.ok(m.endsWith(`: ${message}`), `${door}: ${m} / ${message}`);
      else assert.equal(m, message, `${door}'s message`);
    }
  });
}
