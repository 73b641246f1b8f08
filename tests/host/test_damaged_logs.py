"""A damaged session log is reported once, as one line, and every request for it gets
``session_damaged`` (not a traceback per request, not a ``retry``)."""

from __future__ import annotations

import os

import trio
from structlog.testing import capture_logs

from tests.conftest import start_host


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
