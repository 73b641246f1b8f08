"""Seven Twenty-Seven pots: main and side pots as in poker, and odd-chip splitting.

Pots are never stored: they are computed from what each seat has put in this hand (antes, bets,
calls, raises), so chips are conserved by construction (rule spec, "Chips and the table").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs


@attrs.frozen
class Pot:
    """One pot: ``amount`` chips, winnable only by the ``eligible`` seats (ascending)."""

    amount: int
    eligible: tuple[int, ...]


def build_pots(contrib: Sequence[int], live: Iterable[int]) -> tuple[Pot, ...]:
    """The main pot and side pots, as in poker.

    Each distinct level a live (not folded) seat has put in closes a layer; a layer holds, from
    every seat (folded ones too), what it put in between the previous level and this one, and is
    eligible to the live seats that reached the level. Adjacent layers with the same eligible
    seats are one pot. Chips above the highest live level (only possible from a folded seat)
    join the last pot.

    Args:
        contrib: chips each seat has put in this hand (index = seat).
        live: seats still in the hand (not folded, not busted).

    Returns:
        The pots, main pot first; empty if nothing was put in.
    """
    live = sorted(set(live))
    levels = sorted({contrib[s] for s in live if contrib[s] > 0})
    pots: list[Pot] = []
    prev = 0
    for level in levels:
        amount = sum(min(c, level) - min(c, prev) for c in contrib)
        eligible = tuple(s for s in live if contrib[s] >= level)
        if pots and pots[-1].eligible == eligible:
            pots[-1] = Pot(pots[-1].amount + amount, eligible)
        else:
            pots.append(Pot(amount, eligible))
        prev = level
    rest = sum(max(0, c - prev) for c in contrib)
    if rest:
        if pots:
            pots[-1] = Pot(pots[-1].amount + rest, pots[-1].eligible)
        else:
            pots.append(Pot(rest, tuple(live)))
    return tuple(pots)


def from_left(seats: Iterable[int], dealer: int, n: int) -> tuple[int, ...]:
    """``seats`` in play order: the dealer's left (``dealer + 1``) first, clockwise, dealer last."""
    return tuple(sorted(set(seats), key=lambda s: (s - dealer - 1) % n))


def share(amount: int, winners: Sequence[int]) -> tuple[int, ...]:
    """Split ``amount`` equally among ``winners`` (already in order from the dealer's left).

    The odd chips left by the division go one each to the winners nearest the dealer's left
    (rule spec, "Chips and the table"; edge case 5: 7 between two -> 4 and 3).

    Returns:
        Each winner's chips, in the order of ``winners``.

    Raises:
        ValueError: no winners.
    """
    if not winners:
        raise ValueError("a pot needs at least one winner")
    q, r = divmod(amount, len(winners))
    return tuple(q + (1 if i < r else 0) for i in range(len(winners)))


def uncalled(contrib: Sequence[int]) -> tuple[int, int] | None:
    """The uncalled part of the top bet: ``(seat, chips)`` to hand back, or ``None``.

    The seat that put in the most gets back what nobody else matched (as in poker), so no side
    pot is ever eligible to a single seat that alone paid into it.
    """
    if not contrib:
        return None
    top = max(range(len(contrib)), key=lambda s: contrib[s])
    second = max((c for s, c in enumerate(contrib) if s != top), default=0)
    extra = contrib[top] - second
    return (top, extra) if extra > 0 else None
