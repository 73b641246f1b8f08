"""Request ids and nesting: whatever a line holds, the parser answers with a typed request or a
typed error whose reply can always be written (an id of another type is echoed only when it is
a scalar; arrays and objects nest at most ``MAX_DEPTH`` levels)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.messages import (
    MAX_DEPTH,
    MAX_ID,
    ErrorCode,
    ProtocolError,
    encode_protocol_error,
    nesting_depth,
    parse_request,
    valid_id,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)


def nested(depth: int, kind: str = "[", inner: bytes = b"1") -> bytes:
    """A JSON value ``depth`` levels deep: arrays, objects (``{"a": ...}``) or both in turn."""
    opens, closes = [], []
    for i in range(depth):
        k = kind if kind != "mixed" else "[{"[i % 2]
        opens.append(b"[" if k == "[" else b'{"a":')
        closes.append(b"]" if k == "[" else b"}")
    return b"".join(opens) + inner + b"".join(reversed(closes))


def outcome(line: bytes) -> tuple[str, object]:
    """``("ok", id)`` or ``(code, the id to answer)``; the refusal's reply is encoded too."""
    try:
        req = parse_request(line)
    except ProtocolError as exc:
        reply = orjson.loads(encode_protocol_error(None, exc))  # never raises
        return str(exc.code), reply["id"]
    return "ok", req.id


@given(json_values)
def test_any_id_is_taken_or_refused_with_an_id_the_reply_can_carry(rid):
    line = orjson.dumps({"id": rid, "op": "ping"})
    code, answered = outcome(line)
    if valid_id(rid):
        assert (code, answered) == ("ok", rid)
    else:
        assert code == ErrorCode.BAD_REQUEST
        # a scalar of another type is echoed (as documented); anything else is null
        assert answered == (rid if isinstance(rid, bool | float) else None)


@given(
    st.integers(1, 1100),
    st.sampled_from(["[", "{", "mixed"]),
    st.sampled_from(["id", "action", "options", "extra"]),
    st.sampled_from([7, "r7", None]),
)
def test_nesting_anywhere_is_refused_typed_and_the_reply_encodes(depth, kind, field, rid):
    head = b'{"id":' + orjson.dumps(rid) if field != "id" else b'{"id":' + nested(depth, kind)
    value = nested(depth, kind)
    if field == "action":
        line = head + b',"op":"act","session":"s","action":' + value + b"}"
    elif field == "options":
        line = head + b',"op":"create","game":"g","options":{"o":' + value + b"}}"
    else:
        line = head + b',"op":"ping"' + (b',"x":' + value if field == "extra" else b"") + b"}"
    code, answered = outcome(line)
    levels = depth + 1 + (field == "options")  # the request object is a level of its own
    if levels > 1024:  # beyond orjson's parser: bad_json, the id recovered when it leads
        expected = ErrorCode.BAD_JSON
    elif levels > MAX_DEPTH or field in ("id", "extra"):  # too deep; a bad id; an unknown field
        expected = ErrorCode.BAD_REQUEST
    else:
        expected = "ok"
    assert (code, answered) == (expected, None if field == "id" else rid)


def test_the_depth_limit_is_exact():
    ok = b'{"id":1,"op":"act","session":"s","action":' + nested(MAX_DEPTH - 1) + b"}"
    assert parse_request(ok).params.action is not None
    with pytest.raises(ProtocolError) as info:
        parse_request(b'{"id":1,"op":"act","session":"s","action":' + nested(MAX_DEPTH) + b"}")
    assert (info.value.code, info.value.extra["id"]) == (ErrorCode.BAD_REQUEST, 1)
    assert "64 levels" in info.value.message


def test_string_ids_up_to_the_limit_in_bytes():
    assert parse_request(orjson.dumps({"id": "a" * MAX_ID, "op": "ping"})).id == "a" * MAX_ID
    two_byte = "é" * (MAX_ID // 2)
    assert parse_request(orjson.dumps({"id": two_byte, "op": "ping"})).id == two_byte
    for rid in ["a" * (MAX_ID + 1), "é" * (MAX_ID // 2 + 1)]:
        assert outcome(orjson.dumps({"id": rid, "op": "ping"})) == (ErrorCode.BAD_REQUEST, None)
    # an over-long leading id is not recovered for bad_json either
    for n, rid in [(MAX_ID + 1, None), (MAX_ID, "a" * MAX_ID)]:
        line = b'{"id":"' + b"a" * n + b'","x":1e400}'
        assert outcome(line) == (ErrorCode.BAD_JSON, rid)


@given(st.integers(0, 300))
def test_nesting_depth_counts_levels(depth):
    value = orjson.loads(nested(min(depth, 250), "mixed")) if depth else 1
    assert nesting_depth(value, limit=1000) == min(depth, 250)
    assert nesting_depth(value, limit=10) == min(depth, 250, 11)
