"""Human text for Crazy Eights: the terminal table (``render``) and action labels (``describe``).

Both take only wire-form JSON data (what ``CrazyEights.view`` returned after a JSON round trip,
and an action object such as ``{"type": "play", "card": "8C", "suit": "H"}``).
"""

from __future__ import annotations

from typing import Any

from plugins import cards

SUIT_WORDS = cards.SUIT_NAMES


def _rank_key(card: str) -> tuple[int, int]:
    if not cards.is_card(card):
        return (99, 99)
    return (cards.SUITS.index(cards.suit(card)), cards.rank_index(card))


def describe(action: dict[str, Any]) -> str:
    """A short label: ``"play 8C, name hearts"``, ``"play 7H"``, ``"draw"``, ``"pass"``."""
    kind = action.get("type")
    if kind == "play":
        text = f"play {action.get('card')}"
        suit = action.get("suit")
        if suit is not None:
            text += f", name {SUIT_WORDS.get(suit, suit)}"
        return text
    if kind == "draw":
        return "draw"
    if kind == "pass":
        return "pass"
    return str(kind)


def render(view: dict[str, Any], viewer: int | None) -> str:
    """A multi-line table: match state, discard, hands, the viewer's hand and the last deal."""
    lines: list[str] = []
    mode = "countdown" if view.get("countdown") else f"to {view.get('target')} points"
    lines.append(
        f"Crazy Eights, deal {view.get('deal')} ({mode}), dealer seat {view.get('dealer')}"
    )
    suit = view.get("current_suit")
    suit_text = SUIT_WORDS.get(suit, "any card") if suit is not None else "any card"
    lines.append(
        f"Top: {view.get('top')}  suit: {suit_text}  stock: {view.get('stock_size')}"
        f"  play goes {view.get('direction')}"
    )
    if view.get("penalty"):
        lines.append(f"Pending draw-two penalty: {view['penalty']} cards")
    sizes = view.get("hand_sizes") or []
    scores = view.get("scores") or []
    numbers = view.get("numbers")
    wild = view.get("wild_ranks") or []
    for seat, size in enumerate(sizes):
        mark = ">" if seat == view.get("turn") else " "
        you = " (you)" if seat == viewer else ""
        extra = f"number {numbers[seat]}, {wild[seat]}s wild" if numbers else f"{scores[seat]} pts"
        lines.append(f"{mark} seat {seat}{you}: {size} cards, {extra}")
    hand = view.get("hand")
    if hand is not None:
        lines.append("Your hand: " + " ".join(sorted(hand, key=_rank_key)))
        if view.get("turn") == viewer and view.get("draws_this_turn"):
            lines.append(f"Drawn this turn: {view['draws_this_turn']}")
    last = view.get("last_deal")
    if last:
        how = f"seat {last['winner']} went out" if last["result"] == "out" else "blocked"
        lines.append(f"Deal {last['deal']}: {how}; gains {last['gains']}")
        for seat, cards_left in enumerate(last["hands"]):
            lines.append(f"  seat {seat}: {' '.join(cards_left) or '-'} ({last['points'][seat]})")
    if view.get("over"):
        lines.append(f"Match over; winners: {', '.join(f'seat {w}' for w in view['winners'])}")
    return "\n".join(lines)
