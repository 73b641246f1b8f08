"""One fold per event: :meth:`Engine.step` and friends, the game contract's :class:`Emitter`,
and the logs the built-in games write staying byte for byte what they were."""

from __future__ import annotations

import hashlib
import sys
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import host.game
from host.game import Emitter, Rng
from host.plugins.codec import BadAction, admits, admitter
from host.table.engine import Engine, Record, SessionState
from host.table.local import play_local, roundtrip
from plugins.around_the_world import AroundTheWorld
from plugins.around_the_world import rules as around_the_world_rules
from plugins.crazy_eights import CrazyEights
from plugins.crazy_eights import rules as crazy_eights_rules
from plugins.crazy_eights.model import Play
from plugins.seven_twenty_seven import SevenTwentySeven
from plugins.seven_twenty_seven import rules as seven_twenty_seven_rules
from tests.toy import HighCard, Keep, Kept, State, Swap

GAMES = {
    "crazy-eights": CrazyEights(),
    "around-the-world": AroundTheWorld(),
    "seven-twenty-seven": SevenTwentySeven(),
}

EVOLVE_CODE: dict[str, CodeType] = {
    "crazy-eights": crazy_eights_rules.evolve.__code__,
    "around-the-world": around_the_world_rules.evolve.__code__,
    "seven-twenty-seven": seven_twenty_seven_rules.evolve.__code__,
}
"""The function that folds one event, per game: counted by code object, so a call counts however
the game reaches it (its ``evolve`` method, an emitter, a module-level alias)."""

# These digests were computed by running ``play_local`` on the code *before* the one-fold change
# (commit 0dbeeac) with exactly these games, options, seat counts and seeds: they are that code's
# real output, not values made up to fit. The logs must stay byte-identical.
LOG_DIGESTS = [
    ("crazy-eights", {}, 2, 0, 463, "ce6658b5472ae2307b4335f8"),
    ("crazy-eights", {}, 2, 1, 887, "0b586453e763dc470a172c7b"),
    ("crazy-eights", {}, 2, 2, 576, "c7e347b2bed146b13a116bff"),
    ("crazy-eights", {}, 4, 0, 1038, "b4fa2026fb6f09817f654330"),
    ("crazy-eights", {}, 4, 1, 272, "dfb6db12e4b2c349df75a9e3"),
    ("crazy-eights", {}, 4, 2, 711, "5256b127a9684d2500fa7bfe"),
    (
        "crazy-eights",
        {"target": 50, "queens_skip": True, "aces_reverse": True, "draw_two": True},
        5,
        0,
        314,
        "27231df2907a3a666e1be093",
    ),
    (
        "crazy-eights",
        {"target": 50, "queens_skip": True, "aces_reverse": True, "draw_two": True},
        5,
        1,
        120,
        "68afacbe7c4aba81489a1bfb",
    ),
    (
        "crazy-eights",
        {"target": 50, "queens_skip": True, "aces_reverse": True, "draw_two": True},
        5,
        2,
        97,
        "2c9d2bfebe409046d6e27e90",
    ),
    ("around-the-world", {}, 2, 0, 51, "8a4b997d85fc7721781e69c9"),
    ("around-the-world", {}, 2, 1, 45, "3062e1b43992093dc8be3dbf"),
    ("around-the-world", {}, 2, 2, 47, "fbf4a24e15160cca8f9cb7ec"),
    ("around-the-world", {}, 5, 0, 86, "05b5d74f2e4e19b3149eea32"),
    ("around-the-world", {}, 5, 1, 94, "c7a4d7eb7e17d554bb94e51a"),
    ("around-the-world", {}, 5, 2, 90, "acb7f6866d5f3169cee155c5"),
    (
        "around-the-world",
        {"poker_cancel": True, "fifth_question": True, "ace": "low", "row_values": "linear"},
        4,
        0,
        94,
        "390730f07c4a931360a390dd",
    ),
    (
        "around-the-world",
        {"poker_cancel": True, "fifth_question": True, "ace": "low", "row_values": "linear"},
        4,
        1,
        92,
        "71ec70b7db569c5a8b88a091",
    ),
    (
        "around-the-world",
        {"poker_cancel": True, "fifth_question": True, "ace": "low", "row_values": "linear"},
        4,
        2,
        90,
        "ce3fb7b9ad1022872daeeaf8",
    ),
    ("seven-twenty-seven", {}, 4, 0, 2880, "37f894efad3e8a1022343e50"),
    ("seven-twenty-seven", {}, 4, 1, 177, "6537354cb638caedf2496942"),
    ("seven-twenty-seven", {}, 4, 2, 1001, "586921f87bcfc344a5f9758b"),
    ("seven-twenty-seven", {}, 6, 0, 5304, "1615e02fffc60948461065dc"),
    ("seven-twenty-seven", {}, 6, 1, 698, "be8e388e4e731b7b55eef360"),
    ("seven-twenty-seven", {}, 6, 2, 343, "201d566d913391044bb8a884"),
    (
        "seven-twenty-seven",
        {"deal": "up_down_down", "pot": "split", "hands": 5, "draw_rounds": "until_all_stand"},
        4,
        0,
        335,
        "2c7ade8bea51fd4394680047",
    ),
    (
        "seven-twenty-seven",
        {"deal": "up_down_down", "pot": "split", "hands": 5, "draw_rounds": "until_all_stand"},
        4,
        1,
        300,
        "7db15cf7f9704b8c5d7db64e",
    ),
    (
        "seven-twenty-seven",
        {"deal": "up_down_down", "pot": "split", "hands": 5, "draw_rounds": "until_all_stand"},
        4,
        2,
        373,
        "272965f58ac7c5b2c5548e26",
    ),
]


