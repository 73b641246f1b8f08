"""Around the World: options, actions, events and state (frozen attrs classes) and the drink
ledger (:func:`ledger`); the event fold, ``evolve``, is in :mod:`plugins.around_the_world.rules`.

Wire forms (``type`` is the snake_case class name):

Actions
    ``guess``  ``{"guess": "red"}`` — round 1, the seat to be dealt names its answer.
    ``give``   ``{"to": [{"seat": 2, "drinks": 3}, ...]}`` — assigns a pending give: one or more
               *other* seats, each at most once, each ``drinks >= 1``, summing exactly to it.
    ``flip``   ``{}`` — round 2, the dealer (seat 0) turns the next face-down card.
    ``cancel`` ``{"entries": [0, 4]}`` — ``poker_cancel``: a best-hand holder names the round-2
               drink entries it cancels by number, 0-based in booking order (the index in the
               view's ``round2_entries``); ``[]`` keeps them all.

Events
    ``shoe_shuffled``  ``decks``, ``size`` and ``cards`` (the whole shuffled shoe, top first;
                       redacted to ``null`` for every viewer: only the raw log holds it)
    ``guessed``        ``seat``, ``question``, ``guess``, ``card`` (dealt face up), ``correct``,
                       ``drinks`` (taken when wrong, to give when right)
    ``given``          ``seat``, ``to`` (the assignment)
    ``columns_laid``   ``cards`` — how many face-down round-2 cards were laid
    ``turned``         ``column`` (take/give), ``row`` (1-4, 5 = end cards), ``card``, ``value``,
                       ``matches`` (per matching seat: cards matched and drinks)
    ``best_hand``      ``seats`` holding the best poker hand, ``hand`` its name
    ``cancelled``      ``seat``, ``entries`` (round-2 drink-entry numbers it cancelled)
    ``finished``       the game is over; the outcome is the ledger
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

# -- options ----------------------------------------------------------------------------------


@attrs.frozen
class Options:
    """The options of ``around-the-world`` (rule spec sections in each doc)."""

    decks: int | Literal["auto"] = attrs.field(
        default="auto",
        metadata={
            "doc": "52-card decks in the shoe; auto = the fewest that deal every card of both "
            "rounds without replacement (4 per player + 8, +1 per player with the fifth "
            "question, +2 with end cards); an explicit number below that is refused (Setup 1)"
        },
    )
    ace: Literal["high", "low"] = attrs.field(
        default="high",
        metadata={"doc": "round-1 ace order: high (2 < ... < K < A) or low (A < 2 ...) (Setup 2)"},
    )
    suit_question: Literal["exact", "same_or_different"] = attrs.field(
        default="exact",
        metadata={
            "doc": "last question: name the suit (exact) or whether it is among the row's "
            "earlier suits (same_or_different) (Round 1, 4)"
        },
    )
    fifth_question: bool = attrs.field(
        default=False,
        metadata={"doc": "ask odd/even/face before the suit question (Round 1)"},
    )
    poker_cancel: bool = attrs.field(
        default=False,
        metadata={
            "doc": "with fifth_question: after round 2 the best five-card poker hand(s) may "
            "cancel any round-2 drinks (Round 1, fifth question)"
        },
    )
    round1_values: Literal["flat", "escalating"] = attrs.field(
        default="flat",
        metadata={
            "doc": "round-1 drinks per question: flat 1, or escalating (the row values in "
            "asking order; a fifth question takes the next term: 16 / 5 / 32)"
        },
    )
    row_values: Literal["doubling", "linear", "beer"] = attrs.field(
        default="doubling",
        metadata={
            "doc": "round-2 row values: doubling 1,2,4,8; linear 1,2,3,4; beer 1,2,8,16 (Round 2)"
        },
    )
    face_double: bool = attrs.field(
        default=False,
        metadata={"doc": "a matched turned J, Q or K counts double in round 2 (Round 2, 4)"},
    )
    end_cards: bool = attrs.field(
        default=False,
        metadata={"doc": "a take and a give end card, turned last, 12 drinks each (Round 2, 4)"},
    )
    flip_order: Literal["take_first", "give_first"] = attrs.field(
        default="take_first",
        metadata={"doc": "which card of each row is turned first (Round 2, 2)"},
    )


# -- actions ----------------------------------------------------------------------------------


@attrs.frozen
class Assignment:
    """``drinks`` (>= 1) for ``seat``: one line of a give, a drink entry, or a match."""

    seat: int
    drinks: int


@attrs.frozen
class Guess:
    """Round 1: the answer to the current question (see ``allowed_guesses``)."""

    guess: str


@attrs.frozen
class Give:
    """Assign a pending give: other seats, each once, drinks >= 1, summing to the value."""

    to: tuple[Assignment, ...]


@attrs.frozen
class Flip:
    """Round 2: the dealer turns the next face-down card."""


@attrs.frozen
class Cancel:
    """``poker_cancel``: cancel these round-2 drink entries (by number; empty keeps all)."""

    entries: tuple[int, ...] = ()


# -- events -----------------------------------------------------------------------------------


@attrs.frozen
class ShoeShuffled:
    """The shoe, shuffled; ``cards`` is hidden from every viewer (only the log holds it)."""

    decks: int
    size: int
    cards: tuple[str, ...] | None = attrs.field(metadata={"hidden": "everyone"})


@attrs.frozen
class Guessed:
    """A round-1 guess and the card then dealt face up onto the guesser's row."""

    seat: int
    question: str
    guess: str
    card: str
    correct: bool
    drinks: int


