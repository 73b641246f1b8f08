"""Loading a log a stretch at a time (host/table/loading.py) gives what the one-pass
:meth:`Engine.load_tail` gives, plus the presence and tail the table would fold from the whole
log; skimming runs no game code and gives the seats, seq and end the log says."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from host.table.core import TAIL_MAX, WINDOW, Presence
from host.table.engine import Engine
from host.table.loading import Loaded, load_steps
from host.table.local import play_local, roundtrip
from plugins.around_the_world import AroundTheWorld
from plugins.crazy_eights import CrazyEights
from plugins.seven_twenty_seven import SevenTwentySeven

GAMES = [CrazyEights(), AroundTheWorld(), SevenTwentySeven()]
LOGS = {
    (i, seed): roundtrip(play_local(game, {}, 4, bytes([seed]) * 32)[1])
    for i, game in enumerate(GAMES)
    for seed in range(3)
}


def run(steps: Generator[int, None, Loaded]) -> Loaded:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(LOGS)), st.data())
def test_loading_in_stretches_gives_what_load_tail_gives(key: Any, data: Any) -> None:
    game = GAMES[key[0]]
    engine = Engine(game)
    logged = LOGS[key]
    cut = data.draw(st.integers(1, len(logged)), label="records kept")
    records = logged[:cut]
    window = data.draw(st.sampled_from([0, 3, WINDOW]), label="window")
    got = run(load_steps(engine, iter(records), records[-1].seq, window))
    whole, state, states = engine.load_tail(records, window, TAIL_MAX)
    assert (got.whole, got.state, got.states) == (whole, state, states)
    presence = Presence.of(len(state.seats))
    presence.feed(records[:whole])
    assert got.presence == presence
    assert got.tail == records[:whole][-TAIL_MAX:]


def _reconnecting_world(seed: int) -> Any:
    """A Crazy Eights log of two players who drop and resume often: presence records between
    its records of play (a reconnect storm at times)."""
    import random

    from host.table.commands import Act, Join, Resume
    from tests.table.world import World, new_log

    engine = Engine(CrazyEights())
    world = World(engine, new_log(engine, 2, seed=bytes([seed]) * 32))
    rng = random.Random(seed)
    players = [world.client(f"p{i}") for i in range(2)]
    for p in players:
        p.token = world.command(p, Join(p.name)).token
    for _ in range(150):
        if rng.random() < 0.4:  # a storm of reconnects now and then
            p = rng.choice(players)
            for _ in range(rng.choice([1, 1, 5, 20])):
                world.close(p)
                world.reconnect(p)
                world.command(p, Resume(p.token))
                world.now += 4.0
            continue
        seq = world.hosts[0].table.seq
        ready = [p for p in players if p.turn is not None and p.turn.seq == seq]
        if not ready:
            break
        p = ready[0]
        world.command(p, Act(rng.choice(p.turn.legal), expected=p.turn.seq))
    return world


WORLDS = [_reconnecting_world(seed) for seed in range(2)]
RECONNECTING = [w.records() for w in WORLDS]


def test_a_table_loaded_from_the_log_keeps_the_window_the_live_one_keeps() -> None:
    """After reconnect storms, a table made from the log (as a restarted host makes it) keeps
    the same records and window states as the one that wrote them: what a stale act may do
    does not depend on a restart."""
    from host.table.core import Table

    for world, records in zip(WORLDS, RECONNECTING, strict=True):
        live = world.hosts[0].table
        engine = live.engine
        got = run(load_steps(engine, iter(records), records[-1].seq, WINDOW))
        loaded = Table(
            live.id,
            engine,
            got.tail,
            live.settings,
            now=world.now,
            loaded=(got.state, got.states),
            presence=got.presence,
        )
        assert [r.seq for r in loaded._tail] == [r.seq for r in live._tail]
        assert [s.seq for s in loaded._bounds] == [s.seq for s in live._bounds]
        assert len(live._tail) <= 256


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1), st.data())
def test_loading_counts_the_window_in_records_of_play_as_load_tail_does(which, data) -> None:
    logged = RECONNECTING[which]
    engine = Engine(CrazyEights())
    records = logged[: data.draw(st.integers(1, len(logged)), label="records kept")]
    window = data.draw(st.sampled_from([0, 3, WINDOW]), label="window")
    got = run(load_steps(engine, iter(records), records[-1].seq, window))
    whole, state, states = engine.load_tail(records, window, TAIL_MAX)
    assert (got.whole, got.state.seq, [s.seq for s in got.states]) == (
        whole,
        state.seq,
        [s.seq for s in states],
    )


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(LOGS)), st.data())
def test_skimming_runs_no_game_code_and_keeps_the_seats_and_the_end(key: Any, data: Any) -> None:
    game = GAMES[key[0]]
    logged = LOGS[key]
    records = logged[: data.draw(st.integers(1, len(logged)), label="records kept")]

    class NoGame:
        info = game.info

        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the game's {name} was called")

    engine = Engine(game)
    want = engine.rebuild(records)
    engine.game = NoGame()  # type: ignore[assignment]
    got = run(load_steps(engine, iter(records), records[-1].seq, WINDOW, skim=True))
    assert got.state.game is None and got.whole == len(records)
    assert (got.state.seats, got.state.seq, got.state.started, got.state.ended) == (
        want.seats,
        want.seq,
        want.started,
        want.ended,
    )
