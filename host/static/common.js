// Shared by the table (app.js) and the debugger (debug.js): the protocol connection, safe DOM
// building (every string a client typed goes in as text: textContent, never innerHTML), card
// faces and a JSON tree. No build step: plain ES modules served by `gamehost serve --http`.

export class Conn {
  // One WebSocket to the host (ws://<this page's host>/ws), protocol v1: one JSON message per
  // request, reply or push. request() resolves with the reply; pushes go to onPush.
  constructor(onPush, onClose) {
    this.nextId = 1;
    this.waiting = new Map();
    this.onPush = onPush || (() => {});
    this.onClose = onClose || (() => {});
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(`${scheme}//${location.host}/ws`);
    this.opened = new Promise((resolve, reject) => {
      this.ws.addEventListener("open", () => resolve());
      this.ws.addEventListener("error", () => reject(new Error("cannot reach the host")));
    });
    this.ws.addEventListener("message", (e) => this._message(e.data));
    // a page left open in the lobby or the debugger holds no seat: ping so the host does not
    // close it as idle (serve --idle-timeout)
    this.keepAlive = setInterval(() => { if (this.ws.readyState === WebSocket.OPEN) this.call("ping").catch(() => {}); }, 60000);
    this.ws.addEventListener("close", () => {
      clearInterval(this.keepAlive);
      for (const w of this.waiting.values()) w.reject(new HostError({ code: "closed", message: "the connection closed" }));
      this.waiting.clear();
      this.onClose();
    });
  }

  _message(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    if (msg.push !== undefined) { this.onPush(msg); return; }
    const w = this.waiting.get(msg.id);
    if (!w) return;
    this.waiting.delete(msg.id);
    if (msg.ok) w.resolve(msg.result); else w.reject(new HostError(msg.error || {}));
  }

  async call(op, params = {}) {
    await this.opened;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, op, ...params }));
    });
  }
}

export class HostError extends Error {
  constructor(error) {
    super(`${error.code}: ${error.message}`);
    this.code = error.code;
    this.error = error;
  }
}

// el("div", {class: "x", onclick: f}, child, "text", ...): children that are strings become
// text nodes. Attributes are set with setAttribute (never as HTML).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

const SUITS = { C: "\u2663", D: "\u2666", H: "\u2665", S: "\u2660" };

// A card face for "10H", "QS", ...; a back for null (a card the viewer may not see). opts:
// button (a <button>), onclick, cls (more classes), title, action (its data-action).
export function card(code, opts = {}) {
  if (code === null || code === undefined) {
    return el("span", { class: "card back", title: "hidden card" });
  }
  const text = String(code);
  const suit = text.slice(-1);
  const rank = text.slice(0, -1);
  const red = suit === "D" || suit === "H";
  return el(
    opts.button ? "button" : "span",
    { class: `card face ${red ? "red" : "black"}${opts.cls ? ` ${opts.cls}` : ""}`, "data-card": text,
      title: opts.title || text, onclick: opts.onclick, "data-action": opts.action },
    el("span", { class: "rank" }, rank),
    el("span", { class: "suit" }, SUITS[suit] || suit),
  );
}

export function suitName(s) {
  return SUITS[s] ? `${SUITS[s]}` : String(s);
}

// Any JSON value as a tree of text (cards, written as "7H", drawn as faces).
const CARD_RE = /^(10|[2-9JQKA])[CDHS]$/;
export function jsonTree(value, path = "") {
  if (Array.isArray(value)) {
    if (value.length && value.every((v) => v === null || (typeof v === "string" && CARD_RE.test(v)))
        && value.some((v) => v !== null)) {
      return el("span", { class: "cards", "data-path": path }, value.map((v) => card(v)));
    }
    if (value.length && value.every((v) => v !== null && typeof v === "object" && !Array.isArray(v))) {
      // a list of records: one row each, one column per field
      const keys = [...new Set(value.flatMap((v) => Object.keys(v)))];
      return el("table", { class: "records", "data-path": path },
        el("thead", {}, el("tr", {}, keys.map((k) => el("th", {}, k)))),
        el("tbody", {}, value.map((v, i) => el("tr", {}, keys.map((k) => el("td", {}, compact(v[k], `${path}[${i}].${k}`)))))));
    }
    if (value.every((v) => v === null || typeof v !== "object")) {
      return el("span", { class: "scalar", "data-path": path }, `[${value.map(fmt).join(", ")}]`);
    }
    return el("ol", { class: "tree", start: 0 }, value.map((v, i) => el("li", {}, jsonTree(v, `${path}[${i}]`))));
  }
  if (value !== null && typeof value === "object") {
    return el("ul", { class: "tree" }, Object.entries(value).map(([k, v]) =>
      el("li", {}, el("span", { class: "key" }, `${k}: `), jsonTree(v, path ? `${path}.${k}` : k))));
  }
  if (typeof value === "string" && CARD_RE.test(value)) return card(value);
  return el("span", { class: "scalar", "data-path": path }, fmt(value));
}

// A value inside a table cell: a flat object on one line, anything else as a tree.
function compact(v, path) {
  if (v !== null && typeof v === "object" && !Array.isArray(v)
      && Object.values(v).every((x) => x === null || typeof x !== "object")) {
    return el("span", { class: "scalar", "data-path": path }, Object.entries(v).map(([k, x]) => `${k} ${fmt(x)}`).join(" \u00b7 "));
  }
  return jsonTree(v, path);
}

