"""Protocol v1 replies and pushes as typed messages, with their one wire encoding.

Sans-io (no sockets, no trio). The host builds these objects and only its connection turns them
into lines (:func:`encode_message`); a client turns lines back into the same objects
(:func:`decode_line`). Every class's ``to_wire`` builds the JSON object in the key order
PROTOCOL.md shows, and ``from_wire`` reads it back, so ``from_wire(to_wire(m)) == m``.

Messages:

- :class:`Reply` ``{"id": ..., "ok": ..., ...}``: the answer to one request. Its ``outcome`` is a
  result (``ok: true``, one class per op: :class:`HelloResult`, :class:`GamesResult`,
  :class:`Created`, :class:`SessionsPage`, :class:`Joined`, :class:`Watching`,
  :class:`Resumed`, :class:`ViewReply`, :class:`Accepted`, :class:`UndoResult`, :class:`Left`,
  :class:`Pong`; the
  replay ops' :class:`LogPage`, :class:`ReplayState`, :class:`Verified`, :class:`Forked`) or
  :class:`Refused` (``ok: false``, an error code, its message and extra fields).
- pushes ``{"push": ..., ...}``: :class:`EventPush`, :class:`TurnPush`, :class:`ViewPush`,
  :class:`PresencePush`, :class:`UndoAskedPush`, :class:`UndoDonePush`,
  :class:`UndoRefusedPush`, :class:`EndedPush`, :class:`StalledPush`, :class:`DetachedPush`,
  :class:`ClosedPush`, :class:`PingPush`.

Every class is also the source of its JSON Schema (``protocol.schema``, ``gamehost schema
--protocol``): its attrs fields with their type hints, and each field's ``metadata["doc"]`` (its
description, in wire terms). Metadata the schema reads besides ``doc``: ``omit_none`` (the field
is left out when null), ``optional`` (present only when the description says), ``flatten`` (a
nested object's fields are the message's own) and ``wire`` (the field's names on the wire, or
False: never sent).

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
    "Deadline",
    "Expiry",
    "UNDO_REFUSALS",
    "UNDO_STATUSES",
    "UndoAskedPush",
    "UndoDonePush",
    "UndoRefusedPush",
    "UndoRequest",
    "UndoResult",
    "PresencePush",
    "RESULT_TYPES",
    "Timers",
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
    "PRESENCE_REASONS",
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


def _f(doc: str, **meta: Any) -> Any:
    """An attrs field with its description (in wire terms: the schema shows it), and the
    schema metadata of the module docstring; ``default`` or ``factory`` as attrs takes them."""
    default = meta.pop("default", attrs.NOTHING)
    factory = meta.pop("factory", None)
    if factory is not None:
        return attrs.field(factory=factory, metadata={"doc": doc, **meta})
    return attrs.field(default=default, metadata={"doc": doc, **meta})


# --- parts ---------------------------------------------------------------------------------------
@attrs.frozen
class SeatInfo:
    """A taken seat, as every `seats` list shows it (a free seat is null there)."""

    seat: int = _f("the seat number, from 0")
    name: str = _f("the player's name (a host bot's: `bot` and its seat number)")
    bot: bool = _f("a host bot plays this seat")

    def to_wire(self) -> dict[str, Any]:
        return {"seat": self.seat, "name": self.name, "bot": self.bot}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> SeatInfo:
        return cls(obj["seat"], obj["name"], obj["bot"])


def _seats_to_wire(seats: list[SeatInfo | None]) -> list[dict[str, Any] | None]:
    return [None if s is None else s.to_wire() for s in seats]


def _seats_from_wire(seats: list[Any]) -> list[SeatInfo | None]:
    return [None if s is None else SeatInfo.from_wire(s) for s in seats]


_SEATS = "one entry per seat: null while the seat is free, else who took it"
_TO_ACT = "the seats whose action is awaited (several at once is normal; empty when none is)"
_CONNECTED = (
    "per seat: whether a connection holds it (true for a host bot's seat, false for a free"
    " one, and for every human seat once the session has ended); derived from the log's"
    " seat_taken, seat_held and seat_released records"
)
_DEADLINE = (
    "when the host plays the bot's choice for the seats in `to_act` (the turn timer), or null"
    " when no timer runs: none is set, nobody is to act, or a host bot is"
)


@attrs.frozen
class Deadline:
    """The turn timer's end: when the host plays the bot's choice for the seats to act."""

    at: str = _f(
        "the moment in UTC, to the millisecond (`2026-11-30T10:02:00.123Z`): the time of the"
        " last record of play plus the session's turn timeout, read from the log, so every"
        " host gives the same"
    )
    seconds_left: float = _f(
        "seconds from when the host made this message until `at` (0 once it has passed), to"
        " the millisecond: count down from this if your clock is not the host's"
    )

    def to_wire(self) -> dict[str, Any]:
        return {"at": self.at, "seconds_left": self.seconds_left}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any] | None) -> Deadline | None:
        return None if obj is None else cls(obj["at"], obj["seconds_left"])


def _deadline_wire(deadline: Deadline | None) -> dict[str, Any] | None:
    return None if deadline is None else deadline.to_wire()


@attrs.frozen
class Timers:
    """The session's timers (PROTOCOL.md, "No session lives for ever without its players")."""

    turn_timeout: float | None = _f(
        "seconds a seat may take to act before the host plays the bot's choice for it; null:"
        " no turn timer",
        default=None,
    )
    abandon_after: float | None = _f(
        "seconds the session may have no connection holding a human seat before the host ends"
        " it (`aborted`: `abandoned`); null: never",
        default=None,
    )
    absent_after: int = _f(
        "timed-out turns in a row after which a seat no connection holds is played at once,"
        " until a connection resumes it",
        default=0,
    )

    def to_wire(self) -> dict[str, Any]:
        return {
            "turn_timeout": self.turn_timeout,
            "abandon_after": self.abandon_after,
            "absent_after": self.absent_after,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Timers:
        return cls(obj["turn_timeout"], obj["abandon_after"], obj["absent_after"])


@attrs.frozen
class Expiry:
    """When a request to take back an action lapses unanswered (PROTOCOL.md, "Undo by
    consent")."""

    at: str = _f(
        "the moment in UTC, to the millisecond (`2026-11-30T10:02:00.123Z`): the time of the"
        " `undo_asked` record plus 30 seconds, read from the log, so every host gives the same"
    )
    seconds_left: float = _f(
        "seconds from when the host made this message until `at` (0 once it has passed), to"
        " the millisecond"
    )

    def to_wire(self) -> dict[str, Any]:
        return {"at": self.at, "seconds_left": self.seconds_left}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Expiry:
        return cls(obj["at"], obj["seconds_left"])


@attrs.frozen
class UndoRequest:
    """A request to take back an action that waits for answers."""

    seat: int = _f("the seat that asked (it took the action)")
    action_seq: int = _f("the seq of the `action` record to take back")
    action: Any = _f("that action, as `act` took it")
    waiting: list[int] = _f(
        "the seats whose answer is still awaited (every other human seat at first; host bots"
        " agree at once): each must accept for the action to be taken back"
    )
    expires: Expiry = _f("when the request lapses if some seat has not answered")

    def to_wire(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "action_seq": self.action_seq,
            "action": self.action,
            "waiting": self.waiting,
            "expires": self.expires.to_wire(),
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any] | None) -> UndoRequest | None:
        if obj is None:
            return None
        return cls(
            obj["seat"],
            obj["action_seq"],
            obj["action"],
            obj["waiting"],
            Expiry.from_wire(obj["expires"]),
        )


