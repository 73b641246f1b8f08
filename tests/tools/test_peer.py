"""``gamehost bench --peer boardgameio``: a peer game server measured beside the host.

The peer is installed from the npm registry on first use (``.ci/run`` installs Node.js and npm);
the whole run is one test, so the package is installed once per test run.
"""

from __future__ import annotations

import shutil

import pytest

from tests.tools.test_bench import bench_json, needs_crazy_eights
from tools import peer


@needs_crazy_eights
def test_bench_measures_boardgameio_playing_the_same_game_beside_the_host(tmp_path, monkeypatch):
    cache = tmp_path / "peers"
    r = bench_json(
        "--sessions", "2", "--seconds", "4", "--all-clients",
        "--peer", "boardgameio", "--peer-cache", str(cache),
    )  # fmt: skip
    assert "peer_error" not in r, r.get("peer_error")
    assert r["peer"] == "boardgameio" and r["peer_version"] == peer.BOARDGAMEIO
    assert r["peer_moves"] > 0 and r["peer_seconds"] >= 4
    assert r["peer_moves_per_s"] == pytest.approx(r["peer_moves"] / r["peer_seconds"])
    # the peer's Crazy Eights is played to its end: a match needs a winner, so its rules end
    assert r["peer_matches"] >= 2 and r["peer_matches_ended"] >= 1
    assert r["peer_cpu_s"] > 0
    assert r["peer_cpu_per_move_ms"] == pytest.approx(r["peer_cpu_s"] * 1000 / r["peer_moves"])
    assert 0 < r["peer_rtt_p50_ms"] <= r["peer_rtt_p99_ms"] <= r["peer_rtt_p999_ms"]
    assert r["peer_peak_rss_mib"] > 0
    assert r["cpu_per_move_vs_peer"] == pytest.approx(
        r["host_cpu_per_action_ms"] / r["peer_cpu_per_move_ms"]
    )
    # the project's JavaScript is what ran, and the summary says what was measured
    assert (cache / "boardgameio" / "load.js").read_bytes() == (
        peer.SOURCES / "boardgameio" / "load.js"
    ).read_bytes()
    text = "\n".join(peer.summary(r))
    assert f"boardgame.io {peer.BOARDGAMEIO}" in text and "per move" in text

    # installed, it needs node but not npm
    only_node = tmp_path / "bin"
    only_node.mkdir()
    (only_node / "node").symlink_to(shutil.which("node"))
    monkeypatch.setenv("PATH", str(only_node))
    assert peer.install("boardgameio", cache) == cache / "boardgameio"
    # a damaged install is installed afresh (npm alone calls it up to date)
    monkeypatch.undo()
    installed = cache / "boardgameio" / "node_modules" / "boardgame.io" / "package.json"
    installed.write_text("{ damaged")
    said: list[str] = []
    peer.install("boardgameio", cache, said.append)
    assert peer._installed_version(cache / "boardgameio", "boardgame.io") == peer.BOARDGAMEIO
    assert said and "installing boardgame.io" in said[0]


def test_bench_refuses_a_peer_without_every_seat_a_client(capsys):
    from tools.cli import main

    assert main(["bench", "--peer", "boardgameio"]) == 2
    assert "--all-clients" in capsys.readouterr().err
    assert main(["bench", "--peer", "boardgameio", "--all-clients", "--game", "high-low"]) == 2
    err = capsys.readouterr().err
    assert "--game is high-low" in err and "--all-clients" not in err.split(":", 2)[2]
    assert main(["bench", "--peer", "boardgameio", "--idle", "5"]) == 2
    assert "not with --stall, --restart or --idle" in capsys.readouterr().err


def test_a_peer_without_node_is_reported_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no node, no npm
    with pytest.raises(RuntimeError, match="needs Node.js"):
        peer.install("boardgameio", tmp_path / "peers")
    assert not (tmp_path / "peers").exists()
    assert peer.summary({"peer_error": "x"}) == ["peer: not measured: x"]


def test_an_unknown_peer_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown peer"):
        peer.install("nakama", tmp_path)


def test_the_peer_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert peer.cache_dir() == tmp_path / "gamehost" / "peers"
    assert peer.cache_dir(str(tmp_path / "x")) == tmp_path / "x"


def test_a_peer_cache_that_cannot_be_written_is_said_before_the_host_runs(tmp_path, capsys):
    from tools.cli import main

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    argv = ["bench", "--all-clients", "--sessions", "1", "--seconds", "60"]
    assert main([*argv, "--peer", "boardgameio", "--peer-cache", str(blocker)]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # no host was measured (a minute) before the refusal
    assert f"cannot use {blocker}" in err and "--peer-cache" in err


@needs_crazy_eights
def test_a_peer_that_could_not_be_measured_prints_the_host_and_exits_1(monkeypatch, capsys):
    from tools.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("the boardgameio server exited (status 1) before it listened")

    monkeypatch.setattr(peer, "install", lambda *args, **kwargs: None)
    monkeypatch.setattr(peer, "run_peer", broken)
    argv = ["bench", "--all-clients", "--sessions", "2", "--seconds", "1", "--peer", "boardgameio"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "actions/s" in out and "peer: not measured: the boardgameio server exited" in out
    assert "the peer was not measured" in err
