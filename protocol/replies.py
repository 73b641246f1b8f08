"""Protocol v1 replies and pushes as typed messages, with their one wire encoding.

Sans-io (no sockets, no trio). The host builds these objects and only its connection turns them
into lines (:func:`encode_message`); a client turns lines back into the same objects
(:func:`decode_line`). Every class's ``to_wire`` builds the JSON object in the key order
PROTOCOL.md shows, and ``from_wire`` reads it back, so ``from_wire(to_wire(m)) == m``.

Messages:

- :class:`Reply` ``{"id": ..., "ok": ..., ...}``: the answer to one request. Its ``outcome`` is a
  result (``ok: true``, one class per op: :class:`HelloResult`, :class:`GamesResult`,
  :class:`Created`, :class:`SessionsPage`, :class:`Joined`, :class:`Watching`,
  :class:`Resumed`, :class:`ViewReply`, :class:`Accepted`, :class:`Left`, :class:`Pong`; the
  replay ops' :class:`LogPage`, :class:`ReplayState`, :class:`Verified`, :class:`Forked`) or
  :class:`Refused` (``ok: false``, an error code, its message and extra fields).
- pushes ``{"push": ..., ...}``: :class:`EventPush`, :class:`TurnPush`, :class:`EndedPush`,
  :class:`StalledPush`, :class:`ClosedPush`, :class:`PingPush`.

A push's encoded line is kept on the object once made, so one push sent to many connections
(all the spectators of a table) is encoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
import orjson

from protocol.framing import kept
from protocol.messages import ErrorCode, Id, ProtocolError, WireError, error_object

__all__ = [
    "Accepted",
    "Capabilities",
    "ClosedPush",
    "Created",
    "DetachedPush",
    "EndedPush",
    "EventPush",
    "Forked",
    "GameDescription",
    "GamesResult",
    "HelloResult",
    "Joined",
    "Left",
    "LogPage",
    "Message",
    "OptionDescription",
    "Outcome",
    "PingPush",
    "Pong",
    "Push",
    "PUSHES",
    "RESULTS",
    "Refused",
    "ReplayState",
    "Reply",
    "Resumed",
    "SeatInfo",
    "SessionSummary",
    "SessionsPage",
    "Snapshot",
    "StalledPush",
    "TurnPush",
    "ViewPush",
    "Verified",
    "ViewReply",
    "Watching",
    "decode_line",
    "decode_message",
    "encode_message",
]


def _dumps(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


# --- parts ---------------------------------------------------------------------------------------
@attrs.frozen
class SeatInfo:
    """A taken seat, as every ``seats`` list shows it: ``{"seat", "name", "bot"}``."""

    seat: int
    name: str
    bot: bool

    def to_wire(self) -> dict[str, Any]:
        return {"seat": self.seat, "name": self.name, "bot": self.bot}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> SeatInfo:
        return cls(obj["seat"], obj["name"], obj["bot"])


def _seats_to_wire(seats: list[SeatInfo | None]) -> list[dict[str, Any] | None]:
    return [None if s is None else s.to_wire() for s in seats]


def _seats_from_wire(seats: list[Any]) -> list[SeatInfo | None]:
    return [None if s is None else SeatInfo.from_wire(s) for s in seats]


@attrs.frozen
class Snapshot:
    """A session as one viewer sees it (PROTOCOL.md, "snapshot").

    ``outcome``, ``seed`` (hex, or None when the game keeps it secret) and ``aborted`` (the
    host's reason, or None when the game ended it) are sent only once ``ended``; ``aborted``
    only when not None. ``view`` is the game's wire view for this viewer.
    """

    session: str
    game: str
    seq: int
    seats: list[SeatInfo | None]
    started: bool
    ended: bool
    to_act: list[int]
    view: Any
    seed_commitment: str
    outcome: Any = None
    aborted: str | None = None
    seed: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out = {
            "session": self.session,
            "game": self.game,
            "seq": self.seq,
            "seats": _seats_to_wire(self.seats),
            "started": self.started,
            "ended": self.ended,
            "to_act": self.to_act,
            "view": self.view,
            "seed_commitment": self.seed_commitment,
        }
        if self.ended:
            out["outcome"] = self.outcome
            if self.aborted is not None:
                out["aborted"] = self.aborted
            out["seed"] = self.seed
        return out

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Snapshot:
        return cls(
            obj["session"],
            obj["game"],
            obj["seq"],
            _seats_from_wire(obj["seats"]),
            obj["started"],
            obj["ended"],
            obj["to_act"],
            obj["view"],
            obj["seed_commitment"],
            obj.get("outcome"),
            obj.get("aborted"),
            obj.get("seed"),
        )


# --- results (the ``result`` of ``ok: true``) ----------------------------------------------------
@attrs.frozen
class Capabilities:
    """``hello``'s ``capabilities``: ``max_line`` (bytes), ``bots``, ``resume``, ``watch``,
    ``games`` (the installed game ids)."""

    max_line: int
    bots: bool
    resume: bool
    watch: bool
    games: list[str]

    def to_wire(self) -> dict[str, Any]:
        return {
            "max_line": self.max_line,
            "bots": self.bots,
            "resume": self.resume,
            "watch": self.watch,
            "games": self.games,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Capabilities:
        return cls(obj["max_line"], obj["bots"], obj["resume"], obj["watch"], obj["games"])


@attrs.frozen
class HelloResult:
    """``hello``: the protocol spoken, the host's name and version, its ops and capabilities."""

    protocol: int
    host: str
    version: str
    ops: list[str]
    capabilities: Capabilities

    def to_wire(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "host": self.host,
            "version": self.version,
            "ops": self.ops,
            "capabilities": self.capabilities.to_wire(),
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> HelloResult:
        return cls(
            obj["protocol"],
            obj["host"],
            obj["version"],
            obj["ops"],
            Capabilities.from_wire(obj["capabilities"]),
        )


@attrs.frozen
class OptionDescription:
    """One ``create`` option of a game: ``name``, ``default`` (wire value), ``type`` (text for
    people), ``choices`` (the allowed values, or None: any of the type), ``doc``."""

    name: str
    default: Any
    type: str
    choices: list[Any] | None
    doc: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "default": self.default,
            "type": self.type,
            "choices": self.choices,
            "doc": self.doc,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> OptionDescription:
        return cls(obj["name"], obj["default"], obj["type"], obj["choices"], obj["doc"])


@attrs.frozen
class GameDescription:
    """One installed game in ``games``: ``id``, ``title``, ``version``, its seat range,
    ``description`` and ``options``."""

    id: str
    title: str
    version: str
    min_seats: int
    max_seats: int
    description: str
    options: list[OptionDescription]

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "version": self.version,
            "min_seats": self.min_seats,
            "max_seats": self.max_seats,
            "description": self.description,
            "options": [o.to_wire() for o in self.options],
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> GameDescription:
        return cls(
            obj["id"],
            obj["title"],
            obj["version"],
            obj["min_seats"],
            obj["max_seats"],
            obj["description"],
            [OptionDescription.from_wire(o) for o in obj["options"]],
        )


@attrs.frozen
class GamesResult:
    """``games``: one description per installed game."""

    games: list[GameDescription]

    def to_wire(self) -> dict[str, Any]:
        return {"games": [g.to_wire() for g in self.games]}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> GamesResult:
        return cls([GameDescription.from_wire(g) for g in obj["games"]])


@attrs.frozen
class Created:
    """``create``: the new session, its seats, the bot seats, the free ones, its seq."""

    session: str
    game: str
    seats: list[SeatInfo | None]
    bots: list[int]
    free: list[int]
    seq: int
    seed_commitment: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "game": self.game,
            "seats": _seats_to_wire(self.seats),
            "bots": self.bots,
            "free": self.free,
            "seq": self.seq,
            "seed_commitment": self.seed_commitment,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Created:
        return cls(
            obj["session"],
            obj["game"],
            _seats_from_wire(obj["seats"]),
            obj["bots"],
            obj["free"],
            obj["seq"],
            obj["seed_commitment"],
        )


@attrs.frozen
class SessionSummary:
    """One entry of a ``sessions`` page."""

    session: str
    game: str
    seats: list[SeatInfo | None]
    free: list[int]
    started: bool
    ended: bool
    seq: int

    def to_wire(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "game": self.game,
            "seats": _seats_to_wire(self.seats),
            "free": self.free,
            "started": self.started,
            "ended": self.ended,
            "seq": self.seq,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> SessionSummary:
        return cls(
            obj["session"],
            obj["game"],
            _seats_from_wire(obj["seats"]),
            obj["free"],
            obj["started"],
            obj["ended"],
            obj["seq"],
        )


@attrs.frozen
class SessionsPage:
    """``sessions``: one page, and ``next`` (the ``after`` of the next page; None: the last)."""

    sessions: list[SessionSummary]
    next: str | None

    def to_wire(self) -> dict[str, Any]:
        return {"sessions": [s.to_wire() for s in self.sessions], "next": self.next}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> SessionsPage:
        return cls([SessionSummary.from_wire(s) for s in obj["sessions"]], obj["next"])


@attrs.frozen
class Joined:
    """``join``: the seat taken, its secret token, and the snapshot for that seat."""

    seat: int
    token: str
    snapshot: Snapshot

    def to_wire(self) -> dict[str, Any]:
        return {"seat": self.seat, "token": self.token, **self.snapshot.to_wire()}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Joined:
        return cls(obj["seat"], obj["token"], Snapshot.from_wire(obj))


@attrs.frozen
class Watching:
    """``watch``: the spectator's snapshot."""

    snapshot: Snapshot

    def to_wire(self) -> dict[str, Any]:
        return self.snapshot.to_wire()

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Watching:
        return cls(Snapshot.from_wire(obj))


@attrs.frozen
class Resumed:
    """``resume``: the seat the token holds and the snapshot for it."""

    seat: int
    snapshot: Snapshot

    def to_wire(self) -> dict[str, Any]:
        return {"seat": self.seat, **self.snapshot.to_wire()}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Resumed:
        return cls(obj["seat"], Snapshot.from_wire(obj))


@attrs.frozen
class ViewReply:
    """``view``: the snapshot for the role this connection holds (a spectator's if none)."""

    snapshot: Snapshot

    def to_wire(self) -> dict[str, Any]:
        return self.snapshot.to_wire()

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ViewReply:
        return cls(Snapshot.from_wire(obj))


@attrs.frozen
class Accepted:
    """``act``: the action is durable; ``seq`` is the session's last seq after its records."""

    seq: int

    def to_wire(self) -> dict[str, Any]:
        return {"seq": self.seq}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Accepted:
        return cls(obj["seq"])


@attrs.frozen
class Left:
    """``leave``: ``{"left": true}``."""

    def to_wire(self) -> dict[str, Any]:
        return {"left": True}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Left:
        return cls()


@attrs.frozen
class Pong:
    """``ping``: ``{"pong": true}``."""

    def to_wire(self) -> dict[str, Any]:
        return {"pong": True}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Pong:
        return cls()


# --- the replay ops (PROTOCOL.md, "Replay ops") -------------------------------------------------
@attrs.frozen
class LogPage:
    """``log``: a page of a session's records as the viewer may see them (each a JSON object:
    ``seq``, ``type`` and the record's fields, and ``text``, the record in words, when the
    request asked for it), and ``next``, the ``after`` of the next page."""

    session: str
    game: str
    seq: int
    live: bool
    ended: bool
    open: bool
    records: list[dict[str, Any]]
    next: int | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "game": self.game,
            "seq": self.seq,
            "live": self.live,
            "ended": self.ended,
            "open": self.open,
            "records": self.records,
            "next": self.next,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> LogPage:
        return cls(
            obj["session"],
            obj["game"],
            obj["seq"],
            obj["live"],
            obj["ended"],
            obj["open"],
            obj["records"],
            obj["next"],
        )


@attrs.frozen
class ReplayState:
    """``replay``: the state after record ``seq``; ``shown`` is the viewer's ``view``, or with
    ``truth`` the game's whole ``state`` (the wire names it by which it is)."""

    session: str
    game: str
    seq: int
    last: int
    seats: list[SeatInfo | None]
    started: bool
    ended: bool
    to_act: list[int]
    shown: Any
    truth: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "game": self.game,
            "seq": self.seq,
            "last": self.last,
            "seats": _seats_to_wire(self.seats),
            "started": self.started,
            "ended": self.ended,
            "to_act": self.to_act,
            "state" if self.truth else "view": self.shown,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ReplayState:
        truth = "state" in obj
        return cls(
            obj["session"],
            obj["game"],
            obj["seq"],
            obj["last"],
            _seats_from_wire(obj["seats"]),
            obj["started"],
            obj["ended"],
            obj["to_act"],
            obj["state"] if truth else obj["view"],
            truth,
        )


@attrs.frozen
class Verified:
    """``verify``: ``ok``, how many ``records`` were checked, the ``seq`` of the first that
    differs (or None), what differs (``explanation``, None unless open) and a ``warning``."""

    ok: bool
    records: int
    seq: int | None
    explanation: str | None
    warning: str | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "records": self.records,
            "seq": self.seq,
            "explanation": self.explanation,
            "warning": self.warning,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Verified:
        return cls(obj["ok"], obj["records"], obj["seq"], obj["explanation"], obj["warning"])


@attrs.frozen
class Forked:
    """``fork``: the new session, where it came from (``{"session", "seq"}``), its seats, the
    free ones, its seq and a new token per human seat (seat number as a string -> token)."""

    session: str
    game: str
    forked_from: dict[str, Any]
    seats: list[SeatInfo | None]
    free: list[int]
    seq: int
    tokens: dict[str, str]

    def to_wire(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "game": self.game,
            "forked_from": self.forked_from,
            "seats": _seats_to_wire(self.seats),
            "free": self.free,
            "seq": self.seq,
            "tokens": self.tokens,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Forked:
        return cls(
            obj["session"],
            obj["game"],
            obj["forked_from"],
            _seats_from_wire(obj["seats"]),
            obj["free"],
            obj["seq"],
            obj["tokens"],
        )


_CODES: dict[Any, ErrorCode] = {str(c): c for c in ErrorCode}


@attrs.frozen
class Refused:
    """An error reply: ``code`` (:class:`ErrorCode`), ``message`` (for people) and the extra
    fields :data:`protocol.messages.ERRORS` declares for that code."""

    code: ErrorCode
    message: str
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def of(cls, exc: WireError) -> Refused:
        """The refusal a typed error stands for (a :class:`ProtocolError` or one of the host's
        error family; its ``id`` extra left out: that is the request id to answer, see
        :func:`reply_id`)."""
        code, message, extra = exc.reply()
        if "id" in extra:
            extra = {k: v for k, v in extra.items() if k != "id"}
        return cls(_CODES.get(code, code), message, extra)  # type: ignore[arg-type]

    def to_wire(self) -> dict[str, Any]:
        """The ``error`` object (:func:`protocol.messages.error_object`: undeclared extra
        fields are left out, a long message is cut)."""
        return error_object(self.code, self.message, self.extra)

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Refused:
        # a code this side does not know (a newer host's) is kept as the string it is
        code = _CODES.get(obj.get("code"), obj.get("code"))
        extra = {k: v for k, v in obj.items() if k not in ("code", "message")}
        return cls(code, obj.get("message", ""), extra)  # type: ignore[arg-type]


def reply_id(rid: Id, exc: WireError) -> Any:
    """The request id to answer ``exc`` with: a :class:`ProtocolError`'s ``id`` extra if it
    knows better (a request whose id could not be read), else ``rid``."""
    return exc.extra.get("id", rid) if isinstance(exc, ProtocolError) else rid


Result = (
    HelloResult
    | GamesResult
    | Created
    | SessionsPage
    | Joined
    | Watching
    | Resumed
    | ViewReply
    | Accepted
    | Left
    | Pong
    | LogPage
    | ReplayState
    | Verified
    | Forked
)
Outcome = Result | Refused
"""What a request is answered with: its op's result, or a refusal."""

RESULTS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "hello": HelloResult.from_wire,
    "games": GamesResult.from_wire,
    "create": Created.from_wire,
    "sessions": SessionsPage.from_wire,
    "join": Joined.from_wire,
    "watch": Watching.from_wire,
    "resume": Resumed.from_wire,
    "view": ViewReply.from_wire,
    "act": Accepted.from_wire,
    "leave": Left.from_wire,
    "ping": Pong.from_wire,
    "log": LogPage.from_wire,
    "replay": ReplayState.from_wire,
    "verify": Verified.from_wire,
    "fork": Forked.from_wire,
}
"""op -> how to read its ``result``."""


@attrs.frozen
class Reply:
    """The reply to one request: its ``id`` echoed and its outcome (``ok`` is whether the
    outcome is a result rather than a :class:`Refused`)."""

    id: Any
    outcome: Any  # Outcome; a result of an op the reader did not know stays a dict

    @property
    def ok(self) -> bool:
        return not isinstance(self.outcome, Refused)

    def to_wire(self) -> dict[str, Any]:
        o = self.outcome
        if isinstance(o, Refused):
            return {"id": self.id, "ok": False, "error": o.to_wire()}
        return {"id": self.id, "ok": True, "result": o if isinstance(o, dict) else o.to_wire()}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any], op: str | None = None) -> Reply:
        """Read a reply; ``op`` (of the request it answers) says how to read its result
        (unknown or None: the result stays the plain object)."""
        if not obj.get("ok"):
            return cls(obj.get("id"), Refused.from_wire(obj.get("error") or {}))
        result = obj.get("result")
        read = RESULTS.get(op) if op is not None else None
        return cls(obj.get("id"), read(result) if read is not None else result)


# --- pushes --------------------------------------------------------------------------------------
class _Push:
    """What every push shares: the ``push`` tag and the encoded line, kept once made."""

    __slots__ = ()
    name: ClassVar[str]

    def line(self) -> bytes:
        """This push as one ``\\n``-terminated line (encoded once, then kept)."""
        line: bytes | None = self._line  # type: ignore[attr-defined]
        if line is None:  # kept (a table keeps its turn pushes): only its own bytes
            line = kept(_dumps(self.to_wire()))  # type: ignore[attr-defined]
            object.__setattr__(self, "_line", line)
        return line


def _line_field() -> Any:
    return attrs.field(default=None, init=False, eq=False, repr=False, hash=False)


@attrs.frozen
class EventPush(_Push):
    """One log record for a viewer: ``kind`` is ``event``, ``action``, ``seat_taken``,
    ``seat_held``, ``seat_released`` or ``ended``; ``event`` its (redacted) body; ``text`` the
    record in words for this viewer (``""``: nothing to say), sent only to a connection that
    asked with ``"text": true`` (None: the field is left out)."""

    name: ClassVar[str] = "event"
    session: str
    seq: int
    kind: str
    event: Any
    text: str | None = None
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        out = {
            "push": "event",
            "session": self.session,
            "seq": self.seq,
            "kind": self.kind,
            "event": self.event,
        }
        if self.text is not None:
            out["text"] = self.text
        return out

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> EventPush:
        return cls(obj["session"], obj["seq"], obj["kind"], obj["event"], obj.get("text"))

    @classmethod
    def with_encoded_body(
        cls, session: str, seq: int, kind: str, event: Any, encoded: orjson.Fragment
    ) -> EventPush:
        """The push of ``event`` whose JSON encoding is already made (``encoded``, e.g. the
        one its log line was written with): the line splices those bytes in instead of
        encoding the body again. ``encoded`` must be ``orjson.dumps(event)`` wrapped in an
        ``orjson.Fragment``; the line is then byte for byte the one :meth:`line` would make."""
        push = cls(session, seq, kind, event)
        line = _dumps(
            {"push": "event", "session": session, "seq": seq, "kind": kind, "event": encoded}
        )
        object.__setattr__(push, "_line", line)
        return push


@attrs.frozen
class TurnPush(_Push):
    """The seat must act; ``legal`` lists wire actions valid now."""

    name: ClassVar[str] = "turn"
    session: str
    seq: int
    seat: int
    legal: list[Any]
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "turn",
            "session": self.session,
            "seq": self.seq,
            "seat": self.seat,
            "legal": self.legal,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> TurnPush:
        return cls(obj["session"], obj["seq"], obj["seat"], obj["legal"])


@attrs.frozen
class EndedPush(_Push):
    """The session is over: ``outcome`` (None when the host ended it, then ``aborted`` says
    why; ``aborted`` is sent only when not None); ``text`` the end in words (who won, the
    final scores; sent only when not None: to a connection that asked for text)."""

    name: ClassVar[str] = "ended"
    session: str
    seq: int
    outcome: Any
    aborted: str | None = None
    text: str | None = None
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        out = {"push": "ended", "session": self.session, "seq": self.seq, "outcome": self.outcome}
        if self.aborted is not None:
            out["aborted"] = self.aborted
        if self.text is not None:
            out["text"] = self.text
        return out

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> EndedPush:
        return cls(obj["session"], obj["seq"], obj["outcome"], obj.get("aborted"), obj.get("text"))


@attrs.frozen
class StalledPush(_Push):
    """The host could not write the session's log (``reason``: ``store_error``)."""

    name: ClassVar[str] = "stalled"
    session: str
    reason: str
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "stalled", "session": self.session, "reason": self.reason}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> StalledPush:
        return cls(obj["session"], obj["reason"])


