"""The file store's writer is pipelined: while one batch's syncs run, the next batch is written
and synced, and acknowledged without waiting for the first when it shares no session with it. A
session's appends are still acknowledged in order, each only after its own sync, and a failed
sync fails exactly the appends it covered and the later ones of that session."""

from __future__ import annotations

import errno
import os
import threading

import pytest
import trio
import trio.testing

from host.store import Conflict, FileStore, read_log
from tests.host.test_store_descriptors import REAL_FSYNC, make_logs, rec, target

GUARD = 10.0  # seconds: only a bound on a hang when the behaviour is missing, never a timing


class BlockedSync:
    """A fake ``fdatasync``: the first sync of ``path`` starts, then waits for ``gate`` (and
    then fails when ``fail``); every sync is noted per file once done."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: str, fail: bool = False) -> None:
        self.path, self.fail = path, fail
        self.started, self.gate = threading.Event(), threading.Event()
        self.blocked_once = False
        self.synced: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        monkeypatch.setattr(os, "fsync", self)
        monkeypatch.setattr(os, "fdatasync", self)

    def done(self, path: str) -> threading.Event:
        with self.lock:
            return self.synced.setdefault(path, threading.Event())

    def __call__(self, fd: int) -> None:
        path = target(fd)
        with self.lock:
            first = path == self.path and not self.blocked_once
            self.blocked_once |= first
        if first:
            self.started.set()
            self.gate.wait(GUARD)
            if self.fail:
                raise OSError(errno.EIO, "Input/output error")
        REAL_FSYNC(fd)
        self.done(path or "").set()


async def wait_thread_event(event: threading.Event) -> bool:
    return await trio.to_thread.run_sync(event.wait, GUARD)


async def test_a_batch_written_during_an_earlier_sync_is_synced_and_acknowledged_meanwhile(
    tmp_path, monkeypatch
):
    a, b = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch")
    store.load(a), store.load(b)
    sync = BlockedSync(monkeypatch, os.fspath(store.path(a)))
    acked: list[str] = []
    done = {a: trio.Event(), b: trio.Event()}

    async def append(sid: str) -> None:
        await store.append(sid, 1, [rec(1)])
        acked.append(sid)
        done[sid].set()

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        nursery.start_soon(append, a)
        assert await wait_thread_event(sync.started)  # a's sync runs (and waits) ...
        nursery.start_soon(append, b)
        # ... while b is written, synced and acknowledged: it shares no session with a's batch
        assert await wait_thread_event(sync.done(os.fspath(store.path(b))))
        with trio.fail_after(GUARD):
            await done[b].wait()
        assert acked == [b]  # a's sync still waits
        sync.gate.set()
        with trio.fail_after(GUARD):
            await done[a].wait()
        await store.aclose()
    assert acked == [b, a]
    assert [r["seq"] for r in read_log(store.path(a))] == [0, 1]
    assert [r["seq"] for r in read_log(store.path(b))] == [0, 1]


async def test_a_failed_sync_fails_its_append_and_the_later_ones_of_its_session_only(
    tmp_path, monkeypatch
):
    a, b = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch")
    store.load(a), store.load(b)
    sync = BlockedSync(monkeypatch, os.fspath(store.path(a)), fail=True)
    results: dict[tuple[str, int], object] = {}
    all_in = trio.Event()

    async def append(sid: str, seq: int) -> None:
        try:
            await store.append(sid, seq, [rec(seq)])
            results[sid, seq] = "ok"
        except (OSError, Conflict) as exc:
            results[sid, seq] = exc
        if len(results) == 3:
            all_in.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        nursery.start_soon(append, a, 1)
        assert await wait_thread_event(sync.started)
        nursery.start_soon(append, a, 2)  # queued behind a's first append, in the next batch
        nursery.start_soon(append, b, 1)
        assert await wait_thread_event(sync.done(os.fspath(store.path(b))))
        assert not results  # a's second append is in b's batch: held until a's first is done
        sync.gate.set()
        with trio.fail_after(GUARD):
            await all_in.wait()
        assert results[b, 1] == "ok"
        assert isinstance(results[a, 1], OSError)
        second = results[a, 2]  # its own sync went well, but it follows a failed append
        assert isinstance(second, Conflict) and "not open" in str(second)
        with pytest.raises(Conflict, match="not open"):
            await store.append(a, 3, [rec(3)])
        nxt = len(store.load(a))  # the log may hold both records: carry on from it
        await store.append(a, nxt, [rec(nxt)])
        await store.append(b, 2, [rec(2)])
        await store.aclose()
    assert [r["seq"] for r in read_log(store.path(a))] == list(range(nxt + 1))
    assert [r["seq"] for r in read_log(store.path(b))] == [0, 1, 2]
