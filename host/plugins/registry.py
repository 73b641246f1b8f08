"""The plugin registry: pluggy, booted like tox.

``PluginManager("gamehost")`` -> ``add_hookspecs`` -> ``load_setuptools_entrypoints("gamehost")``
-> ``check_pending()``; then every plugin's ``gamehost_register_games`` is collected. The host
never names a game: the built-in games come through the same entry-point group as anyone's.

Plugins are third-party code: each plugin's ``gamehost_register_games`` is called on its own, and
each game it offers is checked (:func:`check_game`) before the host serves it. A plugin that
raises there, or a game that fails the check, is logged (``plugin_failed``, ``game_refused``),
listed in :attr:`Registry.refused` and left out; the host serves the other games. Two games
with the same id still stop the boot (:class:`DuplicateGame`): neither can be trusted to be the
one the logs were written by.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import pluggy
import structlog

from host.game import Game, GameInfo, tag_of
from host.plugins import hookspecs
from host.plugins.codec import GameCodec, make_converter
from host.table.engine import Engine

__all__ = ["BadGame", "DuplicateGame", "Registry", "check_game", "load_registry"]

log = structlog.get_logger("gamehost.registry")


class DuplicateGame(ValueError):
    """Two plugins registered games with the same id."""


GAME_METHODS = (
    "initial_state",
    "start",
    "decide",
    "evolve",
    "to_act",
    "legal_actions",
    "view",
    "redact",
    "outcome",
)
"""The members of :class:`host.game.Game` besides ``info``."""


class BadGame(ValueError):
    """A game object the host cannot serve (see :func:`check_game`)."""


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def check_game(game: Any) -> None:
    """Check what the host relies on before any session of ``game`` exists.

    ``info`` is a :class:`GameInfo` with a non-empty string id and ``1 <= min_seats <=
    max_seats``; every member of :class:`host.game.Game` is there; the options, action and
    event classes (and the view and outcome types, if any) are attrs classes; no two action
    classes (or two event classes) share a ``type`` tag, since the codec could then read only
    one of them back.

    Raises:
        BadGame: naming the first thing wrong.
    """
    info = getattr(game, "info", None)
    if not isinstance(info, GameInfo):
        raise BadGame(f"{game!r}: info is not a GameInfo")
    if not isinstance(info.id, str) or not info.id:
        raise BadGame(f"{game!r}: the game id must be a non-empty string")
    missing = [m for m in GAME_METHODS if not callable(getattr(game, m, None))]
    if missing:
        raise BadGame(f"{info.id}: not a game; no {', '.join(missing)}")
    seats_ok = all(type(n) is int for n in (info.min_seats, info.max_seats))
    if not seats_ok or not 1 <= info.min_seats <= info.max_seats:
        raise BadGame(f"{info.id}: bad seat range {info.min_seats!r}..{info.max_seats!r}")
    if not attrs.has(info.options):
        raise BadGame(f"{info.id}: the options class is not an attrs class")
    for what, shape in (("view", info.view_type), ("outcome", info.outcome_type)):
        if shape is not None and not (isinstance(shape, type) and attrs.has(shape)):
            raise BadGame(f"{info.id}: the {what} type {shape!r} is not an attrs class")
    for kind, classes in (("action", info.action_types), ("event", info.event_types)):
        tags: dict[str, type] = {}
        for cls in classes:
            if not isinstance(cls, type) or not attrs.has(cls):
                raise BadGame(f"{info.id}: the {kind} type {cls!r} is not an attrs class")
            tag = tag_of(cls)
            if tag in tags:
                raise BadGame(
                    f"{info.id}: the {kind} classes {_name(tags[tag])} and {_name(cls)}"
                    f" share the type tag {tag!r}"
                )
            tags[tag] = cls


class Registry:
    """The loaded plugins and their games.

    Args:
        pm: a plugin manager with the host's hookspecs and the plugins registered.

    Attributes:
        games, engines: by game id.
        refused: ``(plugin name, reason)`` for each plugin or game left out (see the module
            docstring).

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
        self.refused: list[tuple[str, str]] = []
        for impl in reversed(pm.hook.gamehost_register_games.get_hookimpls()):
            if impl.hookwrapper or impl.wrapper:
                continue
            try:
                games = list(impl.function())
            except Exception as exc:
                log.exception("plugin_failed", plugin=impl.plugin_name)
                self.refused.append((impl.plugin_name, f"{type(exc).__name__}: {exc}"))
                continue
            for game in games:
                try:
                    check_game(game)
                    engine = Engine(game, GameCodec(game, conv))
                except Exception as exc:
                    log.exception("game_refused", plugin=impl.plugin_name, game=repr(game))
                    self.refused.append((impl.plugin_name, f"{type(exc).__name__}: {exc}"))
                    continue
                gid = game.info.id
                if gid in self.games:
                    raise DuplicateGame(f"game id {gid!r} is registered twice")
                self.games[gid] = game
                self.engines[gid] = engine

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


class PluginError(ValueError):
    """A ``--plugin`` module cannot be used; the message says why, in one sentence."""


def registry_with(modules: Sequence[str]) -> Registry:
    """The installed games and those of the importable ``modules`` (``--plugin``): a module of
    the current folder loads, as with ``python -m``.

    Raises:
        PluginError: a module does not import, registers no game (no ``@hookimpl``
            ``gamehost_register_games``), adds a game id that is installed already, is loaded
            twice, or implements a hook the host does not know.
    """
    if modules and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        plugins = [(name, importlib.import_module(name)) for name in modules]
    except ImportError as exc:
        raise PluginError(str(exc)) from exc
    try:
        registry = load_registry(plugins)
    except DuplicateGame as exc:
        raise PluginError(
            f"{exc} (a --plugin may not add a game whose id is installed already)"
        ) from exc
    except (ValueError, pluggy.PluginValidationError) as exc:
        text = " ".join(str(exc).split())
        if "already registered" in text:
            text = "a plugin module is loaded twice (it is installed already, or named twice)"
        raise PluginError(text or type(exc).__name__) from exc
    hooked = {impl.plugin_name for impl in registry.pm.hook.gamehost_register_games.get_hookimpls()}
    for name, _ in plugins:
        if name not in hooked:  # a forgotten @hookimpl would start without the game
            raise PluginError(
                f"{name} registers no games (it needs a gamehost_register_games function"
                " marked @hookimpl; see PLUGINS.md)"
            )
    return registry
