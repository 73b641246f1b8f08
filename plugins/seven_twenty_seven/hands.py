"""Seven Twenty-Seven hand values, in integer half-points (rule spec, "Values").

2–10 count their pip value, J/Q/K count ½, each ace 1 or 11 chosen per ace. Everything here is in
half-points so no float ever appears: J = 1, 7 = 14, A = 2 or 22, the targets 7 and 27 are 14 and
54. A hand with ``n`` aces has ``n + 1`` totals (0, 1, …, n aces counted high), and every
comparison looks at all of them — the ace choice may differ for the 7 and the 27 comparison
(edge cases 1–3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from plugins import cards

SEVEN = 14
"""The low target, 7 points, in half-points."""

TWENTY_SEVEN = 54
"""The high target, 27 points, in half-points."""

MIDDLE = 34
"""17 points in half-points: a total is "for 7" if at most this, "for 27" if at least this."""

ACE_LOW = 2
ACE_HIGH_EXTRA = 20  # an ace counted as 11 adds 10 points = 20 half-points over its low value

Key = tuple[int, int]
"""A ranking key, smaller is better: ``(distance in half-points, 1 if over the target else 0)``.

The second part only matters with ``equidistant: under_wins``; with ``share`` it is always 0.
"""


def card_half_points(card: str) -> int:
    """The value of one card in half-points, the ace counted low (1 point = 2).

    >>> card_half_points("JH"), card_half_points("7C"), card_half_points("AS")
    (1, 14, 2)
    """
    r = cards.rank(card)
    if r in cards.FACE_RANKS:
        return 1
    if r == "A":
        return ACE_LOW
    return 2 * int(r)


def totals(hand: Iterable[str]) -> tuple[int, ...]:
    """Every total of a hand in half-points, ascending: one per number of aces counted high.

    >>> totals(["5H", "AC", "AD"])  # 7, 17, 27 points
    (14, 34, 54)
    """
    hand = list(hand)
    base = sum(card_half_points(c) for c in hand)
    aces = sum(1 for c in hand if cards.rank(c) == "A")
    return tuple(base + ACE_HIGH_EXTRA * k for k in range(aces + 1))


def lowest_total(hand: Iterable[str]) -> int:
    """The smallest total (every ace counted 1), in half-points."""
    return totals(hand)[0]


def distance(hand: Iterable[str]) -> int:
    """The hand's distance: min over its totals of ``min(|t - 7|, |t - 27|)``, in half-points.

    >>> distance(["AH", "AC", "AD", "JS"])  # 3½ from 7 (via 3½) and from 27 (via 23½)
    7
    """
    return min(min(abs(t - SEVEN), abs(t - TWENTY_SEVEN)) for t in totals(hand))


def _key(total: int, target: int, under_wins: bool) -> Key:
    over = 1 if under_wins and total > target else 0
    return (abs(total - target), over)


def single_key(hand: Sequence[str], under_wins: bool) -> Key:
    """The ranking key of a hand for the single pot: closest to 7 or 27 over all totals.

    Args:
        hand: the cards.
        under_wins: ``equidistant: under_wins`` — at equal distance a total under its target
            beats one over it (6½ beats 7½, 26 beats 28; rule spec, "Options").
    """
    return min(
        _key(t, target, under_wins) for t in totals(hand) for target in (SEVEN, TWENTY_SEVEN)
    )


def half_key(hand: Sequence[str], target: int, under_wins: bool) -> Key | None:
    """The ranking key of a hand for one half of a split pot, or ``None`` if it does not qualify.

    A total qualifies for the 7-half if it is nearer 7 than 27 (at most 17 points) and for the
    27-half if it is nearer 27 than 7 (at least 17 points; 17 itself qualifies for both). A hand
    qualifies for a half if any of its totals does, and is ranked by its qualifying totals only.

    Args:
        hand: the cards.
        target: :data:`SEVEN` or :data:`TWENTY_SEVEN`.
        under_wins: see :func:`single_key`.
    """
    ts = totals(hand)
    ok = [t for t in ts if t <= MIDDLE] if target == SEVEN else [t for t in ts if t >= MIDDLE]
    if not ok:
        return None
    return min(_key(t, target, under_wins) for t in ok)


def best(keys: dict[int, Key | None]) -> tuple[int, ...]:
    """The seats with the best (smallest) key, ascending; seats with ``None`` never win."""
    ranked = {s: k for s, k in keys.items() if k is not None}
    if not ranked:
        return ()
    top = min(ranked.values())
    return tuple(sorted(s for s, k in ranked.items() if k == top))


def fmt_half_points(hp: int) -> str:
    """Half-points as people write them: ``13`` -> ``"6½"``, ``14`` -> ``"7"``."""
    whole, half = divmod(hp, 2)
    if not half:
        return str(whole)
    return f"{whole}½" if whole else "½"
