"""Where session logs live, one module a part:

- ``host.store.base``: the :class:`Store` interface and its contract, the store errors,
  :class:`StoreStatistics`, the checks and encoding every store's appends share, and the
  writer-thread life of the file and PostgreSQL stores;
- ``host.store.file``: :class:`~host.store.file.FileStore`, the embedded default (one JSON-lines
  file per session), and reading and folding log files;
- ``host.store.wal``: the file store's write-ahead log (one shared log of every session's appends,
  synced once per batch), its checkpoints and its recovery;
- ``host.store.memory``: :class:`~host.store.memory.MemoryStore`, the same rules in memory;
- ``host.store.pg``: :class:`~host.store.pg.PostgresStore`, every log as rows of one database;
- ``host.store.feed``: the feed of notices and leases for many hosts.

This package gives the interface, the errors and :func:`open_store`; importing it (or
``host.store.memory``) loads neither the file store nor psycopg.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from host.store.base import Conflict, CorruptLog, Store, StoreClosed, UnknownSession

if TYPE_CHECKING:
    from host.store.file import FsyncMode

__all__ = [
    "Conflict",
    "CorruptLog",
    "Store",
    "StoreClosed",
    "UnknownSession",
    "open_store",
]


def open_store(spec: str | Path, *, fsync: FsyncMode = "batch", exclusive: bool = False) -> Store:
    """The store a ``--store`` value names: a ``postgresql://`` or ``postgres://`` URL is a
    :class:`host.store.pg.PostgresStore` (nothing connects yet: see its ``check``); anything
    else is a data dir for a :class:`~host.store.file.FileStore` (``fsync`` and ``exclusive`` are
    its arguments, ignored for a database).

    Raises:
        ValueError: a URL of another scheme, or a PostgreSQL URL libpq cannot parse.
        OSError: the data dir cannot be made.
    """
    text = str(spec)
    if text.startswith(("postgresql://", "postgres://")):
        from host.store.pg import PostgresStore  # psycopg loads only where a database is used

        return PostgresStore(text)
    if "://" in text:
        raise ValueError(f"unsupported store URL {text!r}: use postgresql://... or a data dir")
    from host.store.file import FileStore

    return FileStore(text, fsync, exclusive=exclusive)
