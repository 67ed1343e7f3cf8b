// The peer permitd is measured against: what most teams would write instead.
// A small Node.js HTTP server on rate-limiter-flexible (RateLimiterRedis over
// ioredis) answering the same question as permitd's JSON Acquire:
//
//   POST /acquire  {"bucket":"hot","app":"bench","key":"user-000042","permits":1}
//   200            {"allowed":true,"remaining":999999,"limit":1000000,
//                   "retryAfterMs":0,"resetAfterMs":...}
//
// Policies come from the same Redis hashes permitd reads
// (<POLICY_PREFIX>{<name>}:policy: max_permits, rate, apps, enabled), read
// once per process and cached (a kindness permitd does not get: it reads the
// policy inside its script on every call). rate-limiter-flexible counts in
// fixed windows, so a policy maps to points = max_permits per
// duration = max_permits / rate seconds. One RateLimiterRedis per policy,
// keys under <PEER_PREFIX><policy>:<key>.
//
// Environment: PORT (required), REDIS_HOST (127.0.0.1), REDIS_PORT (6379),
// POLICY_PREFIX ("b:"), PEER_PREFIX ("peer:"), WORKERS (1: one process;
// N > 1: Node's cluster module, N workers sharing the port).
'use strict';

const cluster = require('node:cluster');
const http = require('node:http');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

const port = Number(process.env.PORT);
const workers = Number(process.env.WORKERS || 1);
const policyPrefix = process.env.POLICY_PREFIX || 'b:';
const peerPrefix = process.env.PEER_PREFIX || 'peer:';
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

if (!Number.isInteger(port) || port <= 0) {
  console.error('peer: PORT must be set');
  process.exit(2);
}

if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on('exit', (w, code, signal) => {
    console.error(`peer: worker ${w.process.pid} exited (${signal || code})`);
  });
  const stop = () => {
    for (const id in cluster.workers) cluster.workers[id].process.kill('SIGTERM');
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  serve();
}

function serve() {
  const redis = new Redis({
    host: process.env.REDIS_HOST || '127.0.0.1',
    port: Number(process.env.REDIS_PORT || 6379),
    enableOfflineQueue: false,   // what rate-limiter-flexible's docs ask for
  });
  redis.on('error', (e) => console.error('peer: redis:', e.message));

  const policies = new Map();   // name -> Promise<{limiter, max, apps} | null>

  function policy(name) {
    let p = policies.get(name);
    if (p === undefined) {
      p = redis.hmget(`${policyPrefix}{${name}}:policy`, 'max_permits', 'rate', 'apps', 'enabled')
        .then(([max, rate, apps, enabled]) => {
          if (max === null) return null;
          const points = Number(max);
          const duration = Math.max(1, Math.round(points / Number(rate)));
          return {
            max: points,
            enabled: enabled !== '0',
            apps: new Set(String(apps).split(',')),
            limiter: new RateLimiterRedis({
              storeClient: redis,
              keyPrefix: peerPrefix + name,
              points,
              duration,
            }),
          };
        });
      p.catch(() => policies.delete(name));
      policies.set(name, p);
    }
    return p;
  }

  function reply(res, status, obj) {
    const body = JSON.stringify(obj);
    res.writeHead(status, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(body),
    });
    res.end(body);
  }

  function error(res, status, code, message) {
    reply(res, status, { code, message });
  }

  async function acquire(res, body) {
    let rq;
    try {
      rq = JSON.parse(body);
    } catch (e) {
      return error(res, 400, 'invalid_argument', 'body is not JSON');
    }
    const { bucket, app } = rq;
    const key = rq.key === undefined ? '' : rq.key;
    const permits = rq.permits === undefined ? 1 : Number(rq.permits) || 1;
    if (typeof bucket !== 'string' || !NAME.test(bucket))
      return error(res, 400, 'invalid_argument', 'bucket: not a policy name');
    if (typeof app !== 'string' || !NAME.test(app))
      return error(res, 400, 'invalid_argument', 'app: not an app name');
    if (typeof key !== 'string' || key.length > 256)
      return error(res, 400, 'invalid_argument', 'key: not a key');
    if (!Number.isInteger(permits) || permits < 0)
      return error(res, 400, 'invalid_argument', 'permits: not a count');

    let pol;
    try {
      pol = await policy(bucket);
    } catch (e) {
      return error(res, 503, 'unavailable', e.message);
    }
    if (pol === null) return error(res, 404, 'not_found', `bucket: no policy named "${bucket}"`);
    if (!pol.enabled) return error(res, 400, 'failed_precondition', 'bucket: policy is disabled');
    if (!pol.apps.has('*') && !pol.apps.has(app))
      return error(res, 403, 'permission_denied', `app: "${app}" may not use "${bucket}"`);
    if (permits > pol.max) return error(res, 400, 'out_of_range', 'permits: more than max_permits');

    try {
      const r = await pol.limiter.consume(key, permits);
      return reply(res, 200, {
        allowed: true,
        remaining: r.remainingPoints,
        limit: pol.max,
        retryAfterMs: 0,
        resetAfterMs: r.msBeforeNext,
      });
    } catch (r) {
      if (r instanceof RateLimiterRes) {
        return reply(res, 200, {
          allowed: false,
          remaining: r.remainingPoints,
          limit: pol.max,
          retryAfterMs: r.msBeforeNext,
          resetAfterMs: r.msBeforeNext,
        });
      }
      return error(res, 503, 'unavailable', String(r && r.message));
    }
  }

  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') return reply(res, 200, { ok: true });
    if (req.method !== 'POST') return error(res, 405, 'unimplemented', 'POST only');
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size <= 65536) chunks.push(c);
    });
    req.on('end', () => {
      if (size > 65536) return error(res, 429, 'resource_exhausted', 'body too large');
      acquire(res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  server.keepAliveTimeout = 30000;

  redis.once('ready', () => {
    server.listen(port, '127.0.0.1');
  });
  process.on('SIGTERM', () => {
    server.close();
    redis.disconnect();
    process.exit(0);
  });
}
