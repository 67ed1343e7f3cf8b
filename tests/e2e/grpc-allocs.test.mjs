// End-to-end: a warmed-up gRPC call allocates (almost) nothing in permitd's
// own code. grpc.c keeps finished call records per worker, with their
// storage (an arena grpc_call_alloc() bumps from), their request body and
// reply buffers; grpcapi.c and envoyrls.c unpack into that storage and pack
// the answer into the reply buffer. The same LD_PRELOAD counter as the
// Connect path's test (tests/integration/allocs.c, test_hotpath.py): it
// counts malloc/calloc/realloc made from the permitd binary, libhiredis and
// libjansson (not nghttp2's or libc's), and writes the count on SIGUSR2.
// Before the records were kept, 200 Acquires cost 1,000 counted
// allocations (the record, its body, the pending record, the pack buffer,
// the reply; the unpacked message was libprotobuf-c's, not counted) and 200
// ShouldRateLimit calls 6,000 (those, the answer's four arrays, and the
// limiter's batch plan: one descriptor now goes as one queued Acquire).
//
// Acquire (permit.v1) and Envoy's ShouldRateLimit, each N calls one after
// the other over one HTTP/2 connection (one @grpc/grpc-js channel), after a
// warm-up; MySQL holds the policy and the descriptor mapping (as
// envoy.test.mjs), its sync put off past the test, as the fleet's and the
// hot keys' publishers are (their threads' allocations count too).
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN, PERMITD_ALLOCS
// (the shim), PERMITD_TEST_REDIS_URL, PERMITD_TEST_MYSQL_ROOT_URL.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import grpc from "@grpc/grpc-js";

import {
  databaseUrl, httpOk, listeners, mariadb, requireEnv, spawnPermitd, stepper, stopAndReport, waitReady,
} from "./permitd.mjs";
import { loadProto } from "./proto.mjs";

const HINT = "grpc-allocs.test.mjs: run it under ctest: e2e_grpc";
const PERMITD_BIN = requireEnv("PERMITD_BIN", HINT);
const ALLOCS = requireEnv("PERMITD_ALLOCS", HINT);
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", HINT);
const ROOT_URL = requireEnv("PERMITD_TEST_MYSQL_ROOT_URL", HINT);
const DB = `grpcallocs_${process.pid}`;
const PREFIX = `e2e-grpcallocs-${process.pid}:`;
const POLICY = "grpc-hot";
const APP = "grpc-app";
const DOMAIN = "edge";
const N = 200;
const ALLOWED = 5;      // a handful: as test_hotpath.py allows the Connect path

const pkg = loadProto("permit/v1/ratelimit.proto");
const rls = loadProto("envoy/service/ratelimit/v3/rls.proto", { enums: String }).envoy.service.ratelimit.v3;

// ---------------------------------------------------------------- helpers

function sql(text, database = DB) {
  return mariadb(ROOT_URL, text, database);
}

function dbUrl() {
  return databaseUrl(ROOT_URL, DB);
}

function migrate() {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PERMITD_")));
  env.PERMITD_MYSQL_URL = dbUrl();
  const r = spawnSync(PERMITD_BIN, ["migrate", "up"], { env, encoding: "utf8" });
  assert.equal(r.status, 0, `permitd migrate up: ${r.stdout}${r.stderr}`);
}

let server = null;
const run = { failed: false };
const step = stepper(run);
const out = path.join(os.tmpdir(), `permitd-grpc-allocs-${process.pid}`);

async function startPermitd() {
  const l = await listeners();
  const args = [...l.args, "--threads", "1",
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--mysql-url", dbUrl(),
                "--sync-interval-ms", "600000", "--fleet-publish-ms", "0",
                "--hotkeys-publish-ms", "600000", "--reserve-sweep-ms", "0", "--app-auth", "off"];
  server = spawnPermitd(args, l.ports, {
    LD_PRELOAD: ALLOCS, ALLOCS_OUT: out, ASAN_OPTIONS: "detect_leaks=1:verify_asan_link_order=0",
  });
  await waitReady(server, "admin listener: /readyz 200", httpOk(`http://127.0.0.1:${l.ports.adminPort}/readyz`), 15_000);
}

