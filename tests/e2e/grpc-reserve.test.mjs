// End-to-end: Reserve over gRPC runs off the worker's loop (issue 38).
// permitd with one worker thread (--threads 1), one reservations thread and
// room for one call waiting (--reserve-workers 1 --reserve-queue 1), on a
// Redis of this file's own (tests/stack/redis.sh), stopped with SIGSTOP so
// that a Reserve stays stuck for as long as it is stopped. Checked through
// @grpc/grpc-js: an Acquire on the same worker is answered meanwhile
// (DEADLINE_EXCEEDED, by the worker's loop) while the Reserve is still
// unanswered; a Reserve past the pool's room is RESOURCE_EXHAUSTED at once;
// once Redis is back the waiting Reserves are granted.
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import grpc from "@grpc/grpc-js";

import { listeners, spawnPermitd, stepper, stopAndReport, tcpOpen, waitReady } from "./permitd.mjs";
import { loadProto } from "./proto.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REDIS_SH = path.join(HERE, "..", "stack", "redis.sh");
const PREFIX = "e2e-grsv:";
const APP = "grpc-app";
const POLICY = "grsv";

const pkg = loadProto("permit/v1/ratelimit.proto");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "permitd-grsv-"));
let redisPort = 0;
let redisPid = 0;
let stopped = false;
let server = null;
const run = { failed: false };
const step = stepper(run);

function redis(...args) {
  return execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(redisPort), ...args], { encoding: "utf8" }).trim();
}

function pause() { process.kill(redisPid, "SIGSTOP"); stopped = true; }
function resume() { if (stopped) process.kill(redisPid, "SIGCONT"); stopped = false; }

function client() {
  return new pkg.permit.v1.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
}

// A unary call: { err, res } once answered; `answered` says whether it has been yet.
function call(c, method, req, ms) {
  const out = { answered: false, err: null, res: null };
  out.done = new Promise((resolve) => {
    c[method](req, new grpc.Metadata(), { deadline: Date.now() + ms }, (err, res) => {
      Object.assign(out, { answered: true, err, res });
      resolve(out);
    });
  });
  return out;
}

async function until(what, cond, ms) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms / 1000} s: ${what}`);
    await sleep(50);
  }
}

before(async () => {
  const out = execFileSync(REDIS_SH, ["start", dir], { encoding: "utf8" });
  redisPort = Number(/PERMITD_TEST_REDIS_PORT=(\d+)/.exec(out)[1]);
  redisPid = Number(fs.readFileSync(path.join(dir, "redis.pid"), "utf8"));
  redis("HSET", `${PREFIX}{${POLICY}}:policy`, "name", POLICY, "apps", APP, "max_permits", "100",
    "rate", "0.001", "version", "1", "enabled", "1");
  const l = await listeners();
  server = spawnPermitd([...l.args, "--threads", "1", "--reserve-workers", "1", "--reserve-queue", "1",
    "--redis-url", `redis://127.0.0.1:${redisPort}`, "--redis-prefix", PREFIX,
    "--redis-timeout-ms", "60000", "--app-auth", "off"], l.ports);
  await waitReady(server, `its gRPC port ${l.ports.grpcPort} open`, tcpOpen(l.ports.grpcPort), 10_000);
});

after(async () => {
  resume();
  await stopAndReport(server, run, 15_000);
  execFileSync(REDIS_SH, ["stop", dir]);
});

step("a stuck Reserve leaves the worker's loop free; a flood past the pool is RESOURCE_EXHAUSTED", async () => {
  const c = client();
  try {
    const { res: warm } = await call(c, "Peek", { bucket: POLICY, app: APP }, 10_000).done;
    assert.equal(Number(warm.limit), 100);
    pause();
    const stuck = call(c, "Reserve", { app: APP, items: [{ bucket: POLICY, key: "a", estimate: 3 }] }, 120_000);
    await sleep(1000); // the Reserve reaches the worker first (ordering, not a bound)
    const acq = await call(c, "Acquire", { bucket: POLICY, app: APP, key: "b", permits: 1 }, 2000).done;
    assert.equal(acq.err?.code, grpc.status.DEADLINE_EXCEEDED, String(acq.err));
    assert.equal(stuck.answered, false, "the Reserve was answered with Redis stopped");
    // One thread (the stuck Reserve) and one waiting: the third is refused at once.
    const waiting = call(c, "Reserve", { app: APP, items: [{ bucket: POLICY, key: "c", estimate: 2 }] }, 120_000);
    const flood = call(c, "Reserve", { app: APP, items: [{ bucket: POLICY, key: "d", estimate: 1 }] }, 120_000);
    await until("one of the two Reserves answered", () => waiting.answered || flood.answered, 60_000);
    const refused = waiting.answered ? waiting : flood;
    assert.equal(refused.err?.code, grpc.status.RESOURCE_EXHAUSTED, String(refused.err));
    assert.match(refused.err.details, /--reserve-queue/);
    assert.equal(stuck.answered, false);
    resume();
    const granted = [await stuck.done, await (waiting.answered ? flood : waiting).done];
    for (const g of granted) {
      assert.equal(g.err, null, String(g.err));
      assert.equal(g.res.allowed, true);
    }
  } finally {
    resume();
    c.close();
  }
}, 180_000);
