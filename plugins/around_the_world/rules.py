"""Around the World rules: ``decide``, ``evolve``, the legal actions and the rule functions.

The first part holds plain functions of cards and option values (questions, drink values, shoe
size, poker hands); the second the facts derived from the state (who acts, the question asked),
the legal actions, ``decide`` with its follow-on events, and ``evolve`` (the event fold). Rule
spec: ``docs/rules/around-the-world.md``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from host.game import NOT_YOUR_TURN, Emitter, IllegalAction, Rng, replace
from plugins import cards
from plugins.around_the_world.model import (
    Assignment,
    BestHand,
    Cancel,
    Cancelled,
    ColumnsLaid,
    Entry,
    Finished,
    Flip,
    Give,
    Given,
    Guess,
    Guessed,
    Match,
    ShoeShuffled,
    State,
    Turned,
)

DEALER = 0

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


# -- derived facts ------------------------------------------------------------------------------


def state_questions(state: State) -> tuple[str, ...]:
    return questions(state.options.fifth_question)


def state_layout(state: State) -> tuple[tuple[str, int, int], ...]:
    o = state.options
    return layout(o.row_values, o.flip_order, o.end_cards)


def guesser(state: State) -> int | None:
    """The seat to guess next in round 1: seat 1 first, the dealer last on each pass."""
    if state.phase != "round1" or state.turn >= len(state_questions(state)) * state.seats:
        return None
    return (state.turn % state.seats + 1) % state.seats


def current_question(state: State) -> tuple[str, int]:
    index = state.turn // state.seats
    o = state.options
    return state_questions(state)[index], round1_value(index, o.round1_values, o.row_values)


def expected(state: State, seat: int) -> str | None:
    """What ``seat`` must send now: guess, give, flip, cancel, or None."""
    if state.phase in ("round1", "round2") and any(state.pending):
        return "give" if state.pending[seat] else None
    if state.phase == "round1":
        return "guess" if seat == guesser(state) else None
    if state.phase == "round2":
        more = len(state.turned) < len(state_layout(state))
        return "flip" if seat == DEALER and more else None
    if state.phase == "cancel":
        return "cancel" if seat in state.best and seat not in state.decided else None
    return None


def to_act(state: State) -> tuple[int, ...]:
    """Round 1: the guesser, or the seat with a pending give. Round 2: every seat with a
    pending give, else the dealer. Cancel phase: best-hand holders yet to decide."""
    return tuple(s for s in range(state.seats) if expected(state, s) is not None)


def legal_actions(state: State, seat: int) -> list[Any]:
    """The actions ``seat`` may take now (a representative subset for give and cancel)."""
    kind = expected(state, seat)
    if kind == "guess":
        question, _ = current_question(state)
        allowed = allowed_guesses(question, state.options.suit_question)
        return [Guess(g) for g in allowed]
    if kind == "give":
        return _give_choices(state, seat)
    if kind == "flip":
        return [Flip()]
    if kind == "cancel":
        return _cancel_choices(state, seat)
    return []


def _give_choices(state: State, seat: int) -> list[Give]:
    value = state.pending[seat]
    others = [(seat + k) % state.seats for k in range(1, state.seats)]
    out = [Give((Assignment(o, value),)) for o in others]
    spread = others[:value]
    if len(spread) > 1:
        base, extra = divmod(value, len(spread))
        out.append(Give(tuple(Assignment(o, base + (i < extra)) for i, o in enumerate(spread))))
    return out


def round2_entries(state: State) -> list[Entry]:
    """The round-2 drink entries; their position is their number for ``cancel``."""
    return [e for e in state.entries if e.round == 2]


def _cancel_choices(state: State, seat: int) -> list[Cancel]:
    entries = round2_entries(state)
    options = [(), tuple(range(len(entries)))]
    for s in (seat, *range(state.seats)):
        options.append(tuple(n for n, e in enumerate(entries) if e.seat == s))
    seen: list[tuple[int, ...]] = []
    for o in options:
        if o not in seen:
            seen.append(o)
    return [Cancel(o) for o in seen]


def decide(
    state: State,
    seat: int,
    action: Any,
    rng: Rng,
    fold: Callable[[State, Any], State] | None = None,
) -> list[Any]:
    """Validate ``action`` by ``seat`` and return its events (plus any phase changes), emitted
    through ``fold`` (the game object's ``evolve``; :func:`evolve` when omitted).

    Raises:
        IllegalAction: ``not_your_turn`` (seat not to act), ``wrong_action`` (the seat must
            send another kind of action), ``bad_guess``, ``empty_give``, ``bad_seat``,
            ``give_to_self``, ``duplicate_seat``, ``bad_drinks``, ``wrong_total``,
            ``bad_entry``, ``duplicate_entry``.
    """
    kind = expected(state, seat)
    if kind is None:
        raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
    wanted = {"guess": Guess, "give": Give, "flip": Flip, "cancel": Cancel}[kind]
    if not isinstance(action, wanted):
        raise IllegalAction("wrong_action", f"seat {seat} must {kind} now")
    if isinstance(action, Guess):
        event: Any = _guess(state, seat, action)
    elif isinstance(action, Give):
        _check_give(state, seat, action)
        event = Given(seat, action.to)
    elif isinstance(action, Flip):
        event = _flip(state)
    else:
        event = _cancel(state, seat, action)
    out = Emitter(state, fold or evolve)
    out.emit(event)
    _follow_ups(out)
    return out


def _guess(state: State, seat: int, action: Guess) -> Guessed:
    question, value = current_question(state)
    o = state.options
    allowed = allowed_guesses(question, o.suit_question)
    if action.guess not in allowed:
        raise IllegalAction(
            "bad_guess", f"the {question} question takes {', '.join(allowed)} (Round 1)"
        )
    card = state.shoe[state.dealt]
    right = answer(question, state.rows[seat], card, o.ace == "high", o.suit_question)
    return Guessed(seat, question, action.guess, card, action.guess == right, value)


def _check_give(state: State, seat: int, action: Give) -> None:
    value = state.pending[seat]
    if not action.to:
        raise IllegalAction("empty_give", "name at least one seat to give drinks to")
    seen: set[int] = set()
    for a in action.to:
        if not 0 <= a.seat < state.seats:
            raise IllegalAction("bad_seat", f"there is no seat {a.seat}")
        if a.seat == seat:
            raise IllegalAction("give_to_self", "drinks are given to other players only")
        if a.seat in seen:
            raise IllegalAction("duplicate_seat", f"seat {a.seat} is named twice")
        if a.drinks < 1:
            raise IllegalAction("bad_drinks", "each named seat gets at least one drink")
        seen.add(a.seat)
    total = sum(a.drinks for a in action.to)
    if total != value:
        raise IllegalAction("wrong_total", f"give exactly {value} drinks (named {total})")


def _flip(state: State) -> Turned:
    column, row, value = state_layout(state)[len(state.turned)]
    card = state.shoe[state.laid_at + len(state.turned)]
    matches = []
    for s, hand in enumerate(state.rows):
        n, drinks = match_drinks(hand, card, value, state.options.face_double)
        if n:
            matches.append(Match(s, n, drinks))
    return Turned(column, row, card, value, tuple(matches))


def _cancel(state: State, seat: int, action: Cancel) -> Cancelled:
    count = len(round2_entries(state))
    if len(set(action.entries)) != len(action.entries):
        raise IllegalAction("duplicate_entry", "an entry is named twice")
    for n in action.entries:
        if not 0 <= n < count:
            raise IllegalAction("bad_entry", f"round-2 drink entries are numbered 0 to {count - 1}")
    return Cancelled(seat, tuple(sorted(action.entries)))


def _follow_ups(out: Emitter) -> None:
    """Emit the automatic events the new state calls for (round 2 laid, poker, end)."""
    state = out.state
    if state.phase == "round1" and guesser(state) is None and not any(state.pending):
        state = out.emit(ColumnsLaid(len(state_layout(state))))
    if (
        state.phase == "round2"
        and len(state.turned) == len(state_layout(state))
        and not any(state.pending)
    ):
        if state.options.poker_cancel:
            state = out.emit(BestHand(*best_hands(state.rows)))
            if not round2_entries(state):
                state = out.emit(Finished())
        else:
            state = out.emit(Finished())
    if state.phase == "cancel" and set(state.decided) == set(state.best):
        out.emit(Finished())


# -- evolve: the event fold ------------------------------------------------------------------


def _replace(items: tuple, index: int, value: Any) -> tuple:
    return items[:index] + (value,) + items[index + 1 :]


def evolve(state: State, event: Any) -> State:
    """Apply one event to the state (pure; every random outcome is in the event)."""
    if isinstance(event, ShoeShuffled):
        n = state.seats
        return replace(
            state,
            phase="round1",
            shoe=event.cards or (),
            rows=((),) * n,
            guesses=((),) * n,
            results=((),) * n,
            pending=(0,) * n,
        )
    if isinstance(event, Guessed):
        s = event.seat
        pending, entries = state.pending, state.entries
        if event.correct:
            pending = _replace(pending, s, pending[s] + event.drinks)
        else:
            entries += (Entry(1, s, event.drinks),)
        return replace(
            state,
            rows=_replace(state.rows, s, state.rows[s] + (event.card,)),
            guesses=_replace(state.guesses, s, state.guesses[s] + (event.guess,)),
            results=_replace(state.results, s, state.results[s] + (event.correct,)),
            dealt=state.dealt + 1,
            turn=state.turn + 1,
            pending=pending,
            entries=entries,
        )
    if isinstance(event, Given):
        rnd = 1 if state.phase == "round1" else 2
        new = tuple(Entry(rnd, a.seat, a.drinks, event.seat) for a in event.to)
        return replace(
            state,
            pending=_replace(state.pending, event.seat, 0),
            entries=state.entries + new,
        )
    if isinstance(event, ColumnsLaid):
        return replace(state, phase="round2", laid_at=state.dealt, dealt=state.dealt + event.cards)
    if isinstance(event, Turned):
        pending, entries = state.pending, state.entries
        for m in event.matches:
            if event.column == "take":
                entries += (Entry(2, m.seat, m.drinks),)
            else:
                pending = _replace(pending, m.seat, pending[m.seat] + m.drinks)
        return replace(state, turned=state.turned + (event.card,), pending=pending, entries=entries)
    if isinstance(event, BestHand):
        return replace(state, phase="cancel", best=event.seats, best_hand=event.hand)
    if isinstance(event, Cancelled):
        offset = sum(1 for e in state.entries if e.round == 1)
        gone = {offset + n for n in event.entries}
        entries = tuple(
            replace(e, cancelled=True) if i in gone else e for i, e in enumerate(state.entries)
        )
        return replace(state, decided=state.decided + (event.seat,), entries=entries)
    if isinstance(event, Finished):
        return replace(state, phase="over")
    raise TypeError(f"not an around-the-world event: {event!r}")
