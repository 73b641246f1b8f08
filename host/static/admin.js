// The operator's view of one host: its metrics at a glance and its live sessions (state, seats,
// who holds them), and ending a session (a logged `aborted: "admin"` end). Everything comes from
// the host's /admin/api/... (host/net/admin.py), sent with the admin token when the host asks
// for one (`serve --admin-token`); without one the host answers this machine only. Every string
// from the host goes into the page as text.
import { clear, el } from "./common.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 2000;
const TOKEN_KEY = "gamehost-admin-token";
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let pages = [null]; // the `after` of each page shown (null: the first)
let last = null; // the previous metrics reading, for actions/s
let confirming = null; // the session whose end waits for its confirmation (the list holds still)

const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) {
  token = fromHash;
  sessionStorage.setItem(TOKEN_KEY, token);
  history.replaceState(null, "", location.pathname); // the token leaves the address bar
}

function say(text, kind = "info") {
  clear($("status")).append(el("span", { class: kind, id: `status-${kind}` }, text));
}

class AdminError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

async function api(path, method = "GET") {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const r = await fetch(`admin/api/${path}`, { method, headers, cache: "no-store" });
  let body = null;
  try { body = await r.json(); } catch { body = null; }
  if (!r.ok) throw new AdminError(r.status, body);
  return body;
}

function ms(seconds) {
  return seconds === null || seconds === undefined ? "–" : `≤ ${(seconds * 1000).toFixed(seconds < 0.001 ? 1 : 0)} ms`;
}

function tile(label, value, id) {
  return el("div", { class: "tile" }, el("div", { class: "value", id: `m-${id}` }, String(value)), el("div", { class: "label" }, label));
}

function showMetrics(m) {
  const now = performance.now();
  let rate = "–";
  if (last && now > last.at) rate = ((m.actions - last.actions) / ((now - last.at) / 1000)).toFixed(1);
  last = { at: now, actions: m.actions };
  const live = Object.values(m.sessions_live).reduce((a, b) => a + b, 0);
  const byGame = Object.entries(m.sessions_live).map(([g, n]) => `${g} ${n}`).join(", ") || "none";
  clear($("glance")).append(
    tile(`live sessions (${byGame})`, live, "sessions"),
    tile("connections: TCP / WebSocket", `${m.connections.tcp || 0} / ${m.connections.websocket || 0}`, "connections"),
    tile("actions/s", rate, "actions-rate"),
    tile("actions since start", m.actions, "actions"),
    tile("append p50 / p99", `${ms(m.append_p50)} / ${ms(m.append_p99)}`, "append"),
    tile("fsync p99", ms(m.fsync_p99), "fsync"),
    tile("queued outbound bytes", m.outbox_bytes, "outbox"),
    tile("plugin faults / budget overruns", `${m.plugin_faults} / ${m.budget_overruns}`, "faults"),
    tile("store errors / retries", `${m.store_errors} / ${m.store_retries}`, "store"),
    tile("lease takeovers", m.lease_takeovers, "takeovers"),
    tile("sessions created / ended", `${m.sessions_created} / ${m.sessions_ended}`, "created"),
    tile(m.worker === null ? "up (s)" : `worker ${m.worker}, up (s)`, Math.round(m.uptime), "uptime"),
  );
  $("updated").textContent = `(${new Date().toLocaleTimeString()}; full page: /metrics)`;
}

function seatText(s) {
  if (s.free) return el("span", { class: "muted" }, `${s.seat}: free`);
  const who = s.bot ? "host bot" : s.held ? (s.peer ? `connected from ${s.peer}` : "connected (another host)") : "nobody connected";
  return el("span", { class: s.held ? "held" : "absent" }, `${s.seat}: ${s.name} — ${who}`);
}

function endButton(s) {
  if (s.state === "ended") return el("span", { class: "muted" }, "over");
  const box = el("span", {});
  const ask = el("button", { class: "end", title: "end this session now (outcome null, aborted: admin)" }, "end");
  ask.addEventListener("click", () => {
    confirming = s.session;
    const confirm = el("button", { class: "confirm-end bad" }, "really end it");
    const cancel = el("button", { class: "cancel" }, "cancel");
    confirm.addEventListener("click", () => { confirming = null; end(s.session); });
    cancel.addEventListener("click", () => { confirming = null; clear(box).append(ask); });
    clear(box).append(confirm, cancel);
  });
  box.append(ask);
  return box;
}

function showSessions(page) {
  const body = clear($("sessions"));
  for (const s of page.sessions) {
    body.append(el("tr", { "data-session": s.session, class: `state-${s.state}` },
      el("td", {}, el("a", { href: `debug.html#${s.session}` }, el("code", {}, s.session))),
      el("td", {}, s.game),
      el("td", { class: "state" }, s.state),
      el("td", {}, String(s.seq)),
      el("td", { class: "holders" }, ...s.seats.map((x) => el("div", {}, seatText(x)))),
      el("td", {}, String(s.spectators)),
      el("td", {}, s.driven ? "yes" : "no"),
      el("td", {}, endButton(s))));
  }
  if (!page.sessions.length) body.append(el("tr", {}, el("td", { colspan: "8", class: "muted" }, "No live session.")));
  $("count").textContent = `(${page.sessions.length}${page.next ? "+" : ""})`;
  $("more").hidden = !page.next;
  $("more").onclick = () => { pages.push(page.next); refresh(); };
}

async function end(sid) {
  try {
    const done = await api(`end?session=${encodeURIComponent(sid)}`, "POST");
    say(`Ended session ${done.session} (its ended record is seq ${done.seq}).`, "ok");
  } catch (e) {
    say(`Cannot end ${sid}: ${e.message}`, "error");
  }
  refresh();
}

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const after = pages[pages.length - 1];
    const [m, page] = await Promise.all([api("metrics"), api(`sessions${after ? `?after=${encodeURIComponent(after)}` : ""}`)]);
    $("login").hidden = true;
    showMetrics(m);
    if (confirming === null) showSessions(page);
  } catch (e) {
    if (e.status === 401) {
      $("login").hidden = false;
      say("This host asks for its admin token.", "error");
    } else {
      say(`The host does not answer: ${e.message}`, "error");
    }
  } finally {
    busy = false;
  }
}

$("use-token").addEventListener("click", () => {
  token = $("token").value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  say("");
  refresh();
});
refresh();
setInterval(refresh, REFRESH_MS);
