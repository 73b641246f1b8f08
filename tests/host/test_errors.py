"""The error family (host.errors): every member replies with the wire error its table documents,
a game's own refusals (ActionError, OptionError) reach the client typed, and anything else a game
raises is still a game fault."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import host.errors
import host.plugins.codec
import host.plugins.faults
import host.store.base
import host.table.engine
from host.errors import (
    NOT_YOUR_TURN,
    ActionError,
    BadHeader,
    BadSessionId,
    GamehostError,
    IllegalAction,
    LogError,
    OptionError,
    SeatError,
    SeatTaken,
    UndoRefused,
)
from host.game import Rng, hookimpl
from host.plugins.codec import BadAction
from host.plugins.faults import GameFault
from host.plugins.registry import Registry, load_registry
from host.store.base import Conflict, CorruptLog, StoreClosed, UnknownSession
from host.table.engine import BadRecord, Engine
from protocol.messages import ErrorCode, encode_protocol_error, extra_problems
from protocol.replies import Refused, reply_id
from tests.conftest import start_host
from tests.toy import HighCard, Options, Swap
from tools.client import Client

# -- every member replies as documented -----------------------------------------------------------

SAMPLES: list[tuple[GamehostError, str, dict[str, Any]]] = [
    (GamehostError("a bug"), "internal", {}),
    (LogError("the log is busy"), "unavailable", {}),
    (Conflict("session s: expected seq 3, the log is at 4"), "unavailable", {}),
    (StoreClosed("the store is closed"), "unavailable", {}),
    (CorruptLog(Path("/srv/secret/s.jsonl"), 3, "a gap"), "session_damaged", {}),
    (BadRecord(4, "an unknown card"), "session_damaged", {}),
    (UnknownSession("no session s"), "unknown_session", {}),
    (BadSessionId("bad session id '../x'"), "unknown_session", {}),
    (BadHeader("session s: create needs a header record first"), "internal", {}),
    (SeatError("seats are 0..1, not 5"), "bad_request", {}),
    (SeatTaken("seat 1 is not free", free=[0, 2]), "session_full", {"free": [0, 2]}),
    (ActionError("a swap needs a card"), "bad_action", {}),
    (BadAction("unknown action type 'fly'"), "bad_action", {}),
    (
        IllegalAction("card_not_in_hand", "no such card"),
        "illegal_action",
        {"reason": "card_not_in_hand"},
    ),
    (IllegalAction(NOT_YOUR_TURN, "wait"), "not_your_turn", {}),
    (OptionError("decks", "at most 2"), "bad_option", {"option": "decks"}),
    (UndoRefused("acted_since", "another seat acted"), "cannot_undo", {"reason": "acted_since"}),
]


def reply_of(exc: GamehostError, rid: Any = 7) -> dict[str, Any]:
    return orjson.loads(encode_protocol_error(rid, exc))


@pytest.mark.parametrize(("exc", "code", "extra"), SAMPLES, ids=lambda v: type(v).__name__)
def test_each_member_replies_with_its_wire_code_and_declared_fields(
    exc: GamehostError, code: str, extra: dict[str, Any]
) -> None:
    got_code, message, got_extra = exc.reply()
    assert (got_code, got_extra) == (code, extra)
    assert ErrorCode(got_code) and extra_problems(got_code, got_extra) == []
    assert reply_of(exc) == {
        "id": 7,
        "ok": False,
        "error": {"code": code, "message": message, **extra},
    }


def documented_codes() -> dict[str, set[str]]:
    """``class name -> wire codes`` from the table in host.errors' docstring."""
    table: dict[str, set[str]] = {}
    last = ""
    for line in (host.errors.__doc__ or "").splitlines():
        if m := re.match(r"^``([\w.]+)``\s+``(\w+)``", line):
            last = m.group(1).rsplit(".", 1)[-1]
            table[last] = {m.group(2)}
        elif m := re.match(r"^\s+/ ``(\w+)``", line):
            table[last].add(m.group(1))
    return table


