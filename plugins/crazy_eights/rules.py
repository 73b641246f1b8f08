"""Crazy Eights rules as pure functions over :class:`~plugins.crazy_eights.model.State`.

Matching, wild cards, drawing and passing, special cards, the deal, scoring, ``evolve``, who is
to act, the legal actions and ``decide`` (with its follow-on events, through an :class:`Emitter`).
Section names in the docstrings refer to ``docs/rules/crazy-eights.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from host.game import NOT_YOUR_TURN, ActionError, Emitter, IllegalAction, Rng, replace
from plugins import cards
from plugins.crazy_eights.model import (
    DealScored,
    Dealt,
    Draw,
    Drew,
    Options,
    Pass,
    Passed,
    PenaltyTaken,
    Play,
    Played,
    Reshuffled,
    State,
    deck_count,
    hand_size,
    stacking,
    target,
)

COUNTDOWN_START = 8
REDRAW_ATTEMPTS = 1000
"""Starter redraws before a wild starter is kept anyway (only if the stock is nearly all wild)."""


# -- cards --------------------------------------------------------------------------------------


def card_points(card: str) -> int:
    """Card points (Scoring): 8 = 50; K, Q, J, 10 = 10; A = 1; others their pip value."""
    r = cards.rank(card)
    if r == "8":
        return 50
    if r in ("K", "Q", "J", "10"):
        return 10
    if r == "A":
        return 1
    return int(r)


def hand_points(hand: tuple[str, ...]) -> int:
    """The card points of a hand."""
    return sum(card_points(c) for c in hand)


def number_rank(number: int) -> str:
    """The rank a countdown number makes wild: 8 -> ``"8"`` … 2 -> ``"2"``, 1 -> ``"A"``."""
    return "A" if number == 1 else str(number)


def wild_rank(state: State, seat: int) -> str:
    """The rank that is wild for ``seat``: ``"8"``, or in countdown the rank of their number."""
    if state.options.countdown:
        return number_rank(state.numbers[seat])
    return "8"


def is_wild(state: State, seat: int, card: str) -> bool:
    """Whether ``card`` is wild for ``seat`` (Variants, countdown: wild for them only)."""
    return cards.rank(card) == wild_rank(state, seat)


def wild_ranks(state: State) -> frozenset[str]:
    """Every rank wild for some player this deal (the ranks ``starter_eight`` turns back)."""
    if state.options.countdown:
        return frozenset(number_rank(n) for n in state.numbers)
    return frozenset({"8"})


# -- a turn -------------------------------------------------------------------------------------


def matches(state: State, seat: int, card: str) -> bool:
    """Whether ``seat`` may play ``card`` now (A turn; Variants, draw_two).

    Under a pending draw-two penalty only a 2 may be played. Otherwise a card wild for the
    player, or one matching the top discard's rank or the current suit; after a kept wild
    starter (``current_suit`` ``None``) any card.
    """
    if state.penalty > 0:
        return cards.rank(card) == "2"
    if is_wild(state, seat, card) or state.current_suit is None:
        return True
    top = state.discard[-1]
    return cards.rank(card) == cards.rank(top) or cards.suit(card) == state.current_suit


def playable_cards(state: State, seat: int) -> list[str]:
    """The distinct cards of ``seat``'s hand that may be played now, in hand order: those
    :func:`matches` allows (its tests worked out once for the whole hand; asked for every
    bot move and every turn push)."""
    out: list[str] = []
    hand = state.hands[seat]
    if state.penalty > 0:
        wanted: tuple[str | None, ...] = ("2", None, None)  # rank, second rank, suit
    elif state.current_suit is None:
        return list(dict.fromkeys(hand))
    else:
        wanted = (wild_rank(state, seat), cards.rank(state.discard[-1]), state.current_suit)
    rank_a, rank_b, suit = wanted
    for c in hand:
        r = c[:-1]  # cards.rank and cards.suit, inline
        if (r in (rank_a, rank_b) or c[-1] == suit) and c not in out:
            out.append(c)
    return out


def drawable(state: State) -> int:
    """Cards that could be drawn now: the stock, or the reshuffle when the stock is empty."""
    if state.stock:
        return len(state.stock)
    if state.options.reshuffle and len(state.discard) > 1:
        return len(state.discard) - 1
    return 0


def can_draw(state: State) -> bool:
    """Whether the player to act may draw (a card exists and ``draw_limit`` is not reached).

    A penalty draw ignores ``draw_limit``.
    """
    if drawable(state) == 0:
        return False
    limit = state.options.draw_limit
    return state.penalty > 0 or limit == "none" or state.draws < limit


def can_pass(state: State, seat: int) -> bool:
    """Whether ``seat`` (to act) may pass: no card can be drawn and, with ``draw_limit`` none,
    no legal play (A turn)."""
    if can_draw(state):
        return False
    return state.options.draw_limit != "none" or not playable_cards(state, seat)


def next_seat(state: State, seat: int) -> int:
    """The seat after ``seat`` in the current direction."""
    return (seat + state.direction) % state.seats


def _after_play(state: State, seat: int, card: str) -> dict[str, int]:
    """Turn, direction and penalty after ``seat`` played ``card`` (Variants), as field values."""
    o = state.options
    r = cards.rank(card)
    direction = state.direction
    step = 1
    if o.queens_skip and r == "Q":
        step = 2
    if o.aces_reverse and r == "A":
        if state.seats == 2:
            step = 2
        else:
            direction = -direction
    penalty = 0
    if o.draw_two and r == "2":
        penalty = state.penalty + 2 if stacking(o) else 2
    turn = (seat + step * direction) % state.seats
    return {"turn": turn, "direction": direction, "penalty": penalty, "draws": 0, "passes": 0}


# -- the deal -----------------------------------------------------------------------------------


def deal_sizes(state: State) -> list[int]:
    """Cards per seat for the next deal (Setup 3; countdown: each player's number)."""
    if state.options.countdown:
        return list(state.numbers)
    return [hand_size(state.options, state.seats)] * state.seats


def next_deal(state: State, rng: Rng) -> Dealt:
    """Shuffle, deal and turn the starter for the deal after ``state.deal`` (Setup).

    The dealer is seat 0 for the first deal, then the next seat clockwise. Cards are dealt one
    at a time from the top, starting at the dealer's left; the starter is turned by
    :func:`turn_starter`.
    """
    n = state.seats
    dealer = 0 if state.deal == 0 else (state.dealer + 1) % n
    shoe = cards.shuffled_shoe(rng, deck_count(state.options, n))
    sizes = deal_sizes(state)
    hands: list[list[str]] = [[] for _ in range(n)]
    order = [(dealer + 1 + k) % n for k in range(n)]
    i = 0
    for r in range(max(sizes)):
        for s in order:
            if r < sizes[s]:
                hands[s].append(shoe[i])
                i += 1
    starter, stock, turned_back = turn_starter(
        shoe[i:], wild_ranks(state), state.options.starter_eight, rng
    )
    return Dealt(
        deal=state.deal + 1,
        dealer=dealer,
        hands=tuple(tuple(h) for h in hands),
        hand_sizes=tuple(len(h) for h in hands),
        stock=stock,
        stock_size=len(stock),
        starter=starter,
        turned_back=turned_back,
    )


def turn_starter(
    stock: list[str], wild: frozenset[str], mode: str, rng: Rng
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Turn the starter from the top of ``stock`` (Setup 4, ``starter_eight``).

    Args:
        stock: the cards left after dealing, index 0 on top.
        wild: the ranks that must not start (wild for some player).
        mode: ``"bury"``, ``"redraw"`` or ``"keep"``.
        rng: draws the ``redraw`` shuffles.

    Returns:
        ``(starter, stock, turned_back)``: the first discard, the stock left (top first), and
        the wild cards turned and put back, in order. ``bury`` puts a wild card at a random
        place in the middle half of the stock left after turning it (uniform over indexes
        ``len // 4`` to ``len - len // 4``), so nobody can count where it lies; if burying has
        gone round the
        whole stock, or a ``redraw`` stock holds wild cards only, the card turned is kept.
    """
    stock = list(stock)
    starter = stock.pop(0)
    turned_back: list[str] = []
    attempts = 0
    while cards.rank(starter) in wild and mode != "keep":
        if mode == "bury" and (attempts > len(stock) or not stock):
            break
        if mode == "redraw" and (
            attempts >= REDRAW_ATTEMPTS or all(cards.rank(c) in wild for c in stock)
        ):
            break
        turned_back.append(starter)
        if mode == "bury":
            quarter = len(stock) // 4
            stock.insert(quarter + rng.below(len(stock) - 2 * quarter + 1), starter)
        else:
            stock = rng.shuffled([*stock, starter])
        starter = stock.pop(0)
        attempts += 1
    return starter, tuple(stock), tuple(turned_back)


def score_deal(state: State, winner: int | None) -> DealScored:
    """Score the deal that just ended (Scoring; Variants, countdown).

    Going out: the winner gains the points in every other hand (countdown: their number drops
    by one). Blocked: the lowest hand in points gains, from each opponent, the difference to
    that opponent's points; a tie for lowest shares the total (``split``, remainder dropped)
    or scores nothing (``none``); countdown numbers do not change.
    """
    n = state.seats
    points = tuple(hand_points(h) for h in state.hands)
    gains = [0] * n
    numbers = list(state.numbers)
    if state.options.countdown:
        if winner is not None:
            numbers[winner] -= 1
    elif winner is not None:
        gains[winner] = sum(p for s, p in enumerate(points) if s != winner)
    else:
        low = min(points)
        lows = [s for s, p in enumerate(points) if p == low]
        total = sum(p - low for p in points)
        if len(lows) == 1 or state.options.blocked_tie == "split":
            for s in lows:
                gains[s] = total // len(lows)
    return DealScored(
        deal=state.deal,
        result="out" if winner is not None else "blocked",
        winner=winner,
        hands=state.hands,
        points=points,
        gains=tuple(gains),
        scores=tuple(a + b for a, b in zip(state.scores, gains, strict=True)),
        numbers=tuple(numbers),
    )


def match_winners(options: Options, seats: int, scored: DealScored) -> tuple[int, ...]:
    """The match winners after ``scored``, or ``()`` if the match goes on (Scoring)."""
    if options.countdown:
        return tuple(s for s, x in enumerate(scored.numbers) if x <= 0)
    best = max(scored.scores)
    if best < target(options, seats):
        return ()
    return tuple(s for s, x in enumerate(scored.scores) if x == best)


# -- evolve -------------------------------------------------------------------------------------


def initial_state(options: Options, seats: int) -> State:
    """The state before the first deal: zero scores, countdown numbers at 8."""
    numbers = (COUNTDOWN_START,) * seats if options.countdown else ()
    return State(options=options, seats=seats, scores=(0,) * seats, numbers=numbers)


def _set_hand(state: State, seat: int, hand: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    hands = list(state.hands)
    hands[seat] = hand
    return tuple(hands)


def evolve(state: State, event: object) -> State:
    """Apply one event (pure; no randomness).

    Raises:
        TypeError: an object that is not a Crazy Eights event.
    """
    if isinstance(event, Dealt):
        return _evolve_dealt(state, event)
    if isinstance(event, Played):
        hand = cards.remove_one(state.hands[event.seat], event.card)
        if not hand and state.options.special_on_last_card != "applied":
            after: dict[str, Any] = {"turn": None, "penalty": 0, "draws": 0, "passes": 0}
        else:
            after = _after_play(state, event.seat, event.card)
        return replace(
            state,
            hands=_set_hand(state, event.seat, hand),
            discard=(*state.discard, event.card),
            current_suit=event.suit or cards.suit(event.card),
            **after,
        )
    if isinstance(event, Drew):
        assert event.cards is not None, "evolve needs the unredacted event"
        hand = state.hands[event.seat] + event.cards
        return replace(
            state,
            hands=_set_hand(state, event.seat, hand),
            stock=state.stock[event.count :],
            draws=state.draws + (event.count if state.penalty == 0 else 0),
            passes=0,
        )
    if isinstance(event, PenaltyTaken):
        return replace(state, turn=next_seat(state, event.seat), penalty=0, draws=0, passes=0)
    if isinstance(event, Reshuffled):
        assert event.stock is not None, "evolve needs the unredacted event"
        return replace(state, stock=event.stock, discard=state.discard[-1:])
    if isinstance(event, Passed):
        passes = state.passes + 1 if state.draws == 0 else 0
        turn = None if passes >= state.seats else next_seat(state, event.seat)
        return replace(state, turn=turn, penalty=0, draws=0, passes=passes)
    if isinstance(event, DealScored):
        winners = match_winners(state.options, state.seats, event)
        return replace(
            state,
            turn=None,
            penalty=0,
            draws=0,
            passes=0,
            scores=event.scores,
            numbers=event.numbers,
            last_deal=event,
            over=bool(winners),
            winners=winners,
        )
    raise TypeError(f"not a Crazy Eights event: {event!r}")


def _evolve_dealt(state: State, event: Dealt) -> State:
    hands = event.hands
    assert event.stock is not None and all(h is not None for h in hands), "unredacted event"
    s = replace(
        state,
        deal=event.deal,
        dealer=event.dealer,
        hands=tuple(h for h in hands if h is not None),
        stock=event.stock,
        discard=(event.starter,),
        current_suit=cards.suit(event.starter),
        direction=1,
        penalty=0,
        draws=0,
        passes=0,
    )
    after: dict[str, Any] = {"turn": next_seat(s, event.dealer)}
    if cards.rank(event.starter) in wild_ranks(s):
        after["current_suit"] = None
    if s.options.special_starter == "applies":
        after.update(_after_play(s, event.dealer, event.starter))
    return replace(s, **after)


Evolve = Callable[[State, Any], State]
"""An ``evolve``: the state after one event (``decide`` emits through the one it is given)."""


# -- turns: who acts, what is legal, decide -----------------------------------------------------


class _Events(Emitter):
    """The events of one ``decide`` (an :class:`Emitter`), with the moves that emit several."""

    def draw(self, seat: int, want: int, rng: Rng) -> int:
        """Draw up to ``want`` cards for ``seat``, reshuffling when the stock runs out."""
        got = 0
        while got < want:
            s = self.state
            if not s.stock:
                if not (s.options.reshuffle and len(s.discard) > 1):
                    break
                pile = tuple(rng.shuffled(s.discard[:-1]))
                self.emit(Reshuffled(pile, len(pile)))
                s = self.state
            k = min(want - got, len(s.stock))
            self.emit(Drew(seat, s.stock[:k], k))
            got += k
        return got

    def take_penalty(self, seat: int, rng: Rng) -> None:
        total = self.state.penalty
        got = self.draw(seat, total, rng)
        self.emit(PenaltyTaken(seat, got, total - got))

    def end_deal(self, winner: int | None, rng: Rng) -> None:
        s = self.emit(score_deal(self.state, winner))
        if not s.over:
            self.emit(next_deal(s, rng))


def to_act(state: State) -> tuple[int, ...]:
    if state.over or state.turn is None or not all(state.hands):
        return ()
    return (state.turn,)


def legal_actions(state: State, seat: int) -> list[Any]:
    if seat not in to_act(state):
        return []
    hand = state.hands[seat]
    out: list[Any] = []
    for card in playable_cards(state, seat):
        if is_wild(state, seat, card) and len(hand) > 1:
            out += [Play(card, s) for s in cards.SUITS]
        else:
            out.append(Play(card, None))
    if can_draw(state):
        out.append(Draw())
    if can_pass(state, seat):
        out.append(Pass())
    return out


def decide(state: State, seat: int, action: Any, rng: Rng, fold: Evolve = evolve) -> list[Any]:
    """The events ``action`` by ``seat`` causes.

    Raises:
        IllegalAction: see the module docstring for the reasons.
        ActionError: not one of the game's actions (``bad_action``).
    """
    if seat not in to_act(state):
        raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
    if isinstance(action, Play):
        return _play(state, seat, action, rng, fold)
    out = _Events(state, fold)
    if isinstance(action, Draw):
        if not can_draw(state):
            raise IllegalAction("cannot_draw", _why_no_draw(state))
        if state.penalty > 0:
            out.take_penalty(seat, rng)
        else:
            out.draw(seat, 1, rng)
        return out
    if isinstance(action, Pass):
        if not can_pass(state, seat):
            raise IllegalAction(
                "cannot_pass",
                "you may pass only when no card can be drawn"
                + (" and you hold no legal play" if state.options.draw_limit == "none" else "")
                + " (A turn)",
            )
        s = out.emit(Passed(seat))
        if s.passes >= s.seats:
            out.end_deal(None, rng)
        return out
    raise ActionError(f"not a Crazy Eights action: {action!r}")  # answered bad_action


def _why_no_draw(state: State) -> str:
    if drawable(state) == 0:
        return "the stock is empty and there is nothing to reshuffle (A turn)"
    return f"draw_limit reached: {state.draws} cards drawn this turn (A turn)"


def _play(state: State, seat: int, action: Play, rng: Rng, fold: Evolve) -> list[Any]:
    hand = state.hands[seat]
    card, suit = action.card, action.suit
    if card not in hand:
        raise IllegalAction("card_not_in_hand", f"{card!r} is not in your hand")
    if state.penalty > 0 and cards.rank(card) != "2":
        raise IllegalAction(
            "draw_two_pending",
            f"a draw-two penalty of {state.penalty} is pending: play a 2 or draw (Variants)",
        )
    if not matches(state, seat, card):
        raise IllegalAction(
            "card_does_not_match",
            f"{card} matches neither the rank of {state.discard[-1]} nor the current suit"
            f" {cards.SUIT_NAMES[state.current_suit or 'C']} (A turn)",
        )
    if is_wild(state, seat, card) and len(hand) > 1:
        if suit is None:
            raise IllegalAction("suit_required", f"{card} is wild: name a suit (A turn)")
        if suit not in cards.SUITS:
            raise IllegalAction("unknown_suit", f"{suit!r} is not one of C, D, H, S")
    elif suit is not None:
        raise IllegalAction(
            "suit_not_allowed",
            f"{card} names no suit (only a wild card that is not your last does)",
        )
    out = _Events(state, fold)
    s = out.emit(Played(seat, card, suit))
    if not s.hands[seat]:
        if s.penalty > 0 and s.turn is not None:
            out.take_penalty(s.turn, rng)
        out.end_deal(seat, rng)
    return out
