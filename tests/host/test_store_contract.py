"""One suite for every store: the rules of ``host.store.base.Store``.

Each test runs once per entry of ``KINDS``. A new store joins by adding a kind to ``KINDS`` and a
branch to :meth:`Backing.new_store` (a store object on the test's own data).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.errors import BadHeader, BadSessionId
from host.store.base import Conflict, CorruptLog, Store, StoreClosed, UnknownSession
from host.store.file import FileStore
from host.store.memory import MemoryStore
from host.store.pg import PostgresStore
from tests import pg
from tests.host.test_store import rec

KINDS = ["file", "memory", "postgres"]


class Backing:
    """Where one test's logs live; :meth:`open` makes a new store object on them (as a restart
    would), with its task started."""

    def __init__(self, kind: str, where: Path, nursery: trio.Nursery, fsync: str) -> None:
        self.kind = kind
        self.where = where
        self.nursery = nursery
        self.fsync = fsync
        self.memory: dict[str, list[bytes]] = {}
        self.stores: list[Store] = []
        self.url = pg.fresh_url() if kind == "postgres" else ""

    def new_store(self) -> Store:
        if self.kind == "file":
            return FileStore(self.where, self.fsync)  # type: ignore[arg-type]
        if self.kind == "postgres":
            return PostgresStore(self.url)
        return MemoryStore(self.memory)

    async def open(self) -> Store:
        store = self.new_store()
        await self.nursery.start(store.run)
        self.stores.append(store)
        return store


@contextlib.asynccontextmanager
async def backing_of(kind: str, where: Path, fsync: str = "batch") -> AsyncIterator[Backing]:
    async with trio.open_nursery() as n:
        backing = Backing(kind, where, n, fsync)
        try:
            yield backing
        finally:
            with trio.CancelScope(shield=True):
                for store in backing.stores:
                    await store.aclose()


@pytest.fixture(params=KINDS)
async def backing(request, tmp_path):
    async with backing_of(request.param, tmp_path) as b:
        yield b


@pytest.fixture
async def store(backing):
    return await backing.open()


def strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records without their ``ts`` (checked to be there)."""
    out = []
    for r in records:
        r = dict(r)
        ts = r.pop("ts")
        assert isinstance(ts, str) and ts.endswith("Z") and ts[4] == "-" and ts[10] == "T"
        out.append(r)
    return out


def events(start: int, n: int, **kw: Any) -> list[dict[str, Any]]:
    return [rec(s, **kw) for s in range(start, start + n)]


async def test_every_store_has_the_interface(store):
    assert isinstance(store, Store)


async def test_records_read_back_in_order_with_a_timestamp(store):
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, [rec(1, x=1), rec(2, x=2)])
    await store.append("s1", 3, [rec(3, x=3)])
    want = [rec(0), rec(1, x=1), rec(2, x=2), rec(3, x=3)]
    assert strip(await store.read("s1")) == want
    assert strip(store.load("s1")) == want


async def test_create_writes_the_header_and_seat_records_in_one_append(store):
    before = store.statistics()
    await store.create("s1", [rec(0), rec(1, seat=0), rec(2, seat=1)])
    after = store.statistics()
    assert (after.appends - before.appends, after.records - before.records) == (1, 3)
    got = await store.read("s1")
    assert strip(got) == [rec(0), rec(1, seat=0), rec(2, seat=1)]
    assert len({r["ts"] for r in got}) == 1
    await store.append("s1", 3, [rec(3)])  # open at the next seq
    with pytest.raises(Conflict):
        await store.append("s1", 3, [rec(3)])


async def test_create_still_takes_a_lone_header_dict(store):
    await store.create("s1", rec(0))
    assert strip(await store.read("s1")) == [rec(0)]


