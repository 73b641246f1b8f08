"""``gamehost play``: choices typed as numbers, ranges and amounts; ``--resume TOKEN``."""

from __future__ import annotations

import argparse

import orjson
import pytest
import trio

from host.game import IllegalAction, Rng
from host.plugins.registry import load_registry
from host.table.local import play_local
from tests.conftest import start_host
from tools import play
from tools.client import Client, HostError

REGISTRY = load_registry()
STT = REGISTRY.engines["seven-twenty-seven"]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    play.add_parser(parser.add_subparsers())
    args = parser.parse_args(["play", *argv])
    args.resume_hint = None
    return args


LEGAL = [
    {"type": "fold"},
    {"type": "call"},
    {"type": "raise", "amount": 1},
    {"type": "raise", "amount": 5},
    {"type": "raise", "amount": 10},
]


def test_sampled_sizes_become_one_form_with_its_range():
    r = play.Renderer("seven-twenty-seven")
    labels = [f.label(r) for f in play.forms(LEGAL)]
    assert labels == ["fold", "call", "raise AMOUNT from 1 to 10"]
    choices = play.forms(LEGAL)
    assert play.parse_choice("raise 7", choices) == {"type": "raise", "amount": 7}
    assert play.parse_choice("2 7", choices) == {"type": "raise", "amount": 7}
    assert play.parse_choice(" 1 ", choices) == {"type": "call"}
    assert play.parse_choice("2 11", choices) == "amount must be from 1 to 10"
    assert play.parse_choice("raise 0", choices) == "amount must be from 1 to 10"
    assert play.parse_choice("2", choices) == "amount? type a number from 1 to 10"
    assert play.parse_choice("1 3", choices) == "this choice takes no number"
    assert play.parse_choice("9", choices).startswith("type a number 0..2")
    assert play.parse_choice('{"type":"raise","amount":3}', choices) == {
        "type": "raise",
        "amount": 3,
    }


def test_one_size_or_different_fields_stay_separate_choices():
    legal = [{"type": "bet", "amount": 4}, {"type": "vote", "yes": True}, {"type": "check"}]
    assert [f.key for f in play.forms(legal)] == [None, None, None]


def test_every_amount_in_a_raise_range_shown_for_a_real_table_is_accepted_by_the_game():
    _, records = play_local(STT.game, {"hands": 3, "max_bet": 9}, 5, seed=b"\x05" * 32, engine=STT)
    state = STT.rebuild(records[:1])
    checked = 0
    for rec in records[1:]:
        state = STT.apply(state, rec)
        if not state.started or state.ended:
            continue
        for seat in STT.game.to_act(state.game):
            wire = [STT.codec.action_to_wire(a) for a in STT.game.legal_actions(state.game, seat)]
            wire = orjson.loads(orjson.dumps(wire))
            for f in play.forms(wire):
                if f.key is None:
                    continue
                for value in range(f.lo, f.hi + 1):
                    action = STT.codec.action_from_wire(f.pick(value))
                    STT.game.decide(state.game, seat, action, Rng(b"\x00" * 32, 0))
                    checked += 1
                with pytest.raises(IllegalAction):
                    bad = STT.codec.action_from_wire({**f.action, f.key: f.hi + 1})
                    STT.game.decide(state.game, seat, bad, Rng(b"\x00" * 32, 0))
    assert checked > 0


def test_resume_needs_a_session(capsys):
    assert play.main(_args("--resume", "abc")) == 2
    assert "--resume TOKEN needs --session ID" in capsys.readouterr().err


def test_the_resume_command_names_the_session_and_token():
    args = _args("--port", "9000")
    assert (
        play.resume_command(args, "s1", "t0k")
        == "gamehost play --port 9000 --session s1 --resume t0k"
    )


