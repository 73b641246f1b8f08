"""``gamehost check``: scan every session log of a data dir (or, with ``--store URL``, of a
PostgreSQL store) and list the damaged ones, each with the seq a host would name in its
``session_damaged`` reply.

Each log is read as a host loads it — every record against its checksum, seqs gapless, a valid
header — and then folded with its game (a record that reads but does not fold is damage too); a
log whose game is not installed is only read. Nothing is changed: a torn last line (an append a
crash cut short, which a host cuts off when it loads the log) is reported, not cut.

A data dir's write-ahead log (``DIR/wal/*.seg``, ``host.store.wal``) is checked too: every line
against its checksum, and what a host's start would replay onto the session files (records a
crash left only in the log) is counted, changing nothing. A damaged segment (a line that does not
match its checksum anywhere but at the newest segment's torn tail, a gap) is damage: a host
refuses to start on it.

While it runs it shows its progress on stdout (logs checked of all; :mod:`tools.progress`: a
bar on a terminal, a plain line every 5 s otherwise). Output: one line per finding,
``damaged: <session>: seq N: <what>``, ``restored on start: <session>: seq N: <what>`` (damage
the write-ahead log repairs), ``damaged: wal/<segment>: byte N: <what>``, ``torn:
<session>: ...`` or ``torn: wal/<segment>: ...``, then a summary with how many records carry no
checksum (written before checksums: accepted unchecked) and, if the data dir has a write-ahead
log left, a line about it. Exit status: 0 nothing damaged (torn tails are no damage), 1 some log
or segment damaged, 2 unusable arguments (no such data dir) or an unreachable database.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import attrs

from host.cli import store_spec
from host.plugins.registry import Registry
from host.store.base import _SESSION_ID, CorruptLog
from host.store.file import fold_log, scan_log
from host.store.wal import WalDamaged, recover, scan_segment, segment_name, segment_numbers
from host.table.engine import Record
from tools.plugins import add_plugin_option, registry_of
from tools.progress import Progress

__all__ = ["Report", "add_parser", "check_data_dir", "check_database", "main"]


@attrs.define
class Report:
    """What a check found.

    Attributes:
        sessions: logs checked.
        records: records read.
        unchecked: records without a checksum (written before checksums).
        damaged: ``(session, seq, what)`` per damaged log.
        torn: ``(session, byte offset)`` per log with a torn last line.
        unfolded: sessions whose game is not installed (read, not folded).
        wal_segments: write-ahead log segments found (not yet retired).
        wal_records: record lines in them.
        wal_pending: records a host's start would append to session files from them.
        wal_damaged: ``(segment file name, byte offset, what)``; at most one, the first.
        wal_torn: ``(segment file name, byte offset)`` of the newest segment's torn tail.
        wal_repaired: session id -> the seq from which a host's start rewrites its file from
            the write-ahead log.
        restored: ``(session, seq, what, from seq)`` for each session file damaged where the
            write-ahead log holds its records: a host's start restores it (not damage).
    """

    sessions: int = 0
    records: int = 0
    unchecked: int = 0
    damaged: list[tuple[str, int, str]] = attrs.field(factory=list)
    torn: list[tuple[str, int]] = attrs.field(factory=list)
    unfolded: list[str] = attrs.field(factory=list)
    wal_segments: int = 0
    wal_records: int = 0
    wal_pending: int = 0
    wal_damaged: list[tuple[str, int, str]] = attrs.field(factory=list)
    wal_torn: list[tuple[str, int]] = attrs.field(factory=list)
    wal_repaired: dict[str, int] = attrs.field(factory=dict)
    restored: list[tuple[str, int, str, int]] = attrs.field(factory=list)


def _fold(report: Report, registry: Registry, sid: str, where: Path, raw: list[Any]) -> None:
    """Fold a log's records with its game; damage goes into ``report``."""
    report.records += len(raw)
    records = [Record.from_json(r) for r in raw]
    engine = registry.engines.get(records[0].data.get("game", ""))
    if engine is None:
        report.unfolded.append(sid)
        return
    fold_log(where, engine, records)


def _tick(progress: Progress | None, report: Report) -> None:
    if progress is not None:
        bad = len(report.damaged)
        progress.update(report.sessions, status=f"{bad} damaged" if bad else "")


def check_data_dir(data_dir: Path, registry: Registry, progress: Progress | None = None) -> Report:
    """Check every ``<session>.jsonl`` in ``data_dir/sessions`` (the folder itself if it has no
    ``sessions``: a folder of logs, as ``export`` writes); ``progress`` told of each log.

    Raises:
        FileNotFoundError: no such folder.
    """
    folder = data_dir / "sessions" if (data_dir / "sessions").is_dir() else data_dir
    if not folder.is_dir():
        raise FileNotFoundError(f"no data dir {data_dir}")
    report = Report()
    names = [
        name
        for name in sorted(os.listdir(folder))
        if name.endswith(".jsonl") and _SESSION_ID.match(name.removesuffix(".jsonl"))
    ]
    if folder != data_dir:  # first: what the write-ahead log restores is no damage
        _check_wal(report, data_dir / "wal", folder)
    if progress is not None:
        progress.update(0, total=len(names))
    for name in names:
        _tick(progress, report)
        sid = name.removesuffix(".jsonl")
        report.sessions += 1
        path = folder / name
        try:
            scan = scan_log(path)
            report.unchecked += scan.unchecked
            if scan.torn_at is not None:
                report.torn.append((sid, scan.torn_at))
            _fold(report, registry, sid, path, scan.records)
        except CorruptLog as exc:
            restored_from = report.wal_repaired.get(sid)
            if restored_from is not None and exc.seq >= restored_from:
                report.restored.append((sid, exc.seq, exc.message, restored_from))
            else:
                report.damaged.append((sid, exc.seq, exc.message))
        except OSError as exc:
            report.damaged.append((sid, 0, f"cannot be read: {exc}"))
    _tick(progress, report)
    return report