async def test_a_wrong_expected_seq_is_a_conflict_and_writes_nothing(store):
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, [rec(1)])
    for expected, records in [(5, [rec(5)]), (1, [rec(1)]), (0, [rec(0)]), (2, [rec(3)])]:
        with pytest.raises(Conflict):
            await store.append("s1", expected, records)
    with pytest.raises(Conflict):  # a gap inside the records
        await store.append("s1", 2, [rec(2), rec(4)])
    assert strip(await store.read("s1")) == [rec(0), rec(1)]
    await store.append("s1", 2, [rec(2)])
    assert [r["seq"] for r in await store.read("s1")] == [0, 1, 2]


async def test_two_appends_racing_for_one_seq_one_wins(store):
    await store.create("s1", [rec(0)])
    outcomes: list[str] = []

    async def attempt(tag: str) -> None:
        try:
            await store.append("s1", 1, [rec(1, by=tag)])
            outcomes.append(tag)
        except Conflict:
            outcomes.append("conflict")

    async with trio.open_nursery() as n:
        for tag in ("a", "b", "c"):
            n.start_soon(attempt, tag)
    assert sorted(outcomes).count("conflict") == 2
    (winner,) = [o for o in outcomes if o != "conflict"]
    assert strip(await store.read("s1")) == [rec(0), rec(1, by=winner)]


async def test_creating_an_existing_session_is_a_conflict_and_keeps_it(store):
    await store.create("s1", [rec(0), rec(1)])
    with pytest.raises(Conflict):
        await store.create("s1", [rec(0, game="other")])
    assert strip(await store.read("s1")) == [rec(0), rec(1)]


async def test_creating_an_existing_session_is_a_conflict_even_with_records_json_cannot_hold(
    store,
):
    await store.create("s1", [rec(0)])
    with pytest.raises(Conflict):
        await store.create("s1", [rec(0), rec(1, x=2**70)])
    assert strip(await store.read("s1")) == [rec(0)]


BAD_HEADER = {**rec(0), "seed_commitment": "00" * 32}


@pytest.mark.parametrize(
    ("records", "error"),
    [
        ([], BadHeader),
        ([rec(1)], BadHeader),  # not a header
        ([BAD_HEADER], BadHeader),  # the seed does not match its commitment
        ([{k: v for k, v in rec(0).items() if k != "seats"}], BadHeader),
        ([{**rec(0), "seq": 3}], Conflict),
        ([rec(0), rec(2)], Conflict),
        ([rec(0), rec(1, x={1, 2})], TypeError),  # not JSON
        ([rec(0), rec(1, x=2**70)], TypeError),
    ],
)
async def test_a_create_that_fails_leaves_no_log(backing, records, error):
    store = await backing.open()
    with pytest.raises(error):
        await store.create("s1", records)
    assert store.session_ids() == []
    with pytest.raises(UnknownSession):
        await store.read("s1")
    assert (await backing.open()).session_ids() == []
    await store.create("s1", [rec(0)])  # the id is free again
    assert strip(store.load("s1")) == [rec(0)]


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "x" * 65, "a b", "é", "x\n"])
async def test_a_bad_session_id_is_a_bad_session_id_error(store, bad):
    with pytest.raises(BadSessionId):  # a LogError, and a ValueError as it always was
        await store.create(bad, [rec(0)])
    with pytest.raises(BadSessionId):
        store.load(bad)
    with pytest.raises(BadSessionId):
        await store.read(bad)
    with pytest.raises(BadSessionId):
        store.truncate(bad, 1)
    assert store.session_ids() == []


async def test_an_unknown_session(store):
    with pytest.raises(UnknownSession):
        store.load("nope")
    with pytest.raises(UnknownSession):
        await store.read("nope")
    with pytest.raises(UnknownSession):
        store.truncate("nope", 1)
    with pytest.raises(Conflict):
        await store.append("nope", 0, [rec(0)])
    assert store.session_ids() == []


