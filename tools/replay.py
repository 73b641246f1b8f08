"""``gamehost replay LOG``: read a session's event log (``replay --store URL SESSION``: the log
of that session in a PostgreSQL store).

- no flags: the timeline in words, one line per record that has something to say (seq, time,
  what happened: the game's own text, ``describe_event``, e.g. ``bot1 played 8♠ and named ♥``;
  seat names from the log's ``seat_taken`` records), ending with the winners and the final
  scores (``describe_outcome``). An action is told by the events it caused, except one the host
  chose for a seat whose turn timer ran out (``Time ran out for Ann: the host played draw``).
  Without ``--as``/``--spectator`` the timeline is the full truth (every card of every event);
  ``--raw`` prints every record instead as it is logged (seq, time, type, its fields), an action
  the host chose for a timed-out seat ending with ``[timed out: played by the host]``;
- ``--at SEQ``: the state after record SEQ — the full truth, or ``--as SEAT`` / ``--spectator``
  for what that viewer saw (the game's ``view``). It is printed as text: the viewer's view by the
  game's ``render`` when it has one, anything else as indented ``key: value`` lines; ``--json``
  prints the raw wire form instead (one JSON document);
- ``--verify``: re-run every recorded cause (seats taken, actions) through the current code and
  report the first record that differs (exit status 1), and check the seed against its commitment.
  A log written by another version of the game (the header's ``game_version`` is not the
  installed game's, or is missing) is still checked, but a ``warning:`` line says so and a log
  that otherwise verifies exits with status 3, so a script cannot take it for a clean pass;
  a damaged log (one that does not read or fold, see ``host.store.base.CorruptLog``) is one line
  ``error: <file>: seq N: ...`` with exit status 2, in every mode. ``--stats`` adds a line with
  the records per CPU second (reading and checking the log; start-up excluded) and their ratio
  to orjson's parse rate of the same file, measured in the same run (CPU time of this process,
  so a busy machine does not move the ratio);
- ``--fork-at SEQ [--out DIR]``: write the log's records up to SEQ as a new session log
  ``DIR/<new id>.jsonl`` (default DIR: the log's own folder, so a host started on that data dir
  picks it up and play continues; a host already running lists logs only when it starts).
  SEQ must end a cause (the last event of an action, or a seat taken),
  so the fork replays. The fork keeps the session's seed: if the original session ended, its
  seed is public and the fork's future deals can be predicted — forks are for debugging.
  With ``--store`` and no ``--out`` the fork is a new session in that database.
- ``--as SEAT`` / ``--spectator`` without ``--at``: the timeline as that viewer saw it (in
  words: ``you`` for that seat, and nothing it was not shown).

The game comes from the installed plugins (the header names it).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import trio

from host.cli import count, non_negative_int
from host.errors import LogError
from host.plugins.registry import Registry, load_registry
from host.store.base import CorruptLog
from host.store.file import FileStore, LogReader, fold_log, read_log
from host.table.engine import Engine, Record, SessionState
from host.table.history import fork_records, verify_log, version_warning  # re-exported here
from host.table.words import Words, display_names
from tools.plugins import add_plugin_option, registry_of

__all__ = [
    "ReplayError",
    "as_text",
    "fork_records",
    "load",
    "main",
    "parse_rate",
    "stats_line",
    "verify_log",
    "version_warning",
]


class ReplayError(Exception):
    """The log cannot be replayed (unreadable, or its game is not installed)."""


class LogStream:
    """A log file's records for ``--verify`` and ``--at``, read and checked one at a time
    (:class:`host.store.file.LogReader`) and not kept: a long log is verified in the memory of
    its bytes, not of every record parsed (a 100,000-record log: about 160 MB held as records).

    Iterating yields the records up to the first damaged one, the header first; iterate once.

    Attributes:
        header: the header record (read when the stream is opened).
        engine: the header's game.
        lines: the log's lines, counted without parsing (for a progress bar).
        count: records yielded so far.
        damage: the :class:`~host.store.base.CorruptLog` that ended the records early, or None.
    """

    def __init__(self, path: Path, registry: Registry) -> None:
        """Open the log at ``path`` and read its header.

        Raises:
            ReplayError: unreadable, a damaged header, or the game is not installed.
        """
        try:
            reader = LogReader.open(path)
        except (OSError, CorruptLog) as exc:  # a link or no regular file: refused as damage
            raise ReplayError(str(exc)) from None
        self.path = path
        self.data = reader.data
        self.lines = reader.lines()
        self.count = 0
        self.damage: CorruptLog | None = None
        self._rest = self._read(reader)
        header = next(self._rest, None)
        if self.damage is not None:
            raise ReplayError(str(self.damage))
        if header is None or header.type != "header":
            raise ReplayError(f"{path}: no header record")
        self.header = header
        try:
            self.engine = _engine_of(path, header, registry)
        except ReplayError:
            self.drain()  # a log that does not read says so first, as it always did
            if self.damage is not None:
                raise ReplayError(str(self.damage)) from None
            raise

    def _read(self, reader: LogReader) -> Iterator[Record]:
        try:
            for r in reader:
                self.count += 1
                yield _record(r)
        except CorruptLog as exc:
            self.damage = exc

    def __iter__(self) -> Iterator[Record]:
        # a chain, not a generator that yields from the rest: a reader that stops early (a
        # record that does not fold) drops it without closing the rest, which drain() reads on
        return itertools.chain((self.header,), self._rest)

    def drain(self) -> None:
        """Read the records not read yet, only to find :attr:`damage` (and a torn tail)."""
        for _ in self._rest:
            pass

    def whole(self) -> list[Record]:
        """Every record of the same bytes, read again (no second ``torn_tail`` warning): what
        :func:`_verify` folds to tell damage from a difference.

        Raises:
            CorruptLog: a record does not read.
        """
        return [_record(r) for r in LogReader(self.path, self.data, warn=False)]


def _record(raw: dict[str, Any]) -> Record:
    """The record of a log line's fresh dict, taken apart in place (its ``ts`` dropped)."""
    raw.pop("ts", None)
    seq = raw.pop("seq")
    return Record(seq, raw.pop("type"), raw)


