"""A session that spans an event-schema bump (tests/draw.py: ``drew`` holds ``card`` in v1,
``cards`` in v2): begun on a host with v1 code, finished on a host with v2 code on the same data
dir. Resume, ``log``, ``replay``, ``verify`` and ``fork`` (the ops and ``gamehost replay``) read
its v1 events through the game's ``upcast``; ``Engine.verify`` compares a recorded event as the
current code reads it, and still reports an event that says something else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

import tools.plugins
from host.plugins.registry import Registry, load_registry
from host.store.file import read_log
from host.table.engine import Engine, Record
from host.table.history import verify_log
from host.table.local import play_local, roundtrip
from tests.conftest import start_host
from tests.draw import DrawV1, DrawV2, PluginV1, PluginV2
from tools.cli import main

ACTIONS = 6  # two seats, three draws each
ON_V1 = 3  # the actions played before the host restarts on v2 code

V1, V2 = Engine(DrawV1()), Engine(DrawV2())


def registry(plugin: Any) -> Registry:
    return load_registry([("draw", plugin)], entrypoints=False)


# -- Engine.verify on a log that mixes v1 and v2 records -------------------------------------


def mixed_log(seed: bytes, on_v1: int) -> list[Record]:
    """A Draw session played by bots, its first ``on_v1`` actions (and the deal) on v1 code,
    the rest on v2 code (which folds the v1 records from the log, as a restarted host does),
    as read back from its log."""
    header = V1.header("mixed", V1.codec.options_from_wire({}, 2), 2, (0, 1), seed)
    records, state = [header], V1.initial(header)
    for seat in (0, 1):
        new, state = V1.seat_step(state, seat, f"bot{seat}", True, None)
        records += new
    engine, played = V1, 0
    while not state.ended:
        if played == on_v1:
            engine = V2
            records = roundtrip(records)
            state = V2.rebuild(records)
        new, state = engine.bot_step(state, engine.bot_seat(state))
        records += new
        played += 1
    return roundtrip(records)


def versions(records: list[Record]) -> list[int]:
    return [r.data["v"] for r in records if r.type == "event"]


def test_a_mixed_log_verifies_on_the_new_code_and_not_on_the_old():
    records = mixed_log(b"m" * 32, ON_V1)
    assert versions(records) == [1] * (1 + ON_V1) + [2] * (ACTIONS - ON_V1)
    drew = [r.data["event"] for r in records if r.type == "event"][1:]
    assert "card" in drew[0] and "cards" in drew[-1]
    assert V2.verify(records) is None
    assert verify_log(V2, records) is None
    first_v2 = next(r.seq for r in records if r.type == "event" and r.data["v"] == 2)
    seq, why = V1.verify(records)  # v1 code cannot read v2 events: reported, not raised
    assert seq == first_v2 and "v2" in why
    last = [r for r in records if r.type == "event"][-1]  # a v2 event that says another card
    last.data["event"]["cards"] = ["2C"] if last.data["event"]["cards"] != ["2C"] else ["3C"]
    assert V2.verify(records)[0] == last.seq


@given(
    seed=st.binary(min_size=32, max_size=32),
    on_v1=st.integers(0, ACTIONS),
    pick=st.integers(0, ACTIONS),
)
def test_a_changed_v1_event_is_reported_at_its_seq_however_the_log_is_split(seed, on_v1, pick):
    records = mixed_log(seed, on_v1)
    assert V2.verify(records) is None
    old = [r for r in records if r.type == "event" and "card" in r.data["event"]]
    assert len(old) == on_v1
    if not old:
        return
    bad = old[pick % len(old)]
    card = bad.data["event"]["card"]
    bad.data["event"]["card"] = "2C" if card != "2C" else "3C"
    seq, why = V2.verify(records)
    assert seq == bad.seq
    assert "recorded" in why and "read as" in why  # the v1 record and what it upcasts to


def test_a_v2_event_labelled_v1_is_reported():
    records = mixed_log(b"l" * 32, 0)
    last = [r for r in records if r.type == "event"][-1]
    last.data["v"] = 1  # read as v1, it has no "card": the upcast makes it a draw of no card
    seq, why = V2.verify(records)
    assert seq == last.seq and "recorded" in why


def test_an_upcast_that_raises_is_a_difference_not_a_crash():
    class Broken(DrawV2):
        def upcast(self, event: dict, version: int) -> dict:
            raise KeyError("no idea")

    records = mixed_log(b"b" * 32, 2)
    first_v1 = next(r.seq for r in records if r.type == "event")
    seq, why = Engine(Broken()).verify(records)
    assert seq == first_v1 and "cannot read" in why and "KeyError" in why


def test_verify_upcasts_only_the_records_of_another_version():
    calls: list[int] = []

    class Counting(DrawV2):
        def upcast(self, event: dict, version: int) -> dict:
            calls.append(version)
            return super().upcast(event, version)

    engine = Engine(Counting())
    assert engine.verify(mixed_log(b"c" * 32, ACTIONS)) is None  # all on v1
    assert calls == [1] * (1 + ACTIONS)
    calls.clear()
    assert engine.verify(mixed_log(b"c" * 32, 0)[:4]) is None  # the v1 deal alone
    assert calls == [1]
    calls.clear()
    _, records = play_local(DrawV2(), {}, 2, seed=b"n" * 32)
    assert engine.verify(roundtrip(records)) is None and calls == []  # no decoding at all


# -- over TCP: a host on v1 code, then a host on v2 code on the same data dir ------------------


async def act(c: Any, sid: str, seq: int) -> int:
    return (await c.call("act", session=sid, action={"type": "draw"}, seq=seq))["seq"]


async def play_to_the_end(clients: tuple[Any, Any], sid: str) -> dict[str, Any]:
    """Each seat's client draws in its turns until the session ends; the last snapshot."""
    while True:
        snap = await clients[0].call("view", session=sid)
        if snap["ended"]:
            return snap
        (seat,) = snap["to_act"]
        await act(clients[seat], sid, snap["seq"])


