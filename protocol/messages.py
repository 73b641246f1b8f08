"""Protocol v1 messages: requests, replies, pushes and the closed list of error codes.

Sans-io: :func:`parse_request` turns one line into a typed request (or a :class:`ProtocolError`
that says which error code to answer), and the ``encode_*`` functions turn replies and pushes into
ready lines. PROTOCOL.md documents every op, push, field and code.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import orjson

from protocol.convert import error_text, make_converter

__all__ = [
    "PROTOCOL_VERSION",
    "ERRORS",
    "REQUESTS",
    "ErrorCode",
    "ErrorSpec",
    "HOST_DEFAULT",
    "ProtocolError",
    "Request",
    "WireError",
    "encode",
    "encode_error",
    "error_object",
    "MAX_DEPTH",
    "MAX_ID",
    "encode_ok",
    "error_table",
    "extra_problems",
    "leading_id",
    "nesting_depth",
    "parse_request",
    "safe_id",
    "valid_id",
]

PROTOCOL_VERSION = 1

_log = logging.getLogger("gamehost.protocol")

MAX_MESSAGE = 500
"""The longest error ``message`` sent, in characters (longer ones are cut)."""

MAX_ID = 256
"""The longest string ``id`` accepted, in bytes (UTF-8); a longer one is refused (id null)."""

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a request may have (the request object itself is
level 1); a deeper one is refused with ``bad_request``. orjson parses up to 1,024 levels but
encodes only 254, and Python's ``repr`` stops near 1,000: what the host accepts it can always
write to a log, echo and describe in an error message."""


class ErrorCode(enum.StrEnum):
    """The closed list of error codes a reply may carry (:data:`ERRORS` says what each means)."""

    BAD_JSON = "bad_json"
    LINE_TOO_LONG = "line_too_long"
    UNKNOWN_OP = "unknown_op"
    BAD_REQUEST = "bad_request"
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    UNKNOWN_GAME = "unknown_game"
    BAD_OPTION = "bad_option"
    UNKNOWN_SESSION = "unknown_session"
    SESSION_DAMAGED = "session_damaged"
    SESSION_FULL = "session_full"
    ALREADY_ATTACHED = "already_attached"
    NOT_SEATED = "not_seated"
    BAD_TOKEN = "bad_token"
    NOT_YOUR_TURN = "not_your_turn"
    BAD_ACTION = "bad_action"
    ILLEGAL_ACTION = "illegal_action"
    CONFLICT = "conflict"
    SESSION_ENDED = "session_ended"
    OVERLOADED = "overloaded"
    UNAVAILABLE = "unavailable"
    RECORDS_LOST = "records_lost"
    HIDDEN = "hidden"
    CANNOT_UNDO = "cannot_undo"
    GAME_FAULTED = "game_faulted"
    INTERNAL = "internal"


@attrs.frozen
class ErrorSpec:
    """What an error code means and the extra fields its ``error`` object carries.

    ``fields`` maps each extra field's name to its description (Markdown); ``optional`` names
    those that may be left out (every other one is always present); ``types`` gives each extra
    field's type (a type hint: ``protocol.schema`` makes its JSON Schema). ``code`` and
    ``message`` are in every error and are not listed.
    """

    meaning: str
    fields: dict[str, str] = attrs.field(factory=dict)
    optional: frozenset[str] = frozenset()
    types: dict[str, Any] = attrs.field(factory=dict)


