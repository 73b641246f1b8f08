// A table per game, drawn from the game's view (what this viewer may see), and its legal actions
// as controls. `generic` serves any other installed game from its view and legal actions alone.
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

function actionButtons(legal, act, filter = () => true) {
  return el("div", { class: "actions" }, legal.filter(filter).map((a) =>
    el("button", { class: "action", "data-action": JSON.stringify(a), onclick: () => act(a) }, describeAction(a))));
}

function seatsStrip(s, me, extra) {
  return el("div", { class: "seats" }, s.seats.map((x, i) => el("div", {
    class: `seat${s.to_act.includes(i) ? " to-act" : ""}${i === me ? " me" : ""}`, "data-seat": i,
  }, el("div", { class: "name" }, seatName(s.seats, i)), extra ? extra(i) : null)));
}

function chips(n) {
  return el("span", { class: "chips", title: `${n} chips` }, el("span", { class: "chip" }), ` ${n}`);
}

// ---- Crazy Eights ----------------------------------------------------------------------------
const crazyEights = {
  board(s, me) {
    const v = s.view;
    return el("div", { class: "table ce" },
      seatsStrip(s, me, (i) => el("div", {},
        el("div", { class: "hand-size" }, `${v.hand_sizes[i]} cards`),
        el("div", { class: "score" }, `score ${v.scores[i]}`))),
      el("div", { class: "middle" },
        el("div", { class: "pile" }, el("div", { class: "label" }, "discard"), card(v.top)),
        el("div", { class: "pile" }, el("div", { class: "label" }, "stock"), card(null), el("div", {}, `${v.stock_size} left`)),
        el("div", { class: "facts" },
          el("div", {}, `suit to follow: ${suitName(v.current_suit)}`),
          el("div", {}, `deal ${v.deal} \u00b7 ${v.direction} \u00b7 target ${v.target}`),
          v.penalty ? el("div", {}, `penalty: draw ${v.penalty}`) : null)),
      v.hand ? el("div", { class: "hand", id: "hand" }, el("div", { class: "label" }, "your hand"), v.hand.map((c) => card(c))) : null);
  },
  controls(legal, s, me, act) {
    // a card with a legal play is a button; an 8 asks for its suit
    const plays = new Map();
    for (const a of legal) if (a.type === "play") {
      if (!plays.has(a.card)) plays.set(a.card, []);
      plays.get(a.card).push(a);
    }
    const suitBox = el("div", { class: "suits" });
    const cards = el("div", { class: "hand playable" }, [...plays.keys()].map((c) => card(c, {
      button: true,
      onclick: () => {
        const options = plays.get(c);
        if (options.length === 1) { act(options[0]); return; }
        suitBox.replaceChildren(el("span", {}, `${c}: name a suit `),
          ...options.map((a) => el("button", { class: "suit-choice", "data-action": JSON.stringify(a), onclick: () => act(a) }, suitName(a.suit))));
      },
    })));
    return el("div", {}, cards, suitBox, actionButtons(legal, act, (a) => a.type !== "play"));
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
  controls(legal, s, me, act) {
    return actionButtons(legal, act);
  },
};

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
        class: `seat${s.to_act.includes(p.seat) ? " to-act" : ""}${p.seat === me ? " me" : ""}${p.folded ? " folded" : ""}`, "data-seat": p.seat,
      },
      el("div", { class: "name" }, seatName(s.seats, p.seat)),
      el("div", {}, chips(p.stack), p.bet ? ` bet ${p.bet}` : ""),
      el("div", { class: "row-cards" }, (p.cards || []).map((c) => card(c))),
      el("div", { class: "muted" }, p.folded ? "folded" : p.busted ? "busted" : p.out ? "out" : p.all_in ? "all in"
        : (p.visible || []).length ? `showing ${p.visible.map((x) => x / 2).join(" / ")}` : "")))),
      v.you ? el("div", { class: "you" }, `your totals: ${(v.you.totals || []).map((x) => x / 2).join(" or ")}`) : null);
  },
  controls(legal, s, me, act) {
    return actionButtons(legal, act);
  },
};

// ---- any other game ---------------------------------------------------------------------------
const generic = {
  board(s, me) {
    return el("div", { class: "table generic" }, seatsStrip(s, me), el("div", { class: "view" }, jsonTree(s.view, "view")));
  },
  controls(legal, s, me, act) {
    return actionButtons(legal, act);
  },
};

export const renderers = {
  "crazy-eights": crazyEights,
  "around-the-world": aroundTheWorld,
  "seven-twenty-seven": sevenTwentySeven,
  generic,
};