def _engine_of(path: Path, header: Record, registry: Registry | None) -> Engine:
    """The engine of the game a log's ``header`` names.

    Raises:
        ReplayError: the game is not installed.
    """
    gid = header.data.get("game")
    engine = (registry or load_registry()).engines.get(gid)
    if engine is None:
        raise ReplayError(
            f"{path}: game {gid!r} is not installed (a game served with --plugin: give"
            " the same --plugin here)"
        )
    return engine


def load(path: Path, engine: Engine | None = None) -> tuple[Engine, list[Record]]:
    """Read a log and find its game (see :func:`load_with_times`)."""
    engine, records, _ = load_with_times(path, engine)
    return engine, records


def load_with_times(
    path: Path,
    engine: Engine | None = None,
    *,
    fold: bool = True,
    store: str | None = None,
    registry: Registry | None = None,
) -> tuple[Engine, list[Record], list[str]]:
    """Read a log and find its game (in ``registry``, loaded if not given); also return each
    record's ``ts``. With ``fold``, also check that every record folds
    (:func:`host.store.file.fold_log`). With ``store`` (a ``postgresql://`` URL), ``path`` is the
    name of a session in that database.

    Each record's object becomes its record's ``data`` as it is (``seq``, ``type`` and ``ts``
    taken out): no copy per record.

    Raises:
        ReplayError: unreadable or damaged log (``"<file>: seq N: ..."``, see
            :class:`~host.store.base.CorruptLog`), no such session, an unreachable database, or
            the game is not installed.
    """
    try:
        if store is None:
            raw = read_log(path)
        else:
            path, raw = _read_db(store, str(path))
    except (OSError, CorruptLog, LookupError, ValueError) as exc:
        raise ReplayError(str(exc)) from None
    if not raw or raw[0].get("type") != "header":
        raise ReplayError(f"{path}: no header record")
    records = []
    times = []
    for r in raw:  # fresh dicts of this read: taken apart in place (what Record.from_json makes)
        times.append(str(r.get("ts", "")))
        records.append(_record(r))
    if engine is None:
        engine = _engine_of(path, records[0], registry)
    if fold:
        try:
            fold_log(path, engine, records)  # a record that reads but does not fold is damage
        except CorruptLog as exc:
            raise ReplayError(str(exc)) from None
    return engine, records, times


