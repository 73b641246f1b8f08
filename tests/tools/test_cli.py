"""The ``gamehost`` command line: every option checked, ``--version``, help without a command."""

from __future__ import annotations

import os
import socket

import pytest

from host.plugins.registry import load_registry
from host.store.file import FileStore
from tools.cli import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--port", "99999"], "argument --port: a port is 0..65535, not 99999"),
        (["serve", "--port", "-1"], "argument --port: a port is 0..65535, not -1"),
        (["serve", "--port", "http"], "argument --port: not an integer: 'http'"),
        (["serve", "--bot-delay", "-1"], "argument --bot-delay: seconds must be"),
        (["serve", "--turn-timeout", "nan"], "argument --turn-timeout: seconds must be"),
        (["serve", "--turn-timeout", "inf"], "argument --turn-timeout: seconds must be"),
        (["serve", "--turn-timeout", "-1"], "argument --turn-timeout: seconds must be"),
        (["serve", "--abandon-after", "-5"], "argument --abandon-after: seconds must be"),
        (["serve", "--idle-timeout", "x"], "argument --idle-timeout: not a number"),
        (["serve", "--keepalive", "-1"], "argument --keepalive: seconds must be"),
        (["serve", "--ping-after", "x"], "argument --ping-after: not a number"),
        (["serve", "--ping-timeout", "inf"], "argument --ping-timeout: seconds must be"),
        (["serve", "--create-burst", "-1"], "argument --create-burst: must be at least 1"),
        (["serve", "--max-sessions", "0"], "argument --max-sessions: must be at least 1"),
        (["serve", "--outbox-bytes", "1"], "argument --outbox-bytes: must be at least 262144"),
        (["serve", "--max-connections", "0"], "argument --max-connections: must be at least 1"),
        (["serve", "--create-rate", "0"], "argument --create-rate: must be more than 0"),
        (["serve", "--max-records", "-5"], "argument --max-records: must be at least 1"),
        (["serve", "--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
        (["serve", "--bind", "no-such-host.invalid"], "argument --bind: cannot resolve"),
        (["play", "--port", "70000"], "argument --port: a port is 0..65535"),
        (["play", "--seats", "0"], "argument --seats: must be at least 1"),
        (["play", "--bots", "-1"], "argument --bots: must be 0 or more"),
        (["replay", "x.jsonl", "--at", "-1"], "argument --at: must be 0 or more"),
        (["replay", "x.jsonl", "--width", "0"], "argument --width: must be at least 1"),
        (["demo", "--games", "0"], "argument --games: must be at least 1"),
    ],
)
def test_a_bad_value_is_one_error_line_and_exit_status_2(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err  # the error alone, not argparse's whole usage before it
    assert err[0].startswith(f"gamehost {argv[0]}: error: {says}")


def test_version_lists_the_host_and_every_installed_game(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("gamehost ") and lines[0].split()[1][0].isdigit()
    games = load_registry().games
    assert len(lines) == 1 + len(games)
    for gid, line in zip(sorted(games), lines[1:], strict=True):
        assert line.split()[:2] == [gid, games[gid].info.version]


def test_gamehost_alone_prints_its_help_and_exits_0(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: gamehost")
    for command in ("serve", "play", "replay", "bench", "demo", "--version"):
        assert command in out


def test_a_host_that_cannot_start_says_why_in_one_line(tmp_path, capsys, monkeypatch):
    """A data dir that is a file, or one another host holds: one error line, exit status 2."""
    # serve would point the process's logging at this test's captured stderr, which is closed
    # once the test ends: later tests would log into a closed file
    monkeypatch.setattr("host.cli.logs.configure", lambda *args, **kw: None)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    assert main(["serve", "--port", "0", "--data-dir", str(not_a_dir)]) == 2
    (line,) = _errors(capsys.readouterr().err)
    assert "Not a directory" in line
    held = FileStore(tmp_path / "data", exclusive=True)  # as a running host holds it
    assert main(["serve", "--port", "0", "--data-dir", str(tmp_path / "data")]) == 2
    (line,) = _errors(capsys.readouterr().err)
    assert "in use by another host" in line
    os.close(held._lock_fd)  # the lock goes with the descriptor, as with a host's process
    with socket.socket() as taken:  # a port another program listens on
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path / "d2")]) == 2
    (line,) = _errors(capsys.readouterr().err)
    assert line == (
        f"gamehost serve: error: cannot listen on 127.0.0.1 port {port}: Address already in use"
    )


DUPLICATE = """
from host.game import hookimpl
from plugins.crazy_eights import CrazyEights


@hookimpl
def gamehost_register_games():
    return [CrazyEights()]
"""


