"""``gamehost db init``, ``gamehost export`` and ``gamehost import``: the PostgreSQL store's tools.

- ``db init --store URL``: create or migrate the schema (``host.store.pg.migrate``): idempotent
  and versioned; prints what it did, or that there was nothing to do;
- ``export --store URL [--session ID ...] --out DIR``: write sessions (every one without
  ``--session``) as ``DIR/<session>.jsonl``, the files a file store would hold, byte for byte;
  a session's lines come in one query, are checked, then written 5,000 records at a time;
- ``import --store URL [--batch N] FILE ...``: put session log files into the database, each in
  one transaction of its own connection (all its records or none, seen by no one before its
  commit); the session id is the file's name without ``.jsonl``. The file is read and checked
  ``N`` records at a time (5,000) and each batch sent as one ``COPY`` at once, so the
  transaction is never idle for longer than it takes to read one batch: far below the
  server's idle-in-transaction timeout (10 s, ``host.store.pg.IDLE_IN_TRANSACTION``), which
  stays on, so an importer frozen mid-way loses its transaction rather than holding it.

Both show progress on stdout: a rich bar per file when stdout is a terminal, else a plain line
every 5 s (nothing for a file done sooner) and one when such a file is done.

Records move byte-exact both ways: every record is checked against its checksum on the way out
(one written before checksums is taken as it is), written through the target store (which
encodes a record as ``{"seq", "ts", **record}`` with orjson and checksums it anew) and checked
first to come out byte-equal to the canonical bytes read (the line without its checksum); a
line that would not (e.g. hand-edited JSON with other spacing) is refused, naming it, and that
session is not moved. A session that already exists at the target
is refused too (never merged or overwritten).

``--store`` defaults to the environment variable ``GAMEHOST_STORE``. Exit status: 0 all done,
1 some sessions refused (each named on stderr), 2 unusable arguments or a database that is
unreachable or failed (one line on stderr: the file, the seq reached, the server's reason; the
sessions before it stay imported, nothing of that one is).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import orjson
import trio

from host.errors import BadSessionId, LogError
from host.store.base import _SESSION_ID, _SUMMED, CorruptLog, body_of, check_record, decode_line
from host.store.file import FileStore, _open_log, torn_last_line
from host.store.pg import (
    PostgresStore,
    StoreUnavailable,
    check_url,
    import_log,
    migrate,
    parse_rows,
)

__all__ = ["Progress", "add_parser", "export_sessions", "import_files"]


def store_url(text: str) -> str:
    """argparse type: a PostgreSQL URL libpq can parse."""
    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return value


def _store_arg(p: argparse.ArgumentParser) -> None:
    env = os.environ.get("GAMEHOST_STORE")
    p.add_argument(
        "--store",
        type=store_url,
        default=env if env and "://" in env else None,
        required=not (env and "://" in env),
        metavar="URL",
        help="the database, postgresql://user@host:port/dbname (default: $GAMEHOST_STORE)",
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``db``, ``export`` and ``import``."""
    db = sub.add_parser("db", help="manage the PostgreSQL store's schema")
    dbsub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    init = dbsub.add_parser("init", help="create or migrate the schema (idempotent)")
    _store_arg(init)
    init.set_defaults(func=init_main)

    ex = sub.add_parser("export", help="write sessions from a database as JSONL log files")
    _store_arg(ex)
    ex.add_argument(
        "--session", action="append", metavar="ID", help="this session (repeat; default: all)"
    )
    ex.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the logs")
    ex.set_defaults(func=export_main)

    im = sub.add_parser("import", help="put JSONL session log files into a database")
    _store_arg(im)
    im.add_argument("files", type=Path, nargs="+", metavar="FILE", help="<session>.jsonl logs")
    im.add_argument(
        "--batch",
        type=_positive,
        default=BATCH,
        metavar="N",
        help=f"records per COPY of a session's one transaction (default {BATCH:,})",
    )
    im.set_defaults(func=import_main)


BATCH = 5_000
"""Records per batch of ``gamehost import`` (``--batch``; one ``COPY`` each, read and checked
in well under a second, far below the server's idle-in-transaction timeout) and per page of
``gamehost export``."""

PROGRESS_EVERY = 5.0
"""Seconds between the plain progress lines of ``import`` and ``export`` (stdout not a
terminal)."""