async def play_across_versions(data_dir: Path) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A Draw session: :data:`ON_V1` actions on a v1 host, then a v2 host on the same data dir
    resumes both seats and finishes it, and forks it after its first v2 cause; the session id,
    the seats' tokens and what the v2 host answered (``resumed``: seat 0's resume, then ``log``
    as a spectator and as the truth, ``replay`` at the end, ``verify``, ``fork``, and the
    fork's last snapshot and ``verify`` once played to its end)."""
    async with trio.open_nursery() as n:
        first = await start_host(n, data_dir, registry(PluginV1()))
        a, b = await first.client(), await first.client()
        sid = (await a.call("create", game="draw", seats=2))["session"]
        tokens = {"0": (await a.call("join", session=sid))["token"]}
        joined = await b.call("join", session=sid)
        tokens["1"] = joined["token"]
        seq = joined["seq"]  # the deal
        for i in range(ON_V1):
            seq = await act((a, b)[i % 2], sid, seq)
        first.host.request_shutdown()
    async with trio.open_nursery() as n:
        second = await start_host(n, data_dir, registry(PluginV2()))
        a, b = await second.client(), await second.client()
        seen: dict[str, Any] = {"resumed": await a.call("resume", session=sid, token=tokens["0"])}
        await b.call("resume", session=sid, token=tokens["1"])
        # the v2 host released both seats (their connections went with the v1 host), then
        # seat 0 was resumed: three presence records after the last v1 action
        assert seen["resumed"]["seq"] == seq + 3 and seen["resumed"]["to_act"] == [ON_V1 % 2]
        last = (await play_to_the_end((a, b), sid))["seq"]
        seen["log"] = await a.call("log", session=sid)
        seen["truth"] = await a.call("log", session=sid, truth=True)
        seen["replay"] = await a.call("replay", session=sid, seq=last, truth=True)
        seen["verify"] = await a.call("verify", session=sid)
        # the end of the first cause played on v2 code: v1 and v2 events before it
        at = next(r["seq"] for r in seen["truth"]["records"] if r.get("v") == 2)
        fork = seen["fork"] = await a.call("fork", session=sid, seq=at)
        c, d = await second.client(), await second.client()
        await c.call("resume", session=fork["session"], token=fork["tokens"]["0"])
        await d.call("resume", session=fork["session"], token=fork["tokens"]["1"])
        seen["fork_end"] = await play_to_the_end((c, d), fork["session"])
        seen["fork_verify"] = await c.call("verify", session=fork["session"])
        second.host.request_shutdown()
    return sid, tokens, seen


def events_of(path: Path) -> list[dict[str, Any]]:
    """The event records of a log, without their ``ts`` (the store's stamp)."""
    return [
        {k: v for k, v in r.items() if k != "ts"} for r in read_log(path) if r["type"] == "event"
    ]