def _read_db(url: str, session: str) -> tuple[Path, list[dict[str, Any]]]:
    """A session's records from a PostgreSQL store, checked as a log file is, and the name
    messages use for it.

    Raises:
        UnknownSession, CorruptLog, ValueError, OSError (``StoreUnavailable``).
    """
    from host.store.pg import PostgresStore, parse_rows

    store = PostgresStore(url)
    try:
        rows = store.read_rows(session)
        return store.path(session), parse_rows(store.path(session), rows, session=session)
    finally:
        store.disconnect()


def _verify(
    path: Path,
    engine: Engine,
    records: list[Record] | LogStream,
    progress: Callable[[int], None] | None = None,
    quiet: bool = False,
) -> int:
    """``--verify``: a damaged record (``error: <file>: seq N: ...``, exit 2) when a record of a
    :class:`LogStream` does not read; else the first record the code does not re-produce (exit
    1); else a record that does not fold is damage (exit 2); else ok (0, or 3 when the log was
    written by another version of the game: a ``warning:`` line says so).

    The log is folded once, by the re-run itself. A log whose every record the code
    re-produces also folds (each is a record the engine made and checked, folded as it was
    made), so it is folded again on its own (:func:`host.store.file.fold_log`, a stream's log
    read again whole) only when the re-run stops early: to tell damage from a difference.

    ``progress``: told the records checked so far, now and then. ``quiet``: no ``ok:`` line.
    """
    stream = records if isinstance(records, LogStream) else None
    header = records.header if stream is not None else records[0]
    failure: Exception | None = None
    try:
        diff = verify_log(engine, records, progress)
    except Exception as exc:  # noqa: BLE001 - a damaged log can trip the game's own code
        diff, failure = None, exc
    if stream is not None and stream.damage is not None:  # a log that does not read, as ever
        print(f"error: {stream.damage}", file=sys.stderr)
        return 2
    warning = version_warning(engine, [header])
    if warning is not None:
        print(f"warning: {f'{path.name}: ' if quiet else ''}{warning}", file=sys.stderr)
    count = stream.count if stream is not None else len(records)
    if diff is None and failure is None:
        if not quiet:
            print(f"ok: {path.name}: {count} records replay to the same events")
        return 0 if warning is None else 3
    try:
        fold_log(path, engine, records if stream is None else stream.whole())
        damage = None
    except CorruptLog as exc:
        damage = exc
    if failure is not None:
        if damage is None:
            print(
                f"error: {path}: verify failed: {type(failure).__name__}: {failure}",
                file=sys.stderr,
            )
            return 2
        diff = None
    if diff is not None and (damage is None or diff[0] < damage.seq):
        name = f"{path.name}: " if quiet else ""
        print(f"{name}DIFFERS at seq {diff[0]}: {diff[1]}")
        return 1
    if damage is not None:
        print(f"error: {damage}", file=sys.stderr)
        return 2
    if not quiet:
        print(f"ok: {path.name}: {count} records replay to the same events")
    return 0 if warning is None else 3


def log_paths(given: list[Path]) -> list[Path]:
    """The logs ``replay --verify`` checks for the paths given: a file as it is; the
    ``*.jsonl`` files of a folder's ``sessions`` folder (a data dir), else of the folder itself,
    by name."""
    out: list[Path] = []
    for path in given:
        if path.is_dir():
            sessions = sorted((path / "sessions").glob("*.jsonl"))  # a data dir's
            out += sessions or sorted(path.glob("*.jsonl"))
        else:
            out.append(path)
    return out


SEVERITY = (2, 1, 3, 0)
"""``replay --verify`` of many logs exits with the first of these statuses any log had: damaged
or unreadable (2), differs (1), another version of the game (3), ok (0)."""

LONG_LOG = 20_000
"""Records from which a single log's ``--verify`` shows its progress."""


