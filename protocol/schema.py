"""JSON Schema (draft 2020-12) of every protocol v1 message, made from the message types.

One source: the request classes of :mod:`protocol.messages` (``REQUESTS``), the result and push
classes of :mod:`protocol.replies` (``RESULT_TYPES``, ``PUSHES``) and the error codes' extra
fields (``ERRORS``), read through their attrs fields, type hints and field metadata (see the
:mod:`protocol.replies` docstring). Nothing here is written per message. ``gamehost schema
--protocol`` (and ``python -m protocol.schema``) prints :func:`protocol_schema`.

The document's ``$defs`` (every other definition is referred to from these):

- ``request`` (one branch per op) and ``request.OP``;
- ``reply`` (any reply) and ``reply.OP`` (``ok: true`` with ``result.OP``), ``reply.error``
  (``ok: false`` with an ``error``), ``result.OP``;
- ``error`` (one branch per code) and ``error.CODE``;
- ``push`` (one branch per push) and ``push.NAME``;
- the parts they share: ``seat_info``, ``snapshot``, ``deadline``, ``timers``, ...

The root accepts any line of either side (``request``, ``reply`` or ``push``); validate a line
against the definition you expect, e.g. ``{"$ref": "#/$defs/reply.join"}`` for the answer to a
``join``. The games' own parts (a ``view``, an ``action``, an ``event``, an ``outcome``) are
open here: ``gamehost schema --game ID`` describes them.

Descriptions are plain wire terms (:func:`plain` turns the docstrings' markup into Markdown):
``null``, ``true``, ``false``, field names in backticks.
"""

from __future__ import annotations

import json
import re
import sys
import types
import typing
from typing import Any, Literal

import attrs

from protocol.messages import ERRORS, REQUESTS
from protocol.replies import PUSHES, RESULT_TYPES

__all__ = [
    "DRAFT",
    "main",
    "plain",
    "protocol_schema",
    "scalar_schema",
    "split_docstring",
]

DRAFT = "https://json-schema.org/draft/2020-12/schema"
"""The ``$schema`` of every generated schema."""

_SCALARS: dict[Any, str] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    str: "string",
    float: "number",
}


def scalar_schema(tp: Any) -> dict[str, Any] | None:
    """The JSON Schema of a scalar Python type (None, bool, int, str, float), else None."""
    name = _SCALARS.get(tp) if isinstance(tp, type) else None
    return None if name is None else {"type": name}


# -- descriptions -----------------------------------------------------------------------------
_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_WORDS = {"None": "null", "True": "true", "False": "false"}
_WORD = re.compile(r"(?<![\w`])(None|True|False)(?![\w`])")
_SECTION = re.compile(r"\n\s*(Attributes|Args|Raises|Returns|Yields|Example|Examples):\s*\n")


def plain(text: str) -> str:
    """A docstring's text in wire terms, on one line: reST literals (double backticks) and
    roles (``:class:`X```) become Markdown code (`` `X` ``), Python's None, True and False
    become null, true and false (also inside backticks), and whitespace is folded."""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    text = _LITERAL.sub(lambda m: f"`{_WORDS.get(m.group(1), m.group(1))}`", text)
    text = _WORD.sub(lambda m: _WORDS[m.group(1)], text)
    text = text.replace("`null`", "null").replace("`true`", "true").replace("`false`", "false")
    return " ".join(text.split())


def split_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """A Google-style docstring as ``(summary, {attribute: its description})``: the text before
    its first section (``Attributes:``, ``Args:``, ...), and the entries of its ``Attributes:``
    section. Both are as written (see :func:`plain`)."""
    if not doc:
        return "", {}
    doc = _dedent(doc)
    parts = _SECTION.split("\n" + doc)
    summary = parts[0].strip()
    attributes: dict[str, str] = {}
    for title, body in zip(parts[1::2], parts[2::2], strict=False):
        if title != "Attributes":
            continue
        name = None
        for line in body.splitlines():
            m = re.match(r"\s{0,8}(\w+)(?: \([^)]*\))?:\s*(.*)$", line)
            if m and (name is None or len(line) - len(line.lstrip()) <= _indent(body)):
                name = m.group(1)
                attributes[name] = m.group(2)
            elif name is not None and line.strip():
                attributes[name] += " " + line.strip()
    return summary, attributes


