"""``gamehost demo`` names the first real error of a failed session and the session it hit."""

from __future__ import annotations

import argparse

import trio

from tests.conftest import toy_registry
from tools import demo
from tools.client import Client


async def _failing_session(host, port, game, seats, bots, rng):
    async with await Client.connect(host, port) as c:
        await c.call("create", game=game, seats=seats, bots=bots, options={})

    async def boom() -> None:
        raise ValueError("the plugin said no")

    async def wait() -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as n:  # a real nursery: the error arrives grouped
        n.start_soon(wait)
        n.start_soon(boom)
    raise AssertionError("unreachable")


def test_a_failing_session_is_reported_by_its_cause_and_session(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo, "load_registry", toy_registry)
    monkeypatch.setattr(demo, "play_session", _failing_session)
    args = argparse.Namespace(data_dir=tmp_path, games=1, port=0, fsync="never", seed=1)
    assert demo.main(args) == 1
    out = capsys.readouterr().out
    (failed,) = [line for line in out.splitlines() if "FAILED" in line]
    (log,) = (tmp_path / "sessions").glob("*.jsonl")
    assert failed.strip() == (
        f"FAILED high-card seats=2 (session {log.stem}): ValueError: the plugin said no"
    )
    assert "Trio nursery" not in out


def test_first_error_skips_groups_and_cancellations():
    inner = KeyError("k")
    group = BaseExceptionGroup("outer", [ExceptionGroup("mid", [inner])])
    assert demo.first_error(group) is inner
    assert demo.describe_error(ValueError("v")) == "ValueError: v"