ERRORS: dict[ErrorCode, ErrorSpec] = {
    ErrorCode.BAD_JSON: ErrorSpec(
        "the line is not a JSON object (or not UTF-8), or is beyond the parser (nesting deeper"
        ' than 1,024, a number out of range such as `1e400`, a lone surrogate): see "Request'
        " ids\" for the reply's `id`"
    ),
    ErrorCode.LINE_TOO_LONG: ErrorSpec(
        "the line passed 64 KiB; it was skipped up to its newline (the reply's `id` is null)"
    ),
    ErrorCode.UNKNOWN_OP: ErrorSpec("`op` names no operation"),
    ErrorCode.BAD_REQUEST: ErrorSpec(
        "missing, unknown or mistyped fields (an `id` that is not an integer or a string of at"
        " most 256 bytes included); values out of range (seats, bots, `after` < 0, `limit`);"
        ' arrays and objects nested deeper than 64 levels (see "Request ids" for the reply\'s'
        " `id`)"
    ),
    ErrorCode.UNSUPPORTED_PROTOCOL: ErrorSpec(
        "`hello` asked for a protocol other than 1",
        {"supported": "the protocol numbers this host speaks (a list of integers)"},
        types={"supported": list[int]},
    ),
    ErrorCode.UNKNOWN_GAME: ErrorSpec("`create` named no installed game"),
    ErrorCode.BAD_OPTION: ErrorSpec(
        "a game option is unknown or its value is not allowed",
        {"option": "the option's name"},
        types={"option": str},
    ),
    ErrorCode.UNKNOWN_SESSION: ErrorSpec(
        "no session with that id (live, or ended with its log kept)"
    ),
    ErrorCode.SESSION_DAMAGED: ErrorSpec(
        "the session's log is damaged (e.g. a record that does not match its checksum), or is"
        " not a regular file: the host cannot serve it (the message names the seq and what is"
        " wrong); retrying does not help, only its operator can (`gamehost check` lists the"
        " damaged logs, `gamehost replay --verify` names the damage)"
    ),
    ErrorCode.SESSION_FULL: ErrorSpec(
        "`join`: no free seat, or the seat asked for is taken",
        {"free": "the free seats now (a list of integers, empty when none is free)"},
        types={"free": list[int]},
    ),
    ErrorCode.ALREADY_ATTACHED: ErrorSpec(
        "`join`, `watch` or `resume` on a session this connection already plays or watches"
        ' (see "One role per connection"); `leave` first',
        {"seat": "what the connection holds there: its seat number, or `null` as a spectator"},
        types={"seat": int | None},
    ),
    ErrorCode.NOT_SEATED: ErrorSpec(
        "`act` from a connection that holds no seat there (a spectator included), or `leave`"
        " from one that neither plays nor watches there"
    ),
    ErrorCode.BAD_TOKEN: ErrorSpec("`resume` with a token that holds no seat"),
    ErrorCode.NOT_YOUR_TURN: ErrorSpec("the seat is not in `to_act`"),
    ErrorCode.BAD_ACTION: ErrorSpec(
        "the action object fits none of the game's actions (unknown `type`, missing/extra/"
        "mistyped fields), or the game finds it malformed (a refusal without a rule's `reason`)"
    ),
    ErrorCode.ILLEGAL_ACTION: ErrorSpec(
        "the rules refuse it now",
        {"reason": "the game's typed code (e.g. `card_does_not_match`, `cannot_pass`)"},
        types={"reason": str},
    ),
    ErrorCode.CONFLICT: ErrorSpec(
        "`act` named a `seq` whose answer no longer holds by the freshness rule (see"
        ' "Expected seq"). An older `seq` is often still accepted: it is refused only when,'
        " since then, the seat acted, what it may do changed or it was shown something"
        " private, or when the seq is more than 32 records of play old (presence records do"
        " not count), inside a cause or one at which"
        " the seat was not to act. A `seq` in the future (past the session's last, once the"
        " host has read the log to its end) is refused too. On hosts sharing a database, also"
        " a request that lost the race for its seq to another host twice in a row",
        {"seq": "the session's current seq"},
        types={"seq": int},
    ),
    ErrorCode.SESSION_ENDED: ErrorSpec(
        "`join` or `act` on a session that is over (and `leave` once it is answered from its"
        ' log: see "Ended sessions stay addressable")'
    ),
    ErrorCode.OVERLOADED: ErrorSpec(
        "the session's command queue is full, this connection has 32 requests waiting on that"
        " session already, the host holds `--max-sessions` live sessions or its memory is past"
        " `--max-memory`, a `create` limit was reached, or a `resume` of a seat resumed 20 times"
        ' within the last 60 s (see "Limits"); retry later',
        {
            "retry_after": "seconds until the next `create` is allowed (the per-address rate"
            " only; `null` when creates from that address are not allowed at all), or the next"
            " `resume` of that seat (a seat resumed 20 times within 60 s)"
        },
        optional=frozenset({"retry_after"}),
        types={"retry_after": float | None},
    ),
    ErrorCode.UNAVAILABLE: ErrorSpec(
        "the host is shutting down, or the session's log could not be written or read just now"
        " (the session reloads its log and carries on; retry); or a `resume` from a connection"
        " that closed its sending side before the reply (it takes nothing: the seat went back)"
    ),
    ErrorCode.RECORDS_LOST: ErrorSpec(
        "`resume` with an `after` past the log's last record: the host lost records the client"
        " saw (the host logs `log_lost_records`)",
        {"seq": "the log's last seq"},
        types={"seq": int},
    ),
    ErrorCode.HIDDEN: ErrorSpec(
        "a replay op (`log`, `replay`, `verify`'s explanation, `fork`) asked for what its"
        " connection may not see: a seat's view without that seat's token, or the full truth"
        ' of a session that is still live or whose game keeps its seed (see "Replay ops")'
    ),
    ErrorCode.CANNOT_UNDO: ErrorSpec(
        '`undo` or `undo_answer` refused; nothing changed (see "Undo by consent")',
        {
            "reason": "why: `nothing_to_undo`, `acted_since`, `timed_out`, `not_undoable`,"
            " `pending` (for `undo`), `no_request` or `not_asked` (for `undo_answer`)"
        },
        types={"reason": str},
    ),
    ErrorCode.GAME_FAULTED: ErrorSpec(
        "the session's game faulted (its code raised, ran past its time or memory budget, or"
        " gave what cannot be sent), so the host runs that code for the session no more:"
        ' `replay`, `verify` and `fork` of a session that ended `aborted: "game_error"` get'
        " this at once; so does a replay op whose game code faults (a live session then ends"
        ' `aborted: "game_error"`), and a `view`, `watch` or `resume` of a session that is over'
        " whose game faults while answering it. The session's records (`log`: events `null`"
        " unless `truth`) and its end (`view`, `watch`, `resume`: a `null` view) are still"
        ' given; retrying does not help (see "Replay ops")'
    ),
    ErrorCode.INTERNAL: ErrorSpec(
        "a bug in the host or a game: it is logged, nothing changed, the connection stays up."
        " A game's fault during a client's command fails only that command (nothing is"
        " appended); during a step the host drives, in a view or redact, or past the game's"
        ' time or memory budget, it ends the session with `aborted: "game_error"`'
    ),
}
"""The one source of the error codes and their extra fields: :func:`encode_error` holds every
error reply to it, and PROTOCOL.md's error table is :func:`error_table` (a test compares them)."""


