"""High-Low text for the terminal client (``gamehost play``): a view and an action in words.

Both take JSON data only (the view after a JSON round trip, an action object).
"""

from __future__ import annotations

from typing import Any


def render(view: dict[str, Any], viewer: int | None) -> str:
    """A few lines: the face-up card, the scores, whose turn, the last guess."""
    lines = [f"High-Low: face up {view['face_up']}, {view['deck_left']} cards left"]
    for seat, points in enumerate(view["scores"]):
        you = " (you)" if seat == viewer else ""
        turn = "  <- to guess" if seat == view["turn"] else ""
        lines.append(f"  seat {seat}{you}: {points} points{turn}")
    last = view["last"]
    if last:
        verdict = "right" if last["correct"] else "wrong"
        lines.append(f"last: seat {last['seat']} called {last['call']}, {last['card']}: {verdict}")
    if view["winners"] is not None:
        lines.append(f"over: seat(s) {', '.join(map(str, view['winners']))} won")
    return "\n".join(lines)


def describe(action: dict[str, Any]) -> str:
    """``call higher`` / ``call lower``."""
    return f"call {action.get('call')}"