def _check_wal(report: Report, wal_dir: Path, sessions: Path) -> None:
    """Read every segment of a data dir's write-ahead log and count what a host's start would
    replay (nothing is changed); findings go into ``report``."""
    numbers = segment_numbers(wal_dir)
    report.wal_segments = len(numbers)
    try:
        for i, number in enumerate(numbers):
            path = wal_dir / segment_name(number)
            scan = scan_segment(path, path.read_bytes(), newest=i == len(numbers) - 1)
            report.wal_records += sum(1 for e in scan.entries if e.line is not None)
            if scan.torn_at is not None:
                report.wal_torn.append((path.name, scan.torn_at))
        if numbers:
            would = recover(wal_dir, sessions, apply=False)
            report.wal_pending = would.appended
            report.wal_repaired = would.repaired
    except WalDamaged as exc:
        report.wal_damaged.append((exc.path.name, exc.offset, exc.message))
    except OSError as exc:
        report.wal_damaged.append(("wal", 0, f"cannot be read: {exc}"))


def check_database(url: str, registry: Registry, progress: Progress | None = None) -> Report:
    """Check every session of a PostgreSQL store; ``progress`` told of each session.

    Raises:
        StoreUnavailable: the database cannot be reached (an ``OSError``).
    """
    from host.store.pg import PostgresStore, parse_rows

    store = PostgresStore(url)
    report = Report()
    try:
        store.check()
        ids = store.session_ids()
        if progress is not None:
            progress.update(0, total=len(ids))
        for sid in ids:
            _tick(progress, report)
            report.sessions += 1
            where = store.path(sid)
            try:
                rows = store.read_rows(sid)
                report.unchecked += sum(1 for _, crc in rows if crc is None)
                _fold(report, registry, sid, where, parse_rows(where, rows, session=sid))
            except CorruptLog as exc:
                report.damaged.append((sid, exc.seq, exc.message))
            except LookupError:  # gone since it was listed
                report.sessions -= 1
        _tick(progress, report)
    finally:
        store.disconnect()
    return report


def render(report: Report) -> list[str]:
    """The report's lines (findings first, the summary last)."""
    lines = [f"damaged: {sid}: seq {seq}: {what}" for sid, seq, what in report.damaged]
    lines += [
        f"restored on start: {sid}: seq {seq}: {what} (the write-ahead log holds its records"
        f" from seq {since}: a host's start rewrites them)"
        for sid, seq, what, since in report.restored
    ]
    lines += [
        f"torn: {sid}: a torn last line at byte {at} (never acknowledged; a host cuts it off)"
        for sid, at in report.torn
    ]
    lines += [
        f"damaged: wal/{name}: byte {at}: {what} (a host refuses to start)"
        for name, at, what in report.wal_damaged
    ]
    lines += [
        f"torn: wal/{name}: a torn last line at byte {at} (a host drops it; what of it reached"
        " its session files stays there)"
        for name, at in report.wal_torn
    ]
    lines += [
        f"not folded: {sid}: its game is not installed (served with --plugin? give it here)"
        for sid in report.unfolded
    ]
    s = "" if report.sessions == 1 else "s"
    lines.append(
        f"checked {report.sessions} session{s} ({report.records} records): "
        f"{len(report.damaged)} damaged, {len(report.torn)} with a torn tail; "
        f"{report.unchecked} records without a checksum (written before checksums)"
    )
    if report.wal_segments:
        s = "" if report.wal_segments == 1 else "s"
        lines.append(
            f"write-ahead log: {report.wal_segments} segment{s} not yet retired"
            f" ({report.wal_records} records); a host's start would add {report.wal_pending}"
            " records to session files"
        )
    return lines


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``check`` sub-command."""
    p = sub.add_parser(
        "check",
        help="list the damaged session logs (and write-ahead log segments) of a data dir or"
        " database",
    )
    p.add_argument(
        "--data-dir", type=Path, default=Path("data"), help="the data dir to scan (default: data)"
    )
    p.add_argument(
        "--store",
        type=store_spec,
        default=os.environ.get("GAMEHOST_STORE") or None,
        metavar="URL",
        help="scan this postgresql:// store or data dir instead (default: $GAMEHOST_STORE)",
    )
    add_plugin_option(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the command; exit status 0 (nothing damaged), 1 (damage found) or 2 (unusable)."""
    registry = registry_of(args, "check")
    if registry is None:
        return 2
    spec = args.store or str(args.data_dir)
    try:
        with Progress("check", unit="logs") as progress:
            if "://" in spec:
                report = check_database(spec, registry, progress)
            else:
                report = check_data_dir(Path(spec), registry, progress)
    except OSError as exc:
        print(f"gamehost check: error: {exc}", file=sys.stderr)
        return 2
    for line in render(report):
        print(line)
    return 1 if report.damaged or report.wal_damaged else 0
