"""Deliberately broken games for ``gamehost bench --stall``: load them into a host with
``gamehost serve --plugin tools.stall_games``. Never install them for players.

- ``stall-loop``: Crazy Eights whose host bot loops for ever on its first move;
- ``stall-hog``: Crazy Eights whose host bot allocates memory without bound on its first move.

Both stand for a third-party game gone wrong; the host's budget for game code
(``serve --game-time``, ``--game-memory``) must stop them and end their sessions
(``aborted: "game_error"``) while every other table plays on.
"""

from __future__ import annotations

from typing import Any

import attrs

from host.game import Rng, hookimpl
from plugins.crazy_eights import CrazyEights

__all__ = ["Hog", "Loop", "gamehost_register_games"]


class Loop(CrazyEights):
    """Crazy Eights whose bot never answers."""

    info = attrs.evolve(CrazyEights.info, id="stall-loop", title="Stall: a bot that loops")

    def bot_action(self, state: Any, seat: int, rng: Rng) -> Any:
        n = 0
        while True:
            n += 1


class Hog(CrazyEights):
    """Crazy Eights whose bot eats memory."""

    info = attrs.evolve(CrazyEights.info, id="stall-hog", title="Stall: a bot that hoards")

    def bot_action(self, state: Any, seat: int, rng: Rng) -> Any:
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))


@hookimpl
def gamehost_register_games() -> list[Any]:
    """The two broken games."""
    return [Loop(), Hog()]
