"""What a viewer may see of a log record: the one place that decides it.

Live pushes (``host.table.core``), the records a ``resume`` catches up on, the replay ops
(``log``, ``host.net.replayops``) and ``gamehost replay``'s timeline all show records through
:class:`Visibility`, so no copy of the rule can drift from another.

The rule, per record type (a *viewer* is a seat number, or None for a spectator):

=================  ==========================================================================
``header``         never pushed; in a log page its ``seed`` is null unless ``truth`` is asked
``seat_taken``     ``seat``, ``name``, ``bot`` (never the token hash, never the holder)
``action``         ``seat`` and ``action`` (actions are public), ``timed_out`` when set
``event``          the game's ``redact(event, viewer)``: only what that viewer may see
``seat_held``      ``seat`` (who holds it is the host's business, not the players')
``seat_released``  ``seat``
``undo_asked``     ``seat``, ``action_seq``, ``action`` and ``waiting`` (actions are public)
``undo_answered``  ``seat``, ``action_seq`` and ``accept``
``undo``           ``seat``, ``action_seq`` and ``action``
``undo_refused``   ``seat``, ``action_seq`` and ``reason``
``ended``          ``outcome``, ``aborted`` when the host ended it, and ``seed`` only when the
                   game reveals it (``GameInfo.reveal_seed``)
=================  ==========================================================================

``truth`` (a debugger's full view, allowed only where PROTOCOL.md's replay ops say so) shows
every field but the two that are never shown to anyone: ``token_hash`` and ``holder``.

Presence: wherever the ``event`` push of a ``seat_taken``, ``seat_held`` or ``seat_released``
record goes (live, or among the records a ``resume`` catches up on), a ``presence`` push follows
it (:meth:`Visibility.presence`): the seat, whether a connection holds it after that record and
why, all read from the record (never which connection).

Undo: the ``event`` push of an ``undo_asked`` record is followed by an ``undo_asked`` push, of an
``undo`` record by ``undo_done``, and of an ``undo_answered`` record that refuses or an
``undo_refused`` record by ``undo_refused`` (:meth:`Visibility.undo`), likewise read from the
record (the request's expiry from its time).

Pure: no I/O. Game code (``redact``) runs through the engine's guards, so a game that raises
here raises :class:`~host.plugins.faults.GameFault`.
"""

from __future__ import annotations

from typing import Any

from host.game import Viewer
from host.table.engine import BadRecord, Engine, Record
from protocol.replies import (
    EventPush,
    Expiry,
    PresencePush,
    UndoAskedPush,
    UndoDonePush,
    UndoRefusedPush,
    UndoRequest,
)

__all__ = ["NEVER_SHOWN", "UNDO_FIELDS", "Visibility", "log_record"]

NEVER_SHOWN = ("token_hash", "holder")
"""Record fields no viewer is ever shown, ``truth`` included."""

UNDO_FIELDS = {
    "undo_asked": ("seat", "action_seq", "action", "waiting"),
    "undo_answered": ("seat", "action_seq", "accept"),
    "undo": ("seat", "action_seq", "action"),
    "undo_refused": ("seat", "action_seq", "reason"),
}
"""The fields of each undo record, as every viewer is shown them."""

UndoPush = UndoAskedPush | UndoDonePush | UndoRefusedPush


