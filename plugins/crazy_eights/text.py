"""Human text for Crazy Eights: the terminal table (``render``), action labels (``describe``),
events and the match result in words (``describe_event``, ``describe_outcome``).

All take only wire-form JSON data (what ``CrazyEights.view`` returned after a JSON round trip,
an action object such as ``{"type": "play", "card": "8C", "suit": "H"}``, an event as its viewer
received it, the outcome).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import Viewer, who
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
    mode = "countdown" if view.get("countdown") else f"to {_n(view.get('target'), 'point')}"
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
        lines.append(f"Pending draw-two penalty: {_n(view['penalty'], 'card')}")
    sizes = view.get("hand_sizes") or []
    scores = view.get("scores") or []
    numbers = view.get("numbers")
    wild = view.get("wild_ranks") or []
    for seat, size in enumerate(sizes):
        mark = ">" if seat == view.get("turn") else " "
        you = " (you)" if seat == viewer else ""
        extra = f"number {numbers[seat]}, {wild[seat]}s wild" if numbers else f"{scores[seat]} pts"
        lines.append(f"{mark} seat {seat}{you}: {_n(size, 'card')}, {extra}")
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


def _n(count: Any, what: str) -> str:
    return f"{count} {what}" if count == 1 else f"{count} {what}s"


def _list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def describe_event(event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
    """One event in words for ``viewer``, from the event as that viewer received it: ``"bot3
    played 8♠ and named ♥"``, ``"You drew 2 cards: 5♦ 9♠"``, ``"bot1 drew a card"``."""
    kind = event.get("type")
    seat = event.get("seat")
    subject = who(seat, viewer, names, start=True)
    if kind == "dealt":
        sizes = event.get("hand_sizes") or []
        dealer = who(event.get("dealer"), viewer, names, start=True)
        if sizes and len(set(sizes)) == 1:
            each = f"{_n(sizes[0], 'card')} each"
        else:
            each = ", ".join(f"{who(i, viewer, names)} {n}" for i, n in enumerate(sizes))
        text = f"Deal {event.get('deal')}: {dealer} dealt {each}"
        back = event.get("turned_back") or []
        if back:
            text += f"; {cards.faces(back)} turned up and put back"
        text += f"; the starter is {cards.face(event.get('starter'))}"
        for seat, hand in enumerate(event.get("hands") or []):
            if hand:  # the viewer's own hand (every hand in the full, unredacted event)
                whose = "Your" if seat == viewer else f"{who(seat, viewer, names)}'s"
                text += f". {whose} hand: {cards.faces(hand)}"
        return text
    if kind == "played":
        text = f"{subject} played {cards.face(event.get('card'))}"
        suit = event.get("suit")
        if suit is not None:
            text += f" and named {cards.SUIT_SYMBOLS.get(suit, suit)}"
        return text
    if kind == "drew":
        drawn = event.get("cards")
        count = event.get("count")
        if drawn and len(drawn) == 1:
            return f"{subject} drew {cards.face(drawn[0])}"
        if drawn:
            return f"{subject} drew {_n(count, 'card')}: {cards.faces(drawn)}"
        return f"{subject} drew {'a card' if count == 1 else _n(count, 'card')}"
    if kind == "penalty_taken":
        text = f"{subject} took the penalty: {_n(event.get('drawn'), 'card')}"
        if event.get("forgiven"):
            text += f" ({event['forgiven']} forgiven: nothing left to draw)"
        return text
    if kind == "reshuffled":
        return (
            f"The discards were shuffled into a new stock of {_n(event.get('stock_size'), 'card')}"
        )
    if kind == "passed":
        return f"{subject} passed"
    if kind == "deal_scored":
        return _deal_scored(event, viewer, names)
    return str(kind)


def _deal_scored(event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
    deal = event.get("deal")
    winner = event.get("winner")
    gains = event.get("gains") or []
    numbers = event.get("numbers") or []
    if event.get("result") == "out":
        text = f"Deal {deal}: {who(winner, viewer, names)} went out"
    else:
        text = f"Deal {deal} is blocked"
    if numbers:
        text += "; numbers now " + ", ".join(
            f"{who(i, viewer, names)} {n}" for i, n in enumerate(numbers)
        )
        return text
    scorers = [f"{who(i, viewer, names)} +{g}" for i, g in enumerate(gains) if g]
    text += "; " + (", ".join(scorers) if scorers else "nobody scores")
    totals = event.get("scores") or []
    if totals:
        text += (
            " (totals "
            + ", ".join(f"{who(i, viewer, names)} {t}" for i, t in enumerate(totals))
            + ")"
        )
    return text


def describe_outcome(outcome: dict[str, Any], names: Sequence[str]) -> str:
    """The match result: who won, after how many deals, and every seat's score (in countdown
    its number, lower is better)."""
    winners = [who(w, None, names) for w in outcome.get("winners") or []]
    deals = outcome.get("deals")
    head = f"{_list(winners) or 'Nobody'} won after {_n(deals, 'deal')}."
    scores = outcome.get("scores") or []
    what = "Numbers" if outcome.get("countdown") else "Scores"
    line = f"{what}: " + ", ".join(f"{who(i, None, names)} {n}" for i, n in enumerate(scores))
    return f"{head}\n{line}"