@pytest.mark.parametrize(
    ("after", "seqs"),
    [(None, [0, 1, 2, 3, 4]), (-5, [0, 1, 2, 3, 4]), (-1, [0, 1, 2, 3, 4]), (0, [1, 2, 3, 4])]
    + [(2, [3, 4]), (3, [4]), (4, []), (9, [])],
)
async def test_read_after_a_seq(store, after, seqs):
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, events(1, 4))
    assert [r["seq"] for r in await store.read("s1", after)] == seqs
    assert [r["seq"] for r in await store.read("s1", after=after)] == seqs


async def test_read_changes_nothing_and_opens_nothing(backing):
    first = await backing.open()
    await first.create("s1", [rec(0), rec(1)])
    second = await backing.open()  # a restart: nothing open yet
    got = await second.read("s1")
    got[1]["x"] = "changed"
    assert strip(await second.read("s1")) == [rec(0), rec(1)]  # a fresh copy each time
    with pytest.raises(Conflict):
        await second.append("s1", 2, [rec(2)])
    assert strip(second.load("s1")) == [rec(0), rec(1)]


async def test_session_ids_lists_every_session_sorted(store):
    for sid in ["b2", "a_1", "C-3", "a0"]:
        await store.create(sid, [rec(0)])
    assert store.session_ids() == sorted(["b2", "a_1", "C-3", "a0"])


async def test_release_forgets_the_session_until_it_is_loaded_again(store):
    """A released session holds nothing in the store (a host that lets thousands of finished
    sessions go keeps no entry for each); appending needs a load first, reading does not."""
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, [rec(1)])
    assert store.statistics().sessions_open == 1
    store.release("s1")
    assert store.statistics().sessions_open == 0
    assert not getattr(store, "_next", {}) and not getattr(store, "_opened", {})
    with pytest.raises(Conflict):
        await store.append("s1", 2, [rec(2)])
    assert [r["seq"] for r in await store.read("s1")] == [0, 1]
    store.load("s1")
    await store.append("s1", 2, [rec(2)])
    store.release("s1")
    store.release("s1")  # twice is fine
    store.load("s1")
    await store.append("s1", 3, [rec(3)])
    assert [r["seq"] for r in await store.read("s1")] == [0, 1, 2, 3]


async def test_close_refuses_creates_and_appends_and_keeps_what_was_acknowledged(backing):
    store = await backing.open()
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, [rec(1)])
    await store.aclose()
    with pytest.raises(StoreClosed):
        await store.append("s1", 2, [rec(2)])
    with pytest.raises(StoreClosed):
        await store.create("s2", [rec(0)])
    again = await backing.open()
    assert again.session_ids() == ["s1"]
    assert strip(again.load("s1")) == [rec(0), rec(1)]
    await again.append("s1", 2, [rec(2)])


async def test_appends_queued_before_close_are_all_written(backing):
    store = await backing.open()
    for i in range(10):
        await store.create(f"s{i}", [rec(0)])
    async with trio.open_nursery() as n:
        for i in range(10):
            n.start_soon(store.append, f"s{i}", 1, [rec(1)])
        await trio.testing.wait_all_tasks_blocked()
        n.start_soon(store.aclose)
    again = await backing.open()
    for i in range(10):
        assert [r["seq"] for r in again.load(f"s{i}")] == [0, 1]


async def test_concurrent_appends_to_different_sessions(store):
    sessions = [f"s{i}" for i in range(12)]

    async def play(sid: str, n: int) -> None:
        await store.create(sid, [rec(0)])
        for seq in range(1, n + 1):
            await store.append(sid, seq, [rec(seq, sid=sid)])

    async with trio.open_nursery() as nursery:
        for i, sid in enumerate(sessions):
            nursery.start_soon(play, sid, 3 + i % 4)
    for i, sid in enumerate(sessions):
        assert strip(await store.read(sid)) == [rec(0)] + [
            rec(s, sid=sid) for s in range(1, 4 + i % 4)
        ]


