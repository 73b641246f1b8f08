"""High-Low: what a viewer sees (``view``) and of each event (``redact``).

Hidden information: the deck order, from everyone. Every turned card is public.
"""

from __future__ import annotations

from typing import Any

import attrs

from host.game import Viewer

from .model import Shuffled, State
from .rules import to_act


def view(state: State, viewer: Viewer) -> dict[str, Any]:
    """Keys: ``face_up`` (card or ``None``), ``deck_left``, ``scores``, ``turn`` (seat or
    ``None``), ``guesses``, ``rounds``, ``last`` (``{seat, call, card, correct}`` or ``None``),
    ``winners`` (``None`` while running). The same for every viewer: nothing is private."""
    last = state.last
    turn = to_act(state)
    return {
        "face_up": state.face_up,
        "deck_left": len(state.deck),
        "scores": list(state.scores),
        "turn": turn[0] if turn else None,
        "guesses": state.guesses,
        "rounds": state.options.rounds,
        "last": None if last is None else attrs.asdict(last),
        "winners": None if state.winners is None else list(state.winners),
    }


def redact(event: Any, viewer: Viewer) -> Any:
    """Hide the shuffled deck from every viewer; other events are public."""
    if isinstance(event, Shuffled):
        return Shuffled(None)
    return event
