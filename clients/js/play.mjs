#!/usr/bin/env node
// A gamehost client in JavaScript, Node's standard library only (node >= 18).
//
// It plays sessions of any installed game over the JSON-lines TCP protocol (PROTOCOL.md) with
// random legal moves, and checks what the host sends against the published schemas:
//   - every line it receives, reply or push, fits the protocol's schema (`gamehost schema
//     --protocol`, passed with --protocol): a reply the definition of its request's op, a push
//     the push definitions;
//   - against the games' contract (`gamehost schema`, passed with --schema):
//   - the outcome of each session fits the game's outcome schema;
//   - every push of every connection comes in gapless `seq` order, from the snapshot's seq + 1;
//   - every action in a `turn` push, every event (as a seat and as a spectator) and every view
//     validates against the game's JSON Schema for that viewer;
//   - one seat drops its connection on purpose mid-game and `resume`s on a new one with
//     `after` = the last seq it saw; the missed records must follow on without a gap, and every
//     other viewer sees the seat's `presence` go false (`gone`) and come back (`resumed`);
//   - with --view-pushes it draws the table from `view` pushes alone: whose turn it is
//     (`to_act`), until when (`deadline`) and who is connected; each `turn` push must agree
//     with the view push of its seq, and presence pushes with the view's `connected`.
// Exit status 0 when every session ended and every check held, 1 otherwise, 2 for bad usage.
//
//   node clients/js/play.mjs --port 7878 --schema schema.json --protocol protocol.json
//        [--game ID] [--seats N] [--bots K] [--games G] [--options JSON] [--drop-after N]
//        [--seed S] [--timeout SEC]
//        [--view-pushes]   (join, watch and resume with "view": true: a view push per change)
//        [--show]          (print the spectator's table as drawn from each view push)

import fs from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';

// -- a minimal JSON Schema (draft 2020-12) validator for the keywords gamehost generates ----------

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

function typeOk(type, v) {
  switch (type) {
    case 'null': return v === null;
    case 'boolean': return typeof v === 'boolean';
    case 'integer': return Number.isInteger(v);
    case 'number': return typeof v === 'number';
    case 'string': return typeof v === 'string';
    case 'array': return Array.isArray(v);
    case 'object': return v !== null && typeof v === 'object' && !Array.isArray(v);
    default: throw new Error(`schema keyword type=${type} not supported`);
  }
}

/** The definition a local `$ref` ("#/$defs/name", a JSON pointer into `root`) names. */
function resolve(root, ref) {
  if (!ref.startsWith('#')) throw new Error(`schema $ref ${ref} is not local`);
  let at = root;
  for (const part of ref.slice(1).split('/').filter((p) => p !== '')) {
    at = at?.[decodeURIComponent(part).replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  if (at === undefined) throw new Error(`schema $ref ${ref} names nothing`);
  return at;
}

/** The first error of `value` against `schema` as a string, or null when it is valid. `root`
 * is the document local `$ref`s point into (default: `schema` itself). */
export function validate(schema, value, path = '$', root = schema) {
  if (schema === true || schema === undefined) return null;
  if (schema === false) return `${path}: not allowed`;
  if (schema.$ref !== undefined) {
    const err = validate(resolve(root, schema.$ref), value, path, root);
    if (err) return err;
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeOk(t, value))) {
      return `${path}: ${JSON.stringify(value)} is not of type ${types.join(' or ')}`;
    }
  }
  if (Object.hasOwn(schema, 'const') && !deepEqual(schema.const, value)) {
    return `${path}: ${JSON.stringify(value)} is not ${JSON.stringify(schema.const)}`;
  }
  if (schema.enum && !schema.enum.some((e) => deepEqual(e, value))) {
    return `${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`;
  }
  if (schema.anyOf && !schema.anyOf.some((s) => validate(s, value, path, root) === null)) {
    const why = schema.anyOf.map((s) => validate(s, value, path, root)).find((e) => e);
    return `${path}: ${JSON.stringify(value)} fits none of its alternatives (${why})`;
  }
  if (schema.oneOf) {
    const fits = schema.oneOf.filter((s) => validate(s, value, path, root) === null).length;
    if (fits !== 1) {
      // name the branch whose tag matches, for a useful message
      const tag = (s) => {
        const branch = s.$ref ? resolve(root, s.$ref) : s;
        return branch.properties?.type?.const ?? branch.properties?.push?.const;
      };
      const tagged = schema.oneOf.find((s) => [value?.type, value?.push].includes(tag(s)));
      const why = tagged ? validate(tagged, value, path, root)
        : `unknown type ${JSON.stringify(value?.type ?? value?.push)}`;
      return `${path}: fits ${fits} of oneOf, not 1 (${why})`;
    }
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      return `${path}: fewer than ${schema.minItems} items`;
    }
    const prefix = schema.prefixItems ?? [];
    for (let i = 0; i < value.length; i++) {
      const sub = i < prefix.length ? prefix[i] : schema.items;
      const err = validate(sub, value[i], `${path}[${i}]`, root);
      if (err) return err;
    }
  } else if (typeOk('object', value)) {
    for (const name of schema.required ?? []) {
      if (!Object.hasOwn(value, name)) return `${path}: missing ${name}`;
    }
    const props = schema.properties ?? {};
    for (const [k, v] of Object.entries(value)) {
      const sub = Object.hasOwn(props, k) ? props[k] : schema.additionalProperties;
      const err = validate(sub, v, `${path}.${k}`, root);
      if (err) return err;
    }
  }
  return null;
}

