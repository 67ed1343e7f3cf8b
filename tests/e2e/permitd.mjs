// What every end-to-end suite does with a real permitd, in one place: the
// Connect and gRPC suites beside this file (acquire, grpc, grpc-tls,
// grpc-limits, envoy) and the admin UI's harness (ui/harness.mjs) all read
// the environment ctest sets, take free ports, start the binary with its
// output kept, wait until it answers, stop it with SIGTERM (SIGKILL after a
// grace period), read its /metrics, and print its output when a step
// failed. Each suite then states only its own flags, readiness check and
// steps, instead of carrying a copy of this.
//
// Node built-ins only: ui/ has its own node_modules and imports this file
// without this directory's npm packages (gRPC's proto loading is proto.mjs).
import { it } from "node:test";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

// The variable's value; if it is not set, an error naming it and how the
// suite is meant to be run (hint, e.g. "run it under ctest: e2e_grpc").
export function requireEnv(name, hint) {
  const v = process.env[name];
  if (!v) throw new Error(`environment variable ${name} is not set (${hint})`);
  return v;
}

// A TCP port on 127.0.0.1 that nothing listens on now.
export function freePort() {
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

// Free ports for the API, admin and gRPC listeners, and the flags that put
// permitd on them: { ports: { apiPort, adminPort, grpcPort }, args }.
export async function listeners() {
  const [apiPort, grpcPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  return {
    ports: { apiPort, adminPort, grpcPort },
    args: ["--listen", `127.0.0.1:${apiPort}`, "--admin-listen", `127.0.0.1:${adminPort}`,
      "--grpc-listen", `127.0.0.1:${grpcPort}`],
  };
}

// redis-cli against the stack's Redis ($PERMITD_TEST_REDIS_PORT): its
// answer, trimmed.
export function redisCli(...args) {
  const port = requireEnv("PERMITD_TEST_REDIS_PORT", "run the suite under ctest");
  return execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], { encoding: "utf8" }).trim();
}

// MariaDB for the suites that keep policies there (envoy, grpc-allocs):
// the mariadb client's arguments for url (root over its socket, or TCP)
// at database ("" for none), a statement run that way (its output,
// trimmed; an error with mariadb's message), and the URL of database db on
// that server for permitd's --mysql-url.
export function mysqlArgs(url, database) {
  const u = new URL(url);
  const args = ["--no-defaults", "--batch", "--skip-column-names", "-u", decodeURIComponent(u.username)];
  const socket = u.searchParams.get("socket");
  if (socket) args.push("--protocol=socket", `--socket=${socket}`);
  else args.push("--protocol=tcp", "-h", u.hostname, "-P", u.port || "3306");
  if (database) args.push("-D", database);
  return args;
}

export function mariadb(url, text, database) {
  const r = spawnSync("mariadb", mysqlArgs(url, database), { input: text, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`mariadb: ${r.stderr}`);
  return r.stdout.trim();
}

export function databaseUrl(url, db) {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

// Writes policy name straight into Redis in the documented layout, for the
// suites without MySQL: HSET <prefix>{<name>}:policy name … apps …
// max_permits … rate … version 1 enabled 1, then the pairs of more
// (e.g. ["shadow", "1"]). Returns redis-cli's answer.
export function putRedisPolicy(prefix, name, { apps, maxPermits, rate, more = [] }) {
  return redisCli("HSET", `${prefix}{${name}}:policy`, "name", name, "apps", apps,
    "max_permits", String(maxPermits), "rate", String(rate), "version", "1", "enabled", "1", ...more);
}

// Starts $PERMITD_BIN with args. Returns the server: { child, args, output
// (stdout and stderr, in order), exit (a promise of { code, signal }),
// exited (null until then) } plus the fields of ports (e.g. { apiPort,
// adminPort, grpcPort }), for the steps to reach it. Wait for it with
// waitReady(), end it with stopPermitd(). env: variables added to this
// process's for the server (e.g. an LD_PRELOAD). Redis's timeout is 1 s
// unless args or env set one: the production default (50 ms) is about
// latency, and a loaded machine running tests side by side answered a
// warmed-up Acquire 503 under it (issue 33; tests/integration's harness does
// the same).
export function spawnPermitd(args, ports = {}, env = {}) {
  const bin = requireEnv("PERMITD_BIN", "run the suite under ctest");
  if (!args.includes("--redis-timeout-ms") && !("PERMITD_REDIS_TIMEOUT_MS" in env) &&
      !args.some((a) => String(a).startsWith("--redis-timeout-ms="))) {
    args = [...args, "--redis-timeout-ms", "1000"];
  }
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  const output = [];
  child.stdout.setEncoding("utf8").on("data", (d) => output.push(d));
  child.stderr.setEncoding("utf8").on("data", (d) => output.push(d));
  const srv = { ...ports, child, args, output, exited: null };
  srv.exit = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve((srv.exited = { code, signal })));
    child.on("error", (err) => {
      output.push(`spawn error: ${err.message}\n`);
      resolve((srv.exited = { code: null, signal: null, error: err.message }));
    });
  });
  return srv;
}