def _verify_many(paths: list[Path], store: str | None, registry: Registry) -> int:
    """``--verify`` of several logs (files, folders, or with ``store`` session ids): a problem
    line per log that is not ok, the progress (:mod:`tools.progress`), then one summary line;
    the worst status (see :data:`SEVERITY`)."""
    from tools.progress import Progress

    statuses: dict[int, int] = {0: 0, 1: 0, 2: 0, 3: 0}
    records_seen = 0
    with Progress("verify", len(paths), "logs") as progress:
        for path in paths:
            try:
                engine, records = _verify_source(path, store, registry)
            except ReplayError as exc:
                print(f"error: {exc}", file=sys.stderr)
                statuses[2] += 1
                progress.advance()
                continue
            where = path if store is None else Path(f"postgresql:{path}")
            statuses[_verify(where, engine, records, quiet=True)] += 1
            if not isinstance(records, LogStream):
                records_seen += len(records)
            elif records.damage is None:  # a log that does not read counts no records
                records_seen += records.count
            progress.advance(status=_status_text(statuses))
    print(
        f"verified {len(paths)} log{'' if len(paths) == 1 else 's'} ({records_seen:,}"
        f" records): {statuses[0]} ok,"
        f" {statuses[1]} differ, {statuses[2]} damaged or unreadable,"
        f" {statuses[3]} written by another version of their game"
    )
    return next((code for code in SEVERITY if statuses[code]), 0)


def _status_text(statuses: dict[int, int]) -> str:
    bad = [f"{statuses[1]} differ", f"{statuses[2]} damaged"]
    return ", ".join(text for text, n in zip(bad, (statuses[1], statuses[2]), strict=True) if n)


def parse_rate(path: Path, rounds: int = 3) -> float:
    """orjson's parse rate of a log, in lines (records) per CPU second of this process: the best
    of ``rounds`` passes of ``orjson.loads`` over its lines, read into memory first (the floor
    ``--stats`` compares the replay with; CPU time, so other processes on the machine do not
    move it).

    Raises:
        OSError: the file cannot be read.
    """
    lines = path.read_bytes().splitlines()
    loads = orjson.loads
    best = math.inf
    for _ in range(rounds):
        start = time.process_time()
        for line in lines:
            try:  # noqa: SIM105 - a context manager per line would be measured too
                loads(line)
            except orjson.JSONDecodeError:  # a torn last line: parsed as far as it goes
                pass
        best = min(best, time.process_time() - start)
    return len(lines) / best if best > 0 else math.inf


def stats_line(records: int, seconds: float, orjson_rate: float | None) -> str:
    """``--stats``: ``records`` replayed in ``seconds`` (CPU), next to orjson's parse rate
    (records per CPU second) of the same file (None: the log is no file, no ratio)."""
    rate = records / seconds if seconds > 0 else math.inf
    text = f"stats: {records} records in {seconds:.3f} s of CPU = {rate:,.0f} records/s"
    if orjson_rate is None:
        return text
    return (
        f"{text}; orjson parses the same file at {orjson_rate:,.0f} records/s;"
        f" ratio {rate / orjson_rate:.3f}x"
    )


TIMED_OUT = "[timed out: played by the host]"


def _summary(engine: Engine, rec: Record) -> str:
    d = rec.data
    if rec.type == "header":
        version = d.get("game_version", "?")
        return f"{d['game']} v{version} seats={d['seats']} options={d['options']}"
    if rec.type == "seat_taken":
        return f"seat {d['seat']} taken by {d['name']}{' (bot)' if d['bot'] else ''}"
    if rec.type == "action":
        describe = getattr(engine.game, "describe", None)
        text = describe(d["action"]) if describe else orjson.dumps(d["action"]).decode()
        return f"seat {d['seat']}: {text}" + (f"  {TIMED_OUT}" if d.get("timed_out") else "")
    if rec.type == "event":
        return orjson.dumps(d["event"]).decode()
    if rec.type == "ended":
        return f"outcome {orjson.dumps(d['outcome']).decode()}"
    return orjson.dumps(d).decode()


