// A table per game, drawn from the game's view (what this viewer may see), and its legal actions
// as controls. `generic` serves any other installed game from its view and legal actions alone.
//
// A renderer has board(s, me, moves) and controls(legal, s, me, act, ui), and may have
// scores(outcome, s) for the game-over panel. `moves` is null unless this page's seat is to
// act; then it is { legal, act(action), choose(card) }: a card of the hand that is a move is
// drawn once, in the hand, as a button (choose() asks the controls for the rest of the move,
// such as the suit an 8 names). `ui` keeps what the player is choosing across redraws (pushes
// of other seats redraw the board while a seat makes up its mind).
import { card, el, fmt, jsonTree, seatName, suitName } from "./common.js";

export function describeAction(a) {
  if (!a || typeof a !== "object") return fmt(a);
  switch (a.type) {
    case "play": return a.suit ? `play ${a.card}, name ${suitName(a.suit)}` : `play ${a.card}`;
    case "guess": return `guess ${a.guess}`;
    case "give": return `give ${(a.to || []).map((g) => `${g.drinks} to seat ${g.seat}`).join(", ")}`;
    case "vote": return `vote ${a.yes ? "yes" : "no"}`;
    case "bet": case "raise": return `${a.type} ${a.amount}`;
    default: {
      const rest = Object.entries(a).filter(([k]) => k !== "type").map(([k, v]) => `${k} ${fmt(v)}`);
      return [a.type, ...rest].join(" ");
    }
  }
}

// The cards that are moves: card -> the legal actions that play it (those with a `card` field).
function cardMoves(legal) {
  const plays = new Map();
  for (const a of legal || []) {
    if (!a || typeof a.card !== "string") continue;
    if (!plays.has(a.card)) plays.set(a.card, []);
    plays.get(a.card).push(a);
  }
  return plays;
}

// A hand, each card once: a card that is a move is a button that makes it (or, when it is
// several moves, asks which: an 8 and the suit it names); the others are dimmed while it is
// this seat's turn.
function handCards(cards, moves) {
  const plays = moves ? cardMoves(moves.legal) : new Map();
  return cards.map((c) => {
    const options = plays.get(c);
    if (!options) return card(c, { cls: moves && plays.size ? "unplayable" : "" });
    const one = options.length === 1;
    return card(c, {
      button: true,
      cls: "playable",
      title: one ? describeAction(options[0]) : `${describeAction({ type: "play", card: c })}: then name a suit`,
      action: one ? JSON.stringify(options[0]) : undefined,
      onclick: () => (one ? moves.act(options[0]) : moves.choose(c)),
    });
  });
}

// What a card that is several moves still needs (the suit an 8 names): one button each.
function cardChoice(legal, act, ui) {
  const options = ui.card ? cardMoves(legal).get(ui.card) : null;
  if (!options || options.length < 2) return null;
  return el("div", { class: "suits" }, el("span", {}, `${ui.card}: name a suit `),
    options.map((a) => el("button", { class: "suit-choice", "data-action": JSON.stringify(a), onclick: () => act(a) },
      a.suit ? suitName(a.suit) : describeAction(a))),
    el("button", { class: "cancel", onclick: () => ui.choose(null) }, "another card"));
}

function actionButtons(legal, act, filter = () => true) {
  return el("div", { class: "actions" }, legal.filter(filter).map((a) =>
    el("button", { class: "action", "data-action": JSON.stringify(a), onclick: () => act(a) }, describeAction(a))));
}

// Whether a connection holds seat i: a dot, from the snapshot's `connected` flags as the
// `presence` pushes update them (none from a host that sends no flags).
export function presenceDot(s, i) {
  if (!Array.isArray(s.connected)) return null;
  const seat = s.seats[i];
  const on = s.connected[i] === true;
  const title = !seat ? "a free seat" : seat.bot ? "a host bot: always here" : on ? "connected" : "not connected: away";
  return el("span", { class: `presence ${on ? "on" : "off"}`, title, "data-connected": String(on) });
}

function seatClass(s, me, i) {
  const away = Array.isArray(s.connected) && s.seats[i] && s.connected[i] === false;
  return `seat${s.to_act.includes(i) ? " to-act" : ""}${i === me ? " me" : ""}${away ? " away" : ""}`;
}

function seatsStrip(s, me, extra) {
  return el("div", { class: "seats" }, s.seats.map((x, i) => el("div", {
    class: seatClass(s, me, i), "data-seat": i,
  }, el("div", { class: "name" }, presenceDot(s, i), seatName(s.seats, i)), extra ? extra(i) : null)));
}

function chips(n) {
  return el("span", { class: "chips", title: `${n} chips` }, el("span", { class: "chip" }), ` ${n}`);
}

