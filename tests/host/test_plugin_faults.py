"""Game plugins are third-party code: the engine turns each planted bug (tests.broken_games)
into a typed error and never produces a record that replay could not read back."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.game import IllegalAction, hookimpl
from host.plugins import faults
from host.plugins.registry import BadGame, check_game, load_registry, plugin_manager
from host.table.engine import BadRecord, Engine, GameFault, Record, SessionState
from host.table.local import DidNotEnd, play_local, roundtrip
from tests import broken_games as broken
from tests.bots import RandomLegal
from tests.toy import HighCard, Keep, Swap

SEED = b"f" * 32


def seated(
    game: Any, seats: int = 2, bots: tuple[int, ...] = (), engine: Engine | None = None
) -> tuple[Engine, SessionState, list[Record]]:
    """A session of ``game`` with every seat taken (``bots`` by host bots), started."""
    engine = engine or Engine(game)
    header = engine.header("s", engine.codec.options_from_wire({}, seats), seats, bots, SEED)
    state, records = engine.initial(header), [header]
    for seat in range(seats):
        new = engine.take_seat(state, seat, f"p{seat}", seat in bots, None)
        records += new
        state = engine.apply_all(state, new)
    assert state.started
    return engine, state, records


def fault_of(call: Any, *args: Any, **kwargs: Any) -> GameFault:
    with pytest.raises(GameFault) as info:
        call(*args, **kwargs)
    assert "'high-card'" in info.value.message
    return info.value


# -- a client's command: the fault fails it and produces nothing --------------------------------


def test_a_decide_that_raises_is_a_game_fault_naming_game_and_seq() -> None:
    engine, state, _ = seated(broken.DecideRaises())
    fault = fault_of(engine.act, state, 0, Swap())
    assert isinstance(fault.__cause__, RuntimeError)
    assert fault.seq == state.seq + 1 and f"seq {state.seq + 1}" in fault.message
    assert "decide" in fault.message
    assert [r.type for r in engine.act(state, 0, Keep())] == ["action", "event"]  # the rest works


@pytest.mark.parametrize(
    "raises", [SystemExit, KeyboardInterrupt, GeneratorExit, broken.OwnBaseException]
)
def test_a_decide_that_raises_a_base_exception_is_a_game_fault_not_an_exit(
    raises: type[BaseException],
) -> None:
    engine, state, _ = seated(broken.DecideExits(raises))
    fault = fault_of(engine.act, state, 0, Swap())
    assert type(fault.__cause__) is raises and "decide" in fault.message


def test_a_bot_that_calls_sys_exit_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.BotExits(), bots=(0,))
    fault = fault_of(engine.bot_step, state, 0)
    assert isinstance(fault.__cause__, SystemExit) and "bot_action" in fault.message


def test_the_budget_interruption_is_not_a_game_fault_of_the_guards() -> None:
    from host.plugins.budget import BudgetExceeded

    class Interrupted(HighCard):
        def decide(self, state: Any, seat: int, action: Any, rng: Any) -> list:
            raise BudgetExceeded("time", "a step of the game ran past 0.5 s")

    engine, state, _ = seated(Interrupted())
    with pytest.raises(BudgetExceeded):  # goes on up to the host, which ends the table
        engine.act(state, 0, Keep())
    assert faults.host_exception(BudgetExceeded("time", "")) and not faults.host_exception(
        SystemExit(1)
    )


def test_illegal_action_from_decide_stays_the_clients_error() -> None:
    engine, state, _ = seated(broken.RefusesItsLegalAction())
    with pytest.raises(IllegalAction) as info:
        engine.act(state, 0, Swap())
    assert info.value.reason == "no_swaps"


def test_an_event_the_game_never_registered_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.UnregisteredEvent())
    fault = fault_of(engine.act, state, 0, Swap())
    assert "'Peeked'" in fault.message and "not one the game registered" in fault.message
    assert fault.seq == state.seq + 2  # the event's seq, after the action record


@pytest.mark.parametrize("game", [broken.MangledEvent(), broken.UnreadableEvent()])
def test_an_event_that_does_not_read_back_as_itself_is_a_game_fault(game: HighCard) -> None:
    engine, state, _ = seated(game)
    fault = fault_of(engine.act, state, 0, Swap())
    assert "'peeked'" in fault.message
    engine.act(state, 0, Keep())  # a registered event of the right shape passes


def test_a_value_equal_to_a_checked_one_but_written_differently_is_still_a_fault() -> None:
    game = broken.BoolSeat()
    engine = Engine(game)
    header = engine.header("s", engine.codec.options_from_wire({"rounds": 2}, 2), 2, (), SEED)
    state = engine.initial(header)
    for seat in range(2):
        state = engine.apply_all(state, engine.take_seat(state, seat, "p", False, None))
    for seat in (0, 1, 0):  # Kept(0), Kept(1), Kept(0): checked and remembered
        state = engine.apply_all(state, engine.act(state, seat, Keep()))
    fault = fault_of(engine.act, state, 1, Keep())  # Kept(True) == Kept(1), but writes `true`
    assert "'kept'" in fault.message


def test_an_evolve_that_raises_while_producing_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.EvolveRaises())
    fault = fault_of(engine.act, state, 0, Keep())
    assert isinstance(fault.__cause__, KeyError) and "evolve" in fault.message


def test_a_start_that_raises_is_a_game_fault_when_the_last_seat_is_taken() -> None:
    game = broken.StartRaises()
    engine = Engine(game)
    header = engine.header("s", engine.codec.options_from_wire({}, 2), 2, (), SEED)
    state = engine.apply_all(
        engine.initial(header), engine.take_seat(engine.initial(header), 0, "a", False, None)
    )
    fault = fault_of(engine.take_seat, state, 1, "b", False, None)
    assert isinstance(fault.__cause__, ZeroDivisionError) and "start" in fault.message


def test_a_cause_that_leaves_nobody_to_act_and_no_outcome_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.Stalls())
    fault = fault_of(engine.act, state, 0, Swap())
    assert "no seat is to act" in fault.message


def test_an_outcome_that_is_not_json_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.OutcomeNotJson())
    state = engine.apply_all(state, engine.act(state, 0, Keep()))
    fault = fault_of(engine.act, state, 1, Keep())
    assert "outcome" in fault.message


def test_view_and_redact_faults_are_game_faults_for_that_viewer_only() -> None:
    engine, state, records = seated(broken.ViewRaises())
    assert engine.view_wire(state, 0)["hands"][1] is None
    assert "view" in fault_of(engine.view_wire, state, None).message
    dealt = records[-1]
    assert engine.redacted_wire(dealt, 0) == {
        "type": "dealt",
        "hands": [dealt.obj.hands[0], None],
        "stock": None,
    }
    fault = fault_of(engine.redacted_wire, dealt, 1)
    assert "redact" in fault.message and fault.seq == dealt.seq
    assert engine.to_act(state) == (0,)
    state = engine.apply_all(state, engine.act(state, 0, Keep()))
    assert engine.to_act(engine.apply_all(state, engine.act(state, 1, Keep()))) == ()


# -- host-driven steps: bots and turn timers -----------------------------------------------------


@pytest.mark.parametrize(
    ("game", "why"),
    [(broken.ViewUnencodable(), "raised"), (broken.ViewTooLarge(), "bytes as JSON (at most")],
)
def test_a_view_that_does_not_encode_or_is_too_large_is_a_game_fault(game: Any, why: str) -> None:
    engine, state, _ = seated(game)
    fault = fault_of(engine.view_wire, state, 0)
    assert "view for viewer 0" in fault.message and why in fault.message


def test_a_bot_whose_game_raises_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.BotRaises(), bots=(0,))
    assert isinstance(fault_of(engine.bot_act, state, 0).__cause__, ValueError)
    assert isinstance(fault_of(engine.bot_move, state).__cause__, ValueError)
    fault = fault_of(engine.bot_act, state, 0, timed_out=True)
    assert "bot_action" in fault.message


@pytest.mark.parametrize("timed_out", [False, True])
def test_a_bot_action_that_decide_refuses_is_a_game_fault(timed_out: bool) -> None:
    engine, state, _ = seated(broken.RefusesItsLegalAction(), bots=(0,))
    fault = fault_of(engine.bot_act, state, 0, timed_out=timed_out)
    assert isinstance(fault.__cause__, IllegalAction)
    assert "refused the bot's action" in fault.message


def test_a_bot_action_of_an_unregistered_class_is_a_game_fault() -> None:
    engine, state, _ = seated(broken.BotPicksUnregisteredAction(), bots=(0,))
    assert "not one the game registered" in fault_of(engine.bot_act, state, 0).message


def test_a_session_aborted_for_a_game_fault_verifies_and_stays_ended() -> None:
    engine, state, records = seated(broken.RefusesItsLegalAction(), bots=(0,))
    with pytest.raises(GameFault):
        engine.bot_act(state, 0)
    records += engine.abort(state, "game_error")  # what the host appends instead
    logged = roundtrip(records)
    assert engine.verify(logged) is None
    final = engine.rebuild(logged)
    assert final.ended and engine.bot_seat(final) is None and engine.to_act(final) == ()
    assert logged[-1].data["outcome"] is None and logged[-1].data["aborted"] == "game_error"


def test_bot_act_plays_a_good_bot_move_and_refuses_a_seat_not_to_act() -> None:
    engine, state, _ = seated(HighCard(), bots=(0, 1))
    new = engine.bot_act(state, 0, timed_out=True)
    assert new[0].type == "action" and new[0].data["seat"] == 0 and new[0].data["timed_out"]
    with pytest.raises(IllegalAction):  # the caller's mistake, not the game's
        engine.bot_act(state, 1)


# -- folding and verifying logs -------------------------------------------------------------------


class Unchecked(Engine):
    """The engine without its checks on what the game produces: writes a log as the host did
    before it checked (with events the game never registered)."""

    def _checked_wire_text(self, obj: Any, seq: int, kind: str) -> tuple[dict[str, Any], bytes]:
        wire = self.codec.tagged(obj)
        return wire, orjson.dumps(wire)


def test_a_log_with_an_unregistered_event_is_reported_by_verify_and_refused_by_rebuild() -> None:
    game = broken.UnregisteredEvent()
    engine, state, records = seated(game, engine=Unchecked(game))
    records += engine.act(state, 0, Swap())
    logged = roundtrip(records)
    peeked = next(r.seq for r in logged if r.data.get("event", {}).get("type") == "peeked")
    seq, why = Engine(game).verify(logged)
    assert seq == peeked and "Peeked" in why
    with pytest.raises(BadRecord) as info:
        Engine(game).rebuild(logged)
    assert info.value.seq == peeked


def test_an_evolve_that_raises_while_folding_names_the_seq() -> None:
    _, records = play_local(HighCard(), {}, 2, seed=SEED)
    logged = roundtrip(records)
    kept = next(r.seq for r in logged if r.data.get("event", {}).get("type") == "kept")
    with pytest.raises(BadRecord) as info:
        Engine(broken.EvolveRaises()).rebuild(logged)
    assert info.value.seq == kept and isinstance(info.value.__cause__, KeyError)
    assert isinstance(info.value, ValueError)
    assert Engine(broken.EvolveRaises()).verify(logged)[0] == kept


def _drop(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda r: Record(r.seq, "oddity", r.data), "unknown record type"),
        (lambda r: Record(r.seq + 1, r.type, r.data), "should follow"),
        (lambda r: Record(r.seq, r.type, _drop(r.data, "event")), "cannot read"),
        (lambda r: Record(r.seq, r.type, {**r.data, "event": {"type": "nope"}}), "cannot read"),
        (lambda r: Record(r.seq, r.type, {**r.data, "event": 7}), "cannot read"),
    ],
)
def test_a_record_that_does_not_fold_is_a_bad_record_with_its_seq(damage: Any, why: str) -> None:
    _, records = play_local(HighCard(), {}, 2, seed=SEED)
    logged = roundtrip(records)
    i = next(i for i, r in enumerate(logged) if r.data.get("event", {}).get("type") == "kept")
    logged[i] = damage(logged[i])
    with pytest.raises(BadRecord) as info:
        Engine(HighCard()).rebuild(logged)
    assert info.value.seq == i and why in info.value.message
    assert Engine(HighCard()).verify(logged)[0] == logged[i].seq  # the seq as recorded


def test_bad_seat_records_and_records_after_the_end_are_bad_records() -> None:
    _, records = play_local(HighCard(), {}, 2, seed=SEED)
    logged = roundtrip(records)
    engine = Engine(HighCard())
    second = Record(2, "seat_taken", {**logged[2].data, "seat": 0})  # seat 0 again
    with pytest.raises(BadRecord, match="already taken") as info:
        engine.rebuild([*logged[:2], second])
    assert info.value.seq == 2
    for seat in (-1, 2, True):
        with pytest.raises(BadRecord, match="no seat"):
            engine.rebuild([*logged[:2], Record(2, "seat_taken", {**logged[2].data, "seat": seat})])
    late = Record(len(logged), "ended", logged[-1].data)
    with pytest.raises(BadRecord, match="after the session ended") as info:
        engine.rebuild([*logged, late])
    assert info.value.seq == len(logged)
    with pytest.raises(BadRecord) as info:
        engine.rebuild([])
    assert info.value.seq == 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 60) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


A_LOG = tuple(roundtrip(play_local(HighCard(), {"rounds": 2}, 3, seed=SEED)[1]))


@settings(max_examples=100, deadline=None)
@given(
    where=st.integers(0, 10_000),
    key=st.sampled_from(["event", "action", "seat", "name", "bot", "options", "seats", "v", "x"]),
    value=JSON | st.just(KeyError),  # KeyError: drop the key
    type_=st.none() | st.sampled_from(["event", "action", "seat_taken", "ended", "header", "?"]),
)
def test_verify_never_raises_and_rebuild_raises_only_bad_record_on_a_damaged_log(
    where: int, key: str, value: Any, type_: str | None
) -> None:
    logged = list(A_LOG)
    i = where % len(logged)
    rec = logged[i]
    data = _drop(rec.data, key) if value is KeyError else {**rec.data, key: value}
    logged[i] = Record(rec.seq, type_ or rec.type, data)
    engine = Engine(HighCard())
    diff = engine.verify(logged)
    assert diff is None or (isinstance(diff[0], int) and isinstance(diff[1], str))
    try:
        engine.rebuild(logged)
    except BadRecord as exc:
        assert i <= exc.seq <= len(logged)  # at the damage, or where it shows


# -- observers -------------------------------------------------------------------------------------


def test_an_observer_that_calls_sys_exit_is_logged_and_the_next_one_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []

    class Watcher:
        @hookimpl
        def gamehost_event_appended(self, record: dict[str, Any]) -> None:
            seen.append(record)

    class Exits:
        @hookimpl
        def gamehost_event_appended(self, record: dict[str, Any]) -> None:
            raise SystemExit(2)

    pm = plugin_manager(entrypoints=False)
    pm.register(Watcher(), "watcher")
    pm.register(Exits(), "exits")
    recorder = Recorder()
    monkeypatch.setattr(faults, "log", recorder)
    faults.notify_isolated(pm.hook.gamehost_event_appended, session="s", record={"seq": 1})
    assert seen == [{"seq": 1}]
    assert [event for event, _ in recorder.calls] == ["observer_failed"]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def exception(self, event: str, **kw: Any) -> None:
        self.calls.append((event, kw))


def test_an_observer_that_raises_is_logged_and_the_next_one_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []

    class Watcher:
        @hookimpl
        def gamehost_event_appended(self, record: dict[str, Any]) -> None:
            seen.append(record)

    class Broken:
        @hookimpl
        def gamehost_event_appended(self, session: str, record: dict[str, Any]) -> None:
            seen.append("broken")
            raise RuntimeError("planted bug in an observer")

    pm = plugin_manager(entrypoints=False)
    pm.register(Watcher(), name="watcher")
    pm.register(Broken(), name="broken")  # registered last: pluggy calls it first
    with pytest.raises(RuntimeError):
        pm.hook.gamehost_event_appended(session="s", record={"seq": 1})
    assert seen == ["broken"]  # a plain hook call stops at the first observer that raises
    seen.clear()
    log = Recorder()
    monkeypatch.setattr(faults, "log", log)
    faults.notify_isolated(pm.hook.gamehost_event_appended, session="s", record={"seq": 1})
    assert seen == ["broken", {"seq": 1}]
    assert log.calls == [
        ("observer_failed", {"hook": "gamehost_event_appended", "plugin": "broken"})
    ]


# -- registering games -----------------------------------------------------------------------------


class RaisesOnRegister:
    @hookimpl
    def gamehost_register_games(self) -> list:
        raise RuntimeError("planted bug in a plugin's registration")


@attrs.frozen
class Kept:
    """Not the toy's Kept, but with its tag."""

    seat: int