@attrs.frozen
class Given:
    """A give assigned: ``seat`` hands out drinks to the seats in ``to``."""

    seat: int
    to: tuple[Assignment, ...]


@attrs.frozen
class ColumnsLaid:
    """Round 2 begins: ``cards`` face-down cards laid in the take and give columns."""

    cards: int


@attrs.frozen
class Match:
    """A seat's matches for a turned card: ``cards`` of its row matched, worth ``drinks``."""

    seat: int
    cards: int
    drinks: int


@attrs.frozen
class Turned:
    """A round-2 card turned face up; takes are booked, gives become pending."""

    column: Literal["take", "give"]
    row: int
    card: str
    value: int
    matches: tuple[Match, ...]


@attrs.frozen
class BestHand:
    """``poker_cancel``: the seats holding the best five-card hand (ties share) and its name."""

    seats: tuple[int, ...]
    hand: str


@attrs.frozen
class Cancelled:
    """A best-hand holder's cancel decision (entry numbers; empty = keeps all)."""

    seat: int
    entries: tuple[int, ...]


@attrs.frozen
class Finished:
    """The game is over."""


# -- state ------------------------------------------------------------------------------------


@attrs.frozen
class Entry:
    """One line of the drink ledger.

    Attributes:
        round: 1 or 2.
        seat: who drinks.
        drinks: how many (>= 1).
        giver: the seat that gave them, or ``None`` for a take (wrong guess, take card).
        cancelled: cancelled by a best-hand holder (``poker_cancel``).
    """

    round: int
    seat: int
    drinks: int
    giver: int | None = None
    cancelled: bool = False


@attrs.frozen
class State:
    """The whole game state (the shoe order inside is secret: ``view`` never shows it).

    Attributes:
        phase: ``deal`` (before start), ``round1``, ``round2``, ``cancel``, ``over``.
        shoe: the shuffled shoe, top first; ``dealt`` cards of it are used.
        rows: each seat's face-up row.
        guesses: each seat's guesses so far, with ``results`` (right or wrong) beside them.
        turn: round-1 guesses made so far.
        pending: drinks each seat still has to give (0 = none).
        laid_at: the shoe index of the first face-down round-2 card (-1 before round 2).
        turned: round-2 cards turned so far, in flip order.
        entries: the drink ledger, in order of booking.
        best, best_hand: ``poker_cancel`` holders of the best hand and its name.
        decided: best-hand holders who have sent their cancel decision.
    """

    options: Options
    seats: int
    decks: int
    phase: str = "deal"
    shoe: tuple[str, ...] = ()
    dealt: int = 0
    rows: tuple[tuple[str, ...], ...] = ()
    guesses: tuple[tuple[str, ...], ...] = ()
    results: tuple[tuple[bool, ...], ...] = ()
    turn: int = 0
    pending: tuple[int, ...] = ()
    laid_at: int = -1
    turned: tuple[str, ...] = ()
    entries: tuple[Entry, ...] = ()
    best: tuple[int, ...] = ()
    best_hand: str = ""
    decided: tuple[int, ...] = ()


