"""Each game's published contract: JSON Schema (draft 2020-12) made from the game's attrs types.

One source of truth: the schema is generated from the classes a game registers in its
:class:`~host.game.GameInfo` (``options``, ``action_types``, ``event_types``, ``view_type``),
never written by hand. ``gamehost schema [--game ID]`` prints it; ``docs/games/<id>.md`` is
checked against it by the tests.

Shape of :func:`game_schema` (every leaf is a standalone draft 2020-12 schema; the outcome is
what the ``ended`` push and record carry when the game, not the host, ended the session)::

    {"game": {"id", "title", "version", "event_version", "min_seats", "max_seats"},
     "options": <object schema>,
     "action": <oneOf, one branch per action type>,
     "event": {"seat": ..., "spectator": ..., "log": ...},
     "view": {"seat": ..., "spectator": ...} or null when the game declares no view_type,
     "outcome": <object schema> or null when the game declares no outcome_type}

Hidden information. A field whose value some viewers may not see carries
``metadata={"hidden": WHO}`` on its attrs field; what is hidden becomes ``null`` (or, for a
list or tuple, each hidden entry becomes ``null``) in what that viewer receives. ``WHO`` is

``"everyone"``  null for every seat and spectator; only the session log holds it (a stock order).
``"others"``    only the seat it belongs to sees it; always null for spectators (a hand).
``"some"``      null for the viewers it is hidden from, shown to others too (a face-down card:
                its owner sees it, and everyone once it is turned face up).

From that, three event schemas: ``seat`` (what a seat receives: hidden fields nullable,
``everyone`` fields null), ``spectator`` (``others`` and ``everyone`` fields null, ``some``
nullable) and ``log`` (the raw event in the session log: nothing hidden, so the ``None`` a
hidden field's type admits for redaction is removed). Views get ``seat`` and ``spectator``.

Types map as JSON does after the host's converter: ``int`` -> integer, ``str`` -> string,
``bool`` -> boolean, ``float`` -> number, ``None`` -> null, ``Literal`` -> ``enum``, unions ->
``anyOf``, ``tuple[T, ...]``/``list[T]`` -> array, a fixed ``tuple[A, B]`` -> ``prefixItems``,
``dict[str, T]`` -> object, an attrs class -> a closed object (every field written, so every
field is required; an action's fields with defaults may be left out by a client).
A view shape's field whose wire key is a Python keyword is named ``pass_`` with
``metadata={"wire_name": "pass"}``.

Descriptions are in wire terms (:func:`protocol.schema.plain`): a class's is its docstring's
summary (the text before ``Attributes:``), a field's its ``metadata["doc"]`` or else its entry
under the class docstring's ``Attributes:``; reST markup becomes Markdown code and None, True
and False become null, true and false.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import attrs

from host.game import Game, tag_of
from protocol.schema import plain, scalar_schema, split_docstring

__all__ = ["DRAFT", "HIDDEN", "Role", "game_schema", "hidden_fields", "type_schema"]

DRAFT = "https://json-schema.org/draft/2020-12/schema"
"""The ``$schema`` of every generated schema."""

HIDDEN = ("everyone", "others", "some")
"""The values a field's ``metadata["hidden"]`` may take (see the module docstring)."""

Role = Literal["seat", "spectator", "log"]
"""Who receives the value: a seated player, a spectator, or nobody (the raw log record)."""

_MAX_DEPTH = 12


class SchemaError(TypeError):
    """A type the generator cannot describe (a recursive class, an unknown ``hidden`` value)."""


def _hiding(meta: Any, role: Role) -> str:
    """How a field marked ``meta`` is received by ``role``: ``"null"`` (always hidden),
    ``"nullable"`` (hidden from some), ``"shown"`` (nothing hidden), or ``"as_declared"``."""
    who = meta.get("hidden") if meta else None
    if who is None:
        return "as_declared"
    if who not in HIDDEN:
        raise SchemaError(f"metadata hidden={who!r}: not one of {HIDDEN}")
    if role == "log":
        return "shown"
    if who == "everyone" or (who == "others" and role == "spectator"):
        return "null"
    return "nullable"