def family() -> set[type]:
    """Every member of the family the host defines (not the tests' own subclasses)."""
    seen: set[type] = set()
    todo = [GamehostError]
    while todo:
        cls = todo.pop()
        seen.add(cls)
        todo.extend(cls.__subclasses__())
    return {c for c in seen if c.__module__.startswith("host.")}


def test_the_documented_table_names_every_member_and_its_codes() -> None:
    doc = documented_codes()
    assert sorted(doc) == sorted(c.__name__ for c in family())
    for exc, code, _ in SAMPLES:
        assert code in doc[type(exc).__name__]
    assert doc["IllegalAction"] == {"illegal_action", "not_your_turn"}
    assert {type(exc) for exc, _, _ in SAMPLES} == family()  # every member is sampled above


def test_the_reply_of_a_damaged_log_names_the_seq_and_not_the_file() -> None:
    exc = CorruptLog(Path("/srv/secret/s.jsonl"), 3, "a gap")
    assert str(exc) == "/srv/secret/s.jsonl: seq 3: a gap"  # for the operator
    message = exc.reply()[1]
    assert "/srv" not in message and "seq 3" in message and "a gap" in message


def test_value_error_compatibility_is_what_the_contract_says() -> None:
    for cls in (OptionError, SeatError, SeatTaken, BadSessionId, BadHeader, BadAction, BadRecord):
        assert issubclass(cls, ValueError), cls
    for cls in (GamehostError, LogError, ActionError, IllegalAction, Conflict, CorruptLog):
        assert not issubclass(cls, ValueError), cls
    assert issubclass(UnknownSession, LookupError)


@given(reason=st.text(max_size=30), message=st.text(max_size=60))
def test_an_illegal_action_reply_is_always_documented(reason: str, message: str) -> None:
    code, _, extra = IllegalAction(reason, message).reply()
    assert extra_problems(code, extra) == []
    assert (code == "not_your_turn") == (reason == NOT_YOUR_TURN)
    assert extra == ({} if reason == NOT_YOUR_TURN else {"reason": reason})


@given(rid=st.integers(-(2**53), 2**53) | st.text(max_size=10), forged=st.integers(0, 99))
def test_an_id_in_a_members_fields_never_redirects_the_reply(rid: Any, forged: int) -> None:
    exc = ActionError("no", id=forged)
    assert reply_of(exc, rid)["id"] == rid
    assert reply_id(rid, exc) == rid and Refused.of(exc) == Refused(ErrorCode.BAD_ACTION, "no")


@given(option=st.text(min_size=1, max_size=20), why=st.text(max_size=40))
def test_an_option_error_replies_with_its_option_and_message(option: str, why: str) -> None:
    assert OptionError(option, why).reply() == (
        "bad_option",
        f"{option}: {why}",
        {"option": option},
    )


# -- the host raises the family -------------------------------------------------------------------


def test_a_seat_that_does_not_exist_or_is_taken_is_a_seat_error() -> None:
    engine = Engine(HighCard())
    header = engine.header("s", Options(), 3, [], b"f" * 32)
    state = engine.initial(header)
    state = engine.apply_all(state, engine.take_seat(state, 1, "p1", False, None))
    with pytest.raises(SeatTaken) as taken:
        engine.take_seat(state, 1, "again", False, None)
    assert taken.value.reply() == ("session_full", "seat 1 is not free", {"free": [0, 2]})
    with pytest.raises(SeatError) as missing:
        engine.take_seat(state, 3, "p3", False, None)
    assert not isinstance(missing.value, SeatTaken) and missing.value.code == "bad_request"


def test_store_errors_are_log_errors() -> None:
    with pytest.raises(BadSessionId):
        host.store.base.creation_records("../etc", {})
    with pytest.raises(BadHeader):
        host.store.base.creation_records("s1", [])


# -- games: their own refusals are typed, anything else is a fault ---------------------------


class NoSwapsToday(ActionError):
    """A game's own refusal class, below the family's ActionError."""


