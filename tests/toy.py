"""A tiny game for host tests (and the README's plugin example): High Card.

Each seat is dealt one hidden card; in turn each seat may ``keep`` it or ``swap`` it for the top
stock card once; then all cards are shown and the highest rank wins (ties share).
"""

from __future__ import annotations

from typing import Literal

import attrs

from host.game import GameInfo, IllegalAction, Rng, Viewer, hookimpl
from plugins import cards


@attrs.frozen
class Options:
    rounds: Literal[1, 2] = attrs.field(default=1, metadata={"doc": "turns per seat"})


@attrs.frozen
class Keep:
    pass


@attrs.frozen
class Swap:
    pass


@attrs.frozen
class Dealt:
    hands: tuple[str | None, ...]
    stock: tuple[str, ...] | None


@attrs.frozen
class Swapped:
    seat: int
    card: str | None


@attrs.frozen
class Kept:
    seat: int


@attrs.frozen
class State:
    options: Options
    seats: int
    hands: tuple[str, ...] = ()
    stock: tuple[str, ...] = ()
    turn: int = 0


class HighCard:
    info = GameInfo(
        id="high-card",
        title="High Card",
        version="1",
        min_seats=2,
        max_seats=6,
        options=Options,
        action_types=(Keep, Swap),
        event_types=(Dealt, Swapped, Kept),
    )

    def initial_state(self, options: Options, seats: int) -> State:
        return State(options, seats)

    def start(self, state: State, rng: Rng) -> list:
        shoe = cards.shuffled_shoe(rng)
        return [Dealt(tuple(shoe[: state.seats]), tuple(shoe[state.seats :]))]

    def to_act(self, state: State) -> tuple[int, ...]:
        if not state.hands or state.turn >= state.seats * state.options.rounds:
            return ()
        return (state.turn % state.seats,)

    def legal_actions(self, state: State, seat: int) -> list:
        return [Keep(), Swap()] if seat in self.to_act(state) else []

    def decide(self, state: State, seat: int, action, rng: Rng) -> list:
        if seat not in self.to_act(state):
            raise IllegalAction("not_your_turn", "wait for your turn")
        if isinstance(action, Swap):
            return [Swapped(seat, state.stock[0])]
        return [Kept(seat)]

    def evolve(self, state: State, event) -> State:
        if isinstance(event, Dealt):
            return attrs.evolve(state, hands=event.hands, stock=event.stock)
        if isinstance(event, Swapped):
            hands = list(state.hands)
            hands[event.seat] = event.card
            return attrs.evolve(
                state, hands=tuple(hands), stock=state.stock[1:], turn=state.turn + 1
            )
        return attrs.evolve(state, turn=state.turn + 1)

    def view(self, state: State, viewer: Viewer) -> dict:
        over = self.outcome(state) is not None
        return {
            "hands": [c if over or i == viewer else None for i, c in enumerate(state.hands)],
            "stock": len(state.stock),
            "turn": state.turn,
        }

    def redact(self, event, viewer: Viewer):
        if isinstance(event, Dealt):
            return Dealt(tuple(c if i == viewer else None for i, c in enumerate(event.hands)), None)
        if isinstance(event, Swapped) and event.seat != viewer:
            return Swapped(event.seat, None)
        return event

    def outcome(self, state: State) -> dict | None:
        if not state.hands or state.turn < state.seats * state.options.rounds:
            return None
        best = max(cards.rank_index(c) for c in state.hands)
        return {
            "hands": list(state.hands),
            "winners": [i for i, c in enumerate(state.hands) if cards.rank_index(c) == best],
        }


class Plugin:
    @hookimpl
    def gamehost_register_games(self) -> list:
        return [HighCard()]