def type_schema(tp: Any, role: Role = "seat", hiding: str = "as_declared", depth: int = 0) -> Any:
    """The JSON Schema of one type hint as the host's converter writes it.

    Args:
        tp: a type hint.
        role: who receives the value (decides how nested ``hidden`` fields look).
        hiding: how ``None`` inside ``tp`` is treated: ``"as_declared"``/``"nullable"`` keep
            it, ``"shown"`` removes it (the log: nothing is hidden), ``"null"`` makes every
            value that may be hidden null (the innermost optional part of the type).

    Raises:
        SchemaError: a recursive or unsupported type.
    """
    if depth > _MAX_DEPTH:
        raise SchemaError(f"type nested deeper than {_MAX_DEPTH} (recursive?): {tp!r}")
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        has_none = type(None) in args
        rest = [a for a in args if a is not type(None)]
        if hiding == "null" and has_none:
            return {"type": "null"}
        if hiding == "shown" and has_none:
            parts = [type_schema(a, role, hiding, depth + 1) for a in rest]
            return parts[0] if len(parts) == 1 else {"anyOf": parts}
        parts = [type_schema(a, role, hiding, depth + 1) for a in args]
        return {"anyOf": parts}
    if hiding == "null" and origin not in (tuple, list):
        raise SchemaError(f"a hidden value of type {tp!r}: its type admits no None")
    if origin is Literal:
        return {"enum": list(args)}
    scalar = scalar_schema(tp)
    if scalar is not None:
        return scalar
    if tp is Any or tp is object:
        return {}
    if origin in (tuple, list) or tp in (tuple, list):
        if not args:
            return {"type": "array"}
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": type_schema(args[0], role, hiding, depth + 1)}
        return {
            "type": "array",
            "prefixItems": [type_schema(a, role, hiding, depth + 1) for a in args],
            "items": False,
            "minItems": len(args),
        }
    if origin is dict or tp is dict:
        value = type_schema(args[1], role, hiding, depth + 1) if args else {}
        return {"type": "object", "additionalProperties": value}
    if isinstance(tp, type) and attrs.has(tp):
        return object_schema(tp, role, depth=depth + 1)
    raise SchemaError(f"no JSON Schema for the type {tp!r}")


def object_schema(
    cls: type,
    role: Role = "seat",
    tag: str | None = None,
    all_required: bool = True,
    depth: int = 0,
) -> dict[str, Any]:
    """The closed object schema of an attrs class (``tag``: a ``type`` const first).

    Args:
        all_required: every field required (what the host writes); ``False`` for what a client
            sends (fields with defaults may be left out).
    """
    hints = typing.get_type_hints(cls)
    summary, attributes = split_docstring(cls.__doc__)
    props: dict[str, Any] = {}
    required: list[str] = []
    if tag is not None:
        props["type"] = {"const": tag}
        required.append("type")
    for f in attrs.fields(cls):
        hiding = _hiding(f.metadata, role)
        sub = type_schema(hints[f.name], role, hiding, depth)
        doc = (f.metadata.get("doc") if f.metadata else None) or attributes.get(f.name)
        if doc:
            sub = {**sub, "description": plain(doc)}
        if f.metadata and f.metadata.get("hidden"):
            sub = {**sub, "x-hidden": f.metadata["hidden"]}
        name = f.metadata.get("wire_name", f.name) if f.metadata else f.name
        props[name] = sub
        if all_required or f.default is attrs.NOTHING:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    out["additionalProperties"] = False
    if summary:
        out["description"] = plain(summary)
    return out


def hidden_fields(cls: type) -> dict[str, str]:
    """``{field name: who it is hidden from}`` for the fields of ``cls`` marked ``hidden``."""
    return {f.name: f.metadata["hidden"] for f in attrs.fields(cls) if f.metadata.get("hidden")}


def _tagged_union(classes: tuple[type, ...], role: Role, all_required: bool, title: str) -> Any:
    branches = []
    for cls in classes:
        tag = tag_of(cls)
        branch = object_schema(cls, role, tag=tag, all_required=all_required)
        branches.append({"title": tag, **branch})
    return {"$schema": DRAFT, "title": title, "oneOf": branches}


def options_schema(cls: type) -> dict[str, Any]:
    """The ``create`` options object: every option optional, with its default."""
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    for f in attrs.fields(cls):
        sub = type_schema(hints[f.name])
        default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default
        if default is not attrs.NOTHING:
            sub = {**sub, "default": list(default) if isinstance(default, tuple) else default}
        doc = f.metadata.get("doc") if f.metadata else None
        if doc:
            sub = {**sub, "description": plain(doc)}
        props[f.name] = sub
    return {
        "$schema": DRAFT,
        "title": "options",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }


def game_schema(game: Game) -> dict[str, Any]:
    """The published contract of one game (shape in the module docstring).

    Raises:
        SchemaError: a type of the game the generator cannot describe.
    """
    info = game.info
    gid = info.id
    view_type = getattr(info, "view_type", None)
    view: dict[str, Any] | None = None
    if view_type is not None:
        view = {}
        for role in ("seat", "spectator"):
            body = object_schema(view_type, role)  # type: ignore[arg-type]
            view[role] = {"$schema": DRAFT, "title": f"{gid} view as a {role}", **body}
    outcome_type = getattr(info, "outcome_type", None)
    outcome: dict[str, Any] | None = None
    if outcome_type is not None:  # everyone sees the same outcome: one schema
        body = object_schema(outcome_type, "spectator")
        outcome = {"$schema": DRAFT, "title": f"{gid} outcome", **body}
    return {
        "game": {
            "id": gid,
            "title": info.title,
            "version": info.version,
            "event_version": info.event_version,
            "min_seats": info.min_seats,
            "max_seats": info.max_seats,
        },
        "options": options_schema(info.options),
        "action": _tagged_union(info.action_types, "seat", False, f"{gid} action"),
        "event": {
            role: _tagged_union(info.event_types, role, True, f"{gid} event as a {role}")
            for role in ("seat", "spectator", "log")
        },
        "view": view,
        "outcome": outcome,
    }