def as_text(value: Any, indent: int = 0) -> str:
    """A JSON value as indented ``key: value`` lines: lists of scalars on one line, ``-`` items
    for lists of objects, ``null`` as ``-``."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return f"{pad}{{}}"
        lines = []
        for k, v in value.items():
            if _scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v)):
                lines.append(f"{pad}{k}: {_inline(v)}")
            else:
                lines.append(f"{pad}{k}:")
                lines.append(as_text(v, indent + 1))
        return "\n".join(lines)
    if isinstance(value, list):
        if all(_scalar(x) for x in value):
            return f"{pad}{_inline(value)}"
        lines = []
        for v in value:
            body = as_text(v, indent + 1)
            lines.append(f"{pad}- {body.lstrip()}")
        return "\n".join(lines)
    return f"{pad}{_inline(value)}"


def _scalar(v: Any) -> bool:
    return not isinstance(v, dict | list)


def _inline(v: Any) -> str:
    if isinstance(v, list):
        return "[" + " ".join(_inline(x) for x in v) + "]"
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _state_at(
    log: Path, store: str | None, registry: Registry, seq: int
) -> tuple[Engine, int, SessionState]:
    """``--at``: the log's game, its last seq and the state after record ``seq`` (the state
    after the last record when ``seq`` is past it). The whole log is read and folded, so a
    record that does not fold anywhere in it is damage, as in every mode; a log file is folded
    as it is read, a record at a time (:class:`host.store.file.LogReader`), in the memory of its
    bytes.

    Raises:
        ReplayError: as :func:`load_with_times`.
    """
    if store is not None:
        engine, records, _ = load_with_times(log, store=store, registry=registry)
        return engine, records[-1].seq, engine.rebuild(r for r in records if r.seq <= seq)
    stream = LogStream(log, registry)
    found: list[SessionState] = []

    def keep(state: SessionState) -> None:
        if state.seq == seq:
            found.append(state)

    try:
        end = fold_log(log, stream.engine, stream, keep)
    except CorruptLog as exc:  # a record that does not fold: unless a line after it does not read
        stream.drain()
        raise ReplayError(str(stream.damage or exc)) from None
    if stream.damage is not None:
        raise ReplayError(str(stream.damage))
    return stream.engine, end.seq, found[0] if found else end


def _fork(args: argparse.Namespace, records: list[Record]) -> int:
    n = args.fork_at
    folder = args.out if args.out is not None else args.log.parent
    db = getattr(args, "store", None) if args.out is None else None
    if db is not None:
        folder = Path("the database")
    new_id = secrets.token_hex(8)
    try:
        lines = fork_records(records, n, new_id)
    except ValueError as exc:
        print(f"error: --fork-at {n}: {exc}", file=sys.stderr)
        return 2
    try:
        if db is None:
            store: Any = FileStore(folder, logs_in_root=True)
        else:
            from host.store.pg import PostgresStore

            store = PostgresStore(db)
        path = trio.run(_write_fork, store, new_id, lines)
    except (OSError, LogError) as exc:
        print(f"error: cannot write the fork into {folder}: {exc}", file=sys.stderr)
        return 2
    print(f"forked {len(lines)} records into {path} (session {new_id})")
    return 0


async def _write_fork(store: Any, session: str, records: list[dict[str, Any]]) -> Path:
    """Write a fork as a new log through a store (a :class:`~host.store.file.FileStore` on the
    target folder, or a database's; the store adds ``ts``, makes it durable, and leaves no log
    if the create fails); returns its path (its name, for a database).

    Raises:
        OSError, LogError (``Conflict``, ``BadSessionId``, ``BadHeader``, ...): see the
            store's ``create``.
    """
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        try:
            await store.create(session, records)
        except (OSError, LogError) as exc:
            failure = exc  # raised outside the nursery, so not as an exception group
        finally:
            await store.aclose()
    if failure is not None:
        raise failure
    return store.path(session)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``replay`` sub-command."""
    p = sub.add_parser("replay", help="show, inspect, verify or fork a session log")
    p.add_argument(
        "log",
        type=Path,
        nargs="+",
        help="a session log (.jsonl), or with --store a session id; with --verify, any number"
        " of them and folders of logs",
    )
    p.add_argument(
        "--store",
        type=_store_url,
        metavar="URL",
        help="read the session from this PostgreSQL store (postgresql://...; default:"
        " $GAMEHOST_STORE when LOG is not a file)",
    )
    p.add_argument(
        "--at", type=non_negative_int, metavar="SEQ", help="show the state after record SEQ"
    )
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--as", dest="seat", type=non_negative_int, metavar="SEAT", help="as this seat sees it"
    )
    who.add_argument("--spectator", action="store_true", help="as a spectator sees it")
    p.add_argument("--json", action="store_true", help="with --at: the raw JSON instead of text")
    p.add_argument("--verify", action="store_true", help="re-run every action on current code")
    p.add_argument(
        "--stats",
        action="store_true",
        help="with --verify: also print the records per CPU second (reading and checking,"
        " start-up excluded) and the ratio to orjson's parse rate of the same file",
    )
    p.add_argument(
        "--fork-at", type=non_negative_int, metavar="SEQ", help="write records 0..SEQ as a new log"
    )
    p.add_argument("--out", type=Path, help="with --fork-at: the folder (default: the log's)")
    p.add_argument("--width", type=count, default=160, help="cut timeline lines to this width")
    p.add_argument(
        "--raw",
        action="store_true",
        help="the timeline as logged (type and fields of every record) instead of in words",
    )
    add_plugin_option(p)
    p.set_defaults(func=main)


