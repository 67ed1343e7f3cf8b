// format.js - pure helpers of the admin UI: validation that mirrors the
// server's rules, rate conversion and display, durations, the algorithms
// and their limits in words, history diffs.
// No DOM here, so tests/e2e/ui/ui.test.mjs can import it under Node too.

// Policy and app names (server: policy.c).
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const NAME_RULE =
  "use only letters, digits, '.', '_' and '-', starting with a letter or digit (at most 128 characters)";

// The largest integer a browser keeps exactly; int64 fields beyond it would
// be rounded, so the form refuses them rather than send something else.
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

// Rates are entered per second, minute or hour and sent as permits per
// second with 12 decimals: 1/min is 0.016666666667, which the server turns
// back into exactly 1 per minute.
export const RATE_UNITS = [
  { unit: "s", seconds: 1, label: "per second" },
  { unit: "min", seconds: 60, label: "per minute" },
  { unit: "h", seconds: 3600, label: "per hour" },
];
const DISPLAY_UNITS = [...RATE_UNITS, { unit: "day", seconds: 86400, label: "per day" }];
export const RATE_DECIMALS = 12;

export function validateName(s) {
  if (s === "") return "name: required";
  if (s.length > 128) return `name: at most 128 characters (this one has ${s.length})`;
  if (!NAME_RE.test(s)) return `name: ${NAME_RULE}`;
  return "";
}

// "checkout, billing  search" → ["checkout", "billing", "search"]; "*" = any app.
export function parseApps(s) {
  const parts = String(s).split(/[\s,]+/).filter((p) => p !== "");
  if (parts.length === 0) return { apps: [], error: "apps: at least one app name, or * for any app" };
  const seen = new Set();
  const apps = [];
  for (const p of parts) {
    if (p !== "*" && !NAME_RE.test(p)) {
      return { apps: [], error: `apps: "${p}" is not a valid app name: ${NAME_RULE}; or * for any app` };
    }
    if (!seen.has(p)) {
      seen.add(p);
      apps.push(p);
    }
  }
  return { apps, error: "" };
}

export function parseMaxPermits(s) {
  const t = String(s).trim();
  if (t === "") return { value: "", error: "max_permits: required (a whole number, at least 1)" };
  if (!/^\d+$/.test(t)) return { value: "", error: "max_permits: must be a whole number, at least 1" };
  const n = Number(t);
  if (n < 1) return { value: "", error: "max_permits: must be at least 1" };
  if (n > MAX_SAFE) return { value: "", error: `max_permits: at most ${MAX_SAFE}` };
  return { value: String(n), error: "" };
}

export const DESCRIPTION_MAX = 1024;

export function validateDescription(s) {
  const n = [...String(s)].length;
  return n > DESCRIPTION_MAX ? `description: ${n} characters, the limit is ${DESCRIPTION_MAX}` : "";
}

// Decimal text with at most `decimals` decimals and no trailing zeros.
export function decimalText(x, decimals = RATE_DECIMALS) {
  let s = x.toFixed(decimals);
  if (s.includes(".")) s = s.replace(/0+$/, "").replace(/\.$/, "");
  return s;
}

// value (text as typed) per unit ("s", "min", "h") → permits per second as text.
export function rateToPerSecond(value, unit) {
  const t = String(value).trim();
  const u = RATE_UNITS.find((x) => x.unit === unit);
  if (!u) return { rate: "", error: "rate: choose per second, per minute or per hour" };
  if (t === "") return { rate: "", error: "rate: required (a number greater than 0)" };
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(t)) return { rate: "", error: "rate: must be a number greater than 0, e.g. 2 or 0.5" };
  const v = Number(t);
  if (!(v > 0)) return { rate: "", error: "rate: must be greater than 0" };
  if (v / u.seconds >= 1e15) return { rate: "", error: "rate: too large" };
  const rate = decimalText(v / u.seconds);
  if (Number(rate) === 0) {
    return { rate: "", error: `rate: too small: at least 0.${"0".repeat(RATE_DECIMALS - 1)}1 permits per second` };
  }
  return { rate, error: "" };
}

