"""High-Low's own tests: the plugin kit, two rules, and a whole session over TCP."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from high_low import HighLow
from high_low.model import GameOver, Guess, Guessed, Options, State

from host.game import Rng
from host.store.file import read_log
from host.table.engine import Engine, Record
from host.testing import check_game, installed_registry

GAME = HighLow()


def cards_conserved(state: State) -> None:
    """Invariant: the deck, the face-up card and the guessed cards are the 52 cards once."""
    if state.face_up is None:
        return
    guessed = state.guesses
    seen = Counter(state.deck) + Counter([state.face_up])
    assert sum(seen.values()) + guessed == 52, f"{sum(seen.values())} + {guessed} cards"
    assert max(seen.values()) == 1, "a card is twice in the deck"


def test_high_low_passes_the_plugin_kit() -> None:
    check_game(GAME, invariant=cards_conserved)


def test_a_right_call_scores_and_the_last_guess_ends_the_game() -> None:
    state = State(Options(rounds=1), 2, deck=("9H", "2C"), face_up="5S", scores=(0, 0))
    events = GAME.decide(state, 0, Guess("higher"), Rng(b"x", 1))
    assert events == [Guessed(0, "higher", "9H", True)]
    state = GAME.evolve(state, events[0])
    events = GAME.decide(state, 1, Guess("higher"), Rng(b"x", 2))
    assert events == [Guessed(1, "higher", "2C", False), GameOver((0,))]


def test_the_entry_point_is_installed() -> None:
    assert "high-low" in installed_registry().games


async def test_a_session_over_tcp_ends_and_its_log_verifies(game_host) -> None:
    client = await game_host.client()
    games = await client.call("games")
    assert [g["id"] for g in games["games"]] == ["high-low"]
    created = await client.call("create", game="high-low", seats=3, bots=2)
    sid = created["session"]
    await client.call("join", session=sid, name="me")
    while True:
        push = await client.next_push()
        assert push is not None, "the host closed the connection"
        if push["push"] == "turn":
            await client.call("act", session=sid, action=push["legal"][0], seq=push["seq"])
        elif push["push"] == "ended":
            break
    assert len(push["outcome"]["scores"]) == 3
    log = Path(game_host.data_dir) / "sessions" / f"{sid}.jsonl"  # durable before any push
    records = [Record.from_json(r) for r in read_log(log)]  # checksums checked and taken out
    assert Engine(GAME).verify(records) is None
    assert records[-1].type == "ended"
