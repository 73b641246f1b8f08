"""What the PostgreSQL store does beyond the shared contract: two stores (two hosts) on one
database, the session rows, notifications, paging, migrations, and a database that fails."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import psycopg
import pytest
import trio

from host.store import open_store
from host.store.base import Conflict, CorruptLog, checksum, encode_bodies
from host.store.feed import channel
from host.store.file import FileStore
from host.store.pg import (
    LIVENESS,
    MIGRATIONS,
    ROW_CRC_V2,
    SCHEMA_VERSION,
    PostgresStore,
    SchemaMismatch,
    StoreUnavailable,
    migrate,
    row_checksum,
    schema_version,
)
from tests import pg
from tests.host.test_store import rec


@contextlib.asynccontextmanager
async def stores(url: str, n: int) -> AsyncIterator[list[PostgresStore]]:
    """``n`` stores on one database (as ``n`` hosts would have), their writers running."""
    async with trio.open_nursery() as nursery:
        made = [PostgresStore(url) for _ in range(n)]
        for store in made:
            await nursery.start(store.run)
        try:
            yield made
        finally:
            for store in made:
                await store.aclose()


def rows(url: str, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, args).fetchall()  # type: ignore[arg-type]


async def test_two_hosts_racing_for_seqs_win_each_once_and_the_log_stays_gapless(pg_store_url):
    async with stores(pg_store_url, 2) as (one, two):
        await one.create("s1", [rec(0)])
        two.load("s1")
        won = {"one": 0, "two": 0}
        conflicts = {"one": 0, "two": 0}

        async def play(name: str, store: PostgresStore) -> None:
            nxt = len(store.load("s1"))
            while nxt < 40:
                try:
                    await store.append("s1", nxt, [rec(nxt, by=name)])
                    won[name] += 1
                    nxt += 1
                except Conflict:
                    conflicts[name] += 1
                    nxt = len(store.load("s1"))  # re-read, decide again

        async with trio.open_nursery() as n:
            n.start_soon(play, "one", one)
            n.start_soon(play, "two", two)
        log = await one.read("s1")
    assert [r["seq"] for r in log] == list(range(40))
    assert won["one"] + won["two"] == 39
    assert [r["by"] for r in log[1:]].count("one") == won["one"]
    assert rows(pg_store_url, "SELECT last_seq FROM gamehost_sessions") == [(39,)]


async def test_a_stale_copy_cannot_append_even_where_the_lengths_match(pg_store_url):
    # the second host's append of seq 1 lost; its follow-up (seq 2, queued behind it) must not
    # land on the winner's seq 1 although the log is then exactly as long as it expected
    async with stores(pg_store_url, 2) as (one, two):
        await one.create("s1", [rec(0)])
        two.load("s1")
        await one.append("s1", 1, [rec(1, by="one")])
        outcomes = []

        async def attempt(seq: int) -> None:
            try:
                await two.append("s1", seq, [rec(seq, by="two")])
                outcomes.append((seq, "ok"))
            except Conflict:
                outcomes.append((seq, "conflict"))

        async with trio.open_nursery() as n:
            n.start_soon(attempt, 1)
            await trio.testing.wait_all_tasks_blocked()
            n.start_soon(attempt, 2)
        assert sorted(outcomes) == [(1, "conflict"), (2, "conflict")]
        assert [r.get("by") for r in await one.read("s1")] == [None, "one"]


async def test_the_session_row_follows_the_log(pg_store_url):
    async with stores(pg_store_url, 1) as (store,):
        await store.create("s1", [rec(0), rec(1, seat=0)])
        await store.append("s1", 2, [rec(2)])
        header = rows(pg_store_url, "SELECT line FROM gamehost_records WHERE seq = 0")[0][0]
        assert rows(
            pg_store_url, "SELECT session_id, game, header, last_seq, ended FROM gamehost_sessions"
        ) == [("s1", rec(0)["game"], header, 2, False)]
        await store.append("s1", 3, [{"seq": 3, "type": "ended", "outcome": None}])
        assert rows(pg_store_url, "SELECT last_seq, ended FROM gamehost_sessions") == [(3, True)]
        again = PostgresStore(pg_store_url)
        again.truncate("s1", 3)  # the end is cut off again: not ended any more
        assert rows(pg_store_url, "SELECT last_seq, ended FROM gamehost_sessions") == [(2, False)]
        assert [r["seq"] for r in again.load("s1")] == [0, 1, 2]


async def test_every_create_and_append_notifies_its_session_and_last_seq(pg_store_url):
    """A create on the channel every host hears, an append on its session's bucket only."""
    with psycopg.connect(pg_store_url, autocommit=True) as listener:
        listener.execute("LISTEN gamehost_created")
        listener.execute(f"LISTEN {channel('s1')}")
        listener.execute(f"LISTEN {channel('s2')}")
        async with stores(pg_store_url, 1) as (store,):
            await store.create("s1", [rec(0), rec(1)])
            await store.create("s2", [rec(0)])
            async with trio.open_nursery() as n:  # likely one batch: one notify per session
                n.start_soon(store.append, "s1", 2, [rec(2)])
                n.start_soon(store.append, "s2", 1, [rec(1), rec(2), rec(3)])
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=0.5, stop_after=4)]
    assert channel("s1") != channel("s2")
    assert sorted(got) == sorted(
        [
            ("gamehost_created", "s1 1"),
            (channel("s1"), "s1 2"),
            ("gamehost_created", "s2 0"),
            (channel("s2"), "s2 3"),
        ]
    )


