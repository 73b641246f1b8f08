"""What happened, in words: every installed game's ``describe_event`` tells each viewer what
its redacted event holds and never a card that ``redact`` hid from it; ``describe_outcome``
names the winners and the final scores."""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host.plugins.registry import load_registry
from host.table.engine import Record
from host.table.local import play_local
from host.table.words import Words, display_names
from host.testing import CARD, cards_in_text

REGISTRY = load_registry()

# each game with its default options and a variant that reaches its other events
GAMES: dict[str, list[dict[str, Any]]] = {
    "crazy-eights": [
        {"target": 30},
        {"countdown": True, "draw_two": True, "queens_skip": True, "aces_reverse": True},
    ],
    "around-the-world": [
        {},
        {"fifth_question": True, "poker_cancel": True, "end_cards": True, "face_double": True},
    ],
    "seven-twenty-seven": [
        {"hands": 3},
        {"hands": 3, "deal": "up_down_down", "extra_card_face": "up", "pot": "split"},
    ],
    "high-low": [{"rounds": 3}],
}
INSTALLED = [g for g in GAMES if g in REGISTRY.games]


def _cards(value: Any) -> set[str]:
    """Every card string inside a JSON value."""
    if isinstance(value, str):
        return {value} if CARD.match(value) else set()
    if isinstance(value, dict):
        return set().union(*map(_cards, value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*map(_cards, value)) if value else set()
    return set()


@cache
def _playout(gid: str, variant: int, seats: int, seed: int) -> tuple[Record, ...]:
    engine = REGISTRY.engines[gid]
    options = GAMES[gid][variant]
    _, records = play_local(engine.game, options, seats, seed=seed.to_bytes(32, "big"))
    return tuple(records)


@st.composite
def sessions(draw: st.DrawFn) -> tuple[str, tuple[Record, ...], int | None]:
    gid = draw(st.sampled_from(INSTALLED), label="game")
    info = REGISTRY.games[gid].info
    seats = draw(st.integers(info.min_seats, min(info.max_seats, 6)), label="seats")
    variant = draw(st.integers(0, len(GAMES[gid]) - 1), label="options")
    seed = draw(st.integers(0, 3), label="seed")
    viewer = draw(st.sampled_from([None, *range(seats)]), label="viewer")
    return gid, _playout(gid, variant, seats, seed), viewer


@pytest.mark.skipif(not INSTALLED, reason="no game with text installed")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(sessions())
def test_no_event_text_names_a_card_the_viewers_redacted_event_hides(
    session: tuple[str, tuple[Record, ...], int | None],
) -> None:
    gid, records, viewer = session
    engine = REGISTRY.engines[gid]
    game = engine.game
    names = display_names([r.data["name"] for r in records if r.type == "seat_taken"])
    told = 0
    for rec in records:
        if rec.type != "event":
            continue
        full = rec.data["event"]
        redacted = orjson.loads(orjson.dumps(engine.redacted_wire(rec, viewer)))
        text = game.describe_event(redacted, viewer, names)
        assert isinstance(text, str) and text and "\n" not in text
        hidden = _cards(full) - _cards(redacted)
        leaked = cards_in_text(text) & hidden
        assert not leaked, f"{gid}: {text!r} names {leaked}, hidden from viewer {viewer!r}"
        # and it tells what the viewer does see of a drawn or dealt card
        told += bool(cards_in_text(text))
    assert told > 0


def _event_text(gid: str, event: dict[str, Any], viewer: int | None) -> str:
    names = ["Ann", "Bob", "Cy", "Di"]
    return REGISTRY.games[gid].describe_event(event, viewer, names)


@pytest.mark.skipif("crazy-eights" not in REGISTRY.games, reason="crazy-eights not installed")
def test_crazy_eights_tells_a_drawer_its_cards_and_the_others_only_how_many() -> None:
    drew = {"type": "drew", "seat": 1, "cards": ["5D", "9S"], "count": 2}
    assert _event_text("crazy-eights", drew, 1) == "You drew 2 cards: 5♦ 9♠"
    hidden = {**drew, "cards": None}
    assert _event_text("crazy-eights", hidden, 0) == "Bob drew 2 cards"
    assert _event_text("crazy-eights", {**hidden, "count": 1}, None) == "Bob drew a card"
    played = {"type": "played", "seat": 3, "card": "8S", "suit": "H"}
    assert _event_text("crazy-eights", played, 0) == "Di played 8♠ and named ♥"


@pytest.mark.skipif("seven-twenty-seven" not in REGISTRY.games, reason="not installed")
def test_seven_twenty_seven_tells_chips_and_face_down_cards_by_viewer() -> None:
    raised = {"type": "raised", "seat": 0, "amount": 4, "chips": 6, "all_in": False}
    assert _event_text("seven-twenty-seven", raised, 2) == "Ann raised by 4 (6 chips)"
    down = {"type": "card_drawn", "seat": 2, "card": "5D", "face": "down"}
    assert _event_text("seven-twenty-seven", down, 2) == "You drew 5♦ face down"
    assert (
        _event_text("seven-twenty-seven", {**down, "card": None}, 0) == "Cy drew a card face down"
    )


def _outcome_text(gid: str, records: tuple[Record, ...]) -> tuple[str, dict[str, Any], list]:
    names = display_names([r.data["name"] for r in records if r.type == "seat_taken"])
    outcome = records[-1].data["outcome"]
    return REGISTRY.games[gid].describe_outcome(outcome, names), outcome, names


@pytest.mark.parametrize("gid", INSTALLED)
def test_the_end_names_the_winners_and_every_final_score(gid: str) -> None:
    info = REGISTRY.games[gid].info
    records = _playout(gid, 0, info.min_seats + 1, 1)
    text, outcome, names = _outcome_text(gid, records)
    lines = text.splitlines()
    assert 2 <= len(lines) <= 3 and len(text) < 400 and "{" not in text
    if "winners" in outcome:
        winners = [names[w] for w in outcome["winners"]]
        assert lines[0].startswith(" and ".join(winners) if len(winners) < 3 else winners[0])
        assert " won" in lines[0]
    every = outcome.get("scores") or outcome.get("stacks")
    if every is None:  # Around the World: the ledger, drinks taken per seat
        every = [b["total"]["taken"] for b in outcome["ledger"]]
    for name, score in zip(names, every, strict=True):
        assert f"{name} {score}" in lines[1] or f"{name} took {score}" in lines[1]


def test_the_host_words_for_the_same_event_differ_by_viewer_only_as_redact_does() -> None:
    """The host tells a record from the push's own body: a seat's own draw names its card, a
    spectator's text of the same record does not."""
    engine = REGISTRY.engines["crazy-eights"]
    records = _playout("crazy-eights", 0, 2, 0)
    words = Words(engine.game)
    names = display_names(["bot0", "bot1"])
    drew = next(r for r in records if (r.data.get("event") or {}).get("type") == "drew")
    seat = drew.data["event"]["seat"]
    own = words.record("event", engine.redacted_wire(drew, seat), seat, names)
    spectator = words.record("event", engine.redacted_wire(drew, None), None, names)
    assert own.startswith("You drew ") and cards_in_text(own) == set(drew.data["event"]["cards"])
    assert spectator == f"bot{seat} drew a card" and not cards_in_text(spectator)
