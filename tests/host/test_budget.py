"""Game code has a budget (host/plugins/budget.py): a game that loops for ever or allocates
without bound is stopped, its session ends as ``game_error`` naming the fault, and every other
table goes on; a restart does not run into the same fault again."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from host.plugins.budget import Budget, BudgetExceeded
from host.plugins.registry import load_registry
from tests import broken_games
from tests.conftest import log_of, start_host


def test_a_step_that_loops_is_interrupted_within_its_time() -> None:
    budget = Budget(0.1, None)
    budget.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(BudgetExceeded) as got, budget.step("a loop"):
            while True:
                pass
        took = time.monotonic() - t0
        assert got.value.what == "time" and 0.1 <= took < 1.0
        for _ in range(20):  # short steps are never interrupted, nor is what follows them
            with budget.step("quick"):
                sum(range(1000))
        time.sleep(0.3)
        assert budget.overruns == 1
    finally:
        budget.stop()


def test_a_step_that_allocates_without_bound_is_interrupted() -> None:
    budget = Budget(None, 64 << 20)
    budget.start()
    try:
        with pytest.raises(BudgetExceeded) as got, budget.step("a hoard"):
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        assert got.value.what == "memory"
        del hoard
    finally:
        budget.stop()


def test_a_game_that_catches_everything_is_interrupted_again() -> None:
    budget = Budget(0.05, None)
    budget.start()
    caught = 0
    try:
        with pytest.raises(BudgetExceeded), budget.step("stubborn"):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    caught += 1
                    if caught == 3:
                        raise
        assert caught == 3
    finally:
        budget.stop()


def registry_of(game: Any) -> Any:
    plugins: list[tuple[str, Any]] = [("broken", broken_games.Plugin(game))]
    return load_registry(plugins, entrypoints=False)


async def deal(running: Any, seats: int = 2, bots: int = 0) -> tuple[str, list[Any]]:
    clients = [await running.client() for _ in range(seats - bots)]
    sid = (await clients[0].call("create", game="high-card", seats=seats, bots=bots))["session"]
    for c in clients:
        await c.call("join", session=sid)
    return sid, clients


async def ended_push(c: Any) -> dict[str, Any]:
    while True:
        p = await c.next_push()
        assert p is not None, "the host hung up"
        if p["push"] == "ended":
            return p


@pytest.mark.parametrize(
    ("game", "fault"),
    [(broken_games.DecideLoops(), "time"), (broken_games.DecideEatsMemory(), "memory")],
)
async def test_a_command_into_a_game_that_never_returns_ends_its_table(tmp_path, game, fault):
    async with trio.open_nursery() as n:
        running = await start_host(
            n, tmp_path, registry_of(game), game_time=0.3, game_memory=64, turn_timeout=None
        )
        sid, (a, b) = await deal(running)
        t0 = time.monotonic()
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        assert time.monotonic() - t0 < 10
        for c in (a, b):  # every subscriber is told the table ended, and why
            end = await ended_push(c)
            assert (end["outcome"], end["aborted"]) == (None, "game_error")
        assert await a.call("ping") == {"pong": True}  # the host answers on
        running.host.request_shutdown()
    last = log_of(tmp_path, sid)[-1]
    assert (last.type, last.data["aborted"], last.data["fault"]) == ("ended", "game_error", fault)


async def test_a_looping_bot_is_stopped_and_the_other_tables_go_on(tmp_path):
    game = broken_games.BotLoops()  # its bot loops; tables of humans only play on
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        lobby = await running.client()
        sid, (a,) = await deal(running, seats=2, bots=1)
        # seat 0 keeps; the bot (seat 1) is then to act and loops
        turn = None
        while turn is None:
            p = await a.next_push()
            if p["push"] == "turn":
                turn = p
        other, (x, y) = await deal(running)  # another table, played on meanwhile
        await a.call("act", session=sid, action={"type": "keep"}, seq=turn["seq"])
        end = await ended_push(a)
        assert end["aborted"] == "game_error"
        t0 = time.monotonic()
        assert await lobby.call("ping") == {"pong": True}
        assert time.monotonic() - t0 < 1.0
        snap = await x.call("view", session=other)
        assert not snap["ended"]
        running.host.request_shutdown()
    assert log_of(tmp_path, sid)[-1].data["fault"] == "time"


async def test_a_looping_view_ends_the_table_and_is_not_run_again_after_a_restart(tmp_path):
    game = broken_games.ViewLoops()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        w = await running.client()
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="high-card", seats=2))["session"]
        await w.call("watch", session=sid, view=True)  # asks for view pushes
        token = (await a.call("join", session=sid))["token"]
        r = await b.request("join", session=sid)  # the deal: the join's reply view loops
        assert r["error"]["code"] == "internal"
        end = await ended_push(w)
        assert end["aborted"] == "game_error"
        snap = await w.call("view", session=sid)
        assert snap["ended"] and snap["view"] is None
        running.host.request_shutdown()
    t0 = time.monotonic()
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        c = await again.client()
        resumed = await c.call("resume", session=sid, token=token)
        assert resumed["ended"] and resumed["view"] is None
        assert time.monotonic() - t0 < 5
        assert again.host.budget.overruns == 0  # the game's view is not run again
        again.host.request_shutdown()


async def test_a_view_that_raises_ends_the_table_and_later_requests_get_its_end(tmp_path):
    game = broken_games.ViewRaises()  # view raises for spectators, redact for seat 1
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game))
        sid, (a, b) = await deal(running)
        w = await running.client()
        r = await w.request("watch", session=sid)
        assert r["error"]["code"] == "internal"  # that command fails
        end = await ended_push(a)  # and the table ends, telling every subscriber
        assert (end["outcome"], end["aborted"]) == (None, "game_error")
        watched = await w.call("watch", session=sid)  # later requests: its end, view null
        assert watched["ended"] and watched["view"] is None
        running.host.request_shutdown()
    async with trio.open_nursery() as n:  # after a restart too
        again = await start_host(n, tmp_path, registry_of(game))
        c = await again.client()
        assert (await c.call("watch", session=sid))["aborted"] == "game_error"
        again.host.request_shutdown()


async def test_a_game_that_calls_sys_exit_is_a_game_fault_and_the_host_serves_on(tmp_path):
    async with trio.open_nursery() as n:  # a client's command: that command fails
        running = await start_host(n, tmp_path, registry_of(broken_games.DecideExits()))
        sid, (a, b) = await deal(running)
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        assert await b.call("ping") == {"pong": True}
        assert (await a.call("act", session=sid, action={"type": "keep"}))["seq"] > 0
        running.host.request_shutdown()
    async with trio.open_nursery() as n:  # a host-driven step: the table ends, the host lives
        running = await start_host(n, tmp_path / "bots", registry_of(broken_games.BotExits()))
        sid, (a,) = await deal(running, seats=2, bots=1)
        turn = None
        while turn is None:
            p = await a.next_push()
            turn = p if p["push"] == "turn" else None
        await a.call("act", session=sid, action={"type": "keep"}, seq=turn["seq"])
        assert (await ended_push(a))["aborted"] == "game_error"
        assert await a.call("ping") == {"pong": True}
        running.host.request_shutdown()
    assert log_of(tmp_path / "bots", sid)[-1].data["aborted"] == "game_error"


@pytest.mark.parametrize("game", [broken_games.ViewUnencodable(), broken_games.ViewTooLarge()])
async def test_a_view_that_cannot_be_sent_ends_the_table_and_keeps_the_request_id(tmp_path, game):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game))
        w = await running.client()
        a, b = await running.client(), await running.client()
        sid = (await a.call("create", game="high-card", seats=2))["session"]
        await a.call("join", session=sid)
        await w.call("watch", session=sid)
        with trio.fail_after(10):  # the reply has the request's id (the client matches by id)
            r = await b.request("join", session=sid)  # the deal: the join's reply view is bad
        assert r["error"]["code"] == "internal"
        assert (await ended_push(w))["aborted"] == "game_error"
        snap = await w.call("view", session=sid)  # its end, without running the view again
        assert snap["ended"] and snap["view"] is None
        running.host.request_shutdown()
    assert log_of(tmp_path, sid)[-1].data["aborted"] == "game_error"