def _store_url(text: str) -> str:
    from host.store.pg import check_url

    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _verify_one(
    args: argparse.Namespace, store: str | None, registry: Registry, start: float
) -> int:
    """``--verify`` of one log: read it, re-run it (:func:`_verify`), with ``--stats`` the
    rate line. A log of :data:`LONG_LOG` records or more shows its progress
    (:mod:`tools.progress`) while it is checked."""
    from tools.progress import Progress

    try:
        engine, records = _verify_source(args.log, store, registry)
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    where = args.log if store is None else Path(f"postgresql:{args.log}")
    stream = records if isinstance(records, LogStream) else None
    size = stream.lines if stream is not None else len(records)
    if size >= LONG_LOG:
        with Progress(f"verify {where.name}", size, "records") as progress:
            status = _verify(where, engine, records, progress.update)
    else:
        status = _verify(where, engine, records)
    if args.stats and (stream is None or stream.damage is None):  # a log that reads
        seconds = time.process_time() - start
        rate = parse_rate(args.log) if store is None else None
        print(stats_line(stream.count if stream is not None else len(records), seconds, rate))
    return status


def _verify_source(
    log: Path, store: str | None, registry: Registry
) -> tuple[Engine, list[Record] | LogStream]:
    """What ``--verify`` checks of ``log``: a file's records as a :class:`LogStream`, a
    PostgreSQL store's (``store`` given) as a list.

    Raises:
        ReplayError: as :func:`load_with_times`.
    """
    if store is None:
        stream = LogStream(log, registry)
        return stream.engine, stream
    engine, records, _ = load_with_times(log, fold=False, store=store, registry=registry)
    return engine, records


