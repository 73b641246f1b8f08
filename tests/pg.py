"""Throwaway PostgreSQL clusters for tests: ``initdb`` + ``pg_ctl`` into a temporary folder.

The server binaries are looked for in Debian's versioned folders (``/usr/lib/postgresql/*/bin``,
newest first), then on the PATH. ``initdb`` refuses to run as root, so as root the cluster is
made and run by the ``postgres`` user (``runuser -u postgres --``) in a folder that user owns.
Where no binaries exist the tests that need one are skipped, saying so; CI installs them.

- :func:`shared_cluster` starts one cluster for the whole test run (stopped at exit);
- :func:`fresh_url` makes a new database on it with the gamehost schema (from a template
  database, so each costs a file copy, not a migration) and returns its URL;
- :class:`Cluster` can also be started on its own, for a test that restarts or stops it.

The fixtures ``pg_dsn`` and ``pg_store_url`` (tests/conftest.py) wrap the first two.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from host.store.pg import migrate

TEMPLATE = "gamehost_template"


def server_bin() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    for found in sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
        reverse=True,
    ):
        return Path(found).parent
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb") and shutil.which("postgres"):
        return Path(on_path).parent
    return None


def skip_reason() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if server_bin() is None:
        return (
            "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin or initdb/pg_ctl on the"
            " PATH): apt-get install postgresql"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run initdb as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One throwaway cluster on 127.0.0.1 and a free port; :meth:`start` it, :meth:`stop` it
    (and its folder goes)."""

    def __init__(self) -> None:
        bin_dir = server_bin()
        assert bin_dir is not None, skip_reason()
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="gamehost-pg-"))
        self.data = self.dir / "data"
        self.port = 0
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._names = itertools.count(1)

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=120)

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl -D <data> ...`` as the cluster's user."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), *args)

    def start(self) -> Cluster:
        """initdb (first time) and start the server; tries a few ports. Returns self."""
        if not self.data.exists():
            self._run(
                str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                "-E", "UTF8", "--no-sync",
            )  # fmt: skip
        for attempt in range(5):
            self.port = self.port or _free_port()
            opts = (
                f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}"
                " -c fsync=off -c full_page_writes=off -c max_connections=200"
            )
            try:
                log = str(self.dir / "server.log")
                self.pg_ctl("-w", "-t", "60", "-l", log, "-o", opts, "start")
                return self
            except subprocess.CalledProcessError:
                if attempt == 4:
                    raise
                self.port = 0  # taken meanwhile: another port
        return self

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is dropped, the data stays."""
        log = str(self.dir / "server.log")  # not pg_ctl's stdout, which the server would hold
        self.pg_ctl("-w", "-t", "60", "-l", log, "-m", "fast", "restart")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``, or ``immediate``: as if it crashed)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.pg_ctl("-w", "-m", mode, "stop")

    def destroy(self) -> None:
        """Stop the server and remove its folder."""
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        """The URL of a database of this cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def new_database(self, schema: bool = True) -> str:
        """Make a new empty database (with the gamehost schema unless ``schema`` is False) and
        return its URL."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            if schema:
                made = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [TEMPLATE]
                ).fetchone()
                if not made:
                    conn.execute(f"CREATE DATABASE {TEMPLATE}")
                    migrate(self.url(TEMPLATE))
                conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
            else:
                conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


_shared: Cluster | None = None


def shared_cluster() -> Cluster:
    """The test run's cluster, started on first use (skips the test where none can run)."""
    global _shared
    reason = skip_reason()
    if reason is not None:
        if os.environ.get("CI"):  # .ci/run installs the server: a skip there would hide tests
            pytest.fail(f"CI cannot run the database tests: {reason}")
        pytest.skip(reason)
    if _shared is None:
        cluster = Cluster()
        atexit.register(cluster.destroy)
        _shared = cluster.start()
    return _shared


def fresh_url() -> str:
    """A new database with the gamehost schema on the shared cluster."""
    return shared_cluster().new_database()
