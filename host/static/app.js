// The web client: a lobby (#/), a table to play (#/play/SESSION) or watch (#/watch/SESSION).
// Everything a client typed (names, options) is put in the page as text, never as HTML.
import { Conn, HostError, clear, el, fmt, recent, seatName, tokens } from "./common.js";
import { describeAction, outcomePanel, renderers } from "./tables.js";
import { undoBox } from "./undo.js";

const main = document.getElementById("main");
const status = document.getElementById("status");
let conn = null;
let page = null; // the page shown: { kind, stop() }
const HISTORY = 200; // entries a table's "What happened" list keeps

function say(text, kind = "info") {
  clear(status).append(el("span", { class: kind }, text));
}

function connect(onPush, retry) {
  if (conn) { conn.onClose = () => {}; conn.onPush = () => {}; conn.ws.close(); }
  conn = new Conn(onPush, () => {
    if (!retry) { say("disconnected from the host: reload to reconnect", "error"); return; }
    say("disconnected from the host: trying again in a few seconds\u2026", "error");
    setTimeout(retry, 3000); // a table resumes its seat (or watches again) by itself
  });
  return conn;
}

function route() {
  if (page) page.stop();
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if ((parts[0] === "play" || parts[0] === "watch") && parts[1]) {
    page = tablePage(parts[1], parts[0] === "watch");
  } else {
    page = lobbyPage();
  }
}
window.addEventListener("hashchange", route);

// ---- lobby ------------------------------------------------------------------------------------
function playerName() {
  return localStorage.getItem("gamehost.name") || "player";
}