def init_main(args: argparse.Namespace) -> int:
    """``gamehost db init``."""
    try:
        before, done = migrate(args.store)
    except StoreUnavailable as exc:
        print(f"gamehost db init: error: {exc}", file=sys.stderr)
        return 2
    if not done:
        print(f"the schema is at version {before}: nothing to do")
        return 0
    what = "created the schema" if before == 0 else f"migrated the schema from version {before}"
    print(f"{what}: " + "; ".join(done))
    return 0


def _check_exact(where: str, records: list[dict[str, Any]], bodies: list[bytes]) -> None:
    """Check each record to encode back to its canonical bytes (a line without its checksum
    and newline, :func:`host.store.base.body_of`) as a store writes them
    (``{"seq", "ts", **record}``).

    Raises:
        ValueError: a line that would not come out byte-equal (naming ``where`` and its seq).
    """
    for rec, body in zip(records, bodies, strict=True):
        again = orjson.dumps({"seq": rec["seq"], "ts": rec.get("ts"), **rec})
        if "ts" not in rec or again != body:
            raise ValueError(f"{where}: seq {rec['seq']}: the line would not be kept byte-exact")


async def export_sessions(
    url: str,
    sessions: list[str] | None,
    out: Path,
    *,
    page: int = BATCH,
    progress: Progress | None = None,
) -> tuple[int, list[str]]:
    """Write each session (all with None) to ``out/<session>.jsonl`` through a file store.

    A session's lines are read in one query (no transaction stays open), then checked page by
    page (``page`` records at a time), then written page by page (a create, then appends), so
    only a page of records is held parsed at once and nothing is written of a session that
    would be refused.

    Returns:
        ``(sessions written, one message per session refused)`` (it exists in ``out``, is
        unknown or damaged, or would not be byte-exact).

    Raises:
        StoreUnavailable: the database failed. OSError: a file could not be written.
    """
    progress = progress if progress is not None else Progress(sys.stdout, terminal=False)
    source = PostgresStore(url)
    target = FileStore(out, logs_in_root=True)
    refused: list[str] = []
    written = 0
    failure: Exception | None = None
    step = max(1, page)
    async with trio.open_nursery() as nursery:
        await nursery.start(target.run)
        try:
            ids = source.session_ids() if sessions is None else sessions
            for sid in ids:
                n = 0
                try:
                    rows = await trio.to_thread.run_sync(source.read_rows, sid)
                    n = len(rows)
                    progress.start(f"{sid}.jsonl", 2 * n)
                    for i in range(0, n, step):  # it reads as a log (checksums), byte-exact
                        part = rows[i : i + step]
                        records = parse_rows(source.path(sid), part, i, session=sid)
                        _check_exact(f"session {sid}", records, [x.encode() for x, _ in part])
                        progress.update(i + len(part), i + len(part), " checked")
                    for i in range(0, n, step):
                        records = [orjson.loads(line) for line, _ in rows[i : i + step]]
                        if i == 0:
                            await target.create(sid, records)
                        else:
                            await target.append(sid, i, records)
                        progress.update(i + len(records), n + i + len(records), " written")
                    target.release(sid)
                    written += 1
                except (LogError, LookupError, ValueError) as exc:  # parse errors: ValueError
                    progress.finish(n, False)
                    refused.append(f"{sid}: {exc}")
                else:
                    progress.finish(n, True)
        except OSError as exc:
            failure = exc  # raised outside the nursery, so not as an exception group
        finally:
            await target.aclose()
            source.disconnect()
    if failure is not None:
        raise failure
    return written, refused