def _digest(records: list[Record]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(orjson.dumps(r.to_json(), option=orjson.OPT_SORT_KEYS) + b"\n")
    return h.hexdigest()[:24]


@pytest.mark.parametrize(("game", "options", "seats", "seed", "count", "digest"), LOG_DIGESTS)
def test_the_games_write_the_same_logs_as_before(
    game: str, options: dict[str, Any], seats: int, seed: int, count: int, digest: str
) -> None:
    _, records = play_local(GAMES[game], options, seats, bytes([seed]) * 32)
    assert (len(records), _digest(records)) == (count, digest)


@contextmanager
def counting_calls(code: CodeType) -> Iterator[list[int]]:
    """Counts the calls of the Python function whose code object is ``code``."""
    calls = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            calls[0] += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(old)


def _events(records: list[Record]) -> int:
    return sum(r.type == "event" for r in records)


def _start(engine: Engine, seats: int, seed: bytes) -> tuple[SessionState, list[Record]]:
    opts = engine.codec.options_from_wire({}, seats)
    header = engine.header("t", opts, seats, range(seats), seed)
    return engine.initial(header), [header]


@pytest.mark.parametrize("game", sorted(GAMES))
def test_each_event_a_step_produces_is_folded_exactly_once(game: str) -> None:
    engine = Engine(GAMES[game])
    seats = 4
    state, records = _start(engine, seats, b"f" * 32)
    for seat in range(seats):
        with counting_calls(EVOLVE_CODE[game]) as calls:
            new, after = engine.seat_step(state, seat, f"bot{seat}", True, None)
        assert calls[0] == _events(new)
        assert after == engine.apply_all(state, roundtrip(new))
        state, records = after, records + new
    folded = 0
    for _ in range(60):
        seat = engine.bot_seat(state)
        if seat is None:
            break
        with counting_calls(EVOLVE_CODE[game]) as calls:
            new, after = engine.bot_step(state, seat)
        assert calls[0] == _events(new), new
        folded += calls[0]
        # the state handed back is the one the written records fold to
        assert after == engine.apply_all(state, roundtrip(new))
        state, records = after, records + new
    assert folded > 0


@pytest.mark.parametrize("game", sorted(GAMES))
def test_rebuild_and_verify_fold_each_event_record_once(game: str) -> None:
    engine = Engine(GAMES[game])
    final, records = play_local(GAMES[game], {}, 4, b"r" * 32, max_actions=10_000)
    logged = roundtrip(records)
    with counting_calls(EVOLVE_CODE[game]) as calls:
        rebuilt = engine.rebuild(logged)
    assert calls[0] == _events(logged)
    assert rebuilt == final
    with counting_calls(EVOLVE_CODE[game]) as calls:
        assert engine.verify(logged) is None
    assert calls[0] == _events(logged)


def test_act_and_the_other_wrappers_give_the_records_of_the_steps() -> None:
    game = HighCard()
    engine = Engine(game)
    state, _ = _start(engine, 2, b"w" * 32)
    assert (
        engine.take_seat(state, 0, "a", True, None)
        == engine.seat_step(state, 0, "a", True, None)[0]
    )
    for seat in range(2):
        state = engine.seat_step(state, seat, "a", True, None)[1]
    assert engine.act(state, 0, Swap()) == engine.step(state, 0, Swap())[0]
    assert engine.bot_act(state, 0, True) == engine.bot_step(state, 0, True)[0]
    assert engine.abort(state, "limit") == engine.abort_step(state, "limit")[0]
    assert engine.abort_step(state, "limit")[1].ended


# -- the emitter ---------------------------------------------------------------------------------


def _add(total: int, event: int) -> int:
    return total + event


@given(st.integers(-5, 5), st.lists(st.integers(-100, 100), max_size=20))
def test_an_emitter_folds_in_order_and_hands_over_every_state(start: int, events: list[int]):
    out = Emitter(start, _add)
    seen = [out.emit(e) for e in events]
    assert list(out) == events
    assert out.state == start + sum(events)
    assert out.folded_states(start, _add) == seen
    assert seen == [start + sum(events[: i + 1]) for i in range(len(events))]


@given(st.lists(st.integers(), min_size=1, max_size=10), st.data())
def test_an_emitter_changed_behind_its_back_hands_over_nothing(
    events: list[int], data: st.DataObject
) -> None:
    out = Emitter(0, _add)
    out.emit(*events)
    how = data.draw(st.sampled_from(["append", "replace", "other_start", "other_evolve"]))
    start, evolve = 0, _add
    if how == "append":
        out.append(1)
    elif how == "replace":
        out[data.draw(st.integers(0, len(events) - 1))] = 10**9  # not an int the cache holds
    elif how == "other_start":
        start = 10**9
    else:

        def evolve(total: int, event: int) -> int:
            return total - event

    assert out.folded_states(start, evolve) is None


def test_an_emitter_does_not_keep_an_event_its_evolve_refuses() -> None:
    def evolve(total: int, event: int) -> int:
        if event < 0:
            raise ValueError("negative")
        return total + event

    out = Emitter(0, evolve)
    with pytest.raises(ValueError):
        out.emit(1, -1)
    assert list(out) == [1] and out.state == 1 and out.folded_states(0, evolve) == [1]


EVOLVE_CALLS = [0]


class EmitsWithItsOwnEvolve(HighCard):
    """Folds through an emitter, once, with the game's own ``evolve``."""

    def evolve(self, state: State, event: Any) -> State:
        EVOLVE_CALLS[0] += 1
        return super().evolve(state, event)

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        out = Emitter(state, self.evolve)
        out.emit(*super().decide(state, seat, action, rng))
        return out


class EmitsWithAnotherEvolve(EmitsWithItsOwnEvolve):
    """Emits through a fold that is not the game's ``evolve`` (it forgets the turn): the engine
    must not take over what that fold produced."""

    def decide(self, state: State, seat: int, action: Any, rng: Rng) -> list:
        def forgetful(s: State, e: Any) -> State:
            return attrs.evolve(HighCard.evolve(self, s, e), turn=0)

        out = Emitter(state, forgetful)
        out.emit(*HighCard.decide(self, state, seat, action, rng))
        return out


@pytest.mark.parametrize("cls", [EmitsWithItsOwnEvolve, EmitsWithAnotherEvolve, HighCard])
def test_the_engine_takes_an_emitters_states_over_only_when_they_are_the_games(cls: type) -> None:
    game = cls()
    engine = Engine(game)
    state, _ = _start(engine, 2, b"e" * 32)
    for seat in range(2):
        state = engine.seat_step(state, seat, "a", True, None)[1]
    EVOLVE_CALLS[0] = 0
    new, after = engine.step(state, 0, Keep())
    assert [r.obj for r in new if r.type == "event"] == [Kept(0)]
    assert after.game == HighCard().evolve(state.game, Kept(0))  # the turn moved on
    if cls is not HighCard:
        # once: by the emitter with the game's evolve, or (the other fold not being the
        # game's) by the engine, which drops what the other fold produced
        assert EVOLVE_CALLS[0] == 1


# -- the codec -----------------------------------------------------------------------------------


class _NoRegex:
    def sub(self, *args: Any) -> str:
        raise AssertionError("a tag was computed again")


@settings(max_examples=20, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32))
def test_encoding_computes_no_tag_twice(seed: bytes) -> None:
    game = GAMES["crazy-eights"]
    engine = Engine(game)
    play_local(game, {}, 2, b"\x01" * 32, max_actions=5_000, engine=engine)  # every class seen
    saved = host.game._CAMEL
    host.game._CAMEL = _NoRegex()  # type: ignore[assignment]
    try:
        _, records = play_local(game, {}, 3, seed, max_actions=5_000, engine=engine)
        for r in records:
            if r.type == "event":
                engine.redacted_wire(r, 0)
                engine.redacted_wire(r, None)
    finally:
        host.game._CAMEL = saved
    assert records[-1].type == "ended"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.sampled_from("ab"),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xy"), inner),
    max_leaves=6,
)
HINTS = [
    hint
    for game in GAMES.values()
    for cls in game.info.action_types
    for hint in typing.get_type_hints(cls).values()
] + [
    int,
    str,
    bool,
    float,
    type(None),
    int | None,
    typing.Literal[1, True, "a"],
    tuple[int, ...],
    tuple[int, str],
    tuple[()],
    list[bool],
    tuple[int | None, ...],
    dict[str, int],
]


