// The replay debugger: any session of the host's store, live or ended, through the replay ops
// (log, replay, verify, fork). Step through its records; see the state after any of them as a
// seat, a spectator or (when the host allows it) the full truth; compare two seqs; verify the
// log; fork a new session at a seq. Every string from the log is put in the page as text.
import { Conn, clear, el, fmt, diff, jsonTree, recent, seatName, tokens } from "./common.js";
import { describeAction } from "./tables.js";

const $ = (id) => document.getElementById(id);
const status = $("status");
const conn = new Conn(() => {}, () => say("disconnected from the host: reload to reconnect", "error"));
const d = { sid: null, records: [], open: false, seats: [], at: 0, states: new Map(), live: false };

function say(text, kind = "info") {
  clear(status).append(el("span", { class: kind }, text));
}

function viewer() {
  const v = $("viewer").value;
  if (v === "truth") return { truth: true };
  if (v === "spectator" || v === "") return {};
  const seat = Number(v);
  const token = tokenFor(seat);
  return token ? { seat, token } : { seat };
}

// The token this page holds for `seat`: one typed into the token field, or the one this tab
// keeps for the seat it plays (sessionStorage); null when neither.
function tokenFor(seat) {
  if (d.token && d.token.seat === seat) return d.token.token;
  const held = tokens.get(d.sid);
  return held && held.seat === seat ? held.token : null;
}

// The token field: find the seat the token holds (the host accepts a seat's view only with its
// token, so each seat is asked once, with a one-record `log` page) and view the log as that
// seat. The token stays in this page's memory only, never in the address or storage.
async function useToken() {
  const token = $("token").value.trim();
  if (!token || !d.records.length) return;
  if (d.open) {
    say("this session is open (ended, its seed revealed): every seat can be viewed without a token; choose yours under \u201cas\u201d");
    return;
  }
  for (let seat = 0; seat < d.records[0].seats; seat++) {
    try {
      await conn.call("log", { session: d.sid, after: null, limit: 1, seat, token });
    } catch (e) {
      if (e.code === "hidden") continue;
      say(e.message, "error");
      return;
    }
    d.token = { seat, token };
    say("");
    fillViewers();
    $("viewer").value = String(seat);
    d.states.clear();
    try { await loadLog(false); } catch (e) { say(e.message, "error"); }
    go(d.at);
    return;
  }
  say("this token holds no seat of this session", "error");
}

// A record in one line: the host's words for it when it has some (the `log` op's `text`),
// else its fields.
function summary(r) {
  if (typeof r.text === "string" && r.text) return r.text.replace(/\s*\n\s*/g, " \u00b7 ");
  switch (r.type) {
    case "header": return `${r.game} v${r.game_version} \u00b7 ${r.seats} seats${r.forked_from ? ` \u00b7 forked from ${r.forked_from.session} at ${r.forked_from.seq}` : ""}`;
    case "seat_taken": return `seat ${r.seat}: ${r.name}${r.bot ? " (bot)" : ""}`;
    case "action": return `seat ${r.seat}: ${describeAction(r.action)}${r.timed_out ? " (timed out)" : ""}`;
    case "event": return `${r.event.type} ${Object.entries(r.event).filter(([k]) => k !== "type").map(([k, v]) => `${k}=${fmt(v)}`).join(" ")}`;
    case "ended": return r.aborted ? `ended by the host: ${r.aborted}` : `ended: ${fmt(r.outcome)}`;
    case "undo_asked": return `seat ${r.seat} asks to take back #${r.action_seq} (${describeAction(r.action)}); asked: ${r.waiting.join(", ") || "nobody"}`;
    case "undo_answered": return `seat ${r.seat} ${r.accept ? "agrees" : "refuses"} to take back #${r.action_seq}`;
    case "undo": return `#${r.action_seq} taken back: seat ${r.seat}'s ${describeAction(r.action)}`;
    case "undo_refused": return `#${r.action_seq} stands: ${r.reason === "expired" ? "nobody answered in time" : "an action came first"}`;
    default: return r.type;
  }
}

async function open() {
  const sid = $("session").value.trim();
  if (!sid) return;
  if (location.hash !== `#${sid}`) history.replaceState(null, "", `#${sid}`);
  if (d.sid !== sid) { d.token = null; clear($("viewer")); $("token").value = ""; } // a spectator first
  d.sid = sid;
  d.states.clear();
  d.at = 0;
  say("");
  try {
    await loadLog(true);
  } catch (e) { say(e.message, "error"); return; }
  recent.add(sid, d.records[0].game);
  go(d.records.length - 1);
}

