// The operator's page (iapeer ui): reads and drives the team through the fleet API
// (/fleet/v1, docs/FLEET.md). No framework, no build step; served by the daemon itself.
// Every request carries the page's cookie (set by /ui/?k=…) and the X-Iapeer-UI header.
"use strict";

const state = {
  snapshot: null, // the last GET /fleet/v1/snapshot
  selected: null, // the selected peer's name
  inbox: null, // the last GET /fleet/v1/inbox (null: no human peer)
  human: null, // whose inbox, picked when the team has several people (null: the only one)
  signedOut: false,
};

const $ = (id) => document.getElementById(id);

// What a peer or an agent wrote (a description, a message, a command, a logged value) is put
// on the page as text (never HTML) through `visible`, the page's copy of src/visible.rs: a C0
// control as its control picture (ESC ␛, CR ␍, BEL ␇, NUL ␀; in one-line text TAB ␉ and a
// line break ␤), DEL ␡, a C1 control, a bidi control (U+202A–U+202E, U+2066–U+2069, U+200E,
// U+200F, U+061C) or U+2028/U+2029 as <U+XXXX>, so nothing reorders or hides what is shown.
// `lines`: a multi-line text (a message body, a command) keeps its line breaks and tabs.
const ACTS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

function visible(value, lines) {
  const s = value === null || value === undefined ? "" : String(value);
  return s.replace(ACTS, (c) => {
    const n = c.charCodeAt(0);
    if (lines && (c === "\n" || c === "\t")) return c;
    if (c === "\n") return "\u2424";
    if (n < 0x20) return String.fromCharCode(0x2400 + n);
    if (n === 0x7f) return "\u2421";
    return "<U+" + n.toString(16).toUpperCase().padStart(4, "0") + ">";
  });
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c);
  }
  return e;
}