@given(st.sampled_from(HINTS), JSON)
def test_a_worked_out_field_check_admits_what_admits_does(hint: Any, value: Any) -> None:
    assert admitter(hint)(value) == admits(hint, value)


def test_decoding_an_action_reflects_on_no_type_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(GAMES["crazy-eights"])
    monkeypatch.setattr(typing, "get_origin", _no_reflection)
    monkeypatch.setattr(typing, "get_type_hints", _no_reflection)
    assert engine.codec.action_from_wire({"type": "play", "card": "8C", "suit": "H"}) == Play(
        "8C", "H"
    )
    with pytest.raises(BadAction, match="suit"):
        engine.codec.action_from_wire({"type": "play", "card": "8C", "suit": 1})


def _no_reflection(*args: Any) -> Any:
    raise AssertionError("type hints read while decoding an action")


@pytest.mark.parametrize("game", sorted(GAMES))
def test_load_cuts_a_half_written_cause_and_folds_each_record_once(game: str) -> None:
    engine = Engine(GAMES[game])
    _, records = play_local(GAMES[game], {}, 4, b"h" * 32)
    logged = roundtrip(records)
    # cut inside the last action that made several events: a crash mid-append
    last = max(
        i
        for i, r in enumerate(logged)
        if r.type == "action" and i + 2 < len(logged) and logged[i + 2].type == "event"
    )
    torn = logged[: last + 2]
    with counting_calls(EVOLVE_CODE[game]) as calls:
        whole, state = engine.load(torn)
    assert whole == last == engine.complete_prefix(torn)
    assert state == engine.rebuild(torn[:last])
    # every event record once, plus the re-run of the last cause to count what it makes
    rerun = _events(engine.step(state, records[last].data["seat"], records[last].obj)[0])
    assert calls[0] == _events(torn) + rerun
    assert engine.load(logged) == (len(logged), engine.rebuild(logged))


def test_load_keeps_a_log_of_another_game_version_whole() -> None:
    """Whether the last cause is whole is judged by re-running it on the installed code; for a
    log another version of the game wrote that judgement could drop acknowledged records, so
    such a log is kept whole (``replay --verify`` reports the version)."""
    game = GAMES["crazy-eights"]
    engine = Engine(game)
    _, records = play_local(game, {}, 4, b"h" * 32)
    logged = roundtrip(records)
    last = max(
        i
        for i, r in enumerate(logged)
        if r.type == "action" and i + 2 < len(logged) and logged[i + 2].type == "event"
    )
    torn = logged[: last + 2]
    assert engine.load(torn)[0] == last  # this version: the half-written cause is dropped
    header = attrs.evolve(torn[0], data={**torn[0].data, "game_version": "0.0-other"})
    other = [header, *torn[1:]]
    whole, state = engine.load(other)
    assert whole == len(other)
    assert state == engine.rebuild(other)
