// The queuebox console, part two (after console.js): one tube's tasks a page at
// a time, one task inspected, the operator's actions, and the URLs:
//   /tubes/NAME[?state=buried]   a tube (and the state it lists)
//   /tubes/NAME/tasks/ID         one of its tasks
// Every link is a real URL (bookmark it, share it, open it in a new tab); back
// and forward walk them. Only the buttons the user may press are shown (the
// overview says, per tube, what the user may do: `can`).
"use strict";

const PAGE = 50;
const part = encodeURIComponent;
const tubeUrl = (tube, state = "") => `/tubes/${part(tube)}` + (state ? `?state=${part(state)}` : "");
const taskUrl = (tube, id) => `/tubes/${part(tube)}/tasks/${id}`;

// -- URLs --
function fromUrl() {
  const [, tubes, tube, tasks, id] = location.pathname.split("/");
  const named = tubes === "tubes" && tube ? decodeURIComponent(tube) : null;
  const taskId = named && tasks === "tasks" && /^\d+$/.test(id ?? "") ? Number(id) : null;
  return { tube: named, task: taskId, state: new URLSearchParams(location.search).get("state") ?? "" };
}

function go(url) {
  if (url !== location.pathname + location.search) history.pushState(null, "", url);
  route();
}

// A click on a link stays in the page; a middle click or ctrl-click opens a tab.
function follow(event) {
  if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  go(event.currentTarget.getAttribute("href"));
}

function route() {
  const wanted = fromUrl();
  if (wanted.tube !== view.tube || wanted.state !== view.state) firstPage();
  Object.assign(view, wanted);
  $("#tube").hidden = view.tube === null;
  $("#task").hidden = view.task === null;
  $("#tube-name").textContent = view.tube ?? "";
  if (view.tube !== null) {
    $("#tube-name").href = $("#close-task").href = tubeUrl(view.tube, view.state);
    for (const tab of document.querySelectorAll("#states a")) tab.href = tubeUrl(view.tube, tab.dataset.state);
  }
  document.title = view.tube === null ? "queuebox"
    : `${view.tube}${view.task === null ? "" : ` task ${view.task}`} · queuebox`;
  refresh();
}

// -- one tube --
function firstPage() {
  view.pages = [];
  view.after = null;
}

// Its next event; "never" when none will come (no ttl, or ttl/ttr "forever").
function when(task) {
  const finite = (span) => span === undefined || span < FOREVER_S;
  if (task.deadline !== undefined && finite(task.ttr)) return `ttr ends ${fmt.time(task.deadline)}`;
  if (task.ready_at !== undefined) return `ready ${fmt.time(task.ready_at)}`;
  if (task.expires_at !== undefined && finite(task.ttl)) return `expires ${fmt.time(task.expires_at)}`;
  return "never";
}

function span(s) {
  return s === undefined ? "–" : s >= FOREVER_S ? "forever" : fmt.seconds(s);
}

// The buttons of one task, those the user may press and that fit its state.
function taskButtons(task) {
  const can = view.tubeCan;
  const act = (label, action, question) =>
    el("button", { class: "link act-" + action, onclick: () => taskAction(action, task.id, question) }, label);
  const buttons = [];
  const of = `task ${task.id} of ${view.tube}`;
  if (task.state === "buried" && can.retry) buttons.push(act("retry", "retry", `Retry ${of}: kick it back to ready?`));
  if (task.state !== "buried" && can.bury) buttons.push(act("bury", "bury", `Bury ${of}?`));
  if (task.state === "taken" && can.release) buttons.push(act("release", "release", `Release ${of} (taken from whoever holds it)?`));
  if (can.delete) buttons.push(act("delete", "delete", `Delete ${of}? This cannot be undone.`));
  return buttons;
}

function shownData(data) {
  return (data.kind === "json" ? data.text : `${data.kind}: ${data.text}`) + (data.truncated ? " …" : "");
}

function taskRow(task) {
  const data = task.data;
  const state = task.reason ? [task.state, el("div", { class: "reason muted" }, task.reason)] : [task.state];
  return el("tr", { "data-task-id": task.id, "data-task-state": task.state },
    el("td", { class: "num" }, el("a", { class: "task-link", href: taskUrl(view.tube, task.id), onclick: follow }, task.id)),
    el("td", {}, state),
    el("td", {}, el("pre", { class: "data", title: data.size === null ? "" : `${data.size} bytes of msgpack` }, shownData(data))),
    el("td", {}, task.created === undefined ? "–" : fmt.time(task.created)),
    el("td", { class: "when" }, when(task)), el("td", {}, span(task.ttl)), el("td", {}, span(task.ttr)),
    el("td", {}, [task.pri, task.utube].filter((v) => v !== undefined).join(" / ") || "–"),
    el("td", { class: "num" }, task.attempts ?? "–"),
    el("td", { class: "task-actions" }, taskButtons(task)));
}

function drawActions() {
  const can = view.tubeCan;
  $("#put-form").hidden = !can.put;
  $("#kick-form").hidden = !can.kick && !can.truncate;
  $("#kick-buttons").hidden = !can.kick;
  $("#truncate").hidden = !can.truncate;
  $("#tube-actions").hidden = !can.put && !can.kick && !can.truncate;
}

