"""The replay ops run game code within the budget too (host/net/replayops.py): a game that
faults in a log page's redaction, a replay's fold or view ends its live table as
``game_error``; for a session that is over the request gets ``game_faulted`` and the host
remembers it. A session whose game faulted never runs that code again: its log pages show its
events as null, ``replay``/``verify``/``fork`` answer ``game_faulted`` at once (no budget
burnt), after a restart too."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from tests import broken_games
from tests.conftest import log_of, start_host
from tests.host.test_budget import ended_push, registry_of
from tests.host.test_replayops import error_code, play_to_the_end


async def a_live_session(running: Any) -> tuple[Any, str]:
    c = await running.client()
    sid = (await c.call("create", game="high-card", seats=2, bots=1))["session"]
    await c.call("join", session=sid)
    return c, sid


async def test_a_log_page_whose_redaction_loops_ends_the_live_table(tmp_path):
    game = broken_games.SpectatorRedactLoops()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        player, sid = await a_live_session(running)
        debugger = await running.client()
        t0 = time.monotonic()
        assert await error_code(debugger, "log", session=sid) == "game_faulted"
        assert time.monotonic() - t0 < 10
        end = await ended_push(player)  # the table ends, and its player is told
        assert end["aborted"] == "game_error"
        assert running.host.budget.overruns == 1
        page = await debugger.call("log", session=sid)  # its records, the game's code not run
        events = [r for r in page["records"] if r["type"] == "event"]
        assert events and all(r["event"] is None for r in events)
        seat = await debugger.call("log", session=sid, seat=0)  # no token: no fold to check it
        assert [r["event"] for r in seat["records"] if r["type"] == "event"] == [
            r["event"] for r in events
        ]
        for op, params in (("replay", {"seq": 3}), ("verify", {}), ("fork", {"seq": 3})):
            assert await error_code(debugger, op, session=sid, **params) == "game_faulted"
        assert running.host.budget.overruns == 1  # none of that ran the game again
        assert await debugger.call("ping") == {"pong": True}
        running.host.request_shutdown()
    last = log_of(tmp_path, sid)[-1]
    assert (last.data["aborted"], last.data["fault"]) == ("game_error", "time")
    async with trio.open_nursery() as n:  # after a restart: the log says it faulted
        again = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        c = await again.client()
        assert await error_code(c, "replay", session=sid, seq=3) == "game_faulted"
        page = await c.call("log", session=sid)
        assert all(r["event"] is None for r in page["records"] if r["type"] == "event")
        assert again.host.budget.overruns == 0
        again.host.request_shutdown()


@pytest.mark.parametrize(
    ("game", "fault"),
    [(broken_games.SpectatorViewLoops(), "time"), (broken_games.ViewRaises(), "error")],
)
async def test_a_replay_of_an_ended_session_whose_view_faults_is_remembered(tmp_path, game, fault):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        player, sid = await a_live_session(running)
        last = await play_to_the_end(player, sid, 0)
        assert log_of(tmp_path, sid)[-1].data.get("aborted") is None  # it ended well
        debugger = await running.client()
        assert await error_code(debugger, "replay", session=sid, seq=last) == "game_faulted"
        overruns = running.host.budget.overruns
        assert overruns == (1 if fault == "time" else 0)
        t0 = time.monotonic()  # remembered: the next requests do not run the view again
        assert await error_code(debugger, "replay", session=sid, seq=last) == "game_faulted"
        snap = await debugger.call("view", session=sid)
        assert snap["ended"] and snap["view"] is None
        assert time.monotonic() - t0 < 2 and running.host.budget.overruns == overruns
        running.host.request_shutdown()


async def test_a_seat_may_still_replay_what_a_spectator_cannot(tmp_path):
    """A spectator's view loops; the seat's does not: a replay as the seat (with its token)
    works while the session lives, and the spectator's replay ends the table."""
    game = broken_games.SpectatorViewLoops()
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(game), game_time=0.3)
        c = await running.client()
        sid = (await c.call("create", game="high-card", seats=2, bots=1))["session"]
        token = (await c.call("join", session=sid))["token"]
        debugger = await running.client()
        mine = await debugger.call("replay", session=sid, seq=3, seat=0, token=token)
        assert mine["view"] is not None
        assert await error_code(debugger, "replay", session=sid, seq=3) == "game_faulted"
        assert (await ended_push(c))["aborted"] == "game_error"
        running.host.request_shutdown()
    assert log_of(tmp_path, sid)[-1].data["fault"] == "time"
