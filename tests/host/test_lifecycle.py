"""Every session reaches an end: one-append creates, bots seated on load, a bounded actor loop,
turn timers and abandonment, ended sessions answered from their logs, plugin faults, and a
session that carries on after a failed append."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from host.game import IllegalAction, hookimpl
from host.net.session import seat_bots
from host.plugins.registry import Registry, load_registry
from host.store.file import read_log
from host.table import commands
from host.table.engine import Record
from host.table.history import verify_log
from tests import broken_games
from tests.conftest import start_host
from tests.toy import HighCard, Plugin, Swap
from tools.client import Client


# -- helpers --------------------------------------------------------------------------------------
class Observer:
    """An observer plugin: records what it is told; ``ended[sid]`` is set when a session ends."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Any] = {}
        self.ended: dict[str, trio.Event] = {}
        self.appended: list[dict] = []

    def event(self, sid: str) -> trio.Event:
        return self.ended.setdefault(sid, trio.Event())

    @hookimpl
    def gamehost_event_appended(self, session: str, record: dict) -> None:
        self.appended.append(record)

    @hookimpl
    def gamehost_session_ended(self, session: str, outcome: Any) -> None:
        self.outcomes[session] = outcome
        self.event(session).set()


def registry(*games: Any, observers: tuple[Any, ...] = ()) -> Registry:
    class Extra:
        @hookimpl
        def gamehost_register_games(self) -> list:
            return list(games)

    plugins: list[tuple[str, Any]] = [("toy", Plugin()), ("extra", Extra())]
    plugins += [(f"observer{i}", o) for i, o in enumerate(observers)]
    return load_registry(plugins, entrypoints=False)


def log_of(data_dir: Path, sid: str) -> list[Record]:
    return [Record.from_json(r) for r in read_log(data_dir / "sessions" / f"{sid}.jsonl")]


async def create(c: Client, game: str = "high-card", seats: int = 2, bots: int = 0, **kw) -> dict:
    return await c.call("create", game=game, seats=seats, bots=bots, **kw)


async def pushes_until(c: Client, kind: str, timeout: float = math.inf) -> list[dict]:
    """Pushes up to the first of ``kind``. Give a ``timeout`` on the real clock only: with the
    autojump clock, time leaps while a thread writes the log."""
    out = []
    with trio.fail_after(timeout):
        while True:
            p = await c.next_push()
            assert p is not None, "connection closed"
            out.append(p)
            if p["push"] == kind:
                return out


async def ended(seen: Observer, sid: str) -> None:
    """Wait (autojump clock) until the observer is told the session ended."""
    await seen.event(sid).wait()


# -- item 5: a create is one append; a torn create is completed on load ---------------------------
async def test_a_create_writes_its_header_and_bot_seats_in_one_append(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, bot_delay=1000.0)
        c = await running.client()
        store = running.host.store
        before = store.statistics().appends
        created = await create(c, seats=3, bots=2)
        assert store.statistics().appends - before == 1
        assert (created["bots"], created["free"], created["seq"]) == ([1, 2], [0], 2)
        before = store.statistics().appends
        all_bots = await create(c, seats=2, bots=2)  # and the opening events, too
        assert store.statistics().appends - before == 1
        running.host.request_shutdown()
    recs = log_of(tmp_path, created["session"])
    assert [(r.type, r.data.get("seat"), r.data.get("bot")) for r in recs] == [
        ("header", None, None),
        ("seat_taken", 1, True),
        ("seat_taken", 2, True),
    ]
    recs = log_of(tmp_path, all_bots["session"])
    assert [r.type for r in recs] == ["header", "seat_taken", "seat_taken", "event"]
    assert recs[3].data["event"]["type"] == "dealt" and all_bots["seq"] == 3


