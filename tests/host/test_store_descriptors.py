"""The store's writer and its descriptors: written file by file (a store without the write-ahead
log, ``wal=False``, as one that does not hold the data dir writes), every acknowledged append is
fsynced on its own file; ``release`` never closes a file under the writer, running out of
descriptors is survived, and a failed append leaves the session not open until it is loaded
again. ``tests/host/test_wal.py`` holds the same rules with the write-ahead log."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import threading
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.store.base import Conflict
from host.store.file import DataDirInUse, FileStore, read_log
from tests.host.test_store import rec

REAL_WRITE, REAL_FSYNC, REAL_OPEN = os.write, os.fsync, os.open


def target(fd: int) -> str | None:
    """The file a descriptor is open on, or None if it is not open."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return None


class Trace:
    """Records, in order, each write and fsync the store makes and the file each one hit."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str | None]] = []
        self.errors: list[OSError] = []
        monkeypatch.setattr(os, "write", self.write)
        monkeypatch.setattr(os, "fsync", self.fsync)
        monkeypatch.setattr(os, "fdatasync", self.fsync)  # the store syncs appends with it

    def write(self, fd: int, data: bytes) -> int:
        self.events.append(("write", target(fd)))
        return REAL_WRITE(fd, data)

    def fsync(self, fd: int) -> None:
        self.events.append(("fsync", target(fd)))
        try:
            REAL_FSYNC(fd)
        except OSError as exc:
            self.errors.append(exc)
            raise

    def unsynced(self) -> set[str | None]:
        """Files whose last write was not followed by an fsync of that same file."""
        pending: set[str | None] = set()
        for kind, path in self.events:
            if kind == "write":
                pending.add(path)
            else:
                pending.discard(path)
        return pending

    def written(self) -> set[str | None]:
        return {p for kind, p in self.events if kind == "write"}


async def make_logs(root: Path, n: int) -> list[str]:
    ids = [f"s{i}" for i in range(n)]
    setup = FileStore(root, "never")
    async with trio.open_nursery() as nursery:
        await nursery.start(setup.run)
        for sid in ids:
            await setup.create(sid, rec(0))
        await setup.aclose()
    return ids


async def queue_then_run(
    store: FileStore, appends: list[list[tuple[str, int]]], results: dict, then=None
) -> None:
    """Queue every append (phase by phase, so a session's appends queue in seq order) before the
    writer runs, so they all land in one batch; run the writer until they are done, then
    ``await then()`` (if given) and close the store."""

    async def one(sid: str, seq: int) -> None:
        try:
            await store.append(sid, seq, [rec(seq)])
            results[sid, seq] = "ok"
        except (OSError, Conflict) as exc:
            results[sid, seq] = exc

    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as appenders:
            for phase in appends:
                for sid, seq in phase:
                    appenders.start_soon(one, sid, seq)
                await trio.testing.wait_all_tasks_blocked()
            assert store.statistics().queued == sum(map(len, appends))
            await nursery.start(store.run)
        if then is not None:
            await then()
        await store.aclose()


@pytest.mark.parametrize(("sessions", "max_open"), [(12, 2), (300, 256)])
async def test_every_file_a_batch_wrote_gets_its_own_fsync_when_the_cache_evicts(
    tmp_path, monkeypatch, sessions, max_open
):
    ids = await make_logs(tmp_path, sessions)
    store = FileStore(tmp_path, "batch", max_open=max_open, wal=False)
    for sid in ids:
        store.load(sid)
    trace = Trace(monkeypatch)
    results: dict = {}
    # two appends per session in one batch: the cache evicts files between their writes
    phases = [[(sid, 1) for sid in ids], [(sid, 2) for sid in ids]]
    await queue_then_run(store, phases, results)

    assert store.statistics().batches == 1
    assert results == {(sid, seq): "ok" for sid in ids for seq in (1, 2)}
    assert trace.errors == []
    assert trace.written() == {str(store.path(sid)) for sid in ids}
    assert trace.unsynced() == set()
    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == [0, 1, 2]


async def test_the_files_of_one_batch_are_synced_at_once_not_one_after_another(
    tmp_path, monkeypatch
):
    """Each sync waits until another is under way: one after another, the first would wait
    forever (the barrier breaks after its timeout and the appends fail)."""
    ids = await make_logs(tmp_path, 4)
    store = FileStore(tmp_path, "batch", wal=False)
    for sid in ids:
        store.load(sid)
    both = threading.Barrier(2, timeout=30)
    synced: list[str | None] = []

    def sync(fd: int) -> None:
        synced.append(target(fd))
        try:
            both.wait()
        except threading.BrokenBarrierError:
            raise OSError(errno.EIO, "no other sync ran meanwhile") from None
        REAL_FSYNC(fd)

    monkeypatch.setattr(os, "fsync", sync)
    monkeypatch.setattr(os, "fdatasync", sync)
    results: dict = {}
    await queue_then_run(store, [[(sid, 1) for sid in ids]], results)
    assert results == {(sid, 1): "ok" for sid in ids}
    assert sorted(synced) == sorted(str(store.path(sid)) for sid in ids)
    assert store.statistics().fsyncs == 4


async def test_the_open_file_cache_never_exceeds_max_open(tmp_path):
    ids = await make_logs(tmp_path, 6)
    store = FileStore(tmp_path, "batch", max_open=2, wal=False)
    for sid in ids:
        store.load(sid)
    results: dict = {}
    await queue_then_run(store, [[(sid, 1) for sid in ids]], results)
    assert set(results.values()) == {"ok"}
    assert store.statistics().fsyncs == 6


def test_max_open_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="max_open"):
        FileStore(tmp_path, max_open=0)


async def test_release_while_the_writer_works_waits_for_the_batch(tmp_path, monkeypatch):
    ids = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch", wal=False)
    for sid in ids:
        store.load(sid)
    trace = Trace(monkeypatch)
    released = []

    def write(fd: int, data: bytes) -> int:
        n = trace.write(fd, data)
        if not released:  # the session actors release both files mid-batch
            released.extend(ids)
            for sid in ids:
                trio.from_thread.run_sync(store.release, sid)
        return n

    monkeypatch.setattr(os, "write", write)
    results: dict = {}
    await queue_then_run(store, [[(sid, 1) for sid in ids]], results)

    assert released == ids
    assert results == {(sid, 1): "ok" for sid in ids}
    assert trace.errors == []
    assert trace.written() == {str(store.path(sid)) for sid in ids}
    assert trace.unsynced() == set()
    assert store.statistics().sessions_open == 0


async def test_release_between_batches_closes_the_file_and_a_later_append_reopens_it(tmp_path):
    (sid,) = await make_logs(tmp_path, 1)
    store = FileStore(tmp_path, "batch")
    store.load(sid)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.append(sid, 1, [rec(1)])
        assert store.statistics().sessions_open == 1
        store.release(sid)
        assert store.statistics().sessions_open == 0
        store.load(sid)  # a released session is opened again by a load
        await store.append(sid, 2, [rec(2)])
        await store.aclose()
    assert [r["seq"] for r in read_log(store.path(sid))] == [0, 1, 2]


def fail_open_of(monkeypatch, path: Path, times: int, err: int = errno.EMFILE) -> list[int]:
    """Make the next ``times`` opens of ``path`` fail with ``err``; returns the failures made."""
    made: list[int] = []

    def fake_open(p, flags, *args, **kw):
        if os.fspath(p) == os.fspath(path) and len(made) < times:
            made.append(err)
            raise OSError(err, os.strerror(err), os.fspath(p))
        return REAL_OPEN(p, flags, *args, **kw)

    monkeypatch.setattr(os, "open", fake_open)
    return made


async def test_out_of_descriptors_closes_the_cached_files_and_opens_again(tmp_path, monkeypatch):
    ids = await make_logs(tmp_path, 4)
    store = FileStore(tmp_path, "batch", max_open=8)
    for sid in ids:
        store.load(sid)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for sid in ids[:3]:
            await store.append(sid, 1, [rec(1)])
        assert store.statistics().sessions_open == 3
        made = fail_open_of(monkeypatch, store.path(ids[3]), 1, errno.ENFILE)
        await store.append(ids[3], 1, [rec(1)])
        assert made == [errno.ENFILE]
        assert store.statistics().sessions_open == 1  # the others were closed to make room
        await store.append(ids[0], 2, [rec(2)])  # and are reopened when needed
        await store.aclose()
    assert [r["seq"] for r in read_log(store.path(ids[3]))] == [0, 1]
    assert [r["seq"] for r in read_log(store.path(ids[0]))] == [0, 1, 2]


async def test_an_append_that_cannot_open_its_log_leaves_it_unchanged_and_not_open(
    tmp_path, monkeypatch
):
    ids = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch")
    for sid in ids:
        store.load(sid)
    path = store.path(ids[1])
    before = path.read_bytes()
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        await store.append(ids[0], 1, [rec(1)])
        fail_open_of(monkeypatch, path, 2)  # the retry fails too
        with pytest.raises(OSError) as info:
            await store.append(ids[1], 1, [rec(1)])
        assert info.value.errno == errno.EMFILE
        assert path.read_bytes() == before
        for seq in (1, 2):
            with pytest.raises(Conflict, match="not open"):
                await store.append(ids[1], seq, [rec(seq)])
        assert [r["seq"] for r in store.load(ids[1])] == [0]
        await store.append(ids[1], 1, [rec(1)])
        await store.aclose()
    assert [r["seq"] for r in read_log(path)] == [0, 1]


def fail_write_of(monkeypatch, path: Path, half: bool = True) -> list[int]:
    """Make the first write to ``path`` write half its bytes (if ``half``), then fail ENOSPC."""
    failed: list[int] = []

    def write(fd: int, data: bytes) -> int:
        if target(fd) == os.fspath(path) and not failed:
            failed.append(fd)
            if half:
                REAL_WRITE(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return REAL_WRITE(fd, data)

    monkeypatch.setattr(os, "write", write)
    return failed


async def test_a_half_written_append_is_cut_off_and_the_session_must_be_loaded_again(
    tmp_path, monkeypatch
):
    (sid,) = await make_logs(tmp_path, 1)
    store = FileStore(tmp_path, "batch")
    store.load(sid)
    path = store.path(sid)
    before = path.read_bytes()
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        fail_write_of(monkeypatch, path)
        with pytest.raises(OSError):
            await store.append(sid, 1, [rec(1, x="y" * 100), rec(2)])
        assert path.read_bytes() == before
        # the optimistic next seq is gone: neither the old nor the hoped-for seq is accepted
        for seq in (1, 3):
            with pytest.raises(Conflict, match="not open"):
                await store.append(sid, seq, [rec(seq)])
        assert [r["seq"] for r in store.load(sid)] == [0]
        await store.append(sid, 1, [rec(1)])
        await store.aclose()
    assert [r["seq"] for r in read_log(path)] == [0, 1]


async def test_a_torn_write_that_could_not_be_cut_off_is_repaired_by_load(tmp_path, monkeypatch):
    (sid,) = await make_logs(tmp_path, 1)
    store = FileStore(tmp_path, "batch")
    store.load(sid)
    path = store.path(sid)
    before = path.read_bytes()
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        fail_write_of(monkeypatch, path)
        with monkeypatch.context() as m:
            m.setattr(os, "ftruncate", lambda fd, size: (_ for _ in ()).throw(OSError(errno.EIO)))
            with pytest.raises(OSError):
                await store.append(sid, 1, [rec(1, x="y" * 100)])
        assert path.read_bytes() != before  # the torn half is there
        with pytest.raises(Conflict, match="not open"):  # nothing is written after it
            await store.append(sid, 2, [rec(2)])
        assert [r["seq"] for r in store.load(sid)] == [0]
        assert path.read_bytes() == before
        await store.append(sid, 1, [rec(1)])
        await store.aclose()


async def test_appends_queued_in_the_same_batch_after_a_failed_one_are_not_written(
    tmp_path, monkeypatch
):
    ids = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch")
    for sid in ids:
        store.load(sid)
    fail_write_of(monkeypatch, store.path(ids[0]), half=False)
    results: dict = {}
    await queue_then_run(store, [[(ids[0], 1), (ids[1], 1)], [(ids[0], 2), (ids[1], 2)]], results)
    assert isinstance(results[ids[0], 1], OSError)
    assert isinstance(results[ids[0], 2], Conflict)
    assert results[ids[1], 1] == results[ids[1], 2] == "ok"
    assert [r["seq"] for r in read_log(store.path(ids[0]))] == [0]  # no record after a gap
    assert [r["seq"] for r in read_log(store.path(ids[1]))] == [0, 1, 2]


async def test_an_append_queued_while_the_failing_batch_is_written_is_refused(
    tmp_path, monkeypatch
):
    (sid,) = await make_logs(tmp_path, 1)
    store = FileStore(tmp_path, "batch")
    store.load(sid)
    path = store.path(sid)
    results: dict = {}

    async def second() -> None:
        try:
            await store.append(sid, 2, [rec(2)])
            results[2] = "ok"
        except Conflict as exc:
            results[2] = exc

    async def queue_second(nursery: trio.Nursery) -> None:
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        assert store.statistics().queued == 1

    def write(fd: int, data: bytes) -> int:
        if target(fd) == os.fspath(path) and not results:
            results["queued"] = True
            trio.from_thread.run(queue_second, nursery)
            raise OSError(errno.EIO, "Input/output error")
        return REAL_WRITE(fd, data)

    monkeypatch.setattr(os, "write", write)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        with pytest.raises(OSError):
            await store.append(sid, 1, [rec(1)])
        await store.aclose()
    assert isinstance(results[2], Conflict)
    assert "not open" in str(results[2])
    assert [r["seq"] for r in read_log(path)] == [0]


async def test_a_failed_fsync_fails_only_its_files_appends(tmp_path, monkeypatch):
    ids = await make_logs(tmp_path, 2)
    store = FileStore(tmp_path, "batch", wal=False)
    for sid in ids:
        store.load(sid)
    bad = os.fspath(store.path(ids[0]))

    def fsync(fd: int) -> None:
        if target(fd) == bad:
            raise OSError(errno.EIO, "Input/output error")
        REAL_FSYNC(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fsync)  # the store syncs appends with it
    results: dict = {}

    async def then() -> None:
        with pytest.raises(Conflict, match="not open"):
            await store.append(ids[0], 2, [rec(2)])
        await store.append(ids[1], 2, [rec(2)])

    await queue_then_run(store, [[(sid, 1) for sid in ids]], results, then)
    assert isinstance(results[ids[0], 1], OSError)
    assert results[ids[1], 1] == "ok"
    assert store.statistics().appends == 2


FAULTS = st.sampled_from([None, None, None, "open", "open_twice", "write", "half", "fsync"])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sessions=st.integers(min_value=1, max_value=5),
    max_open=st.integers(min_value=1, max_value=3),
    rounds=st.lists(
        st.lists(st.tuples(st.integers(min_value=0, max_value=4), FAULTS), min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
)
def test_acknowledged_appends_are_synced_on_their_own_file_and_logs_stay_gapless(
    monkeypatch, sessions, max_open, rounds
):
    """Any mix of sessions, appends per batch, cache size and faults (out of descriptors once or
    twice, a write refused or cut half way, a failed fsync): every acknowledged append is in its
    log and was fsynced on its own file after it was written; a session whose append failed is
    loaded again and carries on; every log stays gapless."""
    with tempfile.TemporaryDirectory() as root, monkeypatch.context() as m:
        trio.run(_faulty_rounds, Path(root), m, sessions, max_open, rounds, False)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sessions=st.integers(min_value=1, max_value=5),
    max_open=st.integers(min_value=1, max_value=3),
    rounds=st.lists(
        st.lists(st.tuples(st.integers(min_value=0, max_value=4), FAULTS), min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
    log_fault=st.sampled_from([None, None, "write", "half", "fsync"]),
)
def test_acknowledged_appends_are_in_the_synced_write_ahead_log_and_logs_stay_gapless(
    monkeypatch, sessions, max_open, rounds, log_fault
):
    """The same with the write-ahead log (and faults of the log itself, in its first batch):
    every acknowledged append was written to its session file and to the log, and the log
    synced after that, before it was acknowledged; the rest as above."""
    with tempfile.TemporaryDirectory() as root, monkeypatch.context() as m:
        trio.run(_faulty_rounds, Path(root), m, sessions, max_open, rounds, True, log_fault)


async def _faulty_rounds(
    root: Path,
    m: pytest.MonkeyPatch,
    sessions: int,
    max_open,
    rounds,
    wal: bool,
    log_fault: str | None = None,
):
    ids = await make_logs(root, sessions)
    store = FileStore(root, "batch", max_open=max_open, wal=wal)
    nxt = {sid: len(store.load(sid)) for sid in ids}
    faults: dict[str, list[str]] = {}  # file -> faults still to happen, in order
    events: list[tuple] = []  # ("write", file, seq) / ("fsync", file), successful calls only
    armed = [False]  # faults only hit the writer, not the test's own loads

    def fault(path: str | None, *kinds: str) -> str | None:
        todo = faults.get(path or "")
        if armed[0] and todo and todo[0] in kinds:
            return todo.pop(0)
        return None

    def fake_open(p, flags, *args, **kw):
        if flags & os.O_WRONLY and fault(os.fspath(p), "open", "open_twice") is not None:
            raise OSError(errno.EMFILE, "Too many open files", os.fspath(p))
        return REAL_OPEN(p, flags, *args, **kw)

    def fake_write(fd: int, data: bytes) -> int:
        path = target(fd)
        if path is not None and path.endswith(".seg"):
            path = "wal"
        if path == "wal" and bytes(data).startswith(b"gamehost wal"):
            return REAL_WRITE(fd, data)  # a segment's first line
        kind = fault(path, "write", "half")
        if kind == "half":
            REAL_WRITE(fd, bytes(data[: len(data) // 2]))
        if kind is not None:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = REAL_WRITE(fd, data)
        if path == "wal":  # "<crc> <session> <seq> <line>" each
            for line in bytes(data).splitlines():
                _, sid, seq, _ = line.split(b" ", 3)
                events.append(("wal", sid.decode(), int(seq)))
        elif path is not None and path.endswith(".jsonl"):
            events.append(("write", path, orjson.loads(bytes(data).split(b"\n")[0])["seq"]))
        return n

    def fake_fsync(fd: int) -> None:
        path = target(fd)
        if path is not None and path.endswith(".seg"):
            path = "wal"
        if fault(path, "fsync") is not None:
            raise OSError(errno.EIO, "Input/output error")
        REAL_FSYNC(fd)
        events.append(("fsync", path))

    m.setattr(os, "open", fake_open)
    m.setattr(os, "write", fake_write)
    m.setattr(os, "fsync", fake_fsync)
    m.setattr(os, "fdatasync", fake_fsync)  # the store syncs appends with it
    acked: set[tuple[str, int]] = set()
    if log_fault is not None:
        faults["wal"] = [log_fault]
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        assert (store.wal is not None) is wal
        for batch in rounds:
            local, planned = dict(nxt), []
            for i, kind in batch:
                sid = ids[i % sessions]
                planned.append((sid, local[sid]))
                local[sid] += 1
                if kind is not None:
                    todo = faults.setdefault(os.fspath(store.path(sid)), [])
                    todo += ["open", "open"] if kind == "open_twice" else [kind]
            results: dict = {}

            async def one(sid: str, seq: int, results=results) -> None:
                try:
                    await store.append(sid, seq, [rec(seq)])
                    results[sid, seq] = "ok"
                    events.append(("ack", sid, seq))
                except (OSError, Conflict) as exc:
                    results[sid, seq] = exc

            armed[0] = True
            async with trio.open_nursery() as appenders:
                by_session: dict[str, list[int]] = {}
                for sid, seq in planned:
                    by_session.setdefault(sid, []).append(seq)
                for step in range(max(map(len, by_session.values()))):
                    for sid, seqs in by_session.items():
                        if step < len(seqs):
                            appenders.start_soon(one, sid, seqs[step])
                    await trio.testing.wait_all_tasks_blocked()
            armed[0] = False
            faults.clear()
            acked |= {key for key, res in results.items() if res == "ok"}
            for sid in ids:
                if any(res != "ok" for (s, _), res in results.items() if s == sid):
                    with pytest.raises(Conflict, match="not open"):
                        await store.append(sid, local[sid], [rec(local[sid])])
                    nxt[sid] = len(store.load(sid))  # what a session actor does
                else:
                    nxt[sid] = local[sid]
        await store.aclose()

    for sid in ids:
        assert [r["seq"] for r in read_log(store.path(sid))] == list(range(nxt[sid]))
    for sid, seq in acked:
        path = os.fspath(store.path(sid))
        assert seq < nxt[sid]
        last_write = max(i for i, e in enumerate(events) if e == ("write", path, seq))
        if not wal:
            assert ("fsync", path) in events[last_write:]
            continue
        logged = max(i for i, e in enumerate(events) if e == ("wal", sid, seq))
        ack_at = events.index(("ack", sid, seq))
        assert logged < ack_at and last_write < ack_at
        assert ("fsync", "wal") in events[logged:ack_at]  # the log synced before the ack


async def test_a_second_host_store_on_one_data_dir_is_refused_until_the_first_stops(tmp_path):
    first = FileStore(tmp_path, exclusive=True)
    with pytest.raises(DataDirInUse, match=f"pid {os.getpid()}"):
        FileStore(tmp_path, exclusive=True)
    FileStore(tmp_path)  # a tool (replay, fork) that does not run a host may still read
    async with trio.open_nursery() as n:
        await n.start(first.run)
        await first.aclose()
    again = FileStore(tmp_path, exclusive=True)  # the lock went with the first store
    async with trio.open_nursery() as n:
        await n.start(again.run)
        await again.aclose()


def test_a_sessions_folder_that_is_a_symbolic_link_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    data = tmp_path / "data"
    data.mkdir()
    (data / "sessions").symlink_to(outside)
    with pytest.raises(NotADirectoryError, match="symbolic link"):
        FileStore(data)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755  # not chmod-ed through the link
