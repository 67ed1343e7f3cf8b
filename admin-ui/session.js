// session.js - who is signed in, and call(): the one way the views reach
// the admin RPCs. A call answered unauthenticated while someone is signed in
// means the session ended on the server; call() then hands over to the
// handler set with onSessionExpired() (the login page), so that no view has
// to know about it.
import { rpc, RpcError } from "./api.js";

export const POLICY = "PolicyService";
export const AUTH = "AdminAuthService";
export const APPS = "AppService";
export const FLEET = "FleetService";
export const USERS = "UserService";
export const AUDIT = "AuditService";
export const TRAFFIC = "TrafficService";

export const session = {
  user: null,          // { username, role }
};

let expired = () => {};

// fn() runs when a signed-in call is answered unauthenticated.
export function onSessionExpired(fn) {
  expired = fn;
}

// Roles rank viewer < editor < admin: an admin may do all an editor may.
export const isEditor = () => session.user?.role === "editor" || session.user?.role === "admin";
export const isAdmin = () => session.user?.role === "admin";

export async function call(service, method, body, signal) {
  try {
    return await rpc(service, method, body, { signal });
  } catch (err) {
    if (err instanceof RpcError && err.code === "unauthenticated" && session.user && method !== "Login") {
      expired();
    }
    throw err;
  }
}