async def test_a_log_with_only_its_header_gets_its_bots_seated_on_load(tmp_path):
    engine = registry().engines["high-card"]
    opts = engine.codec.options_from_wire({}, 2)
    header = engine.header("torn0create", opts, 2, [1], b"\x07" * 32)
    (tmp_path / "sessions").mkdir(mode=0o700)
    (tmp_path / "sessions" / "torn0create.jsonl").write_bytes(
        orjson.dumps(header.to_json()) + b"\n"
    )
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        session = running.host.sessions["torn0create"]
        assert session.state.seats[1] is not None and session.state.seats[1].bot
        c = await running.client()
        r = await c.request("join", session="torn0create", seat=1)
        assert r["error"]["code"] == "session_full"  # the bot's seat is the bot's
        joined = await c.call("join", session="torn0create")
        assert joined["seat"] == 0 and joined["started"]
        running.host.request_shutdown()
    recs = log_of(tmp_path, "torn0create")
    assert (recs[1].type, recs[1].data["seat"], recs[1].data["bot"]) == ("seat_taken", 1, True)
    assert verify_log(engine, recs) is None


# -- item 8: the actor serves commands between bounded bot steps ----------------------------------
async def test_an_all_bot_session_answers_a_watch_before_it_ends_and_pushes_live(
    tmp_path, autojump_clock
):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, bot_delay=0.05)
        c, w = await running.client(), await running.client()
        sid = (await create(c, seats=6, bots=6, options={"rounds": 2}))["session"]
        snap = await w.call("watch", session=sid)
        assert not snap["ended"]
        pushes = await pushes_until(w, "ended")
        seqs = [p["seq"] for p in pushes if p["push"] == "event"]
        assert seqs == list(range(snap["seq"] + 1, pushes[-1]["seq"] + 1))
        assert len([p for p in pushes if p.get("kind") == "action"]) >= 1
        running.host.request_shutdown()


async def test_shutdown_does_not_wait_for_a_slow_bot_session(tmp_path, autojump_clock):
    t0 = trio.current_time()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, bot_delay=10.0, grace=100.0)
        c = await running.client()
        await create(c, seats=6, bots=6, options={"rounds": 2})  # 12 moves, 10 s apart
        running.host.request_shutdown()
    assert trio.current_time() - t0 < 10.0


# -- items 11-13: plugin faults -------------------------------------------------------------------
class BotRaises(HighCard):
    info = attrs.evolve(HighCard.info, id="bot-raises")

    def bot_action(self, state, seat, rng):
        raise RuntimeError("planted bot fault")


class BotRefused(HighCard):
    """Lists ``swap`` as seat 1's only legal action, which ``decide`` refuses."""

    info = attrs.evolve(HighCard.info, id="bot-refused")

    def legal_actions(self, state, seat):
        return (
            [Swap()]
            if seat == 1 and seat in self.to_act(state)
            else super().legal_actions(state, seat)
        )

    def decide(self, state, seat, action, rng):
        if seat == 1 and isinstance(action, Swap):
            raise IllegalAction("no_swap", "seat 1 may not swap")
        return super().decide(state, seat, action, rng)


class SwapCrashes(HighCard):
    info = attrs.evolve(HighCard.info, id="swap-crashes")

    def decide(self, state, seat, action, rng):
        if isinstance(action, Swap):
            raise ZeroDivisionError("planted decide fault")
        return super().decide(state, seat, action, rng)


@pytest.mark.parametrize("game", [BotRaises(), BotRefused()], ids=lambda g: g.info.id)
async def test_a_fault_on_a_bot_move_ends_the_session_as_game_error(tmp_path, game):
    gid = game.info.id
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(game))
        a = await running.client()
        sid = (await create(a, game=gid, seats=2, bots=1))["session"]
        joined = await a.call("join", session=sid)
        await a.call("act", session=sid, action={"type": "keep"}, seq=joined["seq"])
        pushes = await pushes_until(a, "ended", 30.0)
        assert pushes[-1]["outcome"] is None and pushes[-1]["aborted"] == "game_error"
        assert pushes[-2]["kind"] == "ended" and pushes[-2]["event"]["aborted"] == "game_error"
        assert await a.call("ping") == {"pong": True}
        other = await create(a, seats=2, bots=2)  # the host keeps serving
        assert other["session"] in running.host.sessions
        running.host.request_shutdown()
    recs = log_of(tmp_path, sid)
    assert recs[-1].type == "ended" and recs[-1].data["aborted"] == "game_error"
    assert verify_log(running.host.registry.engines[gid], recs) is None
    async with trio.open_nursery() as n:  # no loop on restart: the end is in the log
        again = await start_host(n, tmp_path, registry(game))
        assert sid not in again.host.sessions
        c = await again.client()
        r = await c.call("resume", session=sid, token=joined["token"])
        assert (r["ended"], r["aborted"]) == (True, "game_error")
        again.host.request_shutdown()
    assert log_of(tmp_path, sid) == recs


