// notices.js - what the UI tells the user outside a form: the text of an
// RPC error in words, the banner (one message at a time, remembered by its
// source so that a poll clears only its own) and the short-lived toast.
import { RpcError } from "./api.js";
import { setText } from "./dom.js";
import { ui } from "./page.js";

let bannerSource = null;

export function describeError(err) {
  if (!(err instanceof RpcError)) return String(err?.message || err);
  switch (err.code) {
    case "network":
      return err.message === "cannot reach permitd"
        ? "Cannot reach permitd. Check that it is running."
        : `${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}.`;
    case "unavailable":
      return `permitd's storage (MySQL or Redis) is unavailable: ${err.message}`;
    case "permission_denied":
      return `Not allowed for your account: ${err.message}`;
    case "unauthenticated":
      return "Your session has ended. Sign in again.";
    default:
      return err.message;
  }
}

export function showBanner(text, source = "action") {
  bannerSource = source;
  setText(ui.bannerText, text);
  ui.banner.hidden = false;
}

export function clearBanner(source) {
  if (source === undefined || bannerSource === source) {
    ui.banner.hidden = true;
    bannerSource = null;
  }
}

let toastTimer = null;
export function toast(text) {
  setText(ui.toast, text);
  ui.toast.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => ui.toast.classList.remove("show"), 4000);
}