// One fleet request: {status, ok, body}. A 401 means this browser is not signed in to the
// running daemon (its key changes at every start): the page says to run `iapeer ui`.
async function api(path, options) {
  const opts = options || {};
  const headers = { "X-Iapeer-UI": "1" };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  let r;
  try {
    r = await fetch(path, {
      method: opts.method || "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (e) {
    setConn("down", "daemon not answering");
    return { status: 0, ok: false, body: { error: "the daemon does not answer: " + e } };
  }
  let body;
  try {
    body = await r.json();
  } catch (_) {
    body = { error: r.status + " " + r.statusText };
  }
  if (r.status === 401) signedOut(body.error);
  return { status: r.status, ok: r.ok, body };
}

function signedOut(why) {
  if (state.signedOut) return;
  state.signedOut = true;
  const b = $("auth");
  b.textContent = visible(why || "This page is not signed in to the running daemon.") +
    " Run `iapeer ui` in a terminal to open it again.";
  b.hidden = false;
  setConn("down", "signed out");
  if (state.events) state.events.close();
}

function setConn(s, text) {
  const c = $("conn");
  c.dataset.state = s;
  c.textContent = text;
}

// A time as `iapeer logs` and `iapeer inbox` show one: 24-hour `HH:MM:SS` today, else
// `YYYY-MM-DD HH:MM:SS` (this browser's time zone).
function clock(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  if (isNaN(d)) return String(ts);
  const two = (n) => String(n).padStart(2, "0");
  const time = two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return time;
  return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " + time;
}

// A result line: its text may quote what a peer wrote (an error, a command), so it is shown
// through `visible`, one line.
function showResult(node, ok, text) {
  node.className = "result " + (ok ? "ok" : "error");
  node.textContent = visible(text);
  node.title = "";
}

// ---- the peer list -------------------------------------------------------------------

async function loadSnapshot() {
  const r = await api("/fleet/v1/snapshot");
  if (!r.ok) return;
  state.snapshot = r.body;
  renderHost(r.body.host);
  renderPeers(r.body.peers || []);
  renderNotices(r.body.notices || []);
  renderRemote(r.body.remote || []);
  renderRecipients(r.body.peers || [], r.body.remote || []);
  renderHumans(r.body.peers || []);
}

function renderHost(h) {
  if (!h) return;
  $("host").textContent = "daemon " + h.version + " · pid " + h.pid + " · up " + h.uptimeSecs + " s";
}

// What the list shows of the rows: a redraw only when it changes (a redraw replaces the
// buttons, and a click landing on a replaced one would be lost).
let shownPeers = "";

// Each runtime's buttons are the verbs the daemon says work on it in its state (`actions` of
// the snapshot's rows, docs/FLEET.md): none of them is decided here. A runtime the daemon
// cannot start says why (`problem`) under the row.
function renderPeers(peers) {
  const shown = JSON.stringify(peers.map((p) => [p.personality, p.intelligence, p.description,
    (p.runtimes || []).map((r) => [r.runtime, r.status, r.problem, r.queue_depth, (r.notices || []).length,
      r.actions])]));
  if (shown === shownPeers) return;
  shownPeers = shown;
  const tbody = $("peers").tBodies[0];
  tbody.replaceChildren();
  for (const p of peers) {
    const tr = el("tr", { "data-peer": p.personality });
    if (p.personality === state.selected) tr.classList.add("selected");
    tr.addEventListener("click", () => select(p.personality));
    tr.append(el("td", {}, el("strong", {}, p.personality), el("div", { class: "desc" },
      visible(p.intelligence + (p.description ? " · " + p.description : "")))));
    const states = el("td", { class: "states" });
    let queue = 0;
    let notices = 0;
    const runtimes = p.runtimes || [];
    for (const rt of runtimes) {
      const s = el("span", { class: "state", "data-runtime": rt.runtime, "data-status": rt.status },
        visible(symbol(rt.status) + " " + rt.runtime + " " + rt.status));
      states.append(s);
      queue += rt.queue_depth || 0;
      notices += (rt.notices || []).length;
    }
    for (const rt of runtimes.filter((r) => r.problem)) {
      states.append(el("div", { class: "problem", "data-runtime": rt.runtime },
        visible((runtimes.length > 1 ? rt.runtime + ": " : "") + rt.problem)));
    }
    tr.append(states);
    tr.append(el("td", { class: "queue", "data-label": "queue" }, queue ? String(queue) : ""));
    tr.append(el("td", { class: "notices", "data-label": "notices" }, notices ? String(notices) : ""));
    const actions = el("td", { class: "actions" });
    for (const rt of runtimes.filter((r) => (r.actions || []).length)) {
      const group = el("span", { class: "verbs", "data-runtime": rt.runtime });
      if (runtimes.length > 1) group.append(el("span", { class: "muted" }, visible(rt.runtime + ":")));
      for (const verb of rt.actions) {
        const b = el("button", { type: "button", "data-verb": verb, "data-peer": p.personality,
          "data-runtime": rt.runtime }, verb);
        b.addEventListener("click", (ev) => {
          ev.stopPropagation();
          lifecycle(p.personality, rt.runtime, verb, b);
        });
        group.append(b);
      }
      actions.append(group);
    }
    tr.append(actions);
    tbody.append(tr);
  }
}

// The other hosts' peers (the snapshot's `remote`, issue 28): one block per host saying
// whether it is online, each peer with its state, runtimes and description, and a button that
// writes to it (`name@host` in the compose box). Redrawn only when they change.
let shownRemote = "";

function renderRemote(remote) {
  const shown = JSON.stringify(remote);
  if (shown === shownRemote) return;
  shownRemote = shown;
  $("remote-section").hidden = remote.length === 0;
  const hosts = [];
  for (const p of remote) {
    let h = hosts.find((x) => x.host === p.host);
    if (!h) hosts.push(h = { host: p.host, online: p.host_online, peers: [] });
    h.peers.push(p);
  }
  $("remote").replaceChildren(...hosts.map((h) => el("div", { class: "host", "data-host": h.host,
    "data-online": String(h.online) },
    el("h3", {}, visible(h.host + " "), el("span", { class: h.online ? "online" : "offline" },
      h.online ? "online" : "offline")),
    el("ul", {}, ...h.peers.map((p) => {
      const write = el("button", { type: "button", "data-write": p.address }, "write");
      write.addEventListener("click", () => {
        $("to").value = p.address;
        $("message").focus();
      });
      return el("li", { "data-address": p.address, "data-state": p.state },
        el("strong", {}, visible(p.address)),
        el("span", { class: "state", "data-status": p.state }, visible(" " + p.state)),
        el("span", { class: "muted" }, visible(" · " + (p.runtimes || []).join(", ") + " · " +
          p.intelligence + (p.description ? " · " + p.description : ""))),
        " ", write);
    })))));
}

function symbol(status) {
  return { live: "●", asleep: "○", stopped: "✕", parked: "◌", booting: "◐", missing: "!" }[status] || "·";
}

// `list` holds one `render(item)` per item, or the muted line `empty` when there is none.
function fillList(list, items, empty, render) {
  list.replaceChildren(...(items.length ? items.map(render) : [el("li", { class: "none" }, empty)]));
}

function renderNotices(notices) {
  fillList($("notices"), notices, "none", (n) => el("li", { "data-notice": n.id },
    el("strong", {}, visible(n.identity)), visible(" " + n.kind + " ×" + n.count + " — " + n.text),
    n.resetsAt ? visible(" (resets " + clock(n.resetsAt) + ")") : ""));
}

async function lifecycle(peer, runtime, verb, button) {
  const out = $("action-result");
  button.disabled = true;
  showResult(out, true, verb + " " + peer + "…");
  const r = await api("/fleet/v1/peers/" + encodeURIComponent(peer) + "/" + verb,
    { method: "POST", body: { runtime } });
  button.disabled = false;
  if (r.ok) {
    // The reply's fields (pids, what was cleared…) stay one hover away, not in the line.
    showResult(out, true, verb + " " + peer + ": done");
    out.title = visible(JSON.stringify(r.body));
  } else {
    showResult(out, false, verb + " " + peer + " failed: " + (r.body.error || r.status));
  }
  refreshSoon();
}

// ---- one peer: its events and its screen -----------------------------------------------

function select(peer) {
  state.selected = peer;
  $("peer-name").textContent = peer;
  for (const tr of $("peers").tBodies[0].rows) {
    tr.classList.toggle("selected", tr.dataset.peer === peer);
  }
  $("to").value = peer;
  loadPeer();
  loadScreen();
}

async function loadPeer() {
  const peer = state.selected;
  if (!peer) return;
  const r = await api("/fleet/v1/peers/" + encodeURIComponent(peer));
  if (peer !== state.selected) return;
  const ol = $("events");
  ol.replaceChildren();
  if (!r.ok) {
    ol.append(el("li", { class: "none" }, visible(r.body.error || "cannot read the peer")));
    return;
  }
  // Each as `iapeer logs` prints it (its `text`, made by the daemon); what `logs` hides
  // (routine bookkeeping) has none and is left out.
  const events = (r.body.events || []).filter((e) => e.text).reverse();
  fillList(ol, events, "none yet", (e) => el("li", { "data-ev": e.ev || "" }, visible(e.text)));
}

// The runtime whose screen to show: the live one, else the default.
function screenRuntime(peer) {
  const row = ((state.snapshot && state.snapshot.peers) || []).find((p) => p.personality === peer);
  if (!row) return null;
  const live = (row.runtimes || []).find((r) => r.status === "live" || r.status === "booting");
  return live ? live.runtime : row.default_runtime;
}

async function loadScreen() {
  const peer = state.selected;
  if (!peer) return;
  const rt = screenRuntime(peer);
  const q = rt ? "?runtime=" + encodeURIComponent(rt) : "";
  const r = await api("/fleet/v1/peers/" + encodeURIComponent(peer) + "/screen" + q);
  if (peer !== state.selected) return;
  const pre = $("screen");
  if (r.ok) {
    $("screen-id").textContent = visible(r.body.identity);
    pre.textContent = trimBlankEnd(r.body.rows || []).map((row) => visible(row)).join("\n");
    pre.dataset.live = "true";
  } else {
    $("screen-id").textContent = rt ? rt + "-" + peer : "";
    pre.textContent = visible("(" + (r.body.error || "no screen") + ")");
    pre.dataset.live = "false";
  }
}

function trimBlankEnd(rows) {
  let n = rows.length;
  while (n > 0 && rows[n - 1] === "") n -= 1;
  return rows.slice(0, n);
}

// ---- the human's inbox and the compose box ----------------------------------------------

let shownInbox = "";

// Several people on the team (several peers on the human runtime): a picker says whose inbox
// is shown and whom the page writes as; with one person it stays hidden.
function renderHumans(peers) {
  const pick = $("human");
  const humans = peers.filter((p) => (p.runtimes || []).some((r) => r.runtime === "human"))
    .map((p) => p.personality);
  if (humans.length < 2) {
    pick.hidden = true;
    pick.replaceChildren();
    state.human = null;
    return;
  }
  if (!humans.includes(state.human)) state.human = humans[0];
  const shown = Array.from(pick.options).map((o) => o.value);
  if (JSON.stringify(shown) !== JSON.stringify(humans)) {
    pick.replaceChildren(...humans.map((h) => el("option", { value: h }, visible(h))));
  }
  pick.value = state.human;
  pick.hidden = false;
}

async function loadInbox() {
  const r = await api(state.human ? "/fleet/v1/inbox?peer=" + encodeURIComponent(state.human) : "/fleet/v1/inbox");
  const ol = $("inbox");
  if (!r.ok) {
    shownInbox = "";
    ol.replaceChildren();
    state.inbox = null;
    $("inbox-name").textContent = "";
    $("from").textContent = "";
    ol.append(el("li", { class: "none" }, visible(r.body.error || "no inbox")));
    return;
  }
  state.inbox = r.body;
  const shown = JSON.stringify([r.body.peer, r.body.unread, (r.body.records || []).map((m) => [m.id, m.unread])]);
  if (shown === shownInbox) return;
  shownInbox = shown;
  $("inbox-name").textContent = visible("— " + r.body.peer + " (" + r.body.unread + " unread)");
  $("from").textContent = visible("as " + r.body.identity);
  const records = (r.body.records || []).slice().reverse();
  fillList(ol, records, "no messages yet", (m) => {
    const reply = el("button", { type: "button", class: "reply" }, "reply");
    reply.addEventListener("click", () => answer(m));
    return el("li", { class: m.unread ? "unread" : "", "data-id": m.id },
      el("div", { class: "who" }, visible(clock(m.received) + "  " + m.from + " (" + m.runtime + ")" +
        (m.topic ? "  topic: " + m.topic : ""))),
      // A CR LF line break is a line break, as `iapeer inbox` shows it; a CR alone is ␍.
      el("div", { class: "body" }, visible((m.body || "").replace(/\r\n/g, "\n"), true)),
      ...(m.attachments || []).map((a) => el("div", { class: "muted" }, visible("attachment: " + a))),
      reply);
  });
}

function answer(m) {
  $("to").value = m.from;
  $("topic").value = m.topic || "";
  $("message").focus();
}

// This host's peers by name, then each other host's as `name@host` in a group of its own.
function renderRecipients(peers, remote) {
  const to = $("to");
  const keep = to.value;
  const groups = [];
  for (const p of remote) {
    let g = groups.find((x) => x.label === "host " + p.host);
    if (!g) groups.push(g = el("optgroup", { label: "host " + p.host }));
    g.append(el("option", { value: p.address }, visible(p.address)));
  }
  to.replaceChildren(...peers.map((p) => el("option", { value: p.personality }, p.personality)), ...groups);
  const names = peers.map((p) => p.personality).concat(remote.map((p) => p.address));
  if (keep && names.includes(keep)) to.value = keep;
}

async function send(ev) {
  ev.preventDefault();
  const out = $("send-result");
  const body = { personality: $("to").value, message: $("message").value };
  const topic = $("topic").value.trim();
  if (topic) body.topic = topic;
  if (state.inbox) body.from = state.inbox.identity;
  if (!body.personality || !body.message.trim()) {
    showResult(out, false, "choose a peer and write a message");
    return;
  }
  $("send").disabled = true;
  showResult(out, true, "sending to " + body.personality + "…");
  const r = await api("/fleet/v1/send", { method: "POST", body });
  $("send").disabled = false;
  if (r.ok) {
    const res = r.body.result || {};
    const to = res.delivered_to || {};
    // A peer of another host is named as it was written to: name@host.
    const host = body.personality.includes("@") && !String(to.personality).includes("@")
      ? "@" + body.personality.split("@")[1] : "";
    showResult(out, true, (res.queued ? "queued for " : "delivered to ") + to.personality + host +
      " (" + to.runtime + ")" + (res.woke ? ", woken" : ""));
    $("message").value = "";
  } else {
    showResult(out, false, "not sent: " + (r.body.error || r.status));
  }
  refreshSoon();
}

// ---- pending approvals ----------------------------------------------------------------------

// GET /fleet/v1/approvals: the permission prompts waiting for a human, oldest
// first (docs/FLEET.md "Approvals"). The list is redrawn only when its ids change (a redraw
// would drop a reason being typed and a click on a replaced button); the times tick in place.
let shownApprovals = "";

async function loadApprovals() {
  const r = await api("/fleet/v1/approvals");
  if (!r.ok) {
    if (r.status === 401) return;
    shownApprovals = "";
    $("approvals").replaceChildren(el("li", { class: "none" },
      visible("cannot read the approvals: " + (r.body.error || r.status))));
    return;
  }
  renderApprovals(r.body.approvals || []);
}

function renderApprovals(items) {
  const shown = JSON.stringify(items.map((a) => a.id));
  if (shown === shownApprovals) {
    tickApprovals();
    return;
  }
  shownApprovals = shown;
  fillList($("approvals"), items, "none", (a) => {
    const reason = el("input", { type: "text", class: "reason", placeholder: "reason (optional)" });
    const approve = el("button", { type: "button", class: "approve", "data-decide": "approve" }, "Approve");
    const deny = el("button", { type: "button", class: "deny", "data-decide": "deny" }, "Deny");
    approve.addEventListener("click", () => decide(a, true, null, [approve, deny]));
    deny.addEventListener("click", () => decide(a, false, reason.value.trim(), [approve, deny]));
    return el("li", { class: "approval", "data-id": a.id },
      el("div", {}, el("strong", {}, visible(a.personality)), visible(" (" + a.runtime + ") wants "),
        el("strong", {}, visible(a.tool))),
      el("pre", { class: "summary" }, visible(a.summary, true)),
      el("div", { class: "when muted", "data-created": String(a.created_ms),
        "data-deadline": String(a.deadline_ms) }, ages(a.created_ms, a.deadline_ms)),
      el("div", { class: "row" }, reason, el("span", {}, approve, deny)));
  });
}

// "asked 12 s ago · denied unanswered in 4 min 48 s".
function ages(created, deadline) {
  const now = Date.now();
  return "asked " + span(now - created) + " ago · denied unanswered in " + span(deadline - now) +
    " (at " + clock(deadline) + ")";
}

function span(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + " s";
  return Math.floor(s / 60) + " min " + (s % 60) + " s";
}

function tickApprovals() {
  for (const w of document.querySelectorAll("#approvals .when")) {
    w.textContent = ages(Number(w.dataset.created), Number(w.dataset.deadline));
  }
}

// POST /fleet/v1/approvals/<id>/(approve|deny), the deny with its reason if one was typed.
async function decide(a, allow, reason, buttons) {
  const out = $("approval-result");
  const verb = allow ? "approve" : "deny";
  buttons.forEach((b) => { b.disabled = true; });
  showResult(out, true, verb + " " + a.id + "…");
  const body = !allow && reason ? { reason } : {};
  const r = await api("/fleet/v1/approvals/" + encodeURIComponent(a.id) + "/" + verb,
    { method: "POST", body });
  buttons.forEach((b) => { b.disabled = false; });
  if (r.ok) {
    // `detail` says what became of the answer (taken, asked again, not confirmed…).
    const taken = !r.body.outcome || ["handed", "taken"].includes(r.body.outcome.kind);
    const said = taken ? (allow ? "approved " : "denied ") : (allow ? "approve " : "deny ");
    showResult(out, taken, said + a.id + " (" + r.body.identity + "): " +
      a.tool + " " + a.summary + (r.body.detail ? " — " + r.body.detail : ""));
  } else {
    showResult(out, false, verb + " " + a.id + " failed: " + (r.body.error || r.status));
  }
  loadApprovals();
}

// ---- live updates -------------------------------------------------------------------------

let refreshTimer = null;

// Refetch what events may have changed, at most every 300 ms.
function refreshSoon() {
  if (refreshTimer || state.signedOut) return;
  refreshTimer = setTimeout(async () => {
    refreshTimer = null;
    await loadSnapshot();
    await Promise.all([loadPeer(), loadScreen(), loadInbox(), loadApprovals()]);
  }, 300);
}

function connectEvents() {
  const es = new EventSource("/fleet/v1/events");
  state.events = es;
  es.onopen = () => setConn("live", "live");
  es.onmessage = refreshSoon;
  es.onerror = () => {
    if (state.signedOut) return;
    setConn("down", "reconnecting…");
    // A closed stream (e.g. 401) is not retried by the browser: ask why, then reconnect.
    if (es.readyState === EventSource.CLOSED) {
      setTimeout(async () => {
        const r = await api("/fleet/v1/snapshot");
        if (r.status !== 401) connectEvents();
      }, 2000);
    }
  };
  // Every event of the stream has its own type (its `ev`): listen to the known ones and
  // refresh on each; the snapshot stays the state, events are hints (docs/FLEET.md).
  for (const type of ["delivery", "delivery-followup", "deliver-attempt", "deliver-failed", "ready",
    "wake", "wake-failed", "session-end", "session-exit", "stop", "start", "new", "interrupt",
    "compact", "self-fresh", "always-on", "ephemeral", "notice-raised", "notice-cleared",
    "origin-hold", "storm", "runtime-installed", "failure-notice", "event", "peers", "rename",
    "recovered", "limit", "ready-gate", "delivery-unconfirmed", "busy-refused"]) {
    es.addEventListener(type, refreshSoon);
  }
  // A prompt asked, answered or closed on its screen: the approvals at once (the rest may
  // follow).
  for (const type of ["approval-requested", "approval-approved", "approval-denied",
    "approval-closed"]) {
    es.addEventListener(type, () => {
      loadApprovals();
      refreshSoon();
    });
  }
}

async function start() {
  $("compose").addEventListener("submit", send);
  $("human").addEventListener("change", () => {
    state.human = $("human").value;
    shownInbox = "";
    loadInbox();
  });
  await loadSnapshot();
  if (state.signedOut) return;
  await Promise.all([loadInbox(), loadApprovals()]);
  connectEvents();
  // A slow safety net: the screen has no events of its own, and a missed event heals.
  setInterval(() => { if (state.selected && !state.signedOut) loadScreen(); }, 2000);
  setInterval(() => refreshSoon(), 15000);
  setInterval(tickApprovals, 1000);
}

document.addEventListener("DOMContentLoaded", start);
