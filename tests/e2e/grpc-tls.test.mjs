// End-to-end: the gRPC listener over TLS (--grpc-tls-cert/--grpc-tls-key,
// issue 25): grpc-js with a self-signed certificate the test makes
// (openssl), ALPN h2 required, cleartext refused; with
// --max-connections-per-ip 2, a failed handshake gives its slot back.
//
// Environment (run-grpc.sh / ctest provide it): PERMITD_BIN,
// PERMITD_TEST_REDIS_URL, PERMITD_TEST_REDIS_PORT.
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

function requireEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`grpc-tls.test.mjs: environment variable ${name} is not set (run it under ctest: e2e_grpc)`);
  return v;
}

const PERMITD_BIN = requireEnv("PERMITD_BIN");
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL");
const REDIS_PORT = requireEnv("PERMITD_TEST_REDIS_PORT");
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PROTO_DIR = path.join(HERE, "..", "..", "proto");
const PREFIX = `e2e-grpctls-${process.pid}:`;
const APP = "tls-app";

const def = protoLoader.loadSync(path.join(PROTO_DIR, "permit", "v1", "ratelimit.proto"), {
  includeDirs: [PROTO_DIR], longs: Number, defaults: true, keepCase: true,
});
const pkg = grpc.loadPackageDefinition(def);

let dir = null;
let server = null;
let failed = false;

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function step(name, fn) {
  it(name, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      failed = true;
      throw err;
    }
  });
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "permitd-grpc-tls-"));
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
    "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
    "-keyout", path.join(dir, "key.pem"), "-out", path.join(dir, "cert.pem")], { stdio: "ignore" });
  execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", REDIS_PORT, "HSET", `${PREFIX}{tls}:policy`,
    "name", "tls", "apps", APP, "max_permits", "2", "rate", "0.001", "version", "1", "enabled", "1"]);
  const [port, grpcPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const args = ["--listen", `127.0.0.1:${port}`, "--admin-listen", `127.0.0.1:${adminPort}`,
                "--grpc-listen", `127.0.0.1:${grpcPort}`, "--grpc-tls-cert", path.join(dir, "cert.pem"),
                "--grpc-tls-key", path.join(dir, "key.pem"), "--max-connections-per-ip", "2",
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX, "--app-auth", "off"];
  const child = spawn(PERMITD_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  const output = [];
  child.stdout.setEncoding("utf8").on("data", (d) => output.push(d));
  child.stderr.setEncoding("utf8").on("data", (d) => output.push(d));
  const exit = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  server = { child, grpcPort, adminPort, output, exit };
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && child.exitCode === null) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(grpcPort, "127.0.0.1", () => { s.destroy(); resolve(true); });
      s.on("error", () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`permitd's TLS gRPC port did not open\n${output.join("")}`);
});

after(async () => {
  if (server && server.child.exitCode === null) {
    server.child.kill("SIGTERM");
    const res = await Promise.race([server.exit, sleep(15000, null, { ref: false })]);
    if (res === null || res.code !== 0) failed = true;
    if (res === null) server.child.kill("SIGKILL");
  }
  if (failed) process.stderr.write(`\n--- permitd output ---\n${server?.output.join("")}\n--- end ---\n`);
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
    text = await (await fetch(`http://127.0.0.1:${server.adminPort}/metrics`)).text();
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
