"""The published contract (``host.plugins.contract``, ``gamehost schema``) holds for what the games
really send: every action, event (as each seat, as a spectator, as logged) and view (as each
seat and as a spectator) of random playouts validates against the game's generated schema."""

from __future__ import annotations

import json
from typing import Any

import attrs
import jsonschema
import pytest

from host.game import Rng
from host.plugins.codec import GameCodec
from host.plugins.contract import SchemaError, game_schema, hidden_fields, type_schema
from host.plugins.registry import load_registry
from tools.cli import main as cli_main

REGISTRY = load_registry()

# (game id, seats, options): defaults and the variants that change the shapes of values
CASES = [
    ("crazy-eights", 2, {}),
    ("crazy-eights", 4, {"draw_two": True, "queens_skip": True, "aces_reverse": True}),
    ("crazy-eights", 3, {"countdown": True, "starter_eight": "keep", "draw_limit": 1}),
    ("crazy-eights", 7, {"reshuffle": False, "target": 30}),
    ("around-the-world", 2, {}),
    ("around-the-world", 5, {"fifth_question": True, "poker_cancel": True, "end_cards": True}),
    ("around-the-world", 3, {"suit_question": "same_or_different", "round1_values": "escalating"}),
    ("seven-twenty-seven", 4, {"hands": 3}),
    ("seven-twenty-seven", 5, {"hands": 3, "pot": "split", "deal": "up_down_down"}),
    ("seven-twenty-seven", 4, {"hands": 3, "draw_rounds": "until_all_stand", "bust_over_27": True}),
]


def wire(value: Any) -> Any:
    """What a client reads: the JSON text parsed back."""
    return json.loads(json.dumps(value))


@attrs.define
class Seen:
    """Everything a playout sent, in wire form."""

    actions: list[Any] = attrs.Factory(list)
    logged: list[Any] = attrs.Factory(list)
    as_seat: list[Any] = attrs.Factory(list)
    as_spectator: list[Any] = attrs.Factory(list)
    views_seat: list[Any] = attrs.Factory(list)
    views_spectator: list[Any] = attrs.Factory(list)
    outcome: Any = None


def playout(gid: str, seats: int, options: dict[str, Any], seed: int, max_steps: int = 400) -> Seen:
    """A random playout: a random seat to act plays a random legal action; ``start`` and
    ``decide`` get the game's Rng as the host gives it."""
    game = REGISTRY.games[gid]
    codec = GameCodec(game)
    state = game.initial_state(codec.options_from_wire(options, seats), seats)
    seen = Seen()
    key = seed.to_bytes(32, "big")
    pick = Rng(key, 0, stream="test")

    def record(events: Any) -> None:
        nonlocal state
        for event in events:
            state = game.evolve(state, event)
            logged = wire(codec.event_to_wire(event))
            seen.logged.append(logged)
            marked = hidden_fields(type(event))
            for viewer in [*range(seats), None]:
                shown = wire(codec.event_to_wire(game.redact(event, viewer)))
                (seen.as_spectator if viewer is None else seen.as_seat).append(shown)
                changed = {k for k in logged if shown.get(k) != logged[k]}
                assert changed <= set(marked), (
                    f"redact changed {sorted(changed - set(marked))} of {logged['type']} for"
                    f" viewer {viewer}, but the type does not mark them hidden"
                )
        for viewer in range(seats):
            seen.views_seat.append(wire(codec.to_wire(game.view(state, viewer))))
        seen.views_spectator.append(wire(codec.to_wire(game.view(state, None))))

    record(game.start(state, Rng(key, 1)))
    for step in range(max_steps):
        to_act = game.to_act(state)
        if not to_act or game.outcome(state) is not None:
            break
        seat = pick.choice(to_act)
        action = pick.choice(game.legal_actions(state, seat))
        seen.actions.append(wire(codec.action_to_wire(action)))
        record(game.decide(state, seat, action, Rng(key, step + 2)))
    seen.outcome = wire(codec.to_wire(game.outcome(state)))
    return seen


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_valid(schema: dict[str, Any], values: list[Any], what: str) -> None:
    v = validator(schema)
    assert values, f"no {what} to check"
    for value in values:
        errors = list(v.iter_errors(value))
        assert not errors, f"{what} {value} breaks its schema: {errors[0].message}"