@attrs.frozen
class Snapshot:
    """A session as one viewer sees it now (PROTOCOL.md, "snapshot").

    ``outcome``, ``seed`` (hex, or None when the game keeps it secret) and ``aborted`` (the
    host's reason, or None when the game ended it) are sent only once ``ended``; ``aborted``
    only when not None. ``view`` is the game's wire view for this viewer. ``deadline``,
    ``connected``, ``options``, ``timers`` and ``undo`` come last (they were added after the
    others).
    """

    session: str = _f("the session id")
    game: str = _f("the game's id")
    seq: int = _f("the seq of the session's last record: pushes follow from `seq` + 1")
    seats: list[SeatInfo | None] = _f(_SEATS)
    started: bool = _f("every seat was taken and the game began")
    ended: bool = _f("the session is over")
    to_act: list[int] = _f(_TO_ACT)
    view: Any = _f(
        "the game's view for this viewer: only what it may see (its shape: `gamehost schema"
        " --game ID`, `view`); null once the game's code is not run any more"
    )
    seed_commitment: str = _f("sha256 of the session's secret seed, hex")
    outcome: Any = _f(
        "sent once `ended`: the game's outcome, or null when the host ended the session",
        default=None,
        optional=True,
    )
    aborted: str | None = _f(
        "sent once `ended` when the host ended the session: `too_long`, `abandoned` or"
        " `game_error`",
        default=None,
        omit_none=True,
    )
    seed: str | None = _f(
        "sent once `ended`: the seed, hex, or null when the game keeps it secret",
        default=None,
        optional=True,
    )
    deadline: Deadline | None = _f(_DEADLINE, default=None)
    connected: list[bool] = _f(_CONNECTED, factory=list)
    options: dict[str, Any] = _f(
        "the session's options, every one with its value (those `create` left out at their"
        " defaults)",
        factory=dict,
    )
    timers: Timers = _f("the session's timers", factory=Timers)
    undo: UndoRequest | None = _f(
        "the request to take back an action that waits for answers, or null when none does",
        default=None,
    )

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
        out["deadline"] = _deadline_wire(self.deadline)
        out["connected"] = self.connected
        out["options"] = self.options
        out["timers"] = self.timers.to_wire()
        out["undo"] = None if self.undo is None else self.undo.to_wire()
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
            Deadline.from_wire(obj.get("deadline")),
            obj.get("connected", []),
            obj.get("options", {}),
            Timers.from_wire(obj["timers"]) if "timers" in obj else Timers(),
            UndoRequest.from_wire(obj.get("undo")),
        )