class StartRaises(HighCard):
    info = attrs.evolve(HighCard.info, id="start-raises")

    def start(self, state, rng):
        raise RuntimeError("planted start fault")


async def test_a_fault_in_the_start_after_the_last_seat_ends_the_session(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(StartRaises()))
        a, b = await running.client(), await running.client()
        sid = (await create(a, game="start-raises"))["session"]
        await a.call("join", session=sid)
        r = await b.request("join", session=sid)
        assert r["error"]["code"] == "internal"
        pushes = await pushes_until(a, "ended", 30.0)
        assert (pushes[-1]["outcome"], pushes[-1]["aborted"]) == (None, "game_error")
        r = await a.request("create", game="start-raises", seats=2, bots=2)
        assert r["error"]["code"] == "internal"  # nothing written for it
        assert len(list((tmp_path / "sessions").iterdir())) == 1
        running.host.request_shutdown()
    recs = log_of(tmp_path, sid)
    assert [r.type for r in recs] == ["header", "seat_taken", "ended"]
    assert verify_log(running.host.registry.engines["start-raises"], recs) is None


async def test_a_fault_in_a_clients_command_fails_only_that_command(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(SwapCrashes()))
        a, b = await running.client(), await running.client()
        sid = (await create(a, game="swap-crashes"))["session"]
        await a.call("join", session=sid)
        jb = await b.call("join", session=sid)
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        assert (await a.call("view", session=sid))["seq"] == jb["seq"]  # nothing appended
        assert await a.call("act", session=sid, action={"type": "keep"}) == {"seq": jb["seq"] + 2}
        running.host.request_shutdown()


class RaisingObserver:
    @hookimpl
    def gamehost_session_created(self, session: str, game: str, header: dict) -> None:
        raise RuntimeError("planted observer fault")

    @hookimpl
    def gamehost_event_appended(self, session: str, record: dict) -> None:
        raise RuntimeError("planted observer fault")

    @hookimpl
    def gamehost_session_ended(self, session: str, outcome: Any) -> None:
        raise RuntimeError("planted observer fault")


