"""The PostgreSQL store's tools and flags: ``db init``, ``export``, ``import``, ``replay --store``,
``serve --store`` (in process, and as a user starts it: a subprocess that fails to start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import psycopg
import pytest
import trio

from host.plugins.registry import load_registry
from host.store.base import body_of, checksum
from host.store.file import FileStore
from host.table.local import play_local
from tests import pg
from tests.conftest import start_host
from tests.host.test_server import new_session, watch_to_end
from tests.host.test_store import rec
from tests.host.test_store_contract import ODD_VALUES
from tools.cli import main

REGISTRY = load_registry()


async def cli(*argv: str) -> int:
    """``gamehost ...`` in a worker thread (the tools run their own ``trio.run``)."""
    return await trio.to_thread.run_sync(main, list(argv))


async def write_logs(folder: Path) -> list[Path]:
    """Logs as a host's file store writes them: a real Crazy Eights game and odd JSON values."""
    engine = REGISTRY.engines["crazy-eights"]
    _, game = play_local(engine.game, {"target": 1}, 3, seed=b"r" * 32, engine=engine)
    store = FileStore(folder, logs_in_root=True)
    async with trio.open_nursery() as n:
        await n.start(store.run)
        await store.create("game1", [r.to_json() for r in game])
        await store.create("odd", [rec(0), rec(1, **ODD_VALUES)])
        await store.append("odd", 2, [rec(2, ts="1999-12-31T23:59:59.999Z"), rec(3)])
        await store.aclose()
    return sorted(folder.glob("*.jsonl"))


def test_db_init_creates_the_schema_once_and_says_what_it_did(pg_dsn, capsys):
    url = pg.shared_cluster().new_database(schema=False)
    assert main(["db", "init", "--store", url]) == 0
    assert capsys.readouterr().out == (
        "created the schema: migration 1: tables gamehost_records and gamehost_sessions;"
        " migration 2: a crc column in gamehost_records (rows written before it stay"
        " unchecked); migration 3: an index of the unfinished sessions (what hosts list to"
        " share out their leases)\n"
    )
    assert main(["db", "init", "--store", url]) == 0
    assert capsys.readouterr().out == "the schema is at version 3: nothing to do\n"
    with psycopg.connect(url) as conn:
        got = conn.execute("SELECT version FROM gamehost_schema").fetchall()
        assert got == [(1,), (2,), (3,)]


