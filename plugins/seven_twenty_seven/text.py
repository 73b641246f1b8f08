"""Seven Twenty-Seven text for the terminal client: ``render`` of a wire-form view, ``describe``.

Both take only JSON data (the view dict after a JSON round trip, an action dict).
"""

from __future__ import annotations

from typing import Any

from host.game import Viewer
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