async def test_an_observer_that_raises_changes_nothing_for_the_players(tmp_path):
    seen = Observer()
    reg = registry(observers=(RaisingObserver(), seen))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, reg)
        a, b = await running.client(), await running.client()
        sid = (await create(a))["session"]
        await a.call("join", session=sid)
        jb = await b.call("join", session=sid)
        acted = await a.call("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert acted == {"seq": jb["seq"] + 2}
        got = [await b.next_push() for _ in range(3)]
        assert [(p["push"], p.get("kind")) for p in got] == [
            ("event", "action"),
            ("event", "event"),
            ("turn", None),
        ]
        assert [r["seq"] for r in seen.appended][-2:] == [jb["seq"] + 1, jb["seq"] + 2]
        running.host.request_shutdown()


# -- item 7: ended sessions stay addressable ------------------------------------------------------
async def test_an_ended_session_can_be_resumed_after_a_restart(tmp_path):
    async with trio.open_nursery() as n:
        first = await start_host(n, tmp_path)
        a = await first.client()
        sid = (await create(a, bots=1))["session"]
        joined = await a.call("join", session=sid)
        token, after = joined["token"], joined["seq"]
        await a.call("act", session=sid, action={"type": "keep"}, seq=after)
        final = await pushes_until(a, "ended", 30.0)
        first.host.request_shutdown()
    async with trio.open_nursery() as n:
        second = await start_host(n, tmp_path)
        assert sid not in second.host.sessions
        c = await second.client()
        r = await c.call("resume", session=sid, token=token, after=after)
        assert (r["ended"], r["seq"], r["outcome"]) == (
            True,
            final[-1]["seq"],
            final[-1]["outcome"],
        )
        missed = [await c.next_push() for _ in range(r["seq"] - after + 1)]
        assert [p["seq"] for p in missed[:-1]] == list(range(after + 1, r["seq"] + 1))
        assert missed[-1] == final[-1]  # the same `ended` push
        w = await second.client()
        snap = await w.call("watch", session=sid)
        assert snap["ended"] and (await w.next_push())["push"] == "ended"
        r = await c.request("act", session=sid, action={"type": "keep"})
        assert r["error"]["code"] == "session_ended"
        r = await c.request("resume", session=sid, token=token, after=snap["seq"] + 5)
        assert (r["error"]["code"], r["error"]["seq"]) == ("records_lost", snap["seq"])
        r = await c.request("resume", session=sid, token=token, after=-1)
        assert r["error"]["code"] == "bad_request"
        r = await c.request("view", session="../../etc/passwd")
        assert r["error"]["code"] == "unknown_session"
        second.host.request_shutdown()


async def test_a_resume_past_the_logs_end_is_records_lost(toy_host):
    a = await toy_host.client()
    sid = (await create(a))["session"]
    joined = await a.call("join", session=sid)
    with capture_logs() as logged:
        for _ in range(3):  # a client may repeat it: the host's error line is written once
            r = await a.request(
                "resume", session=sid, token=joined["token"], after=joined["seq"] + 1
            )
            assert r["error"] == {
                "code": "records_lost",
                "message": r["error"]["message"],
                "seq": joined["seq"],
            }
    assert [e["event"] for e in logged].count("log_lost_records") == 1


# -- item 6: timers and abandonment ---------------------------------------------------------------
async def test_a_session_nobody_joins_ends_as_abandoned(tmp_path, autojump_clock):
    seen = Observer()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(observers=(seen,)), abandon_after=50.0)
        c = await running.client()
        t0 = trio.current_time()
        sid = (await create(c, seats=3, bots=2))["session"]
        await ended(seen, sid)
        assert trio.current_time() - t0 >= 50.0
        assert seen.outcomes[sid] is None
        snap = await c.call("view", session=sid)
        assert (snap["ended"], snap["aborted"]) == (True, "abandoned")
        running.host.request_shutdown()
    recs = log_of(tmp_path, sid)
    assert recs[-1].data["aborted"] == "abandoned"
    assert verify_log(running.host.registry.engines["high-card"], recs) is None


async def test_a_watched_session_nobody_plays_ends_as_abandoned(tmp_path, autojump_clock):
    seen = Observer()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(observers=(seen,)), abandon_after=50.0)
        c, w = await running.client(), await running.client()
        t0 = trio.current_time()
        sid = (await create(c))["session"]
        await w.call("watch", session=sid)  # a spectator does not keep a table alive
        pushes = await pushes_until(w, "ended")
        assert pushes[-1]["aborted"] == "abandoned" and trio.current_time() - t0 >= 50.0
        running.host.request_shutdown()


async def test_a_session_whose_players_left_ends_as_abandoned_though_watched(
    tmp_path, autojump_clock
):
    seen = Observer()
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, registry(observers=(seen,)), abandon_after=50.0, turn_timeout=None
        )
        c, w = await running.client(), await running.client()
        sid = (await create(c, seats=2, bots=1))["session"]
        await c.call("join", session=sid)
        await w.call("watch", session=sid)
        await trio.sleep(100)  # a player is attached: not abandoned
        assert not seen.event(sid).is_set()
        t0 = trio.current_time()
        await c.aclose()  # the only player goes; the spectator stays
        await ended(seen, sid)
        assert trio.current_time() - t0 >= 50.0
        snap = await w.call("view", session=sid)
        assert snap["aborted"] == "abandoned"
        running.host.request_shutdown()