// -- the protocol's schema: every line received is checked against it ----------------------------

const protocol = {
  schema: null, // what `gamehost schema --protocol` printed
  checked: 0,
  fail: (why) => { throw new Error(why); },

  /** Check one line from the host: a push against the push definitions, a reply against the
   * definition of its request's op (`reply.OP`), or of an error reply. */
  check(msg, op, label) {
    if (this.schema === null) return;
    const def = Object.hasOwn(msg, 'push') ? 'push' : msg.ok ? `reply.${op}` : 'reply.error';
    if (!Object.hasOwn(this.schema.$defs, def)) {
      this.fail(`${label}: the protocol schema has no ${def}`);
      return;
    }
    this.checked++;
    const err = validate({ $ref: `#/$defs/${def}` }, msg, '$', this.schema);
    if (err) this.fail(`${label}: a line breaks the protocol schema (${def}): ${err}: ${JSON.stringify(msg).slice(0, 300)}`);
  },
};

// -- a connection: requests with ids, replies matched by id, pushes to a handler ------------------
//
// The host pings a connection that plays or watches a session once it has been silent for a
// while (`serve --ping-after`) and hangs up on it (`closed`, `unresponsive`) if nothing comes
// back in time: every `ping` push is answered here with a `ping` request, and not passed on.

class Conn {
  static pingsAnswered = 0;

  constructor(host, port, label, onPush) {
    this.label = label;
    this.onPush = onPush;
    this.nextId = 1;
    this.waiting = new Map();
    this.buffer = '';
    this.closed = false;
    this.socket = net.connect({ host, port });
    this.ready = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.socket.setEncoding('utf8');
    this.socket.on('data', (chunk) => this.onData(chunk));
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      this.closed = true;
      for (const { reject } of this.waiting.values()) reject(new Error(`${label}: connection closed`));
      this.waiting.clear();
    });
  }

  onData(chunk) {
    this.buffer += chunk;
    const lines = this.buffer.split('\n');
    this.buffer = lines.pop();
    for (const line of lines) {
      if (!line.trim()) continue;
      const msg = JSON.parse(line);
      protocol.check(msg, this.waiting.get(msg.id)?.op, this.label);
      if (msg.push === 'ping') {
        Conn.pingsAnswered++;
        this.request('ping').catch(() => {}); // any request answers; its reply is dropped
      } else if (Object.hasOwn(msg, 'ok')) {
        const w = this.waiting.get(msg.id);
        if (!w) throw new Error(`${this.label}: a reply to no request: ${line}`);
        this.waiting.delete(msg.id);
        if (w.sync && msg.ok) w.sync(msg.result); // before the pushes that follow the reply
        w.resolve(msg);
      } else {
        this.onPush(msg);
      }
    }
    this.onPush(null); // the end of a chunk: act on the newest state only
  }

  /** Send a request; resolves with the whole reply ({id, ok, result | error}). `sync`, if
   * given, is called with a success's result as soon as the reply is read, before any line
   * after it is handled (a snapshot's seq must be known before the pushes that follow it). */
  request(op, fields = {}, sync = null) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, sync, op });
      this.socket.write(JSON.stringify({ id, op, ...fields }) + '\n');
    });
  }

  /** Like request, but the result, or an Error naming the code for an error reply. */
  async call(op, fields = {}, sync = null) {
    const reply = await this.request(op, fields, sync);
    if (!reply.ok) throw new Error(`${this.label}: ${op}: ${reply.error.code}: ${reply.error.message}`);
    return reply.result;
  }

  destroy() {
    this.socket.destroy();
  }
}

