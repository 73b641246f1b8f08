"""``gamehost check``: scan every session log of a data dir (or, with ``--store URL``, of a
PostgreSQL store) and list the damaged ones, each with the seq a host would name in its
``session_damaged`` reply.

Each log is read as a host loads it — every record against its checksum, seqs gapless, a valid
header — and then folded with its game (a record that reads but does not fold is damage too); a
log whose game is not installed is only read. Nothing is changed: a torn last line (an append a
crash cut short, which a host cuts off when it loads the log) is reported, not cut.

While it runs it shows its progress on stdout (logs checked of all; :mod:`tools.progress`: a
bar on a terminal, a plain line every 5 s otherwise). Output: one line per finding,
``damaged: <session>: seq N: <what>`` or ``torn: <session>: ...``, then a summary with how many
records carry no checksum (written before checksums: accepted unchecked). Exit status: 0 no log
damaged (torn tails are no damage), 1 some damaged, 2 unusable arguments (no such data dir) or
an unreachable database.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import attrs

from host.cli import store_spec
from host.plugins.registry import Registry, load_registry
from host.store.base import _SESSION_ID, CorruptLog
from host.store.file import fold_log, scan_log
from host.table.engine import Record
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
    """

    sessions: int = 0
    records: int = 0
    unchecked: int = 0
    damaged: list[tuple[str, int, str]] = attrs.field(factory=list)
    torn: list[tuple[str, int]] = attrs.field(factory=list)
    unfolded: list[str] = attrs.field(factory=list)


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
            report.damaged.append((sid, exc.seq, exc.message))
        except OSError as exc:
            report.damaged.append((sid, 0, f"cannot be read: {exc}"))
    _tick(progress, report)
    return report


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
                _fold(report, registry, sid, where, parse_rows(where, rows))
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
        f"torn: {sid}: a torn last line at byte {at} (never acknowledged; a host cuts it off)"
        for sid, at in report.torn
    ]
    lines += [f"not folded: {sid}: its game is not installed" for sid in report.unfolded]
    s = "" if report.sessions == 1 else "s"
    lines.append(
        f"checked {report.sessions} session{s} ({report.records} records): "
        f"{len(report.damaged)} damaged, {len(report.torn)} with a torn tail; "
        f"{report.unchecked} records without a checksum (written before checksums)"
    )
    return lines


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``check`` sub-command."""
    p = sub.add_parser("check", help="list the damaged session logs of a data dir or database")
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
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the command; exit status 0 (nothing damaged), 1 (damage found) or 2 (unusable)."""
    registry = load_registry()
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
    return 1 if report.damaged else 0
