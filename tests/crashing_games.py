"""Games that take the whole host process down, for tests that run a real ``gamehost serve``
(``--plugin tests.crashing_games``): the toy game (``tests.toy.HighCard``) whose bot, on its
first move, kills the process (``os._exit``) or hangs in one call into C that no interruption
reaches.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from host.game import Rng, hookimpl
from tests.toy import HighCard, State


class BotExits(HighCard):
    """The bot's move ends the host process at once (``os._exit(7)``), as a crash in C would."""

    info = attrs.evolve(HighCard.info, id="bot-exits", title="Bot exits")

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        os._exit(7)


class BotHangsInC(HighCard):
    """The bot's move is one call into C that runs for ages (``sum`` over a huge ``range``
    never looks at signals)."""

    info = attrs.evolve(HighCard.info, id="bot-hangs-in-c", title="Bot hangs in C")

    def bot_action(self, state: State, seat: int, rng: Rng) -> Any:
        sum(range(10**15))
        return self.legal_actions(state, seat)[0]


ARM = "GAMEHOST_TEST_ARM"
"""The environment variable naming a file: while it exists, :class:`DecideHangsWhenArmed`
hangs."""


class DecideHangsWhenArmed(HighCard):
    """``decide`` hangs in C while the file named by :data:`ARM` exists, for any action — so
    folding the log again (which re-runs its last action's ``decide``) would hang too."""

    info = attrs.evolve(HighCard.info, id="decide-hangs-when-armed", title="Decide hangs")

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        if os.path.exists(os.environ.get(ARM, "/nonexistent")):
            sum(range(10**15))
        return super().decide(state, seat, action, rng)


@hookimpl
def gamehost_register_games() -> list[Any]:
    return [BotExits(), BotHangsInC(), DecideHangsWhenArmed()]
