"""The cyclic garbage collector kept off the hot path (:mod:`host.net.collector`): a move makes
no cyclic garbage, every collection is timed, and frozen garbage that piles up is collected in
full once it outgrows the host's sessions and connections."""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any

import pytest
import trio

from host.net import collector
from host.net.collector import Collector, Pauses
from host.plugins.registry import load_registry
from tests.conftest import start_host

REGISTRY = load_registry()


def _ours(objects: list[Any]) -> Counter[str]:
    """The objects of the host's, the games' and the protocol's own classes, by class."""
    return Counter(
        f"{type(o).__module__}.{type(o).__qualname__}"
        for o in objects
        if type(o).__module__.startswith(("host.", "plugins.", "protocol."))
    )


async def _play_to_the_end(client: Any, sid: str, seat: int) -> int:
    """Play a seat with the first legal action of each turn push until the session ends; the
    number of actions sent."""
    acts = 0
    while True:
        push = await client.next_push()
        assert push is not None, "the host hung up"
        if push["push"] == "ended":
            return acts
        if push["push"] == "turn" and push.get("seat", seat) == seat and push.get("legal"):
            reply = await client.request(
                "act", session=sid, action=push["legal"][0], seq=push["seq"]
            )
            acts += bool(reply.get("ok"))


@pytest.mark.skipif("crazy-eights" not in REGISTRY.games, reason="needs crazy-eights")
async def test_playing_sessions_over_tcp_makes_no_cyclic_garbage(tmp_path):
    """Each step of a table (its records, states, closures) is freed by reference counting:
    with ``DEBUG_SAVEALL`` every object the collector finds unreachable is kept in
    ``gc.garbage``, and none of them is the host's, a game's or the protocol's."""
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, REGISTRY)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            acts = 0
            for _ in range(3):
                c = await running.client()
                made = await c.call("create", game="crazy-eights", seats=4, bots=3)
                sid = made["session"]
                joined = await c.call("join", session=sid)
                acts += await _play_to_the_end(c, sid, joined["seat"])
                await c.aclose()
            gc.collect()
            found = _ours(gc.garbage)
        finally:
            gc.set_debug(0)
            del gc.garbage[:]
        running.host.request_shutdown()
    assert acts > 10
    assert not found, f"cyclic garbage of the host's own objects: {found.most_common(10)}"


def test_every_collection_is_timed_by_generation():
    p = Pauses()
    p.install()
    try:
        gc.collect(0)
        gc.collect(2)
        gc.collect(2)
    finally:
        p.uninstall()
    assert p.count[0] >= 1 and p.count[2] >= 2
    assert all(t >= 0 for t in p.total) and p.longest[2] <= p.total[2]
    assert p.cpu_longest[2] <= p.cpu_total[2]
    s = p.summary()
    assert s["collections"] == p.count
    assert s["max_ms"] == pytest.approx(max(p.longest) * 1000, abs=0.001)
    assert s["thresholds"] == list(gc.get_threshold())
    gc.collect(2)  # uninstalled: no longer counted
    assert p.count[2] == s["collections"][2]


def _cycles(n: int) -> list[list[Any]]:
    out = []
    for _ in range(n):
        a: list[Any] = []
        a.append(a)
        out.append(a)
    return out


@pytest.fixture
def unfrozen():
    """Objects frozen by a test are unfrozen after it (the test process goes on)."""
    gc.collect()
    yield
    gc.unfreeze()
    gc.collect()


def test_frozen_garbage_that_outgrows_the_units_is_collected_in_full(monkeypatch, unfrozen):
    monkeypatch.setattr(collector, "FLOOR", 1_000)
    monkeypatch.setattr(collector, "resident_bytes", lambda: 0)  # not readable: always counted
    units = [10]
    c = Collector(lambda: units[0])
    gc.freeze()
    c.mark(gc.get_freeze_count())
    base = c.base
    # as many new live objects as the units grew by: in proportion, nothing to do
    units[0] = 20
    live = _cycles(max(base, 2_000))
    gc.freeze()
    assert c.check() is None
    # the same objects die inside their cycles while frozen: nothing finds them but a full
    # collection, which the next look makes once they are past the limit
    dead = _cycles(3 * base + 3_000)
    gc.freeze()
    del dead
    fulls = len(collector.pauses.fulls)
    took = c.check()
    assert took is not None and took >= 0
    assert len(collector.pauses.fulls) == fulls + 1
    assert gc.get_freeze_count() < base + len(live) + 3_000  # the dead cycles are gone
    assert c.base == gc.get_freeze_count() and c.base_units == 20
    assert c.check() is None  # and it starts again from there
    del live


