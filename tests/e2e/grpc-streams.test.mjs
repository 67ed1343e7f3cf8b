// End-to-end: gRPC streams that never end (issue 42, server/transport/grpc.c),
// through node's http2 client, which sends what grpc-js never does: HEADERS
// without END_STREAM, then silence, or a message cut short.
//
// - A call's request must be whole --grpc-request-timeout after its HEADERS,
//   whatever its grpc-timeout says: past it the call is answered
//   DEADLINE_EXCEEDED and its stream reset; the connection goes on serving.
// - A connection holding only stalled calls is idle: --connection-timeout
//   closes it (40 of them held --max-connections 40 for ever before).
// - When --max-connections are open, stalled connections are shed so a new
//   caller is served.
// - Request bytes buffered per connection are capped by flow control: many
//   streams each sending most of a large message barely move the server's
//   resident memory (each stream could hold --max-body-bytes before).
// - A gRPC Acquire whose key is not UTF-8 is INVALID_ARGUMENT naming the
//   field, as on the Connect path, and no bucket is written.
//
// No step asserts how fast anything happens: each polls for its condition
// with a generous deadline.
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_REDIS_PORT.
import { after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import { setTimeout as sleep } from "node:timers/promises";

import { listeners, metric, putRedisPolicy, redisCli, requireEnv, spawnPermitd, stepper, stopPermitd,
  serverOutput, waitReady } from "./permitd.mjs";

const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", "grpc-streams.test.mjs: run it under ctest: e2e_grpc");
const PREFIX = `e2e-grpcstr-${process.pid}:`;
const APP = "str-app";
const POLICY = "str-alive";
const OPEN = 'permitd_grpc_connections{listener="grpc"}';
const SHED_STALLED = 'permitd_grpc_connections_shed_total{listener="grpc",reason="stalled"}';
const POLL_MS = 30_000;

const servers = [];
const run = { failed: false };
const step = stepper(run);

// A permitd with the gRPC listener and extra args, ready once /metrics answers
// (probing the gRPC port would take its slots).
async function start(extra) {
  const l = await listeners();
  const args = [...l.args, "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--app-auth", "off", ...extra];
  const srv = spawnPermitd(args, l.ports);
  servers.push(srv);
  await waitReady(srv, "/metrics answering, \"grpc listener started\" logged", async () =>
    (await fetch(`http://127.0.0.1:${srv.adminPort}/metrics`)).ok && srv.output.join("").includes("grpc listener started"), 15_000);
  return srv;
}

after(async () => {
  for (const srv of servers) {
    const res = await stopPermitd(srv, 15_000);
    if (res === null || res.code !== 0) run.failed = true;
    if (run.failed) process.stderr.write(`\n--- permitd ${srv.args.join(" ")} ---\n${serverOutput(srv)}\n--- end ---\n`);
  }
});

function frame(msg) {
  const b = Buffer.alloc(5 + msg.length);
  b.writeUInt32BE(msg.length, 1);
  msg.copy(b, 5);
  return b;
}

// A message of string fields by hand: [[field number, string or Buffer], ...].
function fields(list) {
  return Buffer.concat(list.map(([n, v]) => {
    const b = Buffer.isBuffer(v) ? v : Buffer.from(v);
    return Buffer.concat([Buffer.from([(n << 3) | 2, b.length]), b]);
  }));
}

// An HTTP/2 connection to srv's gRPC port, connected (rejects when the
// server closes it first).
async function session(srv) {
  const s = http2.connect(`http://127.0.0.1:${srv.grpcPort}`);
  s.on("error", () => {});
  s.closedBy = new Promise((resolve) => s.once("close", resolve));
  await new Promise((resolve, reject) => {
    s.once("connect", resolve);
    s.once("close", () => reject(new Error("the connection closed before it was up")));
  });
  return s;
}

// One unary call on s: { status, message, rst } when the stream closed, or
// timedOut after ms.
function call(s, method, msg, { headers = {}, ms = 10_000 } = {}) {
  return new Promise((resolve) => {
    const r = { status: null, message: "", rst: null };
    const req = s.request({ ":method": "POST", ":path": `/permit.v1.RateLimitService/${method}`,
                            "content-type": "application/grpc", te: "trailers", ...headers });
    const timer = setTimeout(() => { r.timedOut = true; req.close(http2.constants.NGHTTP2_CANCEL); }, ms);
    const take = (h) => {
      if (h["grpc-status"] !== undefined) r.status = Number(h["grpc-status"]);
      if (h["grpc-message"] !== undefined) r.message = decodeURIComponent(h["grpc-message"]);
    };
    req.on("response", take);
    req.on("trailers", take);
    req.on("data", () => {});
    req.on("error", () => {});
    req.on("close", () => { clearTimeout(timer); r.rst = req.rstCode; resolve(r); });
    if (msg === null) req.write(Buffer.from([0, 0, 0, 0, 20]));   // a prefix announcing 20 bytes, then nothing
    else req.end(frame(msg));
  });
}

const peek = (s) => call(s, "Peek", fields([[1, POLICY], [2, APP]]));

// A stream whose HEADERS come, then a message prefix, then silence: its
// request never ends. Returns the stream.
function stall(s, headers = {}) {
  const req = s.request({ ":method": "POST", ":path": "/permit.v1.RateLimitService/Acquire",
                          "content-type": "application/grpc", te: "trailers", ...headers });
  req.on("error", () => {});
  req.on("data", () => {});
  req.write(Buffer.from([0, 0, 0, 0, 20]));
  return req;
}

// n connections, each holding one stalled call, once the server counts them
// (unless count is false: a slow machine may take longer to open them than
// the server keeps the first).
async function stalledConnections(srv, n, count = true) {
  const held = [];
  for (let i = 0; i < n; i++) {
    const s = await session(srv);
    try {
      stall(s);
    } catch {
      // closed by the server already
    }
    held.push(s);
  }
  if (!count) return held;
  const deadline = Date.now() + POLL_MS;
  while ((await metric(srv, OPEN)) !== n && Date.now() < deadline) await sleep(100);
  assert.equal(await metric(srv, OPEN), n, `${n} connections open`);
  return held;
}

// The first of what fn answers that is not undefined, polling until ms.
async function pollFor(fn, ms = POLL_MS, every = 200) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined || Date.now() >= deadline) return v;
    await sleep(every);
  }
}