async def test_a_session_begun_on_v1_code_is_finished_read_and_verified_on_v2(tmp_path):
    sid, _, seen = await play_across_versions(tmp_path)
    log = read_log(tmp_path / "sessions" / f"{sid}.jsonl")
    events = events_of(tmp_path / "sessions" / f"{sid}.jsonl")
    written = [1] * (1 + ON_V1) + [2] * (ACTIONS - ON_V1)
    assert [r["v"] for r in events] == written  # each as written: never rewritten
    assert log[-1]["type"] == "ended"
    # resume on v2 code: the state folded from v1 events (seat 0 holds its v1 draws)
    v1_draws = [r["event"] for r in events[1 : 1 + ON_V1]]
    assert seen["resumed"]["view"]["hands"][0] == [e["card"] for e in v1_draws if e["seat"] == 0]
    # log: the truth as written; a spectator's records as the current code reads them
    assert [r for r in seen["truth"]["records"] if r["type"] == "event"] == [
        r for r in log if r["type"] == "event"
    ]
    shown = [r for r in seen["log"]["records"] if r["type"] == "event"]
    assert [r["v"] for r in shown] == [2] * len(events)
    assert [r["event"] for r in shown] == [{"type": "shuffled", "stock": None}] + [
        {"type": "drew", "seat": r["event"]["seat"], "cards": [None]} for r in events[1:]
    ]
    # replay: the whole truth at the end, the v1 cards in their v2 places
    cards = [r["event"]["card"] if r["v"] == 1 else r["event"]["cards"][0] for r in events[1:]]
    state = seen["replay"]["state"]
    assert state["hands"] == [cards[0::2], cards[1::2]] and state["turn"] == ACTIONS
    # verify: ok, and no warning (the rules' version is the same)
    assert seen["verify"] == {
        "ok": True,
        "records": len(log),
        "seq": None,
        "explanation": None,
        "warning": None,
    }
    # fork across the bump: it loads, plays on to its end and verifies
    fork = seen["fork"]
    assert fork["forked_from"] == {"session": sid, "seq": events[1 + ON_V1]["seq"]}
    assert seen["fork_end"]["ended"] and seen["fork_end"]["outcome"] is not None
    # the same play, and both seats' resumes of the fork (two seat_held records more)
    assert seen["fork_verify"]["ok"] is True and seen["fork_verify"]["records"] == len(log) + 2
    forked = events_of(tmp_path / "sessions" / f"{fork['session']}.jsonl")
    assert [r["v"] for r in forked] == written
    assert forked[: 2 + ON_V1] == events[: 2 + ON_V1]  # the copied records, as written


async def play_fork(data_dir: Path, fork: str, tokens: dict[str, str]) -> tuple[dict, dict]:
    """A v2 host on ``data_dir`` (which picks up the log of ``fork``); both seats resume it
    with ``tokens`` and play it to its end: the last snapshot and the ``verify`` answer."""
    async with trio.open_nursery() as n:
        running = await start_host(n, data_dir, registry(PluginV2()))
        c, d = await running.client(), await running.client()
        await c.call("resume", session=fork, token=tokens["0"])
        await d.call("resume", session=fork, token=tokens["1"])
        end = await play_to_the_end((c, d), fork)
        verified = await c.call("verify", session=fork)
        running.host.request_shutdown()
    return end, verified


def test_gamehost_replay_verifies_and_forks_a_log_that_spans_the_bump(
    tmp_path, monkeypatch, capsys
):
    sid, tokens, _ = trio.run(play_across_versions, tmp_path)
    monkeypatch.setattr(tools.plugins, "registry_with", lambda modules: registry(PluginV2()))
    path = tmp_path / "sessions" / f"{sid}.jsonl"
    assert main(["replay", "--verify", str(path)]) == 0
    out = capsys.readouterr()
    assert out.out == f"ok: {path.name}: {len(read_log(path))} records replay to the same events\n"
    assert out.err == ""
    assert main(["replay", str(path), "--as", "0", "--width", "1000", "--raw"]) == 0  # the log
    timeline = capsys.readouterr().out
    assert timeline.count('"cards":[null]') == ACTIONS // 2  # seat 1's draws, v1 ones upcast
    # a fork after the first v2 cause, into the log's own folder (where a host finds it)
    at = next(r["seq"] for r in read_log(path) if r.get("v") == 2)
    assert main(["replay", str(path), "--fork-at", str(at)]) == 0
    fork = capsys.readouterr().out.rsplit("(session ", 1)[1].rstrip(")\n")
    fork_path = path.parent / f"{fork}.jsonl"
    assert [r["v"] for r in events_of(fork_path)] == [1] * (1 + ON_V1) + [2]
    assert main(["replay", "--verify", str(fork_path)]) == 0
    capsys.readouterr()
    end, verified = trio.run(play_fork, tmp_path, fork, tokens)  # the fork keeps the seats
    assert end["ended"] and verified["ok"] is True
    assert main(["replay", "--verify", str(fork_path)]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {fork_path.name}:")