# --- results (the ``result`` of ``ok: true``) ----------------------------------------------------
@attrs.frozen
class Capabilities:
    """What the host offers."""

    max_line: int = _f("the longest line the host reads, in bytes")
    bots: bool = _f("`create` may seat host bots")
    resume: bool = _f("a seat's token takes it back with `resume`")
    watch: bool = _f("sessions may be watched")
    games: list[str] = _f("the installed games' ids")

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
    """`hello`: the protocol spoken, the host's name and version, its ops and capabilities."""

    protocol: int = _f("the protocol version spoken (1)")
    host: str = _f("the host's name")
    version: str = _f("the host's version")
    ops: list[str] = _f("every op the host answers")
    capabilities: Capabilities = _f("what the host offers")

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
    """One `create` option of a game."""

    name: str = _f("the option's name")
    default: Any = _f("its value when `create` leaves it out")
    type: str = _f("its type, for people (`int`, `bool`, ...)")
    choices: list[Any] | None = _f("the values allowed, or null: any value of the type")
    doc: str = _f("what it does")

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
    """One installed game."""

    id: str = _f("the game's id (what `create` names)")
    title: str = _f("its name for people")
    version: str = _f("its version")
    min_seats: int = _f("the fewest seats a session may have")
    max_seats: int = _f("the most seats a session may have")
    description: str = _f("what the game is")
    options: list[OptionDescription] = _f("its `create` options")

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
    """`games`: one description per installed game."""

    games: list[GameDescription] = _f("the installed games")

    def to_wire(self) -> dict[str, Any]:
        return {"games": [g.to_wire() for g in self.games]}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> GamesResult:
        return cls([GameDescription.from_wire(g) for g in obj["games"]])


@attrs.frozen
class Created:
    """`create`: the new session, its seats, the bot seats, the free ones, its seq."""

    session: str = _f("the new session's id")
    game: str = _f("the game's id")
    seats: list[SeatInfo | None] = _f(_SEATS)
    bots: list[int] = _f("the seats of the host bots (the last seats)")
    free: list[int] = _f("the seats still free")
    seq: int = _f("the seq of the session's last record (the number of bots, or more)")
    seed_commitment: str = _f("sha256 of the session's secret seed, hex")

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
    """One live session in a `sessions` page."""

    session: str = _f("the session id")
    game: str = _f("the game's id")
    seats: list[SeatInfo | None] = _f(_SEATS)
    free: list[int] = _f("the seats still free")
    started: bool = _f("every seat was taken and the game began")
    ended: bool = _f("the session is over")
    seq: int = _f("the seq of the session's last record")

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
    """`sessions`: one page of live sessions, ordered by id."""

    sessions: list[SessionSummary] = _f("the sessions of this page")
    next: str | None = _f("the `after` to send for the next page; null on the last page")

    def to_wire(self) -> dict[str, Any]:
        return {"sessions": [s.to_wire() for s in self.sessions], "next": self.next}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> SessionsPage:
        return cls([SessionSummary.from_wire(s) for s in obj["sessions"]], obj["next"])


