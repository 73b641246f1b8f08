"""A game that takes the whole host process down — ``os._exit`` in its bot, or one call into C
that no interruption reaches — under ``gamehost serve --supervise``: the supervisor starts the
host again, the crash marker (``host.net.marker``) names the session, and after at most two
restarts the session is over (``game_error``, ``fault`` ``crash`` or ``hang``) while the host
serves other tables."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import trio

from tests.conftest import log_of
from tests.crashing_games import ARM
from tools.client import Client

ROOT = Path(__file__).resolve().parents[2]


async def serve_supervised(data: Path, *extra: str) -> trio.Process:
    """``gamehost serve --supervise`` on ``data`` with the crashing games (its log on its
    stderr, JSON; ``data/arm`` arms :class:`tests.crashing_games.DecideHangsWhenArmed`)."""
    argv = [sys.executable, "-m", "tools.cli", "serve", "--supervise", "--port", "0"]
    argv += ["--data-dir", str(data), "--log-format", "json", "--turn-timeout", "0"]
    argv += ["--plugin", "tests.crashing_games", *extra]
    env = {**os.environ, ARM: str(data / "arm")}
    proc = await trio.lowlevel.open_process(
        argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(ROOT), env=env
    )
    return proc


class Log:
    """The host's log lines, read as they come."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._send, self._recv = trio.open_memory_channel[dict](math.inf)

    async def pump(self) -> None:
        buf = b""
        assert self.proc.stderr is not None
        async with self._send:
            while chunk := await self.proc.stderr.receive_some(65536):
                buf += chunk
                *done, buf = buf.split(b"\n")
                for line in done:
                    if line.startswith(b"{"):
                        self._send.send_nowait(orjson.loads(line))

    async def until(self, event: str) -> dict[str, Any]:
        with trio.fail_after(90):
            async for msg in self._recv:
                self.lines.append(msg)
                if msg.get("event") == event:
                    return msg
        raise AssertionError(f"no {event} line")

    def count(self, event: str) -> int:
        return sum(m.get("event") == event for m in self.lines)


async def first_bot_move(port: int, game: str, nursery: trio.Nursery) -> str:
    """A session of ``game`` with a bot in seat 1; seat 0 moves, so the bot is to move."""
    c = await Client.connect("127.0.0.1", port)
    c.start(nursery)
    sid = (await c.call("create", game=game, seats=2, bots=1))["session"]
    joined = await c.call("join", session=sid)
    with contextlib.suppress(ConnectionError):  # the bot may take the host down first
        await c.request("act", session=sid, action={"type": "keep"}, seq=joined["seq"])
    return sid


async def serves_another_table(port: int, nursery: trio.Nursery) -> None:
    c = await Client.connect("127.0.0.1", port)
    c.start(nursery)
    sid = (await c.call("create", game="crazy-eights", seats=2, bots=1))["session"]
    await c.call("join", session=sid)
    while (p := await c.next_push()) is not None and p["push"] != "turn":
        pass
    assert p is not None
    assert (await c.call("act", session=sid, action=p["legal"][0], seq=p["seq"]))["seq"] > 0
    await c.aclose()


async def run(tmp_path: Path, game: str, *extra: str) -> tuple[str, Log, dict[str, Any]]:
    proc = await serve_supervised(tmp_path, *extra)
    log = Log(proc)
    try:
        async with trio.open_nursery() as n:
            n.start_soon(log.pump)
            port = (await log.until("listening"))["port"]
            sid = await first_bot_move(port, game, n)
            faulted = await log.until("session_faulted")
            assert faulted["session"] == sid
            assert (await log.until("listening"))["port"] == port  # it serves again
            c = await Client.connect("127.0.0.1", port)
            c.start(n)
            view = await c.call("view", session=sid)
            assert view["ended"] and view["aborted"] == "game_error" and view["view"] is None
            await serves_another_table(port, n)
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                assert await proc.wait() == 0
            n.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return sid, log, faulted


async def test_a_bot_that_kills_the_host_is_ended_after_at_most_two_restarts(tmp_path):
    sid, log, faulted = await run(tmp_path, "bot-exits")
    assert faulted["fault"] == "crash"
    assert log.count("worker_started") <= 3  # the first start and at most two restarts
    assert [m["status"] for m in log.lines if m.get("event") == "worker_exited"] == [7, 7]
    noted = [m for m in log.lines if m.get("event") == "host_died_in_game"]
    assert [m["session"] for m in noted] == [sid]  # the first death is only noted
    last = log_of(tmp_path, sid)[-1]
    assert (last.type, last.data["aborted"], last.data["fault"]) == ("ended", "game_error", "crash")


