"""Seven Twenty-Seven views and event redaction (rule spec, "Hidden information").

Face-down cards reach only their owner; face-up cards are public; the stock is never shown; a
folded (or busted) hand is never revealed to anyone, at any time — only the showdown turns hands
up, and only the hands still in.
"""

from __future__ import annotations

from typing import Any

from host.game import Viewer, replace
from plugins.seven_twenty_seven import hands as hv
from plugins.seven_twenty_seven.model import CardDrawn, Dealt, State
from plugins.seven_twenty_seven.pots import build_pots
from plugins.seven_twenty_seven.rules import to_act, to_call

RUNNING = ("dealt", "draw", "betting", "vote")


def _totals_info(hand: list[str]) -> dict[str, Any]:
    """Totals (half-points) of a hand and its best approach to 7 and to 27."""
    if not hand:
        return {"totals": [], "distance": None, "closest_to_7": None, "closest_to_27": None}
    ts = hv.totals(hand)
    return {
        "totals": list(ts),
        "distance": hv.distance(hand),
        "closest_to_7": min(ts, key=lambda t: (abs(t - hv.SEVEN), t)),
        "closest_to_27": min(ts, key=lambda t: (abs(t - hv.TWENTY_SEVEN), t)),
    }


def view(s: State, viewer: Viewer) -> dict[str, Any]:
    """The table as ``viewer`` may see it (a plain JSON-able dict).

    Shape: ``hand``, ``dealer``, ``phase``, ``round``, ``stacks``, ``pots`` (``amount``,
    ``eligible``: the main pot then side pots, as collected before the current betting round;
    the round's bets are each player's ``bet``), ``pot_total`` (everything in the middle, bets
    included), ``current_bet``, ``to_call`` (for the viewer, capped at its stack),
    ``raises``/``max_raises``/``min_bet``/``max_bet``, ``turn`` (seats to act), ``votes`` (per
    seat: true/false once cast in the extra-card vote, else null), ``stock`` (a count),
    ``players`` (per seat: ``stack``, ``bet``, ``put_in``, ``cards`` with ``None`` for a card
    the viewer may not see, ``face_up``, flags ``in_hand``/``sitting_out``/``folded``/
    ``busted``/``all_in``/``out``, and ``visible`` totals of the cards the viewer sees),
    ``you`` (the viewer's own hand with its totals, distance and the totals closest to 7 and
    to 27), ``last_hand`` (the showdown and awards of the last finished hand), ``over``,
    ``end_reason``. Totals are in half-points.
    """
    n = s.seats
    running = s.phase in RUNNING
    live = set(s.live) if running else set()
    players = []
    for x in range(n):
        hand = s.hands[x] if running and s.hands else ()
        faces = s.faces[x] if running and s.faces else ()
        shown = [c if (up or viewer == x) else None for c, up in zip(hand, faces, strict=True)]
        in_hand = bool(running and s.in_hand[x])
        players.append(
            {
                "seat": x,
                "stack": s.stacks[x],
                "bet": s.round_bet[x] if running and s.phase == "betting" else 0,
                "put_in": s.contrib[x] if running else 0,
                "cards": shown,
                "face_up": list(faces),
                "in_hand": in_hand,
                "sitting_out": running and not in_hand and s.stacks[x] > 0,
                "folded": in_hand and s.folded[x],
                "busted": in_hand and s.busted[x],
                "all_in": x in live and s.stacks[x] == 0,
                "out": s.stacks[x] == 0 and x not in live,
                "visible": _totals_info([c for c in shown if c is not None])["totals"],
            }
        )
    you = None
    if viewer is not None and 0 <= viewer < n:
        own = list(s.hands[viewer]) if running and s.hands else []
        you = {"seat": viewer, "cards": own, **_totals_info(own)}
    pots: tuple = ()
    if running:
        collected = s.contrib
        if s.phase == "betting":  # this round's bets are still in front of the players
            collected = tuple(c - b for c, b in zip(s.contrib, s.round_bet, strict=True))
        pots = build_pots(collected, s.live)
    last = None
    if s.last is not None:
        last = {
            "hand": s.last.hand,
            "shown": [
                {
                    "seat": h.seat,
                    "cards": list(h.cards),
                    "totals": list(h.totals),
                    "distance": h.distance,
                }
                for h in s.last.shown
            ],
            "awards": [
                {
                    "pot": a.pot,
                    "half": a.half,
                    "amount": a.amount,
                    "winners": list(a.winners),
                    "shares": list(a.shares),
                    "uncontested": a.uncontested,
                }
                for a in s.last.awards
            ],
        }
    o = s.options
    mine = viewer is not None and viewer in live
    return {
        "hand": s.hand_no,
        "hands_limit": o.hands,
        "dealer": s.dealer,
        "phase": s.phase,
        "round": s.round,
        "stacks": list(s.stacks),
        "pots": [{"amount": p.amount, "eligible": list(p.eligible)} for p in pots],
        "pot_total": s.pot_total if running else 0,
        "current_bet": s.current_bet if s.phase == "betting" else 0,
        "to_call": min(to_call(s, viewer), s.stacks[viewer]) if mine else 0,
        "raises": s.raises if s.phase == "betting" else 0,
        "max_raises": o.max_raises,
        "min_bet": o.min_bet,
        "max_bet": o.max_bet,
        "turn": list(to_act(s)),
        "votes": list(s.votes) if s.phase == "vote" else [None] * n,
        "stock": len(s.stock) if running else 0,
        "players": players,
        "you": you,
        "last_hand": last,
        "over": s.phase == "over",
        "end_reason": s.end_reason,
    }


def redact(event: Any, viewer: Viewer) -> Any:
    """``event`` as ``viewer`` may see it: others' face-down cards and the stock become None."""
    if isinstance(event, Dealt):
        down = tuple(d if x == viewer else tuple(None for _ in d) for x, d in enumerate(event.down))
        return Dealt(event.up, down, None)
    if isinstance(event, CardDrawn) and event.face == "down" and event.seat != viewer:
        return replace(event, card=None)
    return event
