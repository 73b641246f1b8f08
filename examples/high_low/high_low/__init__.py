"""High-Low (game id ``high-low``): the example game of PLUGINS.md, a package of its own.

The files follow the built-in games' skeleton: the plugin object and its registration here,
:mod:`high_low.model` (options, actions, events, state), :mod:`high_low.rules` (``decide``,
``evolve``, legal actions), :mod:`high_low.view` (``view``, ``redact``) and
:mod:`high_low.text` (``render``, ``describe``, ``describe_event``, ``describe_outcome``).

Actions: ``{"type": "guess", "call": "higher" | "lower"}``. Events: ``shuffled`` (the deck,
redacted for everyone), ``turned``, ``guessed``, ``game_over``. Outcome: ``{"scores",
"winners"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from host.game import GameInfo, Rng, Viewer, hookimpl

from . import rules, text
from . import view as views
from .model import GameOver, Guess, Guessed, Options, Outcome, Shuffled, State, Turned, View

__all__ = ["HighLow", "gamehost_register_games"]


class HighLow:
    """The High-Low game object: what the host calls (see :mod:`host.game`)."""

    info = GameInfo(
        id="high-low",
        title="High-Low",
        version="1",
        min_seats=2,
        max_seats=6,
        options=Options,
        action_types=(Guess,),
        event_types=(Shuffled, Turned, Guessed, GameOver),
        description="Call the next card higher or lower than the face-up one; most right wins.",
        view_type=View,  # the published contract (gamehost schema --game high-low)
        outcome_type=Outcome,
    )

    def check_options(self, options: Options, seats: int) -> None:
        rules.check_options(options, seats)

    def initial_state(self, options: Options, seats: int) -> State:
        return State(options, seats)

    def start(self, state: State, rng: Rng) -> list[Any]:
        return rules.start(state, rng, self.evolve)

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list[Any]:
        return rules.decide(state, seat, action, rng, self.evolve)

    def evolve(self, state: State, event: Any) -> State:
        return rules.evolve(state, event)

    def to_act(self, state: State) -> tuple[int, ...]:
        return rules.to_act(state)

    def legal_actions(self, state: State, seat: int) -> list[Any]:
        return rules.legal_actions(state, seat)

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        """Bots see the whole state, the deck too: this one does not peek, it calls the odds."""
        low = state.face_up is not None and state.face_up[:-1] in ("2", "3", "4", "5", "6", "7")
        return Guess("higher" if low else "lower")

    def view(self, state: State, viewer: Viewer) -> dict[str, Any]:
        return views.view(state, viewer)

    def redact(self, event: Any, viewer: Viewer) -> Any:
        return views.redact(event, viewer)

    def outcome(self, state: State) -> dict[str, Any] | None:
        if state.winners is None:
            return None
        return {"scores": list(state.scores), "winners": list(state.winners)}

    def render(self, view: dict[str, Any], viewer: Viewer) -> str:
        return text.render(view, viewer)

    def describe(self, action: dict[str, Any]) -> str:
        return text.describe(action)

    def describe_event(self, event: dict[str, Any], viewer: Viewer, names: Sequence[str]) -> str:
        return text.describe_event(event, viewer, names)

    def describe_outcome(self, outcome: dict[str, Any], names: Sequence[str]) -> str:
        return text.describe_outcome(outcome, names)


@hookimpl
def gamehost_register_games() -> list[Any]:
    """The plugin hook the host calls once: this package offers one game."""
    return [HighLow()]
