"""``clients/js/play.mjs``, the JavaScript client (Node's standard library only), against an
in-process host: it plays every installed game with random legal moves, drops a seat's
connection mid-game and resumes it, checks seq gaplessness, validates every line it receives
against ``gamehost schema --protocol`` and every game value against ``gamehost schema``, and
draws whose turn it is and the deadline from view pushes alone. CI has node; without it these
tests are skipped."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import trio

from host.plugins.contract import game_schema
from host.plugins.registry import load_registry
from protocol.schema import protocol_schema
from tests.conftest import start_host

NODE = shutil.which("node")
CLIENT = Path(__file__).resolve().parents[2] / "clients" / "js" / "play.mjs"
REGISTRY = load_registry()

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def contract_file(tmp_path: Path) -> Path:
    """What ``gamehost schema`` prints, as a file."""
    path = tmp_path / "schema.json"
    games = {gid: game_schema(g) for gid, g in sorted(REGISTRY.games.items())}
    path.write_text(json.dumps({"games": games}))
    return path


def protocol_file(tmp_path: Path) -> Path:
    """What ``gamehost schema --protocol`` prints, as a file."""
    path = tmp_path / "protocol.json"
    path.write_text(json.dumps(protocol_schema()))
    return path


async def run_client(
    tmp_path: Path, schema: Path, *args: str, protocol: Path | None = None, **config: object
) -> trio.CompletedProcess:
    protocol = protocol or protocol_file(tmp_path)
    async with trio.open_nursery() as n:
        host = await start_host(n, tmp_path / "data", REGISTRY, **config)
        assert NODE is not None
        cmd = [NODE, str(CLIENT), "--port", str(host.port), "--schema", str(schema)]
        cmd += ["--protocol", str(protocol), *args]
        done = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
        host.host.request_shutdown()
    return done


def count(what: str, out: str) -> int:
    """The figure before ``what`` in the client's ``ok:`` line."""
    m = re.search(rf"(\d+) {what}", out)
    assert m, f"no {what!r} in {out}"
    return int(m.group(1))


async def test_the_js_client_plays_every_game_resumes_and_finds_no_problem(tmp_path: Path) -> None:
    """With view pushes asked for: every change's view comes before its turn or ended push,
    also after the resume; whose turn and the deadline are drawn from them (a turn timer runs,
    so deadlines are not null) and every turn push agrees; every line fits the protocol schema;
    the dropped seat is seen to come back."""
    schema = contract_file(tmp_path)
    done = await run_client(
        tmp_path, schema, "--games", "1", "--seed", "3", "--view-pushes", "--show",
        turn_timeout=60.0,
    )  # fmt: skip
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, out + err
    n = len(REGISTRY.games)
    assert f"ok: {n} sessions" in out
    assert f"{n} resumes after a dropped connection" in out
    for gid in REGISTRY.games:
        assert f"{gid} #1 " in out
    views = count("view pushes", out)
    assert views > 0 and count("tables drawn from them", out) == views
    assert count("lines checked against the protocol schema", out) > count("pushes in", out)
    assert count("presence pushes", out) >= 2 * n  # at least the drop and the return, seen
    assert re.search(r"to act: js\d; [56]\d\.\d s left \(until 20\d\d-", out), out  # drawn
    assert "(away)" in out  # the dropped seat, drawn as away until it resumed


async def test_the_js_client_fails_on_a_line_the_protocol_schema_does_not_allow(
    tmp_path: Path,
) -> None:
    """The protocol check is real: with ``deadline`` taken out of the turn push's schema, the
    first turn push is refused and the run fails, naming the field."""
    schema = contract_file(tmp_path)
    protocol = protocol_schema()
    del protocol["$defs"]["push.turn"]["properties"]["deadline"]
    path = tmp_path / "protocol.json"
    path.write_text(json.dumps(protocol))
    done = await run_client(tmp_path, schema, "--game", "crazy-eights", protocol=path)
    err = done.stderr.decode()
    assert done.returncode == 1
    assert "breaks the protocol schema (push)" in err and "$.deadline: not allowed" in err


async def test_the_js_client_fails_on_a_value_the_contract_does_not_allow(tmp_path: Path) -> None:
    """The client really checks: with ``hand`` taken out of the published view, the first
    snapshot is refused and the run fails, naming the field."""
    schema = contract_file(tmp_path)
    published = json.loads(schema.read_text())
    del published["games"]["crazy-eights"]["view"]["seat"]["properties"]["hand"]
    schema.write_text(json.dumps(published))
    done = await run_client(tmp_path, schema, "--game", "crazy-eights")
    err = done.stderr.decode()
    assert done.returncode == 1
    assert "breaks the published contract: $.hand: not allowed" in err


async def test_the_js_client_answers_the_hosts_pings(tmp_path: Path) -> None:
    """Against a host that pings after 50 ms of silence and hangs up 0.4 s later: the spectator
    says nothing after its ``watch`` while the bot takes 0.1 s a move through a whole deal (at
    least 6 moves), so only answering every ping keeps it on the line (the client fails when
    it is closed as ``unresponsive``)."""
    schema = contract_file(tmp_path)
    done = await run_client(
        tmp_path,
        schema,
        "--game",
        "crazy-eights",
        "--seats",
        "2",
        "--options",
        '{"target": 1}',
        "--timeout",
        "60",
        ping_after=0.05,
        ping_timeout=0.4,
        bot_delay=0.1,
    )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, out + err
    assert "ok: 1 sessions" in out
    pings = re.search(r", (\d+) pings answered", out)
    assert pings and int(pings.group(1)) > 0, out


def test_the_js_client_prints_its_usage_for_help_and_for_a_bad_option() -> None:
    import subprocess

    assert NODE is not None
    shown = subprocess.run([NODE, str(CLIENT), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: node play.mjs --port PORT")
    bad = subprocess.run([NODE, str(CLIENT), "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "Unknown option '--bogus'" in bad.stderr and "usage: node play.mjs" in bad.stderr
