/**
 * `GET /dashboard` and its script: the queues (a picker and their counts), then the chosen queue's
 * counters, its last hour in charts (src/app/pages/charts.ts), the groups worth watching (a group's
 * next messages, and its purge), the dead letters (redrive, delete) and the push subscriptions,
 * refreshed in place. It reads and writes only through the `/v1` API with the bearer token
 * a person types in; the token stays in this tab's sessionStorage (never a URL, never a cookie).
 * Plain HTML and a plain script served by the Worker: no build step, nothing from a CDN.
 */
import { CHARTS_JS } from "./charts.js";
import { esc, page } from "./html.js";

export const dashboardHtml = (base: string) =>
  page(
    "turso-queue dashboard",
    `<header><h1>turso-queue <small>dashboard</small></h1>
<nav class="links"><a href="${esc(base)}/docs">API docs</a><button id="signout" type="button" hidden>Forget token</button></nav></header>
<div class="dash">
<form id="login" class="login" hidden>
  <h2>Bearer token</h2>
  <p>The API's token (the Worker's <code>QUEUE_TOKEN</code>; <code>npm start</code> prints the local one).
  It stays in this browser tab only (sessionStorage) and is sent to this Worker's <code>/v1</code> API, nowhere else.</p>
  <p><input id="token" name="token" type="password" autocomplete="off" required aria-label="Bearer token">
  <button type="submit">Open</button></p>
  <p id="login-error" class="error" role="alert"></p>
</form>
<div id="board" hidden>
  <div class="toolbar">
    <label>queue <select id="queue" aria-label="Queue"></select></label>
    <button id="refresh" type="button">Refresh</button>
    <label><input id="auto" type="checkbox" checked> every 10 s</label>
    <span id="updated"></span>
    <span id="notice" class="notice" role="status"></span>
    <span id="problem" class="error" role="alert"></span>
  </div>
  <section id="counters" class="counters" aria-label="Counters"></section>
  <h2>Last hour</h2>
  <p id="charts-empty" class="empty" hidden>No samples yet: the queue's writer takes one when the queue is written, at most one a minute (<code>QUEUE_SAMPLE_SECONDS</code>).</p>
  <div id="charts" class="charts" hidden>
${[
  ["backlog", "Backlog by state"],
  ["throughput", "Published and acked per minute"],
  ["age", "Oldest message's age"],
]
  .map(
    ([id, title]) =>
      `    <figure id="chart-${id}" class="chart" data-title="${title}"><figcaption>${title}</figcaption><div class="plot"></div><div class="legend-box"></div></figure>`,
  )
  .join("\n")}
  </div>
  <h2>Queues</h2>
  <table id="queues"><thead><tr><th>queue</th><th>shards</th><th>ready</th><th>waiting</th><th>in flight</th><th>dead letters</th></tr></thead><tbody></tbody></table>
  <h2>Groups in flight, parked, and next in line</h2>
  <table id="groups"><thead><tr><th>group</th><th>messages</th><th>priority</th><th>state</th><th>last claimed</th></tr></thead><tbody></tbody></table>
  <p id="groups-empty" class="empty" hidden>No messages in the queue.</p>
  <section id="group" class="group-panel" hidden aria-label="Group">
    <h3>Group <code id="group-name"></code>: its next messages</h3>
    <table id="group-messages"><thead><tr><th>seq</th><th>state</th><th>attempts</th><th>event</th><th>published</th></tr></thead><tbody></tbody></table>
    <p id="group-empty" class="empty" hidden>No messages in this group.</p>
    <p><button id="purge" type="button" class="danger">Purge this group</button> <button id="group-close" type="button">Close</button></p>
  </section>
  <h2>Dead letters</h2>
  <table id="dead-letters"><thead><tr><th>seq</th><th>group</th><th>event</th><th>attempts</th><th>reason</th><th>died</th><th></th></tr></thead><tbody></tbody></table>
  <p id="dead-empty" class="empty" hidden>No dead letters.</p>
  <p id="dead-more" class="empty" hidden>Showing the first 50.</p>
  <h2>Push subscriptions</h2>
  <table id="subscriptions"><thead><tr><th>name</th><th>url</th><th>min priority</th><th>max in flight</th><th>visibility</th></tr></thead><tbody></tbody></table>
  <p id="subscriptions-empty" class="empty" hidden>No subscriptions: consumers pull (see the API docs, PUT /v1/subscriptions/{name}, to push).</p>
</div>
<noscript><p class="error">The dashboard needs JavaScript.</p></noscript>
</div>`,
    base,
    "/assets/dashboard.js",
  );

