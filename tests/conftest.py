"""Shared fixtures: an in-process host on 127.0.0.1 port 0 with the test game registered.

The host fixture and the bots are the plugin kit's (:mod:`host.testing`); these wrappers only
make the toy game the default.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, settings

from host import logs
from host.plugins.registry import Registry, load_registry
from host.store.file import read_log
from host.table.engine import Record
from host.testing import RunningHost
from host.testing import hosting as testing
from protocol import messages
from tests.toy import Plugin

logs.CACHE = False  # capture_logs must see loggers used before a test reconfigured logging
logs.configure(json=True, level="warning")

pytest_plugins = ["host.testing.pytest_plugin"]  # the kit's game_host fixture (serves the toy)

# Property tests run the same examples on every machine: CI never flakes on a rare draw, and a
# failure seen once is seen again. HYPOTHESIS_PROFILE=explore searches new examples. No
# per-example deadline: a shared, loaded machine made a 200 ms deadline fail at random (speed is
# measured by gamehost bench, never asserted in a test).
settings.register_profile(
    "ci",
    derandomize=True,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def error_replies_match_the_table() -> Iterator[list[tuple[str, dict[str, object]]]]:
    """Every error reply a test provokes is held to ``protocol.messages.ERRORS`` (the source of
    PROTOCOL.md's error table): a code it does not list, an extra field it does not declare, or
    a declared one missing fails the test that provoked it."""
    seen: list[tuple[str, dict[str, object]]] = []
    previous = messages.error_reply_hook
    messages.error_reply_hook = lambda code, extra: seen.append((code, extra))
    try:
        yield seen
    finally:
        messages.error_reply_hook = previous
    problems = [p for code, extra in seen for p in messages.extra_problems(code, extra)]
    assert not problems, f"error replies that PROTOCOL.md does not describe: {problems}"


def toy_registry() -> Registry:
    return load_registry([("toy", Plugin())], entrypoints=False)


async def start_host(
    nursery: trio.Nursery,
    data_dir: Path,
    registry: Registry | None = None,
    *,
    wait_loaded: bool = True,
    **config: object,
) -> RunningHost:
    """:func:`host.testing.start_host` with the test game (High Card) as the default registry."""
    return await testing.start_host(
        nursery, data_dir, registry or toy_registry(), wait_loaded=wait_loaded, **config
    )


@pytest.fixture
async def toy_host(tmp_path: Path) -> AsyncIterator[RunningHost]:
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path)
        yield running
        running.host.request_shutdown()


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The URL of the ``postgres`` database of a throwaway cluster shared by the test run
    (tests/pg.py); skips the test where no PostgreSQL server binaries exist."""
    from tests import pg

    return pg.shared_cluster().url()


@pytest.fixture
def pg_store_url(pg_dsn: str) -> str:
    """A new database of its own for this test, with the gamehost schema; its URL."""
    from tests import pg

    return pg.fresh_url()


@pytest.fixture
def gamehost_registry() -> Registry:
    """The registry of the kit's ``game_host`` fixture: the toy game only."""
    return toy_registry()


def log_of(data_dir: Path, sid: str) -> list[Record]:
    """A session's log in ``data_dir``, as records."""
    return [Record.from_json(r) for r in read_log(data_dir / "sessions" / f"{sid}.jsonl")]
