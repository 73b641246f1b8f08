"""A throwaway PostgreSQL cluster for tests (temporary: the shared fixture replaces it)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    bindir = _bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (initdb) on this machine")
    root = tempfile.mkdtemp(prefix="gh-pg-")
    data = os.path.join(root, "data")
    pre: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        pre = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(
        [*pre, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *pre,
            f"{bindir}/pg_ctl",
            "-D",
            data,
            "-l",
            f"{root}/log",
            "-w",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*pre, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)