// ---- Crazy Eights ----------------------------------------------------------------------------
const crazyEights = {
  board(s, me, moves) {
    const v = s.view;
    return el("div", { class: "table ce" },
      seatsStrip(s, me, (i) => el("div", {},
        el("div", { class: "hand-size" }, `${v.hand_sizes[i]} card${v.hand_sizes[i] === 1 ? "" : "s"}`),
        el("div", { class: "score" }, `score ${v.scores[i]}`))),
      el("div", { class: "middle" },
        el("div", { class: "pile" }, el("div", { class: "label" }, "discard"), card(v.top)),
        el("div", { class: "pile" }, el("div", { class: "label" }, "stock"), card(null), el("div", {}, `${v.stock_size} left`)),
        el("div", { class: "facts" },
          el("div", {}, `suit to follow: ${suitName(v.current_suit)}`),
          el("div", {}, `deal ${v.deal} \u00b7 ${v.direction} \u00b7 target ${v.target}`),
          v.penalty ? el("div", {}, `penalty: draw ${v.penalty}`) : null)),
      v.hand ? el("div", { class: "hand", id: "hand" },
        el("div", { class: "label" }, moves && cardMoves(moves.legal).size ? "your hand: click a card to play it" : "your hand"),
        handCards(v.hand, moves)) : null);
  },
  controls(legal, s, me, act, ui) {
    // the cards are played from the hand; here: the suit an 8 names, and the other moves
    return el("div", {}, cardChoice(legal, act, ui), actionButtons(legal, act, (a) => a.type !== "play"));
  },
  scores(o) {
    return {
      columns: [o.countdown ? "number" : "points"],
      rows: (o.scores || []).map((n) => [n]),
      note: `${o.deals} deal${o.deals === 1 ? "" : "s"}${o.countdown ? " \u00b7 countdown: lower is better" : ""}`,
    };
  },
};

// ---- Around the World -------------------------------------------------------------------------
// Round 2's pyramid: one line per row value, its take and give cards side by side.
function columnsGrid(cells) {
  const rows = [...new Set(cells.map((c) => c.row))].sort((a, b) => a - b);
  const cell = (row, column) => {
    const c = cells.find((x) => x.row === row && x.column === column);
    return c ? el("td", { class: `col-${column}` }, card(c.card), el("div", { class: "label" }, `${column} ${c.value}`)) : el("td", {});
  };
  return el("div", { class: "columns" }, el("div", { class: "label" }, "round 2: take and give"),
    el("table", { class: "grid" }, el("tbody", {}, rows.map((r) => el("tr", { "data-row": r }, cell(r, "take"), cell(r, "give"))))));
}

const aroundTheWorld = {
  board(s, me) {
    const v = s.view;
    const ledger = el("table", { class: "ledger", id: "ledger" },
      el("thead", {}, el("tr", {}, ["seat", "taken", "given", "cancelled", "round 1", "round 2"].map((h) => el("th", {}, h)))),
      el("tbody", {}, (v.ledger || []).map((l) => el("tr", {},
        el("td", {}, seatName(s.seats, l.seat)),
        el("td", {}, l.total.taken), el("td", {}, l.total.given), el("td", {}, l.total.cancelled),
        el("td", {}, `${l.round1.taken}/${l.round1.given}`), el("td", {}, `${l.round2.taken}/${l.round2.given}`)))));
    const q = v.question;
    return el("div", { class: "table atw" },
      el("div", { class: "facts" },
        el("div", {}, `phase: ${v.phase}`),
        v.shoe ? el("div", {}, `shoe: ${v.shoe.left} of ${v.shoe.size} cards left`) : null,
        q ? el("div", {}, `question for ${seatName(s.seats, q.seat)}: ${q.question} (${q.drinks} drink${q.drinks === 1 ? "" : "s"})`) : null,
        (v.pending || []).length ? el("div", {}, `drinks to give out: ${v.pending.map((p) => `${seatName(s.seats, p.seat)} ${p.drinks}`).join(", ")}`) : null),
      seatsStrip(s, me, (i) => {
        const row = (v.rows || []).find((r) => r.seat === i);
        return row ? el("div", { class: "row-cards" }, row.cards.map((c) => card(c))) : null;
      }),
      (v.columns || []).length ? columnsGrid(v.columns) : null,
      el("h3", {}, "Drinks ledger"), ledger);
  },
  controls(legal, s, me, act, ui) {
    const gives = legal.filter((a) => a.type === "give");
    return el("div", {}, gives.length ? giveForm(gives, s, me, act, ui) : null,
      actionButtons(legal, act, (a) => a.type !== "give"));
  },
  scores(o, s) {
    const book = o.ledger || [];
    const most = Math.max(0, ...book.map((l) => l.total.taken));
    const rows = s.seats.map((_, i) => {
      const l = book.find((x) => x.seat === i);
      return l ? [l.total.taken, l.total.given, l.total.cancelled, `${l.round1.taken}/${l.round1.given}`, `${l.round2.taken}/${l.round2.given}`] : [];
    });
    return {
      columns: ["drank", "gave", "cancelled", "round 1 drank/gave", "round 2 drank/gave"],
      rows,
      best: most ? book.filter((l) => l.total.taken === most).map((l) => l.seat) : [],
      bestLabel: `Drank the most (${most} drink${most === 1 ? "" : "s"})`,
      note: o.totals ? `the table drank ${o.totals.taken} in all${o.best ? ` \u00b7 best poker hand: ${o.best.hand}` : ""}` : "",
    };
  },
};