def extra_problems(code: ErrorCode | str, extra: dict[str, Any]) -> list[str]:
    """What is wrong with an error's extra fields by :data:`ERRORS` (empty: nothing).

    Returns one sentence per problem: an unknown code, an undeclared field, a missing one.
    """
    try:
        spec = ERRORS[ErrorCode(code)]
    except ValueError:
        return [f"{code!r} is not an error code"]
    out = [f"{code}: undeclared extra field {k!r}" for k in extra if k not in spec.fields]
    out += [
        f"{code}: missing extra field {k!r}"
        for k in spec.fields
        if k not in extra and k not in spec.optional
    ]
    return out


def error_table() -> str:
    """PROTOCOL.md's error table (Markdown), rendered from :data:`ERRORS`."""
    rows = ["| code | meaning | extra fields |", "|---|---|---|"]
    for code, spec in ERRORS.items():
        extra = "; ".join(
            f"`{name}`{' (optional)' if name in spec.optional else ''}: {doc}"
            for name, doc in spec.fields.items()
        )
        rows.append(f"| `{code}` | {spec.meaning} | {extra} |")
    return "\n".join(rows) + "\n"


error_reply_hook: Callable[[str, dict[str, Any]], None] | None = None
"""Called with (code, extra fields) for every error reply :func:`encode_error` makes (tests set
it to hold each reply to :data:`ERRORS`)."""


