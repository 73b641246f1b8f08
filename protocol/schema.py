"""JSON Schema (draft 2020-12) of the protocol v1 requests, made from the message types.

``python -m protocol.schema`` prints it, for client authors in other languages.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import attrs

from protocol.messages import REQUESTS

__all__ = ["main", "request_schema", "scalar_schema"]


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


def _type(tp: Any) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type(a) for a in typing.get_args(tp)]}
    scalar = scalar_schema(tp)
    if scalar is not None:
        return scalar
    if tp is dict or origin is dict:
        return {"type": "object"}
    return {}


def request_schema() -> dict[str, Any]:
    """The schema: one ``oneOf`` branch per op, unknown fields refused."""
    branches = []
    for op, cls in REQUESTS.items():
        hints = typing.get_type_hints(cls)
        props: dict[str, Any] = {
            "id": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
            "op": {"const": op},
        }
        required = ["op"]
        for f in attrs.fields(cls):
            props[f.name] = _type(hints[f.name])
            if f.default is attrs.NOTHING:
                required.append(f.name)
        branches.append(
            {
                "title": op,
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": False,
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gamehost protocol v1 request",
        "oneOf": branches,
    }


def main() -> None:
    """Print the schema."""
    print(json.dumps(request_schema(), indent=2))


if __name__ == "__main__":
    main()
