// The queuebox console: reads /api/overview every second, draws it, and sends
// the operator's actions. No library: the DOM is built with textContent only,
// so a task's data can never become markup.
"use strict";

const POLL_MS = 1000;
const CHART = { w: 160, h: 36 };
const $ = (sel) => document.querySelector(sel);
// The open tube's listing: cursors of the pages before this one (queuebox.tasks' `next`).
const view = { tube: null, state: "", pages: [], after: null, next: null, counts: {}, can: {} };
const PAGE = 50;

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
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const reply = await fetch(path, options);
  if (reply.status === 401) {
    location.href = "/login";
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
      el("td", {}, el("button", { class: "link tube-link", onclick: () => openTube(tube.name) }, tube.name)),
      el("td", {}, tube.type),
      cell("ready"), cell("taken"), cell("delayed"), cell("buried"), cell("done"),
      el("td", { class: "num" }, fmt.count(tube.waiting_takes)),
      el("td", { class: "num oldest" }, tube.oldest_ready
        ? (tube.oldest_ready.estimated ? "~" : "") + fmt.seconds(tube.oldest_ready.seconds) : "–"),
      el("td", {}, chart(tube.rates)));
  }));
  $("#no-tubes").hidden = tubes.length > 0;
  const open = tubes.find((tube) => tube.name === view.tube);
  if (open) {
    $("#tube-type").textContent = open.type;
    view.counts = open.tasks;
  }
}

function pairs(target, rows) {
  target.replaceChildren(...rows.flatMap(([key, value]) => [el("dt", {}, key), el("dd", {}, value)]));
}

