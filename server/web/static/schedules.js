// The console's schedules: one row each (from /api/overview), with the pause,
// resume and delete buttons the user may press. console.js draws the rest.
"use strict";

function scheduleButton(schedule, change, label, danger = false) {
  return el("button", {
    "data-change": change,
    class: danger ? "danger" : "",
    onclick: async () => {
      if (danger && !(await ask(`Delete schedule ${schedule.name}? No more tasks will be put.`))) return;
      try {
        await api("POST", `/api/schedules/${encodeURIComponent(schedule.name)}/${change}`, {});
        say(`Schedule ${schedule.name}: ${change === "delete" ? "deleted" : change + "d"}.`);
        await refresh();
      } catch (error) {
        refused(error);
      }
    },
  }, label);
}

function scheduleWhen(schedule) {
  if (schedule.cron !== undefined) return `cron ${schedule.cron} (${schedule.tz})`;
  return `every ${schedule.every} s`;
}

function drawSchedules(schedules) {
  $("#schedules-section").hidden = schedules.length === 0;
  $("#schedules tbody").replaceChildren(...schedules.map((s) => {
    const buttons = [];
    if (s.can.pause && s.state === "active") buttons.push(scheduleButton(s, "pause", "Pause"));
    if (s.can.resume && s.state === "paused") buttons.push(scheduleButton(s, "resume", "Resume"));
    if (s.can.delete) buttons.push(scheduleButton(s, "delete", "Delete…", true));
    return el("tr", { "data-schedule": s.name },
      el("td", {}, s.name), el("td", {}, s.tube), el("td", {}, scheduleWhen(s)),
      el("td", { class: "state" }, s.state),
      el("td", {}, s.next_tick === null ? "–" : fmt.time(s.next_tick)),
      el("td", {}, fmt.time(s.last_tick)),
      el("td", { class: "num fired" }, fmt.count(s.fired)),
      el("td", { class: "num", title: s.error ?? "" }, `${fmt.count(s.missed_ticks)} (${s.missed})`),
      el("td", {}, ...buttons));
  }));
}
