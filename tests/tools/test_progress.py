"""Every long job shows its progress: a rich bar when stdout is a terminal (a pseudo-terminal
here), plain periodic lines otherwise (every ``$GAMEHOST_PROGRESS_EVERY`` seconds; 0 in these
tests, so a short job prints them too). Run as a user runs them: ``gamehost ...`` in a
subprocess."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host.table.engine import VERIFY_STEP
from tools.progress import Progress, every
from tools.stall import make_long_log

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LONG = 25_000  # records: past replay's LONG_LOG, several VERIFY_STEPs


def gamehost(*argv: str, terminal: bool, timeout: float = 180) -> tuple[int, str]:
    """Run ``gamehost ARGV``; its exit status and what it wrote on stdout (with a pseudo-
    terminal as stdout when ``terminal``, else a pipe with plain lines at every update)."""
    cmd = [sys.executable, "-m", "tools.cli", *argv]
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    if not terminal:
        env["GAMEHOST_PROGRESS_EVERY"] = "0"
        done = subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env, timeout=timeout)
        return done.returncode, done.stdout.decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(slave)
    out = b""
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child's side is closed: all of it is read
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        status = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return status, out.decode(errors="replace")


def drawn(output: str) -> str:
    """What a terminal showed, roughly: escape sequences out, carriage returns as new lines."""
    return ANSI.sub("", output).replace("\r", "\n")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with one long log and five short ones."""
    folder = tmp_path_factory.mktemp("logs")
    make_long_log(folder, LONG, seed=1)
    for seed in range(2, 7):
        make_long_log(folder, 300, seed=seed)
    return folder


def long_log(data_dir: Path) -> Path:
    return data_dir / "sessions" / "long000000000001.jsonl"


# -- the helper ------------------------------------------------------------------------------------


def test_off_a_terminal_a_plain_line_every_interval_and_none_for_a_quick_job():
    out = io.StringIO()
    with Progress("verify", 4, "logs", out=out, terminal=False, interval=0) as p:
        p.advance()
        p.advance(status="1 differ")
    assert out.getvalue().splitlines()[0].startswith("verify: 1/4 logs (25%), ")
    assert out.getvalue().splitlines()[1].endswith("; 1 differ")
    quiet = io.StringIO()
    with Progress("verify", 4, "logs", out=quiet, terminal=False, interval=60) as p:
        for _ in range(4):
            p.advance()
    assert quiet.getvalue() == ""


def test_on_a_terminal_a_bar(monkeypatch):
    out = io.StringIO()
    with Progress("check", 3, "logs", out=out, terminal=True) as p:
        for _ in range(3):
            p.advance()
            p.bar.refresh()
    text = drawn(out.getvalue())
    assert "check" in text and "3/3" in text and "logs" in text


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("GAMEHOST_PROGRESS_EVERY", "0.5")
    assert every() == 0.5
    monkeypatch.setenv("GAMEHOST_PROGRESS_EVERY", "soon")
    assert every() == 5.0


# -- replay --verify -------------------------------------------------------------------------------


def test_verify_of_one_long_log_shows_its_progress(data_dir: Path):
    log = str(long_log(data_dir))
    records = len(long_log(data_dir).read_bytes().splitlines())  # about LONG: cut at a cause
    status, out = gamehost("replay", "--verify", log, terminal=True)
    assert status == 0, out
    text = drawn(out)
    assert re.search(rf"verify long000000000001\.jsonl .* \d+/{records} records", text), text
    assert f"ok: long000000000001.jsonl: {records} records replay to the same events" in text
    status, out = gamehost("replay", "--verify", log, terminal=False)
    assert status == 0
    lines = out.splitlines()
    steps = [line for line in lines if line.startswith("verify long000000000001.jsonl: ")]
    assert len(steps) >= LONG // VERIFY_STEP - 1, out
    assert re.match(
        rf"verify long000000000001\.jsonl: 4,\d{{3}}/{records:,} records \(1\d%\)", steps[0]
    )
    assert lines[-1].startswith("ok: long000000000001.jsonl: ")