def _dedent(doc: str) -> str:
    lines = doc.expandtabs().splitlines()
    rest = [len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()]
    cut = min(rest, default=0)
    return "\n".join([lines[0].strip(), *(x[cut:] for x in lines[1:])])


def _indent(body: str) -> int:
    first = next((x for x in body.splitlines() if x.strip()), "")
    return len(first) - len(first.lstrip())


def _described(schema: dict[str, Any], text: str | None) -> dict[str, Any]:
    if text:
        return {**schema, "description": plain(text)}
    return schema


# -- types --------------------------------------------------------------------------------------
def _def_name(cls: type) -> str:
    """A shared part's ``$defs`` name: its class name in snake case (``SeatInfo``:
    ``seat_info``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


class _Builder:
    """Makes the schemas of classes, collecting the shared parts they refer to in ``defs``."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def type_schema(self, tp: Any) -> dict[str, Any]:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.type_schema(a) for a in args]}
        if origin is Literal:
            return {"enum": list(args)}
        scalar = scalar_schema(tp)
        if scalar is not None:
            return scalar
        if tp is Any or tp is object:
            return {}
        if origin in (list, tuple) or tp in (list, tuple):
            if args and (origin is list or args[-1] is Ellipsis):
                return {"type": "array", "items": self.type_schema(args[0])}
            return {"type": "array"}
        if origin is dict or tp is dict:
            value = self.type_schema(args[1]) if args else {}
            return (
                {"type": "object", "additionalProperties": value} if value else {"type": "object"}
            )
        if isinstance(tp, type) and attrs.has(tp):
            name = _def_name(tp)
            if name not in self.defs:
                self.defs[name] = {}  # taken, for a class that refers to itself
                self.defs[name] = self.object_schema(tp)
            return {"$ref": f"#/$defs/{name}"}
        raise TypeError(f"no JSON Schema for the type {tp!r}")

    def fields(
        self, cls: type, sent: bool = True
    ) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
        """``(properties, required, alternatives)`` of an attrs class's wire object
        (alternatives: ``oneOf`` branches for a field sent under one of several names).
        ``sent``: what the host sends (every field is there unless its metadata says);
        False: what a client sends (a field with a default may be left out)."""
        hints = typing.get_type_hints(cls)
        _, attributes = split_docstring(cls.__doc__)
        props: dict[str, Any] = {}
        required: list[str] = []
        alternatives: list[dict[str, Any]] = []
        for name, value in getattr(cls, "WIRE_CONSTANTS", {}).items():
            props[name] = {"const": value}
            required.append(name)
        for f in attrs.fields(cls):
            if not f.init or f.name.startswith("_"):
                continue
            meta = f.metadata or {}
            wire = meta.get("wire", f.name)
            if wire is False:
                continue
            if meta.get("flatten"):
                sub_props, sub_required, _ = self.fields(hints[f.name], sent)
                props.update(sub_props)
                required += sub_required
                continue
            tp = hints[f.name]
            if meta.get("omit_none"):
                tp = _without_none(tp)
            schema = _described(self.type_schema(tp), meta.get("doc") or attributes.get(f.name))
            names = wire if isinstance(wire, tuple) else (wire,)
            for n in names:
                props[n] = schema
            if len(names) > 1:
                alternatives += [{"required": [n]} for n in names]
            elif not (meta.get("optional") or meta.get("omit_none")) and (
                sent or f.default is attrs.NOTHING
            ):
                required.append(names[0])
        return props, required, alternatives

    def object_schema(
        self, cls: type, head: dict[str, Any] | None = None, sent: bool = True
    ) -> dict[str, Any]:
        """The closed object schema of an attrs class (``head``: constant properties first,
        e.g. ``{"push": {"const": "turn"}}``; ``sent``: as :meth:`fields`)."""
        props, required, alternatives = self.fields(cls, sent)
        head = head or {}
        out: dict[str, Any] = {"type": "object"}
        summary, _ = split_docstring(cls.__doc__)
        if summary:
            out["description"] = plain(summary)
        out["properties"] = {**head, **props}
        out["required"] = [*head, *required]
        out["additionalProperties"] = False
        if alternatives:
            out["oneOf"] = alternatives
        return out