// The server's output, its last 64 KiB, for a message.
export function serverOutput(srv) {
  if (!srv) return "(permitd not started)";
  const text = srv.output.join("");
  return (text.length > 65536 ? "…" + text.slice(-65536) : text) || "(no output)";
}

function command(srv) {
  return `command: ${process.env.PERMITD_BIN} ${srv.args.join(" ")}\n--- permitd output ---\n${serverOutput(srv)}`;
}

// Asks probe() every 100 ms until it answers true, for at most ms; what
// says in words what probe checks ("its gRPC port 4711 open"). probe may
// answer (or throw) anything else: the last such answer is in the error.
// Fails at once, with the server's output, when the server exits.
export async function waitReady(srv, what, probe, ms) {
  const deadline = Date.now() + ms;
  let last = "no attempt";
  while (Date.now() < deadline) {
    if (srv.exited) throw new Error(`permitd exited before it was ready (${what}): ${JSON.stringify(srv.exited)}\n${command(srv)}`);
    try {
      const ok = await probe();
      if (ok === true) return;
      last = String(ok);
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    await sleep(100);
  }
  throw new Error(`permitd was not ready (${what}) within ${ms / 1000} s (last: ${last})\n${command(srv)}`);
}

// Probes for waitReady(): a GET of url answered 200; a TCP connection to
// port accepted.
export function httpOk(url) {
  return async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.status === 200 || `HTTP ${res.status}`;
  };
}

export function tcpOpen(port) {
  return () => new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => { s.destroy(); resolve(true); });
    s.on("error", (err) => resolve(err.code ?? err.message));
  });
}

// SIGTERM, then SIGKILL when the server has not exited within graceMs.
// Resolves to its exit ({ code, signal }), or null when it had to be
// killed; a server that had already ended answers its exit at once.
export async function stopPermitd(srv, graceMs) {
  if (!srv) return null;
  if (srv.child.exitCode !== null || srv.child.signalCode !== null) return srv.exit;
  srv.child.kill("SIGTERM");
  const res = await Promise.race([srv.exit, sleep(graceMs, null, { ref: false })]);
  if (res === null) {
    srv.child.kill("SIGKILL");
    await srv.exit;
  }
  return res;
}

// The text of the server's /metrics (srv.adminPort), and the value of one
// series (its exact name and labels) in it, or null.
export async function metrics(srv) {
  const r = await fetch(`http://127.0.0.1:${srv.adminPort}/metrics`);
  return r.text();
}

export async function metric(srv, series) {
  for (const line of (await metrics(srv)).split("\n"))
    if (line.startsWith(series + " ")) return Number(line.slice(series.length + 1));
  return null;
}

// Returns step(name, fn[, timeout]): it() that sets state.failed when fn
// throws (after() then prints the server's output), after awaiting
// onFailure(name) (e.g. a screenshot). timeout: the default per step
// (none: node:test's).
export function stepper(state, { timeout, onFailure } = {}) {
  return (name, fn, ms = timeout) => {
    it(name, ms === undefined ? {} : { timeout: ms }, async (t) => {
      try {
        await fn(t);
      } catch (err) {
        state.failed = true;
        if (onFailure) await onFailure(name);
        throw err;
      }
    });
  };
}

// For after(): stops srv (stopPermitd) and says how it ended; state.failed
// is set when it did not exit 0 on SIGTERM, and then, or when a step
// failed, the server's output is printed.
export async function stopAndReport(srv, state, graceMs) {
  if (srv) {
    const res = await stopPermitd(srv, graceMs);
    if (res === null) {
      state.failed = true;
      process.stderr.write(`# permitd did not stop within ${graceMs / 1000} s of SIGTERM\n`);
    } else {
      process.stderr.write(`# permitd stopped on SIGTERM: ${JSON.stringify(res)}\n`);
      if (res.code !== 0) state.failed = true;
    }
  }
  if (state.failed) process.stderr.write(`\n--- permitd output ---\n${serverOutput(srv)}\n--- end ---\n`);
}