/** The browser side. Every value from the API is put in the page as text (textContent), never as HTML. */
export const DASHBOARD_JS = `"use strict";
(() => {
  const KEY = "turso-queue-token";
  const COUNTERS = [
    ["ready", "ready"],
    ["waiting", "waiting behind their group"],
    ["in_flight", "in flight"],
    ["parked", "parked"],
    ["delayed", "delayed"],
    ["groups", "groups"],
    ["dead_letters", "dead letters"],
    ["subscriptions", "push subscriptions"],
    ["oldest_age", "oldest message's age"],
  ];
  const $ = (id) => document.getElementById(id);
${CHARTS_JS}
  // Where the app is mounted ("" at the root): every API path starts there.
  const BASE = document.body.dataset.base || "";
  let timer;
  let loading = false;
  // The group whose next messages are shown (null: none).
  let shownGroup = null;

  const token = () => sessionStorage.getItem(KEY);
  // The queue shown: kept in this tab, like the token; "default" is the one /v1/... serves.
  const QUEUE_KEY = "turso-queue-queue";
  const queue = () => sessionStorage.getItem(QUEUE_KEY) || "default";
  /** A route of the API in the queue shown: /v1/stats, or /v1/queues/emails/stats. */
  const inQueue = (path) => (queue() === "default" ? path : "/v1/queues/" + encodeURIComponent(queue()) + path.slice(3));

  class Unauthorized extends Error {}

  async function api(path, method = "GET") {
    const res = await fetch(BASE + path, { method, headers: { authorization: "Bearer " + token() }, cache: "no-store" });
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (res.status === 401) throw new Unauthorized(body && body.error ? body.error.message : "unauthorized");
    if (!res.ok) {
      throw new Error(body && body.error ? body.error.code + ": " + body.error.message : "HTTP " + res.status);
    }
    return body;
  }

  function showLogin(message) {
    clearInterval(timer);
    $("board").hidden = true;
    $("signout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").value = "";
    $("token").focus();
  }

  function showBoard() {
    $("login").hidden = true;
    $("board").hidden = false;
    $("signout").hidden = false;
    schedule();
  }

  function schedule() {
    clearInterval(timer);
    if ($("auto").checked) timer = setInterval(refresh, 10000);
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  /** An event as JSON text, cut at 200 characters (its first 2,000 on hover). */
  function eventCell(row, event) {
    const json = JSON.stringify(event);
    cell(row, json.length > 200 ? json.slice(0, 200) + "…" : json, "event").title = json.slice(0, 2000);
  }

  const time = (epoch) => (epoch ? new Date(epoch * 1000).toLocaleString() : "never");
  /** Seconds as a person reads them: 4.2 s, 12 min, 3.5 h. */
  const duration = (s) =>
    s < 60 ? Math.round(s * 10) / 10 + " s" : s < 3600 ? Math.round(s / 60) + " min" : Math.round(s / 360) / 10 + " h";

  function renderCounters(stats) {
    const box = $("counters");
    box.replaceChildren();
    const known = new Set(COUNTERS.map((c) => c[0]).concat(["now"]));
    // Counters the API adds later (subscriptions, ...) show up without a change here.
    const extra = Object.keys(stats).filter((k) => !known.has(k) && typeof stats[k] === "number");
    for (const [key, label] of COUNTERS.concat(extra.map((k) => [k, k.replace(/_/g, " ")]))) {
      if (typeof stats[key] !== "number" && !(key === "oldest_age" && key in stats)) continue;
      const div = document.createElement("div");
      div.className = "counter";
      div.dataset.counter = key;
      const value = document.createElement("span");
      value.className = "value";
      value.textContent = key === "oldest_age" ? (stats[key] === null ? "–" : duration(stats[key])) : String(stats[key]);
      if (stats[key] === 0) value.dataset.zero = "";
      const name = document.createElement("span");
      name.className = "label";
      name.textContent = label;
      div.append(value, name);
      box.appendChild(div);
    }
  }

  function renderGroups(groups) {
    const body = $("groups").querySelector("tbody");
    body.replaceChildren();
    for (const g of groups) {
      const row = document.createElement("tr");
      row.dataset.group = g.group_id;
      cell(row, g.group_id);
      cell(row, String(g.messages));
      cell(row, String(g.priority));
      const state = g.in_flight ? "in_flight" : g.parked ? "parked" : "idle";
      cell(row, state.replace("_", " "), "state-" + state);
      cell(row, time(g.last_claimed_at));
      row.title = "Show its next messages";
      row.addEventListener("click", () => showGroup(g.group_id));
      body.appendChild(row);
    }
    $("groups-empty").hidden = groups.length > 0;
  }

  const groupPath = (group) => inQueue("/v1/groups/" + encodeURIComponent(group) + "/messages");

  function showGroup(group) {
    shownGroup = group;
    refresh();
  }

  function renderGroup(peek) {
    $("group").hidden = peek === null;
    if (peek === null) return;
    $("group-name").textContent = shownGroup;
    const body = $("group-messages").querySelector("tbody");
    body.replaceChildren();
    for (const m of peek.messages) {
      const row = document.createElement("tr");
      row.dataset.seq = String(m.seq);
      cell(row, String(m.seq));
      cell(row, m.state.replace("_", " "), "state-" + m.state);
      cell(row, String(m.attempts));
      eventCell(row, m.event);
      cell(row, time(m.published_at));
      body.appendChild(row);
    }
    $("group-empty").hidden = peek.messages.length > 0;
    $("purge").disabled = peek.messages.length === 0;
  }

  async function purgeGroup() {
    const group = shownGroup;
    if (group === null) return;
    if (!confirm("Purge every message of group " + group + ", the one in flight too? This cannot be undone.")) return;
    $("purge").disabled = true;
    try {
      const answer = await api(groupPath(group), "DELETE");
      $("notice").textContent = "Purged " + answer.purged + " messages from group " + group + ".";
    } catch (e) {
      if (e instanceof Unauthorized) return showLogin("The API refused this token (401). Check QUEUE_TOKEN.");
      $("problem").textContent = "Could not purge " + group + ": " + e.message;
    }
    await refresh();
  }

  function renderDeadLetters(page) {
    const body = $("dead-letters").querySelector("tbody");
    body.replaceChildren();
    for (const d of page.dead_letters) {
      const row = document.createElement("tr");
      row.dataset.seq = String(d.seq);
      cell(row, String(d.seq));
      cell(row, d.group_id);
      eventCell(row, d.event);
      cell(row, String(d.attempts));
      cell(row, d.reason);
      cell(row, time(d.dead_at));
      const actions = cell(row, "");
      for (const [action, label] of [["redrive", "Redrive"], ["delete", "Delete"]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.textContent = label;
        button.dataset.action = action;
        if (action === "delete") button.className = "danger";
        button.addEventListener("click", () => act(action, d.seq, button));
        actions.appendChild(button);
        actions.append(" ");
      }
      body.appendChild(row);
    }
    $("dead-empty").hidden = page.dead_letters.length > 0;
    $("dead-more").hidden = page.next_after_seq === null;
  }

  function renderSubscriptions(list) {
    const body = $("subscriptions").querySelector("tbody");
    body.replaceChildren();
    for (const sub of list.subscriptions) {
      const row = document.createElement("tr");
      row.dataset.subscription = sub.name;
      cell(row, sub.name);
      cell(row, sub.url, "event");
      cell(row, String(sub.min_priority));
      cell(row, String(sub.max_in_flight));
      cell(row, sub.visibility + " s");
      body.appendChild(row);
    }
    $("subscriptions-empty").hidden = list.subscriptions.length > 0;
  }

  function renderQueues(list) {
    const select = $("queue");
    select.replaceChildren();
    const body = $("queues").querySelector("tbody");
    body.replaceChildren();
    for (const q of list.queues) {
      const option = document.createElement("option");
      option.value = q.name;
      option.textContent = q.shards > 1 ? q.name + " (" + q.shards + " shards)" : q.name;
      select.appendChild(option);
      const row = document.createElement("tr");
      row.dataset.queue = q.name;
      if (q.name === queue()) row.className = "chosen";
      cell(row, q.name);
      cell(row, String(q.shards));
      if (q.stats === null) {
        // Its databases did not answer: said in its row, the other queues shown as ever.
        const why = cell(row, "unreachable: " + q.error.code);
        why.colSpan = 4;
        why.title = q.error.message;
        row.dataset.unreachable = "";
      } else {
        cell(row, String(q.stats.ready));
        cell(row, String(q.stats.waiting));
        cell(row, String(q.stats.in_flight));
        cell(row, String(q.stats.dead_letters));
      }
      row.addEventListener("click", () => choose(q.name));
      body.appendChild(row);
    }
    select.value = queue();
  }

  function choose(name) {
    sessionStorage.setItem(QUEUE_KEY, name);
    shownGroup = null;
    refresh();
  }

  async function refresh() {
    if (loading || !token()) return;
    loading = true;
    try {
      const queues = await api("/v1/queues");
      // A queue deleted meanwhile: back to the default one.
      if (!queues.queues.some((q) => q.name === queue())) sessionStorage.removeItem(QUEUE_KEY);
      renderQueues(queues);
      const [stats, groups, dead, subs, history, peek] = await Promise.all([
        api(inQueue("/v1/stats")),
        api(inQueue("/v1/groups?limit=10")),
        api(inQueue("/v1/dead-letters?limit=50")),
        api(inQueue("/v1/subscriptions")),
        api(inQueue("/v1/history")),
        shownGroup === null ? null : api(groupPath(shownGroup) + "?limit=10"),
      ]);
      renderCounters({ ...stats, subscriptions: subs.subscriptions.length });
      renderCharts(history);
      renderGroup(peek);
      renderSubscriptions(subs);
      renderGroups(groups.groups);
      renderDeadLetters(dead);
      $("problem").textContent = "";
      $("updated").textContent = "updated " + new Date().toLocaleTimeString();
      if ($("board").hidden) showBoard();
    } catch (e) {
      if (e instanceof Unauthorized) {
        sessionStorage.removeItem(KEY);
        showLogin("The API refused this token (401): " + e.message + ". Check QUEUE_TOKEN and try again.");
      } else {
        $("problem").textContent = "Could not refresh: " + e.message;
      }
    } finally {
      loading = false;
    }
  }

  async function act(action, seq, button) {
    if (action === "delete" && !confirm("Delete dead letter " + seq + " for good?")) return;
    button.disabled = true;
    try {
      if (action === "redrive") {
        const answer = await api(inQueue("/v1/dead-letters/" + seq + "/redrive"), "POST");
        $("notice").textContent = "Dead letter " + seq + " redriven as message " + answer.seq + ".";
      } else {
        await api(inQueue("/v1/dead-letters/" + seq), "DELETE");
        $("notice").textContent = "Dead letter " + seq + " deleted.";
      }
    } catch (e) {
      if (e instanceof Unauthorized) return showLogin("The API refused this token (401). Check QUEUE_TOKEN.");
      $("problem").textContent = "Could not " + action + " " + seq + ": " + e.message;
    }
    await refresh();
  }

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(KEY, value);
    $("login-error").textContent = "";
    refresh();
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    showLogin("");
  });
  $("refresh").addEventListener("click", refresh);
  $("purge").addEventListener("click", purgeGroup);
  $("group-close").addEventListener("click", () => {
    shownGroup = null;
    renderGroup(null);
  });
  $("queue").addEventListener("change", (event) => choose(event.target.value));
  $("auto").addEventListener("change", schedule);

  if (token()) refresh();
  else showLogin("");
})();
`;
