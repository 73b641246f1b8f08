"""``gamehost bench --restart N``: the data dir it makes (unfinished sessions of every game,
written through the store, seats held by tokens it knows) and a run that resumes them."""

from __future__ import annotations

import argparse

import attrs
import pytest
import trio

import tools.bench
from host.net.session import hash_token
from host.plugins.registry import load_registry
from host.store.base import Conflict
from host.store.file import FileStore, fold_log
from host.table.engine import Record
from tests.tools.test_bench import bench_json
from tools.bench import RestartSeat, make_restart_data, run_restart

REGISTRY = load_registry()


async def test_the_restart_data_is_unfinished_sessions_of_every_game_with_known_tokens(
    tmp_path,
):
    made = await make_restart_data(tmp_path, 5, seed=3)
    store = FileStore(tmp_path)
    assert store.session_ids() == [f"r{i:05d}" for i in range(5)]
    games = sorted(REGISTRY.engines)
    assert [seats[0].game for seats in made] == [games[i % len(games)] for i in range(5)]
    for seats in made:
        sid, game = seats[0].session, seats[0].game
        records = [Record.from_json(r) for r in store.load(sid)]
        assert records[0].data["game"] == game and records[0].data["bots"] == []
        assert 40 <= len(records) <= 60
        taken = {r.data["seat"]: r.data for r in records if r.type == "seat_taken"}
        assert [s.seat for s in seats] == sorted(taken) == list(range(len(seats)))
        for s in seats:
            assert taken[s.seat]["token_hash"] == hash_token(s.token)
            assert taken[s.seat]["bot"] is False
        state = fold_log(store.path(sid), REGISTRY.engines[game], records)
        assert state.started and not state.ended
        assert all(r.type != "ended" for r in records)


def test_bench_restart_resumes_random_sessions_with_their_tokens():
    r = bench_json("--restart", "5", "--fsync", "never")
    assert r["restart_sessions"] == 5
    assert r["restart_games"] == sorted(REGISTRY.engines)
    assert r["restart_listening_s"] > 0
    assert 0 < r["restart_first_resume_s"] <= r["restart_all_resumes_s"]
    assert r["restart_resumes"] == 5  # 20 asked, only 5 sessions
    resumed = r["restart_resumed"]
    assert sorted(sid for sid, _ in resumed) == [f"r{i:05d}" for i in range(5)]
    assert all(0 <= seat < 4 for _, seat in resumed)


def restart_args(n: int) -> argparse.Namespace:
    return argparse.Namespace(restart=n, seed=7, fsync="never")


def test_every_resume_is_answered_with_the_seat_its_token_holds(monkeypatch):
    answers: list[tuple[RestartSeat, dict]] = []
    real = tools.bench._resume_all

    async def spy(port, picks, listening):
        times, replies = await real(port, picks, listening)
        answers.extend(zip(picks, replies, strict=True))
        return times, replies

    monkeypatch.setattr(tools.bench, "_resume_all", spy)
    r = run_restart(restart_args(25))
    assert r["restart_resumes"] == len(answers) == 20
    assert len({pick.session for pick, _ in answers}) == 20
    for pick, reply in answers:
        assert reply["ok"], reply
        assert reply["result"]["seat"] == pick.seat
        assert reply["result"]["seq"] >= 40
    assert [[p.session, p.seat] for p, _ in answers] == r["restart_resumed"]


def test_a_resume_answered_with_another_seat_fails_the_run(monkeypatch):
    async def swapped(data_dir, sessions, seed=1, records=50):
        made = await make_restart_data(data_dir, sessions, seed, records)
        # each seat is given its neighbour's token: the host answers with the neighbour's seat
        return [
            [attrs.evolve(s, token=seats[(s.seat + 1) % len(seats)].token) for s in seats]
            for seats in made
        ]

    monkeypatch.setattr(tools.bench, "make_restart_data", swapped)
    with pytest.raises(RuntimeError, match="answered with"):
        run_restart(restart_args(3))


def test_bench_restart_refuses_no_sessions():
    with pytest.raises(ValueError, match="--restart"):
        run_restart(restart_args(0))


def test_make_restart_data_refuses_an_existing_session(tmp_path):
    trio.run(make_restart_data, tmp_path, 1)
    with pytest.raises(Conflict, match="exists"):
        trio.run(make_restart_data, tmp_path, 1)