// -- random numbers from a seed (mulberry32) ----------------------------------------------------

function rng(seed) {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

// -- one viewer of a session: a seat that plays, or a spectator ----------------------------------

const SEAT_RECORDS = ['seat_taken', 'seat_held', 'seat_released'];

class Viewer {
  constructor(ctx, sid, seat, contract) {
    this.ctx = ctx;
    this.sid = sid;
    this.seat = seat; // null for a spectator
    this.role = seat === null ? 'spectator' : 'seat';
    this.contract = contract;
    this.name = seat === null ? `${sid} spectator` : `${sid} seat ${seat}`;
    this.abort = ctx.abort;
    this.lastSeq = null;
    this.turn = null;
    this.answered = -1;
    this.inflight = false;
    this.actions = 0;
    this.ended = false;
    this.board = null; // the table as drawn: from the snapshot, then from view pushes alone
    this.names = []; // seat -> name, from the snapshot's seats and seat_taken events
    this.bots = []; // seat -> a host bot holds it
    this.connected = []; // seat -> connected, kept from presence pushes
    this.presence = []; // [seat, connected, reason] of every presence push, in order
    this.presenceDue = null; // the seq of a seat record whose presence push must come next
    this.done = new Promise((resolve) => { this.finish = resolve; });
  }

  fail(why) {
    this.ctx.fail(`${this.name}: ${why}`);
    this.ended = true;
    this.finish();
    this.abort(); // the whole session stops: the others would wait for this seat for ever
  }

  check(schema, value, what) {
    if (schema == null) return; // the game publishes no schema for this (e.g. no view_type)
    this.ctx.checked++;
    const err = validate(schema, value);
    if (err) this.fail(`${what} breaks the published contract: ${err}: ${JSON.stringify(value)}`);
  }

  snapshot(result) {
    this.lastSeq = result.seq;
    this.viewAt = result.seq; // the snapshot holds the view
    this.check(this.contract.view?.[this.role], result.view, `the snapshot's view (seq ${result.seq})`);
    this.timers = result.timers;
    this.names = result.seats.map((s) => (s === null ? null : s.name));
    this.bots = result.seats.map((s) => s !== null && s.bot);
    this.connected = [...result.connected];
    this.draw(result, 'snapshot');
  }

  /** Draw the table from a snapshot or a view push alone: whose turn, until when, who is here. */
  draw(from, what) {
    const n = this.names.length;
    if (from.connected.length !== n) return this.fail(`${what} at seq ${from.seq}: connected has ${from.connected.length} flags for ${n} seats`);
    if (from.to_act.some((s) => s < 0 || s >= n)) return this.fail(`${what} at seq ${from.seq}: to_act ${from.to_act}`);
    const d = from.deadline;
    if (d !== null) {
      const limit = this.timers?.turn_timeout;
      if (limit === null || limit === undefined) return this.fail(`${what} at seq ${from.seq}: a deadline without a turn timer`);
      if (Number.isNaN(Date.parse(d.at)) || !d.at.endsWith('Z')) return this.fail(`${what}: deadline at ${d.at}`);
      if (d.seconds_left < 0 || d.seconds_left > limit + 0.001) return this.fail(`${what}: ${d.seconds_left} s left of a ${limit} s timer`);
      if (from.to_act.length === 0) return this.fail(`${what} at seq ${from.seq}: a deadline with nobody to act`);
    }
    this.board = { seq: from.seq, toAct: from.to_act, deadline: d, connected: from.connected };
    if (what === 'view push') this.ctx.drawn++;
    if (this.ctx.show && this.seat === null) console.log(`  ${this.sid} ${this.describe()}`);
  }

  /** The table as drawn, in one line. */
  describe() {
    const b = this.board;
    const who = (s) => `${this.names[s] ?? `seat ${s}`}`;
    const turn = b.toAct.length ? b.toAct.map(who).join(', ') : 'nobody';
    const clock = b.deadline === null ? 'no turn timer running'
      : `${b.deadline.seconds_left.toFixed(1)} s left (until ${b.deadline.at})`;
    const here = this.names.map((name, s) => (name == null ? '(free)' : `${name}${b.connected[s] ? '' : ' (away)'}`)).join(' ');
    return `seq ${b.seq}: to act: ${turn}; ${clock}; seats: ${here}`;
  }

  onPush(p) {
    if (this.ended) return;
    if (p === null) return this.maybeAct();
    if (p.session !== undefined && p.session !== this.sid) return;
    if (this.presenceDue !== null && p.push !== 'presence') {
      return this.fail(`no presence push after the ${p.push} of seq ${this.presenceDue}`);
    }
    if (p.push === 'event') {
      if (this.lastSeq === null) return this.fail(`a push before the snapshot: seq ${p.seq}`);
      if (p.seq !== this.lastSeq + 1) return this.fail(`seq gap: expected ${this.lastSeq + 1}, got ${p.seq}`);
      this.lastSeq = p.seq;
      this.ctx.pushes++;
      if (p.kind === 'event') this.check(this.contract.event[this.role], p.event, `event seq ${p.seq}`);
      if (p.kind === 'action') this.check(this.contract.action, p.event.action, `action seq ${p.seq}`);
      if (p.kind === 'seat_taken') {
        this.names[p.event.seat] = p.event.name;
        this.bots[p.event.seat] = p.event.bot === true;
      }
      // once the session has ended no human seat is connected (PROTOCOL.md), with no presence push
      if (p.kind === 'ended') this.connected = this.connected.map((c, s) => c && this.bots[s]);
      if (SEAT_RECORDS.includes(p.kind)) this.presenceDue = p.seq;
      this.lastEvent = p;
    } else if (p.push === 'presence') {
      const rec = this.lastEvent;
      if (this.presenceDue !== p.seq || rec?.seq !== p.seq || rec.event.seat !== p.seat) {
        return this.fail(`a presence push for seat ${p.seat} at seq ${p.seq} after ${JSON.stringify(rec)}`);
      }
      this.presenceDue = null;
      this.connected[p.seat] = p.connected;
      this.presence.push([p.seat, p.connected, p.reason]);
      this.ctx.presence++;
    } else if (p.push === 'turn') {
      if (!this.viewed()) return;
      if (this.seat === null || p.seat !== this.seat) return this.fail(`a turn push for seat ${p.seat}`);
      if (p.seq !== this.lastSeq) return this.fail(`turn push at seq ${p.seq}, last event ${this.lastSeq}`);
      if (!p.to_act.includes(p.seat)) return this.fail(`a turn push whose to_act ${p.to_act} lacks seat ${p.seat}`);
      if (this.ctx.viewFlag.view) { // the view push of this seq said the same
        const b = this.board;
        if (b.seq !== p.seq || !deepEqual(b.toAct, p.to_act) || b.deadline?.at !== p.deadline?.at) {
          return this.fail(`turn push at seq ${p.seq} (to act ${p.to_act}, deadline ${p.deadline?.at}) differs from the view drawn: ${this.describe()}`);
        }
      }
      for (const a of p.legal) this.check(this.contract.action, a, `a legal action at seq ${p.seq}`);
      this.turn = p;
    } else if (p.push === 'view') {
      if (p.seq !== this.lastSeq) return this.fail(`view push at seq ${p.seq}, last event ${this.lastSeq}`);
      this.check(this.contract.view?.[this.role], p.view, `view push seq ${p.seq}`);
      if (!deepEqual(p.connected, this.connected)) {
        return this.fail(`view push at seq ${p.seq}: connected ${p.connected}, the presence pushes said ${this.connected}`);
      }
      this.draw(p, 'view push');
      this.viewAt = p.seq;
      this.ctx.views++;
    } else if (p.push === 'ended') {
      if (!this.viewed()) return;
      if (p.seq !== this.lastSeq) return this.fail(`ended push at seq ${p.seq}, last event ${this.lastSeq}`);
      if (p.outcome !== null && this.contract.outcome) this.check(this.contract.outcome, p.outcome, 'the outcome');
      if (this.ctx.viewFlag.view && this.board.toAct.length) return this.fail(`ended, but the view drawn still has ${this.describe()}`);
      this.outcome = p.outcome;
      this.aborted = p.aborted;
      this.ended = true;
      this.finish();
    } else if (p.push === 'closed') {
      // the host hangs up (shutdown, slow_consumer): the drop handler resumes if it can; but
      // `unresponsive` means a ping went unanswered, which this client never lets happen
      if (p.reason === 'unresponsive') this.fail('closed by the host as unresponsive');
    } else if (p.push === 'detached') {
      // another connection resumed this seat (last resume wins): this client never does that to
      // itself, so a detached push here is a finding
      this.fail(`detached from seat ${p.seat}: ${p.reason}`);
    } else if (p.push !== 'stalled') {
      this.fail(`an unknown push ${JSON.stringify(p)}`);
    }
  }

  /** With view pushes asked for, the view of every change comes before its turn or ended push. */
  viewed() {
    if (!this.ctx.viewFlag.view || this.viewAt === this.lastSeq) return true;
    this.fail(`no view push for seq ${this.lastSeq} (the last was for ${this.viewAt})`);
    return false;
  }

  maybeAct() {
    const t = this.turn;
    if (this.ended || this.inflight || !t || t.seq !== this.lastSeq || t.seq === this.answered) return;
    this.answered = t.seq;
    const action = t.legal[this.ctx.random(t.legal.length)];
    this.inflight = true;
    const conn = this.conn;
    conn.request('act', { session: this.sid, action, seq: t.seq }).then((reply) => {
      this.inflight = false;
      if (reply.ok) {
        this.actions++;
        this.ctx.actions++;
      } else if (reply.error.code === 'conflict') {
        this.ctx.conflicts++; // a newer turn push follows when the seat is still to act
      } else if (!['not_your_turn', 'session_ended'].includes(reply.error.code)) {
        return this.fail(`act ${JSON.stringify(action)} refused: ${JSON.stringify(reply.error)}`);
      }
      if (this.dropAfter !== null && this.actions >= this.dropAfter && conn === this.conn) {
        this.dropAfter = null;
        return this.dropAndResume();
      }
      this.maybeAct();
    }, () => { this.inflight = false; });
  }

  /** Drop the connection on purpose, then take the seat back on a new one. */
  async dropAndResume() {
    const seen = this.lastSeq;
    this.conn.destroy();
    this.turn = null;
    this.answered = -1;
    this.presenceDue = null; // a presence push cut off with the connection is not sent again
    this.conn = await this.ctx.connect(`${this.name} (resumed)`, (p) => this.onPush(p));
    // the records after `seen` come as pushes before the reply
    await this.conn.call(
      'resume', { session: this.sid, token: this.token, after: seen, ...this.ctx.viewFlag },
      (r) => { // checked as soon as read, before the pushes that follow it
        if (r.seat !== this.seat) this.fail(`resume gave seat ${r.seat}`);
        if (r.seq !== this.lastSeq) this.fail(`resume snapshot at seq ${r.seq}, pushes reached ${this.lastSeq}`);
        this.viewAt = r.seq; // its snapshot holds the view
        this.check(this.contract.view?.[this.role], r.view, 'the resumed view');
        if (r.connected[this.seat] !== true) this.fail(`resumed, but its snapshot shows seat ${this.seat} away`);
        this.connected = [...r.connected];
        this.draw(r, 'resumed snapshot');
      },
    );
    if (this.ended) return;
    this.ctx.resumes++;
    this.resumed = true;
    this.maybeAct();
  }
}

// -- a session ----------------------------------------------------------------------------------

async function playSession(ctx, game, contract, n) {
  const lobby = await ctx.connect(`${game.id} lobby`, () => {});
  const created = await lobby.call('create', {
    game: game.id, seats: ctx.seats(game), bots: ctx.bots(game), options: ctx.options,
  });
  const sid = created.session;
  const viewers = [];
  let abort;
  const aborted = new Promise((resolve) => { abort = resolve; });
  ctx.abort = () => abort();
  const spectator = new Viewer(ctx, sid, null, contract);
  spectator.conn = await ctx.connect(spectator.name, (p) => spectator.onPush(p));
  await spectator.conn.call('watch', { session: sid, ...ctx.viewFlag }, (r) => spectator.snapshot(r));
  viewers.push(spectator);
  for (const seat of created.free) {
    const v = new Viewer(ctx, sid, seat, contract);
    v.dropAfter = seat === created.free[0] ? ctx.dropAfter : null; // one seat drops, mid-game
    v.conn = await ctx.connect(v.name, (p) => v.onPush(p));
    const joined = await v.conn.call('join', { session: sid, seat, name: `js${seat}`, ...ctx.viewFlag }, (r) => v.snapshot(r));
    v.token = joined.token;
    viewers.push(v);
  }
  lobby.destroy();
  const failed = await Promise.race([Promise.all(viewers.map((v) => v.done)), aborted.then(() => true)]);
  for (const v of viewers) v.conn.destroy();
  if (failed === true) throw new Error(`${sid}: stopped at the first problem`);
  const seats = viewers.filter((v) => v.seat !== null);
  const ends = new Set(viewers.map((v) => v.lastSeq));
  if (ends.size !== 1) ctx.fail(`${sid}: viewers ended at different seqs ${[...ends]}`);
  if (viewers.some((v) => v.aborted)) ctx.fail(`${sid}: aborted: ${viewers[0].aborted}`);
  if (ctx.dropAfter !== null && seats.length && !seats[0].resumed) {
    ctx.note(`${sid}: the game ended before seat ${seats[0].seat} had ${ctx.dropAfter} actions to drop after`);
  } else if (ctx.dropAfter !== null && seats.length) {
    // every other viewer saw the dropped seat come back last (and, if the host noticed the old
    // connection close first, go away before that)
    const dropped = seats[0].seat;
    for (const v of viewers.filter((x) => x !== seats[0])) {
      const mine = v.presence.filter(([s]) => s === dropped);
      const last = mine.at(-1);
      if (!last || last[1] !== true || last[2] !== 'resumed') {
        ctx.fail(`${v.name}: presence of the dropped seat ${dropped}: ${JSON.stringify(mine)}, not back (resumed) last`);
      }
      if (mine.some(([, on, why]) => !on && why !== 'gone')) ctx.fail(`${v.name}: seat ${dropped} left as ${JSON.stringify(mine)}`);
    }
  }
  ctx.sessions++;
  const drawn = spectator.board && ctx.viewFlag.view ? `; last drawn ${spectator.describe()}` : '';
  console.log(`${game.id} #${n + 1} ${sid}: ended at seq ${spectator.lastSeq}, ${seats.map((v) => v.actions).join('+')} actions${drawn}`);
}

// -- main ---------------------------------------------------------------------------------------

const USAGE = `usage: node play.mjs --port PORT --schema FILE (from \`gamehost schema\`)
       --protocol FILE (from \`gamehost schema --protocol\`)
       [--host H (127.0.0.1)] [--game ID (every game)] [--seats N] [--bots K (1)] [--games G (1)]
       [--options JSON ({})] [--drop-after N (3)] [--seed S (1)] [--timeout SEC (300)]
       [--view-pushes] [--show]`;

function parseCommandLine() {
  return parseArgs({
    options: {
      help: { type: 'boolean', short: 'h', default: false },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string' },
      schema: { type: 'string' },
      protocol: { type: 'string' },
      game: { type: 'string' },
      seats: { type: 'string' },
      bots: { type: 'string', default: '1' },
      games: { type: 'string', default: '1' },
      options: { type: 'string', default: '{}' },
      'drop-after': { type: 'string', default: '3' },
      seed: { type: 'string', default: '1' },
      timeout: { type: 'string', default: '300' },
      'view-pushes': { type: 'boolean', default: false },
      show: { type: 'boolean', default: false },
    },
  });
}

async function main() {
  let values;
  try {
    ({ values } = parseCommandLine());
  } catch (err) {
    console.error(`${err.message}\n${USAGE}`);
    process.exit(2);
  }
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  if (!values.port || !values.schema || !values.protocol) {
    console.error(USAGE);
    process.exit(2);
  }
  const published = JSON.parse(fs.readFileSync(values.schema, 'utf8'));
  protocol.schema = JSON.parse(fs.readFileSync(values.protocol, 'utf8'));
  const contracts = published.games ?? { [published.game.id]: published };
  const problems = [];
  const notes = [];
  const ctx = {
    actions: 0, pushes: 0, checked: 0, conflicts: 0, resumes: 0, sessions: 0, views: 0,
    presence: 0, drawn: 0, show: values.show,
    options: JSON.parse(values.options),
    viewFlag: values['view-pushes'] ? { view: true } : {},
    dropAfter: Number(values['drop-after']) > 0 ? Number(values['drop-after']) : null,
    random: rng(Number(values.seed)),
    fail: (why) => { if (problems.length < 20) problems.push(why); },
    abort: () => {},
    note: (what) => notes.push(what),
    connect: async (label, onPush) => {
      const c = new Conn(values.host, Number(values.port), label, onPush);
      await c.ready;
      return c;
    },
    seats: (g) => (values.seats ? Number(values.seats) : Math.max(g.min_seats, Math.min(3, g.max_seats))),
    bots: (g) => Math.min(Number(values.bots), ctx.seats(g) - 1),
  };
  protocol.fail = (why) => { // a line off the schema: a problem, and the session stops
    ctx.fail(why);
    ctx.abort();
  };
  const timer = setTimeout(() => {
    console.error(`FAILED: not done after ${values.timeout} s`);
    process.exit(1);
  }, Number(values.timeout) * 1000);
  const lobby = await ctx.connect('lobby', () => {});
  const hello = await lobby.call('hello', { protocol: 1, client: 'gamehost-js' });
  const { games } = await lobby.call('games');
  lobby.destroy();
  const chosen = games.filter((g) => !values.game || g.id === values.game);
  if (!chosen.length) {
    console.error(`error: no game ${values.game}; installed: ${games.map((g) => g.id).join(', ')}`);
    process.exit(2);
  }
  console.log(`connected to ${hello.host} ${hello.version}; playing ${chosen.map((g) => g.id).join(', ')}`);
  for (const game of chosen) {
    const contract = contracts[game.id];
    if (!contract) {
      problems.push(`${game.id}: not in the schema file`);
      continue;
    }
    try {
      for (let n = 0; n < Number(values.games); n++) await playSession(ctx, game, contract, n);
    } catch (err) {
      problems.push(String(err.message || err));
      break;
    }
  }
  clearTimeout(timer);
  for (const n of notes) console.log(`note: ${n}`);
  const summary = `${ctx.sessions} sessions, ${ctx.actions} actions, ${ctx.pushes} pushes in gapless order,`
    + ` ${protocol.checked} lines checked against the protocol schema,`
    + ` ${ctx.checked} values checked against the contract, ${ctx.resumes} resumes after a dropped`
    + ` connection, ${ctx.presence} presence pushes, ${ctx.conflicts} conflicts,`
    + ` ${Conn.pingsAnswered} pings answered`
    + (values['view-pushes'] ? `, ${ctx.views} view pushes, ${ctx.drawn} tables drawn from them` : '');
  if (problems.length) {
    for (const p of problems) console.error(`problem: ${p}`);
    console.error(`FAILED: ${summary}`);
    process.exit(1);
  }
  console.log(`ok: ${summary}`);
}

main().catch((err) => {
  console.error(`FAILED: ${err.stack || err}`);
  process.exit(1);
});
