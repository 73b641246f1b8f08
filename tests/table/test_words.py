"""The host's words for records (:mod:`host.table.words`): seat names, the host's own texts,
and a game without text members, or whose text members raise."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio

from host.game import GameInfo, who
from host.table import core
from host.table.words import Words, display_names, outcome_fallback, raw_event
from host.testing import registry_of
from tests.conftest import start_host
from tests.toy import HighCard


class Plain:
    """A game with no text member at all."""

    info = GameInfo("plain", "Plain", "1", 2, 2, object, (), ())


class Talks(Plain):
    def describe(self, action: dict[str, Any]) -> str:
        return f"say {action['word']}"

    def describe_event(self, event: dict[str, Any], viewer: Any, names: Sequence[str]) -> str:
        return f"{who(event['seat'], viewer, names, start=True)} said {event['word']}"

    def describe_outcome(self, outcome: dict[str, Any], names: Sequence[str]) -> str:
        return f"{names[outcome['best']]} talked best"


class Breaks(Talks):
    def describe_event(self, event: dict[str, Any], viewer: Any, names: Sequence[str]) -> str:
        raise KeyError("word")

    def describe_outcome(self, outcome: dict[str, Any], names: Sequence[str]) -> str:
        return 42  # type: ignore[return-value]


NAMES = ["Ann", "Bob"]


def test_display_names_tell_every_seat_apart():
    assert display_names(["Ann", "Bob"]) == ["Ann", "Bob"]
    assert display_names(["player", "player", None]) == [
        "player (seat 0)",
        "player (seat 1)",
        "seat 2",
    ]
    assert display_names(["You", "", "bob"]) == ["You (seat 0)", "seat 1", "bob"]


def test_who_is_you_for_the_viewer_and_a_name_for_anyone_else():
    assert who(0, 0, NAMES) == "you" and who(0, 0, NAMES, start=True) == "You"
    assert who(1, 0, NAMES) == who(1, None, NAMES) == "Bob"
    assert who(5, None, NAMES) == "seat 5" and who(None, None, NAMES) == "seat None"


@pytest.mark.parametrize(
    ("kind", "body", "viewer", "text"),
    [
        ("seat_taken", {"seat": 1, "name": "Bob", "bot": True}, 0, "Bob took seat 1 (a host bot)"),
        ("seat_taken", {"seat": 0, "name": "Ann", "bot": False}, 0, "You took seat 0"),
        ("seat_held", {"seat": 1}, None, "Bob came back"),
        ("seat_released", {"seat": 1}, 0, "Bob left"),
        ("seat_released", {"seat": 1, "reason": "unresponsive"}, 0, "Bob lost the connection"),
        ("action", {"seat": 1, "action": {"word": "hi"}}, 0, ""),
        (
            "action",
            {"seat": 0, "action": {"word": "hi"}, "timed_out": True},
            0,
            "Time ran out for you: the host played say hi",
        ),
        ("event", {"type": "said", "seat": 1, "word": "hi"}, 1, "You said hi"),
        ("ended", {"outcome": {"best": 1}, "seed": None}, 0, "Bob talked best"),
        (
            "ended",
            {"outcome": None, "aborted": "abandoned", "seed": None},
            None,
            "The host ended the session: no player was connected for too long.",
        ),
        ("event", None, 0, ""),  # an event not shown (the game's code was stopped)
    ],
)
def test_the_host_tells_each_kind_of_record(kind, body, viewer, text):
    assert Words(Talks()).record(kind, body, viewer, NAMES) == text


def test_a_game_without_text_members_gets_plain_lines():
    words = Words(Plain())
    assert words.record("action", {"seat": 1, "action": {"word": "hi"}}, 0, NAMES) == (
        'Bob: {"word":"hi"}'
    )
    event = {"type": "said", "seat": 1, "word": "hi"}
    assert words.record("event", event, 0, NAMES) == raw_event(event) == 'said seat=1 word="hi"'
    assert words.record("ended", {"outcome": {"winners": [1], "scores": [3, 7]}}, 0, NAMES) == (
        "Bob won.\nScores: Ann 3, Bob 7"
    )
    assert outcome_fallback({"ledger": []}, NAMES) == 'The game is over: {"ledger":[]}'
    assert not words.failed


def test_a_text_member_that_raises_is_replaced_by_the_hosts_text():
    words = Words(Breaks())
    event = {"type": "said", "seat": 1, "word": "hi"}
    assert words.record("event", event, 0, NAMES) == 'said seat=1 word="hi"'
    assert words.failed
    words.failed = False
    assert words.record("ended", {"outcome": {"best": 1}}, 0, NAMES).startswith(
        'The game is over: {"best":1}'
    )
    assert words.failed


class ToyBreaksItsText(HighCard):
    def describe_event(self, event: dict[str, Any], viewer: Any, names: Sequence[str]) -> str:
        raise RuntimeError("oops")


async def test_a_game_whose_text_raises_plays_on_and_is_logged_once(tmp_path, monkeypatch):
    """A text member's fault is no fault of the session: the host writes its plain text
    instead, logs it once, and the game goes on to its end."""
    logged: list[tuple[str, dict[str, Any]]] = []

    class Recorder:  # the table's logger (a structlog logger may be cached by an earlier test)
        def __getattr__(self, level: str) -> Any:
            return lambda event, **kw: logged.append((event, kw))

    monkeypatch.setattr(core, "log", Recorder())
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry_of(ToyBreaksItsText()))
        c = await running.client()
        sid = (await c.call("create", game="high-card", seats=2, bots=1))["session"]
        await c.call("join", session=sid, name="Ann", text=True)
        texts = []
        while (p := await c.next_push())["push"] != "ended":
            if p["push"] == "event" and p["kind"] == "event":
                texts.append(p["text"])
            if p["push"] == "turn":
                await c.call("act", session=sid, action=p["legal"][0], seq=p["seq"])
        assert texts and all(t.split()[0] in ("dealt", "kept", "swapped") for t in texts)
        failed = [e for e in logged if e[0] == "game_text_failed"]
        assert len(failed) == 1 and failed[0][1]["session"] == sid
        running.host.request_shutdown()
