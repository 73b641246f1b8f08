"""The store's writer thread: one long-lived thread writes every batch, ``aclose`` ends it, and
cancelling the task that runs it still writes (and acknowledges) every append queued before."""

from __future__ import annotations

import os
import re
import threading

import pytest
import trio
import trio.testing

from host.store import base as store_base
from host.store.base import StoreClosed
from host.store.file import FileStore, read_log
from tests.host.test_store import rec
from tests.host.test_store_descriptors import REAL_WRITE, make_logs, target

WRITER = "gamehost store writer"


def writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER]


async def test_many_batches_are_written_by_one_writer_thread_that_aclose_ends(
    tmp_path, monkeypatch
):
    ids = await make_logs(tmp_path, 3)
    store = FileStore(tmp_path, "batch")
    for sid in ids:
        store.load(sid)
    writers: list[tuple[int, str]] = []  # the appends' writes: session files, write-ahead log
    logs = str(store.dir)

    def write(fd: int, data: bytes) -> int:
        current = threading.current_thread()
        if os.path.dirname(target(fd) or "") in (logs, str(tmp_path / "wal")):
            writers.append((current.ident, current.name))
        return REAL_WRITE(fd, data)

    monkeypatch.setattr(os, "write", write)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for seq in range(1, 41):  # one append at a time: a batch each
            for sid in ids:
                await store.append(sid, seq, [rec(seq)])
        (thread,) = writer_threads()
        assert store.statistics().batches >= 40
        await store.aclose()
        assert writer_threads() == []  # the writer's work ended before aclose returned
    assert len(writers) == 120 + 120 + 1  # each append in its file and in the log, and the
    # log segment's first line
    assert set(writers) == {(thread.ident, WRITER)}
    assert thread.ident != threading.get_ident()
    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == list(range(41))


async def queue_appends(store: FileStore, nursery: trio.Nursery, ids, seq, results) -> None:
    async def one(sid: str) -> None:
        await store.append(sid, seq, [rec(seq)])
        results[sid, seq] = "ok"

    for sid in ids:
        nursery.start_soon(one, sid)
    await trio.testing.wait_all_tasks_blocked()


async def test_cancelling_the_writer_mid_batch_still_writes_every_queued_append(
    tmp_path, monkeypatch
):
    ids = await make_logs(tmp_path, 4)
    store = FileStore(tmp_path, "batch")
    for sid in ids:
        store.load(sid)
    results: dict = {}
    writer_scope = trio.CancelScope()

    async def run_writer(task_status=trio.TASK_STATUS_IGNORED) -> None:
        with writer_scope:
            await store.run(task_status=task_status)

    def write(fd: int, data: bytes) -> int:
        if not results and threading.current_thread().name == WRITER:
            # mid-way through the first batch: more appends queue, then cancel
            results["cancelled"] = True
            trio.from_thread.run(queue_appends, store, appenders, ids, 2, results)
            trio.from_thread.run_sync(writer_scope.cancel)
        return REAL_WRITE(fd, data)

    monkeypatch.setattr(os, "write", write)
    async with trio.open_nursery() as appenders, trio.open_nursery() as nursery:
        await nursery.start(run_writer)
        await queue_appends(store, appenders, ids, 1, results)
    assert writer_scope.cancelled_caught
    assert results == {"cancelled": True} | {(sid, seq): "ok" for sid in ids for seq in (1, 2)}
    with pytest.raises(StoreClosed):
        await store.append(ids[0], 3, [rec(3)])
    await store.aclose()  # returns at once: the writer has ended
    assert writer_threads() == []
    assert store.statistics().sessions_open == 0
    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == [0, 1, 2]


async def test_a_writer_cancelled_before_its_thread_starts_writes_the_queued_appends(tmp_path):
    ids = await make_logs(tmp_path, 3)
    store = FileStore(tmp_path, "always")
    for sid in ids:
        store.load(sid)
    results: dict = {}
    async with trio.open_nursery() as appenders:
        await queue_appends(store, appenders, ids, 1, results)
        assert store.statistics().queued == 3
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.run()
    assert results == {(sid, 1): "ok" for sid in ids}
    await store.aclose()
    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == [0, 1]


TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_the_timestamp_is_made_once_per_millisecond(monkeypatch):
    now = [1_764_496_800_123_456_789]  # 2025-11-30T10:00:00.123456789Z, in ns
    made = []
    real_strftime = store_base.time.strftime

    def strftime(fmt, t):
        made.append(t)
        return real_strftime(fmt, t)

    monkeypatch.setattr(store_base.time, "time_ns", lambda: now[0])
    monkeypatch.setattr(store_base.time, "strftime", strftime)
    first = [store_base.now_ts() for _ in range(5)]
    now[0] += 400_000  # still the same millisecond
    same = store_base.now_ts()
    now[0] += 600_000  # the next one
    later = store_base.now_ts()
    now[0] += 1_000_000_000
    next_second = store_base.now_ts()
    assert first == [first[0]] * 5 and same == first[0]
    assert first[0] == "2025-11-30T10:00:00.123Z"
    assert later == "2025-11-30T10:00:00.124Z"
    assert next_second == "2025-11-30T10:00:01.124Z"
    assert all(TS.match(t) for t in (first[0], later, next_second))
    assert len(made) == 3


async def test_a_session_whose_create_failed_can_be_created_again(tmp_path, monkeypatch):
    store = FileStore(tmp_path, "batch")
    path = os.fspath(store.path("s1"))
    failures = []

    def write(fd: int, data: bytes) -> int:
        written = os.readlink(f"/proc/self/fd/{fd}")
        if written.startswith(os.fspath(store.dir)) and not failures:  # the log or its temp file
            failures.append(fd)
            raise OSError(28, "No space left on device")
        return REAL_WRITE(fd, data)

    monkeypatch.setattr(os, "write", write)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        with pytest.raises(OSError):
            await store.create("s1", rec(0))
        assert not os.path.exists(path)
        await store.create("s1", rec(0))  # a new opening: the failure of the last one is over
        await store.append("s1", 1, [rec(1)])
        await store.aclose()
    assert len(failures) == 1
    assert [r["seq"] for r in read_log(store.path("s1"))] == [0, 1]


async def test_a_crash_during_create_leaves_no_log_and_its_temporary_file_is_removed(tmp_path):
    """A create is written to a temporary file and linked into place whole: a crash before the
    link (simulated by a leftover temporary file) leaves no log, and the next host start
    removes it."""
    store = FileStore(tmp_path, "batch")
    leftover = store.dir / ".s1.0badc0de.tmp"
    leftover.write_bytes(b'{"seq":0,"type":"hea')  # cut off mid-write by a crash
    FileStore(tmp_path, "batch")  # a tool's store leaves it: it may be a running host's
    assert leftover.exists()
    again = FileStore(tmp_path, "batch", exclusive=True)  # the host holding the data dir
    assert not leftover.exists()
    assert again.session_ids() == []
    async with trio.open_nursery() as nursery:
        await nursery.start(again.run)
        await again.create("s1", rec(0))
        assert [p.name for p in again.dir.iterdir()] == ["s1.jsonl"]  # no temporary file left
        await again.aclose()
    assert [r["seq"] for r in read_log(again.path("s1"))] == [0]
