"""High-Low text: a view and an action for the terminal client (``gamehost play``), and the
events and the result in words for every client's history and end screen.

All take JSON data only (the view after a JSON round trip, an action object, an event as its
viewer received it, the outcome): they run in clients, which know nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import Viewer, who
from plugins.cards import face


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


def describe_event(event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
    """``"Ann called higher: 9♣, right"``; ``who`` says ``"You"`` for the viewer's own seat.
    The ``shuffled`` event comes redacted (no cards): it says only that the deck was shuffled."""
    kind = event.get("type")
    if kind == "shuffled":
        return "The deck is shuffled"
    if kind == "turned":
        return f"{face(event.get('card'))} is turned face up"
    if kind == "guessed":
        subject = who(event.get("seat"), viewer, names, start=True)
        verdict = "right" if event.get("correct") else "wrong"
        return f"{subject} called {event.get('call')}: {face(event.get('card'))}, {verdict}"
    if kind == "game_over":
        return "The game is over"
    return str(kind)


def describe_outcome(outcome: dict[str, Any], names: Sequence[str]) -> str:
    """Who won, then every seat's points: ``"Ann won.\\nPoints: Ann 5, Bob 3"``."""
    winners = [who(w, None, names) for w in outcome.get("winners") or []]
    head = " and ".join(winners) or "Nobody"
    points = ", ".join(f"{who(i, None, names)} {p}" for i, p in enumerate(outcome["scores"]))
    return f"{head} won.\nPoints: {points}"
