"""pytest fixtures of the plugin kit. Enable them in a ``conftest.py``::

    pytest_plugins = ["host.testing.pytest_plugin"]

Fixtures:

``gamehost_registry``
    the games the host offers: every installed game (:func:`~host.testing.installed_registry`).
    Override it in your ``conftest.py`` to test a game that is not installed::

        @pytest.fixture
        def gamehost_registry():
            return registry_of(MyGame())

``game_host``
    a running host (:class:`~host.testing.RunningHost`) on 127.0.0.1 port 0 with a fresh data
    directory, shut down after the test. An async fixture: run the tests with pytest-trio
    (``trio_mode = true``, or mark them ``@pytest.mark.trio``)::

        async def test_my_game_is_listed(game_host):
            client = await game_host.client()
            reply = await client.request("games")
            ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from host.plugins.registry import Registry
from host.testing.hosting import RunningHost, installed_registry, start_host


@pytest.fixture
def gamehost_registry() -> Registry:
    """Every installed game; override to choose the games of :func:`game_host`."""
    return installed_registry()


@pytest.fixture
async def game_host(tmp_path: Path, gamehost_registry: Registry) -> AsyncIterator[RunningHost]:
    """A host on 127.0.0.1 port 0 serving ``gamehost_registry``, data in ``tmp_path``."""
    async with trio.open_nursery() as nursery:
        running = await start_host(nursery, tmp_path / "gamehost", gamehost_registry)
        yield running
        running.host.request_shutdown()
