"""A test game in two versions of its event schema: Draw, for the host's upcast tests.

Two seats take turns drawing one card each from a hidden stock, ``turns`` times each; the
higher sum of ranks wins (ties share). The rules never change between the versions; the shape
of one event does:

- :class:`DrawV1` (``event_version`` 1) writes a draw as ``{"type": "drew", "seat": 0,
  "card": "7H"}``;
- :class:`DrawV2` (``event_version`` 2) writes it as ``{"type": "drew", "seat": 0,
  "cards": ["7H"]}`` and its ``upcast`` reads the v1 shape.

Both have the same id and ``version`` (the rules are the same), so a host restarted on v2 code
goes on with a session begun on v1: its log then holds v1 and v2 events.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from host.game import GameInfo, IllegalAction, Rng, Viewer, hookimpl
from plugins import cards


@attrs.frozen
class Options:
    turns: Literal[2, 3] = attrs.field(default=3, metadata={"doc": "draws per seat"})


@attrs.frozen
class Draw:
    pass


@attrs.frozen
class Shuffled:
    stock: tuple[str, ...] | None


@attrs.frozen
class DrewV1:
    TAG = "drew"
    seat: int
    card: str | None


@attrs.frozen
class DrewV2:
    TAG = "drew"
    seat: int
    cards: tuple[str | None, ...]


@attrs.frozen
class State:
    options: Options
    stock: tuple[str, ...] = ()
    hands: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    turn: int = 0
    shuffled: bool = False


class DrawV1:
    """Draw, event schema v1: one card per ``drew`` event, as ``card``."""

    info = GameInfo(
        id="draw",
        title="Draw",
        version="1",
        min_seats=2,
        max_seats=2,
        options=Options,
        action_types=(Draw,),
        event_types=(Shuffled, DrewV1),
    )

    def _drew(self, seat: int, card: str) -> Any:
        return DrewV1(seat, card)

    def _drawn(self, event: Any) -> tuple[str, ...]:
        return (event.card,)

    def _hide(self, event: Any) -> Any:
        return DrewV1(event.seat, None)

    def initial_state(self, options: Options, seats: int) -> State:
        return State(options)

    def start(self, state: State, rng: Rng) -> list:
        return [Shuffled(tuple(cards.shuffled_shoe(rng)))]

    def to_act(self, state: State) -> tuple[int, ...]:
        if not state.shuffled or state.turn >= 2 * state.options.turns:
            return ()
        return (state.turn % 2,)

    def legal_actions(self, state: State, seat: int) -> list:
        return [Draw()] if seat in self.to_act(state) else []

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if seat not in self.to_act(state):
            raise IllegalAction("not_your_turn", "wait for your turn")
        return [self._drew(seat, state.stock[0])]

    def evolve(self, state: State, event: Any) -> State:
        if isinstance(event, Shuffled):
            return attrs.evolve(state, stock=event.stock, shuffled=True)
        drawn = self._drawn(event)
        hands = list(state.hands)
        hands[event.seat] = hands[event.seat] + drawn
        return attrs.evolve(
            state, stock=state.stock[len(drawn) :], hands=tuple(hands), turn=state.turn + 1
        )

    def view(self, state: State, viewer: Viewer) -> dict:
        over = self.outcome(state) is not None
        return {
            "hands": [
                list(h) if over or i == viewer else len(h) for i, h in enumerate(state.hands)
            ],
            "stock": len(state.stock),
            "turn": state.turn,
        }

    def redact(self, event: Any, viewer: Viewer) -> Any:
        if isinstance(event, Shuffled):
            return Shuffled(None)
        return event if event.seat == viewer else self._hide(event)

    def outcome(self, state: State) -> dict | None:
        if not state.shuffled or state.turn < 2 * state.options.turns:
            return None
        sums = [sum(cards.rank_index(c) for c in hand) for hand in state.hands]
        return {"sums": sums, "winners": [i for i, s in enumerate(sums) if s == max(sums)]}


class DrawV2(DrawV1):
    """Draw, event schema v2: a ``drew`` event holds a list, ``cards``; v1 events are upcast."""

    info = attrs.evolve(DrawV1.info, event_types=(Shuffled, DrewV2), event_version=2)

    def _drew(self, seat: int, card: str) -> Any:
        return DrewV2(seat, (card,))

    def _drawn(self, event: Any) -> tuple[str, ...]:
        return event.cards

    def _hide(self, event: Any) -> Any:
        return DrewV2(event.seat, tuple(None for _ in event.cards))

    def upcast(self, event: dict[str, Any], version: int) -> dict[str, Any]:
        if version == 1 and event.get("type") == "drew":
            rest = {k: v for k, v in event.items() if k != "card"}
            return {**rest, "cards": [event.get("card")]}
        return event


class PluginV1:
    @hookimpl
    def gamehost_register_games(self) -> list:
        return [DrawV1()]


class PluginV2:
    @hookimpl
    def gamehost_register_games(self) -> list:
        return [DrawV2()]
