import hashlib
import os
import stat

import orjson
import pytest
import trio

from host.store.base import Conflict, CorruptLog
from host.store.file import FileStore, read_log

SEED = "5e" * 32
HEADER = {
    "game": "g",
    "options": {},
    "seats": 2,
    "seed": SEED,
    "seed_commitment": hashlib.sha256(bytes.fromhex(SEED)).hexdigest(),
}


def rec(seq: int, **kw):
    """A record; seq 0 is a valid header."""
    if seq == 0:
        return {"seq": 0, "type": "header", **HEADER, **kw}
    return {"seq": seq, "type": "event", **kw}


@pytest.fixture
async def store(tmp_path):
    s = FileStore(tmp_path, "batch")
    async with trio.open_nursery() as n:
        await n.start(s.run)
        yield s
        await s.aclose()


async def test_appended_records_read_back_in_order_with_timestamps(store):
    await store.create("s1", [rec(0, game="g")])
    await store.append("s1", 1, [rec(1, x=1), rec(2, x=2)])
    got = read_log(store.path("s1"))
    assert [r["seq"] for r in got] == [0, 1, 2]
    assert got[2]["x"] == 2
    assert all(r["ts"].endswith("Z") for r in got)


async def test_log_files_are_private(store):
    await store.create("s1", [rec(0)])
    assert stat.S_IMODE(os.stat(store.path("s1")).st_mode) == 0o600


async def test_an_append_with_the_wrong_expected_seq_is_a_conflict_and_writes_nothing(store):
    await store.create("s1", [rec(0)])
    with pytest.raises(Conflict):
        await store.append("s1", 5, [rec(5)])
    with pytest.raises(Conflict):
        await store.append("s1", 1, [rec(2)])
    assert len(read_log(store.path("s1"))) == 1


async def test_creating_an_existing_session_is_a_conflict(store):
    await store.create("s1", [rec(0)])
    with pytest.raises(Conflict):
        await store.create("s1", [rec(0)])


async def test_group_commit_covers_concurrent_appends_with_fewer_fsyncs(store):
    for i in range(20):
        await store.create(f"s{i}", [rec(0)])
    before = store.statistics()

    async with trio.open_nursery() as n:
        for i in range(20):
            for _ in range(1):
                n.start_soon(store.append, f"s{i}", 1, [rec(1)])
    after = store.statistics()
    assert after.appends - before.appends == 20
    assert after.batches - before.batches < 20


async def test_a_torn_last_line_is_truncated_on_load(tmp_path):
    s = FileStore(tmp_path)
    path = s.path("t")
    good = orjson.dumps(rec(0)) + b"\n" + orjson.dumps(rec(1)) + b"\n"
    path.write_bytes(good + b'{"seq": 2, "type": "ev')
    records = s.load("t")
    assert [r["seq"] for r in records] == [0, 1]
    assert path.read_bytes() == good


async def test_a_bad_line_in_the_middle_stops_loading(tmp_path):
    s = FileStore(tmp_path)
    s.path("t").write_bytes(orjson.dumps(rec(0)) + b"\nnot json\n" + orjson.dumps(rec(2)) + b"\n")
    with pytest.raises(CorruptLog):
        s.load("t")


async def test_a_gap_in_seq_stops_loading(tmp_path):
    s = FileStore(tmp_path)
    s.path("t").write_bytes(orjson.dumps(rec(0)) + b"\n" + orjson.dumps(rec(2)) + b"\n" + b"\n")
    with pytest.raises(CorruptLog):
        s.load("t")


async def test_a_loaded_log_continues_at_its_next_seq(tmp_path):
    s = FileStore(tmp_path, "always")
    async with trio.open_nursery() as n:
        await n.start(s.run)
        await s.create("s1", [rec(0)])
        await s.append("s1", 1, [rec(1)])
        await s.aclose()
    s2 = FileStore(tmp_path, "never")
    async with trio.open_nursery() as n:
        await n.start(s2.run)
        assert len(s2.load("s1")) == 2
        await s2.append("s1", 2, [rec(2)])
        await s2.aclose()
    assert [r["seq"] for r in read_log(s2.path("s1"))] == [0, 1, 2]