class Refusing(HighCard):
    """The toy, whose ``decide`` raises ``error()`` on a swap and whose ``check_options`` raises
    ``option_error()`` when two rounds are asked for (made anew each time: an instance kept here
    would keep the traceback of its last raise, and every frame and session in it, alive)."""

    def __init__(
        self,
        gid: str,
        error: Callable[[], Exception] | None = None,
        option_error: Callable[[], Exception] | None = None,
    ):
        self.info = attrs.evolve(HighCard.info, id=gid)
        self.error = error
        self.option_error = option_error

    def decide(self, state: Any, seat: int, action: Any, rng: Any) -> list:
        if isinstance(action, Swap) and self.error is not None and seat in self.to_act(state):
            raise self.error()
        return super().decide(state, seat, action, rng)

    def check_options(self, options: Options, seats: int) -> None:
        if options.rounds == 2 and self.option_error is not None:
            raise self.option_error()


GAMES = {
    "refuses-own-class": Refusing("refuses-own-class", lambda: NoSwapsToday("no swaps on Sundays")),
    "refuses-illegal": Refusing(
        "refuses-illegal", lambda: IllegalAction("no_swaps", "swaps are off")
    ),
    "refuses-malformed": Refusing("refuses-malformed", lambda: ActionError("a swap needs a card")),
    "raises-value-error": Refusing("raises-value-error", lambda: ValueError("planted bug")),
    "raises-log-error": Refusing(
        "raises-log-error", lambda: CorruptLog("/x", 1, "forged by a game")
    ),
    "raises-option-error": Refusing(
        "raises-option-error", option_error=lambda: OptionError("rounds", "1")
    ),
    "raises-value-error-on-options": Refusing(
        "raises-value-error-on-options", option_error=lambda: ValueError("bug")
    ),
}


def refusing_registry() -> Registry:
    class Plugin:
        @hookimpl
        def gamehost_register_games(self) -> list:
            return list(GAMES.values())

    return load_registry([("refusing", Plugin())], entrypoints=False)


async def swap_refused(c0: Client, c1: Client, game: str) -> dict[str, Any]:
    """Create a two-seat ``game``, seat both clients, try seat 0's swap: the error it got, after
    checking that nothing was appended and the session plays on (seat 0 may still keep)."""
    sid = (await c0.call("create", game=game, seats=2))["session"]
    await c0.call("join", session=sid)
    seq = (await c1.call("join", session=sid))["seq"]
    reply = await c0.request("act", session=sid, action={"type": "swap"}, seq=seq)
    assert reply["ok"] is False
    done = await c0.call("act", session=sid, action={"type": "keep"}, seq=seq)
    assert done["seq"] == seq + 2  # the refused swap appended nothing: the keep follows on
    return reply["error"]


@pytest.mark.parametrize(
    ("game", "error"),
    [
        ("refuses-own-class", {"code": "bad_action", "message": "no swaps on Sundays"}),
        ("refuses-malformed", {"code": "bad_action", "message": "a swap needs a card"}),
        (
            "refuses-illegal",
            {"code": "illegal_action", "message": "swaps are off", "reason": "no_swaps"},
        ),
        ("raises-value-error", {"code": "internal", "message": "internal error"}),
        ("raises-log-error", {"code": "internal", "message": "internal error"}),
    ],
)
async def test_a_games_refusal_is_typed_and_anything_else_is_a_fault(
    tmp_path: Path, game: str, error: dict[str, Any]
) -> None:
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, refusing_registry())
        c0, c1 = await running.client(), await running.client()
        assert await swap_refused(c0, c1, game) == error
        running.host.request_shutdown()


async def test_a_games_option_error_is_bad_option_and_anything_else_internal(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, refusing_registry())
        c = await running.client()
        typed = await c.request("create", game="raises-option-error", options={"rounds": 2})
        assert typed["error"] == {"code": "bad_option", "message": "rounds: 1", "option": "rounds"}
        fault = await c.request(
            "create", game="raises-value-error-on-options", options={"rounds": 2}
        )
        assert fault["error"]["code"] == "internal"
        assert (await c.call("sessions"))["sessions"] == []  # neither made a session
        running.host.request_shutdown()


