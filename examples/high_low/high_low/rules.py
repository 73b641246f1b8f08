"""High-Low rules: ``decide``, ``evolve`` and the legal actions, as pure functions.

Each seat in turn calls the next card of the deck ``higher`` or ``lower`` than the face-up card;
a right call scores a point (an equal rank is wrong). The called card becomes the face-up card.
After ``rounds`` guesses per seat the most points win (ties share).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from host.game import NOT_YOUR_TURN, Emitter, IllegalAction, OptionError, Rng
from plugins import cards

from .model import GameOver, Guess, Guessed, Options, Shuffled, State, Turned

MAX_ROUNDS = 8
"""With 6 seats, 8 rounds use 48 guessed cards + 1 face-up card of the 52."""


def check_options(options: Options, seats: int) -> None:
    """Raises:
    OptionError: ``rounds`` is not an integer from 1 to :data:`MAX_ROUNDS`."""
    if type(options.rounds) is not int or not 1 <= options.rounds <= MAX_ROUNDS:
        raise OptionError("rounds", f"must be 1 to {MAX_ROUNDS}")


def start(state: State, rng: Rng, fold: Callable[[State, Any], State]) -> list[Any]:
    """Shuffle the deck (only the Rng may do that), then turn its top card."""
    out = Emitter(state, fold)
    after = out.emit(Shuffled(tuple(cards.shuffled_shoe(rng))))
    out.emit(Turned(after.deck[0]))
    return out


def to_act(state: State) -> tuple[int, ...]:
    """The one seat whose guess is awaited, or nobody once the game is over."""
    if state.face_up is None or state.winners is not None:
        return ()
    return (state.guesses % state.seats,)


def legal_actions(state: State, seat: int) -> list[Any]:
    """Both calls for the seat to act; nothing for the others."""
    return [Guess("higher"), Guess("lower")] if seat in to_act(state) else []


def decide(
    state: State, seat: int, action: Any, rng: Rng, fold: Callable[[State, Any], State]
) -> list[Any]:
    """The events of ``seat``'s ``action``: the guess, and ``game_over`` after the last one.

    Raises:
        IllegalAction: ``not_your_turn``; ``bad_call`` (neither higher nor lower).
    """
    if seat not in to_act(state):
        raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
    if not isinstance(action, Guess) or action.call not in ("higher", "lower"):
        raise IllegalAction("bad_call", "call higher or lower")
    card = state.deck[0]
    new, old = cards.rank_index(card), cards.rank_index(state.face_up or card)
    correct = new > old if action.call == "higher" else new < old
    out = Emitter(state, fold)
    after = out.emit(Guessed(seat, action.call, card, correct))
    if after.guesses == state.options.rounds * state.seats:  # a follow-on event
        best = max(after.scores)
        out.emit(GameOver(tuple(s for s, p in enumerate(after.scores) if p == best)))
    return out


def evolve(state: State, event: Any) -> State:
    """The state after one event. Pure: every random outcome is in the event."""
    if isinstance(event, Shuffled):
        return attrs.evolve(state, deck=event.cards or (), scores=(0,) * state.seats)
    if isinstance(event, Turned):
        return attrs.evolve(state, face_up=event.card, deck=state.deck[1:])
    if isinstance(event, Guessed):
        scores = list(state.scores)
        scores[event.seat] += event.correct
        return attrs.evolve(
            state,
            face_up=event.card,
            deck=state.deck[1:],
            guesses=state.guesses + 1,
            scores=tuple(scores),
            last=event,
        )
    if isinstance(event, GameOver):
        return attrs.evolve(state, winners=event.winners)
    raise TypeError(f"not a high-low event: {event!r}")