@pytest.mark.parametrize(("gid", "seats", "options"), CASES)
def test_every_value_of_a_random_playout_fits_the_published_schema(
    gid: str, seats: int, options: dict[str, Any]
) -> None:
    """Also: whatever ``redact`` changes in an event is a field its type marks hidden."""
    schema = game_schema(REGISTRY.games[gid])
    seen = playout(gid, seats, options, seed=len(options) + seats)
    assert_valid(schema["options"], [options], "options")
    assert_valid(schema["action"], seen.actions, "action")
    assert_valid(schema["event"]["log"], seen.logged, "logged event")
    assert_valid(schema["event"]["seat"], seen.as_seat, "event as a seat")
    assert_valid(schema["event"]["spectator"], seen.as_spectator, "event as a spectator")
    assert_valid(schema["view"]["seat"], seen.views_seat, "view as a seat")
    assert_valid(schema["view"]["spectator"], seen.views_spectator, "view as a spectator")
    if seen.outcome is not None:
        assert_valid(schema["outcome"], [seen.outcome], "outcome")


@pytest.mark.parametrize(
    ("gid", "seats", "options"),
    [
        ("crazy-eights", 2, {"target": 1}),
        ("around-the-world", 3, {}),
        ("seven-twenty-seven", 4, {"hands": 1}),
    ],
)
def test_the_outcome_fits_its_schema(gid: str, seats: int, options: dict[str, Any]) -> None:
    seen = playout(gid, seats, options, seed=7, max_steps=1000)
    assert seen.outcome is not None, "the playout did not end"
    assert_valid(game_schema(REGISTRY.games[gid])["outcome"], [seen.outcome], "outcome")


def test_the_spectator_schema_refuses_what_a_spectator_may_not_see() -> None:
    """The schemas say who sees what: a dealt hand fits the seat schema and the log, not the
    spectator's; a stock order fits only the log."""
    schema = game_schema(REGISTRY.games["crazy-eights"])
    hands = [["2C", "3C"], None]
    dealt = {
        "type": "dealt",
        "deal": 1,
        "dealer": 0,
        "hands": hands,
        "hand_sizes": [2, 2],
        "stock": None,
        "stock_size": 40,
        "starter": "4D",
        "turned_back": [],
    }
    assert validator(schema["event"]["seat"]).is_valid(dealt)
    assert not validator(schema["event"]["spectator"]).is_valid(dealt)
    assert validator(schema["event"]["spectator"]).is_valid({**dealt, "hands": [None, None]})
    assert not validator(schema["event"]["log"]).is_valid(dealt)  # the log hides nothing
    full = {**dealt, "hands": [["2C"], ["3C"]], "stock": ["5H"]}
    assert validator(schema["event"]["log"]).is_valid(full)
    assert not validator(schema["event"]["seat"]).is_valid(full)  # no seat sees the stock
    view = schema["view"]
    assert view["seat"]["properties"]["hand"] != view["spectator"]["properties"]["hand"]
    assert view["spectator"]["properties"]["hand"]["type"] == "null"


def test_an_action_may_leave_out_fields_with_defaults_but_not_add_any() -> None:
    schema = validator(game_schema(REGISTRY.games["crazy-eights"])["action"])
    assert schema.is_valid({"type": "play", "card": "8C"})
    assert schema.is_valid({"type": "play", "card": "8C", "suit": "H"})
    assert not schema.is_valid({"type": "play"})
    assert not schema.is_valid({"type": "play", "card": "8C", "colour": "red"})
    assert not schema.is_valid({"type": "fly"})


def test_types_map_to_json_schema_and_a_hidden_value_must_admit_null() -> None:
    assert type_schema(tuple[int, str | None]) == {
        "type": "array",
        "prefixItems": [
            {"type": "integer"},
            {"anyOf": [{"type": "string"}, {"type": "null"}]},
        ],
        "items": False,
        "minItems": 2,
    }
    assert type_schema(tuple[str | None, ...], hiding="null") == {
        "type": "array",
        "items": {"type": "null"},
    }
    assert type_schema(str | None, hiding="shown") == {"type": "string"}
    with pytest.raises(SchemaError, match="admits no None"):
        type_schema(str, hiding="null")


def test_schema_command_prints_one_game_or_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["schema", "--game", "crazy-eights"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one == json.loads(json.dumps(game_schema(REGISTRY.games["crazy-eights"])))
    assert cli_main(["schema"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert sorted(every["games"]) == sorted(REGISTRY.games)
    assert cli_main(["schema", "--game", "go-fish"]) == 2
    err = capsys.readouterr().err
    assert "no game 'go-fish'" in err and "crazy-eights" in err


def test_a_game_whose_view_type_is_not_an_attrs_class_is_refused() -> None:
    from host.plugins.registry import BadGame, check_game
    from tests.toy import HighCard

    game = HighCard()
    game.info = attrs.evolve(HighCard.info, view_type=dict)
    with pytest.raises(BadGame, match="view type"):
        check_game(game)