_SNAPSHOT_DOC = "the session as this connection's seat (or a spectator) sees it"


@attrs.frozen
class Joined:
    """`join`: the seat taken, its secret token, and the snapshot for that seat."""

    seat: int = _f("the seat taken")
    token: str = _f("the seat's secret: keep it to `resume` the seat")
    snapshot: Snapshot = _f(_SNAPSHOT_DOC, flatten=True)

    def to_wire(self) -> dict[str, Any]:
        return {"seat": self.seat, "token": self.token, **self.snapshot.to_wire()}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Joined:
        return cls(obj["seat"], obj["token"], Snapshot.from_wire(obj))


@attrs.frozen
class Watching:
    """`watch`: the spectator's snapshot."""

    snapshot: Snapshot = _f(_SNAPSHOT_DOC, flatten=True)

    def to_wire(self) -> dict[str, Any]:
        return self.snapshot.to_wire()

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Watching:
        return cls(Snapshot.from_wire(obj))


@attrs.frozen
class Resumed:
    """`resume`: the seat the token holds and the snapshot for it."""

    seat: int = _f("the seat taken back")
    snapshot: Snapshot = _f(_SNAPSHOT_DOC, flatten=True)

    def to_wire(self) -> dict[str, Any]:
        return {"seat": self.seat, **self.snapshot.to_wire()}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Resumed:
        return cls(obj["seat"], Snapshot.from_wire(obj))


@attrs.frozen
class ViewReply:
    """`view`: the snapshot for the role this connection holds (a spectator's if none)."""

    snapshot: Snapshot = _f(_SNAPSHOT_DOC, flatten=True)

    def to_wire(self) -> dict[str, Any]:
        return self.snapshot.to_wire()

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ViewReply:
        return cls(Snapshot.from_wire(obj))


@attrs.frozen
class Accepted:
    """`act`: the action is durable."""

    seq: int = _f(
        "the session's last seq after the action's records (the pushes of those records come"
        " after this reply)"
    )

    def to_wire(self) -> dict[str, Any]:
        return {"seq": self.seq}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Accepted:
        return cls(obj["seq"])


UNDO_STATUSES = ("asked", "done", "refused")
"""An ``undo`` or ``undo_answer`` result's ``status``."""


@attrs.frozen
class UndoResult:
    """`undo` and `undo_answer`: the records are durable; where the request stands."""

    seq: int = _f(
        "the session's last seq after the request's records (their pushes come after this reply)"
    )
    status: str = _f(
        "`asked`: the request waits for other seats' answers; `done`: the action is taken back"
        " (nobody had to be asked, or this was the last agreement awaited); `refused`: this"
        " answer refused it"
    )

    def to_wire(self) -> dict[str, Any]:
        return {"seq": self.seq, "status": self.status}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> UndoResult:
        return cls(obj["seq"], obj["status"])


@attrs.frozen
class Left:
    """`leave`: `{"left": true}`."""

    WIRE_CONSTANTS: ClassVar[dict[str, Any]] = {"left": True}

    def to_wire(self) -> dict[str, Any]:
        return {"left": True}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Left:
        return cls()


@attrs.frozen
class Pong:
    """`ping`: `{"pong": true}`."""

    WIRE_CONSTANTS: ClassVar[dict[str, Any]] = {"pong": True}

    def to_wire(self) -> dict[str, Any]:
        return {"pong": True}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Pong:
        return cls()