// Loading shows its progress: records read of the log's seq + 1 (one `log` page at a time);
// a job with no known size (verify) shows a bar that only says it is under way.
function progress(text, done = null, total = null) {
  const box = $("loading");
  if (text === null) { box.hidden = true; return; }
  const bar = $("load-bar");
  if (total === null) { bar.removeAttribute("value"); bar.removeAttribute("max"); }
  else { bar.max = Math.max(total, 1); bar.value = done; }
  $("load-text").textContent = text;
  box.hidden = false;
}

async function loadLog(fill) {
  const records = [];
  let after = null;
  let page;
  progress("loading the log…");
  try {
    do {
      page = await conn.call("log", { session: d.sid, after, limit: 1000, text: true, ...viewer() });
      records.push(...page.records);
      after = page.next;
      const total = page.seq + 1;
      progress(`loading records: ${records.length.toLocaleString()} of ${total.toLocaleString()}`, records.length, total);
    } while (after !== null);
  } finally {
    progress(null);
  }
  d.records = records;
  d.open = page.open;
  d.live = page.live;
  const header = records[0];
  d.seats = records.filter((r) => r.type === "seat_taken");
  $("summary").textContent = `${page.game} \u00b7 ${records.length} records \u00b7 ${page.ended ? "ended" : page.live ? "live" : "stored"}${page.open ? "" : " \u00b7 hidden cards stay hidden"}`;
  if (fill) fillViewers();
  $("seq").max = records.length - 1;
  $("last").textContent = String(records.length - 1);
  const tl = clear($("timeline"));
  // an action taken back (and the events it caused) is struck through, pointing at its undo
  const undone = new Map();
  for (const r of records) {
    if (r.type !== "undo") continue;
    for (let s = r.action_seq; s < records.length && (s === r.action_seq || records[s].type === "event"); s++) undone.set(s, r.seq);
  }
  for (const r of records) {
    const by = undone.get(r.seq);
    tl.append(el("div", { class: `t-${r.type}${by === undefined ? "" : " undone"}`, "data-seq": r.seq, onclick: () => go(r.seq),
      title: by === undefined ? summary(r) : `${summary(r)} (taken back at #${by})` },
      `${String(r.seq).padStart(4, "\u2007")} ${r.type.padEnd(10, "\u2007")} ${summary(r)}`));
  }
}

// The "as" list: a spectator, each seat (one this page holds a token for is "you"; the others
// only when the session is open) and the full truth (only when open).
function fillViewers() {
  const sel = $("viewer");
  const was = sel.value;
  clear(sel).append(el("option", { value: "spectator" }, "a spectator"));
  for (let i = 0; i < d.records[0].seats; i++) {
    const taken = d.seats.find((r) => r.seat === i);
    const mine = tokenFor(i) !== null;
    sel.append(el("option", { value: String(i), disabled: !(d.open || mine) },
      `seat ${i}${taken ? `: ${taken.name}` : ""}${mine ? " (you)" : ""}`));
  }
  sel.append(el("option", { value: "truth", disabled: !d.open }, "the full truth"));
  if (was && [...sel.options].some((o) => o.value === was && !o.disabled)) sel.value = was;
}

async function stateAt(seq) {
  const key = `${$("viewer").value}:${seq}`;
  if (!d.states.has(key)) d.states.set(key, await conn.call("replay", { session: d.sid, seq, ...viewer() }));
  return d.states.get(key);
}

async function go(seq) {
  if (!d.records.length) return;
  seq = Math.max(0, Math.min(d.records.length - 1, seq));
  d.at = seq;
  $("seq").value = seq;
  for (const node of $("timeline").querySelectorAll(".current")) node.classList.remove("current");
  const row = $("timeline").querySelector(`[data-seq="${seq}"]`);
  if (row) { row.classList.add("current"); row.scrollIntoView({ block: "nearest" }); }
  $("rec-seq").textContent = `#${seq} (${d.records[seq].type})`;
  clear($("record")).append(jsonTree(d.records[seq], "record"));
  if (!$("diff-from").value || Number($("diff-from").value) >= seq) $("diff-from").value = Math.max(0, seq - 1);
  try {
    const st = await stateAt(seq);
    if (d.at !== seq) return;
    $("state-who").textContent = `as ${$("viewer").selectedOptions[0].textContent}`;
    clear($("state")).append(
      el("p", {}, `to act: ${st.to_act.map((i) => seatName(st.seats, i)).join(", ") || "nobody"}${st.ended ? " \u00b7 ended" : ""}`),
      jsonTree(st.state !== undefined ? st.state : st.view, "state"));
  } catch (e) { say(e.message, "error"); }
}

