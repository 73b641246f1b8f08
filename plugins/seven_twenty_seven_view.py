"""Seven Twenty-Seven views, event redaction and text rendering (rule spec, "Hidden information").

Face-down cards reach only their owner; face-up cards are public; the stock is never shown; a
folded (or busted) hand is never revealed to anyone, at any time — only the showdown turns hands
up, and only the hands still in.
"""

from __future__ import annotations

from typing import Any

import attrs

from host.game import Viewer
from plugins import seven_twenty_seven_hands as hv
from plugins.seven_twenty_seven_flow import to_act, to_call
from plugins.seven_twenty_seven_model import CardDrawn, Dealt, State
from plugins.seven_twenty_seven_pots import build_pots

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
        return attrs.evolve(event, card=None)
    return event


# -- text ----------------------------------------------------------------------------------------


def _hp(t: int | None) -> str:
    return "-" if t is None else hv.fmt_half_points(t)


def render(v: dict[str, Any], viewer: Viewer) -> str:
    """A multi-line text picture of a wire-form view: stacks, pots, the bet to call, the hands
    and their totals, and the last hand's showdown.

    The ``Pot`` line starts with everything in the middle (``pot_total``, the sum of every
    seat's ``in pot``), then the pots collected before this betting round and this round's bets
    still in front of the players, so its parts add up to its total."""
    lines = [
        f"Seven Twenty-Seven - hand {v['hand']}"
        + ("" if v["hands_limit"] == "unlimited" else f" of {v['hands_limit']}")
        + f", dealer seat {v['dealer']}, {v['phase']}"
        + (f" round {v['round']}" if v["round"] and v["phase"] in RUNNING else "")
    ]
    bets = sum(p["bet"] for p in v["players"])
    if v["pots"] or bets:
        names = ["main"] + [f"side {i}" for i in range(1, len(v["pots"]))]
        parts = [
            f"{name} {p['amount']} (seats {', '.join(map(str, p['eligible']))})"
            for name, p in zip(names, v["pots"], strict=True)
        ]
        if bets:
            parts.append(f"this round's bets {bets}")
        lines.append(f"Pot {v['pot_total']}: " + "; ".join(parts))
    if v["phase"] == "betting":
        lines.append(
            f"Bet {v['current_bet']}, to call {v['to_call']}, raises {v['raises']}/"
            f"{v['max_raises']}, bets {v['min_bet']}-{v['max_bet']}"
        )
    turn = set(v["turn"])
    for p in v["players"]:
        flags = [
            name
            for name in ("folded", "busted", "all_in", "out", "sitting_out")
            if p[name] and not (name == "folded" and p["busted"])
        ]
        cards = " ".join(c if c is not None else "??" for c in p["cards"])
        vis = "/".join(_hp(t) for t in p["visible"])
        mark = ("D " if p["seat"] == v["dealer"] else "  ") + ("> " if p["seat"] in turn else "  ")
        lines.append(
            f"{mark}seat {p['seat']}{' (you)' if p['seat'] == viewer else ''}: stack {p['stack']}"
            + (f", bet {p['bet']}" if p["bet"] else "")
            + (f", in pot {p['put_in']}" if p["put_in"] else "")
            + (f"  [{cards}]" if cards else "")
            + (f" shows {vis}" if vis and p["seat"] != viewer else "")
            + (f"  ({', '.join(flags)})" if flags else "")
        )
    you = v.get("you")
    if you and you["cards"]:
        lines.append(
            f"Your hand {' '.join(you['cards'])}: totals "
            + "/".join(_hp(t) for t in you["totals"])
            + f"; closest to 7: {_hp(you['closest_to_7'])}, to 27: {_hp(you['closest_to_27'])}"
            + f", distance {_hp(you['distance'])}"
        )
    cast = [(k, y) for k, y in enumerate(v["votes"]) if y is not None]
    if cast:
        lines.append("Votes: " + ", ".join(f"seat {k} {'yes' if y else 'no'}" for k, y in cast))
    last = v.get("last_hand")
    if last:
        lines.append(f"Last hand ({last['hand']}):")
        for h in last["shown"]:
            lines.append(
                f"  seat {h['seat']} {' '.join(h['cards'])}: "
                + "/".join(_hp(t) for t in h["totals"])
                + f", distance {_hp(h['distance'])}"
            )
        for a in last["awards"]:
            paid = zip(a["winners"], a["shares"], strict=True)
            who = ", ".join(f"seat {w} +{c}" for w, c in paid)
            what = "pot" if a["pot"] == 0 else f"side pot {a['pot']}"
            half = "" if a["half"] == "all" else f" ({a['half'].replace('_', '-')} half)"
            note = " uncontested" if a["uncontested"] else ""
            lines.append(f"  {what}{half} {a['amount']}{note}: {who}")
    if v["over"]:
        lines.append(f"Session over ({v['end_reason']}): stacks {v['stacks']}")
    return "\n".join(lines)


def describe(action: dict[str, Any]) -> str:
    """A short label for a wire-form action, e.g. ``"raise 3"``."""
    kind = action.get("type")
    if kind == "vote":
        return "vote yes to an extra card" if action.get("yes") else "vote no to an extra card"
    if kind in ("bet", "raise"):
        return f"{kind} {action.get('amount')}"
    return {"draw": "draw a card", "stand": "stand"}.get(str(kind), str(kind))