def test_check_options_raising_anything_but_option_error_is_a_game_fault() -> None:
    codec = Engine(GAMES["raises-value-error-on-options"]).codec
    with pytest.raises(GameFault) as info:
        codec.options_from_wire({"rounds": 2}, 2)
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(OptionError):
        Engine(GAMES["raises-option-error"]).codec.options_from_wire({"rounds": 2}, 2)
    assert codec.options_from_wire({}, 2) == Options()  # one round: nothing raised


def test_decide_raising_the_familys_other_members_is_a_game_fault() -> None:
    engine = Engine(GAMES["raises-log-error"])
    header = engine.header("s", Options(), 2, [], b"f" * 32)
    state = engine.initial(header)
    for seat in (0, 1):
        state = engine.apply_all(state, engine.take_seat(state, seat, "p", False, None))
    with pytest.raises(GameFault) as info:
        engine.act(state, 0, Swap())
    assert isinstance(info.value.__cause__, CorruptLog)
    with pytest.raises(NoSwapsToday):
        Engine(GAMES["refuses-own-class"]).act(state, 0, Swap())


# -- the one place replies are made ----------------------------------------------------------------


class LogRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def error(self, event: str, **kw: Any) -> None:
        self.calls.append((event, kw))


def test_refusal_answers_a_refusal_and_logs_a_member_that_answers_internal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = LogRecorder()
    monkeypatch.setattr(host.plugins.faults, "log", log)
    refused = host.plugins.faults.refusal(IllegalAction("cannot_pass", "draw first"))
    assert refused == Refused(ErrorCode.ILLEGAL_ACTION, "draw first", {"reason": "cannot_pass"})
    assert refused.to_wire() == {
        "code": "illegal_action",
        "message": "draw first",
        "reason": "cannot_pass",
    }
    assert log.calls == []  # a refusal is the client's, not a bug
    bug = BadHeader("session s: the header lacks seed")
    assert host.plugins.faults.refusal(bug).code == ErrorCode.INTERNAL
    assert log.calls == [("internal_error", {"error": str(bug), "exc_info": bug})]


def test_a_game_imports_the_family_without_the_hosts_io() -> None:
    code = (
        "import sys, host.game\n"
        "assert host.game.ActionError is host.errors.ActionError\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('host', 'protocol', 'trio', 'cattrs', 'orjson', 'structlog')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['host', 'host.errors', 'host.game']"


def test_a_games_own_refusal_on_replay_is_reported_and_never_stops_a_load() -> None:
    plain = Engine(HighCard())
    header = plain.header("s", Options(), 2, [], b"f" * 32)
    records, state = [header], plain.initial(header)
    for seat in (0, 1):
        new, state = plain.seat_step(state, seat, "p", False, None)
        records += new
    new, state = plain.step(state, 0, Swap())
    records += new
    refusing = Engine(GAMES["refuses-own-class"])  # today's code refuses that swap
    assert refusing.load(records) == (len(records), state)  # kept whole: not its to judge
    assert refusing.verify(records) == (
        new[0].seq,
        "action refused on replay: no swaps on Sundays",
    )


@attrs.frozen
class Foreign:
    """An action no built-in game registered (the codec lets none through; decide refuses it)."""


@pytest.mark.parametrize(
    ("gid", "code"),
    [
        ("around-the-world", "illegal_action"),  # wrong_action: the seat must do another kind
        ("crazy-eights", "bad_action"),
        ("seven-twenty-seven", "bad_action"),
    ],
)
def test_a_built_in_game_refuses_a_foreign_action_with_the_familys_errors(
    gid: str, code: str
) -> None:
    engine = load_registry().engines[gid]
    seats = engine.game.info.min_seats
    header = engine.header("s", engine.codec.options_from_wire({}, seats), seats, [], b"f" * 32)
    state = engine.initial(header)
    for seat in range(seats):
        new, state = engine.seat_step(state, seat, f"p{seat}", False, None)
    seat = engine.to_act(state)[0]
    with pytest.raises(ActionError) as info:
        engine.game.decide(state.game, seat, Foreign(), Rng(state.seed, state.seq + 1))
    got, _, extra = info.value.reply()
    assert got == code and extra_problems(got, extra) == []
