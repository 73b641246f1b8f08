"""The one cattrs converter of the wire format: orjson preconf, strict scalars, no unknown keys."""

from __future__ import annotations

import typing
from typing import Any

import cattrs
import cattrs.preconf.orjson
import cattrs.v
import orjson
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

__all__ = ["error_text", "json_text", "make_converter"]


_WIDEST = 2**63
"""JSON integers this far from 0 or farther may not fit 64 bits: orjson reads those past them
as floats."""


def _strict(kind: type, name: str) -> Any:
    def hook(value: Any, _: type) -> Any:
        if type(value) is not kind and not (kind is float and type(value) is int):
            if kind is int and type(value) is float and abs(value) >= _WIDEST:
                raise TypeError(f"expected {name}, got one wider than 64 bits")
            raise TypeError(f"expected {name}, got {type(value).__name__}")
        return value

    return hook


def make_converter() -> cattrs.Converter:
    """A converter that refuses unknown keys and never coerces (``"5"`` is not an int)."""
    conv = cattrs.preconf.orjson.make_converter(forbid_extra_keys=True)
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    conv.register_structure_hook(float, _strict(float, "a number"))
    return conv


def json_text(value: Any) -> str:
    """``value`` as JSON text (``null``, ``"8C"``), or its ``repr`` where it has no JSON form."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def _describe(exc: BaseException, kind: Any) -> str:
    """One failure in wire terms: ``must be one of 1, 2, 3`` rather than Python's
    ``4 not in literal typing.Literal[1, 2, 3]``; our strict scalars' own words."""
    if getattr(kind, "__origin__", None) is typing.Literal:  # attributes: no reflection here
        return "must be one of " + ", ".join(json_text(v) for v in kind.__args__)
    if isinstance(exc, TypeError) and str(exc).startswith("expected "):
        return str(exc)
    return cattrs.v.format_exception(exc, kind)


def error_text(exc: BaseException) -> str:
    """A one-line account of a structuring error, naming the paths that failed
    (``must be one of 1, 2, 3 @ $.count``)."""
    if isinstance(exc, ClassValidationError | ForbiddenExtraKeysError):
        return "; ".join(cattrs.transform_error(exc, format_exception=_describe))
    return str(exc)