export function fmt(v) {
  if (v === null || v === undefined) return "\u2013";
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

// What differs between two JSON values: a list of { path, kind, before, after }, kind being
// "changed" (another value at the same place), "added" or "removed" (a list's item or an
// object's key; its `before` or `after` is undefined). Lists are compared as sequences: the
// longest common subsequence of equal items stays, so drawing 3 cards from the top of a
// 31-card stock is 3 removed items, not 31 changed places. Between two kept items, a removed
// and an added item that are both objects (a seat's record whose score moved), or both lists,
// are paired and compared inside; other items are told as removed and added. A list of numbers (or booleans, or
// nulls) that keeps its length is a per-seat table (scores, hand sizes): compared by position.
export function diff(a, b, path = "", out = []) {
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length === b.length && [...a, ...b].every(isNumberish)) {
      a.forEach((x, i) => diff(x, b[i], `${path}[${i}]`, out));
    } else {
      listDiff(a, b, path, out);
    }
    return out;
  }
  if (isRecord(a) && isRecord(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const p = path ? `${path}.${k}` : k;
      if (!(k in a)) out.push({ path: p, kind: "added", before: undefined, after: b[k] });
      else if (!(k in b)) out.push({ path: p, kind: "removed", before: a[k], after: undefined });
      else diff(a[k], b[k], p, out);
    }
    return out;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) out.push({ path: path || "(all)", kind: "changed", before: a, after: b });
  return out;
}

const LCS_CELLS = 4_000_000; // past this many (items before x items after), lists are paired in order

function isNumberish(v) {
  return v === null || typeof v === "number" || typeof v === "boolean";
}

function isRecord(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function sameShape(x, y) {
  return (Array.isArray(x) && Array.isArray(y)) || (isRecord(x) && isRecord(y));
}

function listDiff(a, b, path, out) {
  const ka = a.map((v) => JSON.stringify(v));
  const kb = b.map((v) => JSON.stringify(v));
  // the common head and tail are kept as they are; only the middle is searched
  let lo = 0;
  while (lo < a.length && lo < b.length && ka[lo] === kb[lo]) lo++;
  let ea = a.length;
  let eb = b.length;
  while (ea > lo && eb > lo && ka[ea - 1] === kb[eb - 1]) { ea--; eb--; }
  const n = ea - lo;
  const m = eb - lo;
  const kept = []; // pairs [i, j] of equal items, ascending, in the middle
  if (n && m && n * m <= LCS_CELLS) {
    // lengths of the longest common subsequences of a[i..ea) and b[j..eb)
    const w = m + 1;
    const len = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        len[i * w + j] = ka[lo + i] === kb[lo + j]
          ? len[(i + 1) * w + j + 1] + 1
          : Math.max(len[(i + 1) * w + j], len[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (ka[lo + i] === kb[lo + j]) { kept.push([lo + i, lo + j]); i++; j++; }
      else if (len[(i + 1) * w + j] >= len[i * w + j + 1]) i++;
      else j++;
    }
  }
  kept.push([ea, eb]); // the kept tail closes the last run
  let i = lo;
  let j = lo;
  for (const [ki, kj] of kept) {
    // a run: a[i..ki) removed, b[j..kj) added; its leading objects (or lists) on both sides
    // are paired one for one and compared inside
    let pairs = 0;
    while (pairs < ki - i && pairs < kj - j && sameShape(a[i + pairs], b[j + pairs])) {
      diff(a[i + pairs], b[j + pairs], `${path}[${j + pairs}]`, out);
      pairs++;
    }
    for (let p = i + pairs; p < ki; p++) out.push({ path: `${path}[${p}]`, kind: "removed", before: a[p], after: undefined });
    for (let p = j + pairs; p < kj; p++) out.push({ path: `${path}[${p}]`, kind: "added", before: undefined, after: b[p] });
    i = ki + 1;
    j = kj + 1;
  }
}

// Seat tokens live in this tab's sessionStorage only (never in a URL): a reload resumes.
export const tokens = {
  get(sid) {
    try { return JSON.parse(sessionStorage.getItem(`gamehost.seat.${sid}`)); } catch { return null; }
  },
  set(sid, seat, token) {
    sessionStorage.setItem(`gamehost.seat.${sid}`, JSON.stringify({ seat, token }));
  },
  drop(sid) { sessionStorage.removeItem(`gamehost.seat.${sid}`); },
};

export function seatName(seats, i) {
  const s = seats && seats[i];
  if (!s) return `seat ${i} (free)`;
  return `${s.name}${s.bot ? " (bot)" : ""}`;
}

// Sessions this browser played, watched or debugged (ids only: an id is no secret), newest
// first, so the debugger can offer ended sessions that no longer show in the lobby.
export const recent = {
  list() {
    try { return JSON.parse(localStorage.getItem("gamehost.recent")) || []; } catch { return []; }
  },
  add(sid, game) {
    const rest = recent.list().filter((r) => r.session !== sid);
    localStorage.setItem("gamehost.recent", JSON.stringify([{ session: sid, game }, ...rest].slice(0, 30)));
  },
};