function nearInteger(v) {
  return Math.abs(v - Math.round(v)) <= 1e-6 * Math.max(1, Math.abs(v));
}

// 1234.5 → "1,234.5"; at most maxDecimals decimals (3), rounded half away
// from zero on the number's shortest decimal form, as Intl.NumberFormat
// ("en-US") rounds it. Written out rather than Intl's: a page's first
// Intl.NumberFormat loads ICU's data, 30-60 ms in Chromium before the
// policy list can show a number.
export function formatNumber(v, maxDecimals = 3) {
  if (!Number.isFinite(v)) return String(v);
  const x = Number(v.toPrecision(12));
  if (Math.abs(x) >= 1e21) return String(x);
  let [int, frac = ""] = plainDecimal(Math.abs(x)).split(".");
  if (frac.length > maxDecimals) {
    const up = frac.charCodeAt(maxDecimals) >= 53; // the first digit dropped is 5 or more
    frac = frac.slice(0, maxDecimals);
    if (up) [int, frac] = roundUp(int, frac);
  }
  frac = frac.replace(/0+$/, "");
  const grouped = int.replace(/\B(?=(\d{3})+$)/g, ",");
  const text = frac ? `${grouped}.${frac}` : grouped;
  return x < 0 && /[1-9]/.test(text) ? `-${text}` : text;
}

// A non-negative number below 1e21 in plain decimal digits ("1e-7" → "0.0000001").
function plainDecimal(x) {
  const s = String(x);
  const e = s.indexOf("e");
  if (e < 0) return s;
  const exp = Number(s.slice(e + 1));
  const digits = s.slice(0, e).replace(".", "");
  return exp < 0 ? `0.${"0".repeat(-exp - 1)}${digits}` : digits + "0".repeat(exp - digits.length + 1);
}

// int.frac plus one unit of frac's last digit (or of int when frac is empty).
function roundUp(int, frac) {
  const all = (int + frac).split("");
  let i = all.length - 1;
  while (i >= 0 && all[i] === "9") all[i--] = "0";
  if (i < 0) all.unshift("1");
  else all[i] = String(Number(all[i]) + 1);
  const cut = all.length - frac.length;
  return [all.slice(0, cut).join(""), all.slice(cut).join("")];
}

// The unit a person would say a rate in: "50 / s", "0.5 / s", "2 / min", "1 / h".
// Returns { value, unit, text }; unit is one of s, min, h, day.
export function describeRate(rateText) {
  const r = Number(rateText);
  if (rateText === undefined || rateText === null || rateText === "" || !Number.isFinite(r) || r <= 0) {
    return { value: NaN, unit: "", text: rateText ? String(rateText) : "—" };
  }
  const mk = (v, unit) => ({ value: v, unit, text: `${formatNumber(v)} / ${unit}` });
  // Whole per-second rates, and short fractions of one such as 0.5, read best per second.
  if (r >= 1 || nearInteger(r * 10)) return mk(nearInteger(r) ? Math.round(r) : r, "s");
  for (const u of DISPLAY_UNITS.slice(1)) {
    const v = r * u.seconds;
    if (v >= 1 - 1e-9 && nearInteger(v)) return mk(Math.round(v), u.unit);
  }
  for (const u of DISPLAY_UNITS.slice(1)) {
    const v = r * u.seconds;
    if (v >= 1) return mk(v, u.unit);
  }
  return mk(r * 86400, "day");
}