class SharedTag(HighCard):
    info = attrs.evolve(
        HighCard.info, id="shared-tag", event_types=(*HighCard.info.event_types, Kept)
    )


class NotAGame:
    info = attrs.evolve(HighCard.info, id="not-a-game")


class Offers:
    def __init__(self, *games: Any) -> None:
        self.games = list(games)

    @hookimpl
    def gamehost_register_games(self) -> list:
        return self.games


def test_a_broken_plugin_or_game_is_left_out_and_the_others_are_served() -> None:
    registry = load_registry(
        [
            ("raises", RaisesOnRegister()),
            ("shared-tag", Offers(SharedTag(), NotAGame())),
            ("toy", broken.Plugin(HighCard())),
        ],
        entrypoints=False,
    )
    assert sorted(registry.games) == ["high-card"]
    reasons: dict[str, list[str]] = {}
    for name, why in registry.refused:
        reasons.setdefault(name, []).append(why)
    assert len(reasons["raises"]) == 1 and "planted bug" in reasons["raises"][0]
    tag, members = reasons["shared-tag"]
    assert "tests.toy.Kept and tests.host.test_plugin_faults.Kept share the type tag 'kept'" in tag
    assert "no initial_state, start, decide" in members


def test_check_game_refuses_bad_seat_ranges_and_non_attrs_classes() -> None:
    check_game(HighCard())
    bad = [
        attrs.evolve(HighCard.info, min_seats=0),
        attrs.evolve(HighCard.info, min_seats=3, max_seats=2),
        attrs.evolve(HighCard.info, action_types=(dict,)),
        attrs.evolve(HighCard.info, id=""),
    ]
    for info in bad:
        game = HighCard()
        game.info = info
        with pytest.raises(BadGame):
            check_game(game)


# -- every built-in game passes the guards ------------------------------------------------------

BUILT_IN = load_registry()
SHORT = {"crazy-eights": {"target": 20}, "seven-twenty-seven": {"hands": 2}}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gid=st.sampled_from(sorted(BUILT_IN.games)),
    random_bots=st.booleans(),
    extra_seats=st.integers(0, 2),
    seed=st.binary(min_size=32, max_size=32),
)
def test_random_playouts_of_every_built_in_game_never_fault(
    gid: str, random_bots: bool, extra_seats: int, seed: bytes
) -> None:
    game = BUILT_IN.games[gid]
    seats = min(game.info.min_seats + extra_seats, game.info.max_seats)
    player = RandomLegal(game) if random_bots else game
    engine = Engine(player, BUILT_IN.engines[gid].codec)
    try:
        final, records = play_local(player, SHORT.get(gid, {}), seats, seed, 1500, engine)
    except DidNotEnd:
        return  # a long match: every step it took passed the checks
    assert final.ended
    assert engine.verify(roundtrip(records)) is None
