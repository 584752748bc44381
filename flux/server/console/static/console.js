/* Flux console: progressive enhancement only. Every page reads and works without it;
   with it, times stay relative, lists and executions update live over Server-Sent
   Events (through the console's /ui/api bridge to the JSON API), logs follow. */
"use strict";

const TERMINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);
const STATE_AFTER = { WORKFLOW_SCHEDULED: "SCHEDULED", WORKFLOW_RESCHEDULED: "SCHEDULED", WORKFLOW_CLAIMED: "CLAIMED",
  WORKFLOW_STARTED: "RUNNING", WORKFLOW_CANCEL_REQUESTED: "CANCELLING", WORKFLOW_COMPLETED: "COMPLETED",
  WORKFLOW_FAILED: "FAILED", WORKFLOW_CANCELLED: "CANCELLED", WORKFLOW_TIMED_OUT: "TIMED_OUT" };

function ago(ts) {
  let delta = Date.now() / 1000 - ts;
  const future = delta < 0; delta = Math.abs(delta);
  let text = Math.floor(delta) + "s";
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (delta >= size) { text = Math.floor(delta / size) + unit; break; }
  }
  return future ? "in " + text : text + " ago";
}

function timeElement(ts) {
  const el = document.createElement("time");
  const date = new Date(ts * 1000);
  el.dataset.ts = ts; el.dateTime = date.toISOString();
  el.title = date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  el.textContent = ago(ts);
  return el;
}

function refreshTimes() {
  for (const el of document.querySelectorAll("time[data-ts]")) el.textContent = ago(parseFloat(el.dataset.ts));
}

function badge(state) {
  const span = document.createElement("span");
  span.className = "badge state-" + state.toLowerCase(); span.dataset.state = state; span.textContent = state;
  return span;
}

