"""Seven Twenty-Seven ``decide``: validate an action, then run the table until a seat must act.

Everything that follows an action without a choice (the end of a round, the next phase, the
showdown, paying the pots, the next hand's antes and deal, the end of the session) is generated
here as events, so ``evolve`` never needs randomness (rule spec, "A hand" and "Options").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from host.game import NOT_YOUR_TURN, ActionError, Emitter, IllegalAction, Rng, replace
from plugins import cards
from plugins.seven_twenty_seven import hands as hv
from plugins.seven_twenty_seven.model import (
    Bet,
    BetMade,
    BetReturned,
    Busted,
    Call,
    Called,
    CardDrawn,
    Check,
    Checked,
    Dealt,
    Draw,
    Fold,
    Folded,
    HandEnded,
    HandStarted,
    LastHand,
    PhaseStarted,
    PotAwarded,
    Raise,
    Raised,
    SessionEnded,
    Showdown,
    ShownHand,
    Stand,
    State,
    StockRanOut,
    Stood,
    Vote,
    Voted,
    VoteDecided,
)
from plugins.seven_twenty_seven.pots import build_pots, from_left, share, uncalled

# -- evolve: one event applied to the state (pure, no randomness) -----------------------------


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
    """Apply one event (see :mod:`plugins.seven_twenty_seven.model` for each event's meaning)."""
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


# -- decide -------------------------------------------------------------------------------------


Evolve = Callable[[State, Any], State]
"""An ``evolve``: the state after one event."""


def to_act(s: State) -> tuple[int, ...]:
    """The seat to act in a draw or betting round; every voter still to vote in the vote."""
    if s.phase in ("draw", "betting"):
        return s.pending[:1]
    if s.phase == "vote":
        return s.pending
    return ()


def to_call(s: State, seat: int) -> int:
    """Chips ``seat`` must put in to call now (before capping at its stack)."""
    if s.phase != "betting" or not s.round_bet:
        return 0
    return max(0, s.current_bet - s.round_bet[seat])


def _bet_range(s: State, seat: int, need: int) -> tuple[int, int] | None:
    """The allowed bet/raise sizes for ``seat`` after putting in ``need`` to call, or None."""
    o = s.options
    hi = min(o.max_bet, s.stacks[seat] - need)
    if hi < o.min_bet or not responders(s, seat):
        return None
    return (o.min_bet, hi)


def check_action(s: State, seat: int, action: Any) -> list[Any]:
    """The events an action causes by itself (before what follows automatically).

    Raises:
        IllegalAction: ``not_your_turn``, ``wrong_phase`` (e.g. a bet during the draw),
            ``stock_empty``, ``bet_to_call`` (check while facing a bet), ``already_bet`` (bet
            after someone bet: raise instead), ``nothing_to_call`` / ``nothing_to_raise`` /
            ``no_bet_to_fold`` (no bet yet), ``raise_limit`` (``max_raises`` reached),
            ``bad_amount`` (outside ``min_bet`` .. ``max_bet``), ``not_enough_chips``,
            ``nobody_to_bet_against`` (every other player is all-in).
        ActionError: not one of the game's actions (``bad_action``).
    """
    if seat not in to_act(s):
        raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
    o = s.options
    if isinstance(action, Draw | Stand):
        if s.phase != "draw":
            raise IllegalAction("wrong_phase", "draw or stand only in a draw round")
        if isinstance(action, Stand):
            return [Stood(seat)]
        if not s.stock:
            raise IllegalAction("stock_empty", "the stock is empty")
        card = s.stock[0]
        out: list[Any] = [CardDrawn(seat, card, "down")]
        if o.bust_over_27 and hv.lowest_total(s.hands[seat] + (card,)) > hv.TWENTY_SEVEN:
            out.append(Busted(seat))
        return out
    if isinstance(action, Vote):
        if s.phase != "vote":
            raise IllegalAction("wrong_phase", "vote only on the extra card")
        return [Voted(seat, action.yes)] + ([] if action.yes else [VoteDecided(False)])
    if not isinstance(action, Check | Bet | Call | Raise | Fold):
        raise ActionError(f"not a Seven Twenty-Seven action: {action!r}")  # bad_action
    if s.phase != "betting":
        raise IllegalAction("wrong_phase", "check, bet, call, raise and fold only in betting")
    stack = s.stacks[seat]
    need = to_call(s, seat)
    facing = s.current_bet > 0
    if isinstance(action, Check):
        if facing:
            raise IllegalAction("bet_to_call", "somebody has bet: fold, call or raise")
        return [Checked(seat)]
    if isinstance(action, Fold | Call):
        if not facing:
            reason = "no_bet_to_fold" if isinstance(action, Fold) else "nothing_to_call"
            raise IllegalAction(reason, "nobody has bet this round: check or bet")
        if isinstance(action, Fold):
            return [Folded(seat)]
        chips = min(need, stack)
        return [Called(seat, chips, chips == stack)]
    if isinstance(action, Bet) and facing:
        raise IllegalAction("already_bet", "somebody has bet: raise instead")
    if isinstance(action, Raise):
        if not facing:
            raise IllegalAction("nothing_to_raise", "nobody has bet this round: bet instead")
        if s.raises >= o.max_raises:
            raise IllegalAction("raise_limit", f"{o.max_raises} raises this round already")
    amount = action.amount
    if not o.min_bet <= amount <= o.max_bet:
        raise IllegalAction("bad_amount", f"a bet or raise is {o.min_bet} to {o.max_bet} chips")
    if need + amount > stack:
        raise IllegalAction("not_enough_chips", f"that needs {need + amount} chips, {stack} left")
    if not responders(s, seat):
        raise IllegalAction("nobody_to_bet_against", "every other player is all-in")
    if isinstance(action, Bet):
        return [BetMade(seat, amount, amount == stack)]
    return [Raised(seat, amount, need + amount, need + amount == stack)]


def legal_actions(s: State, seat: int) -> list[Any]:
    """What ``seat`` may do now. Bet and raise sizes are a representative subset: the smallest,
    the largest the stack allows and one in between; any size in ``min_bet .. max_bet`` the
    stack covers is accepted."""
    if seat not in to_act(s):
        return []
    if s.phase == "draw":
        return [Draw(), Stand()] if s.stock else [Stand()]
    if s.phase == "vote":
        return [Vote(True), Vote(False)]
    need = to_call(s, seat)
    rng = _bet_range(s, seat, need)
    sizes = sorted({rng[0], (rng[0] + rng[1]) // 2, rng[1]}) if rng else []
    if s.current_bet == 0:
        return [Check()] + [Bet(a) for a in sizes]
    out: list[Any] = [Fold(), Call()]
    if s.raises < s.options.max_raises:
        out += [Raise(a) for a in sizes]
    return out


def decide(s: State, seat: int, action: Any, rng: Rng, fold: Evolve = evolve) -> Emitter:
    """The events of an action and of everything that follows it until a seat must act, each
    folded once by ``fold`` (the game's ``evolve``) as it is emitted.

    Raises:
        IllegalAction: see :func:`check_action`.
    """
    out = Emitter(s, fold)
    out.emit(*check_action(s, seat, action))
    _run(out, rng)
    return out


def start(s: State, rng: Rng, fold: Evolve = evolve) -> Emitter:
    """The first hand's antes and deal."""
    return advance(s, rng, fold)


def advance(s: State, rng: Rng, fold: Evolve = evolve) -> Emitter:
    """Events that follow without anyone choosing, until a seat must act or the session ends."""
    out = Emitter(s, fold)
    _run(out, rng)
    return out


def _run(out: Emitter, rng: Rng) -> None:
    """Emit what follows without anyone choosing, until a seat must act or the session ends."""
    while True:
        s = out.state
        if s.phase == "over":
            return
        live = s.live
        if s.phase != "idle" and len(live) == 1:
            _uncontested(out)
            continue
        if s.phase == "draw" and s.pending and not s.stock and not s.stock_out:
            out.emit(StockRanOut())
            continue
        if s.pending:
            return
        if s.phase == "idle":
            _next_hand(out, rng)
        elif s.phase == "dealt":
            out.emit(PhaseStarted("draw", 1, from_left(live, s.dealer, s.seats)))
        elif s.phase == "draw":
            can_bet = [x for x in live if s.stacks[x] > 0]
            order = from_left(can_bet, s.dealer, s.seats) if len(can_bet) > 1 else ()
            out.emit(PhaseStarted("betting", s.round, order))
        elif s.phase == "betting":
            _after_betting(out)
        elif s.phase == "vote":
            _after_vote(out)
        else:  # pragma: no cover - every phase is handled above
            raise AssertionError(s.phase)


def _uncontested(out: Emitter) -> None:
    """All but one folded (or busted): the pot is paid at once, no hand evaluated or shown."""
    s = out.state
    (winner,) = s.live
    amount = s.pot_total
    out.emit(PotAwarded(0, "all", amount, (winner,), (amount,), True))
    out.emit(HandEnded(s.hand_no, out.state.stacks))


def _after_betting(out: Emitter) -> None:
    s = out.state
    back = uncalled(s.contrib)
    if back is not None:
        out.emit(BetReturned(*back))
        s = out.state
    live = s.live
    if s.options.draw_rounds == "until_all_stand":
        if s.drew and s.stock and not s.stock_out:
            out.emit(PhaseStarted("draw", s.round + 1, from_left(live, s.dealer, s.seats)))
        else:
            _showdown(out)
    elif s.round == 1 and len(s.stock) >= len(live):
        out.emit(PhaseStarted("vote", 1, from_left(live, s.dealer, s.seats)))
    else:
        _showdown(out)


def _after_vote(out: Emitter) -> None:
    s = out.state
    if s.agreed is None:
        out.emit(VoteDecided(all(s.votes[x] for x in s.live)))
        return
    if not s.agreed:
        _showdown(out)
        return
    for seat in from_left(s.live, s.dealer, s.seats):
        s = out.state
        if len(s.live) == 1:
            return  # everyone else busted: paid uncontested by advance()
        card = s.stock[0]
        out.emit(CardDrawn(seat, card, s.options.extra_card_face))
        hand = out.state.hands[seat]
        if s.options.bust_over_27 and hv.lowest_total(hand) > hv.TWENTY_SEVEN:
            out.emit(Busted(seat))
    s = out.state
    if len(s.live) > 1:
        can_bet = [x for x in s.live if s.stacks[x] > 0]
        order = from_left(can_bet, s.dealer, s.seats) if len(can_bet) > 1 else ()
        out.emit(PhaseStarted("betting", 2, order))


def _showdown(out: Emitter) -> None:
    """Turn up the remaining hands and pay every pot (rule spec, step 5 and "Options")."""
    s = out.state
    n, dealer = s.seats, s.dealer
    live = from_left(s.live, dealer, n)
    out.emit(
        Showdown(
            tuple(
                ShownHand(x, s.hands[x], hv.totals(s.hands[x]), hv.distance(s.hands[x]))
                for x in live
            )
        )
    )
    under = s.options.equidistant == "under_wins"
    for i, pot in enumerate(build_pots(s.contrib, live)):
        hands = {x: s.hands[x] for x in pot.eligible}
        if s.options.pot == "single":
            keys = {x: hv.single_key(h, under) for x, h in hands.items()}
            win = from_left(hv.best(keys), dealer, n)
            out.emit(PotAwarded(i, "all", pot.amount, win, share(pot.amount, win), False))
            continue
        low = from_left(
            hv.best({x: hv.half_key(h, hv.SEVEN, under) for x, h in hands.items()}), dealer, n
        )
        high = from_left(
            hv.best({x: hv.half_key(h, hv.TWENTY_SEVEN, under) for x, h in hands.items()}),
            dealer,
            n,
        )
        if not low or not high:
            half = "seven" if low else "twenty_seven"
            win = low or high
            out.emit(PotAwarded(i, half, pot.amount, win, share(pot.amount, win), False))
            continue
        half_amount, odd = divmod(pot.amount, 2)
        first = from_left(set(low) | set(high), dealer, n)[0]
        low_amount = half_amount + (odd if first in low else 0)
        high_amount = pot.amount - low_amount
        out.emit(PotAwarded(i, "seven", low_amount, low, share(low_amount, low), False))
        out.emit(PotAwarded(i, "twenty_seven", high_amount, high, share(high_amount, high), False))
    out.emit(HandEnded(s.hand_no, out.state.stacks))


def _next_hand(out: Emitter, rng: Rng) -> None:
    """End the session, or post the antes and deal the next hand (rule spec, step 1)."""
    s = out.state
    o, n = s.options, s.seats
    if s.hand_no > 0:
        if sum(1 for st in s.stacks if st > 0) == 1:
            out.emit(SessionEnded("one_player_left", s.stacks))
            return
        if o.hands != "unlimited" and s.hand_no >= o.hands:
            out.emit(SessionEnded("hands_played", s.stacks))
            return
    can = [x for x in range(n) if s.stacks[x] >= o.ante]
    if len(can) < 2:
        out.emit(SessionEnded("too_few_can_ante", s.stacks))
        return
    if s.hand_no == 0:
        dealer = 0 if 0 in can else can[0]
    else:
        dealer = next(x for x in ((s.dealer + k) % n for k in range(1, n + 1)) if x in can)
    out.emit(HandStarted(s.hand_no + 1, dealer, tuple(o.ante if x in can else 0 for x in range(n))))
    deck = cards.shuffled_shoe(rng)
    order = from_left(can, dealer, n)
    downs = 2 if o.deal == "up_down_down" else 1
    up: list[str | None] = [None] * n
    down: list[tuple[str, ...]] = [()] * n
    for x in order:
        up[x] = deck.pop(0)
    for _ in range(downs):
        for x in order:
            down[x] = down[x] + (deck.pop(0),)
    out.emit(Dealt(tuple(up), tuple(down), tuple(deck)))
    if o.bust_over_27:
        for x in order:
            if len(out.state.live) == 1:
                break
            if hv.lowest_total(out.state.hands[x]) > hv.TWENTY_SEVEN:
                out.emit(Busted(x))
