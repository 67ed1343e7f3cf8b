// End-to-end: a stock Connect client (@connectrpc/connect-node, code generated
// from proto/ by protoc-gen-es) talks to a real permitd backed by a real Redis.
//
// Environment (run.sh / ctest provide it):
//   PERMITD_BIN              the permitd binary
//   PERMITD_TEST_REDIS_URL   redis://127.0.0.1:PORT of a throw-away redis-server
//   PERMITD_TEST_REDIS_PORT  the same port, for redis-cli
//   PERMITD_E2E_GEN          directory holding the generated permit/v1/ratelimit_pb.js
//
// Policies are written straight into Redis in the documented layout:
//   HSET <prefix>{<policy>}:policy name … apps … max_permits … rate … version … enabled …
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

import { freePort, httpOk, putRedisPolicy, requireEnv, spawnPermitd, stepper, stopAndReport, waitReady } from "./permitd.mjs";

const HINT = "acquire.test.mjs: run it through tests/e2e/run.sh under ctest";
const REDIS_URL = requireEnv("PERMITD_TEST_REDIS_URL", HINT);
const GEN_DIR = requireEnv("PERMITD_E2E_GEN", HINT);

const { RateLimitService } = await import(
  pathToFileURL(path.join(GEN_DIR, "permit", "v1", "ratelimit_pb.js")).href
);
assert.ok(RateLimitService, "generated code exports RateLimitService");

const PREFIX = `e2e-${process.pid}:`;
const APP = "e2e-app";
const MAX = 5;

// ---------------------------------------------------------------- helpers

function putPolicy(name, { apps = "e2e-app,other-app", maxPermits = MAX, rate = "1" } = {}) {
  const out = putRedisPolicy(PREFIX, name, { apps, maxPermits, rate });
  assert.match(out, /^\(integer\) \d+$|^\d+$/, `redis-cli HSET ${PREFIX}{${name}}:policy answered ${JSON.stringify(out)}`);
}

let server = null; // spawnPermitd()'s, with port (the API listener's)
const run = { failed: false };
// it() that remembers failures, so after() can print the server's output.
const step = stepper(run);

async function startPermitd() {
  const port = await freePort();
  // The admin listener on a port of its own too: its default (8081) may be
  // taken by anything else on the machine, a parallel test run among them.
  const args = ["--listen", `127.0.0.1:${port}`, "--admin-listen", "127.0.0.1:0",
                "--redis-url", REDIS_URL, "--redis-prefix", PREFIX,
                // policies by hand, no MySQL where app keys live (issue 21)
                "--app-auth", "off"];
  server = spawnPermitd(args, { port });
  await waitReady(server, "API listener: /healthz 200", httpOk(`http://127.0.0.1:${port}/healthz`), 10_000);
}

function makeClient(useBinaryFormat) {
  const transport = createConnectTransport({
    baseUrl: `http://127.0.0.1:${server.port}`,
    httpVersion: "1.1",
    useBinaryFormat,
    defaultTimeoutMs: 5000,
  });
  return createClient(RateLimitService, transport);
}

// Calls client.acquire and returns [response, response headers].
async function acquireWithHeaders(client, req) {
  let headers = null;
  const res = await client.acquire(req, { onHeader: (h) => { headers = h; } });
  assert.ok(headers, "onHeader was called");
  return [res, headers];
}

async function expectCode(promise, code, check) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof ConnectError, `expected a ConnectError, got ${err?.constructor?.name}: ${err}`);
    assert.equal(err.code, code,
      `expected Code.${Code[code]}, got Code.${Code[err.code]} (${err.rawMessage ?? err.message})`);
    if (check) check(err);
    return true;
  });
}

// ---------------------------------------------------------------- lifecycle

before(async () => {
  for (const mode of ["binary", "json"]) {
    putPolicy(`e2e-${mode}`);
    putPolicy(`e2e-keyed-${mode}`);
  }
  await startPermitd();
});

after(() => stopAndReport(server, run, 5000));


// ---------------------------------------------------------------- the tests

