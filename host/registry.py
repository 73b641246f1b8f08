"""The plugin registry: pluggy, booted like tox.

``PluginManager("gamehost")`` -> ``add_hookspecs`` -> ``load_setuptools_entrypoints("gamehost")``
-> ``check_pending()``; then every plugin's ``gamehost_register_games`` is collected. The host
never names a game: the built-in games come through the same entry-point group as anyone's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pluggy

from host import hookspecs
from host.codec import GameCodec, make_converter
from host.engine import Engine
from host.game import Game

__all__ = ["DuplicateGame", "Registry", "load_registry"]


class DuplicateGame(ValueError):
    """Two plugins registered games with the same id."""


class Registry:
    """The loaded plugins and their games.

    Args:
        pm: a plugin manager with the host's hookspecs and the plugins registered.

    Raises:
        DuplicateGame: two games share an id.
        pluggy.PluginValidationError: a plugin implements a hook the host does not know.
    """

    def __init__(self, pm: pluggy.PluginManager) -> None:
        pm.check_pending()
        self.pm = pm
        self.hook = pm.hook
        conv = make_converter()
        self.games: dict[str, Game] = {}
        self.engines: dict[str, Engine] = {}
        for games in pm.hook.gamehost_register_games():
            for game in games:
                gid = game.info.id
                if gid in self.games:
                    raise DuplicateGame(f"game id {gid!r} is registered twice")
                self.games[gid] = game
                self.engines[gid] = Engine(game, GameCodec(game, conv))

    def describe(self) -> list[dict[str, Any]]:
        """The ``games`` listing: id, title, version, seat range, description, options schema."""
        out = []
        for gid in sorted(self.games):
            info = self.games[gid].info
            out.append(
                {
                    "id": gid,
                    "title": info.title,
                    "version": info.version,
                    "min_seats": info.min_seats,
                    "max_seats": info.max_seats,
                    "description": info.description,
                    "options": self.engines[gid].codec.options_schema(),
                }
            )
        return out


def plugin_manager(
    plugins: Iterable[tuple[str, Any]] = (), entrypoints: bool = True
) -> pluggy.PluginManager:
    """A fresh plugin manager with the host's hookspecs.

    Args:
        plugins: extra ``(name, plugin)`` pairs to register (tests register a test game this way).
        entrypoints: also load the ``gamehost`` entry-point group (the installed games).
    """
    pm = pluggy.PluginManager("gamehost")
    pm.add_hookspecs(hookspecs)
    if entrypoints:
        pm.load_setuptools_entrypoints("gamehost")
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    return pm


def load_registry(plugins: Iterable[tuple[str, Any]] = (), entrypoints: bool = True) -> Registry:
    """Boot the registry (see :func:`plugin_manager`)."""
    return Registry(plugin_manager(plugins, entrypoints))
