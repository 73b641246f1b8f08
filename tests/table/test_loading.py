"""Loading a log a stretch at a time (host/table/loading.py) gives what the one-pass
:meth:`Engine.load_tail` gives, plus the presence and tail the table would fold from the whole
log; skimming runs no game code and gives the seats, seq and end the log says."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from host.table.core import TAIL, WINDOW, Presence
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
    whole, state, states = engine.load_tail(records, window)
    assert (got.whole, got.state, got.states) == (whole, state, states)
    presence = Presence.of(len(state.seats))
    presence.feed(records[:whole])
    assert got.presence == presence
    assert got.tail == records[:whole][-TAIL:]


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
