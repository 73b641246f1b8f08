"""Seven Twenty-Seven ``evolve``: one event applied to the state. Pure, no randomness."""

from __future__ import annotations

from typing import Any

from host.game import replace
from plugins.seven_twenty_seven_model import (
    BetMade,
    BetReturned,
    Busted,
    Called,
    CardDrawn,
    Checked,
    Dealt,
    Folded,
    HandEnded,
    HandStarted,
    LastHand,
    PhaseStarted,
    PotAwarded,
    Raised,
    SessionEnded,
    Showdown,
    State,
    StockRanOut,
    Stood,
    Voted,
    VoteDecided,
)


def _set(t: tuple, i: int, v: Any) -> tuple:
    return t[:i] + (v,) + t[i + 1 :]


def _without(pending: tuple[int, ...], seat: int) -> tuple[int, ...]:
    return tuple(s for s in pending if s != seat)


def responders(s: State, seat: int) -> tuple[int, ...]:
    """The seats that must answer a bet or raise by ``seat``: live, with chips, clockwise after
    ``seat``."""
    n = s.seats
    order = [(seat + k) % n for k in range(1, n)]
    live = set(s.live)
    return tuple(x for x in order if x in live and s.stacks[x] > 0)


def _pay(s: State, seat: int, chips: int) -> State:
    return replace(
        s,
        stacks=_set(s.stacks, seat, s.stacks[seat] - chips),
        contrib=_set(s.contrib, seat, s.contrib[seat] + chips),
        round_bet=_set(s.round_bet, seat, s.round_bet[seat] + chips),
    )


def evolve(s: State, e: Any) -> State:  # noqa: C901 - one branch per event type
    """Apply one event (see :mod:`plugins.seven_twenty_seven_model` for each event's meaning)."""
    n = s.seats
    if isinstance(e, HandStarted):
        return replace(
            s,
            hand_no=e.hand,
            dealer=e.dealer,
            stacks=tuple(st - a for st, a in zip(s.stacks, e.antes, strict=True)),
            contrib=e.antes,
            paid=0,
            in_hand=tuple(a > 0 for a in e.antes),
            folded=(False,) * n,
            busted=(False,) * n,
            hands=((),) * n,
            faces=((),) * n,
            stock=(),
            phase="dealt",
            round=0,
            pending=(),
            round_bet=(0,) * n,
            current_bet=0,
            raises=0,
            drew=False,
            stock_out=False,
            votes=(None,) * n,
            agreed=None,
        )
    if isinstance(e, Dealt):
        hands = tuple(
            ((up,) + tuple(c for c in down if c is not None)) if up is not None else ()
            for up, down in zip(e.up, e.down, strict=True)
        )
        faces = tuple((True,) + (False,) * (len(h) - 1) if h else () for h in hands)
        return replace(s, hands=hands, faces=faces, stock=e.stock or ())
    if isinstance(e, PhaseStarted):
        s = replace(s, phase=e.phase, round=e.round, pending=e.order)
        if e.phase == "betting":
            return replace(s, round_bet=(0,) * n, current_bet=0, raises=0)
        if e.phase == "draw":
            return replace(s, drew=False)
        return replace(s, votes=(None,) * n, agreed=None)
    if isinstance(e, CardDrawn):
        s = replace(
            s,
            hands=_set(s.hands, e.seat, s.hands[e.seat] + (e.card,)),
            faces=_set(s.faces, e.seat, s.faces[e.seat] + (e.face == "up",)),
            stock=s.stock[1:],
        )
        if s.phase == "draw" and e.seat in s.pending:
            s = replace(s, pending=_without(s.pending, e.seat), drew=True)
        return s
    if isinstance(e, Stood | Checked | Called | Folded | Voted | Busted):
        s = replace(s, pending=_without(s.pending, e.seat))
        if isinstance(e, Called):
            return _pay(s, e.seat, e.chips)
        if isinstance(e, Folded | Busted):
            s = replace(s, folded=_set(s.folded, e.seat, True))
        if isinstance(e, Busted):
            s = replace(s, busted=_set(s.busted, e.seat, True))
        if isinstance(e, Voted):
            s = replace(s, votes=_set(s.votes, e.seat, e.yes))
        return s
    if isinstance(e, BetMade | Raised):
        s = _pay(s, e.seat, e.amount if isinstance(e, BetMade) else e.chips)
        s = replace(
            s,
            current_bet=s.round_bet[e.seat],
            raises=s.raises + (1 if isinstance(e, Raised) else 0),
        )
        return replace(s, pending=responders(s, e.seat))
    if isinstance(e, StockRanOut):
        return replace(s, stock_out=True, pending=() if s.phase == "draw" else s.pending)
    if isinstance(e, BetReturned):
        return replace(
            s,
            stacks=_set(s.stacks, e.seat, s.stacks[e.seat] + e.chips),
            contrib=_set(s.contrib, e.seat, s.contrib[e.seat] - e.chips),
            round_bet=_set(s.round_bet, e.seat, max(0, s.round_bet[e.seat] - e.chips)),
        )
    if isinstance(e, VoteDecided):
        return replace(s, agreed=e.agreed, pending=())
    if isinstance(e, Showdown):
        return replace(s, last=LastHand(s.hand_no, shown=e.hands))
    if isinstance(e, PotAwarded):
        last = s.last if s.last is not None and s.last.hand == s.hand_no else LastHand(s.hand_no)
        stacks = list(s.stacks)
        for w, c in zip(e.winners, e.shares, strict=True):
            stacks[w] += c
        return replace(
            s,
            stacks=tuple(stacks),
            paid=s.paid + e.amount,
            last=replace(last, awards=last.awards + (e,)),
        )
    if isinstance(e, HandEnded):
        return replace(s, contrib=(0,) * n, paid=0, phase="idle", pending=())
    if isinstance(e, SessionEnded):
        return replace(s, phase="over", pending=(), end_reason=e.reason)
    raise TypeError(f"not a Seven Twenty-Seven event: {e!r}")
