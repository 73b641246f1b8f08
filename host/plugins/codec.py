"""How a game's actions, events, options, views and outcomes become JSON and back.

One cattrs converter (``cattrs.preconf.orjson``) per host, with strict scalar hooks (``"5"`` is not
an int, ``1`` is not a str) and ``forbid_extra_keys``; one :class:`GameCodec` per game on top of it
maps the ``type`` tag of each action and event (:func:`host.game.tag_of`) to its class.

Encoding is on the hot path (every event is written once and redacted once per viewer), so a
:class:`GameCodec` looks up each class's tag and cattrs hooks once and keeps them: no regex, no
type-hint reflection and no hook dispatch per value.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import cattrs

from host.errors import ActionError
from host.game import Game, OptionError, tag_of
from host.plugins.faults import GameFault, game_error
from protocol.convert import error_text, make_converter

__all__ = ["BadAction", "GameCodec", "make_converter"]


class BadAction(ActionError, ValueError):
    """An action object that does not have the shape of any of the game's actions (answered
    ``bad_action``; a ``ValueError`` too, as it always was)."""


MAX_ITEMS = 256
"""The most elements a list or object in a client's action or options may hold."""
MAX_DEPTH = 8
"""How deeply a client's action or options may nest."""
MAX_INT = 2**53
"""The largest integer magnitude a client may send (what every JSON reader holds exactly)."""


