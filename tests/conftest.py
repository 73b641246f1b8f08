"""Shared fixtures: an in-process host on 127.0.0.1 port 0 with the test game registered."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import settings

from host import logs
from host.registry import Registry, load_registry
from host.server import Host, HostConfig, run_host
from protocol import messages
from tests.toy import Plugin
from tools.client import Client

logs.configure(json=True, level="warning")

# Property tests run the same examples on every machine: CI never flakes on a rare draw, and a
# failure seen once is seen again. HYPOTHESIS_PROFILE=explore searches new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
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


@attrs.define
class RunningHost:
    host: Host
    port: int
    data_dir: Path
    nursery: trio.Nursery

    async def client(self) -> Client:
        c = await Client.connect("127.0.0.1", self.port)
        c.start(self.nursery)
        return c


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
    """An in-process host on 127.0.0.1 port 0 (the test game only, unless ``registry``); with
    ``wait_loaded`` once it has loaded the sessions in ``data_dir`` (it listens before that).

    Connection timeouts are off unless a test asks for them: under ``autojump_clock`` virtual
    time leaps while the store's thread works, and idle test clients would be hung up on.
    """
    config = {"idle_timeout": None, "line_timeout": None, **config}
    cfg = HostConfig(data_dir=data_dir, port=0, **config)  # type: ignore[arg-type]
    registry = registry or toy_registry()
    host, port = await nursery.start(
        lambda task_status: run_host(cfg, registry, handle_signals=False, task_status=task_status)
    )
    if wait_loaded:
        await host.loaded.wait()
    return RunningHost(host, port, data_dir, nursery)


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
