// Undo by consent on a table (PROTOCOL.md, "Undo by consent"): a button that asks to take back
// your last move, and, while another player's request waits for your seat, the question with
// Accept and Refuse. Drawn from the snapshot alone (its `undo`: the request that waits), which
// the table fetches again after every record, so it is never out of date.
import { el, seatName } from "./common.js";
import { describeAction } from "./tables.js";

// The undo box for seat `me` of snapshot `s` (null when there is nothing to show): `call(op,
// params)` sends a request, `say(text, kind)` shows its outcome.
export function undoBox(s, me, call, say) {
  if (me === null || !s.started || s.ended) return null;
  const box = el("div", { id: "undo-box", class: "undo" });
  const ask = s.undo;
  if (ask && ask.waiting.includes(me)) {
    const answer = async (accept) => {
      try {
        await call("undo_answer", { session: s.session, accept });
        say(accept ? "you agreed to take it back" : "you refused: the move stands");
      } catch (e) { say(e.message, "error"); }
    };
    box.append(el("p", { id: "undo-prompt" },
      `${seatName(s.seats, ask.seat)} asks to take back ${describeAction(ask.action)}. `,
      el("button", { id: "undo-accept", onclick: () => answer(true) }, "Accept"), " ",
      el("button", { id: "undo-refuse", onclick: () => answer(false) }, "Refuse")));
  } else if (ask) {
    const who = ask.waiting.map((i) => seatName(s.seats, i)).join(", ");
    box.append(el("p", { id: "undo-waiting", class: "muted" },
      `${seatName(s.seats, ask.seat)} asks to take back ${describeAction(ask.action)}: waiting for ${who}.`));
  }
  box.append(el("button", {
    id: "undo", title: "ask the other players to let you take back your last move",
    onclick: async () => {
      try {
        const r = await call("undo", { session: s.session });
        say(r.status === "done" ? "your move was taken back" : "asked: waiting for the other players to agree");
      } catch (e) { say(`cannot undo: ${e.message}`, "error"); }
    },
  }, "Undo my last move"));
  return box;
}
