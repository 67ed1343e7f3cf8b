// End-to-end: the gRPC listener's connection limits (server/transport/grpc.c,
// core/iplimit.c). With --max-connections-per-ip 3, one client address holds
// at most 3 connections: a 4th is closed at accept and counted in /metrics,
// a closed one gives its slot back, and another address is served while the
// first is at its limit (127.0.0.2 is loopback on Linux: the client socket is
// bound to it). A message over --max-body-bytes is answered at once and its
// stream reset (RST_STREAM NO_ERROR) while the client is still sending.
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_REDIS_PORT.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

import { listeners, metric as metricOf, putRedisPolicy, requireEnv, spawnPermitd, stepper, stopAndReport,
  waitReady } from "./permitd.mjs";

const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", "grpc-limits.test.mjs: run it under ctest: e2e_grpc");
const PREFIX = `e2e-grpclim-${process.pid}:`;
const APP = "lim-app";
const PER_IP = 3;
const MAX_BODY = 4096;

let server = null; // spawnPermitd()'s, with grpcPort and adminPort
const run = { failed: false };
const step = stepper(run);

// The value of one series of /metrics (exact name and labels), or null.
const metric = (series) => metricOf(server, series);

const OPEN = 'permitd_grpc_connections{listener="grpc"}';
const PER_IP_REFUSED = 'permitd_grpc_connections_refused_total{listener="grpc",reason="per_ip"}';
const FULL_REFUSED = 'permitd_grpc_connections_refused_total{listener="grpc",reason="full"}';

// Polls until series has value (the server sees a client's close a moment later).
async function metricBecomes(series, value, ms = 5000) {
  const deadline = Date.now() + ms;
  let v = null;
  while (Date.now() < deadline) {
    if ((v = await metric(series)) === value) return;
    await sleep(50);
  }
  assert.equal(v, value, `${series} within ${ms} ms`);
}

function frame(msg) {
  const b = Buffer.alloc(5 + msg.length);
  b.writeUInt32BE(msg.length, 1);
  msg.copy(b, 5);
  return b;
}

// A PeekRequest encoded by hand: bucket = 1, app = 2 (strings).
function peekBytes(bucket) {
  const field = (n, s) => Buffer.concat([Buffer.from([(n << 3) | 2, Buffer.byteLength(s)]), Buffer.from(s)]);
  return Buffer.concat([field(1, bucket), field(2, APP)]);
}

// An HTTP/2 connection to the gRPC port from address `from`, connected.
async function session(from) {
  const s = http2.connect(`http://127.0.0.1:${server.grpcPort}`, {
    createConnection: () => net.connect({ host: "127.0.0.1", port: server.grpcPort, localAddress: from }),
  });
  s.on("error", () => {});
  await new Promise((resolve, reject) => {
    s.once("connect", resolve);
    s.once("close", () => reject(new Error(`the connection from ${from} closed before it was up`)));
  });
  return s;
}

// One Peek on session s: its grpc-status.
function peek(s) {
  return new Promise((resolve, reject) => {
    let status = null;
    const req = s.request({ ":method": "POST", ":path": "/permit.v1.RateLimitService/Peek",
                            "content-type": "application/grpc", te: "trailers" });
    req.setTimeout(5000, () => req.close(http2.constants.NGHTTP2_CANCEL));
    req.on("response", (h) => { if (h["grpc-status"] !== undefined) status = Number(h["grpc-status"]); });
    req.on("trailers", (t) => { status = Number(t["grpc-status"]); });
    req.on("data", () => {});
    req.on("close", () => (status === null ? reject(new Error(`no grpc-status (rst ${req.rstCode})`)) : resolve(status)));
    req.on("error", () => {});
    req.end(frame(peekBytes("lim-alive")));
  });
}

function closeSession(s) {
  return new Promise((resolve) => { s.once("close", resolve); s.close(); });
}

// A raw TCP connection from `from` that sends the HTTP/2 preface: how long
// the server took to close it, or null when it was still open after 3 s.
function refusedWithin(from) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const sock = net.connect({ host: "127.0.0.1", port: server.grpcPort, localAddress: from }, () => {
      sock.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]));
    });
    const timer = setTimeout(() => { sock.destroy(); resolve(null); }, 3000);
    sock.on("data", () => {});
    sock.on("error", () => {});
    sock.on("close", () => { clearTimeout(timer); resolve(Date.now() - t0); });
  });
}