async def test_resume_takes_the_seat_back_and_plays_to_the_end(tmp_path, nursery, capsys):
    running = await start_host(nursery, tmp_path, registry=REGISTRY)
    async with await Client.connect("127.0.0.1", running.port) as c:
        created = await c.call(
            "create", game="crazy-eights", seats=2, bots=1, options={"target": 1}
        )
        sid = created["session"]
        joined = await c.call("join", session=sid, name="ann")
    args = _args("--port", str(running.port), "--session", sid, "--resume", joined["token"])
    args.auto, args.seed = True, 3
    with pytest.raises(BaseExceptionGroup) as group:  # trio's nursery wraps it; main unwraps
        await play.play(_args("--port", str(running.port), "--session", sid, "--resume", "x"))
    leaf = play._leaf(group.value)
    assert isinstance(leaf, HostError) and leaf.code == "bad_token"
    assert await play.play(args) == 0
    out = capsys.readouterr().out
    assert f"you are seat {joined['seat']} again in session {sid}" in out
    assert "ended:" in out
    tables = [line for line in out.splitlines() if line.startswith("--- seq ")]
    assert all(a != b for a, b in zip(tables, tables[1:], strict=False))  # none drawn twice
    assert args.resume_hint == play.resume_command(args, sid, joined["token"])
    running.host.request_shutdown()


async def test_a_player_who_does_not_answer_sees_the_host_play_for_them(
    tmp_path, nursery, capsys, monkeypatch, autojump_clock
):
    async def never_types(prompt: str) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(play, "read_line", never_types)
    running = await start_host(nursery, tmp_path, registry=REGISTRY, turn_timeout=5.0)
    async with await Client.connect("127.0.0.1", running.port) as c:
        created = await c.call(
            "create", game="crazy-eights", seats=2, bots=1, options={"target": 1}
        )
    args = _args("--port", str(running.port), "--session", created["session"])
    assert await play.play(args) == 0  # every turn played by the timer, to the end
    out = capsys.readouterr().out.splitlines()
    log = [orjson.loads(x) for x in (tmp_path / "sessions" / f"{created['session']}.jsonl").open()]
    mine = [r for r in log if r["type"] == "action" and r["seat"] == 0]
    assert mine and all(r.get("timed_out") for r in mine)
    marked = [line for line in out if line.endswith("  [timed out: played by the host]")]
    assert len(marked) == len(mine) and all(line.startswith("  seat 0: ") for line in marked)
    notes = [line for line in out if line == "your turn timer ran out: the host played for you"]
    assert len(notes) == len(mine)
    running.host.request_shutdown()


@pytest.mark.parametrize(("flags", "want"), [([], (4, 3)), (["--seats", "3"], (3, 2))])
async def test_by_default_every_seat_but_yours_is_a_bot(tmp_path, nursery, capsys, flags, want):
    running = await start_host(nursery, tmp_path, registry=REGISTRY)
    args = _args(
        "--port", str(running.port), "--game", "crazy-eights", "--option", "target=1", *flags
    )
    args.auto, args.seed = True, 3
    assert await play.play(args) == 0
    out = capsys.readouterr().out
    seats, bots = want
    assert f"(crazy-eights, {seats} seats, {bots} bots)" in out
    assert "ended:" in out
    running.host.request_shutdown()


async def test_a_seat_resumed_elsewhere_ends_play_with_a_clear_line(
    tmp_path, nursery, capsys, monkeypatch
):
    """Last resume wins: ``gamehost play`` whose seat another connection resumes says so and
    exits 1 (it does not sit waiting for turns that now go elsewhere)."""
    typing = trio.Event()

    async def waits_at_the_prompt(prompt: str) -> str:
        typing.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(play, "read_line", waits_at_the_prompt)
    running = await start_host(nursery, tmp_path, registry=REGISTRY, turn_timeout=None)
    async with await Client.connect("127.0.0.1", running.port) as c:
        created = await c.call(
            "create", game="crazy-eights", seats=2, bots=1, options={"target": 1}
        )
        sid = created["session"]
        joined = await c.call("join", session=sid, name="ann")
    args = _args("--port", str(running.port), "--session", sid, "--resume", joined["token"])
    done: list[int] = []

    async def run_play() -> None:
        done.append(await play.play(args))

    nursery.start_soon(run_play)
    await typing.wait()  # play holds the seat and waits for a move
    async with await Client.connect("127.0.0.1", running.port) as other:
        await other.call("resume", session=sid, token=joined["token"])
        with trio.fail_after(10):
            while not done:
                await trio.sleep(0.01)
    assert done == [1]
    assert "this connection no longer holds seat 0: it was resumed on another connection" in (
        capsys.readouterr().out
    )
    running.host.request_shutdown()
