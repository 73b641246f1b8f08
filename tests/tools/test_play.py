"""``gamehost play``: choices typed as numbers, ranges and amounts; ``--resume TOKEN``."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys

import orjson
import pytest
import trio
import trio.testing

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
        == f"{play.gamehost_command()} play --port 9000 --session s1 --resume=t0k"
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
    assert "=== Game over ===" in out
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
    marked = [line for line in out if line.startswith("  Time ran out for you: the host played ")]
    assert len(marked) == len(mine)
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
    assert f"(crazy-eights, {seats} seats, {bots} bot{'' if bots == 1 else 's'})" in out
    assert "=== Game over ===" in out
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


# ---- labels typed as shown, one line per kind of move -----------------------------------------
CE_LEGAL = [
    {"type": "play", "card": "7C", "suit": None},
    {"type": "play", "card": "QC", "suit": None},
    *({"type": "play", "card": "8C", "suit": s} for s in "CDHS"),
    {"type": "draw"},
]


def test_a_choice_is_accepted_as_its_label_is_shown():
    r = play.Renderer("crazy-eights")
    choices = play.forms(CE_LEGAL)
    labels = [f.label(r) for f in choices]
    assert labels[:3] == ["play 7C", "play QC", "play 8C, name clubs"]
    for i, label in enumerate(labels):  # every label as shown, and in any case
        assert play.parse_choice(label, choices, labels) == CE_LEGAL[i]
        assert play.parse_choice(label.lower(), choices, labels) == CE_LEGAL[i]
    assert play.parse_choice("play 8C name hearts", choices, labels) == CE_LEGAL[4]
    assert play.parse_choice("draw", choices, labels) == {"type": "draw"}
    # a beginning that names one choice is enough; one that names several asks which
    assert play.parse_choice("play 7c", choices, labels) == CE_LEGAL[0]
    which = play.parse_choice("play 8C", choices, labels)
    assert which == (
        "which one? [2] play 8C, name clubs, [3] play 8C, name diamonds,"
        " [4] play 8C, name hearts, [5] play 8C, name spades"
    )
    assert play.parse_choice("play 9C", choices, labels).startswith("type a number 0..6")
    assert play.parse_choice("1", choices, labels) == CE_LEGAL[1]  # numbers as before


def test_moves_of_one_kind_share_a_line_so_playable_cards_are_listed_once():
    r = play.Renderer("crazy-eights")
    choices = play.forms(CE_LEGAL)
    shown = play.menu(choices, [f.label(r) for f in choices]).splitlines()
    assert shown == [
        "  play [0] 7C · [1] QC · [2] 8C, name clubs · [3] 8C, name diamonds · [4] 8C, name hearts",
        "       [5] 8C, name spades",  # wrapped between two choices, never inside one
        "  [6] draw",
    ]
    # every card is named once; a range keeps its own line
    assert sum(line.count("7C") for line in shown) == 1
    ranged = play.forms(LEGAL)
    assert play.menu(ranged, [f.label(r) for f in ranged]).splitlines() == [
        "  [0] fold",
        "  [1] call",
        "  [2] raise AMOUNT from 1 to 10",
    ]


# ---- what happened, in words --------------------------------------------------------------
async def test_the_history_is_told_in_words_and_the_end_names_the_winners(
    tmp_path, nursery, capsys
):
    running = await start_host(nursery, tmp_path, registry=REGISTRY)
    args = _args("--port", str(running.port), "--seats", "2", "--name", "Ann")
    args.auto, args.seed = True, 5
    args.option = [("target", 1)]
    assert await play.play(args) == 0
    out = capsys.readouterr().out.splitlines()
    sid = out[0].split()[2]
    log = [orjson.loads(x) for x in (tmp_path / "sessions" / f"{sid}.jsonl").open()]
    history = [line for line in out if line.startswith("  ") and not line.startswith("  [")]
    played = [r["event"] for r in log if (r.get("event") or {}).get("type") == "played"]
    suits = {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}
    for e in played:
        who = "You" if e["seat"] == 0 else "bot1"
        line = f"  {who} played {e['card'][:-1]}{suits[e['card'][-1]]}"
        assert any(h.startswith(line) for h in history), line
    assert not any("=" in h or "{" in h for h in history)  # no key=value, no JSON
    outcome = log[-1]["outcome"]
    names = ["Ann", "bot1"]
    end = out[out.index("=== Game over ===") + 1 :]
    assert end[0].startswith(" and ".join(names[w] for w in outcome["winners"]) + " won after")
    assert end[1] == f"Scores: Ann {outcome['scores'][0]}, bot1 {outcome['scores'][1]}"
    running.host.request_shutdown()


# ---- the token, the resume command and Ctrl-C -------------------------------------------------
@pytest.mark.parametrize("run_as", ["script", "module"])
async def test_the_printed_resume_command_works_as_printed_outside_the_venv(
    tmp_path, nursery, monkeypatch, run_as
):
    script = os.path.join(os.path.dirname(sys.executable), "gamehost")
    monkeypatch.setattr(sys, "argv", [script if run_as == "script" else "pytest"])
    command = play.gamehost_command()
    assert command == (script if run_as == "script" else f"{sys.executable} -m tools.cli")
    running = await start_host(nursery, tmp_path, registry=REGISTRY)
    async with await Client.connect("127.0.0.1", running.port) as c:
        made = await c.call("create", game="crazy-eights", seats=2, bots=1, options={"target": 1})
        joined = await c.call("join", session=made["session"], name="ann")
    printed = play.resume_command(
        _args("--port", str(running.port)), made["session"], joined["token"]
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(elsewhere), "LANG": "C.UTF-8"}  # no venv
    with trio.fail_after(60):
        done = await trio.run_process(
            [*shlex.split(printed), "--auto", "--quiet"],
            cwd=elsewhere,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, (out, done.stderr.decode())
    assert f"you are seat {joined['seat']} again in session {made['session']}" in out
    assert "=== Game over ===" in out
    running.host.request_shutdown()


async def test_the_token_is_printed_as_soon_as_the_seat_is_joined(
    tmp_path, nursery, capsys, monkeypatch
):
    running = await start_host(nursery, tmp_path, registry=REGISTRY, turn_timeout=None)
    typing = trio.Event()

    async def waits(prompt: str) -> str:
        typing.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(play, "read_line", waits)
    args = _args("--port", str(running.port), "--seats", "2")
    async with trio.open_nursery() as n:
        n.start_soon(play.play, args)
        await typing.wait()
        n.cancel_scope.cancel()
    lines = capsys.readouterr().out.splitlines()
    sid = lines[0].split()[2]
    token = lines[1].split("token ", 1)[1]
    assert lines[1] == f"you are seat 0; token {token}"
    assert lines[2] == f"to take this seat back later: {args.resume_hint}"
    assert args.resume_hint == play.resume_command(args, sid, token)
    running.host.request_shutdown()


async def test_ctrl_c_while_the_join_is_answered_still_prints_the_token(
    tmp_path, nursery, capsys, monkeypatch
):
    """Ctrl-C right after ``created session``: the join on its way is answered first, so the
    seat the host gave is never left without its token; bye says how to take it back."""
    running = await start_host(nursery, tmp_path, registry=REGISTRY, turn_timeout=None)
    real_call = Client.call

    async def call(self: Client, op: str, **params: object) -> object:
        if op == "join":
            signal.raise_signal(signal.SIGINT)  # the player hits Ctrl-C as the join goes out
            await trio.testing.wait_all_tasks_blocked()  # and the client has seen it
        return await real_call(self, op, **params)

    monkeypatch.setattr(Client, "call", call)
    args = _args("--port", str(running.port), "--seats", "2")
    args.created = None
    with pytest.raises(BaseException) as caught:  # noqa: PT011 - trio wraps it in groups
        await play.play(args)
    assert isinstance(play._leaf(caught.value), KeyboardInterrupt)
    out = capsys.readouterr().out
    token = out.split("; token ", 1)[1].split()[0]
    assert args.resume_hint.endswith(f" --resume={token}")
    assert play.bye(args) == f"bye: your seat stays yours; resume it with: {args.resume_hint}"
    async with await Client.connect("127.0.0.1", running.port) as c:  # and the seat is there
        back = await c.call("resume", session=args.created, token=token)
        assert back["seat"] == 0
    running.host.request_shutdown()


async def test_ctrl_c_before_any_seat_is_taken_says_so(tmp_path, nursery, capsys, monkeypatch):
    running = await start_host(nursery, tmp_path, registry=REGISTRY, turn_timeout=None)
    real_call = Client.call

    async def call(self: Client, op: str, **params: object) -> object:
        got = await real_call(self, op, **params)
        if op == "games":
            signal.raise_signal(signal.SIGINT)
            await trio.sleep_forever()  # Ctrl-C ends it
        return got

    monkeypatch.setattr(Client, "call", call)
    args = _args("--port", str(running.port), "--seats", "2")
    args.created = None
    with pytest.raises(BaseException) as caught:  # noqa: PT011 - trio wraps it in groups
        await play.play(args)
    assert isinstance(play._leaf(caught.value), KeyboardInterrupt)
    assert args.resume_hint is None
    assert play.bye(args) == "bye: no seat was taken"
    args.created, args.port = "abc", 9000
    assert play.bye(args) == (
        "bye: no seat was taken; session abc waits for players:"
        f" {play.gamehost_command()} play --port 9000 --session abc"
    )
    running.host.request_shutdown()


# ---- undo by consent ------------------------------------------------------------------------
async def _until(c: Client, push: str, **match: object) -> dict:
    while True:
        p = await c.next_push()
        assert p is not None
        if p["push"] == push and all(p.get(k) == v for k, v in match.items()):
            return p


async def _ann_acted(bob: Client) -> dict:
    """The next action of seat 0 that Bob is shown."""
    while True:
        p = await _until(bob, "event", kind="action")
        if p["event"]["seat"] == 0:
            return p["event"]


async def test_play_answers_an_undo_when_asked_and_asks_one_with_undo(
    tmp_path, nursery, capsys, monkeypatch
):
    """Bob (a raw client, seat 1, first to act) plays, asks to take it back: ``gamehost play``
    asks Ann ``agree? (y/n)``; she refuses, then agrees. Then Ann types ``undo`` with nothing of
    hers to take back (told why), draws, ``undo`` again (refused: a draw), and moves; if that
    was a play, ``undo`` once more, and Bob agrees."""
    stdin = play._Stdin()
    stdin.started = True  # the test types: no thread reads the real stdin
    monkeypatch.setattr(play, "_stdin", stdin)
    asked = [trio.Event()]
    real_read_line = play.read_line

    async def read_line(prompt: str) -> str:
        if prompt.startswith("agree?"):
            asked[-1].set()
        return await real_read_line(prompt)

    monkeypatch.setattr(play, "read_line", read_line)
    took_back = trio.Event()
    real_event = play.Renderer.event

    def event(self: play.Renderer, push: dict) -> str | None:
        line = real_event(self, push)
        if line and line.startswith("  You took back"):
            took_back.set()
        return line

    monkeypatch.setattr(play.Renderer, "event", event)
    running = await start_host(nursery, tmp_path, registry=REGISTRY, turn_timeout=None)
    async with await Client.connect("127.0.0.1", running.port) as lobby:
        made = await lobby.call("create", game="crazy-eights", seats=2, options={"target": 30})
        sid = made["session"]
        ann = await lobby.call("join", session=sid, name="Ann", seat=0)
        await lobby.call("leave", session=sid)
    bob = await Client.connect("127.0.0.1", running.port)
    bob.start(nursery)
    await bob.call("join", session=sid, name="Bob", seat=1)
    args = _args("--port", str(running.port), "--session", sid, "--resume", ann["token"])
    playing = trio.CancelScope()

    async def run_play() -> None:
        with playing:
            await play.play(args)

    nursery.start_soon(run_play)
    await _until(bob, "presence", seat=0, reason="resumed")  # Ann is back
    turn = await _until(bob, "turn")  # Bob is first (the dealer's left)
    while not any(a["type"] == "play" for a in turn["legal"]):
        drew = await bob.call("act", session=sid, action={"type": "draw"}, seq=turn["seq"])
        turn = await _until(bob, "turn", seq=drew["seq"])
    card = next(a for a in turn["legal"] if a["type"] == "play")
    await bob.call("act", session=sid, action=card, seq=turn["seq"])
    for answer, outcome in (("n", "undo_refused"), ("y", "undo_done")):
        assert (await bob.call("undo", session=sid))["status"] == "asked"
        await asked[-1].wait()  # Ann is asked
        asked.append(trio.Event())
        stdin.send.send_nowait(answer)
        await _until(bob, outcome)
    turn = await _until(bob, "turn")
    await bob.call("act", session=sid, action=card, seq=turn["seq"])  # played again
    stdin.send.send_nowait("undo")  # Ann: the last action is Bob's
    stdin.send.send_nowait("draw")  # her move (typed ahead: it waits for the prompt)
    assert await _ann_acted(bob) == {"seat": 0, "action": {"type": "draw"}}
    stdin.send.send_nowait("undo")  # a draw is never taken back
    stdin.send.send_nowait("0")  # her next move: the first choice shown
    moved = await _ann_acted(bob)
    if moved["action"]["type"] == "play":
        stdin.send.send_nowait("undo")
        request = await _until(bob, "undo_asked")
        assert request["seat"] == 0
        await bob.call("undo_answer", session=sid, accept=True)
        await _until(bob, "undo_done")
        await took_back.wait()  # Ann's history says so
    playing.cancel()
    running.host.request_shutdown()
    out = capsys.readouterr().out
    label = play.Renderer("crazy-eights").action(card)  # an 8 also names its suit
    assert out.count(f"  Bob asked to take back {label} (you to agree)") == 2
    assert "asks to take back" not in out  # the event's line is the question: said once
    assert "  You refused: the move stands" in out and "  You agreed" in out
    assert f"  Bob took back {label}" in out
    assert "cannot undo: the last action is seat 1's" in out
    assert "cannot undo: that action revealed something hidden or random" in out
    if moved["action"]["type"] == "play":
        assert "asked: waiting for the others to agree" in out
        assert f"  You took back {play.Renderer('crazy-eights').action(moved['action'])}" in out