// The shim's count of allocations so far (it writes "ALLOCATIONS EPOLL_CTLS"
// on SIGUSR2).
async function allocations() {
  fs.writeFileSync(out, "");
  server.child.kill("SIGUSR2");
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const text = fs.readFileSync(out, "utf8");
    if (text.endsWith("\n")) return Number(text.split(" ")[0]);
    await sleep(10);
  }
  throw new Error("the allocation counter did not answer (SIGUSR2)");
}

function unary(c, method, req) {
  return new Promise((resolve, reject) => {
    c[method](req, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

async function acquires(c, n) {
  for (let i = 0; i < n; i++) {
    const res = await unary(c, "Acquire", { bucket: POLICY, app: APP, key: `user-${i % 300}`, permits: 1 });
    assert.equal(res.allowed, true, JSON.stringify(res));
  }
}

async function shoulds(c, n) {
  for (let i = 0; i < n; i++) {
    const res = await unary(c, "ShouldRateLimit", { domain: DOMAIN, hits_addend: 0, descriptors: [
      { entries: [{ key: "remote_address", value: `10.0.0.${i % 250}` }] }] });
    assert.equal(res.overall_code, "OK", JSON.stringify(res));
    assert.equal(res.statuses[0].current_limit.name, POLICY, JSON.stringify(res));
  }
}

// ---------------------------------------------------------------- lifecycle

before(async () => {
  sql(`CREATE DATABASE \`${DB}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`, "");
  migrate();
  sql(`INSERT INTO policies (name, max_permits, rate) VALUES ('${POLICY}', 1000000000, 1000);
       INSERT INTO policy_apps (policy_id, app) SELECT id, '${APP}' FROM policies WHERE name = '${POLICY}';
       INSERT INTO policy_apps (policy_id, app) SELECT id, '${DOMAIN}' FROM policies WHERE name = '${POLICY}';
       INSERT INTO envoy_descriptors (domain, descriptor, policy, key_entry)
       VALUES ('${DOMAIN}', 'remote_address', '${POLICY}', 'remote_address');`);
  await startPermitd();
});

after(async () => {
  await stopAndReport(server, run, 15_000);
  fs.rmSync(out, { force: true });
  try {
    sql(`DROP DATABASE IF EXISTS \`${DB}\``, "");
  } catch {
    // the stack goes away with the run anyway
  }
});

// ---------------------------------------------------------------- steps

step("a warmed-up gRPC Acquire allocates nothing in permitd's code", async () => {
  const c = new pkg.permit.v1.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
  try {
    await acquires(c, 100);     // the worker's Redis connection, spare call records, stats entry
    const before = await allocations();
    await acquires(c, N);
    const made = (await allocations()) - before;
    process.stderr.write(`# gRPC Acquire: ${made} allocations in ${N} calls\n`);
    assert.ok(made <= ALLOWED, `${made} allocations in ${N} gRPC Acquires (at most ${ALLOWED})`);
  } finally {
    c.close();
  }
});

step("a warmed-up ShouldRateLimit allocates nothing in permitd's code", async () => {
  const c = new rls.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
  try {
    await shoulds(c, 100);
    const before = await allocations();
    await shoulds(c, N);
    const made = (await allocations()) - before;
    process.stderr.write(`# ShouldRateLimit: ${made} allocations in ${N} calls\n`);
    assert.ok(made <= ALLOWED, `${made} allocations in ${N} ShouldRateLimit calls (at most ${ALLOWED})`);
  } finally {
    c.close();
  }
});

step("the counter sees permitd's allocations (a call's storage overflowing to malloc)", async () => {
  // An AcquireBatch of 200 items needs more than a call's 4 KiB of storage:
  // its blocks come from malloc (chained to the call, freed with it), so
  // the counter, loaded and counting, shows them.
  const c = new pkg.permit.v1.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
  try {
    const requests = Array.from({ length: 200 }, (_, i) => ({ bucket: POLICY, app: APP, key: `b-${i}`, permits: 1 }));
    await unary(c, "AcquireBatch", { requests });
    const before = await allocations();
    const res = await unary(c, "AcquireBatch", { requests });
    assert.equal(res.results.length, 200);
    const made = (await allocations()) - before;
    assert.ok(made >= 1, `${made} allocations in an AcquireBatch of 200 items`);
  } finally {
    c.close();
  }
});
