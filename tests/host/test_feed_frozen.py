"""A lease holder that freezes (SIGSTOP: its process is alive, its kernel still answers TCP
keepalives, but it runs nothing) must not hold its leases for ever: the database ends its idle
feed connection after ``PostgresFeed.lease_timeout`` seconds, which frees its advisory locks,
so another host takes over the bots and timers of its sessions."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys

import psycopg

HOLDER = """
import sys
import trio
from host.store.feed import PostgresFeed

async def main():
    feed = PostgresFeed(sys.argv[1], lease_timeout=2.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(feed.run)
        async for _ in feed.notices():  # Notice(None): connected
            break
        got = await feed.try_leases([sys.argv[2]])
        print("held", *sorted(got), flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


def test_a_frozen_lease_holder_loses_its_leases(pg_dsn: str) -> None:
    sid = "frozen-" + secrets.token_hex(4)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, pg_dsn, sid], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        said = next(line for line in holder.stdout if line.startswith("held"))  # past log lines
        assert said.split() == ["held", sid]
        os.kill(holder.pid, signal.SIGSTOP)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # the lease is free only once the server ended the frozen holder's connection;
            # before that this waits (lock_timeout is the test's guard, not a measurement)
            conn.execute("SET lock_timeout = '60s'")
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [sid])
            held = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid = pg_backend_pid()"
            ).fetchone()
            assert held == (1,)
    finally:
        holder.kill()
        holder.wait()
