"""High-Low values: options, actions, events and the state (frozen attrs classes).

Cards are wire strings as in :mod:`plugins.cards` (``"10H"``); seats are ints.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class Options:
    """The ``create`` options; every field has a default, ``metadata["doc"]`` shows in ``games``."""

    rounds: int = attrs.field(default=8, metadata={"doc": "guesses per seat, 1 to 8"})


# -- actions: what a seat sends ---------------------------------------------------------------


@attrs.frozen
class Guess:
    """The seat to act calls the next card ``higher`` or ``lower`` than the face-up one."""

    call: Literal["higher", "lower"]


# -- events: what happened (the log holds them; replay folds them) ----------------------------


@attrs.frozen
class Shuffled:
    """The deck, top first. Secret: redacted to ``None`` for every viewer."""

    cards: tuple[str, ...] | None = attrs.field(metadata={"hidden": "everyone"})


@attrs.frozen
class Turned:
    """The deck's top card is turned face up (public)."""

    card: str


@attrs.frozen
class Guessed:
    """A guess and the card it was about (turned face up by it, public)."""

    seat: int
    call: str
    card: str
    correct: bool


@attrs.frozen
class GameOver:
    """The last guess is made: who scored the most (a follow-on event of that guess)."""

    winners: tuple[int, ...]


@attrs.frozen
class State:
    """The table.

    Attributes:
        deck: the cards not yet turned, top first (secret).
        face_up: the card to guess against (``None`` before the first turn).
        guesses: guesses made so far; the seat to act is ``guesses % seats``.
        scores: correct guesses per seat.
        last: the last :class:`Guessed`, for the view.
        winners: set by :class:`GameOver`; ``None`` while the game runs.
    """

    options: Options
    seats: int
    deck: tuple[str, ...] = ()
    face_up: str | None = None
    guesses: int = 0
    scores: tuple[int, ...] = ()
    last: Guessed | None = None
    winners: tuple[int, ...] | None = None


# -- the published shapes of the view and the outcome (gamehost schema, GameInfo.view_type) --


@attrs.frozen
class LastGuess:
    """The last guess in a view: who called what, the card, whether it was right."""

    seat: int
    call: str
    card: str
    correct: bool


@attrs.frozen
class View:
    """What :func:`high_low.view.view` returns, the same for every viewer (nothing is private)."""

    face_up: str | None
    deck_left: int
    scores: tuple[int, ...]
    turn: int | None
    guesses: int
    rounds: int
    last: LastGuess | None
    winners: tuple[int, ...] | None


@attrs.frozen
class Outcome:
    """What the ``ended`` push carries: points per seat and the seats with the most."""

    scores: tuple[int, ...]
    winners: tuple[int, ...]
