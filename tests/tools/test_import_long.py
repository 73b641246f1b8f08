"""``gamehost import`` of long logs: records streamed in batches (one ``COPY`` each) inside one
transaction whose idle gaps stay under the server's idle-in-transaction timeout; progress lines
or a bar; database errors as one line."""

from __future__ import annotations

import io
import math
import time
from pathlib import Path

import psycopg
import pytest

from host.store.base import body_of
from host.store.pg import StoreUnavailable
from tools import db
from tools.cli import main
from tools.stall import make_long_log

RECORDS = 3_000


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished Crazy Eights log of about 3,000 records, as the file store wrote it."""
    folder = tmp_path_factory.mktemp("long")
    sid = make_long_log(folder, RECORDS)
    return folder / "sessions" / f"{sid}.jsonl"


def short_idle(url: str, ms: int) -> str:
    """``url`` with the server's idle-in-transaction timeout set to ``ms`` milliseconds."""
    return f"{url}?options=-c%20idle_in_transaction_session_timeout%3D{ms}"


def rows(url: str) -> tuple[list[tuple[str, int, bool]], int]:
    with psycopg.connect(url) as conn:
        sessions = conn.execute("SELECT session_id, last_seq, ended FROM gamehost_sessions")
        count = conn.execute("SELECT count(*) FROM gamehost_records").fetchone()
        return sessions.fetchall(), count[0] if count else 0


class Recorder(db.Progress):
    """Progress that keeps every update; ``pause(n)`` says how long the reader takes before
    making the batch after the ``n``-th (seconds), as a slow disk would."""

    def __init__(self, pause=lambda n: 0.0) -> None:
        super().__init__(io.StringIO(), terminal=False)
        self.updates: list[tuple[int, int]] = []
        self.pause = pause

    def update(self, records: int, consumed: int, phase: str = "") -> None:
        self.updates.append((records, consumed))
        time.sleep(self.pause(len(self.updates)))