def main(args: argparse.Namespace) -> int:
    """Run the command; exit status 0, 1 (verify found a difference), 2 (unusable input) or 3
    (verify passed, but on another version of the game than the log's). With ``--verify`` of
    several logs, the worst of theirs (:data:`SEVERITY`)."""
    store = getattr(args, "store", None)
    env = os.environ.get("GAMEHOST_STORE")
    given = args.log if isinstance(args.log, list) else [args.log]
    if (
        store is None
        and env
        and env.startswith("postgresql://")
        and not any(Path(p).exists() for p in given)
    ):
        store = args.store = env  # session ids, not files: the store serve would use
    if len(given) > 1 or (store is None and Path(given[0]).is_dir()):
        if not args.verify or args.stats:
            print("error: several logs (or a folder) go with --verify alone", file=sys.stderr)
            return 2
        empty = []
        if store is None:
            empty = [p for p in map(Path, given) if p.is_dir() and not log_paths([p])]
            for folder in empty:  # a wrong folder is no clean pass; the others are checked
                print(
                    f"error: {folder}: no session logs in it (*.jsonl) nor in its sessions"
                    " folder (a data dir's)",
                    file=sys.stderr,
                )
            given = [p for p in given if Path(p) not in empty]
            if not given:
                return 2
        registry = registry_of(args, "replay")
        if registry is None:
            return 2
        status = _verify_many(given if store else log_paths(given), store, registry)
        return 2 if empty else status
    args.log = given[0]
    registry = registry_of(args, "replay")  # start-up: before --stats starts its clock
    if registry is None:
        return 2
    start = time.process_time()
    if args.verify:
        return _verify_one(args, store, registry, start)
    if args.at is not None and args.fork_at is None:
        try:
            engine, last, state = _state_at(args.log, store, registry, args.at)
        except ReplayError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if not 0 <= args.at <= last:
            print(f"error: --at must be 0..{last}", file=sys.stderr)
            return 2
        if args.seat is not None or args.spectator:
            viewer = None if args.spectator else args.seat
            if viewer is not None and not 0 <= viewer < len(state.seats):
                print(f"error: no seat {viewer}", file=sys.stderr)
                return 2
            shown = engine.codec.to_wire(engine.game.view(state.game, viewer))
            render = getattr(engine.game, "render", None)
            if render is not None and not args.json:
                print(render(orjson.loads(orjson.dumps(shown)), viewer))
                return 0
        else:
            shown = {
                "seq": state.seq,
                "to_act": list(engine.game.to_act(state.game)) if state.started else [],
                "state": engine.codec.to_wire(state.game),
            }
        if args.json:
            print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
        else:
            print(as_text(orjson.loads(orjson.dumps(shown))))
        return 0
    try:
        engine, records, times = load_with_times(
            args.log, fold=not args.verify, store=store, registry=registry
        )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.fork_at is not None:
        return _fork(args, records)
    viewer: int | None | str = "all"
    if args.seat is not None or args.spectator:
        viewer = None if args.spectator else args.seat
        seats = records[0].data.get("seats")  # the header's seat count
        if isinstance(viewer, int) and isinstance(seats, int) and not 0 <= viewer < seats:
            print(f"error: no seat {viewer}", file=sys.stderr)
            return 2
    words = Words(engine.game)
    names = seat_names(records)
    for rec, ts in zip(records, times, strict=True):
        shown = rec
        if viewer != "all" and rec.type == "event":
            event = engine.codec.event_from_wire(rec.data["event"], rec.data.get("v"))
            redacted = engine.codec.event_to_wire(engine.game.redact(event, viewer))
            shown = Record(rec.seq, rec.type, {**rec.data, "event": redacted})
        if viewer != "all" and rec.type == "header":
            shown = Record(rec.seq, rec.type, {**rec.data, "seed": None})
        if args.raw:
            lines = [f"{rec.type:<10}  {_summary(engine, shown)}"]
        else:
            body = shown.data.get("event") if rec.type == "event" else shown.data
            text = words.record(rec.type, body, None if viewer == "all" else viewer, names)
            if not text:
                continue
            lines = text.splitlines()
        pad = " " * 21
        for i, line in enumerate(lines):
            line = f"{rec.seq:>5}  {ts[11:23]}  {line}" if i == 0 else f"{pad}{line}"
            print(line if len(line) <= args.width else line[: args.width - 1] + "…")
    return 0


def seat_names(records: list[Record]) -> list[str]:
    """Each seat's name as the timeline's texts use it, from the log's ``seat_taken`` records
    (:func:`host.table.words.display_names`; the header gives the number of seats)."""
    seats = records[0].data.get("seats") if records else None
    found: list[str | None] = [None] * (seats if isinstance(seats, int) and seats > 0 else 0)
    for rec in records:
        seat = rec.data.get("seat")
        if rec.type == "seat_taken" and isinstance(seat, int) and 0 <= seat < len(found):
            found[seat] = str(rec.data.get("name") or "")
    return display_names(found)
