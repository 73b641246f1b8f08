"""The one cattrs converter of the wire format: orjson preconf, strict scalars, no unknown keys."""

from __future__ import annotations

from typing import Any

import cattrs
import cattrs.preconf.orjson
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

__all__ = ["error_text", "make_converter"]


def _strict(kind: type, name: str) -> Any:
    def hook(value: Any, _: type) -> Any:
        if type(value) is not kind and not (kind is float and type(value) is int):
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


def error_text(exc: BaseException) -> str:
    """A one-line account of a structuring error, naming the paths that failed."""
    if isinstance(exc, ClassValidationError | ForbiddenExtraKeysError):
        return "; ".join(cattrs.transform_error(exc))
    return str(exc)
