// view-instances.js - the Instances page (#/instances, issue 23): every
// permitd instance whose heartbeat is alive in Redis (each writes one every
// --fleet-publish-ms; it expires after --fleet-heartbeat-ttl, 60 s), with
// its address, version, start, threads, requests per second, sync lag, its
// own view of Redis and MySQL and its API connections in use. The instance
// serving this page is marked. Polled like the policy list; while Redis
// does not answer the page says so instead of an empty list (which would
// read as "no instance running"). Below, the rows of MySQL the sync skips
// (a policy or app name that is not valid), each with why: what every
// instance leaves out, fixed in MySQL (ListPolicies' skipped_rows).
import { RpcError } from "./api.js";
import { append, h, replace, setText } from "./dom.js";
import * as fmt from "./format.js";
import { describeError } from "./notices.js";
import { LIST_POLL_MS, poll, pollError } from "./poll.js";
import { FLEET, POLICY, call } from "./session.js";
import { badge, emptyState, errorState, loadingState, pageHead } from "./widgets.js";

// "3 min ago" for a Unix time in seconds.
function ago(unix) {
  const t = Number(unix || 0);
  if (!t) return "—";
  const iso = new Date(t * 1000).toISOString();
  return h("time", { datetime: iso, title: fmt.formatTimestamp(iso) }, fmt.relativeTime(iso) || fmt.formatTimestamp(iso));
}

function lag(ms) {
  const v = Number(ms ?? -1);
  return v < 0 ? h("span", { class: "muted" }, "none yet") : fmt.formatDuration(v);
}

// "ok" as a badge, anything else as the instance said it.
function view(text) {
  if (text === "ok") return badge("OK", "ok");
  if (text === "off") return badge("Off", "muted");
  return h("span", { class: "instance-problem" }, badge("Problem", "danger"), " ", h("span", { class: "break" }, text || "—"));
}

export function instancesView(main) {
  document.title = "Instances · permitd admin";
  const ac = new AbortController();
  const sub = h("p", { class: "page-sub muted", "aria-live": "polite" }, "Loading…");
  const tbody = h("tbody");
  const headers = ["Instance", "Address", "Version", "Started", "Threads", "Requests/s", "Sync lag", "Redis", "MySQL", "Connections", "Last heartbeat"];
  const table = h("table", { class: "policies instances", id: "instances", hidden: true },
    h("caption", { class: "sr-only" }, "permitd instances with a live heartbeat"),
    h("thead", {}, h("tr", {}, headers.map((t, i) => h("th", { scope: "col", class: [4, 5, 9].includes(i) ? "num" : null }, t)))),
    tbody);
  const stateBox = h("div", { class: "table-state" }, loadingState("Loading instances…"));
  // Focusable: a keyboard user scrolls the wide table (nothing in it takes focus).
  const card = h("div", { class: "card table-card" },
    h("div", { class: "table-scroll", tabindex: "0", role: "region", "aria-label": "Instances table" }, table), stateBox);
  const skippedBox = h("div", { id: "skipped-list" }, h("p", { class: "muted small" }, "Loading…"));
  append(main, pageHead(h("h1", { tabindex: "-1" }, "Instances"), sub), card,
    h("section", { class: "card", "aria-labelledby": "skipped-h" },
      h("h2", { id: "skipped-h" }, "Rows of MySQL the sync skips"), skippedBox));
  let loaded = false;

  // An id (host:port@start) may break after ":" and before "@", never
  // inside a part (issue 40: it wrapped mid-token).
  function idParts(id) {
    return id.split(/(?<=:)|(?=@)/).flatMap((part, n) => (n ? [h("wbr"), part] : [part]));
  }

  function row(i) {
    return h("tr", { dataset: { instance: i.id || "" } },
      h("td", { class: "cell-name", "data-label": "Instance" }, h("code", { class: "instance-id" }, idParts(i.id || "")),
        i.self ? h("span", { class: "muted small" }, " ", badge("This one", "ok", "the instance serving this page")) : null),
      h("td", { "data-label": "Address" }, h("span", {}, i.address || "—"),
        i.adminAddress ? h("span", { class: "desc" }, `admin ${i.adminAddress}`) : null),
      h("td", { "data-label": "Version" }, i.version || "—"),
      h("td", { "data-label": "Started" }, ago(i.startedUnix)),
      h("td", { class: "num", "data-label": "Threads" }, fmt.formatNumber(Number(i.threads || 0), 0)),
      h("td", { class: "num", "data-label": "Requests/s" }, fmt.formatNumber(Number(i.requestsPerSecond || 0), 1)),
      h("td", { "data-label": "Sync lag" }, lag(i.syncLagMs)),
      h("td", { "data-label": "Redis" }, view(i.redis)),
      h("td", { "data-label": "MySQL" }, view(i.mysql)),
      h("td", { class: "num", "data-label": "Connections" },
        `${fmt.formatNumber(Number(i.connections || 0), 0)} / ${fmt.formatNumber(Number(i.connectionsMax || 0), 0)}`),
      h("td", { "data-label": "Last heartbeat" }, ago(i.seenUnix)));
  }

  function showSkipped(lines) {
    replace(skippedBox, lines.length === 0
      ? h("p", { class: "muted small" }, "None: every row of MySQL is in use.")
      : [h("p", { class: "small" }, `${lines.length === 1 ? "1 row is" : `${lines.length} rows are`} not in use, on any instance, until fixed in MySQL:`),
        h("ul", { class: "skipped-rows" }, lines.map((l) => h("li", { class: "break" }, l)))]);
  }

  const refresher = poll(async () => {
    // The skipped rows come from MySQL through the sync; Redis down or not.
    call(POLICY, "ListPolicies", { pageSize: 1 }, ac.signal).then((p) => {
      if (!ac.signal.aborted) showSkipped(p.skippedRows || []);
    }, () => {});
    const r = await call(FLEET, "ListInstances", {}, ac.signal);
    if (ac.signal.aborted) return;
    const list = r.instances || [];
    const ttl = Number(r.heartbeatTtlSeconds || 60);
    loaded = true;
    card.classList.remove("stale");
    setText(sub, `${list.length === 1 ? "1 instance" : `${list.length} instances`} with a heartbeat in the last ${fmt.formatDuration(ttl * 1000)} · updates live`);
    if (list.length === 0) {
      table.hidden = true;
      replace(stateBox, emptyState("No instance has a live heartbeat",
        "Every permitd writes one into Redis each second unless it runs with --fleet-publish-ms 0."));
      return;
    }
    table.hidden = false;
    stateBox.replaceChildren();
    tbody.replaceChildren(...list.map(row));
  }, LIST_POLL_MS, ac.signal, (err) => {
    if (err instanceof RpcError && err.code === "unauthenticated") return;
    if (!loaded) {
      table.hidden = true;
      setText(sub, "Could not load the instances");
      replace(stateBox, errorState(`Could not load the instances: ${describeError(err)}`, () => {
        replace(stateBox, loadingState("Loading instances…"));
        refresher.now();
      }));
    } else {
      setText(sub, "Showing the last data received; retrying…");
      card.classList.add("stale");
    }
    pollError(err);
  });

  return { dispose: () => ac.abort() };
}
