// End-to-end: the gRPC listener over TLS (--grpc-tls-cert/--grpc-tls-key,
// issue 25): grpc-js with a self-signed certificate the test makes
// (openssl), ALPN h2 required, cleartext refused; with
// --max-connections-per-ip 2, a failed handshake gives its slot back.
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_REDIS_PORT.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { setTimeout as sleep } from "node:timers/promises";

import grpc from "@grpc/grpc-js";

import { listeners, metrics, putRedisPolicy, requireEnv, spawnPermitd, stepper, stopAndReport, tcpOpen,
  waitReady } from "./permitd.mjs";
import { loadProto } from "./proto.mjs";

const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", "grpc-tls.test.mjs: run it under ctest: e2e_grpc");
const PREFIX = `e2e-grpctls-${process.pid}:`;
const APP = "tls-app";

const pkg = loadProto("permit/v1/ratelimit.proto");

let dir = null;
let server = null; // spawnPermitd()'s, with grpcPort and adminPort
const run = { failed: false };
const step = stepper(run);

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "permitd-grpc-tls-"));
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
    "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
    "-keyout", path.join(dir, "key.pem"), "-out", path.join(dir, "cert.pem")], { stdio: "ignore" });
  putRedisPolicy(PREFIX, "tls", { apps: APP, maxPermits: 2, rate: "0.001" });
  const l = await listeners();
  const args = [...l.args, "--grpc-tls-cert", path.join(dir, "cert.pem"),
                "--grpc-tls-key", path.join(dir, "key.pem"), "--max-connections-per-ip", "2",
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--app-auth", "off"];
  server = spawnPermitd(args, l.ports);
  await waitReady(server, `its TLS gRPC port ${l.ports.grpcPort} open`, tcpOpen(l.ports.grpcPort), 10_000);
});

after(async () => {
  await stopAndReport(server, run, 15_000);
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function acquire(c) {
  return new Promise((resolve, reject) => c.Acquire({ bucket: "tls", app: APP }, { deadline: Date.now() + 5000 },
    (err, res) => (err ? reject(err) : resolve(res))));
}

step("grpc-js over TLS (ALPN h2, the test's own CA): Acquire admits exactly max_permits", async () => {
  const creds = grpc.credentials.createSsl(fs.readFileSync(path.join(dir, "cert.pem")));
  const c = new pkg.permit.v1.RateLimitService(`localhost:${server.grpcPort}`, creds);
  try {
    const answers = [await acquire(c), await acquire(c), await acquire(c)];
    assert.deepEqual(answers.map((a) => a.allowed), [true, true, false]);
  } finally {
    c.close();
  }
});

step("ALPN without h2 fails the handshake; a cleartext client gets no gRPC answer", async () => {
  const ca = fs.readFileSync(path.join(dir, "cert.pem"));
  const http1 = await new Promise((resolve) => {
    const s = tls.connect({ host: "127.0.0.1", port: server.grpcPort, ca, servername: "localhost",
      ALPNProtocols: ["http/1.1"] }, () => { resolve(`connected (${s.alpnProtocol})`); s.destroy(); });
    s.on("error", (e) => resolve(`error: ${e.code ?? e.message}`));
  });
  assert.match(http1, /^error/);
  const h2 = await new Promise((resolve) => {
    const s = tls.connect({ host: "127.0.0.1", port: server.grpcPort, ca, servername: "localhost",
      ALPNProtocols: ["h2"] }, () => { resolve(s.alpnProtocol); s.destroy(); });
    s.on("error", (e) => resolve(`error: ${e.code ?? e.message}`));
  });
  assert.equal(h2, "h2");
  const plain = new pkg.permit.v1.RateLimitService(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
  try {
    await assert.rejects(acquire(plain), (e) => e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.DEADLINE_EXCEEDED);
  } finally {
    plain.close();
  }
});

step("failed TLS handshakes give their slot back (--max-connections-per-ip 2): a client is served after them", async () => {
  const ca = fs.readFileSync(path.join(dir, "cert.pem"));
  for (let i = 0; i < 3; i++) {
    const r = await new Promise((resolve) => {
      const s = tls.connect({ host: "127.0.0.1", port: server.grpcPort, ca, servername: "localhost",
        ALPNProtocols: ["http/1.1"] }, () => { resolve("connected"); s.destroy(); });
      s.on("error", (e) => resolve(`error: ${e.code ?? e.message}`));
    });
    assert.match(r, /^error/);
  }
  // The closes before are the client's: the server sees them a moment later.
  const open = 'permitd_grpc_connections{listener="grpc"}';
  let text = "";
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(50)) {
    text = await metrics(server);
    if (text.includes(`${open} 0\n`)) break;
  }
  assert.ok(text.includes(`${open} 0\n`), text.split("\n").filter((l) => l.startsWith("permitd_grpc")).join("\n"));
  const creds = grpc.credentials.createSsl(ca);
  const c = new pkg.permit.v1.RateLimitService(`localhost:${server.grpcPort}`, creds);
  try {
    const res = await acquire(c);
    assert.equal(res.limit, 2, "answered (the bucket is spent: a denial, but an answer)");
  } finally {
    c.close();
  }
});
