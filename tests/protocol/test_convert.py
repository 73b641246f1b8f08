"""Structuring errors in wire terms: what a client reads in a ``bad_request`` or ``bad_action``."""

from __future__ import annotations

from typing import Literal

import attrs
import pytest

from protocol.convert import error_text, make_converter


@attrs.frozen
class Take:
    count: Literal[1, 2, 3]
    heap: int
    side: Literal["left", "right"] = "left"


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({"count": 4, "heap": 0}, "must be one of 1, 2, 3 @ $.count"),
        ({"count": [1], "heap": 0}, "must be one of 1, 2, 3 @ $.count"),
        ({"count": 1, "heap": 0, "side": "up"}, 'must be one of "left", "right" @ $.side'),
        ({"count": 1, "heap": "0"}, "expected an integer, got str @ $.heap"),
        ({"count": 1, "heap": True}, "expected an integer, got bool @ $.heap"),
        ({"count": 1, "heap": 2.5}, "expected an integer, got float @ $.heap"),
        # orjson reads an integer past 64 bits as a float: told so, not "got float"
        (
            {"count": 1, "heap": float(2**70)},
            "expected an integer, got one wider than 64 bits @ $.heap",
        ),
        (
            {"count": 1, "heap": -float(2**70)},
            "expected an integer, got one wider than 64 bits @ $.heap",
        ),
        ({"count": 1}, "required field missing @ $.heap"),
        ({"count": 1, "heap": 0, "extra": 1}, "extra fields found (extra) @ $"),
    ],
)
def test_a_structuring_error_names_the_field_in_wire_terms(data, text):
    with pytest.raises(Exception) as info:
        make_converter().structure(data, Take)
    assert error_text(info.value) == text