async def test_a_watcher_keeps_an_all_bot_session_attended(tmp_path, autojump_clock):
    seen = Observer()
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, registry(observers=(seen,)), abandon_after=50.0, bot_delay=30.0
        )
        c, w = await running.client(), await running.client()
        sid = (await create(c, seats=2, bots=2))["session"]
        await w.call("watch", session=sid)
        await ended(seen, sid)  # played out by its bots, not abandoned
        assert seen.outcomes[sid] is not None
        running.host.request_shutdown()


async def test_a_seat_that_disconnects_gets_played_by_the_default_turn_timer(
    tmp_path, autojump_clock
):
    seen = Observer()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(observers=(seen,)), abandon_after=None)
        a = await running.client()
        sid = (await create(a, bots=1))["session"]
        await a.call("join", session=sid)
        t0 = trio.current_time()
        await a.aclose()
        await ended(seen, sid)
        assert trio.current_time() - t0 >= 120.0  # the default turn timer
        assert seen.outcomes[sid] is not None
        running.host.request_shutdown()
    actions = [r for r in log_of(tmp_path, sid) if r.type == "action"]
    assert [(r.data["seat"], r.data.get("timed_out")) for r in actions] == [(0, True), (1, None)]


async def test_turn_timeouts_reach_the_header_and_win_on_reload(tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        c = await running.client()
        default = (await create(c))["session"]
        off = (await create(c, turn_timeout=None))["session"]
        five = (await create(c, turn_timeout=5))["session"]
        r = await c.request("create", game="high-card", turn_timeout=-1)
        assert r["error"]["code"] == "bad_request"
        running.host.request_shutdown()
    headers = {sid: log_of(tmp_path, sid)[0].data for sid in (default, off, five)}
    assert [headers[s]["turn_timeout"] for s in (default, off, five)] == [120.0, None, 5]
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, turn_timeout=30.0)
        live = again.host.sessions
        assert [live[s].turn_timeout for s in (default, off, five)] == [120.0, None, 5]
        again.host.request_shutdown()


