// The load `gamehost bench --peer boardgameio` puts on server.js: TABLES matches of Crazy Eights
// with SEATS seats, every seat a boardgame.io client over its socket.io transport (the library's
// own client), each answering its turn with a random legal move, a new match when one ends, for
// SECONDS seconds. Prints {"event": "playing"} once every match is made and joined, then one
// JSON object: moves, matches started and ended, the round trip of each move (sent -> the state
// that includes it) p50/p99/p99.9.
// Usage: node load.js PORT TABLES SECONDS [SEATS] [SEED]
"use strict";
const { Client } = require("boardgame.io/client");
const { SocketIO } = require("boardgame.io/multiplayer");
const { CrazyEights, legalMoves } = require("./crazy_eights.js");

const [port, tables, seconds] = process.argv.slice(2, 5).map(Number);
const seats = Number(process.argv[5] || 4);
let seed = Number(process.argv[6] || 1);
const rand = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648; // a small LCG: the load is reproducible
  return seed / 2147483648;
};
const base = `http://127.0.0.1:${port}`;
const trips = [];
let moves = 0;
let matches = 0;
let ended = 0; // matches played to their end (a winner)
let stopping = false;

async function post(path, body) {
  const r = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.json();
}

async function makeMatch() {
  const { matchID } = await post("/games/crazy-eights/create", { numPlayers: seats });
  const creds = [];
  for (let i = 0; i < seats; i++) {
    const j = await post(`/games/crazy-eights/${matchID}/join`, { playerID: String(i), playerName: `p${i}` });
    creds.push(j.playerCredentials);
  }
  return { matchID, creds };
}

function playMatch({ matchID, creds }) {
  // resolves when the match is over (or the run stops)
  return new Promise((resolve) => {
    const clients = [];
    let sentAt = null;
    let lastState = -1;
    let done = false;
    let stop = null;
    const finish = () => {
      if (done) return; // stopping a client notifies its subscribers again
      done = true;
      clearInterval(stop);
      for (const c of clients) c.stop();
      resolve();
    };
    for (let i = 0; i < seats; i++) {
      const pid = String(i);
      const c = Client({
        game: CrazyEights,
        multiplayer: SocketIO({ server: base }),
        matchID,
        playerID: pid,
        credentials: creds[i],
        debug: false,
      });
      c.subscribe((state) => {
        if (!state || stopping || done) return;
        if (state.ctx.gameover) {
          if (pid === "0") {
            ended += 1;
            finish();
          }
          return;
        }
        if (state._stateID <= lastState && state.ctx.currentPlayer !== pid) return;
        if (state.ctx.currentPlayer !== pid) return;
        if (state._stateID === lastState) return;
        lastState = state._stateID;
        if (sentAt !== null) {
          trips.push(performance.now() - sentAt);
          moves += 1;
        }
        const options = legalMoves(state.G, pid);
        const [name, ...args] = options[Math.floor(rand() * options.length)];
        sentAt = performance.now();
        c.moves[name](...args);
      });
      clients.push(c);
    }
    for (const c of clients) c.start();
    stop = setInterval(() => {
      if (stopping) finish();
    }, 100);
  });
}

async function table() {
  while (!stopping) {
    const m = await makeMatch();
    matches += 1;
    await playMatch(m);
  }
}

(async () => {
  const first = [];
  for (let t = 0; t < tables; t++) first.push(makeMatch());
  const made = await Promise.all(first);
  process.stdout.write(JSON.stringify({ event: "playing" }) + "\n");
  const t0 = performance.now();
  const runs = made.map(async (m) => {
    matches += 1;
    await playMatch(m);
    await table();
  });
  setTimeout(() => {
    stopping = true;
  }, seconds * 1000);
  await Promise.race([Promise.all(runs), new Promise((r) => setTimeout(r, seconds * 1000 + 2000))]);
  const elapsed = (performance.now() - t0) / 1000;
  trips.sort((a, b) => a - b);
  const q = (p) => (trips.length ? trips[Math.min(trips.length, Math.max(1, Math.ceil(p * trips.length))) - 1] : null);
  process.stdout.write(
    JSON.stringify({ moves, seconds: elapsed, matches, ended, rtt_p50_ms: q(0.5), rtt_p99_ms: q(0.99), rtt_p999_ms: q(0.999) }) + "\n",
  );
  process.exit(0);
})();