async function refreshTube() {
  drawActions();
  await refreshTasks();
  if (view.task !== null) await refreshTask(); // above the list, which stays live
}

// The order of a page (queuebox.tasks): by id, or the take order within a state.
function order() {
  if (!view.state) return "oldest first";
  return view.type.endsWith("ttl") ? "by priority, then oldest first" : "oldest first";
}

async function refreshTasks() {
  const query = new URLSearchParams();
  if (view.state) query.set("state", view.state);
  if (view.after) query.set("after", view.after.join(","));
  try {
    const page = await api("GET", `/api/tubes/${part(view.tube)}/tasks?${query}`);
    view.next = page.next;
    $("#tasks tbody").replaceChildren(...page.tasks.map(taskRow));
    const first = view.pages.length * PAGE;
    const total = view.state ? view.counts[view.state] : view.counts.total;
    $("#page").textContent = page.tasks.length
      ? `${first + 1}–${first + page.tasks.length} of ${fmt.count(total)}` : "no tasks";
    $("#order").textContent = order();
    $("#prev").disabled = view.pages.length === 0;
    $("#next").disabled = !page.next;
  } catch (error) {
    $("#tasks tbody").replaceChildren();
    $("#page").textContent = error.message;
  }
  for (const tab of document.querySelectorAll("#states a")) {
    tab.classList.toggle("active", tab.dataset.state === view.state);
  }
}

// -- one task: everything the server knows of it --
const RESULT_WORDS = { pending: "pending (not acknowledged yet)", unknown: "unknown (none kept, or it expired)" };

// Its result, on a tube that keeps results (queuebox.result): none on another.
function resultPair(result) {
  if (!result) return [];
  if (result.refused) return [["result", `refused: ${result.refused.message}`]];
  const words = (RESULT_WORDS[result.status] ?? result.status) + (result.error ? `: ${result.error}` : "");
  const value = result.result ? el("pre", { class: "data" }, shownData(result.result)) : [];
  return [["result", el("div", { id: "task-result", "data-status": result.status }, words, value)]];
}

async function refreshTask() {
  let page;
  try {
    page = await api("GET", `/api/tubes/${part(view.tube)}/tasks?id=${view.task}`);
  } catch (error) {
    $("#task-fields").replaceChildren(el("dt", {}, "error"), el("dd", {}, error.message));
    return;
  }
  const task = page.tasks[0];
  $("#task-id").textContent = view.task;
  $("#task").dataset.taskState = task ? task.state : "gone";
  $("#task-data").textContent = task ? shownData(task.data) : "";
  $("#task-actions").replaceChildren(...(task ? taskButtons(task) : []));
  if (!task) {
    pairs($("#task-fields"), [["state", "gone (acknowledged, deleted or expired)"], ...resultPair(page.result)]);
    return;
  }
  pairs($("#task-fields"), [
    ["state", task.state], ["attempts", task.attempts ?? "not counted (the tube has no retry policy)"],
    ["last error", task.reason ?? "–"], ["created", task.created === undefined ? "–" : fmt.time(task.created)],
    ["next event", when(task)], ["ttl", span(task.ttl)], ["ttr", span(task.ttr)],
    ["priority", task.pri ?? "–"], ["utube", task.utube ?? "–"], ["held by session", task.session ?? "–"],
    ["data", task.data.size === null ? task.data.kind : `${task.data.kind}, ${task.data.size} bytes of msgpack`],
    ...resultPair(page.result),
  ]);
}

// -- actions --
async function act(path, body, done) {
  try {
    const reply = await api("POST", path, body);
    say(done(reply.result));
  } catch (error) {
    refused(error);
  }
  await refresh();
}

const tubePath = (action) => `/api/tubes/${part(view.tube)}/${action}`;
const DONE = { retry: "kicked back to ready", bury: "buried", release: "released", delete: "deleted" };

async function taskAction(action, id, question) {
  if (!(await ask(question))) return;
  await act(tubePath(action), { task_id: id }, () => `Task ${id} ${DONE[action]}.`);
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

const CREATE_NUMBERS = ["ttl", "ttr", "capacity", "max_attempts", "backoff", "backoff_max"];

async function createTube(event) {
  event.preventDefault();
  const form = event.target;
  const opts = numbers(form, CREATE_NUMBERS);
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
  for (const a of document.querySelectorAll("#close-tube, #tube-name, #close-task, #states a")) {
    a.addEventListener("click", follow);
  }
  $("#prev").addEventListener("click", () => { view.after = view.pages.pop() ?? null; refreshTasks(); });
  $("#next").addEventListener("click", () => {
    if (!view.next) return;
    view.pages.push(view.after);
    view.after = view.next;
    refreshTasks();
  });
  $("#logout").addEventListener("click", async () => {
    await api("POST", "/logout").catch(() => null);
    location.href = "/login";
  });
  window.addEventListener("popstate", route);
}

async function poll() {
  await refresh();
  setTimeout(poll, POLL_MS);
}

wire();
route();
setInterval(watch, POLL_MS);
setTimeout(poll, POLL_MS);