@attrs.frozen
class ClosedPush(_Push):
    """The host hangs up (``reason``: ``shutdown``, ``too_many_connections``,
    ``too_many_from_address``, ``idle``, ``line_timeout``, ``slow_consumer``,
    ``unresponsive``)."""

    name: ClassVar[str] = "closed"
    reason: str
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "closed", "reason": self.reason}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ClosedPush:
        return cls(obj["reason"])


@attrs.frozen
class PingPush(_Push):
    """The host asks a connection that plays or watches a session, and has been silent for
    ``serve --ping-after`` seconds, whether it is still there: any complete line answers it (a
    ``ping`` request will do); silence for ``serve --ping-timeout`` seconds more and the host
    hangs up (``closed``, ``unresponsive``). Over a WebSocket the host sends a Ping frame
    instead, which the browser answers by itself."""

    name: ClassVar[str] = "ping"
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "ping"}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> PingPush:
        return cls()


@attrs.frozen
class DetachedPush(_Push):
    """This connection no longer holds ``seat`` of ``session`` (``reason``: ``resumed``, another
    connection resumed the seat; ``released``, the host released it): no more pushes of that
    session follow, ``act`` there is ``not_seated``, and ``resume`` takes the seat back."""

    name: ClassVar[str] = "detached"
    session: str
    seat: int
    reason: str
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "detached",
            "session": self.session,
            "seat": self.seat,
            "reason": self.reason,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> DetachedPush:
        return cls(obj["session"], obj["seat"], obj["reason"])