// Hand out owed drinks freely: a stepper per other seat; the give is sent once the drinks add
// up to what is owed (any such split is legal: the turn push lists only a sample, offered as
// quick picks below). The split made so far survives redraws (ui.split).
function giveForm(gives, s, me, act, ui) {
  const owed = gives[0].to.reduce((n, g) => n + g.drinks, 0);
  const others = s.seats.map((_, i) => i).filter((i) => i !== me);
  const key = `${me}:${owed}:${others.join(",")}`;
  if (!ui.split || ui.split.key !== key) ui.split = { key, counts: new Map(others.map((i) => [i, 0])) };
  const counts = ui.split.counts;
  const given = () => [...counts.values()].reduce((n, k) => n + k, 0);
  const left = el("span", { id: "give-left" });
  const send = el("button", { id: "give-send", class: "action-send", onclick: () => {
    if (given() !== owed) return;
    act({ type: "give", to: others.filter((i) => counts.get(i) > 0).map((i) => ({ seat: i, drinks: counts.get(i) })) });
  } }, "give");
  const lines = others.map((i) => {
    const input = el("input", { type: "number", class: "num drinks", min: 0, max: owed, step: 1, value: counts.get(i), "aria-label": `drinks for ${seatName(s.seats, i)}` });
    const less = el("button", { class: "less", title: "one less", onclick: () => set(counts.get(i) - 1) }, "\u2212");
    const more = el("button", { class: "more", title: "one more", onclick: () => set(counts.get(i) + 1) }, "+");
    function set(n) {
      const room = owed - given() + counts.get(i);
      counts.set(i, Math.max(0, Math.min(room, Number.isFinite(n) ? Math.trunc(n) : 0)));
      update();
    }
    input.addEventListener("input", () => set(Number(input.value)));
    return { i, input, less, more, row: el("div", { class: "give-seat", "data-seat": i },
      el("span", { class: "name" }, seatName(s.seats, i)), less, input, more) };
  });
  function update() {
    const rest = owed - given();
    for (const l of lines) {
      if (Number(l.input.value) !== counts.get(l.i)) l.input.value = counts.get(l.i);
      l.less.disabled = counts.get(l.i) === 0;
      l.more.disabled = rest === 0;
    }
    left.textContent = rest ? `${rest} of ${owed} left to give` : `all ${owed} given out`;
    send.disabled = rest !== 0;
  }
  update();
  const label = (a) => a.to.map((g) => `${g.drinks} to ${seatName(s.seats, g.seat)}`).join(", ");
  return el("div", { class: "give-split" },
    el("p", {}, `Give out ${owed} drink${owed === 1 ? "" : "s"}: split them as you like among the others.`),
    el("div", { class: "give-seats" }, lines.map((l) => l.row)),
    el("div", { class: "toolbar" }, send, left),
    el("div", { class: "quick" }, el("span", { class: "muted" }, "quick picks: "),
      gives.map((a) => el("button", { class: "action", "data-action": JSON.stringify(a), onclick: () => act(a) }, label(a)))));
}

// ---- Seven Twenty-Seven -----------------------------------------------------------------------
const sevenTwentySeven = {
  board(s, me) {
    const v = s.view;
    return el("div", { class: "table stc" },
      el("div", { class: "facts" },
        el("div", {}, `hand ${v.hand} \u00b7 ${v.phase} round ${v.round}`),
        el("div", { class: "pot" }, "pot ", chips(v.pot_total)),
        el("div", {}, `bet to match ${v.current_bet} \u00b7 you call ${v.to_call ?? 0} \u00b7 bets ${v.min_bet}\u2013${v.max_bet}`)),
      el("div", { class: "seats" }, (v.players || []).map((p) => el("div", {
        class: `${seatClass(s, me, p.seat)}${p.folded ? " folded" : ""}`, "data-seat": p.seat,
      },
      el("div", { class: "name" }, presenceDot(s, p.seat), seatName(s.seats, p.seat)),
      el("div", {}, chips(p.stack), p.bet ? ` bet ${p.bet}` : ""),
      el("div", { class: "row-cards" }, (p.cards || []).map((c) => card(c))),
      el("div", { class: "muted" }, p.folded ? "folded" : p.busted ? "busted" : p.out ? "out" : p.all_in ? "all in"
        : (p.visible || []).length ? `showing ${p.visible.map((x) => x / 2).join(" / ")}` : "")))),
      v.you ? el("div", { class: "you" }, `your totals: ${(v.you.totals || []).map((x) => x / 2).join(" or ")}`) : null);
  },
  controls(legal, s, me, act) {
    return actionButtons(legal, act);
  },
  scores(o) {
    const signed = (n) => (n > 0 ? `+${n}` : n < 0 ? `\u2212${-n}` : "0");
    return {
      columns: ["chips", "net"],
      rows: (o.stacks || []).map((n, i) => [n, signed((o.net || [])[i] || 0)]),
      note: `${o.hands} hand${o.hands === 1 ? "" : "s"} played${o.reason ? ` \u00b7 ${o.reason.replace(/_/g, " ")}` : ""}`,
    };
  },
};