def test_a_plugin_whose_game_is_installed_is_one_error_line(tmp_path, capsys, monkeypatch):
    """``--plugin`` adding a game id that is installed already, or naming an installed plugin
    module, or one that does not import: one ``gamehost serve: error:`` line, exit status 2."""
    monkeypatch.setattr("host.cli.logs.configure", lambda *args, **kw: None)
    (tmp_path / "dup_c8_plugin.py").write_text(DUPLICATE)
    (tmp_path / "hookless_plugin.py").write_text("def gamehost_register_games():\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = str(tmp_path / "data")
    for module, says in (
        ("dup_c8_plugin", "game id 'crazy-eights' is registered twice"),
        ("hookless_plugin", "hookless_plugin registers no games"),
        ("plugins.crazy_eights", "a plugin module is loaded twice"),
        ("no_such_plugin_module", "No module named 'no_such_plugin_module'"),
    ):
        assert main(["serve", "--port", "0", "--data-dir", data, "--plugin", module]) == 2
        (line,) = _errors(capsys.readouterr().err)
        assert line.startswith("gamehost serve: error: --plugin: ") and says in line, line


def _errors(err: str) -> list[str]:
    """The error lines among the host's output (its JSON log lines aside)."""
    return [line for line in err.splitlines() if not line.startswith("{")]


def test_serve_starts_without_importing_the_tools():
    """``gamehost serve`` builds only its own parser: the other commands' modules (bench,
    chaos, ...) are not imported, so a restarted host listens sooner."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tools import cli\n"
        "try:\n"
        "    cli.main(['serve', '--port', 'not-a-port'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "tools = ('tools.bench', 'tools.chaos', 'tools.play')\n"
        "print(sorted(m for m in tools if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_tool_starts_without_importing_the_other_tools_or_the_server(tmp_path):
    """``gamehost replay`` imports the replay tool alone, and not the host's server (a third of
    a second of start-up); ``gamehost --help`` still lists every command."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tools import cli\n"
        f"status = cli.main(['replay', '--verify', {str(tmp_path / 'none.jsonl')!r}])\n"
        "heavy = ('tools.bench', 'tools.chaos', 'tools.play', 'host.net.server')\n"
        "print(status, sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "2 []"
    assert "No such file" in out.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "tools.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("serve", "play", "replay", "check", "bench", "demo", "chaos", "db", "schema"):
        assert f"    {command} " in listed


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], (30.0, 30.0, 30.0)),
        (["--keepalive", "12", "--ping-after", "5", "--ping-timeout", "7.5"], (12.0, 5.0, 7.5)),
        (["--keepalive", "0", "--ping-after", "0", "--ping-timeout", "0"], (None, None, None)),
    ],
)
def test_the_liveness_flags_reach_the_host_config(argv, expected, tmp_path, monkeypatch):
    """``--keepalive``, ``--ping-after`` and ``--ping-timeout`` (0: off, None in the config)."""
    monkeypatch.setattr("host.cli.logs.configure", lambda *args, **kw: None)
    monkeypatch.setattr("host.net.collector.tune", lambda mode: None)  # not this process's
    ran = []
    monkeypatch.setattr("host.cli.trio.run", lambda fn, config, *rest: ran.append(config))
    assert main(["serve", "--port", "0", "--data-dir", str(tmp_path), *argv]) == 0
    (config,) = ran
    assert (config.keepalive, config.ping_after, config.ping_timeout) == expected


TOY_PLUGIN = """from host.game import hookimpl
from tests.toy import Plugin


@hookimpl
def gamehost_register_games():
    return Plugin().gamehost_register_games()
"""


def test_the_log_tools_take_plugin_as_serve_does(tmp_path, capsys, monkeypatch):
    """``schema``, ``check`` and ``replay`` load a game that is not installed from
    ``--plugin MODULE`` (a module of the current folder); without it, or with a module that
    does not import, they say so (exit status 2 for a bad ``--plugin``)."""
    from host.store.base import encode_lines
    from host.table.local import play_local
    from tests.toy import HighCard

    (tmp_path / "toy_cli_plugin.py").write_text(TOY_PLUGIN)
    monkeypatch.chdir(tmp_path)
    assert main(["schema", "--game", "high-card"]) == 2
    assert "no game 'high-card'" in capsys.readouterr().err
    assert main(["schema", "--game", "high-card", "--plugin", "toy_cli_plugin"]) == 0
    assert '"id": "high-card"' in capsys.readouterr().out
    sessions = tmp_path / "data" / "sessions"
    sessions.mkdir(parents=True)
    records = play_local(HighCard(), {}, 2, seed=b"t" * 32)[1]
    log = sessions / "toylog.jsonl"
    log.write_bytes(b"".join(encode_lines([r.to_json() for r in records])))
    assert main(["replay", "--verify", str(log)]) == 2
    assert "give the same --plugin here" in capsys.readouterr().err
    assert main(["replay", "--verify", str(log), "--plugin", "toy_cli_plugin"]) == 0
    assert capsys.readouterr().out.startswith("ok: toylog.jsonl: ")
    assert main(["check", "--data-dir", str(tmp_path / "data"), "--plugin", "toy_cli_plugin"]) == 0
    assert "not folded" not in capsys.readouterr().out
    assert main(["check", "--data-dir", str(tmp_path / "data"), "--plugin", "no_such_mod"]) == 2
    (line,) = _errors(capsys.readouterr().err)
    assert line == "gamehost check: error: --plugin: No module named 'no_such_mod'"