// For the edit form: the unit and the number to show for a stored rate.
// Prefers the unit describeRate picked when the number converts back to the
// same 12-decimal rate; otherwise per second with the stored text.
export function rateForEditing(rateText) {
  const d = describeRate(rateText);
  if (!Number.isFinite(d.value)) return { value: rateText ? String(rateText) : "", unit: "s" };
  const candidates = d.unit === "day" ? ["h"] : [d.unit];
  for (const unit of candidates) {
    const u = RATE_UNITS.find((x) => x.unit === unit);
    const v = Number(rateText) * u.seconds;
    const shown = decimalText(v, 9);
    const back = rateToPerSecond(shown, unit);
    if (!back.error && Math.abs(Number(back.rate) - Number(rateText)) <= 1e-12) return { value: shown, unit };
  }
  return { value: String(rateText), unit: "s" };
}

// 0 → "full now"; 1500 → "1.5 s"; 90000 → "1 min 30 s"; 7200000 → "2 h".
export function formatDuration(ms) {
  ms = Math.round(Number(ms) || 0);
  if (ms <= 0) return "0 s";
  if (ms < 1000) return `${Math.ceil(ms)} ms`;
  const s = ms / 1000;
  if (s < 10) return `${formatNumber(Math.ceil(s * 10) / 10, 1)} s`;
  let total = Math.ceil(s);
  const d = Math.floor(total / 86400); total -= d * 86400;
  const h = Math.floor(total / 3600); total -= h * 3600;
  const m = Math.floor(total / 60); total -= m * 60;
  const parts = [];
  if (d) parts.push(`${d} d`);
  if (h) parts.push(`${h} h`);
  if (m && !d) parts.push(`${m} min`);
  if (total && !d && !h) parts.push(`${total} s`);
  return parts.join(" ");
}

// Tokens as shown in a gauge: never rounded up (that would promise a permit
// that is not there).
export function formatTokens(tokens) {
  const t = Math.max(0, Number(tokens) || 0);
  if (t >= 100) return formatNumber(Math.floor(t), 0);
  return formatNumber(Math.floor(t * 10) / 10, 1);
}

