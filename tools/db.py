"""``gamehost db init``, ``gamehost export`` and ``gamehost import``: the PostgreSQL store's tools.

- ``db init --store URL``: create or migrate the schema (``host.store.pg.migrate``): idempotent
  and versioned; prints what it did, or that there was nothing to do;
- ``export --store URL [--session ID ...] --out DIR``: write sessions (every one without
  ``--session``) as ``DIR/<session>.jsonl``, the files a file store would hold, byte for byte;
- ``import --store URL FILE ...``: put session log files into the database, each as one create
  (all its records or none); the session id is the file's name without ``.jsonl``.

Records move byte-exact both ways: every record is checked against its checksum on the way out
(one written before checksums is taken as it is), written through the target store (which
encodes a record as ``{"seq", "ts", **record}`` with orjson and checksums it anew) and checked
first to come out byte-equal to the canonical bytes read (the line without its checksum); a
line that would not (e.g. hand-edited JSON with other spacing) is refused, naming it, and that
session is not moved. A session that already exists at the target
is refused too (never merged or overwritten).

``--store`` defaults to the environment variable ``GAMEHOST_STORE``. Exit status: 0 all done,
1 some sessions refused (each named on stderr), 2 unusable arguments or an unreachable database.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import trio

from host.errors import BadSessionId, LogError
from host.store.base import _SESSION_ID, body_of
from host.store.file import FileStore, read_log
from host.store.pg import PostgresStore, StoreUnavailable, check_url, migrate, parse_rows

__all__ = ["add_parser", "export_sessions", "import_files"]


def store_url(text: str) -> str:
    """argparse type: a PostgreSQL URL libpq can parse."""
    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    im.set_defaults(func=import_main)


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


def _exact_records(
    where: str, records: list[dict[str, Any]], bodies: list[bytes]
) -> list[dict[str, Any]]:
    """``records`` (read and checked), each checked to encode back to its canonical bytes
    ``bodies`` (:func:`host.store.base.body_of` its line) as a store writes them.

    Raises:
        ValueError: a record that would not come out byte-equal.
    """
    for rec, body in zip(records, bodies, strict=True):
        again = orjson.dumps({"seq": rec["seq"], "ts": rec.get("ts"), **rec})
        if "ts" not in rec or again != body:
            seq = rec.get("seq")
            raise ValueError(f"{where}: seq {seq}: the line would not be kept byte-exact")
    return records


async def export_sessions(url: str, sessions: list[str] | None, out: Path) -> tuple[int, list[str]]:
    """Write each session (all with None) to ``out/<session>.jsonl`` through a file store.

    Returns:
        ``(sessions written, one message per session refused)`` (it exists in ``out``, is
        unknown or damaged, or would not be byte-exact).

    Raises:
        StoreUnavailable: the database failed. OSError: a file could not be written.
    """
    source = PostgresStore(url)
    target = FileStore(out, logs_in_root=True)
    refused: list[str] = []
    written = 0
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(target.run)
        try:
            ids = source.session_ids() if sessions is None else sessions
            for sid in ids:
                try:
                    rows = await trio.to_thread.run_sync(source.read_rows, sid)
                    records = parse_rows(source.path(sid), rows)  # checksums, and a log
                    bodies = [line.encode() for line, _ in rows]
                    records = _exact_records(f"session {sid}", records, bodies)
                    await target.create(sid, records)
                    written += 1
                except (LogError, LookupError, ValueError) as exc:  # parse errors: ValueError
                    refused.append(f"{sid}: {exc}")
        except OSError as exc:
            failure = exc  # raised outside the nursery, so not as an exception group
        finally:
            await target.aclose()
            source.disconnect()
    if failure is not None:
        raise failure
    return written, refused


async def import_files(url: str, files: list[Path]) -> tuple[int, list[str]]:
    """Create each file's session in the database, all its records in one transaction.

    Returns:
        ``(sessions created, one message per file refused)`` (a bad name, damaged, the session
        exists in the database, or a line would not be byte-exact).

    Raises:
        StoreUnavailable: the database failed (also: no schema).
    """
    target = PostgresStore(url)
    refused: list[str] = []
    created = 0
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(target.run)
        try:
            await trio.to_thread.run_sync(target.check)
            for path in files:
                sid = path.name.removesuffix(".jsonl")
                try:
                    if not path.name.endswith(".jsonl") or not _SESSION_ID.match(sid):
                        raise BadSessionId("not named <session id>.jsonl")
                    records = read_log(path)  # checksums, and a log (a torn tail left out)
                    lines = path.read_bytes().split(b"\n")[: len(records)]
                    bodies = [body_of(line) for line in lines]
                    await target.create(sid, _exact_records(str(path), records, bodies))
                    created += 1
                except StoreUnavailable:
                    raise
                except (OSError, LogError, ValueError) as exc:  # parse errors: ValueError
                    refused.append(f"{path}: {exc}")
        except StoreUnavailable as exc:
            failure = exc
        finally:
            await target.aclose()
    if failure is not None:
        raise failure
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
        written, refused = trio.run(export_sessions, args.store, args.session, args.out)
    except OSError as exc:
        print(f"gamehost export: error: {exc}", file=sys.stderr)
        return 2
    return _report("export", refused, written, f"into {args.out}")


def import_main(args: argparse.Namespace) -> int:
    """``gamehost import``."""
    try:
        created, refused = trio.run(import_files, args.store, args.files)
    except OSError as exc:
        print(f"gamehost import: error: {exc}", file=sys.stderr)
        return 2
    return _report("import", refused, created, "into the database")
