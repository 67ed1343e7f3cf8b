// End-to-end: stock gRPC clients against permitd's gRPC listener (issue 25).
// @grpc/grpc-js (with @grpc/proto-loader reading proto/ as it is) calls
// permit.v1.RateLimitService over HTTP/2; node's own http2 client sends what
// grpc-js never would (bad length prefixes, a grpc-timeout with no message,
// a reset stream, garbage frames), to see an error answered, never a crash.
//
// Environment (run-grpc.sh / ctest provide it):
//   PERMITD_BIN              the permitd binary
//   PERMITD_TEST_REDIS_URL   redis://127.0.0.1:PORT of a throw-away redis-server
//   PERMITD_TEST_REDIS_PORT  the same port, for redis-cli
import { after, before } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

import grpc from "@grpc/grpc-js";

import { listeners, metrics, putRedisPolicy, redisCli as redis, requireEnv, spawnPermitd, stepper, stopAndReport, tcpOpen,
  waitReady } from "./permitd.mjs";
import { loadProto } from "./proto.mjs";

const HINT = "grpc.test.mjs: run it under ctest: e2e_grpc";
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", HINT);

const PREFIX = `e2e-grpc-${process.pid}:`;
const APP = "grpc-app";
const MAX_BODY = 4096;

const pkg = loadProto("permit/v1/ratelimit.proto");

// ---------------------------------------------------------------- helpers

function putPolicy(name, { maxPermits = 5, rate = "0.001", shadow = false } = {}) {
  putRedisPolicy(PREFIX, name, { apps: APP, maxPermits, rate, more: shadow ? ["shadow", "1"] : [] });
}

let server = null; // spawnPermitd()'s, with grpcPort and adminPort
const run = { failed: false };
const step = stepper(run);

async function startPermitd() {
  const l = await listeners();
  const args = [...l.args, "--threads", "2",
                "--max-body-bytes", String(MAX_BODY),
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--redis-timeout-ms", "5000",
                "--app-auth", "off"];
  server = spawnPermitd(args, l.ports);
  await waitReady(server, `its gRPC port ${l.ports.grpcPort} open`, tcpOpen(l.ports.grpcPort), 10_000);
}

function client() {
  return new pkg.permit.v1.RateLimitService(`127.0.0.1:${server.grpcPort}`,
    grpc.credentials.createInsecure());
}

// A unary call as a promise: { res, metadata } or a rejection with the ServiceError.
function call(c, method, req, options = {}) {
  return new Promise((resolve, reject) => {
    let metadata = null;
    const x = c[method](req, new grpc.Metadata(), options, (err, res) => {
      if (err) reject(err);
      else resolve({ res, metadata });
    });
    x.on("metadata", (m) => { metadata = m; });
  });
}

async function expectStatus(promise, code, messageRe) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.code, code, `expected status ${code}, got ${err.code}: ${err.details}`);
    if (messageRe) assert.match(err.details, messageRe);
    return true;
  });
}

// One raw HTTP/2 request: headers + body; answers { status, headers, trailers, data }.
function raw(headers, body, { session, endStream = true } = {}) {
  const own = !session;
  const s = session ?? http2.connect(`http://127.0.0.1:${server.grpcPort}`);
  return new Promise((resolve, reject) => {
    const out = { status: 0, headers: {}, trailers: {}, data: Buffer.alloc(0) };
    const req = s.request({ ":method": "POST", "content-type": "application/grpc", te: "trailers",
                            ...headers }, { endStream: endStream && body === null });
    req.on("response", (h) => { out.status = h[":status"]; out.headers = h; });
    req.on("trailers", (t) => { out.trailers = t; });
    req.on("data", (d) => { out.data = Buffer.concat([out.data, d]); });
    req.on("end", () => { if (own) s.close(); resolve(out); });
    req.on("error", (e) => { if (own) s.close(); reject(e); });
    if (body !== null) {
      if (endStream) req.end(body);
      else req.write(body);
    }
  });
}

// The grpc-status of a raw answer: a Trailers-Only answer has it in its headers.
function grpcStatus(out) {
  return Number(out.trailers["grpc-status"] ?? out.headers["grpc-status"]);
}

function grpcMessage(out) {
  return decodeURIComponent(out.trailers["grpc-message"] ?? out.headers["grpc-message"] ?? "");
}

function frame(msg, { flag = 0, length = msg.length } = {}) {
  const b = Buffer.alloc(5 + msg.length);
  b[0] = flag;
  b.writeUInt32BE(length, 1);
  msg.copy(b, 5);
  return b;
}

