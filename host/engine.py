"""The pure session machine: log records in, session state out; causes in, new records out.

No I/O, no trio. The session actor (``host.session``), the replay debugger (``tools.replay``) and
the tests all drive a game through this module, so live play and replay cannot drift apart.

Log records (one JSON object per line in the event log; ``ts`` is added by the store):

==============  ===================================================================================
``header``      seq 0: ``format``, ``host_version``, ``session``, ``game``, ``game_version``,
                ``event_version``, ``options``, ``seats``, ``bots`` (seat list), ``seed`` (hex,
                secret) and ``seed_commitment`` (sha256 of the seed, public)
``seat_taken``  ``seat``, ``name``, ``bot`` and ``token_hash`` (sha256 of the seat token)
``action``      ``seat`` and ``action`` (the wire form): an accepted action, followed by its events
``event``       ``v`` (event schema version) and ``event`` (the wire form)
``ended``       ``outcome`` and ``seed`` (hex): the commit-reveal, always the last record
==============  ===================================================================================

A cause (a seat being taken, an action) yields the records it produces. ``start`` runs as soon as
the last seat is taken; ``ended`` follows the first event after which ``outcome`` is not ``None``.
The game's ``Rng`` for a cause is ``Rng(seed, seq)`` with ``seq`` the number of the cause's first
game-visible record: the ``action`` record for ``decide``, the first start event for ``start``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import orjson

from host import __version__
from host.codec import GameCodec
from host.game import NOT_YOUR_TURN, Game, IllegalAction, Rng, Seat, seed_commitment

LOG_FORMAT = 1

__all__ = ["LOG_FORMAT", "Engine", "Record", "SeatInfo", "SessionState"]


@attrs.frozen
class Record:
    """One log record.

    Attributes:
        seq: its gapless sequence number (0 = header).
        type: ``header``, ``seat_taken``, ``action``, ``event`` or ``ended``.
        data: the JSON body without ``seq``, ``type`` and ``ts``.
        obj: for ``action`` and ``event`` records the structured game value (not serialised).
    """

    seq: int
    type: str
    data: dict[str, Any]
    obj: Any = attrs.field(default=None, eq=False)

    def to_json(self) -> dict[str, Any]:
        """``{"seq": ..., "type": ..., **data}`` (the store adds ``ts``)."""
        return {"seq": self.seq, "type": self.type, **self.data}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Record:
        """A record from a log line's object (``ts`` is dropped)."""
        return cls(
            raw["seq"],
            raw["type"],
            {k: v for k, v in raw.items() if k not in ("seq", "type", "ts")},
        )


@attrs.frozen
class SeatInfo:
    """Who holds a seat. ``token_hash`` is None for bots."""

    name: str
    bot: bool
    token_hash: str | None


@attrs.frozen
class SessionState:
    """Everything the host knows of a session, rebuilt by folding its records.

    Attributes:
        header: the header record's data.
        game: the game's state.
        seats: one entry per seat, ``None`` while free.
        seq: the last record's seq.
        started: ``start`` has run.
        ended: the ``ended`` record is written.
    """

    header: dict[str, Any]
    game: Any
    seats: tuple[SeatInfo | None, ...]
    seq: int = 0
    started: bool = False
    ended: bool = False

    @property
    def seed(self) -> bytes:
        return bytes.fromhex(self.header["seed"])

    @property
    def free_seats(self) -> list[Seat]:
        return [i for i, s in enumerate(self.seats) if s is None]