async def test_a_read_during_appends_holds_every_acknowledged_record_and_no_torn_one(store):
    await store.create("s1", [rec(0)])
    acked = 0
    done = False

    async def write() -> None:
        nonlocal acked, done
        for seq in range(1, 41):
            await store.append("s1", seq, [rec(seq, pad="x" * (seq * 97 % 3000))])
            acked = seq
        done = True

    async with trio.open_nursery() as n:
        n.start_soon(write)
        while not done:
            floor = acked
            got = await store.read("s1")
            assert [r["seq"] for r in got] == list(range(len(got)))
            assert len(got) - 1 >= floor
    assert len(await store.read("s1")) == 41


async def test_memory_stores_on_one_backing_see_each_others_appends_as_conflicts():
    shared: dict[str, list[bytes]] = {}
    one, two = MemoryStore(shared), MemoryStore(shared)
    await one.create("s1", [rec(0)])
    assert strip(two.load("s1")) == [rec(0)]
    await one.append("s1", 1, [rec(1, by="one")])
    with pytest.raises(Conflict):  # two's copy is behind: it must read again
        await two.append("s1", 1, [rec(1, by="two")])
    assert [r["seq"] for r in two.load("s1")] == [0, 1]
    await two.append("s1", 2, [rec(2, by="two")])
    assert strip(await one.read("s1", 0)) == [rec(1, by="one"), rec(2, by="two")]


ODD_VALUES = {
    "unicode": "žluťoučký kůň ♠♥ 𝄞 \u2028 \x00",
    "float": 0.1,
    "tiny": 5e-324,
    "neg_zero": -0.0,
    "big": 2**63 - 1,
    "small": -(2**63),
    "nested": {"z": [1, {"a": None}], "a": [], "": ""},
    "bool": True,
    "quote": 'a"b\\c\n',
}


async def test_records_read_back_byte_equal(store):
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, [rec(1, **ODD_VALUES), rec(2, ts="2001-01-01T00:00:00.000Z")])
    got = await store.read("s1")
    for written, read in zip([rec(0), rec(1, **ODD_VALUES)], got, strict=False):
        assert orjson.dumps(read) == orjson.dumps(
            {"seq": written["seq"], "ts": read["ts"], **written}
        )
        assert list(read)[:3] == ["seq", "ts", "type"]
    assert got[2]["ts"] == "2001-01-01T00:00:00.000Z"  # a record's own ts is kept
    assert store.load("s1") == got


async def test_a_record_json_cannot_hold_is_a_type_error_and_writes_nothing(store):
    await store.create("s1", [rec(0)])
    for bad in [{1, 2}, 2**64, "\ud800", object()]:
        with pytest.raises(TypeError):
            await store.append("s1", 1, [rec(1), rec(2, x=bad)])
    await store.append("s1", 1, [rec(1)])
    assert strip(await store.read("s1")) == [rec(0), rec(1)]


async def test_an_empty_append_checks_and_writes_nothing(store):
    await store.create("s1", [rec(0)])
    await store.append("s1", 1, [])
    with pytest.raises(Conflict):
        await store.append("s1", 2, [])
    assert [r["seq"] for r in await store.read("s1")] == [0]


async def test_after_a_restart_a_session_is_appendable_once_loaded(backing):
    first = await backing.open()
    await first.create("s1", [rec(0), rec(1)])
    await first.create("s2", [rec(0)])
    second = await backing.open()
    assert second.session_ids() == ["s1", "s2"]
    with pytest.raises(Conflict):
        await second.append("s1", 2, [rec(2)])
    assert strip(second.load("s1")) == [rec(0), rec(1)]
    await second.append("s1", 2, [rec(2)])
    assert [r["seq"] for r in await second.read("s1")] == [0, 1, 2]


async def test_truncate_keeps_the_first_records_and_opens_there(backing):
    first = await backing.open()
    await first.create("s1", [rec(0)])
    await first.append("s1", 1, events(1, 4))
    second = await backing.open()
    second.truncate("s1", 3)
    assert [r["seq"] for r in await second.read("s1")] == [0, 1, 2]
    await second.append("s1", 3, [rec(3, again=True)])
    with pytest.raises(CorruptLog):
        second.truncate("s1", 9)
    assert strip(await second.read("s1", 2)) == [rec(3, again=True)]