// An AcquireRequest encoded by hand: bucket = 1, app = 2 (strings).
function acquireBytes(bucket, app = APP) {
  const field = (n, s) => Buffer.concat([Buffer.from([(n << 3) | 2, Buffer.byteLength(s)]), Buffer.from(s)]);
  return Buffer.concat([field(1, bucket), field(2, app)]);
}

async function alive() {
  const c = client();
  try {
    const { res } = await call(c, "Peek", { bucket: "grpc-alive", app: APP }, { deadline: Date.now() + 5000 });
    assert.equal(res.limit, 5);
  } finally {
    c.close();
  }
}

// ---------------------------------------------------------------- lifecycle

before(async () => {
  for (const p of ["grpc-exact", "grpc-alive", "grpc-batch", "grpc-cancel", "grpc-deadline"]) putPolicy(p);
  putPolicy("grpc-reserve", { maxPermits: 50 });
  putPolicy("grpc-concurrent", { maxPermits: 100 });
  putPolicy("grpc-shadow", { maxPermits: 2, shadow: true });
  await startPermitd();
});

after(() => stopAndReport(server, run, 15_000));

// ---------------------------------------------------------------- permit.v1 over gRPC

step("Acquire over gRPC admits exactly max_permits, then denies with retry_after_ms and RateLimit metadata", async () => {
  const c = client();
  try {
    const answers = [];
    for (let i = 0; i < 7; i++) answers.push(await call(c, "Acquire", { bucket: "grpc-exact", app: APP, permits: 1 }));
    assert.deepEqual(answers.map((a) => a.res.allowed), [true, true, true, true, true, false, false]);
    assert.deepEqual(answers.map((a) => a.res.remaining), [4, 3, 2, 1, 0, 0, 0]);
    assert.equal(answers[0].res.limit, 5);
    assert.ok(answers[5].res.retry_after_ms > 0, "a denial says when to come back");
    assert.equal(answers[0].metadata.get("ratelimit-policy")[0], '"grpc-exact";q=5;w=5000');
    assert.match(answers[5].metadata.get("ratelimit")[0], /^"grpc-exact";r=0;t=\d+$/);
    assert.ok(Number(answers[5].metadata.get("retry-after")[0]) >= 1);
    const { res } = await call(c, "Peek", { bucket: "grpc-exact", app: APP });
    assert.equal(res.remaining, 0);
  } finally {
    c.close();
  }
});

step("a policy in shadow mode over gRPC: every Acquire allowed, the would-be denials flagged and counted apart", async () => {
  const c = client();
  try {
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await call(c, "Acquire", { bucket: "grpc-shadow", app: APP, permits: 1 }));
    assert.deepEqual(answers.map((a) => a.res.allowed), [true, true, true, true, true]);
    assert.deepEqual(answers.map((a) => a.res.shadow), [false, false, true, true, true]);
    assert.ok(answers[4].res.retry_after_ms > 0, "the would-be denial's wait is told");
    const text = await metrics(server);
    assert.match(text, /permitd_acquires_total\{policy="grpc-shadow",result="shadow_denied"\} 3\n/);
    assert.match(text, /permitd_acquires_total\{policy="grpc-shadow",result="allowed"\} 2\n/);
  } finally {
    c.close();
  }
});

step("AcquireBatch, Release and errors keep their Connect meaning over gRPC", async () => {
  const c = client();
  try {
    const { res } = await call(c, "AcquireBatch", { requests: [
      { bucket: "grpc-batch", app: APP, permits: 2 },
      { bucket: "grpc-batch", app: APP, permits: 4 },
      { bucket: "no-such-policy", app: APP, permits: 1 }] });
    assert.equal(res.results.length, 3);
    assert.equal(res.results[0].response.allowed, true);
    assert.equal(res.results[1].response.allowed, false);
    assert.equal(res.results[2].error.code, "not_found");
    await expectStatus(call(c, "Acquire", { bucket: "no-such-policy", app: APP }), grpc.status.NOT_FOUND, /no-such-policy/);
    await expectStatus(call(c, "Acquire", { bucket: "bad name!", app: APP }), grpc.status.INVALID_ARGUMENT, /bad name!/);
    await expectStatus(call(c, "Acquire", { bucket: "grpc-batch", app: APP, permits: 6 }), grpc.status.OUT_OF_RANGE);
    await expectStatus(call(c, "Release", { bucket: "grpc-batch", app: APP, lease_id: "0".repeat(32) }),
      grpc.status.FAILED_PRECONDITION, /token_bucket/);
  } finally {
    c.close();
  }
});

