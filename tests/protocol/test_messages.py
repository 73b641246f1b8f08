import orjson
import pytest

from protocol.messages import (
    REQUESTS,
    ErrorCode,
    ProtocolError,
    encode_error,
    encode_ok,
    parse_request,
)


def code_of(line: bytes) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        parse_request(line)
    return info.value.code


def test_a_request_is_parsed_into_its_typed_parameters():
    req = parse_request(b'{"id": 7, "op": "act", "session": "s1", "action": {"type": "draw"}}')
    assert (req.id, req.op) == (7, "act")
    assert req.params.session == "s1"
    assert req.params.action == {"type": "draw"}
    assert req.params.seq is None


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{not json", ErrorCode.BAD_JSON),
        (b"[1, 2]", ErrorCode.BAD_JSON),
        (b"\xff\xfe", ErrorCode.BAD_JSON),
        (b'{"id": 1}', ErrorCode.BAD_REQUEST),
        (b'{"id": 1, "op": "fly"}', ErrorCode.UNKNOWN_OP),
        (b'{"id": 1, "op": "join"}', ErrorCode.BAD_REQUEST),
        (b'{"id": 1, "op": "join", "session": 5}', ErrorCode.BAD_REQUEST),
        (b'{"id": 1, "op": "create", "game": "x", "seats": "4"}', ErrorCode.BAD_REQUEST),
        (b'{"id": 1, "op": "ping", "extra": true}', ErrorCode.BAD_REQUEST),
        (b'{"id": [1], "op": "ping"}', ErrorCode.BAD_REQUEST),
        (b'{"id": true, "op": "ping"}', ErrorCode.BAD_REQUEST),
    ],
)
def test_bad_requests_get_typed_codes(line, code):
    assert code_of(line) == code


def test_the_request_id_is_kept_on_errors_when_readable():
    with pytest.raises(ProtocolError) as info:
        parse_request(b'{"id": "abc", "op": "fly"}')
    assert info.value.extra["id"] == "abc"


def test_replies_have_the_documented_shape():
    assert orjson.loads(encode_ok(3, {"x": 1})) == {"id": 3, "ok": True, "result": {"x": 1}}
    err = orjson.loads(encode_error("a", ErrorCode.CONFLICT, "stale", seq=4))
    assert err == {
        "id": "a",
        "ok": False,
        "error": {"code": "conflict", "message": "stale", "seq": 4},
    }
    assert encode_ok(1, None).endswith(b"\n")


def test_every_op_is_documented_in_protocol_md():
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "PROTOCOL.md").read_text()
    for op in REQUESTS:
        assert f"`{op}`" in doc, op
    for code in ErrorCode:
        assert f"`{code.value}`" in doc, code


def test_the_json_schema_has_one_branch_per_op_with_required_fields():
    from protocol.schema import protocol_schema

    defs = protocol_schema()["$defs"]
    branches = {r["$ref"].rsplit("/", 1)[1]: r for r in defs["request"]["oneOf"]}
    assert set(branches) == {f"request.{op}" for op in REQUESTS}
    act = defs["request.act"]
    assert act["required"] == ["op", "session", "action"]
    assert act["properties"]["op"] == {"const": "act"}
    seats = defs["request.create"]["properties"]["seats"]
    assert seats["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert seats["description"].startswith("how many seats")
