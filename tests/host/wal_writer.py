"""A writer process for the write-ahead log's kill tests (``tests/host/test_wal.py``).

``python -m tests.host.wal_writer DIR SESSIONS SEED [KILL]`` opens a file store on ``DIR`` as a
host does (``exclusive``: recovering the log first), creates the sessions ``s0`` .. that do not
exist yet and appends to all of them at once, forever, one to three records at a time, each
record ``{"type": "event", "v": "<session>:<seq>"}``. After every acknowledged append it prints
``ack <session> <last seq>`` (flushed), so what the parent reads was acknowledged.

``KILL`` makes the process SIGKILL itself at one place, on a seeded random batch:
``after_sync`` right after the log's sync (before a session file is written), ``mid_files``
after some of a batch's session files were written (before anyone is acknowledged),
``checkpoint`` while a checkpoint is syncing session files. Without it the parent kills it.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path

import trio

from host.store import wal as wal_module
from host.store.file import FileStore
from tests.host.test_store import rec

SEGMENT = 4096  # small segments: rotations and checkpoints happen within a short run


def record(sid: str, seq: int) -> dict:
    return rec(seq) if seq == 0 else rec(seq, v=f"{sid}:{seq}")


def arm(kill: str, rng: random.Random) -> None:
    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    if kill == "after_sync":
        real_sync = wal_module.Wal.sync

        def sync(self: wal_module.Wal) -> None:
            real_sync(self)
            if rng.random() < 0.05:
                die()

        wal_module.Wal.sync = sync  # type: ignore[method-assign]
    elif kill == "mid_files":
        real_write = FileStore._write_file

        def write_file(self: FileStore, job, failed) -> None:  # type: ignore[no-untyped-def]
            real_write(self, job, failed)
            if rng.random() < 0.02:
                die()

        FileStore._write_file = write_file  # type: ignore[method-assign]
    elif kill == "checkpoint":
        real_sessions = wal_module.Wal.sync_sessions

        def sync_sessions(self: wal_module.Wal, sessions):  # type: ignore[no-untyped-def]
            sessions = list(sessions)
            real_sessions(self, sessions[: len(sessions) // 2])
            if rng.random() < 0.5:
                die()
            return real_sessions(self, sessions)

        wal_module.Wal.sync_sessions = sync_sessions  # type: ignore[method-assign]


async def main(root: Path, sessions: int, seed: int, kill: str | None) -> None:
    rng = random.Random(seed)
    if kill:
        arm(kill, rng)
    store = FileStore(root, "batch", exclusive=True, segment_bytes=SEGMENT)
    have = set(store.session_ids())
    nxt = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for i in range(sessions):
            sid = f"s{i}"
            if sid in have:
                nxt[sid] = len(store.load(sid))
            else:
                await store.create(sid, [record(sid, 0)])
                nxt[sid] = 1
                print(f"ack {sid} 0", flush=True)

        async def play(sid: str, r: random.Random) -> None:
            while True:
                first = nxt[sid]
                n = r.randint(1, 3)
                await store.append(sid, first, [record(sid, s) for s in range(first, first + n)])
                nxt[sid] = first + n
                print(f"ack {sid} {first + n - 1}", flush=True)

        for sid in nxt:
            nursery.start_soon(play, sid, random.Random(rng.getrandbits(64)))


if __name__ == "__main__":
    trio.run(
        main,
        Path(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        sys.argv[4] if len(sys.argv) > 4 else None,
    )