def test_verify_of_many_logs_shows_its_progress(data_dir: Path):
    status, out = gamehost("replay", "--verify", str(data_dir), terminal=True)
    assert status == 0, out
    text = drawn(out)
    assert re.search(r"verify .*\d/6 logs", text), text
    assert "verified 6 logs (" in text and ": 6 ok, 0 differ" in text
    status, out = gamehost("replay", "--verify", str(data_dir), terminal=False)
    assert status == 0
    lines = out.splitlines()
    assert [line.split(" logs")[0] for line in lines if line.startswith("verify: ")] == [
        f"verify: {n}/6" for n in range(1, 7)
    ]
    assert lines[-1].startswith("verified 6 logs (") and lines[-1].endswith(
        "6 ok, 0 differ, 0 damaged or unreadable, 0 written by another version of their game"
    )


def test_verify_of_many_logs_tells_each_bad_one_and_exits_with_the_worst(tmp_path: Path):
    folder = tmp_path / "logs"
    folder.mkdir()
    make_long_log(tmp_path, 200, seed=8)
    good = next((tmp_path / "sessions").glob("*.jsonl"))
    (folder / good.name).write_bytes(good.read_bytes())
    (folder / "broken.jsonl").write_bytes(b"not a log\n")
    lines = good.read_bytes().splitlines(keepends=True)  # read well up to a damaged line
    (folder / "cut.jsonl").write_bytes(b"".join([*lines[:100], b"{garbled\n", *lines[101:]]))
    status, out = gamehost("replay", "--verify", str(folder), terminal=False)
    assert status == 2
    assert out.splitlines()[-1].startswith(f"verified 3 logs ({len(lines)} records)")
    assert "1 ok, 0 differ, 2 damaged or unreadable" in out
    status, _ = gamehost("replay", str(folder), str(good), terminal=False)
    assert status == 2  # several logs go with --verify only


# -- check -----------------------------------------------------------------------------------------


def test_check_shows_its_progress(data_dir: Path):
    status, out = gamehost("check", "--data-dir", str(data_dir), terminal=True)
    assert status == 0, out
    text = drawn(out)
    assert re.search(r"check .*\d/6 logs", text), text
    assert "checked 6 sessions" in text
    status, out = gamehost("check", "--data-dir", str(data_dir), terminal=False)
    assert status == 0
    assert [line.split(" logs")[0] for line in out.splitlines() if line.startswith("check: ")][
        -1
    ] == "check: 6/6"


# -- import and export -----------------------------------------------------------------------------


def test_import_and_export_show_their_progress(data_dir: Path, pg_store_url: str, tmp_path):
    log = str(long_log(data_dir))
    status, out = gamehost("import", "--store", pg_store_url, log, terminal=True)
    assert status == 0, out
    text = drawn(out)
    assert re.search(r"long000000000001\.jsonl .*records", text), text
    assert "imported 1 session into the database" in text
    status, out = gamehost(
        "export", "--store", pg_store_url, "--out", str(tmp_path / "a"), terminal=True
    )
    assert status == 0, out
    assert "exported 1 session into" in drawn(out)
    status, out = gamehost(
        "export", "--store", pg_store_url, "--out", str(tmp_path / "b"), terminal=False
    )
    assert status == 0
    lines = out.splitlines()
    assert any(line.startswith("exporting long000000000001.jsonl: ") for line in lines), out
    assert any(line.startswith("exported long000000000001.jsonl: ") for line in lines), out


# -- chaos -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("terminal", [True, False])
def test_chaos_shows_its_progress(tmp_path: Path, terminal: bool):
    argv = ["chaos", "--sessions", "2", "--kills", "1", "--seed", "5", "--max-seconds", "60"]
    argv += ["--settle-seconds", "8", "--data-dir", str(tmp_path / "run")]
    status, out = gamehost(*argv, terminal=terminal)
    text = drawn(out)
    assert "chaos: 2 sessions, 1 kills" in text
    assert status in (0, 1), text  # the verdict is the run's; the progress is what is tested
    if terminal:
        assert re.search(r"chaos: play .*/2 sessions ended .*kills \d/1", text), text
        assert re.search(r"chaos: replay --verify .*/\d+ logs", text), text
    else:
        plays = [line for line in text.splitlines() if line.startswith("chaos: play: ")]
        assert plays and re.match(r"chaos: play: \d/2 sessions ended \(\d+%\)", plays[0]), text
        assert "; kills " in plays[-1]
        assert re.search(r"(?m)^chaos: replay --verify: \d+/\d+ logs", text), text
    assert text.rstrip().splitlines()[-1] in ("ok",) or "FAILED" in text
