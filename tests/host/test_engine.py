import pytest

from host.game import IllegalAction
from host.table.engine import Engine
from host.table.local import play_local, roundtrip
from tests.toy import HighCard, Keep


def test_a_local_session_replays_to_the_same_state():
    game = HighCard()
    engine = Engine(game)
    state, records = play_local(game, {"rounds": 2}, 4, seed=b"k" * 32, engine=engine)
    logged = roundtrip(records)
    assert engine.verify(logged) is None
    assert engine.rebuild(logged).game == state.game
    assert records[-1].type == "ended"
    assert records[-1].data["seed"] == (b"k" * 32).hex()


def test_verify_reports_the_first_event_that_differs():
    game = HighCard()
    engine = Engine(game)
    _, records = play_local(game, {}, 3, seed=b"v" * 32)
    logged = roundtrip(records)
    i = next(i for i, r in enumerate(logged) if r.data.get("event", {}).get("type") == "swapped")
    logged[i].data["event"]["card"] = "2C" if logged[i].data["event"]["card"] != "2C" else "3C"
    diff = engine.verify(logged)
    assert diff is not None and diff[0] == logged[i].seq


def test_the_same_seed_gives_the_same_log():
    game = HighCard()
    a = play_local(game, {}, 3, seed=b"z" * 32)[1]
    b = play_local(game, {}, 3, seed=b"z" * 32)[1]
    assert [r.to_json() for r in a] == [r.to_json() for r in b]


def test_an_action_from_a_seat_not_to_act_is_refused_and_changes_nothing():
    game = HighCard()
    engine = Engine(game)
    header = engine.header("s", engine.codec.options_from_wire({}, 2), 2, [], b"x" * 32)
    state = engine.initial(header)
    for seat in range(2):
        state = engine.apply_all(state, engine.take_seat(state, seat, "p", False, None))
    with pytest.raises(IllegalAction) as info:
        engine.act(state, 1, Keep())
    assert info.value.reason == "not_your_turn"


def test_events_of_an_older_schema_are_upcast_on_read_never_rewritten():
    import attrs

    from host.game import GameInfo

    class HighCardV2(HighCard):
        """Version 2 renamed nothing on the wire but reads v1 'kept' events named 'stood'."""

        info = attrs.evolve(HighCard.info, event_version=2)

        def upcast(self, event: dict, version: int) -> dict:
            assert version == 1
            return {**event, "type": "kept"} if event["type"] == "stood" else event

    old_game = HighCard()
    _, records = play_local(old_game, {}, 2, seed=b"u" * 32)
    logged = roundtrip(records)
    for r in logged:  # make it look like a v1 log that called the event "stood"
        if r.type == "event" and r.data["event"]["type"] == "kept":
            r.data["event"]["type"] = "stood"
    assert isinstance(HighCardV2.info, GameInfo)
    state = Engine(HighCardV2()).rebuild(logged)
    assert state.ended and state.game == Engine(old_game).rebuild(roundtrip(records)).game
    with pytest.raises(ValueError):
        Engine(old_game).rebuild(logged)  # v1 code does not know "stood"


def test_client_values_are_never_coerced_and_oversized_ones_are_refused_cheaply():
    from host.game import OptionError
    from host.plugins.codec import BadAction

    codec = Engine(HighCard()).codec
    with pytest.raises(OptionError) as info:
        codec.options_from_wire({"rounds": True}, 2)  # true is not 1
    assert info.value.option == "rounds"
    with pytest.raises(OptionError):
        codec.options_from_wire({"rounds": 1.0}, 2)
    with pytest.raises(OptionError):
        codec.options_from_wire({"rounds": 2**64}, 2)
    with pytest.raises(BadAction):
        codec.action_from_wire({"type": "keep", "pad": [1] * 10_000})
    with pytest.raises(BadAction):
        codec.action_from_wire({"type": "keep", "x": [[[[[[[[[[1]]]]]]]]]]})
    assert codec.options_from_wire({"rounds": 2}, 2).rounds == 2