function rssKiB(srv, field = "VmRSS") {
  const m = readFileSync(`/proc/${srv.child.pid}/status`, "utf8").match(new RegExp(`${field}:\\s+(\\d+) kB`));
  return Number(m[1]);
}

putRedisPolicy(PREFIX, POLICY, { apps: APP, maxPermits: 1000, rate: "1" });

step("a request not whole --grpc-request-timeout after its HEADERS is answered DEADLINE_EXCEEDED and its stream reset, whatever its grpc-timeout; the connection goes on", async () => {
  const srv = await start(["--grpc-request-timeout", "1", "--connection-timeout", "300"]);
  const s = await session(srv);
  try {
    assert.equal((await peek(s)).status, 0, "a whole call is answered");
    // grpc-timeout says an hour; the request's bound still holds
    const r = await call(s, "Acquire", null, { headers: { "grpc-timeout": "1H" }, ms: POLL_MS });
    assert.equal(r.timedOut, undefined, "the server ended the stream; the client never did");
    assert.equal(r.status, 4, `DEADLINE_EXCEEDED: ${r.message}`);
    assert.match(r.message, /--grpc-request-timeout/);
    assert.equal(r.rst, http2.constants.NGHTTP2_NO_ERROR, "then RST_STREAM NO_ERROR");
    assert.equal((await peek(s)).status, 0, "the connection goes on serving calls");
  } finally {
    s.destroy();
  }
});

step("a gRPC Acquire whose key is not UTF-8 is INVALID_ARGUMENT naming the field; no bucket is written", async () => {
  const srv = servers[0];
  const s = await session(srv);
  const keys = () => redisCli("--scan", "--pattern", `${PREFIX}*`).split("\n").filter(Boolean).sort();
  try {
    const before = keys();
    const bad = await call(s, "Acquire", fields([[1, POLICY], [2, APP], [3, Buffer.from([0x6b, 0xff])]]));
    assert.equal(bad.status, 3, `INVALID_ARGUMENT: ${JSON.stringify(bad)}`);
    assert.match(bad.message, /^key: .* is not valid UTF-8/);
    const badApp = await call(s, "Peek", fields([[1, POLICY], [2, Buffer.from([0x61, 0xc3])]]));
    assert.equal(badApp.status, 3, `INVALID_ARGUMENT: ${JSON.stringify(badApp)}`);
    assert.match(badApp.message, /^app: /);
    const batch = await call(s, "AcquireBatch", fields([[1, fields([[1, POLICY], [2, APP], [3, Buffer.from([0xed, 0xa0, 0x80])]])]]));
    assert.equal(batch.status, 3, `INVALID_ARGUMENT: ${JSON.stringify(batch)}`);
    assert.match(batch.message, /^requests\[0\]\.key: /);
    assert.deepEqual(keys(), before, "no bucket written for a key that is not UTF-8");
    const good = await call(s, "Acquire", fields([[1, POLICY], [2, APP], [3, "k"]]));
    assert.equal(good.status, 0, "a UTF-8 key is served");
    assert.ok(keys().length > before.length, "its bucket is written");
  } finally {
    s.destroy();
  }
});