async def test_a_bot_that_hangs_in_c_ends_the_host_and_its_session_after_one_restart(tmp_path):
    sid, log, faulted = await run(tmp_path, "bot-hangs-in-c", "--game-hang", "2")
    assert faulted["fault"] == "hang"
    assert log.count("worker_started") == 2  # the watchdog is sure: one restart is enough
    hung = [m for m in log.lines if m.get("event") == "host_hung"]
    assert hung and hung[0]["session"] == sid
    assert "crashing_games.py" in hung[0]["traceback"]  # where the game was stuck
    assert log_of(tmp_path, sid)[-1].data["fault"] == "hang"


async def test_on_postgres_the_marker_is_the_hosts_own_and_ends_the_session_in_the_database(
    tmp_path, pg_store_url
):
    """With PostgreSQL the marker lives in the host's own data dir (local); the session's
    ``ended`` record goes to the database."""
    sid, log, faulted = await run(tmp_path, "bot-exits", "--store", pg_store_url)
    assert faulted["fault"] == "crash" and log.count("worker_started") <= 3
    assert (tmp_path / "host-step.0").exists() and not (tmp_path / "sessions").exists()


async def test_a_session_whose_code_hung_the_host_is_not_folded_again_for_its_views(tmp_path):
    """Its game is off: ``view`` and ``watch`` of its end read the log without running its
    code (folding it again would re-run the last action's ``decide``, which hangs)."""
    proc = await serve_supervised(tmp_path, "--game-hang", "2")
    log = Log(proc)
    try:
        async with trio.open_nursery() as n:
            n.start_soon(log.pump)
            port = (await log.until("listening"))["port"]
            c = await Client.connect("127.0.0.1", port)
            c.start(n)
            game = "decide-hangs-when-armed"
            sid = (await c.call("create", game=game, seats=2, bots=1, options={"rounds": 2}))[
                "session"
            ]
            joined = await c.call("join", session=sid)
            await c.call("act", session=sid, action={"type": "keep"}, seq=joined["seq"])
            while (p := await c.next_push()) is not None:
                if p["push"] == "turn" and p["seq"] > joined["seq"]:
                    break  # the bot moved: seat 0 again
            assert p is not None
            (tmp_path / "arm").touch()
            with contextlib.suppress(ConnectionError):
                await c.request("act", session=sid, action={"type": "keep"}, seq=p["seq"])
            assert (await log.until("session_faulted"))["fault"] == "hang"
            assert (await log.until("listening"))["port"] == port
            again = await Client.connect("127.0.0.1", port)
            again.start(n)
            for op in ("view", "watch"):
                got = await again.call(op, session=sid)
                assert got["ended"] and got["aborted"] == "game_error" and got["view"] is None
            assert (await again.call("ping"))["pong"]
            assert log.count("worker_started") == 2  # no second hang
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                assert await proc.wait() == 0
            n.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_log_whose_fold_hangs_the_host_ends_its_session_after_one_restart(tmp_path):
    """Loading an unfinished session re-runs its last action's ``decide``: a game that hangs
    there (armed only after a clean stop) takes the host down while it loads, and the marker
    names the session being loaded, so the next start ends it instead of hanging again."""
    proc = await serve_supervised(tmp_path)
    log = Log(proc)
    try:
        async with trio.open_nursery() as n:
            n.start_soon(log.pump)
            port = (await log.until("listening"))["port"]
            c = await Client.connect("127.0.0.1", port)
            c.start(n)
            game = "decide-hangs-when-armed"
            sid = (await c.call("create", game=game, seats=2, bots=1, options={"rounds": 2}))[
                "session"
            ]
            joined = await c.call("join", session=sid)
            await c.call("act", session=sid, action={"type": "keep"}, seq=joined["seq"])
            while (p := await c.next_push()) is not None:
                if p["push"] == "turn" and p["seq"] > joined["seq"]:
                    break  # the bot moved: its decide is the log's last cause
            assert p is not None
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                assert await proc.wait() == 0
            n.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert log_of(tmp_path, sid)[-1].type != "ended"
    (tmp_path / "arm").touch()
    proc = await serve_supervised(tmp_path, "--game-hang", "2")
    log = Log(proc)
    try:
        async with trio.open_nursery() as n:
            n.start_soon(log.pump)
            port = (await log.until("listening"))["port"]
            faulted = await log.until("session_faulted")
            assert (faulted["session"], faulted["fault"]) == (sid, "hang")
            assert (await log.until("listening"))["port"] == port
            c = await Client.connect("127.0.0.1", port)
            c.start(n)
            view = await c.call("view", session=sid)
            assert view["ended"] and view["aborted"] == "game_error" and view["view"] is None
            await serves_another_table(port, n)
            assert log.count("worker_started") == 2  # one hang while loading, one restart
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                assert await proc.wait() == 0
            n.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert log_of(tmp_path, sid)[-1].data["fault"] == "hang"
