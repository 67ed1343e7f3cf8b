// poll.js - live data: runs a fetch now and then at an interval, never two
// at once, paused while the tab is hidden, stopped by an AbortSignal. A
// failure shows in the banner (source "poll") until the next success.
import { RpcError, isAbort } from "./api.js";
import { clearBanner, describeError, showBanner } from "./notices.js";

export const LIST_POLL_MS = 1500;
export const DETAIL_POLL_MS = 2000;

// Runs fn now and then every ms (never two at once) until signal aborts.
// Skips work while the tab is hidden. Returns { now() } to run it at once.
export function poll(fn, ms, signal, onError = pollError) {
  let timer = null;
  let running = false;
  let again = false;
  const tick = async () => {
    clearTimeout(timer);
    if (signal.aborted) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      if (!document.hidden) {
        await fn();
        if (!signal.aborted) clearBanner("poll");
      }
    } catch (err) {
      if (!isAbort(err) && !signal.aborted) onError(err);
    } finally {
      running = false;
    }
    if (signal.aborted) return;
    if (again) {
      again = false;
      tick();
      return;
    }
    timer = setTimeout(tick, ms);
  };
  signal.addEventListener("abort", () => clearTimeout(timer));
  tick();
  return { now: tick };
}

export function pollError(err) {
  if (err instanceof RpcError && err.code === "unauthenticated") return;
  showBanner(`Live data is not updating: ${describeError(err)} Retrying…`, "poll");
}