def test_a_long_log_in_tiny_batches_is_one_byte_exact_session(
    pg_store_url, long_log, tmp_path, capsys
):
    lines = long_log.read_bytes().splitlines()
    assert main(["import", "--store", pg_store_url, "--batch", "7", str(long_log)]) == 0
    assert capsys.readouterr().out == "imported 1 session into the database\n"
    sid = long_log.name.removesuffix(".jsonl")
    assert rows(pg_store_url) == ([(sid, len(lines) - 1, True)], len(lines))
    assert main(["export", "--store", pg_store_url, "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / long_log.name).read_bytes() == long_log.read_bytes()


def test_each_batch_is_one_step_of_the_progress(pg_store_url, long_log):
    n = len(long_log.read_bytes().splitlines())
    progress = Recorder()
    assert db.import_files(pg_store_url, [long_log], batch=100, progress=progress) == (1, [])
    assert len(progress.updates) == math.ceil(n / 100)
    assert [r for r, _ in progress.updates] == [min(n, 100 * i) for i in range(1, 1 + n // 100)] + (
        [n] if n % 100 else []
    )
    assert progress.updates[-1][1] == long_log.stat().st_size


def test_batches_keep_a_long_import_under_a_short_idle_timeout(pg_store_url, long_log):
    url = short_idle(pg_store_url, 300)
    started = time.monotonic()
    progress = Recorder(pause=lambda n: 0.03)  # 30 batches: about 1 s in one transaction
    assert db.import_files(url, [long_log], batch=100, progress=progress) == (1, [])
    assert time.monotonic() - started > 3 * 0.3  # the transaction outlived the timeout
    assert rows(pg_store_url)[1] == len(long_log.read_bytes().splitlines())


def test_a_batch_slower_than_the_idle_timeout_fails_clearly_and_leaves_nothing(
    pg_store_url, long_log
):
    url = short_idle(pg_store_url, 300)
    progress = Recorder(pause=lambda n: 1.0 if n == 5 else 0.0)
    with pytest.raises(StoreUnavailable) as caught:
        db.import_files(url, [long_log], batch=100, progress=progress)
    message = str(caught.value)
    assert message.startswith(f"{long_log}: the database failed importing session ")
    assert "at seq 500:" in message
    assert "idle_in_transaction_session_timeout, 300ms" in message
    assert message.endswith("nothing of it was committed")
    assert rows(pg_store_url) == ([], 0)


def test_a_database_error_during_import_is_one_line_and_status_2(
    pg_store_url, long_log, monkeypatch, capsys
):
    slow = Recorder(pause=lambda n: 1.0 if n == 2 else 0.0)
    monkeypatch.setattr(db.Progress, "update", lambda self, r, c, phase="": slow.update(r, c))
    argv = ["import", "--store", short_idle(pg_store_url, 300), "--batch", "500", str(long_log)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"gamehost import: error: {long_log}: the database failed importing")
    assert "at seq 1000:" in line and "idle_in_transaction_session_timeout" in line
    assert rows(pg_store_url) == ([], 0)


def test_a_damaged_record_deep_in_the_log_refuses_it_whole(pg_store_url, long_log, tmp_path):
    lines = long_log.read_bytes().splitlines(keepends=True)
    lines[2_500] = lines[2_500].replace(b'"seq":2500,', b'"seq":2501,')
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines))
    created, refused = db.import_files(pg_store_url, [bad], batch=100, progress=Recorder())
    assert created == 0
    assert refused == [f"{bad}: {bad}: seq 2500: the record does not match its checksum"]
    assert rows(pg_store_url) == ([], 0)  # 25 batches had been sent: rolled back


def test_a_torn_last_line_is_left_out_and_said(pg_store_url, long_log, tmp_path):
    torn = tmp_path / "torn.jsonl"
    data = long_log.read_bytes()
    torn.write_bytes(data + b'{"seq":' + str(len(data.splitlines())).encode())
    progress = Recorder()
    assert db.import_files(pg_store_url, [torn], batch=1000, progress=progress) == (1, [])
    assert progress.out.getvalue().startswith("torn.jsonl: a torn last line (")
    assert rows(pg_store_url)[1] == len(data.splitlines())


def test_a_last_line_with_a_damaged_newline_or_without_its_checksum_is_refused(
    pg_store_url, long_log, tmp_path
):
    """Neither is a torn tail: the record may have been acknowledged (nothing is imported)."""
    data = long_log.read_bytes()
    lines = data.splitlines(keepends=True)
    n = len(lines)
    newline = tmp_path / "newline.jsonl"
    newline.write_bytes(data[:-1] + b"\x2a")  # the last newline (0x0a), one bit flipped
    stripped = tmp_path / "stripped.jsonl"
    stripped.write_bytes(b"".join([*lines[:-2], body_of(lines[-2]) + b"\n", lines[-1]]))
    created, refused = db.import_files(
        pg_store_url, [newline, stripped], batch=1000, progress=Recorder()
    )
    assert created == 0
    assert refused[0].startswith(f"{newline}: {newline}: seq {n - 1}: the line at byte ")
    assert refused[0].endswith("ends with byte 0x2a where its newline belongs (damaged, not torn)")
    assert refused[1] == (
        f"{stripped}: {stripped}: seq {n - 2}: the line carries no checksum, but the records"
        " before it do"
    )
    assert rows(pg_store_url) == ([], 0)


def test_progress_is_plain_lines_off_a_terminal(pg_store_url, long_log):
    out = io.StringIO()
    progress = db.Progress(out, every=0, terminal=False)
    assert db.import_files(pg_store_url, [long_log], batch=1000, progress=progress) == (1, [])
    lines = out.getvalue().splitlines()
    n = len(long_log.read_bytes().splitlines())
    assert lines[0].startswith(f"importing {long_log.name}: 1,000 records (")
    assert lines[-2].startswith(f"importing {long_log.name}: {n:,} records (100% of the file), ")
    assert lines[-1].startswith(f"imported {long_log.name}: {n:,} records in ")
    assert lines[-1].endswith(" records/s)")


def test_progress_is_a_bar_on_a_terminal(pg_store_url, long_log):
    out = io.StringIO()
    with db.Progress(out, terminal=True) as progress:
        assert db.import_files(pg_store_url, [long_log], batch=1000, progress=progress) == (1, [])
    shown = out.getvalue()
    n = len(long_log.read_bytes().splitlines())
    assert "\x1b[" in shown  # drawn for a terminal
    assert long_log.name in shown and f"{n:,} records" in shown and "100%" in shown


def test_batch_must_be_positive(pg_store_url, long_log, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["import", "--store", pg_store_url, "--batch", "0", str(long_log)])
    assert exited.value.code == 2
    assert "argument --batch: not a positive integer: '0'" in capsys.readouterr().err


async def test_export_pages_a_long_session_and_writes_nothing_of_a_damaged_one(
    pg_store_url, long_log, tmp_path
):
    assert db.import_files(pg_store_url, [long_log], batch=1000, progress=Recorder()) == (1, [])
    out = io.StringIO()
    progress = db.Progress(out, every=0, terminal=False, verb="export")
    got = await db.export_sessions(pg_store_url, None, tmp_path / "a", page=100, progress=progress)
    assert got == (1, [])
    assert (tmp_path / "a" / long_log.name).read_bytes() == long_log.read_bytes()
    lines = out.getvalue().splitlines()
    n = len(long_log.read_bytes().splitlines())
    assert lines[0].startswith(f"exporting {long_log.name}: 100 records checked (")
    assert f"exporting {long_log.name}: {n:,} records written (100% done), " in lines[-2]
    assert lines[-1].startswith(f"exported {long_log.name}: {n:,} records in ")
    sid = long_log.name.removesuffix(".jsonl")
    with psycopg.connect(pg_store_url) as conn:  # a line deep in the log, respaced, and
        conn.execute(  # unchecked (as a row from before checksums): only byte-exactness finds it
            "UPDATE gamehost_records SET line = replace(line, '\"seq\":2500,', '\"seq\": 2500,'),"
            " crc = NULL"
            " WHERE session_id = %s AND seq = 2500",
            [sid],
        )
    got = await db.export_sessions(
        pg_store_url, None, tmp_path / "b", page=100, progress=Recorder()
    )
    assert got == (0, [f"{sid}: session {sid}: seq 2500: the line would not be kept byte-exact"])
    assert not (tmp_path / "b" / long_log.name).exists()


def test_a_file_refused_before_it_starts_leaves_the_bar_alone(pg_store_url, long_log, tmp_path):
    out = io.StringIO()
    with db.Progress(out, terminal=True) as progress:
        got = db.import_files(
            pg_store_url, [tmp_path / "bad name.jsonl", tmp_path / "gone.jsonl", long_log],
            progress=progress,
        )  # fmt: skip
    assert got[0] == 1 and len(got[1]) == 2
    assert "not named <session id>.jsonl" in got[1][0] and "No such file" in got[1][1]
    assert long_log.name in out.getvalue() and "gone.jsonl" not in out.getvalue()