# --- the replay ops (PROTOCOL.md, "Replay ops") -------------------------------------------------
@attrs.frozen
class LogPage:
    """`log`: a page of a session's records as the viewer may see them."""

    session: str = _f("the session id")
    game: str = _f("the game's id")
    seq: int = _f("the log's last seq")
    live: bool = _f("the session is live on the answering host")
    ended: bool = _f("the session is over")
    open: bool = _f(
        "what is hidden may be shown (the session ended and its game reveals the seed, or the"
        " host runs with `--debug-replay`)"
    )
    records: list[dict[str, Any]] = _f(
        "the records after `after` (each: `seq`, `type`, `ts` and the record's fields, hidden"
        " parts redacted for the viewer, and `text`, the record in words, when the request"
        " asked for it)"
    )
    next: int | None = _f("the `after` of the next page; null on the last page")

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
    """`replay`: the state after record `seq`, as the viewer may see it."""

    session: str = _f("the session id")
    game: str = _f("the game's id")
    seq: int = _f("the record the state is after")
    last: int = _f("the log's last seq")
    seats: list[SeatInfo | None] = _f(_SEATS)
    started: bool = _f("every seat was taken and the game began")
    ended: bool = _f("the session is over")
    to_act: list[int] = _f(_TO_ACT)
    shown: Any = _f(
        "`view`: the game's view for the viewer; or, with `truth`, `state`: the game's whole state",
        wire=("view", "state"),
    )
    truth: bool = _f("whether `state` is sent rather than `view`", default=False, wire=False)

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
    """`verify`: whether the host's code re-produces the session's log."""

    ok: bool = _f("every record was re-produced")
    records: int = _f("how many records were checked")
    seq: int | None = _f("the first record the host's code does not re-produce, or null")
    explanation: str | None = _f("what differs; null unless the session is open")
    warning: str | None = _f("the log was written by another version of the game, or null")

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
    """`fork`: a new live session holding another's records up to a seq."""

    session: str = _f("the new session's id")
    game: str = _f("the game's id")
    forked_from: dict[str, Any] = _f("where it came from: `session` and `seq`")
    seats: list[SeatInfo | None] = _f(_SEATS)
    free: list[int] = _f("the seats still free")
    seq: int = _f("the new session's last seq")
    tokens: dict[str, str] = _f(
        "a new token per human seat (the seat number as a string): `resume` with it"
    )

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
    | UndoResult
    | Left
    | Pong
    | LogPage
    | ReplayState
    | Verified
    | Forked
)
Outcome = Result | Refused
"""What a request is answered with: its op's result, or a refusal."""

RESULT_TYPES: dict[str, type[Any]] = {
    "hello": HelloResult,
    "games": GamesResult,
    "create": Created,
    "sessions": SessionsPage,
    "join": Joined,
    "watch": Watching,
    "resume": Resumed,
    "view": ViewReply,
    "act": Accepted,
    "undo": UndoResult,
    "undo_answer": UndoResult,
    "leave": Left,
    "ping": Pong,
    "log": LogPage,
    "replay": ReplayState,
    "verify": Verified,
    "fork": Forked,
}
"""op -> the class of its ``result`` (what ``protocol.schema`` describes)."""

RESULTS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    op: cls.from_wire for op, cls in RESULT_TYPES.items()
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


_SESSION = "the session id"


@attrs.frozen
class EventPush(_Push):
    """One record of the session's log, redacted for this viewer; one per record, in gapless
    `seq` order."""

    name: ClassVar[str] = "event"
    session: str = _f(_SESSION)
    seq: int = _f("the record's seq")
    kind: str = _f(
        "the record's type: `event` (a game event), `action`, `seat_taken`, `seat_held`,"
        " `seat_released`, `undo_asked`, `undo_answered`, `undo`, `undo_refused` or `ended`"
    )
    event: Any = _f(
        "the record's body as this viewer may see it: for `event` the game's event (its"
        " shape: `gamehost schema --game ID`, `event`), for `action` `seat` and `action`"
        " (and `timed_out`), for `seat_taken` `seat`, `name` and `bot`, for `seat_held` and"
        " `seat_released` `seat`, for `undo_asked` `seat`, `action_seq`, `action` and"
        " `waiting`, for `undo_answered` `seat`, `action_seq` and `accept`, for `undo`"
        " `seat`, `action_seq` and `action`, for `undo_refused` `seat`, `action_seq` and"
        " `reason`, for `ended` `outcome`, `seed` (and `aborted`, `fault`)"
    )
    text: str | None = _f(
        "the record in words for this viewer (empty: nothing to say); sent only to a"
        ' connection that asked with `"text": true`',
        default=None,
        omit_none=True,
    )
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
    """This seat must act: sent after every change while it is in `to_act` (answer the one
    with the highest `seq`)."""

    name: ClassVar[str] = "turn"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of the session's last record: send it with `act`")
    seat: int = _f("the seat to act (this connection's)")
    legal: list[Any] = _f(
        "the actions valid now, each as `act` takes it (their shape: `gamehost schema --game"
        " ID`, `action`)"
    )
    to_act: list[int] = _f(_TO_ACT, factory=list)
    deadline: Deadline | None = _f(_DEADLINE, default=None)
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "turn",
            "session": self.session,
            "seq": self.seq,
            "seat": self.seat,
            "legal": self.legal,
            "to_act": self.to_act,
            "deadline": _deadline_wire(self.deadline),
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> TurnPush:
        return cls(
            obj["session"],
            obj["seq"],
            obj["seat"],
            obj["legal"],
            obj.get("to_act", []),
            Deadline.from_wire(obj.get("deadline")),
        )