step("Reserve, Commit and Cancel over gRPC (issue 38): held, refunded, idempotent", async () => {
  const c = client();
  try {
    const peek = async () => (await call(c, "Peek", { bucket: "grpc-reserve", app: APP })).res.remaining;
    const { res: r } = await call(c, "Reserve", { app: APP, items: [{ bucket: "grpc-reserve", estimate: 20 }] });
    assert.equal(r.allowed, true);
    assert.match(r.reservation_id, /^[0-9a-f]{32}$/);
    assert.equal(Number(r.items[0].held), 20);
    assert.equal(Number(await peek()), 30);
    const { res: m } = await call(c, "Commit", { app: APP, reservation_id: r.reservation_id, actual: [5] });
    assert.ok([1, "RESERVATION_STATE_COMMITTED"].includes(m.state), `state ${m.state}`);
    assert.equal(Number(m.items[0].refunded), 15);
    assert.equal(Number(await peek()), 45);
    const { res: again } = await call(c, "Cancel", { app: APP, reservation_id: r.reservation_id });
    assert.equal(again.replayed, true);
    assert.ok([1, "RESERVATION_STATE_COMMITTED"].includes(again.state), `state ${again.state}`);
    assert.equal(Number(await peek()), 45);
    const { res: big } = await call(c, "Reserve", { app: APP, items: [{ bucket: "grpc-reserve", estimate: 46 }] });
    assert.equal(big.allowed, false);
    assert.ok(Number(big.retry_after_ms) > 0);
    await expectStatus(call(c, "Commit", { app: APP, reservation_id: "0".repeat(32), actual: [1] }),
      grpc.status.NOT_FOUND, /no reservation/);
  } finally {
    c.close();
  }
});

step("200 concurrent streams on one connection: exactly max_permits (100) admitted", async () => {
  const c = client();
  try {
    const all = await Promise.all(Array.from({ length: 200 },
      () => call(c, "Acquire", { bucket: "grpc-concurrent", app: APP, permits: 1 }, { deadline: Date.now() + 10000 })));
    assert.equal(all.filter((a) => a.res.allowed).length, 100);
    assert.equal(all.filter((a) => !a.res.allowed).length, 100);
  } finally {
    c.close();
  }
});

step("an unknown procedure is UNIMPLEMENTED, naming its path", async () => {
  const out = await raw({ ":path": "/permit.v1.RateLimitService/Nope" }, frame(Buffer.alloc(0)));
  assert.equal(out.status, 200);
  assert.equal(grpcStatus(out), grpc.status.UNIMPLEMENTED);
  assert.match(grpcMessage(out), /\/permit\.v1\.RateLimitService\/Nope/);
});

// ---------------------------------------------------------------- deadlines and cancellation

step("grpc-timeout: a request never finished is answered DEADLINE_EXCEEDED by the server", async () => {
  const t0 = Date.now();
  const out = await raw({ ":path": "/permit.v1.RateLimitService/Acquire", "grpc-timeout": "200m" },
    frame(acquireBytes("grpc-deadline")).subarray(0, 3), { endStream: false });
  const took = Date.now() - t0;
  assert.equal(grpcStatus(out), grpc.status.DEADLINE_EXCEEDED, grpcMessage(out));
  assert.ok(took >= 190 && took < 2000, `answered after ${took} ms`);
});

step("grpc-timeout while Redis stalls: DEADLINE_EXCEEDED at the deadline (server-side)", async () => {
  redis("CLIENT", "PAUSE", "1500", "ALL");
  try {
    const t0 = Date.now();
    const out = await raw({ ":path": "/permit.v1.RateLimitService/Acquire", "grpc-timeout": "300m" },
      frame(acquireBytes("grpc-deadline")));
    const took = Date.now() - t0;
    assert.equal(grpcStatus(out), grpc.status.DEADLINE_EXCEEDED, grpcMessage(out));
    assert.ok(took >= 250 && took < 1400, `answered after ${took} ms`);
    // grpc-js's deadline, as stock clients send it
    const c = client();
    try {
      await expectStatus(call(c, "Acquire", { bucket: "grpc-deadline", app: APP }, { deadline: Date.now() + 200 }),
        grpc.status.DEADLINE_EXCEEDED);
    } finally {
      c.close();
    }
  } finally {
    await sleep(1600);
  }
  await alive();
});

step("a malformed grpc-timeout is refused naming it", async () => {
  const out = await raw({ ":path": "/permit.v1.RateLimitService/Acquire", "grpc-timeout": "12x" },
    frame(acquireBytes("grpc-alive")));
  assert.equal(grpcStatus(out), grpc.status.INVALID_ARGUMENT);
  assert.match(grpcMessage(out), /grpc-timeout: "12x"/);
});

