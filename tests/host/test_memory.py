"""Finished sessions leave nothing behind in the host: a ``gamehost serve`` process, sessions
created from loopback (as ``bench``, ``demo`` and a local reverse proxy do) and played to their
end by bots, its resident memory read from /proc before and after."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from pathlib import Path

import trio

from host.net.client import Client

BATCH = 800
"""Sessions per batch (the issue's measure: 2 x 800)."""
LIMIT_MIB = 10.0


def rss_mib(pid: int) -> float:
    """The process's resident set size, MiB (``VmRSS`` of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def play_batch(port: int, n: int) -> None:
    """Create ``n`` all-bot sessions (they play to their end at once) and wait until none is
    live any more (each finished one leaves memory after ``--linger 0``)."""
    c = await Client.connect("127.0.0.1", port)
    async with trio.open_nursery() as nursery:
        c.start(nursery)
        for _ in range(n):
            await c.call("create", game="around-the-world", seats=2, bots=2)
        with trio.fail_after(120):
            while (await c.call("sessions", limit=500))["sessions"]:
                await trio.sleep(0.05)  # the condition polled: the host's own answer
        await c.aclose()
        nursery.cancel_scope.cancel()


def test_finished_sessions_created_from_loopback_leave_the_hosts_memory_as_it_was(tmp_path):
    argv = [sys.executable, "-m", "tools.cli", "serve", "--port", "0", "--data-dir"]
    argv += [str(tmp_path), "--linger", "0", "--log-format", "json", "--fsync", "never"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            event = json.loads(line)
            if event.get("event") == "listening":
                port = event["port"]
                break
        assert port is not None, "the host did not start"
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
        trio.run(play_batch, port, BATCH)  # the first batch warms the caches up
        before = rss_mib(proc.pid)
        trio.run(play_batch, port, BATCH)
        trio.run(play_batch, port, BATCH)
        after = rss_mib(proc.pid)
        assert after - before <= LIMIT_MIB, f"2 x {BATCH} sessions: {before:.1f} -> {after:.1f} MiB"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _alive(kind: type, ids: set[str]) -> int:
    """How many objects of ``kind`` (Session, Table) of the sessions ``ids`` are alive."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind and o.id in ids)


async def test_one_connection_finishing_300_sessions_holds_none_of_them(tmp_path):
    """A long-lived connection that creates, watches and sees to their end 300 sessions keeps
    none of them alive once they have left the host's memory (past ``linger``): only the few
    ended sessions the host caches for ``resume``/``view`` remain, and the store holds nothing
    per session either."""
    from host.net.server import ENDED_CACHE
    from host.net.session import Session
    from host.table.core import Table
    from host.testing.hosting import start_host

    async with trio.open_nursery() as nursery:
        running = await start_host(nursery, tmp_path, linger=0.05, fsync="never")
        c = await running.client()
        made_here: set[str] = set()
        for _ in range(300):
            made = await c.call("create", game="crazy-eights", seats=2, bots=2)
            sid = made["session"]
            made_here.add(sid)
            watched = await c.call("watch", session=sid)
            while not watched["ended"]:
                push = await c.next_push()
                if push.get("push") == "ended" and push.get("session") == sid:
                    break
        with trio.fail_after(30):
            while running.host.sessions:  # each leaves memory once idle for `linger`
                await trio.sleep(0.01)
        (conn,) = running.host.connections
        assert len(conn.sessions) <= ENDED_CACHE
        assert _alive(Session, made_here) <= ENDED_CACHE
        assert _alive(Table, made_here) <= ENDED_CACHE
        store = running.host.store
        assert not store._next and not store._opened and not store._fds
        await c.aclose()
        running.host.request_shutdown()