before(async () => {
  putRedisPolicy(PREFIX, "lim-alive", { apps: APP, maxPermits: 5, rate: "0.001" });
  const l = await listeners();
  const args = [...l.args, "--threads", "2",
                "--max-connections-per-ip", String(PER_IP), "--max-body-bytes", String(MAX_BODY),
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--app-auth", "off"];
  server = spawnPermitd(args, l.ports);
  // Ready once /metrics answers: probing the gRPC port would take its slots.
  await waitReady(server, "/metrics answering, \"grpc listener started\" logged", async () =>
    (await fetch(`http://127.0.0.1:${server.adminPort}/metrics`)).ok && server.output.join("").includes("grpc listener started"), 10_000);
});

after(() => stopAndReport(server, run, 15_000));


step("--max-connections-per-ip 3: a 4th connection from one address is closed at accept and counted; a closed one gives its slot back; another address is served", async () => {
  assert.equal(await metric('permitd_grpc_connections_per_ip_limit{listener="grpc"}'), PER_IP);
  const held = [];
  for (let i = 0; i < PER_IP; i++) {
    held.push(await session("127.0.0.1"));
    assert.equal(await peek(held[i]), 0, `a call on connection ${i + 1} is answered`);
  }
  assert.equal(await metric(OPEN), PER_IP);
  assert.equal(await metric(PER_IP_REFUSED), 0);

  const took = await refusedWithin("127.0.0.1");
  assert.notEqual(took, null, "the 4th connection from 127.0.0.1 was closed by the server");
  assert.ok(took < 1000, `closed at accept, ${took} ms`);
  assert.equal(await metric(OPEN), PER_IP);
  assert.equal(await metric(PER_IP_REFUSED), 1);
  assert.equal(await metric(FULL_REFUSED), 0);
  for (const s of held) assert.equal(await peek(s), 0, "the connections held are still served");

  // another address, while 127.0.0.1 is at its limit
  const other = await session("127.0.0.2");
  assert.equal(await peek(other), 0, "127.0.0.2 is served");
  assert.equal(await metric(OPEN), PER_IP + 1);
  await closeSession(other);

  // one closed: its slot comes back
  await closeSession(held.shift());
  await metricBecomes(OPEN, PER_IP - 1);
  held.push(await session("127.0.0.1"));
  assert.equal(await peek(held[held.length - 1]), 0, "a new connection after a close is served");
  assert.equal(await refusedWithin("127.0.0.1") !== null, true, "at the limit again: refused");
  assert.equal(await metric(PER_IP_REFUSED), 2);

  // a burst of refusals is logged at most once a second
  const before = server.output.join("").split("--max-connections-per-ip open").length - 1;
  const t0 = Date.now();
  for (let i = 0; i < 10; i++) assert.notEqual(await refusedWithin("127.0.0.1"), null);
  const seconds = (Date.now() - t0) / 1000;
  assert.equal(await metric(PER_IP_REFUSED), 12);
  const logged = server.output.join("").split("--max-connections-per-ip open").length - 1 - before;
  assert.ok(logged <= Math.ceil(seconds) + 1, `${logged} log lines for 10 refusals in ${seconds} s`);
  assert.match(server.output.join(""), /connection refused: its address has --max-connections-per-ip open".*listener=grpc addr=127\.0\.0\.1 limit=3/);

  for (const s of held) await closeSession(s);
  await metricBecomes(OPEN, 0);
});

step("a message over the limit: RESOURCE_EXHAUSTED while the client still sends, then RST_STREAM NO_ERROR ends the stream", async () => {
  const s = await session("127.0.0.1");
  try {
    const body = frame(Buffer.alloc(MAX_BODY + 1000, 0x61));
    const out = await new Promise((resolve) => {
      const r = { status: null, message: "", rst: null, ended: false, writeErrors: 0 };
      const req = s.request({ ":method": "POST", ":path": "/permit.v1.RateLimitService/Acquire",
                              "content-type": "application/grpc", te: "trailers" });
      const timer = setTimeout(() => { r.timedOut = true; req.close(http2.constants.NGHTTP2_CANCEL); }, 3000);
      req.on("response", (h) => {
        if (h["grpc-status"] !== undefined) r.status = Number(h["grpc-status"]);
        r.message = decodeURIComponent(h["grpc-message"] ?? "");
      });
      req.on("data", () => {});
      req.on("error", () => {});
      req.on("close", () => { clearTimeout(timer); r.rst = req.rstCode; resolve(r); });
      // more than the limit, and the request never ended by the client
      req.write(body.subarray(0, MAX_BODY + 500));
      r.ended = req.writableEnded;
    });
    assert.equal(out.status, 8, `RESOURCE_EXHAUSTED: ${out.message}`);
    assert.match(out.message, new RegExp(`over ${MAX_BODY} bytes`));
    assert.equal(out.timedOut, undefined, "the server ended the stream; the client never did");
    assert.equal(out.ended, false);
    assert.equal(out.rst, http2.constants.NGHTTP2_NO_ERROR, `reset with NO_ERROR, got ${out.rst}`);
    // the connection goes on serving calls
    assert.equal(await peek(s), 0);
  } finally {
    await closeSession(s);
  }
});
