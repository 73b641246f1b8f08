"""The error table: one source (``protocol.messages.ERRORS``) for the codes, their extra fields
and PROTOCOL.md's table; error replies held to it; request ids recovered where readable."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import messages
from protocol.messages import (
    ERRORS,
    ErrorCode,
    ProtocolError,
    encode_error,
    encode_protocol_error,
    error_table,
    extra_problems,
    leading_id,
    parse_request,
)

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "PROTOCOL.md"


def documented_table() -> str:
    text = PROTOCOL_MD.read_text()
    m = re.search(r"<!-- error table:[^\n]*-->\n(.*?)<!-- end of error table -->", text, re.S)
    assert m is not None, "PROTOCOL.md has no marked error table"
    return m.group(1)


def test_protocol_md_error_table_is_rendered_from_the_code():
    assert documented_table() == error_table()


def test_every_error_code_is_in_the_table_and_the_document():
    assert list(ERRORS) == list(ErrorCode)
    doc = documented_table()
    for code, spec in ERRORS.items():
        row = next(r for r in doc.splitlines() if r.startswith(f"| `{code}` |"))
        assert all(f"`{name}`" in row.split(" | ")[-1] for name in spec.fields)


def test_extra_problems_names_undeclared_and_missing_fields():
    assert extra_problems("session_full", {"free": []}) == []
    assert extra_problems("session_full", {}) == ["session_full: missing extra field 'free'"]
    assert extra_problems("bad_request", {"seq": 3}) == [
        "bad_request: undeclared extra field 'seq'"
    ]
    assert extra_problems("overloaded", {}) == []  # retry_after is optional
    assert extra_problems("no_such_code", {}) == ["'no_such_code' is not an error code"]


def test_an_undeclared_extra_is_never_sent_and_the_hook_sees_it(monkeypatch):
    seen = []
    monkeypatch.setattr(messages, "error_reply_hook", lambda code, extra: seen.append(extra))
    line = encode_error(3, ErrorCode.BAD_REQUEST, "no", seq=5)
    assert orjson.loads(line) == {
        "id": 3,
        "ok": False,
        "error": {"code": "bad_request", "message": "no"},
    }
    assert seen == [{"seq": 5}]


def test_the_hook_catches_an_undocumented_reply(error_replies_match_the_table):
    encode_error(None, ErrorCode.CONFLICT, "stale")  # conflict without its seq
    assert extra_problems(*error_replies_match_the_table[-1]) == [
        "conflict: missing extra field 'seq'"
    ]
    error_replies_match_the_table.clear()  # provoked on purpose: not this test's failure


# -- request ids -----------------------------------------------------------------------------------
def refusal(line: bytes) -> dict:
    with pytest.raises(ProtocolError) as info:
        parse_request(line)
    return orjson.loads(encode_protocol_error(None, info.value))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=64),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@given(json_values)
def test_a_mistyped_id_is_refused_and_echoed_only_when_a_scalar(rid):
    line = orjson.dumps({"id": rid, "op": "ping"})
    if rid is None or (isinstance(rid, int | str) and not isinstance(rid, bool)):
        assert parse_request(line).id == rid
    else:
        reply = refusal(line)
        assert reply["error"]["code"] == "bad_request"
        assert reply["id"] == (rid if isinstance(rid, bool | float) else None)


@given(
    st.integers(-(2**63), 2**64 - 1) | st.text(max_size=64),
    st.sampled_from([b"1e400", b"[" * 1100, b'"\\udc00"', b"nope"]),
)
def test_an_unparsable_line_is_answered_with_its_leading_id(rid, junk):
    line = b'{"id": ' + orjson.dumps(rid) + b', "op": "ping", "x": ' + junk + b"}"
    reply = refusal(line)
    assert reply["error"]["code"] == "bad_json"
    assert reply["id"] == rid
    assert leading_id(line) == rid


@pytest.mark.parametrize(
    "line",
    [
        b'{"op": "ping", "id": 4, "x": 1e400}',  # id not first: not looked for
        b'{"id": "\\ud800", "op": "ping"}',  # the id itself is unreadable
        b'{"id": 1.5e, "op": "ping"}',
        b"not json",
    ],
)
def test_an_unparsable_line_without_a_readable_leading_id_is_answered_with_null(line):
    reply = refusal(line)
    assert reply["error"]["code"] == "bad_json" and reply["id"] is None


def test_without_a_hook_an_undeclared_extra_is_logged_and_dropped(monkeypatch, caplog):
    monkeypatch.setattr(messages, "error_reply_hook", None)
    line = encode_error(1, ErrorCode.SESSION_ENDED, "over", seq=4)
    assert orjson.loads(line)["error"] == {"code": "session_ended", "message": "over"}
    assert "session_ended: undeclared extra field 'seq'" in caplog.text
