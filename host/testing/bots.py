"""Test bots for any game: wrap a game so host bots play differently from its own ``bot_action``.

Both wrappers delegate every other member to the wrapped game, so an
:class:`~host.table.engine.Engine` (or a host registry) can drive them like the game itself.
"""

from __future__ import annotations

from typing import Any

from host.game import Rng


class RandomLegal:
    """The game without ``bot_action``: host bots pick uniformly among ``legal_actions``.

    Args:
        game: the game to wrap.
    """

    bot_action = None

    def __init__(self, game: Any) -> None:
        self.info = game.info
        self._game = game

    def __getattr__(self, name: str) -> Any:
        return getattr(self._game, name)


class Mixed(RandomLegal):
    """Half uniform random legal actions, half the game's own bot: shorter sessions, the same
    coverage of odd moves."""

    def bot_action(self, state: Any, seat: int, rng: Rng) -> Any:  # type: ignore[override]
        if rng.below(2):
            return rng.choice(self._game.legal_actions(state, seat))
        return self._game.bot_action(state, seat, rng)
