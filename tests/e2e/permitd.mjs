// What an end-to-end suite does with a real permitd, in one place: read
// the environment ctest sets, take free ports, start the binary with its
// output kept, wait until it answers, stop it with SIGTERM (SIGKILL after a
// grace period), and remember a failed step so that its output is printed.
// The admin UI's harness (ui/harness.mjs) builds on it; a suite then states
// only its own flags, readiness check and steps, instead of carrying a copy.
//
// Node built-ins only: ui/ has its own node_modules and imports this file
// without this directory's npm packages.
import { it } from "node:test";
import { spawn } from "node:child_process";
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

// Starts $PERMITD_BIN with args. Returns the server: { child, args, output
// (stdout and stderr, in order), exit (a promise of { code, signal }),
// exited (null until then) } plus the fields of ports (e.g. { apiPort,
// adminPort, grpcPort }), for the steps to reach it. Wait for it with
// waitReady(), end it with stopPermitd().
export function spawnPermitd(args, ports = {}) {
  const bin = requireEnv("PERMITD_BIN", "run the suite under ctest");
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
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

// A probe for waitReady(): a GET of url answered 200.
export function httpOk(url) {
  return async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.status === 200 || `HTTP ${res.status}`;
  };
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