for (const [mode, useBinaryFormat] of [["binary", true], ["json", false]]) {
  describe(`Connect ${mode} (useBinaryFormat: ${useBinaryFormat})`, { timeout: 60_000 }, () => {
    const policy = `e2e-${mode}`;
    const keyed = `e2e-keyed-${mode}`;
    let client;
    const seen = {}; // headers and responses kept for the header-value checks

    before(() => { client = makeClient(useBinaryFormat); });

    step(`${MAX} acquires are allowed, the next is denied, Peek shows an empty bucket`, async () => {
      for (let i = 1; i <= MAX; i++) {
        const [res, headers] = await acquireWithHeaders(client, { bucket: policy, app: APP, permits: 1n });
        const want = BigInt(MAX - i);
        assert.equal(res.allowed, true, `acquire #${i}: allowed`);
        assert.equal(res.remaining, want, `acquire #${i}: remaining`);
        assert.equal(res.limit, BigInt(MAX), `acquire #${i}: limit`);
        assert.equal(res.retryAfterMs, 0n, `acquire #${i}: retryAfterMs`);
        if (i === 1) { seen.allowed = res; seen.allowedHeaders = headers; }
      }

      const [denied, deniedHeaders] = await acquireWithHeaders(client, { bucket: policy, app: APP, permits: 1n });
      seen.denied = denied; seen.deniedHeaders = deniedHeaders;
      assert.equal(denied.allowed, false, "acquire #6: allowed");
      assert.equal(denied.remaining, 0n, "acquire #6: remaining");
      assert.ok(denied.retryAfterMs > 0n && denied.retryAfterMs <= 1000n,
        `acquire #6: 0 < retryAfterMs <= 1000, got ${denied.retryAfterMs}`);

      const peek = await client.peek({ bucket: policy, app: APP });
      assert.equal(peek.remaining, 0n, "peek: remaining");
      assert.equal(peek.limit, BigInt(MAX), "peek: limit");
      assert.ok(peek.resetAfterMs > 0n, `peek: resetAfterMs > 0, got ${peek.resetAfterMs}`);
    });

    step("an allowed Acquire carries RateLimit-Policy and RateLimit headers, a denied one Retry-After", () => {
      assert.ok(seen.allowedHeaders && seen.deniedHeaders, "the burst step ran");
      const a = seen.allowedHeaders;
      assert.ok(a.has("ratelimit-policy"), `allowed reply has ratelimit-policy; headers: ${JSON.stringify([...a])}`);
      assert.ok(a.has("ratelimit"), `allowed reply has ratelimit; headers: ${JSON.stringify([...a])}`);
      const d = seen.deniedHeaders;
      assert.ok(d.has("retry-after"), `denied reply has retry-after; headers: ${JSON.stringify([...d])}`);
    });

    // Values per DESIGN.md ("Wire protocol"); kept apart from the presence check above.
    step("header values follow DESIGN.md (policy name, q=max, r=remaining, Retry-After in whole seconds rounded up)", () => {
      assert.ok(seen.allowedHeaders && seen.deniedHeaders, "the burst step ran");
      const rp = seen.allowedHeaders.get("ratelimit-policy") ?? "";
      assert.match(rp, new RegExp(`^"${policy}";.*\\bq=${MAX}\\b`), `ratelimit-policy: ${rp}`);
      const rl = seen.allowedHeaders.get("ratelimit") ?? "";
      assert.match(rl, new RegExp(`^"${policy}";.*\\br=${seen.allowed.remaining}\\b`), `ratelimit: ${rl}`);
      const ra = seen.deniedHeaders.get("retry-after") ?? "";
      const wantSecs = (seen.denied.retryAfterMs + 999n) / 1000n;
      assert.equal(ra, String(wantSecs), `retry-after (retryAfterMs=${seen.denied.retryAfterMs})`);
    });

    step("an unknown bucket is not_found", async () => {
      await expectCode(client.acquire({ bucket: `e2e-nosuch-${mode}`, app: APP, permits: 1n }), Code.NotFound);
    });

    step("an app not in the policy's apps is permission_denied", async () => {
      await expectCode(client.acquire({ bucket: policy, app: "intruder", permits: 1n }), Code.PermissionDenied);
    });

    step("permits > max_permits is out_of_range", async () => {
      await expectCode(client.acquire({ bucket: policy, app: APP, permits: BigInt(MAX + 1) }), Code.OutOfRange);
    });

    step("a malformed bucket name is invalid_argument naming the field", async () => {
      await expectCode(client.acquire({ bucket: "bad name!", app: APP, permits: 1n }), Code.InvalidArgument,
        (err) => assert.match(err.rawMessage, /bucket/i, `message mentions bucket: ${JSON.stringify(err.rawMessage)}`));
    });

    step("keys user-1 and user-2 get independent buckets of their own", async () => {
      for (const key of ["user-1", "user-2"]) {
        for (let i = 1; i <= MAX; i++) {
          const res = await client.acquire({ bucket: keyed, app: APP, key, permits: 1n });
          assert.equal(res.allowed, true, `${key} acquire #${i}: allowed`);
          assert.equal(res.remaining, BigInt(MAX - i), `${key} acquire #${i}: remaining`);
          assert.equal(res.limit, BigInt(MAX), `${key} acquire #${i}: limit`);
        }
        const res = await client.acquire({ bucket: keyed, app: APP, key, permits: 1n });
        assert.equal(res.allowed, false, `${key} acquire #${MAX + 1}: allowed`);
        assert.equal(res.remaining, 0n, `${key} acquire #${MAX + 1}: remaining`);
      }
    });
  });
}
