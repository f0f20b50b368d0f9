/**
 * `GET /dashboard` and its script: the queues (a picker and their counts), then the chosen queue's
 * counters, its last hour in charts (src/app/pages/charts.ts), the groups worth watching (a group's
 * next messages, its flow settings and its pause, and its purge), the dead letters (redrive,
 * delete), the push subscriptions, the queue's flow settings and pause, and its schedules, refreshed
 * in place; with a key that may manage every queue, the keys (make one, its secret shown once;
 * revoke one). It reads and writes only through the `/v1` API with the key a person types in, and
 * offers only what that key may do (`GET /v1/whoami`); the key stays in this tab's sessionStorage
 * (never a URL, never a cookie).
 * Plain HTML and a plain script served by the Worker: no build step, nothing from a CDN.
 */
import { queueAllowed, SCOPES } from "../../rules.js";
import { CHARTS_JS } from "./charts.js";
import { esc, page } from "./html.js";

export const dashboardHtml = (base: string) =>
  page(
    "turso-queue dashboard",
    `<header><h1>turso-queue <small>dashboard</small></h1>
<nav class="links"><a href="${esc(base)}/docs">API docs</a><span id="whoami" hidden></span><button id="signout" type="button" hidden>Forget key</button></nav></header>
<div class="dash">
<form id="login" class="login" hidden>
  <h2>Key</h2>
  <p>A key with the <code>read</code> scope (<code>manage</code> to act on the queue and its keys), or the Worker's
  root key <code>QUEUE_TOKEN</code> (<code>npm start</code> prints the local one).
  It stays in this browser tab only (sessionStorage) and is sent to this Worker's <code>/v1</code> API, nowhere else.</p>
  <p><input id="token" name="token" type="password" autocomplete="off" required aria-label="Key">
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
  <section id="flow" class="flow" aria-label="Flow control">
    <span id="paused-badge" class="badge" hidden>paused</span>
    <span id="flow-settings"></span>
    <button id="pause-queue" type="button">Pause queue</button>
  </section>
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
    <p id="group-flow"><span id="group-paused-badge" class="badge" hidden>paused</span> <span id="group-settings"></span> <button id="pause-group" type="button">Pause group</button></p>
    <p><button id="purge" type="button" class="danger">Purge this group</button> <button id="group-close" type="button">Close</button></p>
  </section>
  <h2>Dead letters</h2>
  <table id="dead-letters"><thead><tr><th>seq</th><th>group</th><th>event</th><th>attempts</th><th>reason</th><th>died</th><th></th></tr></thead><tbody></tbody></table>
  <p id="dead-empty" class="empty" hidden>No dead letters.</p>
  <p id="dead-more" class="empty" hidden>Showing the first 50.</p>
  <h2>Push subscriptions</h2>
  <table id="subscriptions"><thead><tr><th>name</th><th>url</th><th>min priority</th><th>max in flight</th><th>visibility</th></tr></thead><tbody></tbody></table>
  <p id="subscriptions-empty" class="empty" hidden>No subscriptions: consumers pull (see the API docs, PUT /v1/subscriptions/{name}, to push).</p>
  <h2>Schedules</h2>
  <table id="schedules"><thead><tr><th>name</th><th>group</th><th>when</th><th>next run</th><th>runs</th></tr></thead><tbody></tbody></table>
  <p id="schedules-empty" class="empty" hidden>No schedules (see the API docs, PUT /v1/schedules/{name}).</p>
  <section id="keys-panel" hidden aria-label="Keys">
    <h2>Keys</h2>
    <table id="keys"><thead><tr><th>name</th><th>id</th><th>scopes</th><th>queues</th><th>made</th><th>expires</th><th>last used</th><th></th></tr></thead><tbody></tbody></table>
    <p id="keys-empty" class="empty" hidden>No keys yet: every client uses the root key.</p>
    <form id="new-key-form" class="key-form">
      <h3>Make a key</h3>
      <p><label>name <input id="key-name" type="text" required maxlength="64" placeholder="checkout function"></label></p>
      <p>scopes ${SCOPES.map((sc) => `<label><input type="checkbox" name="scope" value="${sc}"> ${sc}</label>`).join(" ")}</p>
      <p><label>queues <input id="key-queues" type="text" placeholder="every queue (or: billing, tenant-*)"></label></p>
      <p><label>expires after <input id="key-days" type="number" min="1" step="1" placeholder="never"> days</label></p>
      <p><button type="submit">Make the key</button> <span id="key-error" class="error" role="alert"></span></p>
    </form>
    <div id="new-key" class="new-key" hidden role="status">
      <p>The new key, shown this once (only a hash of it is kept): copy it now.</p>
      <pre id="new-key-secret"></pre>
      <p><button id="new-key-done" type="button">I have copied it</button></p>
    </div>
  </section>
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
  // What the key may do (GET /v1/whoami), asked once per key: only what it may do is offered.
  let grant = null;
  const queueAllowed = ${queueAllowed.toString()};
  const can = (scope, q) =>
    grant !== null && grant.scopes.includes(scope) && (q === undefined ? grant.queues === null : queueAllowed(grant.queues || undefined, q));
  // The queue shown: kept in this tab, like the token; "default" is the one /v1/... serves.
  const QUEUE_KEY = "turso-queue-queue";
  const queue = () => sessionStorage.getItem(QUEUE_KEY) || "default";
  /** A route of the API in the queue shown: /v1/stats, or /v1/queues/emails/stats. */
  const inQueue = (path) => (queue() === "default" ? path : "/v1/queues/" + encodeURIComponent(queue()) + path.slice(3));

  class Unauthorized extends Error {}

  async function api(path, method = "GET", json) {
    const headers = { authorization: "Bearer " + token() };
    if (json !== undefined) headers["content-type"] = "application/json";
    const sent = json === undefined ? undefined : JSON.stringify(json);
    const res = await fetch(BASE + path, { method, headers, body: sent, cache: "no-store" });
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
    grant = null;
    $("whoami").hidden = true;
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
    $("purge").hidden = !can("manage", queue());
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
      if (e instanceof Unauthorized) return showLogin("The API refused this key (401): " + e.message);
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
      // Redrive and delete need the manage scope on this queue: not offered without it.
      for (const [action, label] of can("manage", queue()) ? [["redrive", "Redrive"], ["delete", "Delete"]] : []) {
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

  const shortTime = (epoch) => (epoch === null ? "never" : new Date(epoch * 1000).toLocaleString());

  function renderKeys(list) {
    const body = $("keys").querySelector("tbody");
    body.replaceChildren();
    for (const k of list.keys) {
      const row = document.createElement("tr");
      row.dataset.key = k.id;
      cell(row, k.name);
      cell(row, k.id);
      cell(row, k.scopes.join(", "));
      cell(row, k.queues === null ? "every queue" : k.queues.join(", "));
      cell(row, shortTime(k.created_at));
      cell(row, shortTime(k.expires_at));
      cell(row, shortTime(k.last_used_at));
      const revoke = document.createElement("button");
      revoke.type = "button";
      revoke.className = "danger";
      revoke.textContent = "Revoke";
      revoke.addEventListener("click", () => revokeKey(k, revoke));
      cell(row, "").appendChild(revoke);
      body.appendChild(row);
    }
    $("keys-empty").hidden = list.keys.length > 0;
  }

  async function revokeKey(k, button) {
    if (!confirm("Revoke key " + k.name + " (" + k.id + ")? Whoever holds it is refused from now on.")) return;
    button.disabled = true;
    try {
      await api("/v1/keys/" + encodeURIComponent(k.id), "DELETE");
      $("notice").textContent = "Key " + k.name + " revoked.";
    } catch (e) {
      if (e instanceof Unauthorized) return showLogin("The API refused this key (401): " + e.message);
      $("problem").textContent = "Could not revoke " + k.name + ": " + e.message;
    }
    await refresh();
  }

  async function makeKey(event) {
    event.preventDefault();
    const scopes = Array.from(document.querySelectorAll("input[name=scope]:checked"), (i) => i.value);
    const queues = $("key-queues").value.split(",").map((q) => q.trim()).filter(Boolean);
    const days = $("key-days").value.trim();
    const request = { name: $("key-name").value.trim(), scopes };
    if (queues.length > 0) request.queues = queues;
    if (days !== "") request.expires_in = Math.round(Number(days) * 86400);
    $("key-error").textContent = "";
    try {
      const made = await api("/v1/keys", "POST", request);
      $("new-key-secret").textContent = made.key;
      $("new-key").hidden = false;
      $("new-key-form").reset();
    } catch (e) {
      if (e instanceof Unauthorized) return showLogin("The API refused this key (401): " + e.message);
      $("key-error").textContent = e.message;
    }
    await refresh();
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
      if (grant === null) {
        grant = await api("/v1/whoami");
        $("whoami").textContent = "key " + grant.id + ": " + grant.scopes.join(", ") + (grant.queues ? " on " + grant.queues.join(", ") : "");
        $("whoami").hidden = false;
      }
      if (!grant.scopes.includes("read")) {
        const has = grant.scopes.join(", ");
        sessionStorage.removeItem(KEY);
        showLogin("This key may not read queues (it has " + has + "): the dashboard needs a key with the read scope.");
        return;
      }
      const queues = await api("/v1/queues");
      // A queue deleted meanwhile, or one this key may not see: the first it may.
      if (!queues.queues.some((q) => q.name === queue())) {
        if (queues.queues.length > 0) sessionStorage.setItem(QUEUE_KEY, queues.queues[0].name);
        else sessionStorage.removeItem(QUEUE_KEY);
      }
      renderQueues(queues);
      const [stats, groups, dead, subs, history, peek, flow] = await Promise.all([
        api(inQueue("/v1/stats")),
        api(inQueue("/v1/groups?limit=10")),
        api(inQueue("/v1/dead-letters?limit=50")),
        api(inQueue("/v1/subscriptions")),
        api(inQueue("/v1/history")),
        shownGroup === null ? null : api(groupPath(shownGroup) + "?limit=10"),
        loadFlow(),
      ]);
      renderFlow(flow);
      renderCounters({ ...stats, subscriptions: subs.subscriptions.length });
      renderCharts(history);
      renderGroup(peek);
      renderSubscriptions(subs);
      renderGroups(groups.groups);
      renderDeadLetters(dead);
      // Keys are everyone's: managed only with manage on every queue.
      $("keys-panel").hidden = !can("manage");
      if (can("manage")) renderKeys(await api("/v1/keys"));
      $("problem").textContent = "";
      $("updated").textContent = "updated " + new Date().toLocaleTimeString();
      if ($("board").hidden) showBoard();
    } catch (e) {
      if (e instanceof Unauthorized) {
        sessionStorage.removeItem(KEY);
        showLogin("The API refused this key (401): " + e.message + ". Check it and try again.");
      } else {
        $("problem").textContent = "Could not refresh: " + e.message;
      }
    } finally {
      loading = false;
    }
  }

  // Flow control: the queue's settings and pause, a shown group's, the schedules.

  async function send(path, method, body) {
    const res = await fetch(BASE + path, {
      method,
      headers: { authorization: "Bearer " + token(), "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await res.json().catch(() => null);
    if (res.status === 401) throw new Unauthorized("unauthorized");
    if (!res.ok) throw new Error(answer && answer.error ? answer.error.code + ": " + answer.error.message : "HTTP " + res.status);
    return answer;
  }

  const groupFlowPath = (group) => inQueue("/v1/groups/" + encodeURIComponent(group));
  const rateText = (r) => (r ? r.limit + " per " + r.period + " s" + (r.burst > 1 ? " (burst " + r.burst + ")" : "") : "no rate");

  async function loadFlow() {
    const [settings, schedules, group] = await Promise.all([
      api(inQueue("/v1/settings")),
      api(inQueue("/v1/schedules")),
      shownGroup === null ? null : api(groupFlowPath(shownGroup)),
    ]);
    return { settings, schedules, group };
  }

  function renderFlow(flow) {
    const s = flow.settings;
    $("paused-badge").hidden = !s.paused;
    $("pause-queue").textContent = s.paused ? "Resume queue" : "Pause queue";
    $("pause-queue").dataset.paused = s.paused ? "true" : "false";
    $("flow-settings").textContent = "per group: " + s.group_concurrency + " at once, " + rateText(s.group_rate);
    const g = flow.group;
    if (g) {
      $("group-paused-badge").hidden = !g.paused;
      $("pause-group").textContent = g.paused ? "Resume group" : "Pause group";
      $("pause-group").dataset.paused = g.paused ? "true" : "false";
      $("group-settings").textContent =
        g.concurrency + " at once, " + rateText(g.rate) +
        (g.rate_limited_until ? ", held by its rate until " + new Date(g.rate_limited_until * 1000).toLocaleTimeString() : "");
    }
    const body = $("schedules").querySelector("tbody");
    body.replaceChildren();
    for (const sc of flow.schedules.schedules) {
      const row = document.createElement("tr");
      row.dataset.schedule = sc.name;
      cell(row, sc.name);
      cell(row, sc.group_id);
      cell(row, sc.cron !== null ? sc.cron + (sc.time_zone ? " (" + sc.time_zone + ")" : " (UTC)") : "every " + duration(sc.every));
      cell(row, sc.paused ? "paused" : time(sc.next_at), "next-run");
      cell(row, String(sc.runs));
      body.appendChild(row);
    }
    $("schedules-empty").hidden = flow.schedules.schedules.length > 0;
  }

  async function togglePause(button, path, what) {
    const paused = button.dataset.paused !== "true";
    button.disabled = true;
    try {
      await send(path, "PUT", { paused });
      $("notice").textContent = (paused ? "Paused " : "Resumed ") + what + ".";
    } catch (e) {
      if (e instanceof Unauthorized) return showLogin("The API refused this token (401). Check QUEUE_TOKEN.");
      $("problem").textContent = "Could not change " + what + ": " + e.message;
    } finally {
      button.disabled = false;
    }
    await refresh();
  }

  $("pause-queue").addEventListener("click", () => togglePause($("pause-queue"), inQueue("/v1/settings"), "queue " + queue()));
  $("pause-group").addEventListener("click", () =>
    togglePause($("pause-group"), groupFlowPath(shownGroup), "group " + shownGroup),
  );

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
      if (e instanceof Unauthorized) return showLogin("The API refused this key (401): " + e.message);
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
  $("new-key-form").addEventListener("submit", makeKey);
  $("new-key-done").addEventListener("click", () => {
    $("new-key-secret").textContent = "";
    $("new-key").hidden = true;
  });
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