export function relativeTime(date, now = Date.now()) {
  const t = date instanceof Date ? date.getTime() : Date.parse(date);
  if (!Number.isFinite(t)) return "";
  const s = Math.round((now - t) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.floor(h / 24)} days ago`;
}

// "2024-05-01T12:03:04Z" → "2024-05-01 14:03:04" in the browser's time zone.
// A <time>'s attributes for a server time ("2026-11-28 14:20:01.123456"):
// datetime in ISO form (milliseconds at most) and a title in words a reader
// can use (issue 40: the microseconds were shown as they came).
export function timeAttrs(text) {
  const t = Date.parse(text);
  if (!Number.isFinite(t)) return { datetime: null, title: null };
  const d = new Date(t);
  return { datetime: d.toISOString(), title: `${formatTimestamp(text)} (${d.toUTCString().replace("GMT", "UTC")})` };
}

export function formatTimestamp(text) {
  const t = Date.parse(text);
  if (!Number.isFinite(t)) return text ? String(text) : "—";
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// Server messages start with the field they are about:
// "max_permits: 0 is less than 1" → "max_permits". Also accepts
// "policy.max_permits:" and the JSON names (maxPermits).
// Also 'window "2x" is no duration: ...' (policy_parse_duration names the
// field, then the value in quotes).
const FIELD_ALIASES = {
  name: "name", apps: "apps", max_permits: "max_permits", maxpermits: "max_permits",
  rate: "rate", description: "description", failure_mode: "failure_mode",
  failuremode: "failure_mode", enabled: "enabled", version: "version", colocate: "colocate", shadow: "shadow",
  algorithm: "algorithm", window: "window", calendar: "window", window_ms: "window",
  lease_ttl: "lease_ttl", leasettl: "lease_ttl", lease_ms: "lease_ttl",
};
export function fieldOfMessage(message) {
  const m = /^\s*(?:policy\.)?([A-Za-z_]+)(?:\[\d+\])?\s*(?::|")/.exec(String(message || ""));
  if (!m) return null;
  return FIELD_ALIASES[m[1].toLowerCase()] ?? null;
}

// ---- algorithms (issue 20)

// A policy's algorithm, as the admin API names it ("" or absent: the token
// bucket, every policy written before there was a choice). `windowed`: it
// takes a window; `calendar`: the window may be a calendar unit instead.
export const ALGORITHMS = [
  { id: "token_bucket", label: "Token bucket", windowed: false,
    hint: "Bursts of up to max permits, refilled at a steady rate. The default." },
  { id: "fixed_window", label: "Fixed window", windowed: true, calendar: true,
    hint: "At most max permits per window; the count starts again with each window. Windows may follow the calendar (UTC), for quotas such as 10,000 a month." },
  { id: "sliding_window", label: "Sliding window", windowed: true,
    hint: "At most about max permits in any window: the previous window's count, weighted by how much of it is still within the window, plus the current one's. Two counters per key." },
  { id: "sliding_log", label: "Sliding log", windowed: true,
    hint: `Exactly at most max permits in any interval of the window: every permit taken is logged until it is older than the window (so max permits is at most 10,000).` },
  { id: "concurrency", label: "Concurrency", windowed: false,
    hint: "At most max permits held at once. Each Acquire takes a lease that the caller releases; a lease not released expires after the lease time-to-live." },
];
export const DEFAULT_ALGORITHM = "token_bucket";

// The log keeps one entry per permit (server: POLICY_LOG_MAX_PERMITS).
export const LOG_MAX_PERMITS = 10000;

// A concurrency policy created without a lease time-to-live gets this one.
export const DEFAULT_LEASE_TTL = "30s";

export function algorithmOf(p) {
  return (p && p.algorithm) || DEFAULT_ALGORITHM;
}

export function algorithmInfo(id) {
  return ALGORITHMS.find((a) => a.id === (id || DEFAULT_ALGORITHM)) ??
    { id, label: String(id), windowed: false, hint: "" };
}

// Durations as the server writes them: a whole number and one of these
// units (policy_format_duration picks the largest unit that holds it whole).
export const DURATION_UNITS = [
  { unit: "ms", ms: 1, label: "milliseconds", one: "millisecond" },
  { unit: "s", ms: 1000, label: "seconds", one: "second" },
  { unit: "m", ms: 60000, label: "minutes", one: "minute" },
  { unit: "h", ms: 3600000, label: "hours", one: "hour" },
  { unit: "d", ms: 86400000, label: "days", one: "day" },
];

// A fixed window may align to the calendar in UTC instead of a duration.
export const CALENDAR_UNITS = [
  { unit: "minute", label: "calendar minute", resets: "at :00 every minute" },
  { unit: "hour", label: "calendar hour", resets: "at :00 every hour (UTC)" },
  { unit: "day", label: "calendar day", resets: "at 00:00 UTC every day" },
  { unit: "month", label: "calendar month", resets: "at 00:00 UTC on the 1st of every month" },
];

// The longest window or lease time-to-live the server takes; the form
// leaves that check to the server, whose message is shown at the field.
// value (text as typed) and unit (a DURATION_UNITS or, for a window of a
// fixed window, a CALENDAR_UNITS unit) → the text to send ("90s",
// "month"), or an error that starts with the field's name.
export function durationToSend(field, value, unit) {
  if (CALENDAR_UNITS.some((c) => c.unit === unit)) return { text: unit, error: "" };
  const u = DURATION_UNITS.find((x) => x.unit === unit);
  if (!u) return { text: "", error: `${field}: choose a unit` };
  const t = String(value).trim();
  if (t === "") return { text: "", error: `${field}: required (a whole number and a unit, e.g. 1 minute)` };
  if (!/^\d+$/.test(t)) return { text: "", error: `${field}: "${t}" is not a whole number of ${u.label}` };
  const n = Number(t);
  if (n < 1) return { text: "", error: `${field}: must be at least 1 ${u.one}` };
  if (t.length > 12) return { text: "", error: `${field}: ${t} ${u.label} is too long` };
  return { text: `${n}${u.unit}`, error: "" };
}

// "90s" → { ms: 90000, calendar: "" }; "month" → { ms: 0, calendar: "month" };
// anything else → null.
export function parseDuration(text) {
  const t = String(text ?? "");
  if (CALENDAR_UNITS.some((c) => c.unit === t)) return { ms: 0, calendar: t };
  const m = /^(\d{1,12})(ms|s|m|h|d)$/.exec(t);
  if (!m) return null;
  const u = DURATION_UNITS.find((x) => x.unit === m[2]);
  return { ms: Number(m[1]) * u.ms, calendar: "" };
}

// For the edit form: the number and unit to show for a stored duration.
export function durationForEditing(text, fallbackUnit = "s") {
  const d = parseDuration(text);
  if (!d) return { value: text ? String(text) : "", unit: fallbackUnit };
  if (d.calendar) return { value: "1", unit: d.calendar };
  const units = [...DURATION_UNITS].reverse();
  const u = units.find((x) => d.ms % x.ms === 0);
  return { value: String(d.ms / u.ms), unit: u.unit };
}

// 60000 → "1 minute", 90000 → "90 seconds", 250 → "250 milliseconds":
// in the largest unit that holds it whole, as the server writes it.
// Before a noun (adjective): "90 second window".
export function durationWords(ms, adjective = false) {
  ms = Math.round(Number(ms) || 0);
  if (ms <= 0) return "0 seconds";
  const u = [...DURATION_UNITS].reverse().find((x) => ms % x.ms === 0);
  const n = ms / u.ms;
  return `${formatNumber(n, 0)} ${n === 1 || adjective ? u.one : u.label}`;
}

// A window of `ms` counted from the Unix epoch (as the server counts it):
// when it starts again, in words.
function windowResets(ms) {
  const DAY = 86400000;
  if (ms === 60000) return "at :00 every minute";
  if (ms === 3600000) return "at :00 every hour (UTC)";
  if (ms === DAY) return "at 00:00 UTC every day";
  if (ms % DAY === 0) return `at 00:00 UTC every ${durationWords(ms)} (counted from 1 January 1970)`;
  if (DAY % ms === 0 && ms >= 1000) return `every ${durationWords(ms)}, on the clock (counted from 00:00 UTC)`;
  return `every ${durationWords(ms)} (windows counted from 1 January 1970 UTC, the same for every key)`;
}

const RATE_UNIT_WORDS = { s: "second", min: "minute", h: "hour", day: "day" };

// What a policy's limits mean, in one sentence, for the form and the
// policy page: "At most 100 per 1 minute window, resetting at :00 every
// minute." Fields as the admin API names them in JSON (maxPermits, rate,
// window, leaseTtl); an unset or unreadable one is said so, not guessed.
export function describeLimits(p) {
  const alg = algorithmOf(p);
  const max = Number(p.maxPermits);
  const n = Number.isFinite(max) && max >= 1 ? formatNumber(max, 0) : "…";
  const w = parseDuration(p.window);
  const wWords = w && !w.calendar ? durationWords(w.ms) : "";
  switch (alg) {
    case "token_bucket": {
      const r = describeRate(p.rate);
      if (!Number.isFinite(r.value)) return `Bursts of up to ${n} permits, refilled at a rate still to be set.`;
      const full = Number.isFinite(max) && max >= 1 ? `; empty to full in ${formatDuration((max / Number(p.rate)) * 1000)}` : "";
      return `Bursts of up to ${n} permits, refilled at ${formatNumber(r.value)} per ${RATE_UNIT_WORDS[r.unit]}${full}.`;
    }
    case "fixed_window":
      if (w && w.calendar) {
        const c = CALENDAR_UNITS.find((x) => x.unit === w.calendar);
        return `At most ${n} per ${c.label} (UTC), resetting ${c.resets}.`;
      }
      if (!w) return `At most ${n} per window of a length still to be set.`;
      return `At most ${n} per ${durationWords(w.ms, true)} window, resetting ${windowResets(w.ms)}.`;
    case "sliding_window":
      if (!w || w.calendar) return `At most about ${n} in any window of a length still to be set.`;
      return `At most about ${n} in any ${wWords}: the previous ${durationWords(w.ms, true)} window's count, weighted by how much of it is still within the last ${wWords}, plus the current window's.`;
    case "sliding_log":
      if (!w || w.calendar) return `At most ${n} in any window of a length still to be set.`;
      return `At most ${n} in any ${wWords}, exactly: each permit taken counts until it is ${wWords} old.`;
    case "concurrency": {
      const l = parseDuration(p.leaseTtl || DEFAULT_LEASE_TTL);
      const ttl = l && !l.calendar ? durationWords(l.ms) : "a time still to be set";
      return `At most ${n} held at once; a lease not released expires after ${ttl}.`;
    }
    default:
      return `Algorithm ${alg}: this page does not know it yet.`;
  }
}

// The limits in a few words, for the policies table: "2 / min",
// "100 / 1 minute window", "10 held at once".
export function limitsShort(p) {
  const alg = algorithmOf(p);
  const n = formatNumber(Number(p.maxPermits ?? 0), 0);
  const w = parseDuration(p.window);
  const per = !w ? "?" : w.calendar ? CALENDAR_UNITS.find((x) => x.unit === w.calendar).label : durationWords(w.ms);
  switch (alg) {
    case "token_bucket": return describeRate(p.rate).text;
    case "fixed_window": return w && !w.calendar ? `${n} / ${durationWords(w.ms, true)} window` : `${n} / ${per}`;
    case "sliding_window": return `~${n} / ${per}, sliding`;
    case "sliding_log": return `${n} in any ${per}`;
    case "concurrency": return `${n} held at once`;
    default: return String(alg);
  }
}

// The live state of one bucket as the inspector API answers it (remaining,
// limit, reset_after_ms, tokens), in words that fit the algorithm:
// { level: the gauge's value, summary: one sentence, said: what a screen
// reader is told once when a bucket is inspected, rows: [{ id, label,
// text }] } (id: a name for the row that stays when its words change).
// A later inspector extension (the log's events, the leases held) adds its
// own parts beside these; this keeps to what every algorithm answers.
export function describeBucket(alg, b) {
  const limit = Number(b.limit ?? 0);
  const remaining = Math.max(0, Number(b.remaining ?? 0));
  const reset = Number(b.resetAfterMs ?? 0);
  const of = (x) => `${formatNumber(x, 0)} of ${formatNumber(limit, 0)}`;
  switch (alg || DEFAULT_ALGORITHM) {
    case "token_bucket": {
      const tokens = Number(b.tokens ?? 0);
      return {
        level: tokens,
        summary: reset > 0 ? `${formatNumber(tokens, 3)} tokens · full again in ${formatDuration(reset)}` : "Full",
        said: `${of(remaining)} permits available`,
        rows: rows(["tokens", "Tokens now", formatNumber(tokens, 3)], ["remaining", "Whole permits", of(remaining)],
          ["full", "Full again", reset > 0 ? `in ${formatDuration(reset)}` : "now (full)"]),
      };
    }
    case "fixed_window":
    case "sliding_window":
    case "sliding_log": {
      const word = alg === "sliding_log" ? "Nothing logged any more" : "Count clear";
      const when = reset > 0 ? `resets in ${formatDuration(reset)}` : "nothing counted";
      const where = alg === "fixed_window" ? "in this window" : "now";
      return {
        level: remaining,
        summary: `${of(remaining)} left ${where}, ${when}`,
        rows: rows(["remaining", "Left now", of(remaining)], ["taken", "Taken", formatNumber(Math.max(0, limit - remaining), 0)],
          ["full", word, reset > 0 ? `in ${formatDuration(reset)}` : "now"]),
      };
    }
    case "concurrency": {
      const held = Math.max(0, limit - remaining);
      return {
        level: remaining,
        summary: `${of(held)} held`,
        rows: rows(["held", "Held", of(held)], ["remaining", "Free", formatNumber(remaining, 0)],
          ["full", "All free", reset > 0 ? `in ${formatDuration(reset)} at the latest` : "now (none held)"]),
      };
    }
    default:
      return { level: remaining, summary: `${of(remaining)} left`, rows: rows(["remaining", "Left now", of(remaining)]) };
  }
}
const rows = (...r) => r.map(([id, label, text]) => ({ id, label, text }));

// ---- history

function snakeCase(k) {
  return k.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}

// Fields that change on every write or never change: shown in the entry's
// header, not as a diff row.
// The words the history and the audit use for a field (issue 40: they showed
// the audit JSON's names, window_ms, colocate 0).
const FIELD_LABELS = {
  name: "Name", apps: "Apps", algorithm: "Algorithm", max_permits: "Max permits", rate: "Rate",
  window: "Window", window_ms: "Window", calendar: "Calendar window", lease_ttl: "Lease time-to-live",
  lease_ms: "Lease time-to-live", failure_mode: "When Redis is unreachable", enabled: "Enabled",
  shadow: "Shadow mode", colocate: "Keep all buckets together", description: "Description",
  removed_envoy_descriptors: "Envoy descriptors deleted with it",
  // An override's (issue 37) and an Envoy descriptor's audit rows.
  match_kind: "Matches", match_value: "Match", action: "Does", expires_at: "Expires",
  domain: "Domain", descriptor: "Descriptor", key_entry: "Key entry",
  allow_limit_override: "Honours the descriptor's own limit",
  // Reservations (0015) and local leases (0016): in every policy row since 0019.
  reserve_ttl_ms: "Longest reservation", debt_floor: "Debt floor",
  reserve_expiry: "An expired reservation's estimate", local_lease: "Local leases",
  local_lease_permits: "Permits a local lease takes",
};
export function fieldLabel(field) {
  const l = FIELD_LABELS[field] || field.replace(/_/g, " ");
  return l[0].toUpperCase() + l.slice(1);
}
const META_FIELDS = new Set(["version", "created_at", "updated_at", "created_by", "updated_by", "id", "policy_id"]);
const FIELD_ORDER = ["name", "domain", "descriptor", "policy", "key_entry", "match_kind", "match_value", "action",
  "apps", "algorithm", "max_permits", "rate", "window", "window_ms", "calendar",
  "lease_ttl", "lease_ms", "failure_mode", "enabled", "shadow", "colocate", "reserve_ttl_ms",
  "debt_floor", "reserve_expiry", "local_lease", "local_lease_permits", "description"];

function parsePolicyJson(text) {
  if (text === undefined || text === null || text === "") return { value: null, error: false };
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const out = {};
      for (const [k, x] of Object.entries(v)) out[snakeCase(k)] = x;
      return { value: out, error: false };
    }
    return { value: null, error: true };
  } catch {
    return { value: null, error: true };
  }
}

// The audit JSON keeps apps as one comma-separated string ("a,b"); the
// API as a list. Both become a list.
function normalize(field, v) {
  if (field === "apps" && typeof v === "string") return v.split(",").map((x) => x.trim()).filter((x) => x !== "");
  return v;
}

const OVERRIDE_MATCH = { key: "the exact key", prefix: "keys starting with", app: "the app" };
const OVERRIDE_ACTION = { limit: "other limits", block: "blocks every call", exempt: "exempts (always allowed)" };

// An override's match as the audit gives it ("key alice", "prefix
// premium_", "app billing") in words: "key alice", "prefix premium_*",
// "app billing".
export function overrideMatchWords(kp) {
  const sp = kp.indexOf(" ");
  if (sp < 0) return kp;
  const kind = kp.slice(0, sp);
  const value = kp.slice(sp + 1);
  return kind === "prefix" ? `prefix ${value}*` : `${kind} ${value}`;
}

export function formatFieldValue(field, v) {
  v = normalize(field, v);
  if ((field === "local_lease" || field === "local_lease_permits") && (v === undefined || v === null))
    return "as the instance's setting";
  if (v === undefined || v === null) return field === "expires_at" ? "never" : "—";
  // A delete's Envoy descriptors, whole in its audit row (DeletePolicy's remove_references).
  if (field === "removed_envoy_descriptors" && Array.isArray(v)) {
    return v.map((d) => `${d.domain}/${d.descriptor}${d.key_entry ? ` (key ${d.key_entry})` : ""}`).join(", ");
  }
  if (Array.isArray(v)) return v.length ? v.map(String).join(", ") : "(none)";
  if (field === "match_kind") return OVERRIDE_MATCH[v] || String(v);
  if (field === "action" && OVERRIDE_ACTION[v]) return OVERRIDE_ACTION[v];
  if (field === "expires_at") return v === "" ? "never" : String(v);
  if (field === "enabled" || field === "shadow" || field === "colocate" || field === "allow_limit_override") {
    if (v === true || v === 1 || v === "1" || v === "true") return "yes";
    if (v === false || v === 0 || v === "0" || v === "false") return "no";
  }
  if (field === "rate") {
    const d = describeRate(String(v));
    if (!Number.isFinite(d.value)) return String(v);
    return d.unit === "s" ? d.text : `${d.text} (${v} / s)`;
  }
  if (field === "reserve_expiry" && (v === "keep" || v === "refund")) return v === "keep" ? "kept" : "refunded";
  if (field === "reserve_ttl_ms" && Number(v) > 0) return durationWords(Number(v));
  if ((field === "window_ms" || field === "lease_ms") && Number(v) > 0) return durationWords(Number(v));
  if ((field === "window_ms" || field === "lease_ms") && Number(v) === 0) return "none";
  if (field === "algorithm") return ALGORITHMS.find((a) => a.id === v)?.label || String(v);
  if (field === "failure_mode" && (v === "open" || v === "closed")) return v === "open" ? "fail open" : "fail closed";
  if (field === "calendar" && v === "") return "none";
  if (field === "description" && v === "") return "(empty)";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function comparable(field, v) {
  // An audit row from before shadow mode (issue 23) has no shadow: off.
  if (field === "shadow" || field === "colocate") return formatFieldValue(field, v ?? 0);
  v = normalize(field, v);
  if (v === undefined || v === null) return "";
  if (Array.isArray(v)) return JSON.stringify(v.map(String).sort());
  if (field === "enabled") return formatFieldValue(field, v);
  if (field === "rate" || field === "max_permits") return String(Number(v));
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

// One history entry → rows { field, old, new } of what changed, formatted
// for display, plus the versions and whether the JSON could be read.
export function diffChange(change) {
  const action = change.action || "update";
  const o = parsePolicyJson(change.oldValue);
  const n = parsePolicyJson(change.newValue);
  const oldV = o.value || {};
  const newV = n.value || {};
  const keys = new Set([...Object.keys(oldV), ...Object.keys(newV)]);
  const fields = [...FIELD_ORDER.filter((k) => keys.has(k)), ...[...keys].filter((k) => !FIELD_ORDER.includes(k)).sort()]
    .filter((k) => !META_FIELDS.has(k));
  const rows = [];
  for (const f of fields) {
    const a = oldV[f];
    const b = newV[f];
    if (action === "update" && comparable(f, a) === comparable(f, b)) continue;
    rows.push({
      field: f,
      label: fieldLabel(f),
      old: o.value ? formatFieldValue(f, a) : "",
      new: n.value ? formatFieldValue(f, b) : "",
    });
  }
  return {
    action,
    rows,
    fromVersion: oldV.version !== undefined ? String(oldV.version) : "",
    toVersion: newV.version !== undefined ? String(newV.version) : "",
    unreadable: o.error || n.error,
  };
}