function lobbyPage() {
  document.title = "gamehost: lobby";
  say("");
  const c = connect(() => {});
  const nameInput = el("input", { id: "name", value: playerName(), maxlength: 64, size: 20 });
  nameInput.addEventListener("change", () => localStorage.setItem("gamehost.name", nameInput.value));
  const gamesBox = el("div", { id: "games", class: "games" });
  const sessionsBox = el("div", { id: "sessions" });
  const debugId = el("input", { id: "debug-id", placeholder: "session id", size: 18 });
  clear(main).append(
    el("section", { class: "who" }, el("label", {}, "Your name ", nameInput)),
    el("h2", {}, "Games"),
    gamesBox,
    el("h2", {}, "Open sessions ", el("button", { id: "refresh", onclick: () => refresh() }, "refresh")),
    sessionsBox,
    el("h2", {}, "Replay debugger"),
    el("p", {}, "Open any session from the host's store, live or ended: ", debugId, " ",
      el("button", { onclick: () => { location.href = `debug.html#${encodeURIComponent(debugId.value.trim())}`; } }, "open")),
  );

  // the option forms come from each game's published JSON Schema (/schema.json, as `gamehost
  // schema` prints it); a game without one gets fields from what `games` says of its options
  const schemas = fetch("schema.json").then((r) => (r.ok ? r.json() : { games: {} })).catch(() => ({ games: {} }));
  Promise.all([c.call("games"), schemas]).then(([{ games }, { games: contracts }]) => {
    for (const g of games) gamesBox.append(gameForm(g, nameInput, contracts[g.id]));
  }).catch((e) => say(e.message, "error"));

  async function refresh() {
    try {
      const { sessions } = await c.call("sessions", { limit: 100 });
      clear(sessionsBox);
      if (!sessions.length) { sessionsBox.append(el("p", { class: "muted" }, "No live sessions.")); return; }
      const rows = sessions.map((s) => el("tr", { "data-session": s.session },
        el("td", {}, el("code", {}, s.session)),
        el("td", {}, s.game),
        el("td", { class: "names" }, s.seats.map((x, i) => el("span", { class: "seatname" }, seatName(s.seats, i)))),
        el("td", {}, s.ended ? "ended" : s.started ? "playing" : `waiting (${s.free.length} free)`),
        el("td", {},
          s.free.length && !s.ended ? el("button", { class: "join", onclick: () => joinSession(c, s.session, nameInput.value) }, "join") : null,
          tokens.get(s.session) ? el("a", { href: `#/play/${s.session}`, class: "button" }, "back to my seat") : null,
          el("a", { href: `#/watch/${s.session}`, class: "button watch" }, "watch"),
          el("a", { href: `debug.html#${s.session}`, class: "button" }, "debug"))));
      sessionsBox.append(el("table", { class: "list" },
        el("thead", {}, el("tr", {}, ["session", "game", "seats", "state", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows)));
    } catch (e) { say(e.message, "error"); }
  }
  refresh();
  const timer = setInterval(refresh, 3000);
  return { kind: "lobby", stop() { clearInterval(timer); } };
}

// An option's control from its JSON Schema: a list for an enum, a checkbox for a boolean, a
// number field for an integer, and for "one of these words or a number" both.
function schemaControl(game, name, prop) {
  const id = `opt-${game}-${name}`;
  const dflt = prop.default;
  if (prop.type === "boolean") {
    const box = el("input", { id, name, type: "checkbox", checked: dflt === true });
    return [box, () => box.checked];
  }
  if (prop.type === "integer" || prop.type === "number") {
    const num = el("input", { id, name, type: "number", value: fmt(dflt), class: "num",
      min: prop.minimum, max: prop.maximum, step: prop.type === "integer" ? 1 : "any" });
    return [num, () => Number(num.value)];
  }
  const words = prop.enum || (prop.anyOf || []).flatMap((a) => a.enum || []);
  const numeric = (prop.anyOf || []).find((a) => a.type === "integer" || a.type === "number");
  if (!words.length) return null;
  const sel = el("select", { id, name },
    words.map((w) => el("option", { value: JSON.stringify(w), selected: JSON.stringify(w) === JSON.stringify(dflt) }, fmt(w))),
    numeric ? el("option", { value: "number", selected: typeof dflt === "number" }, "a number\u2026") : null);
  if (!numeric) return [sel, () => JSON.parse(sel.value)];
  const num = el("input", { id: `${id}-number`, type: "number", class: "num", step: numeric.type === "integer" ? 1 : "any",
    value: typeof dflt === "number" ? dflt : "", disabled: typeof dflt !== "number" });
  sel.addEventListener("change", () => { num.disabled = sel.value !== "number"; if (!num.disabled) num.focus(); });
  return [el("span", {}, sel, " ", num), () => (sel.value === "number" ? Number(num.value) : JSON.parse(sel.value))];
}

// An option's control, generated from what `games` says of it (type, choices, default).
function optionControl(game, opt) {
  const id = `opt-${game}-${opt.name}`;
  if (opt.choices && opt.choices.length) {
    const sel = el("select", { id, name: opt.name },
      opt.choices.map((c) => el("option", { value: JSON.stringify(c), selected: JSON.stringify(c) === JSON.stringify(opt.default) }, fmt(c))));
    return [sel, () => JSON.parse(sel.value)];
  }
  const input = el("input", { id, name: opt.name, value: fmt(opt.default), size: 10 });
  return [input, () => {
    const v = input.value.trim();
    if (/^-?\d+$/.test(v) && /int/.test(opt.type)) return Number(v);
    if (/^-?\d+(\.\d+)?$/.test(v) && /float/.test(opt.type)) return Number(v);
    if ((v === "true" || v === "false") && /bool/.test(opt.type)) return v === "true";
    return v;
  }];
}

function gameForm(g, nameInput, contract) {
  const props = (contract && contract.options && contract.options.properties) || {};
  const seats = el("input", { type: "number", name: "seats", min: g.min_seats, max: g.max_seats, value: g.min_seats, class: "num" });
  const bots = el("input", { type: "number", name: "bots", min: 0, max: g.max_seats, value: g.min_seats - 1, class: "num" });
  const readers = {};
  const opts = g.options.map((o) => {
    const [control, read] = (props[o.name] && schemaControl(g.id, o.name, props[o.name])) || optionControl(g.id, o);
    readers[o.name] = [read, o.default];
    return el("label", { class: "opt", title: o.doc || "" }, el("span", {}, o.name), control);
  });
  const error = el("div", { class: "error" });
  const form = el("form", { class: "game", "data-game": g.id },
    el("h3", {}, g.title || g.id), el("p", { class: "muted" }, g.description || ""),
    el("div", { class: "row" }, el("label", {}, "seats ", seats), el("label", {}, "host bots ", bots)),
    g.options.length ? el("details", {}, el("summary", {}, "options"), el("div", { class: "opts" }, opts)) : null,
    el("button", { type: "submit", class: "create" }, `create and join`),
    error);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(error);
    const options = {};
    for (const [name, [read, dflt]] of Object.entries(readers)) {
      const v = read();
      if (JSON.stringify(v) !== JSON.stringify(dflt)) options[name] = v;
    }
    try {
      const made = await conn.call("create", { game: g.id, seats: Number(seats.value), bots: Number(bots.value), options });
      if (made.free.length) await joinSession(conn, made.session, nameInput.value);
      else location.hash = `#/watch/${made.session}`;
    } catch (err) { error.append(err.message); }
  });
  return form;
}