async def test_an_append_is_not_heard_on_other_buckets(pg_store_url):
    other = next(f"x{i}" for i in range(100) if channel(f"x{i}") != channel("s1"))
    with psycopg.connect(pg_store_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {channel(other)}")
        async with stores(pg_store_url, 1) as (store,):
            await store.create("s1", [rec(0)])
            await store.append("s1", 1, [rec(1)])
            await store.create(other, [rec(0)])
            await store.append(other, 1, [rec(1)])
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=0.5, stop_after=2)]
    assert got == [(channel(other), f"{other} 1")]


async def test_a_taken_seq_is_a_conflict_and_the_rest_of_the_batch_is_written(pg_store_url):
    async with stores(pg_store_url, 1) as (store,):
        await store.create("a", [rec(0)])
        await store.create("b", [rec(0)])
        # a record the session row does not know of: only the primary key can refuse seq 1
        with psycopg.connect(pg_store_url) as conn:
            conn.execute(
                "INSERT INTO gamehost_records VALUES ('a', 1, %s)", ['{"seq":1,"type":"x"}']
            )
        outcomes = {}

        async def attempt(sid: str) -> None:
            try:
                await store.append(sid, 1, [rec(1, sid=sid)])
                outcomes[sid] = "ok"
            except Conflict:
                outcomes[sid] = "conflict"

        async with trio.open_nursery() as n:
            n.start_soon(attempt, "a")
            n.start_soon(attempt, "b")
        assert outcomes == {"a": "conflict", "b": "ok"}
        assert [r["sid"] for r in (await store.read("b"))[1:]] == ["b"]
        with pytest.raises(Conflict):  # not open any more: load again
            await store.append("a", 2, [rec(2)])


async def test_session_page_pages_by_id_and_filters_by_game(pg_store_url):
    async with stores(pg_store_url, 1) as (store,):
        for i in range(7):
            game = "toy" if i % 2 else "other"
            await store.create(f"s{i}", [rec(0, game=game)])
        await store.append("s3", 1, [rec(1)])
        first = await store.session_page(None, 3)
        assert [r["session"] for r in first] == ["s0", "s1", "s2"]
        rest = await store.session_page("s2", 10)
        assert [r["session"] for r in rest] == ["s3", "s4", "s5", "s6"]
        assert rest[0] == {
            "session": "s3",
            "game": "toy",
            "last_seq": 1,
            "ended": False,
            "header": (await store.read("s3"))[0],
        }
        toys = await store.session_page(None, 10, game="toy")
        assert [r["session"] for r in toys] == ["s1", "s3", "s5"]
        assert await store.session_page("s6", 10) == []


