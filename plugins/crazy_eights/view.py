"""Crazy Eights: what each viewer sees (``view``) and event redaction (``redact``).

Hidden information (``docs/rules/crazy-eights.md``): hands only to their owner, the stock order
to nobody, a drawn card only to its drawer; ``deal_scored`` reveals every hand and the view keeps
it as ``last_deal``.
"""

from __future__ import annotations

from typing import Any

from host.game import Viewer, replace
from plugins.crazy_eights import rules
from plugins.crazy_eights.model import DealScored, Dealt, Drew, Reshuffled, State, target


def view(state: State, viewer: Viewer) -> dict[str, Any]:
    """The table as ``viewer`` sees it (JSON-able).

    Keys: ``deal``, ``dealer``, ``turn``, ``direction`` (``"clockwise"`` or
    ``"counterclockwise"``), ``hand`` (the viewer's own, ``None`` for spectators),
    ``hand_sizes``, ``top``, ``current_suit`` (``None`` = any card), ``discard_size``,
    ``stock_size``, ``penalty``, ``draws_this_turn``, ``draw_limit``, ``scores``,
    ``target`` (``None`` in countdown), ``countdown``, ``numbers`` (countdown, else
    ``None``), ``wild_ranks`` (per seat), ``last_deal`` (the last deal's result with the
    revealed hands, or ``None``), ``over``, ``winners``.
    """
    n = state.seats
    own = viewer is not None and 0 <= viewer < n and bool(state.hands)
    last = state.last_deal
    o = state.options
    return {
        "deal": state.deal,
        "dealer": state.dealer,
        "turn": state.turn,
        "direction": "clockwise" if state.direction == 1 else "counterclockwise",
        "hand": list(state.hands[viewer]) if own and viewer is not None else None,
        "hand_sizes": [len(h) for h in state.hands],
        "top": state.discard[-1] if state.discard else None,
        "current_suit": state.current_suit,
        "discard_size": len(state.discard),
        "stock_size": len(state.stock),
        "penalty": state.penalty,
        "draws_this_turn": state.draws,
        "draw_limit": o.draw_limit,
        "scores": list(state.scores),
        "target": None if o.countdown else target(o, n),
        "countdown": o.countdown,
        "numbers": list(state.numbers) if o.countdown else None,
        "wild_ranks": [rules.wild_rank(state, s) for s in range(n)],
        "last_deal": None if last is None else _deal_result(last),
        "over": state.over,
        "winners": list(state.winners),
    }


def redact(event: Any, viewer: Viewer) -> Any:
    """Hide other hands, the stock order and other players' drawn cards (Hidden information)."""
    if isinstance(event, Dealt):
        hands = tuple(h if i == viewer else None for i, h in enumerate(event.hands))
        return replace(event, hands=hands, stock=None)
    if isinstance(event, Drew) and event.seat != viewer:
        return replace(event, cards=None)
    if isinstance(event, Reshuffled):
        return replace(event, stock=None)
    return event


def _deal_result(scored: DealScored) -> dict[str, Any]:
    return {
        "deal": scored.deal,
        "result": scored.result,
        "winner": scored.winner,
        "hands": [list(h) for h in scored.hands],
        "points": list(scored.points),
        "gains": list(scored.gains),
    }