function duration(seconds) {
  if (seconds < 1) return Math.round(seconds * 1000) + " ms";
  if (seconds < 120) return seconds.toFixed(1) + " s";
  if (seconds < 7200) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function setStatus(text) {
  const el = document.querySelector("[data-live-status]");
  if (el) el.textContent = text;
}

/* The executions list: rows change state in place; new ones appear on the first page. */
function watchExecutions(table) {
  const body = table.tBodies[0];
  const wantedState = table.dataset.filterState, wantedWorker = table.dataset.filterWorker;
  const firstPage = table.dataset.firstPage === "true";
  const source = new EventSource(table.dataset.watch);
  source.onopen = () => setStatus("Live: changes appear as they happen.");
  source.onerror = () => setStatus("Live updates interrupted; reconnecting…");
  source.addEventListener("execution", (message) => {
    const e = JSON.parse(message.data);
    let row = body.querySelector(`tr[data-id="${CSS.escape(e.id)}"]`);
    const matches = (!wantedState || e.state === wantedState) && (!wantedWorker || e.worker_name === wantedWorker);
    if (!row) {
      /* a gang's member is listed under its gang, as the server's list leaves it out, but by worker */
      if (!firstPage || !matches || (e.gang_id && !wantedWorker)) return;
      row = document.getElementById("execution-row").content.firstElementChild.cloneNode(true);
      row.dataset.id = e.id;
      const link = row.querySelector("a"); link.href = "/ui/executions/" + e.id; link.textContent = e.id.slice(0, 12);
      const wf = document.createElement("a"); wf.href = "/ui/workflows/" + encodeURIComponent(e.workflow_name); wf.textContent = e.workflow_name;
      row.querySelector(".wf").append(wf, " v" + e.workflow_version);
      row.querySelector(".sc").append(timeElement(e.scheduled_at));
      const empty = body.querySelector(".empty-row"); if (empty) empty.remove();
      body.prepend(row);
    }
    const cell = row.querySelector(".st"), before = cell.querySelector(".badge");
    const kept = before && before.dataset.state === e.state ? cell.querySelector(".why") : null;  /* same state: same why */
    cell.replaceChildren(badge(e.state), ...(kept ? [kept] : []));
    if (!kept && e.error && TERMINAL.has(e.state)) {  /* why it ended, as the server's row says it */
      const why = document.createElement("div"); why.className = "why muted"; why.title = e.error;
      why.textContent = e.error.length > 90 ? e.error.slice(0, 87) + "..." : e.error;
      row.querySelector(".st").append(why);
    }
    row.querySelector(".wk").textContent = e.worker_name || "—";
    row.querySelector(".at").textContent = e.attempt + " / " + e.max_attempts;
    if (e.started_at) row.querySelector(".du").textContent = duration((e.finished_at || Date.now() / 1000) - e.started_at);
    const actions = row.querySelector(".ac");
    if (TERMINAL.has(e.state)) actions.replaceChildren();
    else if (!actions.querySelector("form") && table.dataset.cancel === "true") actions.append(cancelForm(e.id, table.dataset.csrf));
    row.classList.remove("flash"); void row.offsetWidth; row.classList.add("flash");
  });
}

function cancelForm(id, csrf) {
  const form = document.createElement("form");
  form.method = "post"; form.action = "/ui/executions/" + id + "/cancel";
  const token = document.createElement("input"); token.type = "hidden"; token.name = "csrf"; token.value = csrf;
  const next = document.createElement("input"); next.type = "hidden"; next.name = "next"; next.value = location.pathname + location.search;
  const namespace = document.createElement("input"); namespace.type = "hidden"; namespace.name = "namespace";
  namespace.value = document.body.dataset.namespace;
  const button = document.createElement("button"); button.type = "submit"; button.className = "warn small"; button.textContent = "Cancel";
  form.append(token, next, namespace, button);
  return form;
}

/* One execution, live, patched from its event stream (GET /executions/ID/events?follow=true):
   each event moves the state, the header (worker, attempts, time waited and run) and the
   Gantt at once, drawn here from the events as gantt.py draws them; every second the
   clocks and the running bars advance (on the server's clock: the page says its time).
   The timeline's rows are read again from the server (their values masked there, one
   rendering), a burst at a time. At the end the page is read again whole. */
function followExecution(root) {
  if (root.dataset.terminal === "true") return;
  /* The page's transfer makes the skew a little low: never before the newest event. */
  const skew = parseFloat(root.dataset.now) - Date.now() / 1000;
  let latest = parseFloat(root.dataset.now);
  const now = () => Math.max(Date.now() / 1000 + skew, latest);
  const facts = root.querySelector("dl.facts");
  const chart = ganttModel(root.querySelector("[data-live-tasks]"));
  const draw = () => { tickHeader(facts, now()); chart.draw(now()); refreshTimes(); };
  const source = new EventSource(root.dataset.events);
  let pending = null;
  source.addEventListener("event", (message) => {
    const ev = JSON.parse(message.data);
    latest = Math.max(latest, ev.time);
    const state = root.querySelector("[data-live-state]");
    if (STATE_AFTER[ev.type] && state) state.replaceChildren(badge(STATE_AFTER[ev.type]));
    patchHeader(facts, ev);
    chart.apply(ev);
    draw();
    pending = pending || setTimeout(() => { pending = null; readTimeline(root); }, 300);
  });
  source.addEventListener("end", () => { source.close(); location.reload(); });
  setInterval(draw, 1000);
}

function patchHeader(facts, ev) {
  const ran = facts.querySelector("[data-live-ran]"), value = ev.value && typeof ev.value === "object" ? ev.value : {};
  if (ev.type === "WORKFLOW_CLAIMED") {
    facts.querySelector("[data-live-waited]").dataset.claimed = ev.time;
    if (value.worker) {
      const link = document.createElement("a");
      link.href = "/ui/executions?worker=" + encodeURIComponent(value.worker); link.textContent = value.worker;
      facts.querySelector("[data-live-worker]").replaceChildren(link);
    }
    const attempts = facts.querySelector("[data-live-attempts]");
    if (value.attempt) attempts.textContent = `${value.attempt} of ${attempts.dataset.max} (${attempts.dataset.crashes} crashed)`;
  } else if (ev.type === "WORKFLOW_STARTED" && (!ran.dataset.started || ran.dataset.ended)) {
    ran.dataset.started = ev.time; ran.dataset.ended = "";  /* a new attempt runs (the server's started_at) */
  } else if (ev.type === "ATTEMPT_ENDED") {
    ran.dataset.ended = ev.time;
  } else if (TERMINAL.has(STATE_AFTER[ev.type])) {
    ran.dataset.finished = ev.time;
  }
}

function tickHeader(facts, at) {
  const ran = facts.querySelector("[data-live-ran]"), waited = facts.querySelector("[data-live-waited]");
  const started = parseFloat(ran.dataset.started);
  if (started) ran.textContent = duration((parseFloat(ran.dataset.finished) || parseFloat(ran.dataset.ended) || at) - started);
  waited.textContent = duration((parseFloat(waited.dataset.claimed) || at) - parseFloat(waited.dataset.scheduled));
}

/* The Gantt's bars (from the server's rows), changed by each event as gantt.gantt reads the log. */
function ganttModel(section) {
  const bars = [...section.querySelectorAll(".gantt-row")].map((li) => ({
    task: li.dataset.task, attempt: parseInt(li.dataset.attempt), retry: parseInt(li.dataset.retry), start: parseFloat(li.dataset.start),
    end: li.dataset.end ? parseFloat(li.dataset.end) : null, outcome: li.dataset.outcome, error: li.dataset.error }));
  const open = new Map(bars.filter((bar) => bar.end === null).map((bar) => [bar.task, bar]));
  let attempt = parseInt(section.dataset.attempt) || 0, attempts = parseInt(section.dataset.attempts) || 0, changed = false;
  return {
    apply(ev) {
      const value = ev.value && typeof ev.value === "object" ? ev.value : {};
      if (ev.type === "ATTEMPT_STARTED") { attempt = value.attempt || attempt + 1; attempts += 1; }
      else if (ev.type === "ATTEMPT_ENDED") {
        for (const bar of open.values()) { bar.end = ev.time; bar.outcome = "interrupted"; }
        open.clear();
      } else if (ev.type === "TASK_STARTED" && ev.task_id) {
        const bar = { task: ev.task_id, attempt, retry: value.attempt || 1, start: ev.time, end: null, outcome: "running", error: "" };
        open.set(bar.task, bar); bars.push(bar);
      } else if ((ev.type === "TASK_COMPLETED" || ev.type === "TASK_FAILED") && open.has(ev.task_id)) {
        const bar = open.get(ev.task_id);
        open.delete(ev.task_id);
        bar.end = ev.time; bar.outcome = ev.type === "TASK_COMPLETED" ? "completed" : "failed";
        if (ev.type === "TASK_FAILED") bar.error = String(value.error || "").slice(0, 500);
      } else return;
      changed = true;
    },
    draw(at) {
      if (!bars.length || !(changed || open.size)) return;  /* nothing moves: the page's rendering stands */
      changed = false;
      const start = Math.min(...bars.map((bar) => bar.start)), end = Math.max(...bars.map((bar) => bar.end ?? at));
      const span = end - start || 1;
      const summary = document.createElement("p");
      summary.className = "muted"; summary.textContent = `${bars.length} task tries over ${duration(Math.max(end - start, 0))}.`;
      const list = document.createElement("ol");
      list.className = "gantt"; list.setAttribute("aria-label", "Tasks over time");
      list.append(...bars.map((bar) => ganttRow(bar, start, span, at, attempts > 1)));
      section.querySelector("[data-gantt]").replaceChildren(summary, list);
    },
  };
}

function ganttRow(bar, start, span, at, attempts) {
  const muted = (text) => Object.assign(document.createElement("span"), { className: "muted", textContent: text });
  const row = document.createElement("li");
  row.className = "gantt-row"; row.dataset.task = bar.task; row.dataset.outcome = bar.outcome;
  const name = Object.assign(document.createElement("span"), { className: "gantt-name", title: bar.task, textContent: bar.task });
  if (bar.retry > 1) name.append(" ", muted("try " + bar.retry));
  if (attempts) name.append(" ", muted("attempt " + bar.attempt));
  const stop = bar.end ?? at, took = duration(stop - bar.start);
  const drawn = document.createElement("span");
  drawn.className = "gantt-bar outcome-" + bar.outcome;
  drawn.style.left = (100 * (bar.start - start) / span).toFixed(2) + "%";
  drawn.style.width = Math.max(100 * (stop - bar.start) / span, 0.5).toFixed(2) + "%";
  drawn.title = `${bar.task}: ${bar.outcome}, ${took}` + (bar.error ? ": " + bar.error : "");
  const track = document.createElement("span"); track.className = "gantt-track"; track.append(drawn);
  const time = Object.assign(document.createElement("span"), { className: "gantt-time", textContent: `${bar.outcome} · ${took}` });
  row.append(name, track, time);
  return row;
}

function readTimeline(root) {
  fetch(location.href, { headers: { Accept: "text/html" } })
    .then((response) => response.ok ? response.text() : null)
    .then((html) => {
      const fresh = html && new DOMParser().parseFromString(html, "text/html").querySelector("[data-timeline]");
      const now = root.querySelector("[data-timeline]");
      if (fresh && now) now.replaceWith(fresh);
    });
}

function followLogs(pre) {
  const follow = document.querySelector("[data-follow]");
  const scroll = () => { if (!follow || follow.checked) pre.scrollTop = pre.scrollHeight; };
  scroll();
  if (document.querySelector(".execution")?.dataset.terminal === "true") return;
  const source = new EventSource(pre.dataset.logs);
  source.addEventListener("log", (message) => {
    const line = JSON.parse(message.data);
    const span = document.createElement("span");
    span.className = "line stream-" + line.stream; span.dataset.seq = line.seq;
    const at = document.createElement("time"); at.className = "muted"; at.dateTime = new Date(line.time * 1000).toISOString();
    at.textContent = at.dateTime.slice(11, 23);  /* HH:MM:SS.mmm UTC, as the server renders it */
    const task = document.createElement("span"); task.className = "muted"; task.textContent = line.task_id || "";
    span.append(at, " ", task, " ");
    if (line.level) span.append(Object.assign(document.createElement("b"), { textContent: line.level }), " ");
    span.append(line.message + "\n");
    pre.append(span);
    scroll();
  });
  source.addEventListener("end", () => source.close());
}

/* The namespace switcher goes as soon as a namespace is picked (its button is for pages without script). */
function switchOnChange(form) {
  const select = form.querySelector("select");
  select.addEventListener("change", () => form.requestSubmit());
  form.querySelector("button").hidden = true;
}

/* The run form: say at once when the input is not JSON (the server says so too). */
function checkJson(form) {
  const input = form.querySelector("textarea");
  input.addEventListener("input", () => {
    const text = input.value.trim();
    try { if (text) JSON.parse(text); input.setCustomValidity(""); }
    catch (error) { input.setCustomValidity("Not valid JSON: " + error.message); }
  });
}

/* A page that follows a stream of the API (data-live: its URL, data-live-event: the
   event): each event reads the page again and swaps this part in, so it is the server's
   own rendering (the fleet: GET /fleet?follow=true; schedules: GET /schedules?follow=true).
   A form being filled in is left alone. */
function followPage(root) {
  const source = new EventSource(root.dataset.live);
  let reading = null;
  source.onopen = () => setStatus("Live: this page updates as it changes.");
  source.onerror = () => setStatus("Live updates interrupted; reconnecting…");
  source.addEventListener(root.dataset.liveEvent, () => {
    if (reading || root.contains(document.activeElement) && document.activeElement.matches("input, select, textarea")) return;
    reading = fetch(location.href, { headers: { Accept: "text/html" } })
      .then((response) => response.ok ? response.text() : null)
      .then((html) => {
        const fresh = html && new DOMParser().parseFromString(html, "text/html").querySelector("[data-live]");
        if (fresh) root.replaceChildren(...fresh.childNodes);
      })
      .finally(() => { reading = null; });
  });
}

/* "Copy traceback": the whole traceback to the clipboard, and say so. */
function copyButton(button) {
  button.addEventListener("click", async () => {
    const text = document.querySelector(button.dataset.copy).textContent;
    try { await navigator.clipboard.writeText(text); button.textContent = "Copied"; }
    catch (error) { button.textContent = "Select the text to copy"; }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setInterval(refreshTimes, 10000);
  const table = document.querySelector("table[data-watch]"); if (table) watchExecutions(table);
  const live = document.querySelector("[data-live]"); if (live) followPage(live);
  const execution = document.querySelector("[data-execution]"); if (execution) followExecution(execution);
  const logs = document.querySelector("pre[data-logs]"); if (logs) followLogs(logs);
  for (const form of document.querySelectorAll("form[data-json-form]")) checkJson(form);
  for (const button of document.querySelectorAll("button[data-copy]")) copyButton(button);
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => { if (!confirm(form.dataset.confirm)) event.preventDefault(); });
  }
  const switcher = document.querySelector("form[data-switcher]"); if (switcher) switchOnChange(switcher);
});
