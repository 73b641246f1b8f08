"""``gamehost bench --idle N``: what an idle connection costs the host in memory.

Starts ``gamehost serve`` (its own process, a fresh data dir) and, in the same run, a bare trio
server (``python -m tools.baseline --echo``: one task per connection that answers each line on
the same connection, nothing else), and for each of them in turn:

1. opens :data:`WARM` connections that each send ``hello`` and read the reply (the server's
   caches, its accept path and the allocator's first arenas are warm), and waits
   :data:`SETTLE` seconds;
2. reads the server's resident memory (``VmRSS`` of ``/proc/<pid>/status``);
3. opens ``N`` more connections the same way (at most :data:`AT_ONCE` being opened at a time),
   leaves them all open and silent, waits :data:`SETTLE` seconds and reads the resident memory
   again.

The figure is the growth over ``N``: ``idle_kib_per_connection`` for the host,
``bare_idle_kib_per_connection`` for the bare server (what a trio task and its socket cost,
the floor). The kernel's socket buffers are not in a process's resident memory, so neither
figure counts them. The load generator (this process) holds ``2 * (N + WARM)`` sockets at
most: the soft descriptor limit is raised to the hard one first.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio

__all__ = ["AT_ONCE", "SETTLE", "WARM", "open_idle", "rss_kib", "run"]

WARM = 100
"""Connections opened (and kept) before the first reading."""
SETTLE = 2.0
"""Seconds waited before each reading."""
AT_ONCE = 200
"""Connections being opened at the same time, at most."""

_HELLO = orjson.dumps({"id": 1, "op": "hello", "protocol": 1, "client": "bench-idle"}) + b"\n"


def rss_kib(pid: int) -> int | None:
    """Resident memory (``VmRSS``) of process ``pid`` in KiB, None if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


async def open_idle(port: int, n: int, streams: list[trio.SocketStream]) -> None:
    """Open ``n`` connections to ``port``, each sending ``hello`` and reading one whole line
    back, and add them (open) to ``streams``.

    Raises:
        ConnectionError: a server closed a connection before answering.
    """
    gate = trio.Semaphore(AT_ONCE)

    async def one() -> None:
        async with gate:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(_HELLO)
            got = b""
            while not got.endswith(b"\n"):
                data = await stream.receive_some(65536)
                if not data:
                    raise ConnectionError("the server closed an idle connection before answering")
                got += data
            streams.append(stream)

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)


async def _measure(port: int, pid: int, n: int) -> dict[str, Any]:
    streams: list[trio.SocketStream] = []
    try:
        await open_idle(port, WARM, streams)
        await trio.sleep(SETTLE)
        before = rss_kib(pid)
        began = time.perf_counter()
        await open_idle(port, n, streams)
        opened = time.perf_counter() - began
        await trio.sleep(SETTLE)
        after = rss_kib(pid)
    finally:
        with trio.CancelScope(shield=True):
            for s in streams:
                await s.aclose()
    per = None if before is None or after is None else (after - before) / n
    return {"rss_before_kib": before, "rss_after_kib": after, "kib": per, "open_s": opened}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """``bench --idle N``: the figures (see the module doc); ``idle_*`` for the host,
    ``bare_idle_*`` for the bare server.

    Raises:
        ValueError: N below 1. RuntimeError: a server did not start.
    """
    from host.net.server import raise_fd_limit
    from tools import bench

    n = args.idle
    if n < 1:
        raise ValueError("--idle must be at least 1")
    raise_fd_limit()
    out: dict[str, Any] = {"idle_connections": n, "fsync": args.fsync}
    with tempfile.TemporaryDirectory(prefix="gamehost-idle-") as tmp:
        proc, port = bench._start_host(args.fsync, tmp, tuple(getattr(args, "serve_arg", ())))
        try:
            host = trio.run(_measure, port, proc.pid, n)
        finally:
            bench._stop(proc)
    bproc, bport = bench._start_server(
        [sys.executable, "-m", "tools.baseline", "--port", "0", "--echo"]
    )
    try:
        bare = trio.run(_measure, bport, bproc.pid, n)
    finally:
        bench._stop(bproc)
    for prefix, r in (("idle", host), ("bare_idle", bare)):
        out[f"{prefix}_rss_before_mib"] = _mib(r["rss_before_kib"])
        out[f"{prefix}_rss_after_mib"] = _mib(r["rss_after_kib"])
        out[f"{prefix}_kib_per_connection"] = r["kib"]
        out[f"{prefix}_open_s"] = r["open_s"]
    return out


def _mib(kib: int | None) -> float | None:
    return None if kib is None else kib / 1024


def summary(r: dict[str, Any]) -> list[str]:
    """The human lines of :func:`run`'s figures."""

    def kib(v: float | None) -> str:
        return "?" if v is None else f"{v:.1f} KiB"

    return [
        f"{r['idle_connections']} idle connections (after hello), resident memory growth per"
        f" connection: host {kib(r['idle_kib_per_connection'])}"
        f" ({r['idle_rss_before_mib']:.1f} -> {r['idle_rss_after_mib']:.1f} MiB),"
        f" bare trio server {kib(r['bare_idle_kib_per_connection'])}"
        f" ({r['bare_idle_rss_before_mib']:.1f} -> {r['bare_idle_rss_after_mib']:.1f} MiB)"
    ]
