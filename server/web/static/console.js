// The queuebox console: reads /api/overview every second and draws it; says
// "disconnected" as soon as the server stops answering. tube.js has one tube's
// tasks, one task, the operator's actions and the URLs. No library: the DOM is
// built with textContent only, so a task's data can never become markup.
"use strict";

const POLL_MS = 1000;
const ANSWER_MS = 2 * POLL_MS + 500; // no answer for two refreshes: disconnected
const FETCH_TIMEOUT_MS = 10_000; // a hung server must not stop the polling
const FOREVER_S = 3153600000; // ttl/ttr "forever": 100 years, as the module stores it
const CHART = { w: 160, h: 36 };
const $ = (sel) => document.querySelector(sel);
// What the URL names (tube.js) and the open tube's listing: cursors of the pages
// before this one (queuebox.tasks' `next`); `tubeCan`: what the user may do on it.
const view = { tube: null, task: null, state: "", pages: [], after: null, next: null,
  counts: {}, can: {}, tubeCan: {}, type: "" };
const link = { answered: Date.now(), lost: false };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function csrf() {
  const found = document.cookie.split("; ").find((c) => c.startsWith("queuebox_csrf="));
  return found ? decodeURIComponent(found.split("=")[1]) : "";
}

async function api(method, path, body) {
  const options = { method, headers: { "X-CSRF-Token": csrf() }, credentials: "same-origin" };
  if (method === "GET") options.signal = AbortSignal.timeout(FETCH_TIMEOUT_MS);
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const reply = await fetch(path, options);
  if (reply.status === 401) {
    const back = location.pathname + location.search;
    location.href = back === "/" ? "/login" : "/login?next=" + encodeURIComponent(back);
    throw new Error("log in first");
  }
  const text = await reply.text();
  let data;
  try { data = JSON.parse(text); } catch { data = { error: { code: reply.status, message: text } }; }
  if (!reply.ok || data.error) {
    const error = data.error || { code: reply.status, message: reply.statusText };
    const failure = new Error(error.message);
    failure.code = error.code;
    throw failure;
  }
  return data;
}

function say(text, kind = "ok") {
  const message = $("#message");
  message.textContent = text;
  message.className = "message " + kind;
}

function refused(error) {
  say(`Refused: ${error.message}` + (error.code ? ` (error ${error.code})` : ""), "error");
}

function ask(question) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = question;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

// -- formatting --
const fmt = {
  count: (n) => (n === undefined || n === null ? "–" : n.toLocaleString("en")),
  bytes: (n) => {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  },
  seconds: (s) => {
    if (s === null || s === undefined) return "–";
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  },
  time: (t) => (t === null || t === undefined ? "never" : new Date(t * 1000).toLocaleString()),
  duration: (s) => (s === null ? "forever" : s === undefined ? "–" : fmt.seconds(s)),
};