class ProtocolError(Exception):
    """A request that must be answered with an error.

    Args:
        code: the :class:`ErrorCode`.
        message: for people.
        extra: more fields for the ``error`` object, as :data:`ERRORS` declares them for
            ``code`` (e.g. ``option``, ``reason``, ``seq``); ``id`` is not a field but the
            request id to answer, when the error knows it better than its caller.
    """

    def __init__(self, code: ErrorCode, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def reply(self) -> tuple[str, str, dict[str, Any]]:
        """``(code, message, extra fields)`` (``id`` among them if the error set it)."""
        return str(self.code), self.message, dict(self.extra)


class WireError(Protocol):
    """Any error that knows its error reply: a :class:`ProtocolError`, or one of the host's own
    error family (``host.errors.GamehostError``), which this sans-io module does not import."""

    def reply(self) -> tuple[str, str, dict[str, Any]]:
        """``(code, message, extra fields)``: the code one of :class:`ErrorCode`, the extra
        fields those :data:`ERRORS` declares for it (and ``id``: the request id to answer)."""
        ...


# --- requests ------------------------------------------------------------------------------------
Id = int | str | None


def _p(doc: str, default: Any = attrs.NOTHING) -> Any:
    """A request field with its description (in wire terms: ``protocol.schema`` shows it)."""
    return attrs.field(default=default, metadata={"doc": doc})


_SESSION = "the session id"


@attrs.frozen
class Hello:
    """Say which protocol you speak (optional: every op works without it)."""

    protocol: int = _p("the protocol version (1)", PROTOCOL_VERSION)
    client: str | None = _p("your client's name, for the host's log", None)


@attrs.frozen
class Games:
    """List the installed games and their options."""


class _HostDefault:
    """The type of :data:`HOST_DEFAULT`."""

    def __repr__(self) -> str:
        return "HOST_DEFAULT"


HOST_DEFAULT: Any = _HostDefault()
"""A ``create`` field left out: the host's own setting applies (``null`` means something else)."""


@attrs.frozen
class Create:
    """Start a new session (the creator is not seated: it joins like anyone)."""

    game: str = _p("the game's id (see `games`)")
    options: dict[str, Any] | None = _p(
        "the game's options (see `games`); those left out take their defaults", None
    )
    seats: int | None = _p("how many seats (default: the game's minimum)", None)
    bots: int = _p("how many of the seats host bots take (the last seats)", 0)
    turn_timeout: float | None = _p(
        "seconds a seat may take to act before the host plays the bot's choice for it; null"
        " or 0: no turn timer; left out: the host's (`serve --turn-timeout`)",
        HOST_DEFAULT,
    )


MAX_SESSIONS_PAGE = 500
"""The most sessions one ``sessions`` reply lists (``limit``)."""


@attrs.frozen
class Sessions:
    """One page of live sessions, by id: those with an id after ``after``, at most ``limit``."""

    game: str | None = _p("only sessions of this game (null: all)", None)
    limit: int = _p("the most sessions in the page, 1 to 500", 100)
    after: str | None = _p("only session ids after this one (the previous page's `next`)", None)


_VIEW_FLAG = "whether to get a `view` push after every change"


_TEXT_FLAG = "whether event and ended pushes carry `text`: the record in words for this viewer"


@attrs.frozen
class Join:
    """Take a seat."""

    session: str = _p(_SESSION)
    name: str | None = _p("your name at the table (default: `player`)", None)
    seat: int | None = _p("the seat to take (default: the lowest free one)", None)
    view: bool = _p(_VIEW_FLAG, False)
    text: bool = _p(_TEXT_FLAG, False)


@attrs.frozen
class Watch:
    """Watch a session as a spectator."""

    session: str = _p(_SESSION)
    view: bool = _p(_VIEW_FLAG, False)
    text: bool = _p(_TEXT_FLAG, False)


@attrs.frozen
class Resume:
    """Take back the seat a token holds, on this connection."""

    session: str = _p(_SESSION)
    token: str = _p("the seat's token (from `join` or `fork`)")
    after: int | None = _p(
        "the last seq you saw: the records after it are pushed before the reply (null: none)",
        None,
    )
    view: bool = _p(_VIEW_FLAG, False)
    text: bool = _p(_TEXT_FLAG, False)


@attrs.frozen
class View:
    """A snapshot for the role this connection holds in the session (else a spectator's)."""

    session: str = _p(_SESSION)


@attrs.frozen
class Act:
    """Play an action from the seat this connection holds."""

    session: str = _p(_SESSION)
    action: Any = _p(
        "the action, as the `legal` list of a `turn` push shows it (its shape: `gamehost schema"
        " --game ID`, `action`)"
    )
    seq: int | None = _p(
        "the seq of the `turn` push you answer (null: whatever the session's is); see"
        ' PROTOCOL.md, "Expected seq"',
        None,
    )


@attrs.frozen
class Undo:
    """Ask to take back the last action of the seat this connection holds (the other human
    seats must agree; see PROTOCOL.md, "Undo by consent")."""

    session: str = _p(_SESSION)


@attrs.frozen
class UndoAnswer:
    """Answer the request to take back an action that waits for this connection's seat."""

    session: str = _p(_SESSION)
    accept: bool = _p("true: agree that it is taken back; false: refuse")


@attrs.frozen
class Leave:
    """Stop playing or watching the session (a seat held is released, and stays its token's)."""

    session: str = _p(_SESSION)


@attrs.frozen
class Ping:
    """Are you there? (Also the answer to a `ping` push.)"""


MAX_LOG_PAGE = 1000
"""The most records one ``log`` reply holds (``limit``)."""

_SEAT_VIEWER = "see the records as this seat does (with its `token`; null: as a spectator)"
_TRUTH = "see everything, nothing redacted (only where the session is open)"
_TOKEN = "the token of `seat`"


@attrs.frozen
class Log:
    """A page of a session's log, as a viewer sees it."""

    session: str = _p(_SESSION)
    after: int | None = _p("the records after this seq (null: from the header, seq 0)", None)
    limit: int = _p("the most records in the page, 1 to 1,000", 200)
    seat: int | None = _p(_SEAT_VIEWER, None)
    truth: bool = _p(_TRUTH, False)
    token: str | None = _p(_TOKEN, None)
    text: bool = _p("whether each record carries `text`: the record in words for the viewer", False)


@attrs.frozen
class Replay:
    """The state after a record, as a viewer sees it."""

    session: str = _p(_SESSION)
    seq: int = _p("the record the state is after")
    seat: int | None = _p(_SEAT_VIEWER, None)
    truth: bool = _p(_TRUTH, False)
    token: str | None = _p(_TOKEN, None)


@attrs.frozen
class Verify:
    """Re-run a session's log on the host's code: the first record that differs, if any."""

    session: str = _p(_SESSION)


@attrs.frozen
class Fork:
    """Start a new live session from a session's records 0 to `seq`."""

    session: str = _p(_SESSION)
    seq: int = _p("the last record to keep (it must end a cause)")


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
    "undo": Undo,
    "undo_answer": UndoAnswer,
    "leave": Leave,
    "ping": Ping,
    "log": Log,
    "replay": Replay,
    "verify": Verify,
    "fork": Fork,
}
"""op name -> its parameters class (the request's fields besides ``id`` and ``op``)."""


