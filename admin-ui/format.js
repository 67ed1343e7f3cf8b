// format.js - pure helpers of the admin UI: validation that mirrors the
// server's rules, rate conversion and display, durations, history diffs.
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

// 1234.5 → "1,234.5"; at most 3 decimals.
export function formatNumber(v, maxDecimals = 3) {
  if (!Number.isFinite(v)) return String(v);
  return Number(v.toPrecision(12)).toLocaleString("en-US", { maximumFractionDigits: maxDecimals });
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
const FIELD_ALIASES = {
  name: "name", apps: "apps", max_permits: "max_permits", maxpermits: "max_permits",
  rate: "rate", description: "description", failure_mode: "failure_mode",
  failuremode: "failure_mode", enabled: "enabled", version: "version", colocate: "colocate",
};
export function fieldOfMessage(message) {
  const m = /^\s*(?:policy\.)?([A-Za-z_]+)(?:\[\d+\])?\s*:/.exec(String(message || ""));
  if (!m) return null;
  return FIELD_ALIASES[m[1].toLowerCase()] ?? null;
}

// ---- history

function snakeCase(k) {
  return k.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}

// Fields that change on every write or never change: shown in the entry's
// header, not as a diff row.
const META_FIELDS = new Set(["version", "created_at", "updated_at", "created_by", "updated_by", "id", "policy_id"]);
const FIELD_ORDER = ["name", "apps", "max_permits", "rate", "failure_mode", "enabled", "colocate", "description"];

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

export function formatFieldValue(field, v) {
  v = normalize(field, v);
  if (v === undefined || v === null) return "—";
  if (Array.isArray(v)) return v.length ? v.map(String).join(", ") : "(none)";
  if (field === "enabled") {
    if (v === true || v === 1 || v === "1" || v === "true") return "yes";
    if (v === false || v === 0 || v === "0" || v === "false") return "no";
  }
  if (field === "rate") {
    const d = describeRate(String(v));
    if (!Number.isFinite(d.value)) return String(v);
    return d.unit === "s" ? d.text : `${d.text} (${v} / s)`;
  }
  if (field === "description" && v === "") return "(empty)";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function comparable(field, v) {
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