async function joinSession(c, sid, name) {
  localStorage.setItem("gamehost.name", name);
  try {
    const joined = await c.call("join", { session: sid, name });
    tokens.set(sid, joined.seat, joined.token);
    await c.call("leave", { session: sid });
    location.hash = `#/play/${sid}`;
  } catch (e) { say(e.message, "error"); }
}

// ---- table ------------------------------------------------------------------------------------
function tablePage(sid, watching) {
  const held = watching ? null : tokens.get(sid);
  let me = held ? held.seat : null; // null once another connection resumes the seat
  document.title = `gamehost: ${watching ? "watching" : "playing"} ${sid}`;
  const t = {
    sid, me, watching: me === null, snap: null, legal: [], turnSeq: null, events: [], viewAsked: false, stopped: false,
    controlsKey: null, clock: null, // the turn clock: see takeDeadline
    // what the player is choosing, kept across redraws: the card whose suit to name, a split
    ui: { card: null, split: null, choose(c) { t.ui.card = c; draw(); } },
  };
  const board = el("div", { id: "board" });
  const controls = el("div", { id: "controls" });
  const undoSlot = el("div", {}); // the undo box: redrawn on every snapshot, unlike the controls
  const info = el("div", { id: "info" });
  const eventsBox = el("ol", { id: "events", class: "events" });
  clear(main).append(
    el("p", {}, el("a", { href: "#/" }, "\u2190 lobby"), " \u00b7 ",
      el("a", { href: `debug.html#${sid}` }, "open in the replay debugger")),
    info, board, controls, undoSlot, el("h3", {}, "What happened"), eventsBox);

  const c = connect(onPush, () => { if (!t.stopped) route(); });
  function onPush(p) {
    if (t.stopped || p.session !== sid && p.push !== "closed") return;
    if (p.push === "event") {
      t.events.push(p);
      if (p.kind === "ended" && typeof p.text === "string") t.endText = p.text;
      listEvent(p);
      if (t.snap && p.seq > t.snap.seq && !t.resuming) askView(); // a resume's reply is newer
    } else if (p.push === "turn" && p.seat === me) {
      if (JSON.stringify(p.legal) !== JSON.stringify(t.legal)) t.ui.card = null;
      takeDeadline(p.seq, p.deadline);
      t.legal = p.legal;
      t.turnSeq = p.seq;
      draw();
    } else if (p.push === "presence") {
      // a seat's connection came or went (record p.seq); a snapshot at or past it knows already
      if (t.snap && Array.isArray(t.snap.connected) && p.seq > t.snap.seq) {
        t.snap.connected = t.snap.connected.map((c, i) => (i === p.seat ? p.connected : c));
        draw();
      }
    } else if (p.push === "ended") {
      t.legal = [];
      if (typeof p.text === "string") t.endText = p.text;
      askView();
    } else if (p.push === "detached") {
      // another tab or device resumed this seat (last resume wins), or a host took this
      // connection for gone: this page no longer plays it. The host pushes nothing more of the
      // session to a detached connection, so the page watches it (as a spectator) and offers
      // the seat back (drawn by draw(): a resume with the seat's token).
      me = null;
      t.detached = true;
      t.me = null;
      t.watching = true;
      t.legal = [];
      t.turnSeq = null;
      say(p.reason === "resumed"
        ? "this seat was resumed on another connection (another tab or device): this page only watches now"
        : "this connection no longer holds the seat", "error");
      draw();
      follow();
    } else if (p.push === "closed") {
      say(`the host closed the connection: ${p.reason}`, "error");
    }
  }
  // "What happened", newest first, one entry per seq: the history fetched when the table opens
  // (loadHistory) and the pushes may arrive in any order and overlap. Each entry is the host's
  // text of the record for this viewer (asked with "text": true); a record with nothing to say
  // in words (an action: its events tell it) keeps a hidden entry, so the seqs stay in order.
  const listed = new Set();
  function listEvent(p) {
    if (listed.has(p.seq)) return;
    listed.add(p.seq);
    let at = eventsBox.firstChild;
    while (at && Number(at.dataset.seq) > p.seq) at = at.nextSibling;
    const text = describeEvent(p, t.snap);
    eventsBox.insertBefore(el("li", { "data-seq": p.seq, "data-kind": p.kind, hidden: text === null },
      `#${p.seq}`, text === null ? "" : ` ${text}`), at);
    while (eventsBox.childNodes.length > HISTORY) {
      listed.delete(Number(eventsBox.lastChild.dataset.seq));
      eventsBox.lastChild.remove();
    }
  }
  // The records before `upto` (the seq the table opened at), as this seat may see them (the
  // `log` replay op with the seat's token; a spectator's otherwise), so a player who joins late
  // or reloads sees what happened before: at most the last HISTORY of them.
  async function loadHistory(upto) {
    const viewer = held ? { seat: me, token: held.token } : {};
    let after = Math.max(0, upto - HISTORY);
    while (after !== null && after < upto && !t.stopped) {
      const got = await c.call("log", { session: sid, after, limit: HISTORY, text: true, ...viewer });
      for (const r of got.records) if (r.seq <= upto && r.type !== "header") listEvent(recordAsPush(r));
      after = got.next;
    }
  }
  function recordAsPush(r) {
    const { seq, type, ts: _ts, ...rest } = r; // a push has no ts
    let event = rest;
    if (type === "event") event = rest.event;
    else if (type === "action") event = { seat: rest.seat, action: rest.action, timed_out: rest.timed_out };
    if (type === "ended" && typeof r.text === "string") t.endText = r.text;
    return { push: "event", session: sid, seq, kind: type, event, text: r.text };
  }
  async function askView() {
    if (t.viewAsked) return;
    t.viewAsked = true;
    try {
      const snap = await c.call("view", { session: sid });
      if (!t.snap || snap.seq >= t.snap.seq) { t.snap = snap; takeDeadline(snap.seq, snap.deadline); }
      if (!t.snap.to_act.includes(me)) t.legal = [];
      draw();
    } catch (e) { say(e.message, "error"); }
    t.viewAsked = false;
    if (t.events.length && t.events[t.events.length - 1].seq > t.snap.seq) askView();
  }
  // The last seq this page has seen (its snapshot's, or a later pushed record's).
  function lastSeq() {
    const pushed = t.events.length ? t.events[t.events.length - 1].seq : -1;
    return Math.max(t.snap ? t.snap.seq : -1, pushed);
  }
  // Watch the session once the seat is gone (after a `detached` push): a spectator's snapshot,
  // and a spectator's pushes from there.
  async function follow() {
    try {
      const snap = await c.call("watch", { session: sid, text: true });
      if (t.stopped || me !== null) return;
      if (!t.snap || snap.seq >= t.snap.seq) { t.snap = snap; takeDeadline(snap.seq, snap.deadline); }
      draw();
      if (lastSeq() > t.snap.seq) askView();
    } catch (e) { say(e.message, "error"); }
  }
  // Take the seat back from the connection that resumed it: stop watching (`leave`: a
  // spectator's leave writes nothing), then `resume` with the seat's token, which detaches the
  // other connection in turn. The records since the page's last seq are pushed before the
  // reply, so "What happened" stays whole.
  async function takeBack() {
    if (!held || !t.detached) return;
    t.detached = false; // one click, one resume
    draw();
    t.resuming = true;
    try {
      await c.call("leave", { session: sid });
      const snap = await c.call("resume", { session: sid, token: held.token, text: true, after: lastSeq() });
      t.resuming = false;
      me = held.seat;
      t.me = me;
      t.watching = false;
      t.snap = snap;
      takeDeadline(snap.seq, snap.deadline);
      say("");
      draw();
    } catch (e) {
      t.resuming = false;
      if (e.code === "bad_token") tokens.drop(sid);
      say(e.message, "error");
      t.detached = e.code !== "bad_token";
      draw();
      follow(); // watch on (the leave went through, or the watch answers already_attached)
    }
  }
  async function act(action) {
    const seq = t.turnSeq;
    t.legal = [];
    draw();
    try {
      await c.call("act", { session: sid, action, seq });
      say("");
    } catch (e) {
      say(e.message, "error");
      if (e instanceof HostError) askView();
    }
  }
  // The turn clock: the host's deadline for the seats in to_act, as of the seq it came with (a
  // snapshot, or a turn push). It counts down from the host's seconds_left, by this machine's
  // monotonic clock since the message came, so a machine whose clock is off still shows the
  // host's time; `at` (UTC) is shown as the local time of day.
  function takeDeadline(seq, deadline) {
    if (deadline === undefined) return; // a host that sends no deadline
    if (t.clock && seq < t.clock.seq) return;
    t.clock = deadline === null ? { seq, none: true }
      : { seq, at: deadline.at, left: deadline.seconds_left, got: performance.now() };
  }
  function secondsLeft() {
    const c = t.clock;
    if (!c || c.none) return null;
    return Math.max(0, c.left - (performance.now() - c.got) / 1000);
  }
  function countdown() {
    const s = t.snap;
    const left = secondsLeft();
    if (!s || s.ended || !s.to_act.length || left === null || t.clock.seq < s.seq) return null;
    const mine = s.to_act.includes(me);
    const node = el("span", { id: "countdown", "data-at": t.clock.at });
    paint(node, left, mine);
    return node;
  }
  function paint(node, left, mine) {
    const whole = Math.ceil(left);
    const at = new Date(Date.parse(node.dataset.at));
    node.dataset.seconds = String(whole);
    node.className = `${mine ? "mine" : ""}${whole === 0 ? " over" : whole <= 15 ? " urgent" : ""}`;
    node.textContent = whole === 0
      ? `time is up: the host plays for ${mine ? "you" : "them"}`
      : `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")} left`;
    node.title = `until ${at.toLocaleTimeString()} (the host's turn timer${mine ? ": then it plays for you" : ""})`;
  }
  function tick() {
    const node = document.getElementById("countdown");
    const left = secondsLeft();
    if (node && left !== null && t.snap) paint(node, left, t.snap.to_act.includes(me));
  }
  function draw() {
    const s = t.snap;
    if (!s) return;
    info.dataset.seq = String(s.seq);
    clear(info).append(
      el("h2", {}, `${s.game} \u00b7 `, el("code", {}, s.session)),
      el("p", { id: "role" }, me === null ? (t.detached ? "This seat is played on another connection; you are watching." : "You are watching.") : `You are seat ${me}, ${seatName(s.seats, me)}.`),
      el("p", { id: "state", class: s.ended ? "ended" : "" },
        s.ended ? (s.aborted ? `Over: ended by the host (${s.aborted}).` : "The game is over.")
          : !s.started ? "Waiting for players\u2026"
          : s.to_act.length ? [`To act: ${s.to_act.map((i) => seatName(s.seats, i)).join(", ")}`, countdown()] : ""),
      s.ended ? outcomePanel(s, t.endText) : "");
    const render = renderers[s.game] || renderers.generic;
    const moves = me !== null && t.legal.length && !s.ended ? { legal: t.legal, act, choose: t.ui.choose } : null;
    clear(board).append(render.board(s, me, moves));
    // the controls are rebuilt only when the moves change, so a split being made or a number
    // being typed survives the pushes of other seats
    const lost = me === null && t.detached && held && !s.ended;
    const key = moves ? JSON.stringify([t.legal, s.seats, t.ui.card]) : lost ? "lost" : "";
    if (key !== t.controlsKey) {
      t.controlsKey = key;
      clear(controls);
      if (moves) controls.append(el("h3", {}, "Your move"), render.controls(t.legal, s, me, act, t.ui));
      else if (lost) controls.append(el("button", { id: "take-back", type: "button", onclick: takeBack },
        `play seat ${held.seat} here again`));
    }
    const undo = undoBox(s, me, (op, params) => c.call(op, params), say);
    clear(undoSlot);
    if (undo) undoSlot.append(undo);
  }
  // A record in words: the host's text (null when it has nothing to say); a host that sent
  // none gets the record's fields.
  function describeEvent(p, snap) {
    if (typeof p.text === "string") return p.text || null;
    const seats = snap ? snap.seats : [];
    const who = (i) => seatName(seats, i);
    const e = p.event || {};
    if (p.kind === "action") return `${who(e.seat)}: ${describeAction(e.action)}${e.timed_out ? " (timed out: played by the host)" : ""}`;
    if (p.kind === "seat_taken") return `seat ${e.seat} taken by ${e.name}${e.bot ? " (bot)" : ""}`;
    if (p.kind === "seat_held") return `${who(e.seat)} is back`;
    if (p.kind === "seat_released") return `${who(e.seat)} left (${e.reason || "left"})`;
    if (p.kind === "ended") return "the game is over";
    const parts = Object.entries(e).filter(([k]) => k !== "type").map(([k, v]) => `${k}=${fmt(v)}`);
    return `${e.type || p.kind} ${parts.join(" ")}`;
  }

  (async () => {
    try {
      let snap;
      if (held) {
        snap = await c.call("resume", { session: sid, token: held.token, text: true });
      } else {
        snap = await c.call("watch", { session: sid, text: true });
      }
      t.snap = snap;
      takeDeadline(snap.seq, snap.deadline);
      recent.add(sid, snap.game);
      say("");
      draw();
      if (t.events.length && t.events[t.events.length - 1].seq > snap.seq) askView();
      await loadHistory(snap.seq);
    } catch (e) {
      if (e.code === "bad_token") tokens.drop(sid);
      say(e.message, "error");
    }
  })();
  const ticking = setInterval(tick, 1000);
  return { kind: "table", stop() { t.stopped = true; clearInterval(ticking); } };
}

route();
