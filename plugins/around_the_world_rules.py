"""Around the World: the pure rule functions (questions, drink values, shoe size, poker hands).

Everything here is a plain function of cards and option values, with no state: the game module
(``plugins.around_the_world``) calls these from ``decide``. Rule spec:
``docs/rules/around-the-world.md``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from plugins import cards

QUESTIONS_PLAIN: tuple[str, ...] = ("color", "higher_lower", "inside_outside", "suit")
"""The round-1 questions in the order they are asked (spec, "Round 1")."""

QUESTIONS_FIFTH: tuple[str, ...] = ("color", "higher_lower", "inside_outside", "odd_even", "suit")
"""The order with ``fifth_question``: odd/even/face is asked before the suit question."""

SUIT_WORDS: dict[str, str] = {"clubs": "C", "diamonds": "D", "hearts": "H", "spades": "S"}

ROW_VALUES: dict[str, tuple[int, ...]] = {
    "doubling": (1, 2, 4, 8),
    "linear": (1, 2, 3, 4),
    "beer": (1, 2, 8, 16),
}
"""Round-2 row values per ``row_values`` (spec, "Round 2" 4; half a beer = 8, a beer = 16)."""

FIFTH_ESCALATING: dict[str, int] = {"doubling": 16, "linear": 5, "beer": 32}
"""With ``round1_values = escalating`` and the fifth question, the fifth question asked is worth
the next term of the row sequence (house decision: the spec gives only four row values)."""

END_CARD_VALUE = 12
"""Each end card is worth 12 drinks (spec, "Round 2" 4, ``end_cards``)."""

MAX_DECKS = 10
"""An explicit ``decks`` above this is refused (house limit: keeps the start event small)."""

HAND_NAMES: tuple[str, ...] = (
    "high card",
    "pair",
    "two pair",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
    "straight flush",
    "five of a kind",
)
"""Poker categories, weakest first (five of a kind beats a straight flush: spec, fifth question)."""


def questions(fifth_question: bool) -> tuple[str, ...]:
    """The round-1 questions in asking order."""
    return QUESTIONS_FIFTH if fifth_question else QUESTIONS_PLAIN


def allowed_guesses(question: str, suit_question: str) -> tuple[str, ...]:
    """Every legal answer to ``question`` (a guess that can never win is still legal)."""
    if question == "color":
        return ("red", "black")
    if question == "higher_lower":
        return ("higher", "lower", "same")
    if question == "inside_outside":
        return ("inside", "outside", "same")
    if question == "odd_even":
        return ("odd", "even", "face")
    if suit_question == "same_or_different":
        return ("same", "different")
    return tuple(SUIT_WORDS)


def answer(question: str, row: Sequence[str], card: str, ace_high: bool, suit_question: str) -> str:
    """The winning answer to ``question`` for ``card`` dealt onto ``row`` (the cards before it).

    Spec, "Round 1": equal rank is never higher or lower; inside is strictly between cards 1-2,
    outside strictly beyond both, same equals either (with cards 1-2 equal nothing is inside);
    A counts 1 (odd), 10 is even, J Q K are face; ``same_or_different`` asks whether the card's
    suit appears among the row's earlier cards.
    """
    if question == "color":
        return "red" if cards.is_red(card) else "black"
    r = cards.rank_index(card, ace_high)
    if question == "higher_lower":
        first = cards.rank_index(row[0], ace_high)
        return "higher" if r > first else "lower" if r < first else "same"
    if question == "inside_outside":
        lo, hi = sorted(cards.rank_index(c, ace_high) for c in row[:2])
        return "inside" if lo < r < hi else "same" if r in (lo, hi) else "outside"
    if question == "odd_even":
        rank = cards.rank(card)
        if rank in cards.FACE_RANKS:
            return "face"
        number = 1 if rank == "A" else int(rank)
        return "odd" if number % 2 else "even"
    if suit_question == "same_or_different":
        return "same" if cards.suit(card) in {cards.suit(c) for c in row} else "different"
    return next(word for word, letter in SUIT_WORDS.items() if letter == cards.suit(card))


def round1_value(index: int, round1_values: str, row_values: str) -> int:
    """Drinks for the ``index``-th question asked (0-based): 1 when flat, else the row value."""
    if round1_values == "flat":
        return 1
    seq = ROW_VALUES[row_values]
    return seq[index] if index < len(seq) else FIFTH_ESCALATING[row_values]


def cards_needed(players: int, fifth_question: bool, end_cards: bool) -> int:
    """Cards dealt in a whole session: 4 per player (+1 with the fifth question), 8 (+2) laid."""
    return players * (5 if fifth_question else 4) + 8 + (2 if end_cards else 0)


def decks_needed(players: int, fifth_question: bool, end_cards: bool) -> int:
    """The fewest 52-card decks that deal every card without replacement (``decks = auto``)."""
    return math.ceil(cards_needed(players, fifth_question, end_cards) / cards.DECK_SIZE)


def layout(row_values: str, flip_order: str, end_cards: bool) -> tuple[tuple[str, int, int], ...]:
    """The round-2 positions in flip order: ``(column, row, value)``; row 5 is the end cards.

    Spec, "Round 2" 2 and 4: row by row, ``take`` first unless ``flip_order = give_first``;
    the end cards are turned last, in the same column order.
    """
    cols = ("take", "give") if flip_order == "take_first" else ("give", "take")
    out = [
        (col, row + 1, value) for row, value in enumerate(ROW_VALUES[row_values]) for col in cols
    ]
    if end_cards:
        out += [(col, 5, END_CARD_VALUE) for col in cols]
    return tuple(out)


def match_drinks(row: Sequence[str], card: str, value: int, face_double: bool) -> tuple[int, int]:
    """``(matches, drinks)`` for one turned round-2 card against one player's row.

    Each card of the row with the turned card's rank matches (suit ignored, duplicates count);
    each match is worth ``value``, doubled for a face card with ``face_double``.
    """
    matches = sum(1 for c in row if cards.rank(c) == cards.rank(card))
    factor = 2 if face_double and cards.rank(card) in cards.FACE_RANKS else 1
    return matches, matches * value * factor


def hand_rank(hand: Sequence[str]) -> tuple[int, tuple[int, ...]]:
    """The poker strength of a five-card hand: ``(category, tie-break ranks)``; higher is better.

    ``category`` indexes :data:`HAND_NAMES`. Aces are high, and low in the A-2-3-4-5 straight,
    whatever the ``ace`` option (it orders only the round-1 questions). Suits never break ties.
    """
    values = [cards.rank_index(c) for c in hand]
    counts = Counter(values)
    # ranks ordered by how many copies, then by rank: the usual tie-break order
    order = tuple(sorted(counts, key=lambda v: (counts[v], v), reverse=True))
    shape = sorted(counts.values(), reverse=True)
    flush = len({cards.suit(c) for c in hand}) == 1
    straight_top = None
    if len(counts) == 5:
        distinct = sorted(counts)
        if distinct[-1] - distinct[0] == 4:
            straight_top = distinct[-1]
        elif distinct == [0, 1, 2, 3, 12]:
            straight_top = 3
    if shape[0] == 5:
        return 9, order
    if straight_top is not None and flush:
        return 8, (straight_top,)
    if shape[0] == 4:
        return 7, order
    if shape[:2] == [3, 2]:
        return 6, order
    if flush:
        return 5, tuple(sorted(values, reverse=True))
    if straight_top is not None:
        return 4, (straight_top,)
    if shape[0] == 3:
        return 3, order
    if shape[:2] == [2, 2]:
        return 2, order
    if shape[0] == 2:
        return 1, order
    return 0, order


def best_hands(rows: Sequence[Sequence[str]]) -> tuple[tuple[int, ...], str]:
    """The seats holding the best hand (ties share) and that hand's name."""
    ranks = [hand_rank(r) for r in rows]
    top = max(ranks)
    return tuple(i for i, r in enumerate(ranks) if r == top), HAND_NAMES[top[0]]