class Progress:
    """What ``gamehost import`` and ``export`` show while they run: a rich progress bar per
    file when ``out`` is a terminal, else a plain line every ``every`` seconds (and one when a
    file that printed one is done); nothing for a file done sooner.

    Args:
        out: the stream (stdout). every: seconds between plain lines (default:
            ``$GAMEHOST_PROGRESS_EVERY``, else :data:`PROGRESS_EVERY`).
        terminal: force the bar (True) or the lines (False); default: whether ``out`` is one.
        verb: ``"import"`` or ``"export"``, for the lines.
    """

    def __init__(
        self,
        out: TextIO,
        every: float | None = None,
        terminal: bool | None = None,
        verb: str = "import",
    ) -> None:
        from rich.console import Console

        from tools.progress import every as every_default

        self.out = out
        self.every = every_default(PROGRESS_EVERY) if every is None else every
        self.verb = verb
        self.console = Console(file=out, force_terminal=terminal)
        self.bar: Any = None
        self._task: Any = None
        self._name = ""
        self._size = 0
        self._phase = ""
        self._start = self._phase_start = self._last = 0.0
        self._printed = False
        self._active = False

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self.bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[records]:,} records{task.fields[phase]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def start(self, name: str, size: int) -> None:
        """A file begins; ``size`` is what ``done`` will reach (bytes, or steps)."""
        self._name, self._size = name, max(size, 1)
        self._start = self._phase_start = self._last = time.monotonic()
        self._phase = ""
        self._printed = False
        self._active = True
        if self.bar is not None:
            self._task = self.bar.add_task(name, total=self._size, records=0, rate="", phase="")

    def _rate(self, records: int) -> float:
        return records / max(time.monotonic() - self._phase_start, 1e-9)

    def update(self, records: int, done: int, phase: str = "") -> None:
        """``records`` handled so far (in this ``phase``, e.g. ``" checked"``), ``done`` of
        the ``size`` given to :meth:`start`."""
        if phase != self._phase:
            self._phase, self._phase_start = phase, time.monotonic()
        if self.bar is not None:
            rate = f"{self._rate(records):,.0f} records/s"
            self.bar.update(self._task, completed=done, records=records, rate=rate, phase=phase)
            return
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._printed = True
            what = "of the file" if self.verb == "import" else "done"
            print(
                f"{self.verb}ing {self._name}: {records:,} records{phase}"
                f" ({100 * done // self._size}% {what}), {self._rate(records):,.0f} records/s",
                file=self.out,
                flush=True,
            )

    def note(self, text: str) -> None:
        """A line about the current file (a torn tail left out)."""
        if self.bar is not None:
            self.bar.console.print(f"{self._name}: {text}", markup=False, highlight=False)
        else:
            print(f"{self._name}: {text}", file=self.out, flush=True)

    def finish(self, records: int, ok: bool) -> None:
        """The file is done: moved (``ok``) or not (nothing if it had not started)."""
        if not self._active:
            return
        self._active = False
        took = time.monotonic() - self._start
        rate = records / max(took, 1e-9)
        if self.bar is not None:
            self.bar.update(
                self._task,
                completed=self._size if ok else None,
                description=self._name + ("" if ok else f" (not {self.verb}ed)"),
                records=records,
                phase="",
                rate=f"{rate:,.0f} records/s" if ok else "",
            )
            self.bar.stop_task(self._task)
        elif self._printed and ok:
            print(
                f"{self.verb}ed {self._name}: {records:,} records in {took:.1f} s"
                f" ({rate:,.0f} records/s)",
                file=self.out,
                flush=True,
            )


def _checked_batch(path: Path, raw: list[bytes], first: int) -> list[str]:
    """The lines (without their newline) of records ``first``, ``first + 1``, ... checked as
    ``read_log`` checks a log and to be kept byte-exact.

    Raises:
        CorruptLog: a line that does not read as the log's next record.
        ValueError: a line that would not come out byte-equal.
    """
    bodies = [body_of(line[:-1]) for line in raw]
    records = [
        check_record(path, seq, decode_line(path, seq, line[:-1]))
        for seq, line in enumerate(raw, first)
    ]
    _check_exact(str(path), records, bodies)
    return [body.decode(errors="surrogateescape") for body in bodies]


def _summed_after(path: Path, seq: int, line: bytes, summed: bool) -> bool:
    """Whether the lines up to ``line`` (seq ``seq``) carry a checksum, given ``summed`` for
    those before it (a log's unchecked lines, written before checksums, come first).

    Raises:
        CorruptLog: a line without a checksum after one with it (its checksum was removed).
    """
    if line.startswith(_SUMMED):
        return True
    if summed:
        raise CorruptLog(path, seq, "the line carries no checksum, but the records before it do")
    return False


def _read_batches(path: Path, size: int, progress: Progress) -> Iterator[list[str]]:
    """A log file's checked lines, ``size`` at a time, read as they are asked for; the
    progress is told after each batch has been taken (written). A torn last line is left out,
    as ``read_log`` leaves it (``host.store.file.torn_last_line``).

    Raises:
        CorruptLog: as :func:`_checked_batch`; an empty file or no complete header; a line
            without a checksum after one with it; a last line whose newline is damaged; a
            link or not a regular file. ValueError: see :func:`_checked_batch`. OSError: read
            failed.
    """
    written = consumed = 0
    pending: list[bytes] = []
    pending_bytes = 0
    summed = False  # a line read so far carries a checksum: every later one must too
    with open(_open_log(path, os.O_RDONLY), "rb") as f:
        last: bytes | None = None
        for line in f:
            if last is not None:
                summed = _summed_after(path, written + len(pending), last, summed)
                pending.append(last)
                pending_bytes += len(last)
                if len(pending) >= size:
                    yield _checked_batch(path, pending, written)
                    written += len(pending)
                    consumed += pending_bytes
                    progress.update(written, consumed)
                    pending, pending_bytes = [], 0
            last = line
    if last is not None:
        if torn_last_line(path, written + len(pending), last, summed):
            progress.note(f"a torn last line ({len(last)} bytes) left out")
        else:
            _summed_after(path, written + len(pending), last, summed)
            pending.append(last)
            pending_bytes += len(last)
    if not pending and not written:
        empty = "the file is empty (no header record)"
        raise CorruptLog(path, 0, "no complete header record (only a torn line)" if last else empty)
    if pending:
        yield _checked_batch(path, pending, written)
        progress.update(written + len(pending), consumed + pending_bytes)


def import_files(
    url: str,
    files: list[Path],
    *,
    batch: int = BATCH,
    progress: Progress | None = None,
) -> tuple[int, list[str]]:
    """Create each file's session in the database: its records streamed in batches of
    ``batch`` (one ``COPY`` each), all in one transaction (:func:`host.store.pg.import_log`),
    so a session appears whole or not at all.

    Returns:
        ``(sessions created, one message per file refused)`` (a bad name, damaged, the session
        exists in the database, or a line would not be byte-exact).

    Raises:
        StoreUnavailable: the database failed (also: no schema), naming the file and seq
            reached; the files before it stay imported, nothing of that one is.
    """
    progress = progress if progress is not None else Progress(sys.stdout, terminal=False)
    check = PostgresStore(url)
    try:
        check.check()
    finally:
        check.disconnect()
    refused: list[str] = []
    created = 0
    for path in files:
        sid = path.name.removesuffix(".jsonl")
        records = 0
        try:
            if not path.name.endswith(".jsonl") or not _SESSION_ID.match(sid):
                raise BadSessionId("not named <session id>.jsonl")
            progress.start(path.name, path.stat().st_size)
            records = import_log(url, sid, _read_batches(path, max(1, batch), progress))
            created += 1
        except StoreUnavailable as exc:
            progress.finish(records, False)
            done = f" ({created} imported before it)" if created else ""
            raise StoreUnavailable(f"{path}: {exc}{done}") from exc
        except (OSError, LogError, ValueError) as exc:  # parse errors: ValueError
            progress.finish(records, False)
            refused.append(f"{path}: {exc}")
        else:
            progress.finish(records, True)
    return created, refused


def _report(command: str, refused: list[str], moved: int, where: str) -> int:
    for message in refused:
        print(f"gamehost {command}: refused: {message}", file=sys.stderr)
    tail = f", {len(refused)} refused" if refused else ""
    print(f"{command}ed {moved} session{'' if moved == 1 else 's'} {where}{tail}")
    return 1 if refused else 0


def export_main(args: argparse.Namespace) -> int:
    """``gamehost export``."""
    try:
        with Progress(sys.stdout, verb="export") as progress:
            written, refused = trio.run(
                partial(export_sessions, progress=progress),
                args.store,
                args.session,
                args.out,
            )
    except OSError as exc:
        print(f"gamehost export: error: {exc}", file=sys.stderr)
        return 2
    return _report("export", refused, written, f"into {args.out}")


def import_main(args: argparse.Namespace) -> int:
    """``gamehost import``."""
    try:
        with Progress(sys.stdout) as progress:
            created, refused = import_files(
                args.store, args.files, batch=args.batch, progress=progress
            )
    except OSError as exc:
        print(f"gamehost import: error: {exc}", file=sys.stderr)
        return 2
    return _report("import", refused, created, "into the database")