// ---- any other game ---------------------------------------------------------------------------
// The view as a tree. When the view has a `hand` of cards and some legal actions name a card
// of it, that hand is drawn apart, its cards played by clicking them.
const generic = {
  board(s, me, moves) {
    const v = s.view;
    const hand = v && typeof v === "object" && Array.isArray(v.hand) && v.hand.every((c) => typeof c === "string")
      && cardMoves(moves && moves.legal).size ? v.hand : null;
    const rest = hand ? Object.fromEntries(Object.entries(v).filter(([k]) => k !== "hand")) : v;
    return el("div", { class: "table generic" }, seatsStrip(s, me), el("div", { class: "view" }, jsonTree(rest, "view")),
      hand ? el("div", { class: "hand", id: "hand" }, el("div", { class: "label" }, "your hand: click a card to play it"), handCards(hand, moves)) : null);
  },
  controls(legal, s, me, act, ui) {
    const hand = s.view && Array.isArray(s.view.hand) ? new Set(s.view.hand) : new Set();
    return el("div", {}, cardChoice(legal, act, ui), actionButtons(legal, act, (a) => !(a && hand.has(a.card))));
  },
};

// The outcome's numbers, one row per seat: each list of numbers as long as the seats.
function genericScores(o, s) {
  const keys = Object.keys(o).filter((k) => k !== "winners" && Array.isArray(o[k])
    && o[k].length === s.seats.length && o[k].every((x) => typeof x === "number"));
  return { columns: keys, rows: s.seats.map((_, i) => keys.map((k) => o[k][i])) };
}

// The game-over panel: who won, by name; a table of every seat's result; the host's words for
// the end (`text`, when it sent them); the outcome as sent, folded away.
export function outcomePanel(s, text) {
  const o = s.outcome;
  const render = renderers[s.game] || generic;
  const name = (i) => seatName(s.seats, i);
  const parts = [el("h3", {}, "Game over")];
  if (s.aborted) parts.push(el("p", { class: "aborted" }, `Ended by the host (${s.aborted}): no result.`));
  if (o && typeof o === "object") {
    let sc = null;
    try { sc = (render.scores || genericScores)(o, s); } catch { sc = genericScores(o, s); }
    const winners = Array.isArray(o.winners) ? o.winners : null;
    const best = winners || sc.best || [];
    const label = winners ? (winners.length === 1 ? "Winner" : "Winners") : sc.bestLabel || "Ahead";
    if (winners && !winners.length) parts.push(el("p", { class: "winners" }, "No winner."));
    else if (best.length) {
      parts.push(el("p", { class: "winners" }, `${label}: `,
        best.flatMap((w, k) => [k ? (k === best.length - 1 ? " and " : ", ") : "", el("strong", { class: "winner", "data-seat": w }, name(w))])));
    }
    if (sc.columns.length) {
      parts.push(el("table", { class: "scores", id: "scores" },
        el("thead", {}, el("tr", {}, el("th", {}, "seat"), sc.columns.map((c) => el("th", {}, c)))),
        el("tbody", {}, s.seats.map((_, i) => el("tr", { "data-seat": i, class: best.includes(i) ? "winner" : "" },
          el("td", { class: "name" }, name(i)), (sc.rows[i] || []).map((x) => el("td", {}, fmt(x))))))));
    }
    if (sc.note) parts.push(el("p", { class: "muted note" }, sc.note));
  }
  if (text) parts.push(el("p", { class: "end-text" }, text));
  if (o) parts.push(el("details", {}, el("summary", {}, "the outcome as sent"), jsonTree(o)));
  return el("div", { id: "outcome" }, parts);
}

export const renderers = {
  "crazy-eights": crazyEights,
  "around-the-world": aroundTheWorld,
  "seven-twenty-seven": sevenTwentySeven,
  generic,
};
