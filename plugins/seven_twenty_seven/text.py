"""Seven Twenty-Seven text for the terminal client: ``render`` of a wire-form view,
``describe``; the events and the result in words: ``describe_event``, ``describe_outcome``.

All take only JSON data (the view dict after a JSON round trip, an action dict, an event as its
viewer received it, the outcome).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import Viewer, who
from plugins import cards
from plugins.seven_twenty_seven import hands as hv

RUNNING = ("dealt", "draw", "betting", "vote")


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


def _chips(n: Any) -> str:
    return f"{n} chip" if n == 1 else f"{n} chips"


def _list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


PHASES = {"draw": "Draw round", "betting": "Betting round", "vote": "Extra-card vote, round"}
HALVES = {"seven": "the 7 half of ", "twenty_seven": "the 27 half of ", "all": ""}
REASONS = {
    "one_player_left": "one player holds every chip",
    "hands_played": "every hand was played",
    "too_few_can_ante": "too few players can ante",
}


def describe_event(event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
    """One event in words for ``viewer``: ``"Ann raised by 4 (6 chips in)"``, ``"You drew 5♦
    face down"``, ``"bot2 drew a card face down"``, ``"Ann won the main pot: 24 chips"``."""
    kind = event.get("type")
    seat = event.get("seat")
    subject = who(seat, viewer, names, start=True)
    all_in = " (all in)" if event.get("all_in") else ""
    if kind == "hand_started":
        antes = [a for a in event.get("antes") or [] if a]
        ante = f"; {len(antes)} players ante {_chips(max(antes))}" if antes else ""
        dealer = who(event.get("dealer"), viewer, names)
        return f"Hand {event.get('hand')}, dealt by {dealer}{ante}"
    if kind == "dealt":
        up = [
            f"{who(i, viewer, names)} {cards.face(c)}"
            for i, c in enumerate(event.get("up") or [])
            if c is not None
        ]
        text = "Dealt face up: " + ", ".join(up)
        for seat, down in enumerate(event.get("down") or []):
            seen = [c for c in down or [] if c is not None]
            if seen:  # the viewer's own (every seat's in the full, unredacted event)
                whose = "your" if seat == viewer else f"{who(seat, viewer, names)}'s"
                text += f"; {whose} face-down: {cards.faces(seen)}"
        return text
    if kind == "phase_started":
        phase = PHASES.get(str(event.get("phase")), str(event.get("phase")))
        order = ", ".join(who(s, viewer, names) for s in event.get("order") or [])
        return f"{phase} {event.get('round')}: {order}"
    if kind == "card_drawn":
        card = event.get("card")
        face = event.get("face")
        if card is None:
            return f"{subject} drew a card face {face}"
        return f"{subject} drew {cards.face(card)} face {face}"
    if kind == "stood":
        return f"{subject} stood"
    if kind == "stock_ran_out":
        return "The stock ran out: no more cards this hand"
    if kind == "busted":
        return f"{subject} went over 27 and is out of the hand"
    if kind == "checked":
        return f"{subject} checked"
    if kind == "bet_made":
        return f"{subject} bet {_chips(event.get('amount'))}{all_in}"
    if kind == "called":
        return f"{subject} called with {_chips(event.get('chips'))}{all_in}"
    if kind == "raised":
        put = _chips(event.get("chips")) + (", all in" if event.get("all_in") else "")
        return f"{subject} raised by {event.get('amount')} ({put})"
    if kind == "folded":
        return f"{subject} folded"
    if kind == "bet_returned":
        return (
            f"{_chips(event.get('chips'))} nobody matched went back to {who(seat, viewer, names)}"
        )
    if kind == "voted":
        return f"{subject} voted {'yes' if event.get('yes') else 'no'} to an extra card"
    if kind == "vote_decided":
        return "Everyone agreed: one more card" if event.get("agreed") else "No extra card"
    if kind == "showdown":
        shown = [
            f"{who(h.get('seat'), viewer, names)} {cards.faces(h.get('cards') or [])}"
            f" ({'/'.join(_hp(t) for t in h.get('totals') or [])})"
            for h in event.get("hands") or []
        ]
        return "Showdown: " + "; ".join(shown)
    if kind == "pot_awarded":
        pot = "the main pot" if event.get("pot") == 0 else f"side pot {event.get('pot')}"
        what = HALVES.get(str(event.get("half")), "") + pot
        winners = event.get("winners") or []
        shares = event.get("shares") or []
        alone = " (everyone else folded)" if event.get("uncontested") else ""
        amount = _chips(event.get("amount"))
        if len(winners) == 1:
            return f"{who(winners[0], viewer, names, start=True)} won {what}: {amount}{alone}"
        split = ", ".join(
            f"{who(w, viewer, names)} {c}" for w, c in zip(winners, shares, strict=False)
        )
        return f"{what[0].upper()}{what[1:]} ({amount}) is shared: {split}{alone}"
    if kind == "hand_ended":
        stacks = ", ".join(f"{who(i, viewer, names)} {c}" for i, c in enumerate(event["stacks"]))
        return f"Hand {event.get('hand')} is over; stacks: {stacks}"
    if kind == "session_ended":
        reason = REASONS.get(str(event.get("reason")), str(event.get("reason")))
        return f"The session is over: {reason}"
    return str(kind)


def describe_outcome(outcome: dict[str, Any], names: Sequence[str]) -> str:
    """The result: who won (the largest stacks) after how many hands and why, then every
    seat's final stack and its net result."""
    winners = _list([who(w, None, names) for w in outcome.get("winners") or []])
    stacks = outcome.get("stacks") or []
    net = outcome.get("net") or []
    hands = outcome.get("hands")
    played = f"{hands} hand" if hands == 1 else f"{hands} hands"
    reason = REASONS.get(str(outcome.get("reason")), str(outcome.get("reason")))
    top = _chips(max(stacks, default=0))
    head = f"{winners or 'Nobody'} won with {top} after {played} ({reason})."
    parts = []
    for i, chips in enumerate(stacks):
        change = f" ({net[i]:+d})" if i < len(net) and isinstance(net[i], int) else ""
        parts.append(f"{who(i, None, names)} {chips}{change}")
    return f"{head}\nStacks: {', '.join(parts)}"