def ledger(state: State) -> list[dict[str, Any]]:
    """Per seat ``{"seat", "round1", "round2", "total"}``; each ``{"taken", "given", "cancelled"}``.

    ``taken`` counts drinks the seat drinks (its own takes and drinks given to it), ``given``
    the drinks it assigned to others; cancelled entries count only as ``cancelled`` (for the seat
    that would have drunk them).
    """
    book = [
        {r: {"taken": 0, "given": 0, "cancelled": 0} for r in ("round1", "round2", "total")}
        for _ in range(state.seats)
    ]
    for e in state.entries:
        for key in (f"round{e.round}", "total"):
            if e.cancelled:
                book[e.seat][key]["cancelled"] += e.drinks
                continue
            book[e.seat][key]["taken"] += e.drinks
            if e.giver is not None:
                book[e.giver][key]["given"] += e.drinks
    return [{"seat": i, **b} for i, b in enumerate(book)]


# -- the view's wire shape (what ``AroundTheWorld.view`` returns; published as JSON Schema) ----


@attrs.frozen
class ViewShoe:
    """The shoe: ``decks``, ``size`` (cards) and ``left`` (not dealt yet); never its order."""

    decks: int
    size: int
    left: int


@attrs.frozen
class ViewQuestion:
    """The round-1 question awaiting ``seat``'s guess: its ``drinks`` and ``pass`` (from 1)."""

    seat: int
    question: str
    drinks: int
    pass_: int = attrs.field(metadata={"wire_name": "pass"})  # a Python keyword


@attrs.frozen
class ViewGuess:
    """One round-1 guess of a row: the question, the answer and whether it was right."""

    question: str
    guess: str
    correct: bool


@attrs.frozen
class ViewRow:
    """A seat's face-up row and its round-1 guesses, in order."""

    seat: int
    cards: tuple[str, ...]
    guesses: tuple[ViewGuess, ...]


@attrs.frozen
class ViewColumn:
    """A round-2 card place: ``column``, ``row`` (5 = end card), ``value``; ``card`` null
    while face down."""

    column: Literal["take", "give"]
    row: int
    value: int
    card: str | None


@attrs.frozen
class Tally:
    """One seat's drinks: ``taken`` (its own takes and drinks given to it), ``given`` (assigned
    to others) and ``cancelled`` (entries it would have drunk, cancelled)."""

    taken: int
    given: int
    cancelled: int


@attrs.frozen
class LedgerLine:
    """One seat's line of the drink ledger."""

    seat: int
    round1: Tally
    round2: Tally
    total: Tally


@attrs.frozen
class ViewBest:
    """``poker_cancel``: the best-hand holders, the hand's name, who has decided."""

    seats: tuple[int, ...]
    hand: str
    decided: tuple[int, ...]


@attrs.frozen
class View:
    """The table as one viewer sees it (everyone sees the same but ``you``)."""

    phase: Literal["deal", "round1", "round2", "cancel", "over"]
    you: int | None
    dealer: int
    options: Options
    shoe: ViewShoe
    question: ViewQuestion | None
    rows: tuple[ViewRow, ...]
    columns: tuple[ViewColumn, ...]
    pending: tuple[Assignment, ...]
    round2_entries: tuple[tuple[int, int, int | None, bool], ...]
    ledger: tuple[LedgerLine, ...]
    best: ViewBest | None


@attrs.frozen
class OutcomeBest:
    """``poker_cancel``: the best-hand holders and the hand's name."""

    seats: tuple[int, ...]
    hand: str


@attrs.frozen
class Outcome:
    """The drink ledger at the end: the outcome of a session the game ended."""

    ledger: tuple[LedgerLine, ...]
    totals: Tally
    best: OutcomeBest | None