// -- charts: three polylines in one small SVG --
function chart(rates) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${CHART.w} ${CHART.h}`);
  svg.setAttribute("class", "chart");
  if (!rates) return svg;
  const series = ["put", "take", "ack"];
  const max = Math.max(1, ...series.flatMap((s) => rates[s]));
  for (const name of series) {
    // One point (a tube younger than a sample) is drawn as a flat line.
    const points = rates[name].length === 1 ? [rates[name][0], rates[name][0]] : rates[name];
    const step = CHART.w / Math.max(1, points.length - 1);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("class", name);
    line.setAttribute("points", points.map((v, i) =>
      `${(i * step).toFixed(1)},${(CHART.h - 1 - (v / max) * (CHART.h - 2)).toFixed(1)}`).join(" "));
    svg.append(line);
  }
  const now = series.map((s) => rates[s][rates[s].length - 1]);
  const title = document.createElementNS(ns, "title");
  title.textContent = `now: put ${now[0]}/s, take ${now[1]}/s, ack ${now[2]}/s (peak ${max}/s)`;
  svg.append(title);
  svg.dataset.now = now.join(",");
  return svg;
}

// -- drawing the overview --
function drawTubes(tubes) {
  const body = $("#tubes tbody");
  body.replaceChildren(...tubes.map((tube) => {
    const t = tube.tasks;
    const cell = (state) => el("td", { class: "num", "data-state": state }, fmt.count(t[state]));
    return el("tr", { "data-tube": tube.name, class: tube.name === view.tube ? "selected" : "" },
      el("td", {}, el("a", { class: "tube-link", href: tubeUrl(tube.name), onclick: follow }, tube.name)),
      el("td", {}, tube.type),
      cell("ready"), cell("taken"), cell("delayed"), cell("buried"), cell("done"),
      el("td", { class: "num" }, fmt.count(tube.waiting_takes)),
      el("td", { class: "num oldest" }, tube.oldest_ready
        ? (tube.oldest_ready.estimated ? "~" : "") + fmt.seconds(tube.oldest_ready.seconds) : "–"),
      el("td", {}, chart(tube.rates)));
  }));
  $("#no-tubes").hidden = tubes.length > 0;
  const open = tubes.find((tube) => tube.name === view.tube);
  view.tubeCan = open?.can ?? {}; // a tube the user may not read, or gone: nothing to press
  if (open) {
    $("#tube-type").textContent = [open.type, ...limitsText(open)].join(" · ");
    view.type = open.type;
    view.counts = open.tasks;
  }
}

// A tube's rate limit, buried retention, results and put keys, in words (none: nothing).
function limitsText(tube) {
  const words = [];
  const rate = tube.rate_limit, kept = tube.retention;
  if (rate) words.push(`at most ${rate.max} takes per ${rate.interval} s (${fmt.count(rate.delayed)} held back)`);
  if (kept) {
    const limits = [kept.buried_max !== null ? `${kept.buried_max}` : null,
      kept.buried_ttl !== null ? `${kept.buried_ttl} s` : null].filter((x) => x !== null);
    words.push(`buried kept: at most ${limits.join(", ")} (${fmt.count(kept.dropped)} dropped)`);
  }
  const opts = tube.opts ?? {}, results = tube.results, keys = tube.keys;
  if (opts.result_ttl || results) {
    const counts = results ? ` (${fmt.count(results.held)} held, ${fmt.count(results.stored)} stored)` : "";
    words.push(`results kept ${opts.result_ttl ? fmt.seconds(opts.result_ttl) : "no longer"}${counts}`);
  }
  if (opts.key_window || keys) {
    const counts = keys ? ` (${fmt.count(keys.held)} held, ${fmt.count(keys.matched)} matched)` : "";
    words.push(`put keys${opts.key_window ? ` for ${fmt.seconds(opts.key_window)}` : ""}${counts}`);
  }
  return words;
}

function pairs(target, rows) {
  target.replaceChildren(...rows.flatMap(([key, value]) => [el("dt", {}, key), el("dd", {}, value)]));
}

function drawServer(server) {
  if (!link.lost) {
    $("#state").textContent = server.state;
    $("#state").className = "badge " + (server.state === "RUNNING" ? "good" : "warn");
  }
  $("#version").textContent = `${server.version} (${server.build})`;
  const wal = server.wal, snap = server.snapshot, mem = server.memory;
  pairs($("#server"), [
    ["state", server.state + (server.read_only ? " (read-only)" : "")],
    ["up for", fmt.seconds(server.uptime_s)],
    ["connections", fmt.count(server.connections)],
    ["WAL", `${wal.mode}; LSN ${wal.last_lsn}, durable ${wal.durable_lsn}; ${fmt.bytes(wal.bytes_since_snapshot)} since the snapshot`],
    ["snapshot", snap.age_s === null ? `none yet (LSN ${snap.lsn})` :
      `LSN ${snap.lsn}, ${fmt.seconds(snap.age_s)} ago; ${snap.written} written by this run`],
    ["memory", `${fmt.bytes(mem.rss_bytes)} resident (peak ${fmt.bytes(mem.peak_rss_bytes)})`],
  ]);
}

// The cluster as queuebox.status() answers it (or this node's own view, same shape).
function drawCluster(cluster) {
  if (cluster.refused) {
    pairs($("#cluster"), [["refused", cluster.refused.message]]);
    $("#nodes tbody").replaceChildren();
    return;
  }
  const rows = [["this node", `${cluster.name ? cluster.name + ", " : ""}${cluster.role}, LSN ${cluster.lsn}`],
    ["primary", cluster.primary ?? "–"], ["failover", cluster.failover ?? "–"]];
  if (cluster.quorum) rows.push(["quorum", `${cluster.quorum} (in sync: ${(cluster.in_sync ?? []).join(", ") || "–"})`]);
  if (cluster.term !== undefined && cluster.term !== null) rows.push(["term", cluster.term]);
  if (cluster.waiting) rows.push(["waiting", cluster.waiting]);
  if (cluster.etcd_error) rows.push(["etcd", cluster.etcd_error]);
  pairs($("#cluster"), rows);
  const nodes = (cluster.replicas ?? []).map((r) => ({ role: "replica", name: r.name, lsn: r.acked_lsn,
    lag: r.lag_lsn, seconds: r.lag_seconds, ok: r.connected, inSync: r.in_sync }));
  if (cluster.following) {
    const f = cluster.following;
    nodes.unshift({ role: "primary", name: f.primary, lsn: f.primary_lsn, lag: f.lag_lsn, ok: f.connected,
      note: f.diverged ? `diverged: ${f.diverged}` : "" });
  }
  $("#nodes tbody").replaceChildren(...(nodes.length ? nodes.map((n) =>
    el("tr", { "data-node": n.name ?? "" }, el("td", {}, n.role), el("td", {}, n.name ?? "–"),
      el("td", { class: "num" }, n.lsn), el("td", { class: "num" }, n.lag + (n.seconds ? ` (${fmt.seconds(n.seconds)})` : "")),
      el("td", { class: n.ok ? "good" : "warn" }, (n.ok ? "connected" : "not connected") +
        (n.inSync === undefined ? "" : n.inSync ? ", in sync" : ", not in sync") + (n.note ? `, ${n.note}` : ""))))
    : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no replication peers"))]));
}

// The sharded cluster's map from etcd (a node started with --shard), this node's shard marked.
function drawShards(shards) {
  $("#shards-section").hidden = false;
  const age = shards.read_s === null ? "not read from etcd yet" : `read from etcd ${fmt.seconds(shards.read_s)} ago`;
  $("#shards-note").textContent = `${age}; counts per shard: queuebox stats through a router`;
  $("#shards tbody").replaceChildren(...shards.shards.map((s) =>
    el("tr", { "data-shard": s.name, class: s.name === shards.this ? "this" : "" },
      el("td", {}, s.name), el("td", { class: "num" }, s.number),
      el("td", { class: s.state === "active" ? "good" : "warn" }, s.state),
      el("td", { class: s.primary ? "" : "warn" }, s.primary ?? "no primary"),
      el("td", {}, s.name === shards.this ? "this node's shard" : ""))));
}

function holds(list) {
  return list.length ? list.map(([tube, id]) => `${tube}:${id}`).join(", ") : "–";
}

function drawConnections(data) {
  $("#connections tbody").replaceChildren(...data.connections.map((c) =>
    el("tr", { "data-conn": c.id }, el("td", { class: "num" }, c.id), el("td", {}, c.port), el("td", {}, c.peer),
      el("td", { class: "via" }, c.via ? `${c.via.router} (${c.via.peer || "?"})` : "–"), el("td", {}, c.user), el("td", { class: "num" }, c.in_flight), el("td", { class: "mono" }, c.session ?? "–"),
      el("td", { class: "holds" }, holds(c.holds)))));
  $("#pending").hidden = data.pending_sessions.length === 0;
  $("#pending tbody").replaceChildren(...data.pending_sessions.map((s) =>
    el("tr", {}, el("td", { class: "mono" }, s.session), el("td", { class: "holds" }, holds(s.holds)))));
}

// The server stopped answering: the badge says so, and what the page shows is
// marked as old (it is what the server said last).
function lost(why) {
  link.lost = true;
  $("#state").textContent = "disconnected";
  $("#state").className = "badge bad";
  $("#state").title = why;
  $("#live").className = "warn";
  $("#live").title = `the last update failed: ${why}`;
  document.body.classList.add("stale");
}

function answered() {
  link.answered = Date.now();
  link.lost = false;
  $("#state").title = "";
  $("#live").className = "good";
  $("#live").title = "the page asks the server every second";
  document.body.classList.remove("stale");
}

async function refresh() {
  let data;
  try {
    data = await api("GET", "/api/overview");
  } catch (error) {
    lost(error.name === "TimeoutError" ? "the server did not answer" : error.message);
    return;
  }
  answered();
  view.can = data.can;
  $("#user").textContent = data.user;
  $("#create").hidden = !data.can.create;
  if (data.refused) refused(data.refused);
  drawTubes(data.tubes);
  drawSchedules(data.schedules ?? []);
  if (data.server) drawServer(data.server);
  if (data.cluster) drawCluster(data.cluster);
  if (data.shards) drawShards(data.shards);
  if (data.connections) drawConnections(data);
  if (view.tube) await refreshTube();
}

function watch() {
  if (Date.now() - link.answered > ANSWER_MS && !link.lost) lost("no answer for two refreshes");
}