@attrs.frozen
class Request:
    """A parsed request: the echoed ``id``, the ``op`` and its typed parameters."""

    id: Id
    op: str
    params: Any


_conv = make_converter()


_LEADING_ID = re.compile(
    rb'\s*\{\s*"id"\s*:\s*(-?(?:0|[1-9][0-9]*)|"(?:[^"\\\x00-\x1f]|\\.)*")\s*[,}]'
)
"""A line whose first member is ``"id"`` with an integer or string value (cheap to find even
when the rest of the line cannot be parsed)."""


def valid_id(rid: Any) -> bool:
    """Whether ``rid`` is an id a request may carry: an integer (not a boolean), a string of at
    most :data:`MAX_ID` bytes, or None (left out)."""
    if rid is None:
        return True
    if isinstance(rid, str):
        return len(rid) <= MAX_ID // 4 or len(rid.encode("utf-8", "surrogatepass")) <= MAX_ID
    return isinstance(rid, int) and not isinstance(rid, bool)


def safe_id(rid: Any) -> Any:
    """The id to echo in the reply refusing a request whose ``id`` is ``rid``: ``rid`` itself
    when it is valid or a scalar of another type (a float, a boolean), else None (an array, an
    object, an over-long string: nothing the client could match, and nothing whose size or
    nesting the reply should carry)."""
    if valid_id(rid) or isinstance(rid, bool | float):
        return rid
    return None