function drawServer(server) {
  $("#state").textContent = server.state;
  $("#state").className = "badge " + (server.state === "RUNNING" ? "good" : "warn");
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

function holds(list) {
  return list.length ? list.map(([tube, id]) => `${tube}:${id}`).join(", ") : "–";
}

function drawConnections(data) {
  $("#connections tbody").replaceChildren(...data.connections.map((c) =>
    el("tr", { "data-conn": c.id }, el("td", { class: "num" }, c.id), el("td", {}, c.port), el("td", {}, c.peer),
      el("td", {}, c.user), el("td", { class: "num" }, c.in_flight), el("td", { class: "mono" }, c.session ?? "–"),
      el("td", { class: "holds" }, holds(c.holds)))));
  $("#pending").hidden = data.pending_sessions.length === 0;
  $("#pending tbody").replaceChildren(...data.pending_sessions.map((s) =>
    el("tr", {}, el("td", { class: "mono" }, s.session), el("td", { class: "holds" }, holds(s.holds)))));
}

async function refresh() {
  try {
    const data = await api("GET", "/api/overview");
    view.can = data.can;
    $("#user").textContent = data.user;
    document.body.classList.toggle("no-write", !data.can.write);
    document.body.classList.toggle("no-admin", !data.can.admin);
    if (data.refused) refused(data.refused);
    drawTubes(data.tubes);
    if (data.server) drawServer(data.server);
    if (data.cluster) drawCluster(data.cluster);
    if (data.connections) drawConnections(data);
    if (view.tube) await refreshTasks();
    $("#live").className = "good";
  } catch (error) {
    $("#live").className = "warn";
    $("#live").title = `the last update failed: ${error.message}`;
  }
}

// -- one tube --
function firstPage() {
  view.pages = [];
  view.after = null;
}

function openTube(name) {
  view.tube = name;
  firstPage();
  $("#tube").hidden = false;
  $("#tube-name").textContent = name;
  refresh();
}

const FOREVER_S = 3153600000; // ttl/ttr "forever": 100 years, as the module stores it

function when(task) {
  if (task.deadline !== undefined) return `ttr ends ${fmt.time(task.deadline)}`;
  if (task.ready_at !== undefined) return `ready ${fmt.time(task.ready_at)}`;
  if (task.expires_at !== undefined && task.expires_at < task.created + FOREVER_S) {
    return `expires ${fmt.time(task.expires_at)}`;
  }
  return "–";
}

function span(s) {
  return s === undefined ? "–" : s >= FOREVER_S ? "forever" : fmt.seconds(s);
}

function taskRow(task) {
  const act = (label, action, question) =>
    el("button", { class: "link act-" + action, onclick: () => taskAction(action, task.id, question) }, label);
  const buttons = [];
  if (task.state !== "buried") buttons.push(act("bury", "bury", `Bury task ${task.id} of ${view.tube}?`));
  if (task.state === "taken") buttons.push(act("release", "release", `Release task ${task.id} of ${view.tube} (taken from whoever holds it)?`));
  buttons.push(act("delete", "delete", `Delete task ${task.id} of ${view.tube}? This cannot be undone.`));
  const data = task.data;
  const shown = data.kind === "json" ? data.text : `${data.kind}: ${data.text}`;
  const state = task.reason ? [task.state, el("div", { class: "reason muted" }, task.reason)] : [task.state];
  return el("tr", { "data-task-id": task.id, "data-task-state": task.state },
    el("td", { class: "num" }, task.id), el("td", {}, state),
    el("td", {}, el("pre", { class: "data", title: data.size === null ? "" : `${data.size} bytes of msgpack` }, shown + (data.truncated ? " …" : ""))),
    el("td", {}, task.created === undefined ? "–" : fmt.time(task.created)),
    el("td", {}, when(task)), el("td", {}, span(task.ttl)), el("td", {}, span(task.ttr)),
    el("td", {}, [task.pri, task.utube].filter((v) => v !== undefined).join(" / ") || "–"),
    el("td", { class: "num" }, task.attempts ?? "–"),
    el("td", { class: "task-actions" }, buttons));
}

async function refreshTasks() {
  const query = new URLSearchParams();
  if (view.state) query.set("state", view.state);
  if (view.after) query.set("after", view.after.join(","));
  try {
    const page = await api("GET", `/api/tubes/${encodeURIComponent(view.tube)}/tasks?${query}`);
    view.next = page.next;
    $("#tasks tbody").replaceChildren(...page.tasks.map(taskRow));
    const first = view.pages.length * PAGE;
    const total = view.state ? view.counts[view.state] : view.counts.total;
    $("#page").textContent = page.tasks.length
      ? `${first + 1}–${first + page.tasks.length} of ${fmt.count(total)}` : "no tasks";
    $("#prev").disabled = view.pages.length === 0;
    $("#next").disabled = !page.next;
  } catch (error) {
    $("#tasks tbody").replaceChildren();
    $("#page").textContent = error.message;
  }
  for (const tab of document.querySelectorAll("#states button")) {
    tab.classList.toggle("active", tab.dataset.state === view.state);
  }
}

async function act(path, body, done) {
  try {
    const reply = await api("POST", path, body);
    say(done(reply.result));
  } catch (error) {
    refused(error);
  }
  await refresh();
}

const tubePath = (action) => `/api/tubes/${encodeURIComponent(view.tube)}/${action}`;

async function taskAction(action, id, question) {
  if (!(await ask(question))) return;
  await act(tubePath(action), { task_id: id }, () => `Task ${id}: ${action} done.`);
}

function numbers(form, names) {
  const opts = {};
  for (const name of names) {
    const value = form.elements[name].value;
    if (value !== "") opts[name] = Number(value);
  }
  return opts;
}

async function put(event) {
  event.preventDefault();
  const form = event.target;
  let data;
  try { data = JSON.parse(form.elements.data.value); } catch (error) {
    say(`The data is not JSON: ${error.message}`, "error");
    return;
  }
  const opts = numbers(form, ["delay", "ttl", "ttr", "pri"]);
  if (form.elements.utube.value) opts.utube = form.elements.utube.value;
  await act(tubePath("put"), { data, opts }, (result) => `Put task ${result[0][0]} into ${view.tube}.`);
}

async function kick(count) {
  const what = count === "all" ? "all buried tasks" : `${count} buried task(s)`;
  if (!(await ask(`Kick ${what} of ${view.tube} back to ready?`))) return;
  await act(tubePath("kick"), { count }, (result) => `Kicked ${result[0]} task(s) of ${view.tube}.`);
}

async function truncate() {
  if (!(await ask(`Truncate ${view.tube}: delete every task in it? This cannot be undone.`))) return;
  await act(tubePath("truncate"), {}, () => `Truncated ${view.tube}.`);
}

async function createTube(event) {
  event.preventDefault();
  const form = event.target;
  const opts = numbers(form, ["ttl", "ttr", "capacity"]);
  if (form.elements.temporary.checked) opts.temporary = true;
  const name = form.elements.name.value;
  await act("/api/tubes", { name, type: form.elements.type.value, opts }, () => `Created tube ${name}.`);
}

function wire() {
  $("#put-form").addEventListener("submit", put);
  $("#kick-form").addEventListener("submit", (event) => {
    event.preventDefault();
    kick(Number(event.target.elements.count.value));
  });
  $("#kick-all").addEventListener("click", () => kick("all"));
  $("#truncate").addEventListener("click", truncate);
  $("#create-form").addEventListener("submit", createTube);
  $("#close-tube").addEventListener("click", () => { view.tube = null; $("#tube").hidden = true; refresh(); });
  $("#prev").addEventListener("click", () => { view.after = view.pages.pop() ?? null; refreshTasks(); });
  $("#next").addEventListener("click", () => {
    if (!view.next) return;
    view.pages.push(view.after);
    view.after = view.next;
    refreshTasks();
  });
  for (const tab of document.querySelectorAll("#states button")) {
    tab.addEventListener("click", () => { view.state = tab.dataset.state; firstPage(); refreshTasks(); });
  }
  $("#logout").addEventListener("click", async () => {
    await api("POST", "/logout").catch(() => null);
    location.href = "/login";
  });
}

async function poll() {
  await refresh();
  setTimeout(poll, POLL_MS);
}

wire();
poll();