step("RST_STREAM while a decision is pending: the call is dropped cleanly, the server goes on", async () => {
  redis("CLIENT", "PAUSE", "700", "ALL");
  const s = http2.connect(`http://127.0.0.1:${server.grpcPort}`);
  try {
    const reqs = [];
    for (let i = 0; i < 20; i++) {
      const r = s.request({ ":method": "POST", ":path": "/permit.v1.RateLimitService/Acquire",
                            "content-type": "application/grpc" });
      r.on("error", () => {});
      r.end(frame(acquireBytes("grpc-cancel")));
      reqs.push(r);
    }
    await sleep(100);
    for (const r of reqs) r.close(http2.constants.NGHTTP2_CANCEL);
    // grpc-js's cancel(), as stock clients do it
    const c = client();
    const x = c.Acquire({ bucket: "grpc-cancel", app: APP }, () => {});
    const cancelled = new Promise((resolve) => x.on("status", (st) => resolve(st.code)));
    await sleep(50);
    x.cancel();
    assert.equal(await cancelled, grpc.status.CANCELLED);
    c.close();
    await sleep(900);
    // the same connection still serves calls
    const out = await raw({ ":path": "/permit.v1.RateLimitService/Peek" }, frame(acquireBytes("grpc-alive")), { session: s });
    assert.equal(grpcStatus(out), 0);
  } finally {
    s.close();
  }
  await alive();
});

// ---------------------------------------------------------------- malformed input

step("malformed gRPC framing is answered by an error naming the bad value", async () => {
  const p = { ":path": "/permit.v1.RateLimitService/Acquire" };
  const msg = acquireBytes("grpc-alive");
  const cases = [
    [frame(msg, { length: 100 }), grpc.status.INVALID_ARGUMENT, /says 100 bytes, \d+ followed/],
    [Buffer.concat([frame(msg), frame(msg)]), grpc.status.INVALID_ARGUMENT, /exactly one message/],
    [frame(msg, { flag: 7 }), grpc.status.INVALID_ARGUMENT, /flag is 7/],
    [frame(msg, { flag: 1 }), grpc.status.UNIMPLEMENTED, /compressed/],
    [frame(msg).subarray(0, 3), grpc.status.INVALID_ARGUMENT, /cut short: 3 bytes/],
    [Buffer.alloc(0), grpc.status.INVALID_ARGUMENT, /no request message/],
    [frame(Buffer.from([0xff, 0xff, 0xff])), grpc.status.INVALID_ARGUMENT, /not a valid permit\.v1\.AcquireRequest/],
    [frame(Buffer.alloc(0), { length: 0x7fffffff }), grpc.status.RESOURCE_EXHAUSTED, /announces 2147483647 bytes/],
    [frame(Buffer.alloc(MAX_BODY + 10)), grpc.status.RESOURCE_EXHAUSTED, new RegExp(`over ${MAX_BODY} bytes`)],
  ];
  for (const [body, code, re] of cases) {
    const out = await raw(p, body);
    assert.equal(grpcStatus(out), code, `${body.subarray(0, 8).toString("hex")}: ${grpcMessage(out)}`);
    assert.match(grpcMessage(out), re);
  }
  const wrongType = await raw({ ...p, "content-type": "application/json" }, frame(msg));
  assert.equal(wrongType.status, 415);
  const encoded = await raw({ ...p, "grpc-encoding": "gzip" }, frame(msg));
  assert.equal(grpcStatus(encoded), grpc.status.UNIMPLEMENTED);
  assert.match(grpcMessage(encoded), /grpc-encoding: "gzip"/);
  await alive();
});

step("garbage and broken HTTP/2 frames close the connection, never the server", async () => {
  const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
  const inputs = [
    Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    Buffer.alloc(64, 0xff),
    Buffer.concat([preface, settings, Buffer.from([0, 0, 4, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4])]),  // DATA on stream 0
    Buffer.concat([preface, settings, Buffer.from([0xff, 0xff, 0xff, 1, 4, 0, 0, 0, 1])]),      // HEADERS of 16 MiB announced
    Buffer.concat([preface, settings, Buffer.from([0, 0, 3, 1, 5, 0, 0, 0, 1, 0xff, 0xfe, 0xfd])]), // HEADERS, bad HPACK
    Buffer.concat([preface, Buffer.from([0, 0, 5, 4, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5])]),          // SETTINGS of 5 bytes
  ];
  for (const input of inputs) {
    const closed = await new Promise((resolve) => {
      const s = net.connect(server.grpcPort, "127.0.0.1", () => s.write(input));
      const timer = setTimeout(() => { s.destroy(); resolve(false); }, 3000);
      s.on("data", () => {});
      s.on("close", () => { clearTimeout(timer); resolve(true); });
      s.on("error", () => {});
    });
    assert.ok(closed, `the server closed the connection after ${input.subarray(0, 24).toString("hex")}`);
  }
  await alive();
});