def test_the_frozen_objects_are_counted_only_after_the_memory_grew(monkeypatch, unfrozen):
    # counting them walks every frozen object (tens of ms on a loaded host, every table
    # waits): a host whose memory stays put is not looked at
    monkeypatch.setattr(collector, "FLOOR", 1_000)
    memory = [100 << 20]
    monkeypatch.setattr(collector, "resident_bytes", lambda: memory[0])
    c = Collector(lambda: 10)
    gc.freeze()
    c.mark(gc.get_freeze_count())
    dead = _cycles(3 * c.base + 3_000)
    gc.freeze()
    del dead
    fulls = len(collector.pauses.fulls)
    memory[0] += collector.MEMORY_STEP - 1
    assert c.check() is None and len(collector.pauses.fulls) == fulls
    memory[0] += 1
    assert c.check() is not None and len(collector.pauses.fulls) == fulls + 1
    assert c.counted_at == memory[0]
    assert c.check() is None  # the next count waits for the memory to grow again


def test_the_net_count_misses_young_objects_that_replace_frozen_ones(unfrozen):
    # why the host collects by work done: a table replaces its (frozen) state at every move,
    # so the threshold's count of net allocations hardly moves while the young objects pile up
    old = [[] for _ in range(5_000)]
    gc.freeze()
    before = gc.get_count()[0]
    new = []
    for i in range(5_000):
        new.append([])
        old[i] = None  # a frozen object dies as a new one is made
    assert gc.get_count()[0] - before < 500 < gc.get_threshold()[0]
    assert len(gc.get_objects(0)) >= 5_000


@pytest.fixture
def no_automatic_collections():
    """Only the collections a test asks for are counted (the threshold's are off meanwhile)."""
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_work_done_collects_the_young_generation(monkeypatch, no_automatic_collections):
    monkeypatch.setitem(collector._young, "on", True)
    monkeypatch.setitem(collector._young, "since", 0)
    p = Pauses()
    p.install()
    try:
        collector.made(collector.YOUNG_EVERY - 1)
        assert p.count[0] == 0
        collector.made(1)
        assert p.count[0] == 1 and collector._young["since"] == 0
        for _ in range(3 * collector.YOUNG_EVERY // collector.LONG_LIVED):
            collector.made(collector.LONG_LIVED)
        assert p.count[0] == 4
        monkeypatch.setitem(collector._young, "on", False)  # not a tuned host: nothing
        collector.made(10 * collector.YOUNG_EVERY)
        assert p.count[0] == 4
    finally:
        p.uninstall()


async def test_counted_work_is_collected_within_the_period_too(
    monkeypatch, autojump_clock, no_automatic_collections
):
    monkeypatch.setitem(collector._young, "on", True)
    monkeypatch.setitem(collector._young, "since", 0)
    monkeypatch.setattr(collector, "resident_bytes", lambda: 100 << 20)
    p = Pauses()
    p.install()
    try:
        async with trio.open_nursery() as n:
            n.start_soon(Collector(lambda: 1).run)
            await trio.sleep(3 * collector.YOUNG_PERIOD)
            assert p.count[0] == 0  # nothing counted: nothing collected
            collector.made(1)
            await trio.sleep(1.5 * collector.YOUNG_PERIOD)
            assert p.count[0] == 1 and collector._young["since"] == 0
            n.cancel_scope.cancel()
    finally:
        p.uninstall()


def test_tune_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="tuned or default"):
        collector.tune("fast")  # type: ignore[arg-type]
