"""The shared card toolkit: French-deck cards in wire notation, multi-deck shoes, shuffling.

A card is a ``str`` as in ``docs/rules/crazy-eights.md`` ("Cards"): rank then suit, ranks
``2 3 4 5 6 7 8 9 10 J Q K A``, suits ``C D H S`` — ``"10H"``, ``"QS"``, ``"8C"``. Two copies of a
card from two decks have the same notation and are interchangeable. Cards are plain strings so
that events, views and actions are readable JSON as they are.
"""

from __future__ import annotations

from collections.abc import Iterable

from host.game import Rng

RANKS: tuple[str, ...] = ("2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K", "A")
SUITS: tuple[str, ...] = ("C", "D", "H", "S")
SUIT_NAMES: dict[str, str] = {"C": "clubs", "D": "diamonds", "H": "hearts", "S": "spades"}
SUIT_SYMBOLS: dict[str, str] = {"C": "\u2663", "D": "\u2666", "H": "\u2665", "S": "\u2660"}
"""The suits as printed in texts: ♣ ♦ ♥ ♠."""
RED_SUITS: frozenset[str] = frozenset({"D", "H"})
FACE_RANKS: frozenset[str] = frozenset({"J", "Q", "K"})
DECK_SIZE = 52


def deck() -> list[str]:
    """One 52-card deck in a fixed order (suit by suit, ranks ascending)."""
    return [r + s for s in SUITS for r in RANKS]


def shoe(decks: int = 1) -> list[str]:
    """``decks`` decks together, unshuffled: ``52 * decks`` cards.

    Raises:
        ValueError: if ``decks < 1``.
    """
    if decks < 1:
        raise ValueError("a shoe needs at least one deck")
    return deck() * decks


def shuffled_shoe(rng: Rng, decks: int = 1) -> list[str]:
    """A shoe of ``decks`` decks in the order drawn from ``rng``; index 0 is the top card."""
    return rng.shuffled(shoe(decks))


def rank(card: str) -> str:
    """The rank part: ``rank("10H") == "10"``."""
    return card[:-1]


def suit(card: str) -> str:
    """The suit letter: ``suit("10H") == "H"``."""
    return card[-1]


def is_card(value: object) -> bool:
    """Whether ``value`` is a card in wire notation."""
    return isinstance(value, str) and len(value) >= 2 and value[-1] in SUITS and value[:-1] in RANKS


def is_red(card: str) -> bool:
    """Hearts and diamonds are red."""
    return suit(card) in RED_SUITS


def rank_index(card: str, ace_high: bool = True) -> int:
    """The rank's order for comparisons: 2 = 0 … K = 11, A = 12 (ace high) or A = -1 (ace low)."""
    r = rank(card)
    if r == "A" and not ace_high:
        return -1
    return RANKS.index(r)


def count(cards: Iterable[str]) -> dict[str, int]:
    """A multiset of cards: notation -> copies."""
    out: dict[str, int] = {}
    for c in cards:
        out[c] = out.get(c, 0) + 1
    return out


def remove_one(cards: tuple[str, ...], card: str) -> tuple[str, ...]:
    """``cards`` without one copy of ``card`` (the first).

    Raises:
        ValueError: if ``card`` is not among ``cards``.
    """
    i = cards.index(card)
    return cards[:i] + cards[i + 1 :]


def face(card: object) -> str:
    """A card as texts print it, its suit as a symbol: ``face("10H") == "10♥"``; anything that
    is not a card as ``str`` of it (``None`` as ``"?"``)."""
    if card is None:
        return "?"
    if not is_card(card):
        return str(card)
    text = str(card)
    return text[:-1] + SUIT_SYMBOLS[text[-1]]


def faces(cards: Iterable[object]) -> str:
    """Cards as texts print them, separated by spaces: ``faces(["8S", "10H"]) == "8♠ 10♥"``."""
    return " ".join(face(c) for c in cards)