# -- item 2: a failed append is retried, not fatal -------------------------------------------------
async def test_a_session_carries_on_after_an_append_fails_once(tmp_path, autojump_clock):
    """Until the retry is due (1 s after the failure) the store is left alone: a command that
    would write answers ``unavailable`` at once, ``view`` answers from what the host holds;
    then the host reloads the log by itself and the same command goes through."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        store = running.host.store
        a, b = await running.client(), await running.client()
        sid = (await create(a))["session"]
        await a.call("join", session=sid)
        jb = await b.call("join", session=sid)
        real_append, real_load = store.append, store.load
        failures = [OSError(24, "Too many open files")]
        calls: list[str] = []

        async def flaky(*args: Any, **kw: Any) -> None:
            calls.append("append")
            if failures:
                raise failures.pop()
            await real_append(*args, **kw)

        def load(*args: Any, **kw: Any) -> Any:  # run in a worker thread
            calls.append("load")
            return real_load(*args, **kw)

        store.append = flaky  # type: ignore[method-assign]
        store.load = load  # type: ignore[method-assign]
        r = await a.request("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert r["error"]["code"] == "unavailable"
        failed_at = trio.current_time()
        for _ in range(3):  # neither brings the retry forward
            r = await a.request("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
            assert r["error"]["code"] == "unavailable" and "retries in" in r["error"]["message"]
            assert (await b.call("view", session=sid))["seq"] == jb["seq"]
        assert calls == ["append"] and trio.current_time() - failed_at < 1.0
        while calls == ["append"]:  # the host reloads the log by itself once the retry is due
            await trio.sleep(0.1)
        assert calls == ["append", "load"] and trio.current_time() - failed_at >= 1.0
        acted = await a.call("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert acted == {"seq": jb["seq"] + 2}
        stalled = await b.next_push()  # told once that the store failed
        assert stalled == {"push": "stalled", "session": sid, "reason": "store_error"}
        got = await b.next_push()  # b is still subscribed and gets the action
        assert (got["kind"], got["seq"]) == ("action", jb["seq"] + 1)
        running.host.request_shutdown()
    assert verify_log(running.host.registry.engines["high-card"], log_of(tmp_path, sid)) is None


async def test_an_abandoned_session_stops_counting_against_max_sessions(tmp_path, autojump_clock):
    seen = Observer()
    reg = registry(observers=(seen,))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, reg, max_sessions=1, abandon_after=50.0)
        c = await running.client()
        sid = (await create(c))["session"]
        r = await c.request("create", game="high-card")
        assert r["error"]["code"] == "overloaded"
        await ended(seen, sid)
        assert sid in running.host.sessions  # it lingers, ended
        assert (await create(c))["session"] != sid
        running.host.request_shutdown()


@given(seats=st.integers(2, 6), data=st.data())
def test_the_records_of_a_create_fold_and_verify_for_any_bot_count(seats, data):
    bots = data.draw(st.integers(0, seats))
    engine = registry().engines["high-card"]
    opts = engine.codec.options_from_wire({}, seats)
    header = engine.header("s", opts, seats, range(seats - bots, seats), bytes(32))
    records = [header, *seat_bots(engine, engine.initial(header), range(seats - bots, seats))]
    state = engine.rebuild(records)
    assert state.free_seats == list(range(seats - bots))
    assert [s.bot for s in state.seats if s is not None] == [True] * bots
    assert state.started == (bots == seats)
    assert engine.verify(records) is None


# -- a seat whose player is gone is played at once after a few timeouts ---------------------------
class LongHighCard(HighCard):
    """The toy, eight turns per seat."""

    info = attrs.evolve(HighCard.info, id="long-high-card")

    def to_act(self, state):
        if not state.hands or state.turn >= state.seats * 8:
            return ()
        return (state.turn % state.seats,)

    def outcome(self, state):
        if not state.hands or state.turn < state.seats * 8:
            return None
        return super().outcome(state)


async def test_an_absent_seat_is_played_at_once_after_three_timeouts_until_resumed(
    tmp_path, autojump_clock
):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(LongHighCard()), abandon_after=None)
        a, b = await running.client(), await running.client()
        sid = (await create(a, game="long-high-card", turn_timeout=10))["session"]
        await a.call("join", session=sid)
        jb = await b.call("join", session=sid)
        await b.aclose()  # seat 1's player is gone (say its join reply was lost)
        pushes = await pushes_until(a, "turn")
        while not any(p.get("kind") == "seat_released" for p in pushes):
            pushes += await pushes_until(a, "turn")  # the turn push of the state after it
        turn = pushes[-1]

        async def seat_1_turn() -> float:
            """Act for seat 0; how long seat 1's turn then took."""
            nonlocal turn
            t0 = trio.current_time()
            await a.call("act", session=sid, action={"type": "keep"}, seq=turn["seq"])
            turn = (await pushes_until(a, "turn"))[-1]
            return trio.current_time() - t0

        waited = [await seat_1_turn() for _ in range(3)]
        assert all(w >= 10.0 for w in waited)
        assert await seat_1_turn() < 10.0  # played at once
        assert await seat_1_turn() < 10.0
        b2 = await running.client()
        await b2.call("resume", session=sid, token=jb["token"])
        pushes = await pushes_until(a, "turn")  # the resume is a record: a new turn push
        assert [p["kind"] for p in pushes if p["push"] == "event"] == ["seat_held"]
        turn = pushes[-1]
        assert await seat_1_turn() >= 10.0  # resumed: its turns wait for it again
        running.host.request_shutdown()
    actions = [r.data for r in log_of(tmp_path, sid) if r.type == "action"]
    assert [d.get("timed_out") for d in actions if d["seat"] == 1] == [True] * 6


