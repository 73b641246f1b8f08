"""Reading a range of a log: ``read_range(session, first, stop)`` and ``record_count`` of the
file store (a line index per session, built once, extended as the log grows, built again when
the file is another), the memory store and PostgreSQL give what ``read`` gives, sliced."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from host.store import file as file_store
from host.store.base import CorruptLog, UnknownSession, body_of
from host.store.file import FileStore, read_log
from host.store.memory import MemoryStore
from tests.host.test_store import rec


def lines_after(first: int, n: int) -> list[dict]:
    return [rec(seq, x="y" * (seq % 7)) for seq in range(first, first + n)]


async def filled(store, sid: str, n: int) -> None:
    await store.create(sid, [rec(0, game="g")])
    if n > 1:
        await store.append(sid, 1, lines_after(1, n - 1))


def make(kind: str, tmp: Path):
    return FileStore(tmp) if kind == "file" else MemoryStore()


@pytest.mark.parametrize("kind", ["file", "memory"])
@settings(max_examples=25)
@given(first=st.integers(-3, 60), length=st.integers(0, 70))
def test_a_range_is_the_slice_of_the_whole_log(tmp_path_factory, kind, first, length):
    tmp = tmp_path_factory.mktemp("range")

    async def main() -> None:
        store = make(kind, tmp)
        async with trio.open_nursery() as n:
            await n.start(store.run)
            await filled(store, "s1", 50)
            whole = await store.read("s1")
            assert await store.record_count("s1") == 50
            got = await store.read_range("s1", first, first + length)
            assert got == whole[max(first, 0) : max(first + length, 0)]
            await store.aclose()

    trio.run(main)


async def test_the_index_grows_with_the_log_and_is_built_again_for_another_file(tmp_path):
    store = FileStore(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(store.run)
        await filled(store, "s1", 10)
        assert [r["seq"] for r in await store.read_range("s1", 8, 20)] == [8, 9]
        await store.append("s1", 10, lines_after(10, 5))
        assert await store.record_count("s1") == 15
        assert [r["seq"] for r in await store.read_range("s1", 9, 20)] == list(range(9, 15))
        assert await store.read_range("s1", 0, 15) == await store.read("s1")
        path = store.path("s1")
        data = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(data[:7]))  # shorter: the index is made again
        assert await store.record_count("s1") == 7
        assert await store.read_range("s1", 5, 100) == (await store.read("s1"))[5:]
        # another file of the same length, put in place by a tool: its own index
        other = tmp_path / "other.jsonl"
        # its line 6 written without a checksum (as before checksums), one byte longer
        rest = {k: v for k, v in read_log(path)[6].items() if k != "seq"}
        line6 = b'{"seq":6, ' + orjson.dumps(rest)[1:] + b"\n"
        other.write_bytes(b"".join(data[:6]) + line6)
        os.replace(other, path)
        assert [r["seq"] for r in await store.read_range("s1", 6, 7)] == [6]
        await store.aclose()


async def test_a_torn_tail_is_not_in_a_range_and_damage_names_its_seq(tmp_path):
    store = FileStore(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(store.run)
        await filled(store, "s1", 6)
        path = store.path("s1")
        with open(path, "ab") as f:
            f.write(b'{"seq": 6, "ty')  # a torn last line: not a record
        assert await store.record_count("s1") == 6
        assert len(await store.read_range("s1", 0, 10)) == 6
        lines = path.read_bytes().splitlines(keepends=True)
        lines[3] = b"not json\n"
        path.write_bytes(b"".join(lines[:6]))
        assert len(await store.read_range("s1", 0, 3)) == 3  # before the damage: read
        with pytest.raises(CorruptLog) as err:
            await store.read_range("s1", 2, 5)
        assert err.value.seq == 3
        with pytest.raises(UnknownSession):
            await store.read_range("nosuch", 0, 1)
        await store.aclose()


async def test_the_indexes_held_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(file_store, "INDEX_ENTRIES", 25)
    store = FileStore(tmp_path)
    async with trio.open_nursery() as n:
        await n.start(store.run)
        for sid in ("s1", "s2", "s3"):
            await filled(store, sid, 10)
            assert len(await store.read_range(sid, 0, 10)) == 10
        assert list(store._indexes) == ["s2", "s3"]  # the least recently read one dropped
        assert len(await store.read_range("s1", 0, 10)) == 10  # and made again when asked
        await store.aclose()


async def test_postgres_reads_a_range_with_one_query(pg_store_url):
    from host.store.pg import PostgresStore

    store = PostgresStore(pg_store_url)
    async with trio.open_nursery() as n:
        await n.start(store.run)
        await filled(store, "s1", 30)
        whole = await store.read("s1")
        assert await store.record_count("s1") == 30
        assert await store.read_range("s1", 10, 20) == whole[10:20]
        assert await store.read_range("s1", 25, 99) == whole[25:]
        assert await store.read_range("s1", 40, 50) == []
        with pytest.raises(UnknownSession):
            await store.read_range("nosuch", 0, 1)
        with pytest.raises(UnknownSession):
            await store.record_count("nosuch")
        await store.aclose()
    store.disconnect()


async def test_a_range_checks_each_record_against_its_checksum(tmp_path, pg_store_url):
    """A flipped byte inside a range (the line still JSON, the seq right) is damage, named by its
    seq, in every store; the records before it still read."""
    from host.store.pg import PostgresStore

    for store in (FileStore(tmp_path), MemoryStore(), PostgresStore(pg_store_url)):
        async with trio.open_nursery() as n:
            await n.start(store.run)
            await filled(store, "s1", 12)
            if isinstance(store, FileStore):
                path = store.path("s1")
                path.write_bytes(path.read_bytes().replace(b'"x":"yyyy"', b'"x":"yyyz"'))
            elif isinstance(store, MemoryStore):
                store.logs["s1"][4] = store.logs["s1"][4].replace(b'"x":"yyyy"', b'"x":"yyyz"')
            else:
                store._conns.run(
                    lambda conn: conn.execute(
                        "UPDATE gamehost_records SET line = replace(line, 'yyyy', 'yyyz')"
                        " WHERE session_id = 's1' AND seq = 4"
                    )
                )
            assert [r["seq"] for r in await store.read_range("s1", 0, 4)] == [0, 1, 2, 3]
            with pytest.raises(CorruptLog) as err:
                await store.read_range("s1", 2, 8)
            assert err.value.seq == 4
            await store.aclose()
        if isinstance(store, PostgresStore):
            store.disconnect()


@pytest.mark.parametrize(
    "tail",
    [
        b"",  # whole
        b'{"crc":"1234',  # no newline: a torn append
        b"not json at all\n",  # a last line, in a log before checksums, not JSON: torn
    ],
)
def test_open_end_cuts_a_torn_tail_and_opens_the_log_without_reading_it(tmp_path, tail):
    async def main() -> None:
        store = FileStore(tmp_path)
        async with trio.open_nursery() as n:
            await n.start(store.run)
            await filled(store, "s1", 20)
            path = tmp_path / "sessions" / "s1.jsonl"
            whole = path.read_bytes()
            if tail.endswith(b"\n"):  # as before checksums (in a checksummed log: damage)
                whole = b"".join(body_of(line) + b"\n" for line in whole.splitlines())
            path.write_bytes(whole + tail)
            store._indexes.clear()
            assert await store.open_end("s1") == 20
            assert path.read_bytes() == whole  # cut, durably (or left alone)
            await store.append("s1", 20, [rec(20)])  # appendable where the log ends
            assert [r["seq"] for r in read_log(path)] == list(range(21))
            with pytest.raises(UnknownSession):
                await store.open_end("nope")
            (tmp_path / "sessions" / "empty.jsonl").write_bytes(b"")
            with pytest.raises(CorruptLog):
                await store.open_end("empty")
            await store.aclose()

    trio.run(main)


def test_open_end_refuses_a_whole_last_line_that_does_not_read_in_a_checksummed_log(tmp_path):
    async def main() -> None:
        store = FileStore(tmp_path)
        async with trio.open_nursery() as n:
            await n.start(store.run)
            await filled(store, "s1", 20)
            path = tmp_path / "sessions" / "s1.jsonl"
            bad = path.read_bytes() + b"not json at all\n"
            path.write_bytes(bad)
            store._indexes.clear()
            with pytest.raises(CorruptLog, match="seq 20: .*neither a checksum nor a seq"):
                await store.open_end("s1")
            assert path.read_bytes() == bad  # damage, not a torn tail: nothing cut
            await store.aclose()

    trio.run(main)