class Engine:
    """Drives one game through the record model above.

    Args:
        game: the game.
        codec: its codec (made if omitted).
    """

    def __init__(self, game: Game, codec: GameCodec | None = None) -> None:
        self.game = game
        self.codec = codec or GameCodec(game)

    # -- building records ----------------------------------------------------------------------
    def header(
        self, session: str, options: Any, seats: int, bots: Iterable[Seat], seed: bytes
    ) -> Record:
        """The seq-0 record of a new session (``options`` already validated)."""
        info = self.game.info
        return Record(
            0,
            "header",
            {
                "format": LOG_FORMAT,
                "host_version": __version__,
                "session": session,
                "game": info.id,
                "game_version": info.version,
                "event_version": info.event_version,
                "options": self.codec.options_to_wire(options),
                "seats": seats,
                "bots": sorted(bots),
                "seed": seed.hex(),
                "seed_commitment": seed_commitment(seed),
            },
        )

    def initial(self, header: Record | dict[str, Any]) -> SessionState:
        """The state right after the header."""
        data = header.data if isinstance(header, Record) else header
        options = self.codec.conv.structure(data["options"], self.game.info.options)
        n = data["seats"]
        return SessionState(data, self.game.initial_state(options, n), (None,) * n)

    def options(self, state: SessionState) -> Any:
        """The session's options instance."""
        return self.codec.conv.structure(state.header["options"], self.game.info.options)

    # -- folding -------------------------------------------------------------------------------
    def apply(self, state: SessionState, rec: Record) -> SessionState:
        """Fold one record into the state.

        Raises:
            ValueError: the record's seq is not ``state.seq + 1`` or its type is unknown.
        """
        if rec.seq != state.seq + 1:
            raise ValueError(f"record seq {rec.seq} does not follow {state.seq}")
        if rec.type == "event":
            event = rec.obj
            if event is None:
                event = self.codec.event_from_wire(rec.data["event"], rec.data.get("v"))
            return attrs.evolve(
                state, game=self.game.evolve(state.game, event), seq=rec.seq, started=True
            )
        if rec.type == "seat_taken":
            seats = list(state.seats)
            d = rec.data
            seats[d["seat"]] = SeatInfo(d["name"], d["bot"], d.get("token_hash"))
            return attrs.evolve(state, seats=tuple(seats), seq=rec.seq)
        if rec.type == "action":
            return attrs.evolve(state, seq=rec.seq)
        if rec.type == "ended":
            return attrs.evolve(state, seq=rec.seq, ended=True)
        raise ValueError(f"unknown record type {rec.type!r} at seq {rec.seq}")

    def rebuild(self, records: Iterable[Record]) -> SessionState:
        """Fold a whole log (header first).

        Raises:
            ValueError: an empty log, a first record that is not a header, or a bad record.
        """
        it = iter(records)
        first = next(it, None)
        if first is None or first.type != "header" or first.seq != 0:
            raise ValueError("a log must start with its header at seq 0")
        state = self.initial(first)
        for rec in it:
            state = self.apply(state, rec)
        return state

    # -- causes --------------------------------------------------------------------------------
    def take_seat(
        self, state: SessionState, seat: Seat, name: str, bot: bool, token_hash: str | None
    ) -> list[Record]:
        """Records for a seat being taken, plus the opening events if it was the last free one.

        Raises:
            ValueError: the seat does not exist or is taken.
        """
        if not 0 <= seat < len(state.seats) or state.seats[seat] is not None:
            raise ValueError(f"seat {seat} is not free")
        rec = Record(
            state.seq + 1,
            "seat_taken",
            {"seat": seat, "name": name, "bot": bot, "token_hash": token_hash},
        )
        out = [rec]
        after = self.apply(state, rec)
        if not after.free_seats and not after.started:
            rng = Rng(after.seed, after.seq + 1)
            out += self._events(after, self.game.start(after.game, rng))
        return out

    def act(
        self, state: SessionState, seat: Seat, action: Any, timed_out: bool = False
    ) -> list[Record]:
        """Records for an accepted action: the action, its events, ``ended`` if it ended the game.

        Args:
            timed_out: the host chose the action for a seat whose turn timer ran out (recorded
                as ``"timed_out": true`` in the action record).

        Raises:
            IllegalAction: the game refuses it (reason ``not_your_turn`` if the seat is not in
                ``to_act``, or the session is not running).
        """
        if not state.started or state.ended:
            raise IllegalAction("not_running", "the session is not running")
        if seat not in self.game.to_act(state.game):
            raise IllegalAction(NOT_YOUR_TURN, f"seat {seat} is not to act")
        seq = state.seq + 1
        events = self.game.decide(state.game, seat, action, Rng(state.seed, seq))
        data: dict[str, Any] = {"seat": seat, "action": self.codec.action_to_wire(action)}
        if timed_out:
            data["timed_out"] = True
        rec = Record(seq, "action", data, action)
        return [rec, *self._events(self.apply(state, rec), events)]

    def bot_move(self, state: SessionState) -> tuple[Seat, Any] | None:
        """The action of the first bot seat that is to act, or ``None`` if no bot is to act.

        Bots use the game's ``bot_action`` when it has one, else a uniformly random legal action,
        drawn from ``Rng(seed, seq, "bot")`` so a session with bots replays the same way.
        """
        if not state.started or state.ended:
            return None
        for seat in self.game.to_act(state.game):
            info = state.seats[seat]
            if info is not None and info.bot:
                return seat, self.bot_action(state, seat)
        return None

    def bot_action(self, state: SessionState, seat: Seat) -> Any:
        """What a host bot would do in ``seat`` now (also used when a turn timer runs out)."""
        rng = Rng(state.seed, state.seq, f"bot{seat}")
        chooser = getattr(self.game, "bot_action", None)
        if chooser is not None:
            return chooser(state.game, seat, rng)
        return rng.choice(self.game.legal_actions(state.game, seat))

    def _events(self, state: SessionState, events: list[Any]) -> list[Record]:
        out = []
        v = self.game.info.event_version
        game_state = state.game
        seq = state.seq
        for ev in events:
            seq += 1
            out.append(Record(seq, "event", {"v": v, "event": self.codec.event_to_wire(ev)}, ev))
            game_state = self.game.evolve(game_state, ev)
            outcome = self.game.outcome(game_state)
            if outcome is not None:
                seq += 1
                out.append(
                    Record(
                        seq,
                        "ended",
                        {"outcome": self.codec.to_wire(outcome), "seed": state.header["seed"]},
                    )
                )
                break
        return out

    def apply_all(self, state: SessionState, records: Iterable[Record]) -> SessionState:
        """Fold several records."""
        for rec in records:
            state = self.apply(state, rec)
        return state

    def abort(self, state: SessionState, reason: str) -> list[Record]:
        """The ``ended`` record that stops a session the game did not end (a host limit).

        Its ``outcome`` is ``None`` and ``aborted`` says why.
        """
        return [
            Record(
                state.seq + 1,
                "ended",
                {"outcome": None, "aborted": reason, "seed": state.header["seed"]},
            )
        ]

    def complete_prefix(self, records: list[Record]) -> int:
        """How many leading records form whole causes (a crash can leave the last append half
        written: an action without all its events). Appends are acknowledged only once whole,
        so the records past this count were never acknowledged to anyone.

        Raises:
            ValueError: the log does not fold (see :meth:`rebuild`).
        """
        state = self.initial(records[0])
        last_cause, before = None, state
        for i, rec in enumerate(records[1:], start=1):
            if rec.type in ("seat_taken", "action"):
                last_cause, before = i, state
            state = self.apply(state, rec)
        if last_cause is None:
            return len(records)
        rec = records[last_cause]
        d = rec.data
        try:
            if rec.type == "seat_taken":
                want = self.take_seat(before, d["seat"], d["name"], d["bot"], d.get("token_hash"))
            else:
                action = self.codec.action_from_wire(d["action"])
                want = self.act(before, d["seat"], action, d.get("timed_out", False))
        except (IllegalAction, ValueError):
            return len(records)  # not for this check to judge: verify reports it
        return len(records) if len(records) - last_cause >= len(want) else last_cause

    # -- replay checking -----------------------------------------------------------------------
    def verify(self, records: list[Record]) -> tuple[int, str] | None:
        """Re-run every cause in a log on the current code.

        Returns:
            ``None`` if every recorded event is what the current code produces, else
            ``(seq, explanation)`` for the first record that differs.
        """
        if not records or records[0].type != "header":
            return (0, "the log does not start with a header")
        state = self.initial(records[0])
        i = 1
        while i < len(records):
            rec = records[i]
            if rec.type == "seat_taken":
                d = rec.data
                try:
                    produced = self.take_seat(
                        state, d["seat"], d["name"], d["bot"], d.get("token_hash")
                    )
                except ValueError as exc:
                    return (rec.seq, f"seat_taken refused on replay: {exc}")
            elif rec.type == "action":
                try:
                    action = self.codec.action_from_wire(rec.data["action"])
                    produced = self.act(
                        state, rec.data["seat"], action, rec.data.get("timed_out", False)
                    )
                except (IllegalAction, ValueError) as exc:
                    return (rec.seq, f"action refused on replay: {exc}")
            elif rec.type == "ended" and "aborted" in rec.data:
                produced = self.abort(state, rec.data["aborted"])
            else:
                return (rec.seq, f"a {rec.type!r} record that no cause produced")
            for j, want in enumerate(produced):
                if i + j >= len(records):
                    return (want.seq, f"the log ends here but the code produces {want.to_json()}")
                got = records[i + j]
                want_data = orjson.loads(orjson.dumps(want.data))
                if (got.seq, got.type, got.data) != (want.seq, want.type, want_data):
                    return (
                        got.seq,
                        f"recorded {got.to_json()} but the code produces {want.to_json()}",
                    )
            for j in range(len(produced)):
                state = self.apply(state, records[i + j])
            i += len(produced)
        return None