# -- a join whose reply cannot be built appends no seat, and its table ends ---------------------
async def test_a_join_whose_view_faults_appends_no_seat_and_ends_the_table(tmp_path):
    """A view that raises is the game's fault, like a decide that raises: the join's seat is not
    written, the table ends as game_error and the seated player is told."""
    game = broken_games.ViewRaisesOnceDealt()
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, load_registry([("broken", broken_games.Plugin(game))], entrypoints=False)
        )
        a, b = await running.client(), await running.client()
        sid = (await create(a))["session"]
        await a.call("join", session=sid)
        r = await b.request("join", session=sid)  # the second seat deals: view raises
        assert r["error"]["code"] == "internal"
        ended = [p for p in await pushes_until(a, "ended") if p["push"] == "ended"]
        assert ended[-1]["aborted"] == "game_error"
        assert await a.call("ping") == {"pong": True}
        running.host.request_shutdown()
    log = log_of(tmp_path, sid)
    assert [r.type for r in log] == ["header", "seat_taken", "ended"]
    assert log[-1].data["aborted"] == "game_error"


async def test_a_failing_store_is_retried_with_backoff_and_told_once(tmp_path, autojump_clock):
    seen = Observer()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry(observers=(seen,)), bot_delay=5.0)
        store = running.host.store
        real = store.append
        attempts: list[float] = []

        async def failing(*args: Any, **kw: Any) -> None:
            attempts.append(trio.current_time())
            if len(attempts) <= 5:
                raise OSError(28, "No space left on device")
            await real(*args, **kw)

        store.append = failing  # type: ignore[method-assign]
        c, w = await running.client(), await running.client()
        sid = (await create(c, seats=2, bots=2))["session"]
        await w.call("watch", session=sid)
        pushes = await pushes_until(w, "ended")
        assert [p for p in pushes if p["push"] == "stalled"] == [
            {"push": "stalled", "session": sid, "reason": "store_error"}
        ]
        assert pushes[-1]["outcome"] is not None  # it carried on once the store recovered
        gaps = [b - a for a, b in zip(attempts[:5], attempts[1:6], strict=True)]
        assert all(gap >= 2.0**i for i, gap in enumerate(gaps))  # 1, 2, 4, 8, 16 s at least
        running.host.request_shutdown()
    assert verify_log(running.host.registry.engines["high-card"], log_of(tmp_path, sid)) is None


@attrs.define(eq=False)
class _GoneConnection:
    """A connection that went away while its request waited on the session."""

    peer: str = "gone"
    key: str = ""
    dead: bool = True
    lines: list[bytes] = attrs.Factory(list)

    def send(self, push: Any) -> bool:
        return False

    def send_many(self, pushes: Any) -> bool:
        return False

    def answer(self, rid: Any, outcome: Any) -> None:
        pass

    def settled(self) -> None:
        pass

    def attached(self, session: str, viewer: Any) -> None:
        pass

    def detached(self, session: str) -> None:
        pass