step("40 connections holding only stalled calls against --max-connections 40 are closed by --connection-timeout; then a new call is served", async () => {
  const srv = await start(["--max-connections", "40", "--connection-timeout", "2", "--grpc-request-timeout", "300",
                           "--threads", "2"]);
  const held = await stalledConnections(srv, 40, false);
  let closed = 0;
  for (const s of held) s.closedBy.then(() => closed++);
  await pollFor(async () => (closed === held.length ? true : undefined));
  assert.equal(closed, held.length, `the server closed ${closed} of ${held.length} stalled connections`);
  assert.equal(await pollFor(async () => ((await metric(srv, OPEN)) === 0 ? true : undefined)), true, "none open");
  const s = await session(srv);
  assert.equal((await peek(s)).status, 0, "a new connection is served");
  s.destroy();
});

step("request bytes buffered per connection are capped: 8 connections x 128 streams each sending 64,000 of a 65,000-byte message barely move the server's memory", async () => {
  const srv = await start(["--max-connections", "40", "--connection-timeout", "300", "--grpc-request-timeout", "300",
                           "--threads", "2", "--max-body-bytes", "65536"]);
  const probe = await session(srv);
  for (let i = 0; i < 20; i++) assert.equal((await peek(probe)).status, 0);
  probe.destroy();
  const before = rssKiB(srv);
  const conns = [];
  const body = Buffer.alloc(64_000, 0x61);
  const prefix = Buffer.from([0, 0, 0, 0xfd, 0xe8]);   // 65,000 bytes announced
  for (let i = 0; i < 8; i++) {
    const s = await session(srv);
    conns.push(s);
    for (let j = 0; j < 128; j++) {
      const req = s.request({ ":method": "POST", ":path": "/permit.v1.RateLimitService/Acquire",
                              "content-type": "application/grpc", te: "trailers" });
      req.on("error", () => {});
      req.on("data", () => {});
      req.write(prefix);
      req.write(body);
    }
  }
  // The server takes what flow control lets it: wait until its memory stops
  // growing for 3 s (or 30 s), then compare. A loaded machine only makes the
  // growth seen smaller, never larger.
  let last = rssKiB(srv), still = 0;
  const deadline = Date.now() + POLL_MS;
  while (still < 6 && Date.now() < deadline) {
    await sleep(500);
    const now = rssKiB(srv);
    still = now - last < 512 ? still + 1 : 0;
    last = Math.max(last, now);
  }
  const grew = rssKiB(srv, "VmHWM") - before;
  console.log(`# server RSS before ${before} KiB, peak after ${rssKiB(srv, "VmHWM")} KiB: +${grew} KiB ` +
              `(unbounded: 8 x 128 x 64,000 bytes = ${Math.round(8 * 128 * 64000 / 1024)} KiB)`);
  assert.ok(grew < 40 * 1024, `the server's resident memory grew ${grew} KiB`);
  for (const s of conns) s.destroy();
  await pollFor(async () => ((await metric(srv, OPEN)) === 0 ? true : undefined));
});

step("--max-connections 40 held by stalled connections: stalled ones are shed and a new caller is served", async () => {
  const srv = servers[servers.length - 1];   // --connection-timeout and --grpc-request-timeout 300
  const shedBefore = (await metric(srv, SHED_STALLED)) ?? 0;
  const held = await stalledConnections(srv, 40);
  // A caller's connection may land on a worker with nothing to shed: it is
  // closed, and the next one finds the room another worker made.
  const answered = await pollFor(async () => {
    try {
      const s = await session(srv);
      const r = await peek(s);
      s.destroy();
      return r.status === 0 ? true : undefined;
    } catch {
      return undefined;
    }
  });
  assert.equal(answered, true, "a new caller was served while stalled connections held every slot");
  assert.ok((await metric(srv, SHED_STALLED)) > shedBefore, "counted as shed (stalled)");
  assert.ok((await metric(srv, OPEN)) <= 40);
  for (const s of held) s.destroy();
});