# -- a model ---------------------------------------------------------------------------------------

SIDS = ["a", "b", "c"]
JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits orjson refuses: TypeError
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)  # may hold lone surrogates: TypeError
    | st.sampled_from([2**64, "\udc80"]),  # what JSON (orjson) cannot hold
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
PAYLOADS = st.lists(JSONISH, min_size=0, max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(SIDS), PAYLOADS),
        st.tuples(
            st.just("append"), st.sampled_from(SIDS), st.sampled_from([0, 0, 0, -1, 1]), PAYLOADS
        ),
        st.tuples(st.just("read"), st.sampled_from(SIDS), st.none() | st.integers(-2, 8)),
        st.tuples(st.just("load"), st.sampled_from(SIDS)),
        st.tuples(st.just("truncate"), st.sampled_from(SIDS), st.integers(1, 8)),
        st.tuples(st.just("release"), st.sampled_from(SIDS)),
        st.tuples(st.just("reopen")),
    ),
    max_size=25,
)


def encodable(values: list[Any]) -> bool:
    try:
        orjson.dumps(values)
    except TypeError:
        return False
    return True


async def check_against_model(backing: Backing, ops: list[tuple[Any, ...]]) -> None:
    """Run ``ops`` on stores of ``backing`` and on a model (dict of record lists, a set of open
    sessions); every outcome and every read must agree."""
    model: dict[str, list[dict[str, Any]]] = {}
    open_: set[str] = set()
    store = await backing.open()
    for op in ops:
        kind, sid = op[0], op[1] if len(op) > 1 else None
        if kind == "create":
            records = [rec(0)] + [rec(i + 1, v=v) for i, v in enumerate(op[2])]
            want: type[Exception] | None = (
                Conflict if sid in model else None if encodable(op[2]) else TypeError
            )
            if want is None:
                await store.create(sid, records)
                model[sid] = records
                open_.add(sid)
            else:
                with pytest.raises(want):
                    await store.create(sid, records)
        elif kind == "append":
            start = len(model.get(sid, [])) + op[2]
            records = [rec(start + i, v=v) for i, v in enumerate(op[3])]
            if sid not in open_ or (op[2] != 0):
                with pytest.raises(Conflict):
                    await store.append(sid, start, records)
            elif not encodable(op[3]):
                with pytest.raises(TypeError):
                    await store.append(sid, start, records)
            else:
                await store.append(sid, start, records)
                model[sid].extend(records)
        elif kind == "read":
            if sid not in model:
                with pytest.raises(UnknownSession):
                    await store.read(sid, op[2])
            else:
                after = -1 if op[2] is None else op[2]
                assert strip(await store.read(sid, op[2])) == [
                    r for r in model[sid] if r["seq"] > after
                ]
        elif kind == "load":
            if sid not in model:
                with pytest.raises(UnknownSession):
                    store.load(sid)
            else:
                assert strip(store.load(sid)) == model[sid]
                open_.add(sid)
        elif kind == "truncate":
            if sid not in model:
                with pytest.raises(UnknownSession):
                    store.truncate(sid, op[2])
            elif op[2] > len(model[sid]):
                with pytest.raises(CorruptLog):
                    store.truncate(sid, op[2])
            else:
                store.truncate(sid, op[2])
                del model[sid][op[2] :]
                open_.add(sid)
        elif kind == "release":
            store.release(sid)
            open_.discard(sid)
        else:
            await store.aclose()
            store = await backing.open()
            open_.clear()
        assert store.session_ids() == sorted(model)
    for sid, records in model.items():
        assert strip(await store.read(sid)) == records


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
async def test_every_store_behaves_like_the_model(kind, ops):
    with tempfile.TemporaryDirectory() as where:
        async with backing_of(kind, Path(where), fsync="never") as backing:
            await check_against_model(backing, ops)
