// api.js - Connect unary calls over JSON to the admin RPCs of this origin.

export class RpcError extends Error {
  constructor(code, message, status) {
    super(message || code);
    this.name = "RpcError";
    this.code = code;       // Connect code, or "network" when permitd did not answer
    this.status = status;   // HTTP status, 0 for network errors
  }
}

const STATUS_CODES = {
  400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied",
  404: "not_found", 408: "deadline_exceeded", 409: "aborted", 429: "resource_exhausted",
  499: "canceled", 501: "unimplemented", 502: "unavailable", 503: "unavailable",
  504: "deadline_exceeded",
};

const TIMEOUT_MS = 15000;

// rpc("PolicyService", "ListPolicies", {includeBuckets: true}, {signal})
export async function rpc(service, method, body = {}, { signal } = {}) {
  const timeout = AbortSignal.timeout(TIMEOUT_MS);
  const sig = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let res;
  let text;
  try {
    res = await fetch(`/permit.v1.${service}/${method}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1" },
      body: JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
      signal: sig,
    });
    text = await res.text();
  } catch (err) {
    if (signal?.aborted) throw err;   // the caller gave up: not an error to show
    if (timeout.aborted) throw new RpcError("network", "permitd did not answer within 15 s", 0);
    throw new RpcError("network", "cannot reach permitd", 0);
  }
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const code = (data && typeof data.code === "string" && data.code) || STATUS_CODES[res.status] || "unknown";
    const message = (data && typeof data.message === "string" && data.message) || `HTTP ${res.status}`;
    throw new RpcError(code, message, res.status);
  }
  if (data === null || typeof data !== "object") {
    throw new RpcError("internal", `unexpected reply from ${service}/${method}`, res.status);
  }
  return data;
}

export function isAbort(err) {
  return err && (err.name === "AbortError" || err.name === "TimeoutError") && !(err instanceof RpcError);
}