def check_size(value: Any, depth: int = 0) -> None:
    """Refuse client data too big or too deep to be an honest action or option, cheaply,
    before any structuring work is done.

    Raises:
        ValueError: naming the limit passed.
    """
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, dict | list):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"more than {MAX_ITEMS} items in one list or object")
        for item in value.values() if isinstance(value, dict) else value:
            check_size(item, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ValueError(f"an integer beyond +-2**53: {value}")


def admits(tp: Any, value: Any) -> bool:
    """Whether a JSON value fits a type hint without coercion (``true`` fits only ``bool``).

    Handles the hints games use: scalars, ``Literal``, unions, ``None``, ``tuple[...]``/lists;
    anything else (attrs classes, dicts) is left to the converter.
    """
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return any(same_json(value, choice) for choice in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return any(admits(arg, value) for arg in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp in (int, str, bool, float):
        return type(value) is tp
    if origin in (tuple, list):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if not isinstance(value, list):
            return False
        if len(args) == 1 or (origin is tuple and Ellipsis in typing.get_args(tp)):
            return all(admits(args[0], v) for v in value) if args else True
        return len(args) == len(value) and all(
            admits(a, v) for a, v in zip(args, value, strict=True)
        )
    return True


Check = Callable[[Any], bool]
_CHECKS: dict[Any, Check] = {}


def admitter(tp: Any) -> Check:
    """:func:`admits` for one type hint, worked out once: a function of the value alone that
    does no type reflection when called (the hot path of every client action). Remembered per
    hint.
    """
    try:
        found = _CHECKS.get(tp)
    except TypeError:  # an unhashable hint: work it out every time
        return _make_admitter(tp)
    if found is None:
        found = _CHECKS[tp] = _make_admitter(tp)
    return found


def _make_admitter(tp: Any) -> Check:  # noqa: C901 - one branch per kind of hint, as admits
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        return lambda value: any(same_json(value, choice) for choice in choices)
    if origin in (typing.Union, types.UnionType):
        alternatives = [admitter(arg) for arg in typing.get_args(tp)]
        return lambda value: any(check(value) for check in alternatives)
    if tp is type(None):
        return lambda value: value is None
    if tp in (int, str, bool, float):
        return lambda value: type(value) is tp
    if origin in (tuple, list):
        all_args = typing.get_args(tp)
        args = [a for a in all_args if a is not Ellipsis]
        if len(args) == 1 or (origin is tuple and Ellipsis in all_args):
            if not args:
                return lambda value: isinstance(value, list)
            item = admitter(args[0])
            return lambda value: isinstance(value, list) and all(item(v) for v in value)
        items = [admitter(a) for a in args]
        return lambda value: (
            isinstance(value, list)
            and len(items) == len(value)
            and all(check(v) for check, v in zip(items, value, strict=True))
        )
    return lambda value: True


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal *and* of the same JSON types (``true`` is not ``1``,
    ``1.0`` is not ``1``); tuples count as lists."""
    if isinstance(a, tuple):
        a = list(a)
    if isinstance(b, tuple):
        b = list(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return a == b


def _describe_type(tp: Any) -> tuple[str, list[Any] | None]:
    """A readable type and, when the values are a finite list, that list."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        vals = list(typing.get_args(tp))
        return " | ".join(repr(v) if isinstance(v, str) else str(v) for v in vals), vals
    if origin in (typing.Union, types.UnionType):
        parts = [_describe_type(a) for a in typing.get_args(tp)]
        text = " | ".join(p[0] for p in parts)
        if all(p[1] is not None for p in parts):
            return text, [v for p in parts for v in (p[1] or [])]
        return text, None
    if tp is bool:
        return "bool", [False, True]
    if tp is type(None):
        return "null", [None]
    return getattr(tp, "__name__", str(tp)), None


class GameCodec:
    """Wire forms of one game's values.

    Args:
        game: the game.
        conv: the host converter (:func:`make_converter`); a fresh one if omitted.
    """

    def __init__(self, game: Game, conv: cattrs.Converter | None = None) -> None:
        self.game = game
        self.conv = conv or make_converter()
        self._actions = {tag_of(c): c for c in game.info.action_types}
        self._events = {tag_of(c): c for c in game.info.event_types}
        # per class: (tag, unstructure hook) for tagged values, the hook for plain values, the
        # structure hook (filled on first use; classes are few, so these stay small)
        self._tagged_hooks: dict[type, tuple[str, Any]] = {}
        self._plain_hooks: dict[type, Any] = {}
        self._structure_hooks: dict[type, Any] = {}
        self._action_checks = {
            c: {name: admitter(hint) for name, hint in typing.get_type_hints(c).items()}
            for c in game.info.action_types
        }
        opts = game.info.options
        self._hints = typing.get_type_hints(opts)
        self._option_fields = attrs.fields(opts)

    # -- actions -------------------------------------------------------------------------------
    def action_from_wire(self, data: Any) -> Any:
        """Structure a client's action object ``{"type": ..., ...}``.

        Raises:
            BadAction: not an object, unknown ``type``, missing/extra/mistyped fields.
        """
        try:
            check_size(data)
        except ValueError as exc:
            raise BadAction(f"action too large: {exc}") from None
        action = self._structure(data, self._actions, "action", BadAction)
        checks = self._action_checks[type(action)]
        for key, value in data.items():
            if key != "type" and not checks[key](value):
                raise BadAction(f"bad action field {key!r}: {value!r} is not of the field's type")
        return action

    def action_to_wire(self, action: Any) -> dict[str, Any]:
        """``{"type": tag, **fields}``."""
        return self.tagged(action)

    # -- events --------------------------------------------------------------------------------
    def event_to_wire(self, event: Any) -> dict[str, Any]:
        """``{"type": tag, **fields}``."""
        return self.tagged(event)

    def event_from_wire(self, data: dict[str, Any], version: int | None = None) -> Any:
        """Structure an event read from a log, upcasting older schema versions first.

        Raises:
            ValueError: the record does not fit any event class, or the game's ``upcast``
                raised (whatever it raised is chained).
        """
        if version is not None and version != self.game.info.event_version:
            upcast = getattr(self.game, "upcast", None)
            if upcast is None:
                raise ValueError(
                    f"event schema v{version} but the game writes v{self.game.info.event_version}"
                    " and has no upcast"
                )
            try:
                data = upcast(data, version)
            except BaseException as exc:  # noqa: BLE001 - the game's code may raise anything
                game_error(exc)
                raise ValueError(
                    f"the game's upcast of a v{version} event raised {type(exc).__name__}: {exc}"
                ) from exc
        return self._structure(data, self._events, "event", ValueError)

    # -- options -------------------------------------------------------------------------------
    def options_from_wire(self, data: Any, seats: int) -> Any:
        """Build the options instance from ``create``'s ``options`` (missing keys take defaults).

        Raises:
            OptionError: naming the first bad option (unknown name, wrong type, value not allowed,
                or refused by the game's ``check_options``).
            GameFault: ``check_options`` raised anything but an :class:`OptionError` (the game's
                bug, not the client's: a ``ValueError`` there is not a refused option).
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise OptionError("options", "must be an object")
        try:
            check_size(data)
        except ValueError as exc:
            raise OptionError("options", str(exc)) from None
        names = {f.name for f in self._option_fields}
        for key in data:
            if key not in names:
                raise OptionError(str(key), f"unknown option; known: {', '.join(sorted(names))}")
        for f in self._option_fields:
            if f.name in data:
                try:
                    self.conv.structure(data[f.name], self._hints[f.name])
                except BaseException as exc:  # noqa: BLE001 - cattrs raises many kinds
                    game_error(exc)
                    text, choices = _describe_type(self._hints[f.name])
                    allowed = choices if choices is not None else text
                    raise OptionError(
                        f.name, f"{data[f.name]!r} is not allowed (allowed: {allowed})"
                    ) from exc
        try:
            options = self.conv.structure(data, self.game.info.options)
        except BaseException as exc:  # noqa: BLE001 - validators raise ValueError/TypeError
            game_error(exc)
            raise OptionError("options", error_text(exc)) from exc
        for key, value in data.items():
            if not admits(self._hints[key], value):
                text, choices = _describe_type(self._hints[key])
                allowed = choices if choices is not None else text
                raise OptionError(key, f"{value!r} is not allowed (allowed: {allowed})")
        check = getattr(self.game, "check_options", None)
        if check is not None:
            try:
                check(options, seats)
            except OptionError:
                raise
            except BaseException as exc:
                game_error(exc)
                raise GameFault(
                    f"{self.game.info.id!r}: check_options raised {type(exc).__name__}: {exc}"
                ) from exc
        return options

    def options_to_wire(self, options: Any) -> dict[str, Any]:
        """The options as a JSON object."""
        return self.conv.unstructure(options)

    def options_schema(self) -> list[dict[str, Any]]:
        """Each option: ``name``, ``default``, ``type`` (text), ``choices`` (or null), ``doc``."""
        out = []
        for f in self._option_fields:
            text, choices = _describe_type(self._hints[f.name])
            default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default
            out.append(
                {
                    "name": f.name,
                    "default": self.conv.unstructure(default),
                    "type": text,
                    "choices": choices,
                    "doc": f.metadata.get("doc", ""),
                }
            )
        return out

    # -- anything ------------------------------------------------------------------------------
    def tagged(self, obj: Any) -> dict[str, Any]:
        """An action or event as ``{"type": tag, **fields}``."""
        cls = type(obj)
        found = self._tagged_hooks.get(cls)
        if found is None:
            found = self._tagged_hooks[cls] = (tag_of(cls), self.conv.get_unstructure_hook(cls))
        tag, hook = found
        return {"type": tag, **hook(obj)}

    def to_wire(self, value: Any) -> Any:
        """A view, outcome or any attrs/plain value as JSON-able data."""
        cls = type(value)
        hook = self._plain_hooks.get(cls)
        if hook is None:
            hook = self._plain_hooks[cls] = self.conv.get_unstructure_hook(cls)
        return hook(value)

    def _structure(
        self, data: Any, table: dict[str, type], what: str, error: type[Exception]
    ) -> Any:
        if not isinstance(data, dict):
            raise error(f"an {what} must be a JSON object with a 'type'")
        tag = data.get("type")
        cls = table.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise error(f"unknown {what} type {tag!r}; known: {', '.join(sorted(table))}")
        body = {k: v for k, v in data.items() if k != "type"}
        hook = self._structure_hooks.get(cls)
        if hook is None:
            hook = self._structure_hooks[cls] = self.conv.get_structure_hook(cls)
        try:
            return hook(body, cls)
        except BaseException as exc:  # noqa: BLE001 - cattrs raises many kinds
            game_error(exc)  # a game class's own validators may raise anything
            raise error(f"bad {what} {tag!r}: {error_text(exc)}") from exc
