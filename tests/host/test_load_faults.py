"""Loading a session runs its game's code within the budget too: at start (an unfinished
session's fold, and the re-run of its last cause), for ``view``/``watch``/``resume`` of an ended
one, and by a heavy-work process for a long log. A game that faults there ends its unfinished
session as ``game_error`` (so the next restart does not run into it), or, for an ended session,
the request gets ``game_faulted`` and the host remembers it; every other table is served."""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio

from host.net import server
from host.plugins.registry import load_registry
from tests import broken_games
from tests.conftest import log_of, start_host
from tests.host.test_replayops import error_code, play_to_the_end
from tests.toy import Plugin as ToyPlugin


def registry_with(game: Any) -> Any:
    return load_registry(
        [("toy", ToyPlugin()), ("armable", broken_games.Plugin(game))], entrypoints=False
    )


async def one_move(running: Any, game: str) -> tuple[str, str]:
    """A two-seat session of ``game`` (two clients), dealt, seat 0 kept once; its id and seat
    0's token."""
    a, b = await running.client(), await running.client()
    sid = (await a.call("create", game=game, seats=2))["session"]
    token = (await a.call("join", session=sid))["token"]
    await b.call("join", session=sid)
    await a.call("act", session=sid, action={"type": "keep"})
    return sid, token


@pytest.mark.parametrize("armed", ["evolve", "decide"])
async def test_a_restart_whose_game_loops_loading_a_session_ends_it_and_serves_on(tmp_path, armed):
    game = broken_games.Armable()
    registry = registry_with(game)
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry)
        sid, _ = await one_move(running, "armable")
        running.host.request_shutdown()
    game.armed.add(armed)  # the upgraded plugin: its fold (or the last cause's re-run) loops
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, registry, game_time=0.3)
        assert sid not in again.host.sessions
        assert again.host.budget.overruns == 1
        c = await again.client()
        assert await c.call("ping") == {"pong": True}
        other = (await c.call("create", game="high-card", seats=2, bots=1))["session"]
        assert (await c.call("join", session=other))["seq"] > 0  # other tables are served
        snap = await c.call("view", session=sid)  # its end, without its game's code
        assert snap["ended"] and snap["view"] is None
        assert again.host.budget.overruns == 1
        again.host.request_shutdown()
    last = log_of(tmp_path, sid)[-1]
    assert (last.type, last.data["aborted"], last.data["fault"]) == ("ended", "game_error", "time")
    async with trio.open_nursery() as n:  # and the next restart does not run into it again
        third = await start_host(n, tmp_path, registry, game_time=0.3)
        assert third.host.budget.overruns == 0
        third.host.request_shutdown()


async def test_a_view_of_an_ended_session_whose_fold_loops_is_answered_and_remembered(tmp_path):
    game = broken_games.Armable()
    registry = registry_with(game)
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry)
        c = await running.client()
        sid = (await c.call("create", game="armable", seats=2, bots=1))["session"]
        await c.call("join", session=sid)
        await play_to_the_end(c, sid, 0)
        running.host.request_shutdown()
    game.armed.add("evolve")
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, registry, game_time=0.3)
        c = await again.client()
        assert await error_code(c, "view", session=sid) == "game_faulted"
        assert again.host.budget.overruns == 1
        for op in ("view", "watch"):  # remembered: answered from the log, no game code
            other = await again.client()
            got = await other.call(op, session=sid)
            assert got["ended"] and got["view"] is None
        assert await error_code(c, "replay", session=sid, seq=3) == "game_faulted"
        assert again.host.budget.overruns == 1
        again.host.request_shutdown()


# -- long logs are loaded by a heavy-work process ----------------------------------------------
def worker_registry() -> Any:
    from tests import worker_games  # a module: a worker process imports it by name

    return load_registry([("worker-games", worker_games)], entrypoints=False)


async def test_a_long_unfinished_log_is_loaded_by_a_worker_process(tmp_path, monkeypatch):
    monkeypatch.setattr(server, "LOAD_IN_WORKER", 5)
    registry = worker_registry()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry, heavy_workers=1)
        sid, token = await one_move(running, "loops-in-workers")
        running.host.request_shutdown()
    path = tmp_path / "sessions" / f"{sid}.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"crc":"0000')  # a torn tail: an append a crash cut short
    from host.store.file import FileStore

    loads: list[str] = []
    real = FileStore.load
    monkeypatch.setattr(FileStore, "load", lambda self, s: loads.append(s) or real(self, s))
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, registry, heavy_workers=1)
        assert again.host.heavy.pids(), "no worker process loaded it"
        assert sid in again.host.sessions and loads == []  # never read whole on the loop
        table = again.host.sessions[sid].table
        records = log_of(tmp_path, sid)
        assert table.state == again.host.registry.engines["loops-in-workers"].rebuild(records)
        assert path.read_bytes().startswith(whole)  # the torn tail was cut (appends follow)
        c = await again.client()
        resumed = await c.call("resume", session=sid, token=token)
        assert resumed["seat"] == 0 and resumed["seq"] >= table.state.seq
        again.host.request_shutdown()
    logged = log_of(tmp_path, sid)  # the resume's seat_held appended where the log ended
    assert logged[-1].type == "seat_held" and [r.seq for r in logged] == list(range(len(logged)))


async def test_a_game_that_loops_in_the_worker_loading_it_ends_the_session(tmp_path, monkeypatch):
    from tests.worker_games import HOST_PID

    monkeypatch.setattr(server, "LOAD_IN_WORKER", 5)
    registry = worker_registry()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry, heavy_workers=1)
        sid, _ = await one_move(running, "loops-in-workers")
        running.host.request_shutdown()
    monkeypatch.setenv(HOST_PID, str(os.getpid()))  # from now on its evolve loops in workers
    async with trio.open_nursery() as n:
        again = await start_host(n, tmp_path, registry, heavy_workers=1, game_time=0.3)
        assert sid not in again.host.sessions
        c = await again.client()
        snap = await c.call("view", session=sid)
        assert snap["ended"] and snap["view"] is None
        again.host.request_shutdown()
    last = log_of(tmp_path, sid)[-1]
    assert (last.data["aborted"], last.data["fault"]) == ("game_error", "time")
