"""An in-process host for tests: a real TCP server on 127.0.0.1, port 0, in the test's nursery.

A plugin's own tests start one with the games they want (:func:`registry_of`) and talk to it
with :class:`host.net.client.Client` exactly as a remote client would::

    async def test_a_session(tmp_path):
        async with trio.open_nursery() as nursery:
            running = await start_host(nursery, tmp_path, registry_of(MyGame()))
            client = await running.client()
            ...
            running.host.request_shutdown()

Needs trio (a host dependency) and a trio test runner (pytest-trio, in ``gamehost[test]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from host.game import hookimpl
from host.net.server import Host, HostConfig, run_host
from host.plugins.registry import Registry, load_registry

__all__ = ["RunningHost", "installed_registry", "registry_of", "start_host"]


@attrs.define
class RunningHost:
    """A host started by :func:`start_host`.

    Attributes:
        host: the :class:`~host.net.server.Host` (``host.request_shutdown()`` stops it).
        port: the TCP port it listens on (127.0.0.1).
        data_dir: its data directory (session logs under ``sessions/``).
        nursery: the nursery it runs in; :meth:`client` starts clients' readers there.
    """

    host: Host
    port: int
    data_dir: Path
    nursery: trio.Nursery

    async def client(self, *, answer_pings: bool = True) -> Any:
        """A connected :class:`host.net.client.Client` whose reader runs in :attr:`nursery`
        (``answer_pings``: see :class:`~host.net.client.Client`)."""
        from host.net.client import Client  # the clients' side: the host itself never needs it

        c = await Client.connect("127.0.0.1", self.port, answer_pings=answer_pings)
        c.start(self.nursery)
        return c


class _Games:
    """A plugin object offering the given game objects (for :func:`registry_of`)."""

    def __init__(self, games: tuple[Any, ...]) -> None:
        self._games = games

    @hookimpl
    def gamehost_register_games(self) -> list[Any]:
        return list(self._games)


def registry_of(*games: Any) -> Registry:
    """A registry holding exactly these game objects (no installed entry points).

    Raises:
        ValueError: two games share an id (as :func:`~host.plugins.registry.load_registry` does).
    """
    return load_registry([("testing", _Games(games))], entrypoints=False)


def installed_registry() -> Registry:
    """The registry ``gamehost serve`` would load: every installed ``gamehost`` entry point."""
    return load_registry()


async def start_host(
    nursery: trio.Nursery,
    data_dir: Path,
    registry: Registry | None = None,
    *,
    wait_loaded: bool = True,
    **config: object,
) -> RunningHost:
    """Start a host on 127.0.0.1 port 0 in ``nursery``; with ``wait_loaded`` return once it has
    loaded the sessions in ``data_dir`` (it listens before that).

    Args:
        nursery: where the host runs (cancel it, or ``host.request_shutdown()``, to stop it).
        data_dir: the host's data directory.
        registry: the games (default: every installed game, :func:`installed_registry`).
        wait_loaded: wait until the sessions on disk are loaded.
        **config: any :class:`~host.net.server.HostConfig` field. Connection timeouts, and the
            ping of seated connections (``ping_after``), are off unless given: under
            ``autojump_clock`` virtual time leaps while the store's thread works, and idle test
            clients would be hung up on.
    """
    config = {"idle_timeout": None, "line_timeout": None, "ping_after": None, **config}
    cfg = HostConfig(data_dir=data_dir, port=0, **config)  # type: ignore[arg-type]
    registry = registry or installed_registry()
    host, port = await nursery.start(
        lambda task_status: run_host(cfg, registry, handle_signals=False, task_status=task_status)
    )
    if wait_loaded:
        await host.loaded.wait()
    return RunningHost(host, port, data_dir, nursery)
