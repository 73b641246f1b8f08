"""A damaged session log is reported once, as one line, and every request for it gets
``session_damaged`` (not a traceback per request, not a ``retry``)."""

from __future__ import annotations

import os

import orjson
import trio
from structlog.testing import capture_logs

from host.table.local import play_local
from tests.conftest import start_host, toy_registry


async def test_a_damaged_log_is_one_error_line_and_session_damaged_for_every_request(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir(mode=0o700)
    (sessions / "empty0log.jsonl").write_bytes(b"")  # damaged: no header
    (sessions / "garbage0log.jsonl").write_bytes(b'{"seq": 0, "type": "header"}\nnot json\n{}\n')
    (sessions / "a0dir.jsonl").mkdir()
    os.mkfifo(sessions / "a0fifo.jsonl")
    (tmp_path / "elsewhere.jsonl").write_bytes(b"")
    (sessions / "a0link.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    damaged = ["empty0log", "garbage0log", "a0dir", "a0fifo", "a0link"]
    with capture_logs() as lines:
        await serve_damaged(tmp_path, damaged)
    corrupt = [e for e in lines if e["event"] == "session_log_corrupt"]
    assert sorted(e["session"] for e in corrupt) == sorted(damaged)  # once each
    assert all({"path", "seq", "error"} <= e.keys() for e in corrupt)
    assert not [e for e in lines if e.get("exc_info")]  # no traceback at all


async def serve_damaged(tmp_path, damaged: list[str]) -> None:
    """Ask for each damaged session three times over, with each op that reads a log."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        c = await running.client()
        for _ in range(3):
            for sid in damaged:
                for op, extra in (("view", {}), ("watch", {}), ("resume", {"token": "x"})):
                    r = await c.request(op, session=sid, **extra)
                    assert r["error"]["code"] == "session_damaged", (sid, op, r)
                    assert "damaged" in r["error"]["message"]
        r = await c.request("view", session="no0such0session")
        assert r["error"]["code"] == "unknown_session"
        assert await c.call("ping") == {"pong": True}
        running.host.request_shutdown()


async def test_a_log_that_reads_but_does_not_fold_is_damaged_too(tmp_path):
    """A log whose lines read but whose records the game cannot fold (an event of no type it
    knows, live or ended) is damage like any other: one line, ``session_damaged``."""
    engine = toy_registry().engines["high-card"]
    _, records = play_local(engine.game, seats=2, engine=engine)
    lines = [r.to_json() for r in records]
    event = next(i for i, r in enumerate(lines) if r["type"] == "event")
    lines[event]["event"] = {"type": "no_such_event"}
    sessions = tmp_path / "sessions"
    sessions.mkdir(mode=0o700)
    live = [{**r, "session": "unfolding0live"} if r["seq"] == 0 else r for r in lines]
    (sessions / "unfolding0live.jsonl").write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in live[: event + 1])  # cut before its end
    )
    (sessions / "unfolding0ended.jsonl").write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in lines)
    )
    with capture_logs() as logged:
        await serve_damaged(tmp_path, ["unfolding0live", "unfolding0ended"])
    corrupt = [e for e in logged if e["event"] == "session_log_corrupt"]
    assert sorted(e["session"] for e in corrupt) == ["unfolding0ended", "unfolding0live"]
    assert all(e["seq"] == event for e in corrupt)
    assert not [e for e in logged if e.get("exc_info")]