@attrs.frozen
class ViewPush(_Push):
    """A state push: the viewer's whole view after a change, with whose turn it is, until
    when, and who is connected (sent only to a connection that joined, watched or resumed
    with `"view": true`)."""

    name: ClassVar[str] = "view"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of the change's last record")
    view: Any = _f(
        "the game's view for this viewer, as a snapshot's `view` (its shape: `gamehost schema"
        " --game ID`, `view`)"
    )
    to_act: list[int] = _f(_TO_ACT, factory=list)
    deadline: Deadline | None = _f(_DEADLINE, default=None)
    connected: list[bool] = _f(_CONNECTED, factory=list)
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "view",
            "session": self.session,
            "seq": self.seq,
            "view": self.view,
            "to_act": self.to_act,
            "deadline": _deadline_wire(self.deadline),
            "connected": self.connected,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ViewPush:
        return cls(
            obj["session"],
            obj["seq"],
            obj["view"],
            obj.get("to_act", []),
            Deadline.from_wire(obj.get("deadline")),
            obj.get("connected", []),
        )


PRESENCE_REASONS = ("joined", "resumed", "left", "gone", "unresponsive", "host_gone")
"""The ``reason`` of a presence push: the record's (a ``seat_released`` names its own)."""


@attrs.frozen
class PresencePush(_Push):
    """A seat's connection came or went: sent right after the `event` push of each
    `seat_taken`, `seat_held` and `seat_released` record (live, and among the records a
    `resume` catches up on)."""

    name: ClassVar[str] = "presence"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of the record")
    seat: int = _f("the seat")
    connected: bool = _f("whether a connection holds the seat now (a host bot's: true)")
    reason: str = _f(
        "`joined` (seat_taken), `resumed` (seat_held), or why the seat was released: `left`"
        " (`leave`), `gone` (its connection closed), `unresponsive` (it did not answer a"
        " ping), `host_gone` (its host went away)"
    )
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "presence",
            "session": self.session,
            "seq": self.seq,
            "seat": self.seat,
            "connected": self.connected,
            "reason": self.reason,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> PresencePush:
        return cls(obj["session"], obj["seq"], obj["seat"], obj["connected"], obj["reason"])


@attrs.frozen
class UndoAskedPush(_Push):
    """A seat asks to take back its last action: sent right after the `event` push of each
    `undo_asked` record (live, and among the records a `resume` catches up on). A seat in
    `waiting` answers with `undo_answer`."""

    name: ClassVar[str] = "undo_asked"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of the `undo_asked` record")
    request: UndoRequest = _f("the request", flatten=True)
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        head = {"push": "undo_asked", "session": self.session, "seq": self.seq}
        return {**head, **self.request.to_wire()}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> UndoAskedPush:
        request = UndoRequest.from_wire(obj)
        if request is None:  # pragma: no cover - a push always holds its request
            raise KeyError("seat")
        return cls(obj["session"], obj["seq"], request)


@attrs.frozen
class UndoDonePush(_Push):
    """An action was taken back: sent right after the `event` push of each `undo` record. The
    game state is again the one before that action (`view` and `turn` pushes follow)."""

    name: ClassVar[str] = "undo_done"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of the `undo` record")
    seat: int = _f("the seat whose action was taken back")
    action_seq: int = _f("the seq of the `action` record taken back")
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "undo_done",
            "session": self.session,
            "seq": self.seq,
            "seat": self.seat,
            "action_seq": self.action_seq,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> UndoDonePush:
        return cls(obj["session"], obj["seq"], obj["seat"], obj["action_seq"])


