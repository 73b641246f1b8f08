"""``serve --metrics``: the Prometheus page, read with the library's own parser, moves with what
the host does; faults, overruns and failed observers are counted where they happen."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from host.game import hookimpl
from host.net.metrics import Metrics, _quantile
from host.plugins.registry import load_registry
from host.store.feed import MemoryHub
from tests import broken_games
from tests.conftest import start_host
from tests.host.test_budget import deal, ended_push
from tests.host.test_multi_host import Shared, _host_nursery, client, start_shared
from tests.host.test_server import new_session
from tests.wsclient import ws_client
from tools.client import Client

ROOT = Path(__file__).resolve().parents[2]


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a page, parsed by ``prometheus_client.parser``: (name, sorted labels)
    -> value."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            assert isinstance(s, Sample)
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(got: dict, name: str, **labels: str) -> float:
    return got.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, str]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        request = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        await stream.send_all(request.encode())
        got = b""
        while data := await stream.receive_some(65536):
            got += data
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


class ServedHost:
    """``gamehost serve --port 0 --http 0 --metrics 0`` in a subprocess."""

    def __init__(self, data_dir: Path) -> None:
        cmd = [sys.executable, "-m", "tools.cli", "serve", "--port", "0", "--http", "0"]
        cmd += ["--metrics", "0", "--data-dir", str(data_dir), "--log-format", "json"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, cwd=ROOT)
        ports: dict[str, int] = {}
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            msg = orjson.loads(line)
            if msg["event"] in ("listening", "listening_http", "listening_metrics"):
                ports[msg["event"]] = msg["port"]
            if len(ports) == 3:
                break
        assert len(ports) == 3, f"the host did not start: {ports}"
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.port = ports["listening"]
        self.http = ports["listening_http"]
        self.metrics = ports["listening_metrics"]

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=60)


@pytest.fixture
def served(tmp_path: Path):
    host = ServedHost(tmp_path)
    yield host
    if host.proc.poll() is None:
        host.stop()


async def test_a_served_host_counts_what_it_does_and_the_page_parses(served: ServedHost):
    status, page = await scrape(served.metrics)
    assert status == 200
    before = samples(page)
    assert value(before, "gamehost_actions_total", game="crazy-eights") == 0
    assert value(before, "gamehost_append_seconds_count") == 0
    info = [k for k in before if k[0] == "gamehost_host_info"]
    assert len(info) == 1 and dict(info[0][1])["worker"] == ""
    async with trio.open_nursery() as n:
        c = await Client.connect("127.0.0.1", served.port)
        c.start(n)
        ws = await ws_client(n, served.http)
        # a table of bots plays to its end at once, watched over the WebSocket
        made = await c.call("create", game="crazy-eights", seats=2, bots=2, options={"target": 20})
        snap = await ws.call("watch", session=made["session"])
        while not snap["ended"]:
            p = await ws.next_push()
            assert p is not None
            if p["push"] == "ended":
                break
        # one table waits for a player: live
        await c.call("create", game="crazy-eights", seats=2, bots=1)
        _, page = await scrape(served.metrics)
        after = samples(page)
        assert value(after, "gamehost_connections", kind="tcp") == 1
        assert value(after, "gamehost_connections", kind="websocket") == 1
        assert value(after, "gamehost_connections_opened_total", kind="websocket") == 1
        n.cancel_scope.cancel()
    actions = value(after, "gamehost_actions_total", game="crazy-eights")
    assert actions > 0
    assert value(after, "gamehost_sessions_created_total", game="crazy-eights") == 2
    assert value(after, "gamehost_sessions_ended_total", game="crazy-eights", how="played") == 1
    assert value(after, "gamehost_sessions_live", game="crazy-eights") == 1
    assert value(after, "gamehost_sessions_live", game="around-the-world") == 0
    appends = value(after, "gamehost_append_seconds_count")
    assert 0 < appends <= actions + 10  # bots' moves go in batches; seats and headers too
    assert value(after, "gamehost_append_seconds_bucket", le="+Inf") == appends
    assert value(after, "gamehost_store_fsync_seconds_count") > 0
    assert value(after, "gamehost_store_errors_total", op="append") == 0
    assert value(after, "process_resident_memory_bytes") > 0
    # the same page on the HTTP listener, for the operator on this machine
    status, page = await scrape(served.http)
    assert status == 200 and "gamehost_actions_total" in page
    # the metrics port serves the page only
    assert (await scrape(served.metrics, "/nothing"))[0] == 404
    assert (await scrape(served.metrics, method="POST"))[0] == 405
    assert served.stop() == 0


async def test_faults_overruns_and_failing_observers_are_counted(tmp_path: Path):
    class Observer:
        @hookimpl
        def gamehost_event_appended(self, session: str, record: dict[str, Any]) -> None:
            raise RuntimeError("planted bug in an observer")

    registry = load_registry(
        [("toy", broken_games.Plugin(broken_games.DecideLoops())), ("obs", Observer())],
        entrypoints=False,
    )
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry, game_time=0.3, turn_timeout=None)
        m = running.host.metrics
        sid, (a, b) = await deal(running)
        assert m.plugin_faults[("high-card", "observer")] >= 3  # header, seats: each failed
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        end = await ended_push(a)
        assert end["aborted"] == "game_error"
        assert m.budget_overruns[("high-card", "time")] == 1  # an overrun, not a "command"
        assert m.plugin_faults[("high-card", "command")] == 0
        assert m.plugin_faults[("high-card", "session")] == 1
        assert m.sessions_ended[("high-card", "game_error")] == 1
        page = samples(m.page().decode())
        assert value(page, "gamehost_game_budget_overruns_total", game="high-card", budget="time")
        running.host.request_shutdown()


async def test_a_command_the_games_code_fails_is_a_plugin_fault(tmp_path: Path):
    registry = load_registry(
        [("toy", broken_games.Plugin(broken_games.DecideRaises()))], entrypoints=False
    )
    async with trio.open_nursery() as n:
        running = await start_host(n, tmp_path, registry, turn_timeout=None)
        sid, (a, _) = await deal(running)
        r = await a.request("act", session=sid, action={"type": "swap"})
        assert r["error"]["code"] == "internal"
        r = await a.request("act", session=sid, action={"type": "nonsense"})
        assert r["error"]["code"] != "internal"  # a client's bad action is no fault
        m = running.host.metrics
        assert m.plugin_faults == {("high-card", "command"): 1}
        running.host.request_shutdown()


def test_the_quantile_estimate_is_the_bound_of_the_bucket_that_holds_it():
    m = Metrics(process=False)
    assert _quantile(m.append_seconds, 0.5) is None
    for seconds in [0.0004] * 90 + [0.2] * 10:
        m.append_seconds.observe(seconds)
    assert _quantile(m.append_seconds, 0.5) == 0.0005
    assert _quantile(m.append_seconds, 0.99) == 0.25
    m.append_seconds.observe(100)  # past the last bound: the largest finite one
    assert _quantile(m.append_seconds, 1.0) == 10.0
    summary = m.summary()
    assert summary["append_p50"] == 0.0005 and summary["sessions_live"] == {}


async def test_a_lease_taken_over_from_a_dead_host_is_counted(tmp_path: Path):
    hub = Shared(hub=MemoryHub())
    async with trio.open_nursery() as n:
        nurseries, hosts = [], []
        for name in "ab":
            nurseries.append(await n.start(_host_nursery))
            hosts.append(await start_shared(nurseries[-1], hub, tmp_path / name, bot_delay=1.0))
        sid = await new_session(await client(n, hosts[0]), seats=3, bots=3, rounds=2)
        watcher = await client(n, hosts[1])
        await watcher.call("watch", session=sid)  # b follows it too
        with trio.fail_after(10):
            while not any(h.host.sessions[sid].driver for h in hosts):
                await trio.sleep(0.01)
        drivers = [h for h in hosts if h.host.sessions[sid].driver]
        assert len(drivers) == 1
        dead = hosts.index(drivers[0])
        alive = hosts[1 - dead].host
        assert drivers[0].host.metrics.leases_taken == 1
        assert drivers[0].host.metrics.lease_takeovers == 0
        assert alive.metrics.leases_taken == 0
        nurseries[dead].cancel_scope.cancel()  # the driver dies, its lease with it
        with trio.fail_after(20):
            while not alive.sessions[sid].driver:
                await trio.sleep(0.05)
        assert (alive.metrics.leases_taken, alive.metrics.lease_takeovers) == (1, 1)
        page = samples(alive.metrics.page().decode())
        assert value(page, "gamehost_lease_takeovers_total") == 1
        assert value(page, "gamehost_sessions_driven") == 1
        n.cancel_scope.cancel()