def nesting_depth(obj: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply arrays and objects nest in ``obj`` (a scalar: 0, ``[]``: 1, ``[[1]]``: 2),
    counted without recursion; the walk stops once past ``limit`` (then ``limit + 1``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return limit + 1
        stack.extend((v, depth + 1) for v in value if isinstance(v, dict | list))
    return deepest


def leading_id(line: bytes) -> Id:
    """The request id of a line the parser refused, when ``"id"`` is the object's first member
    and its value a readable integer or string (of at most :data:`MAX_ID` bytes); else None."""
    m = _LEADING_ID.match(line)
    if m is None:
        return None
    try:
        rid = orjson.loads(m.group(1))
    except orjson.JSONDecodeError:  # a lone surrogate, an integer past 64 bits
        return None
    return rid if isinstance(rid, int | str) and valid_id(rid) else None


def parse_request(line: bytes) -> Request:
    """Parse one line (without terminator) into a :class:`Request`.

    The id rules (PROTOCOL.md, "Request ids"): an ``id`` must be an integer or a string of at
    most :data:`MAX_ID` bytes (or absent: null). A line that parses but whose ``id`` is
    something else is refused with ``bad_request``, answered with that value when it is a
    scalar (a float, a boolean) and with null otherwise (:func:`safe_id`). A line nested
    deeper than :data:`MAX_DEPTH` levels is ``bad_request`` too, answered with its id when
    that is valid. A line that does not parse is ``bad_json``, answered with the id
    :func:`leading_id` recovers (else null).

    Raises:
        ProtocolError: ``bad_json`` (not UTF-8 JSON, beyond the parser, or not an object),
            ``bad_request`` (no ``op``, a bad ``id``, too deep, missing/extra/mistyped fields)
            or ``unknown_op``; the error's ``extra["id"]`` holds the request id to answer.
    """
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(ErrorCode.BAD_JSON, f"not JSON: {exc}", id=leading_id(line)) from None
    if not isinstance(msg, dict):
        raise ProtocolError(ErrorCode.BAD_JSON, "a request must be a JSON object")
    rid = msg.pop("id", None)
    if not valid_id(rid):
        raise ProtocolError(
            ErrorCode.BAD_REQUEST,
            f"'id' must be an integer or a string of at most {MAX_ID} bytes (or left out)",
            id=safe_id(rid),
        )
    # cheap first: a line with few brackets cannot nest deeply, and most have few
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and nesting_depth(msg) > MAX_DEPTH:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST,
            f"a request may nest arrays and objects at most {MAX_DEPTH} levels deep",
            id=rid,
        )
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


def encode_error(rid: Any, code: ErrorCode | str, message: str, **extra: Any) -> bytes:
    """``{"id": rid, "ok": false, "error": {"code": code, "message": message, **extra}}``.

    ``rid`` is normally an :data:`Id`; a ``bad_request`` for a mistyped id echoes that value.
    The ``error`` object is :func:`error_object`'s.
    """
    return encode({"id": rid, "ok": False, "error": error_object(code, message, extra)})


def error_object(code: ErrorCode | str, message: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """An error reply's ``error`` object: ``{"code", "message", **extra}``.

    Extra fields :data:`ERRORS` does not declare for ``code`` are left out, never sent
    undocumented: a host bug, which :data:`error_reply_hook` sees (so the tests catch it) or,
    without a hook, is logged (``gamehost.protocol``, level error). A ``message`` longer than
    :data:`MAX_MESSAGE` characters is cut.
    """
    if error_reply_hook is not None:
        error_reply_hook(str(code), dict(extra))
    elif problems := extra_problems(code, dict(extra)):
        _log.error("error reply not as PROTOCOL.md lists it: %s", "; ".join(problems))
    spec = ERRORS.get(code)  # type: ignore[call-overload]  # a StrEnum hashes as its str
    if spec is not None:
        extra = {k: v for k, v in extra.items() if k in spec.fields}
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return {"code": str(code), "message": message, **extra}


def encode_protocol_error(rid: Id, exc: WireError) -> bytes:
    """The reply for a :class:`ProtocolError` or any other :class:`WireError` (the one place
    the host turns a typed error into a reply; an ``id`` extra, if any, wins over ``rid``)."""
    code, message, extra = exc.reply()
    rid = extra.pop("id", rid)
    return encode_error(rid, code, message, **extra)


def push(name: str, /, **fields: Any) -> bytes:
    """A push line: ``{"push": name, **fields}`` (never carries ``ok``)."""
    return encode({"push": name, **fields})
