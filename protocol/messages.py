"""Protocol v1 messages: requests, replies, pushes and the closed list of error codes.

Sans-io: :func:`parse_request` turns one line into a typed request (or a :class:`ProtocolError`
that says which error code to answer), and the ``encode_*`` functions turn replies and pushes into
ready lines. PROTOCOL.md documents every op, push, field and code.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
import orjson

from protocol.convert import error_text, make_converter

__all__ = [
    "PROTOCOL_VERSION",
    "REQUESTS",
    "ErrorCode",
    "HOST_DEFAULT",
    "ProtocolError",
    "Request",
    "encode",
    "encode_error",
    "encode_ok",
    "parse_request",
]

PROTOCOL_VERSION = 1

MAX_MESSAGE = 500
"""The longest error ``message`` sent, in characters (longer ones are cut)."""


class ErrorCode(enum.StrEnum):
    """The closed list of error codes a reply may carry."""

    BAD_JSON = "bad_json"  # the line is not a JSON object (or not UTF-8)
    LINE_TOO_LONG = "line_too_long"  # the line passed 64 KiB
    UNKNOWN_OP = "unknown_op"  # "op" names no operation
    BAD_REQUEST = "bad_request"  # missing/extra/mistyped fields, or values out of range
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"  # hello asked for a protocol we do not speak
    UNKNOWN_GAME = "unknown_game"
    BAD_OPTION = "bad_option"  # a game option is unknown or its value not allowed ("option")
    UNKNOWN_SESSION = "unknown_session"
    SESSION_FULL = "session_full"  # no free seat (or the seat asked for is taken)
    NOT_SEATED = "not_seated"  # act/leave from a connection that holds no seat there
    BAD_TOKEN = "bad_token"  # resume with a token that matches no seat
    NOT_YOUR_TURN = "not_your_turn"
    BAD_ACTION = "bad_action"  # the action object fits none of the game's actions
    ILLEGAL_ACTION = "illegal_action"  # the rules refuse the action now ("reason")
    CONFLICT = "conflict"  # the expected "seq" is not the session's current seq
    SESSION_ENDED = "session_ended"  # the session is over: nothing more to do
    OVERLOADED = "overloaded"  # the session's queue is full; retry
    UNAVAILABLE = "unavailable"  # the host is shutting down or the session failed
    RECORDS_LOST = "records_lost"  # resume "after" is past the log's end ("seq": its last seq)
    INTERNAL = "internal"  # a bug: logged by the host; the connection stays up


class ProtocolError(Exception):
    """A request that must be answered with an error.

    Args:
        code: the :class:`ErrorCode`.
        message: for people.
        extra: more fields for the ``error`` object (e.g. ``option``, ``reason``, ``seq``).
    """

    def __init__(self, code: ErrorCode, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


# --- requests ------------------------------------------------------------------------------------
Id = int | str | None


@attrs.frozen
class Hello:
    protocol: int = PROTOCOL_VERSION
    client: str | None = None


@attrs.frozen
class Games:
    pass


class _HostDefault:
    """The type of :data:`HOST_DEFAULT`."""

    def __repr__(self) -> str:
        return "HOST_DEFAULT"


HOST_DEFAULT: Any = _HostDefault()
"""A ``create`` field left out: the host's own setting applies (``null`` means something else)."""


@attrs.frozen
class Create:
    game: str
    options: dict[str, Any] | None = None
    seats: int | None = None
    bots: int = 0
    turn_timeout: float | None = HOST_DEFAULT  # seconds; null: no turn timer


MAX_SESSIONS_PAGE = 500
"""The most sessions one ``sessions`` reply lists (``limit``)."""


@attrs.frozen
class Sessions:
    """One page of live sessions, by id: those with an id after ``after``, at most ``limit``."""

    game: str | None = None
    limit: int = 100  # 1 .. MAX_SESSIONS_PAGE (the host answers bad_request otherwise)
    after: str | None = None


@attrs.frozen
class Join:
    session: str
    name: str | None = None
    seat: int | None = None


@attrs.frozen
class Watch:
    session: str


@attrs.frozen
class Resume:
    session: str
    token: str
    after: int | None = None


@attrs.frozen
class View:
    session: str


@attrs.frozen
class Act:
    session: str
    action: Any
    seq: int | None = None


@attrs.frozen
class Leave:
    session: str


@attrs.frozen
class Ping:
    pass


REQUESTS: dict[str, type] = {
    "hello": Hello,
    "games": Games,
    "create": Create,
    "sessions": Sessions,
    "join": Join,
    "watch": Watch,
    "resume": Resume,
    "view": View,
    "act": Act,
    "leave": Leave,
    "ping": Ping,
}
"""op name -> its parameters class (the request's fields besides ``id`` and ``op``)."""


@attrs.frozen
class Request:
    """A parsed request: the echoed ``id``, the ``op`` and its typed parameters."""

    id: Id
    op: str
    params: Any


_conv = make_converter()


def parse_request(line: bytes) -> Request:
    """Parse one line (without terminator) into a :class:`Request`.

    Raises:
        ProtocolError: ``bad_json`` (not UTF-8 JSON, or not an object), ``bad_request`` (no
            ``op``, a bad ``id``, missing/extra/mistyped fields) or ``unknown_op``; the error's
            ``extra["id"]`` holds the request id when it could be read.
    """
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(ErrorCode.BAD_JSON, f"not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(ErrorCode.BAD_JSON, "a request must be a JSON object")
    rid = msg.pop("id", None)
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, int | str)):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'id' must be an integer or a string")
    op = msg.pop("op", None)
    if not isinstance(op, str):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "a request needs a string 'op'", id=rid)
    cls = REQUESTS.get(op)
    if cls is None:
        raise ProtocolError(
            ErrorCode.UNKNOWN_OP, f"unknown op {op!r}; ops: {', '.join(REQUESTS)}", id=rid
        )
    try:
        params = _conv.structure(msg, cls)
    except Exception as exc:  # noqa: BLE001 - cattrs raises many kinds
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{op}: {error_text(exc)}", id=rid) from None
    return Request(rid, op, params)


# --- replies and pushes --------------------------------------------------------------------------
def encode(obj: dict[str, Any]) -> bytes:
    """One JSON line, ``\\n``-terminated."""
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def encode_ok(rid: Id, result: Any) -> bytes:
    """``{"id": rid, "ok": true, "result": result}``."""
    return encode({"id": rid, "ok": True, "result": result})


def encode_error(rid: Id, code: ErrorCode | str, message: str, **extra: Any) -> bytes:
    """``{"id": rid, "ok": false, "error": {"code": code, "message": message, **extra}}``."""
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return encode(
        {"id": rid, "ok": False, "error": {"code": str(code), "message": message, **extra}}
    )


def encode_protocol_error(rid: Id, exc: ProtocolError) -> bytes:
    """The reply for a :class:`ProtocolError` (its ``id`` extra, if any, wins over ``rid``)."""
    extra = dict(exc.extra)
    rid = extra.pop("id", rid)
    return encode_error(rid, exc.code, exc.message, **extra)


def push(name: str, /, **fields: Any) -> bytes:
    """A push line: ``{"push": name, **fields}`` (never carries ``ok``)."""
    return encode({"push": name, **fields})