def _without_none(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = tuple(a for a in args if a is not type(None))
        return rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007
    return tp


# -- the document -------------------------------------------------------------------------------
_REQUEST_ID = {
    "description": "chosen by the client and echoed in the reply: an integer, a string of at"
    " most 256 bytes, or left out (null)",
    "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
}
_REPLY_ID = {
    "description": "the request's `id`, echoed (null when it could not be read; a float or a"
    " boolean `id` is refused with `bad_request` and echoed as read)",
    "type": ["integer", "string", "null", "number", "boolean"],
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _request(builder: _Builder, op: str, cls: type) -> dict[str, Any]:
    schema = builder.object_schema(cls, {"id": _REQUEST_ID, "op": {"const": op}}, sent=False)
    schema["required"] = [r for r in schema["required"] if r != "id"]
    return {"title": f"request {op}", **schema}


def _error(builder: _Builder, code: str) -> dict[str, Any]:
    spec = ERRORS[code]  # type: ignore[index]
    props: dict[str, Any] = {
        "code": {"const": str(code)},
        "message": {"type": "string", "description": "for people: never parse it"},
    }
    for name, doc in spec.fields.items():
        props[name] = _described(builder.type_schema(spec.types[name]), doc)
    required = ["code", "message", *(n for n in spec.fields if n not in spec.optional)]
    return {
        "title": f"error {code}",
        "description": plain(spec.meaning),
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _reply(ok: bool, body: dict[str, Any], title: str) -> dict[str, Any]:
    key = "result" if ok else "error"
    return {
        "title": title,
        "type": "object",
        "properties": {"id": _REPLY_ID, "ok": {"const": ok}, key: body},
        "required": ["id", "ok", key],
        "additionalProperties": False,
    }


def protocol_schema() -> dict[str, Any]:
    """The protocol's JSON Schema: every request, reply (each op's result), push and error (the
    layout is in the module docstring).

    Raises:
        TypeError: a message's field has a type this generator cannot describe (a bug).
    """
    b = _Builder()
    defs: dict[str, Any] = {}
    defs["request"] = {
        "title": "a request (one line from the client)",
        "oneOf": [_ref(f"request.{op}") for op in REQUESTS],
    }
    for op, cls in REQUESTS.items():
        defs[f"request.{op}"] = _request(b, op, cls)
    defs["reply"] = {
        "title": "a reply (one per request)",
        "anyOf": [*(_ref(f"reply.{op}") for op in RESULT_TYPES), _ref("reply.error")],
    }
    for op, cls in RESULT_TYPES.items():
        defs[f"result.{op}"] = {"title": f"result of {op}", **b.object_schema(cls)}
        defs[f"reply.{op}"] = _reply(True, _ref(f"result.{op}"), f"reply to {op}")
    defs["reply.error"] = _reply(False, _ref("error"), "an error reply (to any request)")
    defs["error"] = {
        "title": "an error reply's error object",
        "oneOf": [_ref(f"error.{code}") for code in ERRORS],
    }
    for code in ERRORS:
        defs[f"error.{code}"] = _error(b, code)
    defs["push"] = {
        "title": "a push (never has ok)",
        "oneOf": [_ref(f"push.{name}") for name in PUSHES],
    }
    for name, cls in PUSHES.items():
        defs[f"push.{name}"] = {
            "title": f"push {name}",
            **b.object_schema(cls, {"push": {"const": name}}),
        }
    defs.update(sorted(b.defs.items()))
    return {
        "$schema": DRAFT,
        "title": "gamehost protocol v1",
        "description": "One JSON object per line, each way (PROTOCOL.md). A line from a client"
        " is a request; a line from the host is a reply (once per request, echoing its id) or"
        " a push. Validate a line against the definition you expect: `#/$defs/reply.OP` for"
        " the reply to an op, `#/$defs/push` for a push. The games' own parts (view, action,"
        " event, outcome) are described by `gamehost schema --game ID`.",
        "anyOf": [_ref("request"), _ref("reply"), _ref("push")],
        "$defs": defs,
    }


def main() -> None:
    """Print the protocol's schema (stops quietly when the reader goes, as ``| head`` does)."""
    try:
        print(json.dumps(protocol_schema(), indent=2), flush=True)
    except BrokenPipeError:
        sys.stdout = None  # nothing more can be written; skip the flush at exit


if __name__ == "__main__":
    main()