def test_db_init_on_an_unreachable_server_is_one_error_line(pg_dsn, capsys):
    url = f"postgresql://postgres@127.0.0.1:{pg._free_port()}/x"
    assert main(["db", "init", "--store", url]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gamehost db init: error: cannot connect to PostgreSQL at 127.0.0.1:")


async def test_import_then_export_gives_the_same_bytes(pg_store_url, tmp_path, capsys):
    files = await write_logs(tmp_path / "in")
    assert await cli("import", "--store", pg_store_url, *map(str, files)) == 0
    assert capsys.readouterr().out == "imported 2 sessions into the database\n"
    out = tmp_path / "out"
    assert await cli("export", "--store", pg_store_url, "--out", str(out)) == 0
    assert capsys.readouterr().out == f"exported 2 sessions into {out}\n"
    for f in files:
        assert (out / f.name).read_bytes() == f.read_bytes()
    with psycopg.connect(pg_store_url) as conn:
        ended = dict(conn.execute("SELECT session_id, ended FROM gamehost_sessions").fetchall())
    assert ended == {"game1": True, "odd": False}
    one = tmp_path / "one"
    argv = ["export", "--store", pg_store_url, "--session", "odd", "--out", str(one)]
    assert await trio.to_thread.run_sync(main, argv) == 0
    assert [p.name for p in one.iterdir()] == ["odd.jsonl"]


async def test_import_refuses_an_existing_session_and_a_line_it_cannot_keep_exact(
    pg_store_url, tmp_path, capsys
):
    files = await write_logs(tmp_path / "in")
    assert await cli("import", "--store", pg_store_url, str(files[1])) == 0
    respaced = tmp_path / "respaced.jsonl"
    lines = files[1].read_bytes().splitlines()
    lines[0] = body_of(lines[0])  # a log from before checksums (old lines only come first)
    lines[1] = body_of(lines[1]).replace(b'"seq":1,', b'"seq": 1,')  # no checksum: read as old
    respaced.write_bytes(b"\n".join(lines[:2]) + b"\n")
    capsys.readouterr()
    argv = ["import", "--store", pg_store_url, *map(str, files), str(respaced)]
    assert await trio.to_thread.run_sync(main, argv) == 1
    out, err = capsys.readouterr()
    assert out == "imported 1 session into the database, 2 refused\n"
    assert f"refused: {files[1]}: session odd exists" in err
    assert f"{respaced}: seq 1: the line would not be kept byte-exact" in err
    with psycopg.connect(pg_store_url) as conn:
        assert conn.execute("SELECT count(*) FROM gamehost_sessions").fetchone() == (2,)


async def test_replay_reads_and_verifies_a_session_in_the_database(pg_store_url, tmp_path, capsys):
    files = await write_logs(tmp_path / "in")
    await trio.to_thread.run_sync(main, ["import", "--store", pg_store_url, str(files[0])])
    capsys.readouterr()
    verify = ["replay", "--verify", "--store", pg_store_url, "game1"]
    assert await trio.to_thread.run_sync(main, verify) == 0
    assert capsys.readouterr().out.startswith("ok: postgresql:game1: ")
    timeline = ["replay", "--store", pg_store_url, "game1", "--width", "100000"]
    assert await trio.to_thread.run_sync(main, timeline) == 0
    file_timeline = ["replay", str(files[0]), "--width", "100000"]
    out = capsys.readouterr().out
    assert await trio.to_thread.run_sync(main, file_timeline) == 0
    assert out == capsys.readouterr().out  # the same log, from the database or the file
    with psycopg.connect(pg_store_url) as conn:  # tamper with a dealt card in the database
        seq, line = conn.execute(
            "SELECT seq, line FROM gamehost_records WHERE line LIKE '%\"drew\"%' ORDER BY seq"
        ).fetchone()
        rec_ = orjson.loads(line)
        rec_["event"]["cards"] = ["2C"] if rec_["event"]["cards"] != ["2C"] else ["3C"]
        conn.execute(
            "UPDATE gamehost_records SET line = %s WHERE session_id = 'game1' AND seq = %s",
            [orjson.dumps(rec_).decode(), seq],
        )
    assert await trio.to_thread.run_sync(main, verify) == 2  # the checksum tells
    assert f"seq {seq}: the record does not match its checksum" in capsys.readouterr().err
    with psycopg.connect(pg_store_url) as conn:  # a forger's checksum: the re-run tells
        conn.execute(
            "UPDATE gamehost_records SET crc = %s WHERE session_id = 'game1' AND seq = %s",
            [checksum(orjson.dumps(rec_)), seq],
        )
    assert await trio.to_thread.run_sync(main, verify) == 1
    assert f"DIFFERS at seq {seq}" in capsys.readouterr().out
    missing = ["replay", "--store", pg_store_url, "nope"]
    assert await trio.to_thread.run_sync(main, missing) == 2
    assert capsys.readouterr().err == "error: no session nope\n"


async def test_a_host_on_the_database_plays_and_serves_ended_sessions(pg_store_url, tmp_path):
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, store=pg_store_url)
        c = await running.client()
        sid = await new_session(c, seats=2, bots=2)
        snap = await watch_to_end(c, sid)
        running.host.request_shutdown()
    assert not (tmp_path / "sessions").exists()  # nothing went to files
    with psycopg.connect(pg_store_url) as conn:
        ((last, ended),) = conn.execute(
            "SELECT last_seq, ended FROM gamehost_sessions WHERE session_id = %s", [sid]
        ).fetchall()
    assert (last, ended) == (snap["seq"], True)
    async with trio.open_nursery() as n:  # a new host: the ended session is read from the rows
        running = await start_host(n, tmp_path / "other", store=pg_store_url)
        c = await running.client()
        again = await c.call("view", session=sid)
        assert (again["seq"], again["ended"]) == (snap["seq"], True)
        running.host.request_shutdown()


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``gamehost serve`` as a user starts it, expected to fail at start."""
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "serve", "--port", "0", "--log-format", "json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def error_lines(err: str) -> list[str]:
    """The error lines (argparse's usage lines and the JSON log aside); no traceback."""
    assert "Traceback" not in err
    return [line for line in err.splitlines() if ": error: " in line and line[0] != "{"]


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ("postgresql://a b/x", "argument --store: bad database URL: unexpected spaces"),
        ("mysql://h/x", "argument --store: not a postgresql:// URL"),
        ("unreachable", "cannot connect to PostgreSQL at 127.0.0.1:"),
        ("no schema", "has no gamehost schema, this gamehost needs version 3: run `gamehost db"),
    ],
)
def test_serve_on_a_bad_or_unreachable_database_is_one_error_line_and_status_2(
    pg_dsn, tmp_path, store, says
):
    if store == "unreachable":
        store = f"postgresql://postgres@127.0.0.1:{pg._free_port()}/x"
    elif store == "no schema":
        store = pg.shared_cluster().new_database(schema=False)
    for done in (serve("--store", store), serve(env={"GAMEHOST_STORE": store})):
        assert done.returncode == 2, done.stderr
        (line,) = error_lines(done.stderr)
        assert line.startswith("gamehost serve: error: ") and says in line, line


def test_serve_store_that_is_not_a_url_is_the_data_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("host.cli.logs.configure", lambda *args, **kw: None)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    argv = ["serve", "--port", "0", "--data-dir", str(tmp_path / "d"), "--store", str(not_a_dir)]
    assert main(argv) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert "Not a directory" in line and str(not_a_dir) in line
    assert not (tmp_path / "d").exists()