@attrs.frozen
class ViewPush(_Push):
    """A state push: the viewer's whole ``view`` after the change that ended at ``seq`` (sent
    only to a connection that joined, watched or resumed with ``"view": true``)."""

    name: ClassVar[str] = "view"
    session: str
    seq: int
    view: Any
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "view", "session": self.session, "seq": self.seq, "view": self.view}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ViewPush:
        return cls(obj["session"], obj["seq"], obj["view"])


Push = (
    EventPush | TurnPush | ViewPush | EndedPush | StalledPush | DetachedPush | ClosedPush | PingPush
)
Message = Reply | Push

PUSHES: dict[str, type[Any]] = {
    c.name: c
    for c in (
        EventPush,
        TurnPush,
        ViewPush,
        EndedPush,
        StalledPush,
        DetachedPush,
        ClosedPush,
        PingPush,
    )
}
"""push name -> its class."""


def encode_message(msg: Message) -> bytes:
    """One message as a ``\\n``-terminated JSON line (a push's line is made once and kept)."""
    if isinstance(msg, Reply):
        return _dumps(msg.to_wire())
    return msg.line()


def encode_reply(rid: Any, outcome: Outcome) -> bytes:
    """The line answering request ``rid`` with ``outcome`` (as ``Reply(rid, outcome)``, without
    making that object: this is every reply's path)."""
    if type(outcome) is Refused:
        return _dumps({"id": rid, "ok": False, "error": outcome.to_wire()})
    return _dumps({"id": rid, "ok": True, "result": outcome.to_wire()})


def decode_message(obj: Mapping[str, Any], op: str | None = None) -> Message:
    """A parsed line as a typed message: a push by its ``push`` tag, else a reply (its result
    read as ``op``'s, see :meth:`Reply.from_wire`).

    Raises:
        KeyError, TypeError: the object lacks a field its kind has (not a v1 message).
        ValueError: an unknown push name.
    """
    name = obj.get("push")
    if name is not None:
        cls = PUSHES.get(name)
        if cls is None:
            raise ValueError(f"unknown push {name!r}")
        return cls.from_wire(obj)
    return Reply.from_wire(obj, op)


def decode_line(line: bytes, op: str | None = None) -> Message:
    """:func:`decode_message` of one line.

    Raises:
        orjson.JSONDecodeError: not JSON. And what :func:`decode_message` raises.
    """
    return decode_message(orjson.loads(line), op)