def test_db_init_is_idempotent_and_versioned(pg_dsn):
    url = pg.shared_cluster().new_database(schema=False)
    with pytest.raises(SchemaMismatch, match="db init"):
        PostgresStore(url).check()
    assert migrate(url) == (0, [f"migration {v}: {what}" for v, what, _ in MIGRATIONS])
    assert migrate(url) == (SCHEMA_VERSION, [])
    PostgresStore(url).check()
    with psycopg.connect(url) as conn:
        assert schema_version(conn) == SCHEMA_VERSION
        conn.execute("INSERT INTO gamehost_schema VALUES (%s)", [SCHEMA_VERSION + 1])
    with pytest.raises(SchemaMismatch, match="newer"):
        migrate(url)
    with pytest.raises(SchemaMismatch):
        PostgresStore(url).check()


def test_open_store_picks_the_store_by_its_spec(tmp_path, pg_store_url):
    assert isinstance(open_store(tmp_path), FileStore)
    assert isinstance(open_store(str(tmp_path / "d")), FileStore)
    assert isinstance(open_store(pg_store_url), PostgresStore)
    assert isinstance(open_store(pg_store_url.replace("postgresql", "postgres", 1)), PostgresStore)
    with pytest.raises(ValueError, match="unsupported"):
        open_store("mysql://localhost/x")
    with pytest.raises(ValueError, match="bad database URL"):
        open_store("postgresql://host:notaport:x/db?nonsense_option=1")


async def test_an_unreachable_database_is_unavailable_and_acknowledges_nothing(pg_dsn):
    url = f"postgresql://postgres@127.0.0.1:{pg._free_port()}/x"  # nothing listens there
    store = PostgresStore(url, connect_timeout=1)
    with pytest.raises(StoreUnavailable, match="cannot connect"):
        store.check()
    async with trio.open_nursery() as n:
        await n.start(store.run)
        with pytest.raises(OSError):
            await store.create("s1", [rec(0)])
        with pytest.raises(OSError):
            await store.read("s1")
        await store.aclose()


async def test_appends_queued_together_are_written_in_one_transaction(pg_store_url):
    async with stores(pg_store_url, 1) as (store,):
        await store.create("s1", [rec(0)])
        await store.create("s2", [rec(0)])
        before = store.statistics().batches
        with (
            psycopg.connect(pg_store_url, autocommit=True) as listener,
            psycopg.connect(pg_store_url) as locker,
        ):
            listener.execute(f"LISTEN {channel('s1')}")
            listener.execute(f"LISTEN {channel('s2')}")
            # the writer waits on this row lock: what is queued meanwhile is one batch
            locker.execute("SELECT 1 FROM gamehost_sessions WHERE session_id = 's1' FOR UPDATE")
            async with trio.open_nursery() as n:  # none awaited before the next is queued
                for seq in range(1, 6):
                    n.start_soon(store.append, "s1", seq, [rec(seq)])
                    await trio.testing.wait_all_tasks_blocked()
                n.start_soon(store.append, "s2", 1, [rec(1), rec(2)])
                await trio.testing.wait_all_tasks_blocked()
                locker.commit()
            got = [n.payload for n in listener.notifies(timeout=0.5)]
        assert store.statistics().batches - before <= 2  # the first may have gone alone
        assert [r["seq"] for r in await store.read("s1")] == [0, 1, 2, 3, 4, 5]
        assert "s1 5" in got and "s2 2" in got
        assert rows(pg_store_url, "SELECT session_id, last_seq FROM gamehost_sessions") == [
            ("s1", 5),
            ("s2", 2),
        ]


def test_connections_notice_a_vanished_server_unless_the_url_says_otherwise(pg_store_url):
    conn = PostgresStore(pg_store_url)._conns.connect()
    with conn:
        params = conn.info.get_parameters()
    assert {k: params.get(k) for k in LIVENESS} == LIVENESS
    own = PostgresStore(pg_store_url + "?tcp_user_timeout=1234")._conns.connect()
    with own:
        assert own.info.get_parameters()["tcp_user_timeout"] == "1234"