async def test_a_connection_gone_before_its_join_is_answered_does_not_keep_the_session(tmp_path):
    """The seat is taken (it is in the log), but a dead connection is not attached: it would
    hold the session against abandonment for ever and keep the connection in memory."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        c = await running.client()
        sid = (await c.call("create", game="high-card", seats=3))["session"]
        session = running.host.sessions[sid]
        gone = _GoneConnection(key=f"{running.host.instance}.gone")
        session.submit(gone, 1, commands.Join("x", None))
        await c.call("view", session=sid)  # answered after the join: the actor got there
        assert session.state.seats[0] is not None  # the join itself went through
        assert gone not in session.subscribers
        running.host.request_shutdown()


async def test_a_session_whose_log_is_gone_for_good_stops_instead_of_retrying(
    tmp_path, autojump_clock
):
    """After a failed append the session reloads its log (a request brings that forward once
    a second has passed); if the log is gone (or damaged), retrying cannot help: the session
    leaves the live list (freeing its place) and requests are answered clearly, not
    ``unavailable`` for ever."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        store = running.host.store
        a, b = await running.client(), await running.client()
        sid = (await create(a))["session"]
        await a.call("join", session=sid)
        jb = await b.call("join", session=sid)

        async def failing(*args: Any, **kw: Any) -> None:
            raise OSError(5, "Input/output error")

        store.append = failing  # type: ignore[method-assign]
        r = await a.request("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert r["error"]["code"] == "unavailable"
        store.path(sid).unlink()  # and the log is gone
        r = await a.request("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
        assert r["error"]["code"] == "unavailable"  # within the second: the store is not tried
        await trio.sleep(1.0)
        for _ in range(300):  # the reload reads in a store thread (no deadline here: the
            # autojump clock would jump to it while the thread reads): until it has read,
            # a request may still be answered unavailable, never for ever
            r = await a.request("act", session=sid, action={"type": "keep"}, seq=jb["seq"])
            if r["error"]["code"] != "unavailable":
                break
            await trio.sleep(0.1)
        # the reloading session answers session_damaged, then leaves the live list: a request
        # that comes after it left is told the log is not there (unknown_session); which of
        # the two the first answer is depends on when the store thread's read ended
        assert r["error"]["code"] in ("session_damaged", "unknown_session")
        with trio.fail_after(10):
            while sid in running.host.sessions:  # the actor ends and lets go of its place
                await trio.sleep(0)
        r = await a.request("view", session=sid)
        assert r["error"]["code"] == "unknown_session"
        running.host.request_shutdown()


def the_key(host: Any, client: Any) -> str:
    """The key of ``client``'s connection on ``host`` (found by its socket's address)."""
    here = client.stream.socket.getsockname()
    for conn in host.connections:
        if conn.stream.socket.getpeername() == here:
            return conn.key
    raise AssertionError("no such connection")


@pytest.mark.parametrize("holder_left", [False, True])
async def test_a_resume_whose_client_hangs_up_while_it_is_written_takes_nothing(
    tmp_path, autojump_clock, holder_left
):
    """A resume is written while its client hangs up (the store is slow): once written, the
    gone connection does not hold the seat — it goes straight back to the connection that held
    it (never told ``detached``), or, if nobody did, is released — so the turn timer and
    abandonment can run (breaker's findings: it was left "held" by a dead connection, then
    taken from a live one)."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, turn_timeout=None, abandon_after=None)
        a = await running.client()
        sid = (await create(a))["session"]
        joined = await a.call("join", session=sid)
        if holder_left:
            await a.call("leave", session=sid)
        store = running.host.store
        real = store.append
        entered, gate = trio.Event(), trio.Event()

        async def slow(*args: Any, **kw: Any) -> None:
            entered.set()
            await gate.wait()
            await real(*args, **kw)

        store.append = slow  # type: ignore[method-assign]
        b = await running.client()
        line = orjson.dumps({"id": 1, "op": "resume", "session": sid, "token": joined["token"]})
        await b.send_raw(line + b"\n")
        await entered.wait()
        await b.aclose()
        await trio.sleep(30)  # past the time a closing connection waits for its answers
        store.append = real  # type: ignore[method-assign]
        gate.set()
        table = running.host.sessions[sid].table
        back = "seat_released" if holder_left else "seat_held"
        with trio.fail_after(120):  # the table, not only the file: what decides later commands
            while "returned" not in (last := log_of(tmp_path, sid)[-1]).data or (
                table.seq != last.seq
            ):
                await trio.sleep(0.1)
        held = table.holders[0]
        recs = log_of(tmp_path, sid)
        assert held == (None if holder_left else the_key(running.host, a)), (held, recs[-3:])
        if not holder_left:
            assert (await a.call("view", session=sid))["connected"][0]
        running.host.request_shutdown()
    recs = log_of(tmp_path, sid)
    assert [r.type for r in recs[-2:]] == ["seat_held", back]
    assert recs[-1].data["returned"] == recs[-2].seq
