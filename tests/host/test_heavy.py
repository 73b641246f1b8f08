"""Heavy requests off the event loop (host.net.heavy, host.net.replayops): a long log's first
``replay`` folds it once in a worker process, keeping snapshots; later ``replay``s start from the
nearest snapshot and read at most one interval of records; ``verify`` runs in a worker process;
a log the worker finds damaged is ``session_damaged`` naming its seq; the host's start reads only
the last record of an ended log."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from host.net import replayops
from host.plugins.registry import load_registry
from host.store.file import read_log
from host.table.engine import Record
from tests.conftest import start_host
from tools.stall import make_long_log

RECORDS = 2_500
EVERY = 100


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> tuple[Path, str]:
    data = tmp_path_factory.mktemp("long")
    return data, make_long_log(data, RECORDS, seed=5)


def copied(long_log, tmp_path: Path) -> tuple[Path, str]:
    data, sid = long_log
    (tmp_path / "sessions").mkdir(mode=0o700)
    src = data / "sessions" / f"{sid}.jsonl"
    (tmp_path / "sessions" / src.name).write_bytes(src.read_bytes())
    return tmp_path / "sessions" / src.name, sid


async def test_replay_and_verify_of_a_long_log_run_in_a_worker_process(
    long_log, tmp_path, monkeypatch
):
    path, sid = copied(long_log, tmp_path)
    monkeypatch.setattr(replayops, "EVERY", EVERY)
    registry = load_registry()
    engine = registry.engines["crazy-eights"]
    records = [Record.from_json(r) for r in read_log(path)]
    last = records[-1].seq
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry, heavy_workers=1)
        host = running.host
        assert host.heavy.in_process
        store = host.store
        ranges: list[tuple[int, int]] = []
        real = store.read_range

        async def counted(session, first, stop):
            ranges.append((first, stop))
            return await real(session, first, stop)

        monkeypatch.setattr(store, "read_range", counted)
        c = await running.client()
        for seq in (last - 7, last - 250, 1_234, last):
            ranges.clear()
            got = await c.call("replay", session=sid, seq=seq, truth=True)
            want = engine.rebuild(records[: seq + 1])
            assert got["seq"] == seq and got["state"] == engine.codec.to_wire(want.game)
            assert sum(b - a for a, b in ranges) <= EVERY + 2  # header, last, <= one interval
        kept = replayops._logs[host][sid]
        assert len(kept.snaps) == last // EVERY  # made once, in the worker
        assert all(s % EVERY == 0 for s, _ in kept.snaps.items())
        verified = await c.call("verify", session=sid)
        assert verified["ok"] and verified["records"] == last + 1
        # snapshots are derived data: dropped, they are made again
        replayops._logs[host].clear()
        got = await c.call("replay", session=sid, seq=last - 3, truth=True)
        assert got["state"] == engine.codec.to_wire(engine.rebuild(records[: last - 2]).game)
        host.request_shutdown()


async def test_a_log_a_worker_cannot_fold_is_damaged_naming_its_seq(long_log, tmp_path):
    path, sid = copied(long_log, tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    bad = next(i for i in range(1500, len(lines)) if b'"type":"event"' in lines[i])
    lines[bad] = lines[bad].replace(b'"event":{"type":"', b'"event":{"type":"no_such_')
    path.write_bytes(b"".join(lines))
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), heavy_workers=1)
        c = await running.client()
        r = await c.request("replay", session=sid, seq=len(lines) - 3)
        assert r["error"]["code"] == "session_damaged"
        assert f"seq {bad}" in r["error"]["message"]
        page = await c.request("log", session=sid, after=bad + 1)  # damage known: for every op
        assert page["error"]["code"] == "session_damaged"
        running.host.request_shutdown()


async def test_the_start_reads_only_the_last_record_of_an_ended_log(
    long_log, tmp_path, monkeypatch
):
    _, sid = copied(long_log, tmp_path)
    from host.store.file import FileStore

    loads: list[str] = []
    real = FileStore.load

    def counted(self, session):
        loads.append(session)
        return real(self, session)

    monkeypatch.setattr(FileStore, "load", counted)
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, load_registry(), heavy_workers=0)
        assert loads == [] and sid not in running.host.sessions
        c = await running.client()
        view = await c.call("view", session=sid)  # still answered, from its log
        assert view["ended"]
        running.host.request_shutdown()