async def test_a_frozen_writer_mid_batch_does_not_block_the_other_hosts(pg_store_url, monkeypatch):
    """A host stopped (SIGSTOP) between its batch's statements and its COMMIT holds the session
    row it updated; the server ends its idle transaction after ``IDLE_IN_TRANSACTION`` seconds,
    so another host's append goes through instead of waiting for ever."""
    from host.store import pg as pgstore

    monkeypatch.setattr(pgstore, "IDLE_IN_TRANSACTION", 1.0, raising=False)
    async with stores(pg_store_url, 1) as (store,):
        await store.create("s1", [rec(0)])
        frozen = pgstore._connect(pg_store_url, 5)  # as the frozen host's writer connected
        try:
            frozen.execute("BEGIN")
            frozen.execute(
                "UPDATE gamehost_sessions SET updated_at = now() WHERE session_id = 's1'"
            )
            with trio.fail_after(60):  # the test's guard: without the timeout this never returns
                await store.append("s1", 1, [rec(1)])
        finally:
            frozen.close()
        assert [r["seq"] for r in await store.read("s1")] == [0, 1]


async def test_every_row_carries_the_crc32c_of_its_line_and_a_changed_line_is_damage(pg_store_url):
    async with stores(pg_store_url, 1) as (store,):
        await store.create("s1", [rec(0), rec(1, x=1)])
        await store.append("s1", 2, [rec(2, x=2)])
        got = rows(pg_store_url, "SELECT seq, line, crc FROM gamehost_records ORDER BY seq")
        assert [crc for _, _, crc in got] == [
            ROW_CRC_V2 | checksum(b"s1 %d %b" % (seq, line.encode())) for seq, line, _ in got
        ]
        with psycopg.connect(pg_store_url) as conn:
            conn.execute(
                "UPDATE gamehost_records SET line = replace(line, '\"x\":2', '\"x\":3')"
                " WHERE seq = 2"
            )
        with pytest.raises(CorruptLog, match="seq 2: the record does not match its checksum"):
            store.load("s1")
        with pytest.raises(CorruptLog, match="seq 2"):
            await store.read("s1", after=1)  # a follower's read is checked too


async def test_a_last_row_whose_seq_or_session_id_changed_is_damage(pg_store_url):
    """The row's checksum covers its session id and seq, and the rows must reach the session
    row's ``last_seq``: a flipped bit in either column of the last row is seen."""
    async with stores(pg_store_url, 1) as (store,):
        await store.create("s1", [rec(0), rec(1, x=1)])
        await store.append("s1", 2, [rec(2, x=2)])
        await store.create("s2", [rec(0), rec(1, x=7)])
        store.release("s1")
        store.release("s2")

        def change(sql: str) -> None:
            with psycopg.connect(pg_store_url) as conn:
                conn.execute(sql)

        change("UPDATE gamehost_records SET seq = 3 WHERE session_id = 's1' AND seq = 2")
        with pytest.raises(CorruptLog, match="seq 2: no row at seq 2: the next row is at seq 3"):
            store.load("s1")
        with pytest.raises(CorruptLog, match="seq 2"):
            await store.read("s1", after=1)
        with pytest.raises(CorruptLog, match="seq 2"):
            await store.read_range("s1", 0, 10)
        change("UPDATE gamehost_records SET seq = 2 WHERE session_id = 's1' AND seq = 3")
        assert [r["seq"] for r in store.load("s1")] == [0, 1, 2]
        store.release("s1")
        change("UPDATE gamehost_records SET session_id = 's2' WHERE session_id = 's1' AND seq = 2")
        with pytest.raises(CorruptLog, match="seq 2: no row at seq 2, though the session's row"):
            store.load("s1")  # its last record gone
        with pytest.raises(CorruptLog, match="seq 2"):
            await store.read_range("s1", 1, 10)
        with pytest.raises(CorruptLog, match="seq 2: the record does not match its checksum"):
            store.load("s2")  # a record of another session, where s2's next one would be
        assert [r["seq"] for r in await store.read_range("s1", 0, 2)] == [0, 1]