async function compare() {
  const from = Number($("diff-from").value);
  const to = d.at;
  try {
    const [a, b] = [await stateAt(from), await stateAt(to)];
    const pick = (s) => ({ to_act: s.to_act, ended: s.ended, ...(s.state !== undefined ? { state: s.state } : { view: s.view }) });
    const changes = diff(pick(a), pick(b));
    const box = clear($("changes"));
    if (!changes.length) { box.append(el("p", { class: "muted" }, "Nothing visible changed.")); return; }
    const count = (k) => changes.filter((c) => c.kind === k).length;
    box.append(
      el("p", { class: "muted", id: "changes-count" },
        `${count("changed")} changed, ${count("added")} added, ${count("removed")} removed (lists compared as sequences)`),
      el("table", { class: "diff" }, el("tbody", {}, changes.map(({ path, kind, before, after }) =>
        el("tr", { class: kind, "data-kind": kind, "data-path": path },
          el("td", {}, path),
          el("td", { class: "kind" }, kind),
          el("td", { class: "before" }, before === undefined ? "" : fmt(before)),
          el("td", {}, kind === "changed" ? "\u2192" : ""),
          el("td", { class: "after" }, after === undefined ? "" : fmt(after)))))));
  } catch (e) { say(e.message, "error"); }
}

async function verify() {
  const box = clear($("verdict"));
  progress("verifying the log on this host's code…");
  try {
    const v = await conn.call("verify", { session: d.sid }).finally(() => progress(null));
    if (v.ok) box.append(el("p", { class: "ok", id: "verify-ok" }, `ok: ${v.records} records replay to the same events on this host's code`));
    else {
      box.append(el("p", { class: "bad", id: "verify-bad" }, `DIFFERS at seq ${v.seq}`, " ",
        el("button", { onclick: () => go(v.seq) }, "go there")));
      if (v.explanation) box.append(el("pre", {}, v.explanation));
    }
    if (v.warning) box.append(el("p", { class: "muted" }, `warning: ${v.warning}`));
  } catch (e) { box.append(el("p", { class: "bad" }, e.message)); }
}

async function fork() {
  const box = clear($("forked"));
  try {
    const f = await conn.call("fork", { session: d.sid, seq: d.at });
    const seats = Object.entries(f.tokens);
    box.append(el("p", {}, `New session `, el("code", { id: "fork-id" }, f.session), ` from seq ${f.seq}.`));
    for (const [seat, token] of seats) {
      box.append(el("button", { onclick: () => { tokens.set(f.session, Number(seat), token); location.href = `./#/play/${f.session}`; } },
        `play it as seat ${seat} (${seatName(f.seats, Number(seat))})`));
    }
    box.append(el("a", { class: "button", href: `debug.html#${f.session}`, onclick: () => setTimeout(() => location.reload()) }, "debug the fork"));
  } catch (e) { box.append(el("p", { class: "bad" }, e.message)); }
}

$("open").addEventListener("click", open);
$("session").addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
$("viewer").addEventListener("change", async () => { d.states.clear(); try { await loadLog(false); } catch (e) { say(e.message, "error"); } go(d.at); });
$("first").addEventListener("click", () => go(0));
$("prev").addEventListener("click", () => go(d.at - 1));
$("next").addEventListener("click", () => go(d.at + 1));
$("end").addEventListener("click", () => go(d.records.length - 1));
$("seq").addEventListener("change", () => go(Number($("seq").value)));
$("diff").addEventListener("click", compare);
$("verify").addEventListener("click", verify);
$("use-token").addEventListener("click", useToken);
$("token").addEventListener("keydown", (e) => { if (e.key === "Enter") useToken(); });
$("fork").addEventListener("click", fork);
document.addEventListener("keydown", (e) => {
  if (e.target instanceof HTMLInputElement) return;
  if (e.key === "ArrowRight") go(d.at + 1);
  if (e.key === "ArrowLeft") go(d.at - 1);
});
for (const r of recent.list()) $("recent").append(el("option", { value: r.session }, r.game || ""));
function openFromHash() {
  const fromHash = decodeURIComponent(location.hash.slice(1));
  if (fromHash && fromHash !== d.sid) { $("session").value = fromHash; open(); }
}
window.addEventListener("hashchange", openFromHash); // another session's link, same page
openFromHash();