class Visibility:
    """The visibility rule for one game's records.

    Args:
        engine: the game's engine (its codec reads events, its guards run ``redact``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.reveal_seed = bool(engine.game.info.reveal_seed)
        self.game_off = False
        """The game's code is not run any more for this session (it ran past its budget:
        ``host.plugins.budget``): events are shown to viewers as null (never unredacted)."""

    def public_seed(self, header: dict[str, Any]) -> str | None:
        """The session's seed as clients may see it once it ended (None if the game keeps it)."""
        return header.get("seed") if self.reveal_seed else None

    def body(self, rec: Record, viewer: Viewer, header: dict[str, Any]) -> dict[str, Any] | None:
        """The ``event`` body of the live push of ``rec`` for ``viewer`` (None: not pushed).

        Raises:
            GameFault: the game's ``redact`` failed. BadRecord: an event the game cannot read.
        """
        kind = rec.type
        d = rec.data
        if kind == "event":
            return None if self.game_off else self.engine.redacted_wire(rec, viewer)
        if kind == "action":
            out = {"seat": d["seat"], "action": d["action"]}
            if d.get("timed_out"):
                out["timed_out"] = True
            return out
        if kind == "seat_taken":
            return {"seat": d["seat"], "name": d["name"], "bot": d["bot"]}
        if kind in ("seat_held", "seat_released"):
            return {"seat": d["seat"]}
        if kind in UNDO_FIELDS:
            return {k: d.get(k) for k in UNDO_FIELDS[kind]}
        if kind == "ended":
            out = {"outcome": d["outcome"], "seed": self.public_seed(header)}
            if "aborted" in d:
                out["aborted"] = d["aborted"]
            return out
        return None

    def presence(self, session: str, rec: Record) -> PresencePush | None:
        """The ``presence`` push that follows ``rec``'s event push (None: not a presence
        record). The same for every viewer: ``connected`` is whether a connection holds the
        seat after the record (a host bot's seat: True), ``reason`` is ``joined``
        (``seat_taken``), ``resumed`` (``seat_held``) or the release's own reason."""
        kind = rec.type
        if kind == "seat_taken":
            d = rec.data
            held = bool(d.get("bot")) or d.get("holder") is not None
            return PresencePush(session, rec.seq, d["seat"], held, "joined")
        if kind == "seat_held":
            return PresencePush(session, rec.seq, rec.data["seat"], True, "resumed")
        if kind == "seat_released":
            d = rec.data
            return PresencePush(session, rec.seq, d["seat"], False, d.get("reason") or "gone")
        return None

    def undo(self, session: str, rec: Record, expires: Expiry | None = None) -> UndoPush | None:
        """The undo push that follows ``rec``'s event push (None: it is followed by none), the
        same for every viewer: ``undo_asked`` (``expires``: when that request lapses),
        ``undo_done``, or ``undo_refused`` (a refusing ``undo_answered`` names its seat as
        ``by``; an ``undo_refused`` record gives its reason)."""
        kind = rec.type
        if kind not in UNDO_FIELDS:
            return None
        d = rec.data
        if kind == "undo_asked":
            when = expires or Expiry("", 0.0)
            request = UndoRequest(d["seat"], d["action_seq"], d.get("action"), d["waiting"], when)
            return UndoAskedPush(session, rec.seq, request)
        if kind == "undo":
            return UndoDonePush(session, rec.seq, d["seat"], d["action_seq"])
        if kind == "undo_answered":
            if d.get("accept"):
                return None
            return UndoRefusedPush(session, rec.seq, d["action_seq"], "refused", d["seat"])
        return UndoRefusedPush(session, rec.seq, d["action_seq"], d["reason"], None)

    def same_for_all(self, rec: Record) -> bool:
        """Whether every viewer is shown ``rec`` alike without asking the game (every record
        but a game event)."""
        return rec.type != "event"

    def push(
        self,
        session: str,
        rec: Record,
        viewer: Viewer,
        header: dict[str, Any],
        shared: list[EventPush] | None = None,
    ) -> EventPush | None:
        """The ``event`` push of ``rec`` for ``viewer`` (None for a header).

        With ``shared`` (an empty list for each new record), a push that is the same for every
        viewer — a record other than an event, or an event ``redact`` gives back unchanged —
        is made once and kept there, so viewers share one object (encoded once); an event the
        engine has just made keeps its JSON encoding (``Record.encoded``).

        Raises:
            GameFault: the game's ``redact`` failed. BadRecord: an event the game cannot read.
        """
        if shared and rec.type != "event":
            return shared[0]
        if rec.type == "event" and self.game_off:
            return EventPush(session, rec.seq, "event", None)
        if rec.type == "event":
            codec = self.engine.codec
            event = rec.obj
            if event is None:
                try:
                    event = codec.event_from_wire(rec.data["event"], rec.data.get("v"))
                except (KeyError, TypeError, ValueError) as exc:
                    raise BadRecord(rec.seq, f"an event the game cannot read: {exc}") from exc
            redacted = self.engine.redact(rec, event, viewer)
            if redacted is not event or shared is None:
                return EventPush(session, rec.seq, "event", self.engine.event_wire(rec, redacted))
            if shared:
                return shared[0]
            if rec.encoded is not None:  # the body's JSON the engine made: no second encoding
                push = EventPush.with_encoded_body(
                    session, rec.seq, "event", rec.data["event"], rec.encoded
                )
            else:
                push = EventPush(session, rec.seq, "event", self.engine.event_wire(rec, event))
            shared.append(push)
            return push
        body = self.body(rec, viewer, header)
        if body is None:
            return None
        push = EventPush(session, rec.seq, rec.type, body)
        if shared is not None:
            shared.append(push)
        return push

    def record(
        self, rec: Record, viewer: Viewer, header: dict[str, Any], truth: bool = False
    ) -> dict[str, Any]:
        """``rec`` as a log page (or a timeline) shows it to ``viewer``: ``seq``, ``type``,
        ``ts`` when known, and its fields, hidden parts redacted (see the module docstring).

        Raises:
            GameFault: the game's ``redact`` failed. BadRecord: an event the game cannot read.
        """
        data = {k: v for k, v in rec.data.items() if k not in NEVER_SHOWN}
        if not truth:
            if rec.type == "header":
                data["seed"] = None
            elif rec.type == "event":
                data["event"] = None if self.game_off else self.engine.redacted_wire(rec, viewer)
            elif rec.type == "ended":
                data["seed"] = self.public_seed(header)
        out: dict[str, Any] = {"seq": rec.seq, "type": rec.type}
        if rec.ts is not None:
            out["ts"] = rec.ts
        out.update(data)
        return out


def log_record(
    engine: Engine,
    rec: Record,
    viewer: int | None,
    truth: bool,
    seed: str | None,
    game_off: bool = False,
) -> dict[str, Any]:
    """A record as a ``log`` page shows it to ``viewer`` (PROTOCOL.md, "Replay ops"): as
    :meth:`Visibility.record` shows it, with ``seed`` given (the header's when the game reveals
    it, else None) and an event's ``v`` (the game's event version it is shown in); with
    ``game_off``, the game's code is not run: an event is ``null`` unless ``truth``.

    Raises:
        GameFault: the game's ``redact`` failed. BadRecord: an event the game cannot read.
    """
    data = {k: v for k, v in rec.data.items() if k not in NEVER_SHOWN}  # nor the holder
    if not truth:
        if rec.type == "header":
            data["seed"] = None
        elif rec.type == "event" and game_off:
            data["event"] = None
        elif rec.type == "event":  # as the current code reads it: upcast, then redacted
            data["event"] = engine.redacted_wire(rec, viewer)
            data["v"] = engine.game.info.event_version
        elif rec.type == "ended":
            data["seed"] = seed
    out: dict[str, Any] = {"seq": rec.seq, "type": rec.type}
    if rec.ts is not None:
        out["ts"] = rec.ts
    out.update(data)
    return out