async def test_rows_with_the_line_only_checksum_are_still_read_and_checked(pg_store_url):
    """Rows written before the checksum covered session id and seq keep theirs (of the line)."""
    async with stores(pg_store_url, 1) as (store,):
        await store.create("s1", [rec(0), rec(1, x=1)])
        store.release("s1")
        with psycopg.connect(pg_store_url) as conn:
            for seq, line in conn.execute(
                "SELECT seq, line FROM gamehost_records WHERE session_id = 's1'"
            ).fetchall():
                conn.execute(
                    "UPDATE gamehost_records SET crc = %s WHERE session_id = 's1' AND seq = %s",
                    [checksum(line.encode()), seq],
                )
        assert [r.get("x") for r in store.load("s1")] == [None, 1]
        store.release("s1")
        with psycopg.connect(pg_store_url) as conn:
            conn.execute(
                "UPDATE gamehost_records SET line = replace(line, '\"x\":1', '\"x\":5')"
                " WHERE session_id = 's1' AND seq = 1"
            )
        with pytest.raises(CorruptLog, match="seq 1: the record does not match its checksum"):
            store.load("s1")


async def test_a_version_1_database_is_migrated_its_rows_read_unchecked_new_ones_checked(pg_dsn):
    url = pg.shared_cluster().new_database(schema=False)
    old = [b.decode() for b in encode_bodies([rec(0), rec(1, x=1)])]
    with psycopg.connect(url) as conn:  # the schema and a session as a gamehost of version 1 left
        conn.execute("CREATE TABLE gamehost_schema (version int NOT NULL)")
        for statement in MIGRATIONS[0][2]:
            conn.execute(statement)
        conn.execute("INSERT INTO gamehost_schema VALUES (1)")
        for seq, line in enumerate(old):
            conn.execute("INSERT INTO gamehost_records VALUES ('old', %s, %s)", [seq, line])
        conn.execute(
            "INSERT INTO gamehost_sessions (session_id, game, header, last_seq)"
            " VALUES ('old', %s, %s, 1)",
            [rec(0)["game"], old[0]],
        )
    with pytest.raises(SchemaMismatch, match="db init"):
        PostgresStore(url).check()
    assert migrate(url) == (1, [f"migration {v}: {what}" for v, what, _ in MIGRATIONS[1:]])
    async with stores(url, 1) as (store,):
        store.check()
        assert [r.get("x") for r in store.load("old")] == [None, 1]
        await store.append("old", 2, [rec(2, x=2)])
        crcs = rows(url, "SELECT seq, crc, line FROM gamehost_records ORDER BY seq")
        assert [c for _, c, _ in crcs[:2]] == [None, None]
        assert crcs[2][1] == row_checksum("old", 2, crcs[2][2].encode())
        with psycopg.connect(url) as conn:  # an old row has nothing to be checked against
            conn.execute(
                "UPDATE gamehost_records SET line = replace(line, ':1}', ':5}') WHERE seq = 1"
            )
        assert [r.get("x") for r in store.load("old")] == [None, 5, 2]


async def test_unfinished_sessions_are_listed_as_the_memory_hub_lists_them(pg_store_url):
    from host.store.feed import MemoryHub

    hub = MemoryHub()
    async with stores(pg_store_url, 1) as (store,):
        for s in (store, hub.store()):
            await s.create("s2", [rec(0)])
            await s.create("s1", [rec(0)])
            await s.create("s3", [rec(0)])
            await s.append("s3", 1, [{"seq": 1, "type": "ended", "outcome": None}])
        assert await store.unfinished_sessions() == ["s1", "s2"]
        assert await hub.store().unfinished_sessions() == ["s1", "s2"]
        store.truncate("s3", 1)  # not ended any more
        assert await store.unfinished_sessions() == ["s1", "s2", "s3"]
        assert rows(  # what the listing reads: the partial index of migration 3
            pg_store_url,
            "SELECT 1 FROM pg_indexes WHERE indexname = 'gamehost_sessions_unfinished'",
        ) == [(1,)]