UNDO_REFUSALS = ("refused", "expired", "acted")
"""The ``reason`` of an ``undo_refused`` push."""


@attrs.frozen
class UndoRefusedPush(_Push):
    """A request to take back an action ended without it: sent right after the `event` push
    of the `undo_answered` record that refused it, or of the `undo_refused` record that says it
    lapsed."""

    name: ClassVar[str] = "undo_refused"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of that record")
    action_seq: int = _f("the seq of the `action` record the request asked to take back")
    reason: str = _f(
        "`refused` (the seat `by` refused), `expired` (not every seat answered within 30"
        " seconds) or `acted` (an action came first: it follows this record)"
    )
    by: int | None = _f("the seat that refused, or null", default=None)
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {
            "push": "undo_refused",
            "session": self.session,
            "seq": self.seq,
            "action_seq": self.action_seq,
            "reason": self.reason,
            "by": self.by,
        }

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> UndoRefusedPush:
        return cls(obj["session"], obj["seq"], obj["action_seq"], obj["reason"], obj["by"])


@attrs.frozen
class EndedPush(_Push):
    """The session is over."""

    name: ClassVar[str] = "ended"
    session: str = _f(_SESSION)
    seq: int = _f("the seq of the `ended` record")
    outcome: Any = _f(
        "the game's outcome (its shape: `gamehost schema --game ID`, `outcome`), or null when"
        " the host ended the session"
    )
    aborted: str | None = _f(
        "sent when the host ended the session: `too_long`, `abandoned`, `game_error` or `admin`",
        default=None,
        omit_none=True,
    )
    text: str | None = _f(
        "the end in words (who won, the final scores); sent only to a connection that asked"
        ' with `"text": true`',
        default=None,
        omit_none=True,
    )
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
    """The host could not write the session's log: the table waits while the host retries
    (after 1 s, the delay doubling up to 60 s); sent once per run of failures."""

    name: ClassVar[str] = "stalled"
    session: str = _f(_SESSION)
    reason: str = _f("`store_error`")
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "stalled", "session": self.session, "reason": self.reason}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> StalledPush:
        return cls(obj["session"], obj["reason"])


@attrs.frozen
class ClosedPush(_Push):
    """The host hangs up after this."""

    name: ClassVar[str] = "closed"
    reason: str = _f(
        "`shutdown`, `too_many_connections`, `too_many_from_address`, `idle`, `line_timeout`,"
        " `slow_consumer` or `unresponsive`"
    )
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "closed", "reason": self.reason}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ClosedPush:
        return cls(obj["reason"])


@attrs.frozen
class PingPush(_Push):
    """Are you still there? Sent to a connection that plays or watches a session and has
    been silent for `serve --ping-after` seconds: any complete line answers it (a `ping`
    request will do); silence for `serve --ping-timeout` seconds more and the host hangs up
    (`closed`, `unresponsive`). Over a WebSocket the host sends a Ping frame instead, which
    the browser answers by itself."""

    name: ClassVar[str] = "ping"
    _line: bytes | None = _line_field()

    def to_wire(self) -> dict[str, Any]:
        return {"push": "ping"}

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> PingPush:
        return cls()


@attrs.frozen
class DetachedPush(_Push):
    """This connection no longer holds the seat: no more pushes of that session follow, `act`
    there answers `not_seated`, and `resume` with the seat's token takes it back."""

    name: ClassVar[str] = "detached"
    session: str = _f(_SESSION)
    seat: int = _f("the seat this connection held")
    reason: str = _f(
        "`resumed` (another connection resumed the seat: the last resume wins) or `released`"
        " (a host released it, taking this connection for gone)"
    )
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


Push = (
    EventPush
    | TurnPush
    | ViewPush
    | PresencePush
    | UndoAskedPush
    | UndoDonePush
    | UndoRefusedPush
    | EndedPush
    | StalledPush
    | DetachedPush
    | ClosedPush
    | PingPush
)
Message = Reply | Push

PUSHES: dict[str, type[Any]] = {
    c.name: c
    for c in (
        EventPush,
        TurnPush,
        ViewPush,
        PresencePush,
        UndoAskedPush,
        UndoDonePush,
        UndoRefusedPush,
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
