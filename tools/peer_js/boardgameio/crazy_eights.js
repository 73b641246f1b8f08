// Crazy Eights for boardgame.io, the rules of gamehost's crazy-eights plugin with its default
// options (docs/rules/crazy-eights.md), as `gamehost bench --peer boardgameio` plays it: one deck,
// 2-5 players, 7 cards with two players and 5 otherwise, a starter eight buried in the middle of
// the stock, a draw at any time and as many as wanted, a pass only when nothing can be drawn and
// nothing can be played, the discards reshuffled into an empty stock, a deal blocked after a
// round of passes, scores to 50 per player. Randomness is boardgame.io's seeded `random`.
"use strict";
const { INVALID_MOVE } = require("boardgame.io/core");

const RANKS = ["2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K", "A"];
const SUITS = ["C", "D", "H", "S"];
const rank = (c) => c.slice(0, -1);
const suit = (c) => c.slice(-1);
const points = (c) => {
  const r = rank(c);
  if (r === "8") return 50;
  if (["K", "Q", "J", "10"].includes(r)) return 10;
  if (r === "A") return 1;
  return Number(r);
};

function deal(G, ctx, random) {
  const n = ctx.numPlayers;
  const stock = random.Shuffle(RANKS.flatMap((r) => SUITS.map((s) => r + s)));
  const size = n === 2 ? 7 : 5;
  const hands = Array.from({ length: n }, () => []);
  for (let k = 0; k < size; k++) for (let i = 1; i <= n; i++) hands[(G.dealer + i) % n].push(stock.pop());
  let starter = stock.pop();
  for (let tries = 0; rank(starter) === "8" && tries < 52; tries++) {
    // bury: back at a random place in the middle half of the stock, the next card turned
    const at = Math.floor(stock.length / 4) + random.Die(Math.max(1, Math.floor(stock.length / 2))) - 1;
    stock.splice(at, 0, starter);
    starter = stock.pop();
  }
  G.hands = hands;
  G.stock = stock;
  G.discard = [starter];
  G.current = suit(starter);
  G.passes = 0;
  G.drew = false;
}

function legalPlays(G, hand) {
  const top = G.discard[G.discard.length - 1];
  return hand.filter((c) => rank(c) === "8" || rank(c) === rank(top) || suit(c) === G.current);
}

function canDraw(G) {
  return G.stock.length > 0 || G.discard.length > 1;
}

function endDeal(G, ctx, events, winner) {
  const n = ctx.numPlayers;
  const left = G.hands.map((h) => h.reduce((a, c) => a + points(c), 0));
  if (winner !== null) {
    G.scores[winner] += left.reduce((a, b) => a + b, 0);
  } else {
    const low = Math.min(...left);
    const lows = left.map((v, i) => (v === low ? i : -1)).filter((i) => i >= 0);
    const won = left.reduce((a, v) => a + (v - low), 0);
    for (const i of lows) G.scores[i] += Math.floor(won / lows.length);
  }
  G.deals += 1;
  if (Math.max(...G.scores) >= 50 * n) {
    const best = Math.max(...G.scores);
    G.over = { winners: G.scores.map((v, i) => (v === best ? i : -1)).filter((i) => i >= 0) };
    return;
  }
  G.dealer = (G.dealer + 1) % n;
  G.pendingDeal = true;
  events.endTurn({ next: String((G.dealer + 1) % n) });
}

const CrazyEights = {
  name: "crazy-eights",
  minPlayers: 2,
  maxPlayers: 5,
  setup: ({ ctx, random }) => {
    const G = { scores: Array(ctx.numPlayers).fill(0), dealer: 0, deals: 0, over: null };
    deal(G, ctx, random);
    return G;
  },
  turn: {
    order: {
      first: ({ G, ctx }) => (G.dealer + 1) % ctx.numPlayers,
      next: ({ ctx }) => (ctx.playOrderPos + 1) % ctx.numPlayers,
    },
    onBegin: ({ G, ctx, random }) => {
      if (G.pendingDeal) {
        G.pendingDeal = false;
        deal(G, ctx, random);
      }
      G.drew = false;
    },
  },
  moves: {
    // client: false: the clients hold views (no stock, no other hands), the server decides
    play: { client: false, move: ({ G, ctx, playerID, events }, card, named) => {
      const hand = G.hands[playerID];
      const at = hand.indexOf(card);
      if (at < 0 || !legalPlays(G, hand).includes(card)) return INVALID_MOVE;
      const last = hand.length === 1;
      if (rank(card) === "8") {
        if (last ? named !== undefined : !SUITS.includes(named)) return INVALID_MOVE;
      } else if (named !== undefined) return INVALID_MOVE;
      hand.splice(at, 1);
      G.discard.push(card);
      G.current = rank(card) === "8" && !last ? named : suit(card);
      G.passes = 0;
      if (last) return endDeal(G, ctx, events, Number(playerID));
      events.endTurn();
    } },
    draw: { client: false, move: ({ G, playerID, random }) => {
      if (!canDraw(G)) return INVALID_MOVE;
      if (G.stock.length === 0) {
        const top = G.discard.pop();
        G.stock = random.Shuffle(G.discard);
        G.discard = [top];
      }
      G.hands[playerID].push(G.stock.pop());
      G.drew = true;
      G.passes = 0;
    } },
    pass: { client: false, move: ({ G, ctx, playerID, events }) => {
      if (canDraw(G) || legalPlays(G, G.hands[playerID]).length) return INVALID_MOVE;
      G.passes = G.drew ? 0 : G.passes + 1;
      if (G.passes >= ctx.numPlayers) return endDeal(G, ctx, events, null);
      events.endTurn();
    } },
  },
  endIf: ({ G }) => G.over || undefined,
  playerView: ({ G, playerID }) => ({
    ...G,
    stock: G.stock.length,
    hands: G.hands.map((h, i) => (String(i) === playerID ? h : h.length)),
  }),
};

// what a seat may do now, from its view (the bench's clients pick one at random)
function legalMoves(view, playerID) {
  const hand = view.hands[playerID];
  const out = [];
  for (const c of legalPlays({ ...view, current: view.current }, hand)) {
    if (rank(c) === "8" && hand.length > 1) for (const s of SUITS) out.push(["play", c, s]);
    else out.push(["play", c]);
  }
  const drawable = view.stock > 0 || view.discard.length > 1;
  if (drawable) out.push(["draw"]);
  if (!drawable && !out.length) out.push(["pass"]);
  return out;
}

module.exports = { CrazyEights, legalMoves };
