"""``gamehost serve --workers N``: worker processes sharing one port."""

from __future__ import annotations

import fcntl
import math
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import termios
import time

import orjson
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from host.net import workers
from host.net.workers import reserve_port, reuse_port_listeners
from tools.cli import main
from tools.client import Client


def test_workers_need_a_shared_store(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    assert main(["serve", "--workers", "2", "--port", "0", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "gamehost serve: error: --workers above 1 needs a PostgreSQL --store (the file store"
        " serves one process)"
    ]
    assert not (tmp_path / "sessions").exists()  # nothing started


async def test_listeners_with_reuse_port_share_a_port() -> None:
    reserved = reserve_port("127.0.0.1", 0)
    port = reserved.getsockname()[1]
    try:
        with pytest.raises(OSError):  # without SO_REUSEPORT the port is taken
            plain = socket.socket()
            try:
                plain.bind(("127.0.0.1", port))
            finally:
                plain.close()
        first = await reuse_port_listeners("127.0.0.1", port)
        second = await reuse_port_listeners("127.0.0.1", port)
        got = []
        async with trio.open_nursery() as n:

            async def serve(listeners: list[trio.SocketListener], name: bytes) -> None:
                async def handler(stream: trio.SocketStream) -> None:
                    await stream.send_all(name)
                    await stream.aclose()

                await trio.serve_listeners(handler, listeners)

            n.start_soon(serve, first, b"1")
            n.start_soon(serve, second, b"2")
            for _ in range(40):  # the kernel spreads connections over both
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                got.append(await stream.receive_some(1))
                await stream.aclose()
                if {b"1", b"2"} <= set(got):
                    break
            n.cancel_scope.cancel()
        assert set(got) == {b"1", b"2"}
    finally:
        reserved.close()


async def test_two_workers_share_a_port_on_postgres(pg_store_url: str) -> None:
    """``serve --workers 2``: two host processes on one port, one store; a worker that dies is
    started again; SIGTERM to the parent stops them all cleanly."""
    argv = [sys.executable, "-m", "tools.cli", "serve", "--workers", "2", "--port", "0"]
    argv += ["--store", pg_store_url, "--log-format", "json"]
    proc = await trio.lowlevel.open_process(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines: trio.MemorySendChannel[dict]
    lines, events = trio.open_memory_channel[dict](math.inf)

    async def pump() -> None:
        buf = b""
        assert proc.stderr is not None
        async with lines:
            while chunk := await proc.stderr.receive_some(65536):
                buf += chunk
                *done, buf = buf.split(b"\n")
                for line in done:
                    lines.send_nowait(orjson.loads(line))

    async def until(event: str, n: int = 1) -> list[dict]:
        got = []
        with trio.fail_after(60):
            async for msg in events:
                if msg.get("event") == event:
                    got.append(msg)
                    if len(got) == n:
                        return got
        raise AssertionError(f"no {event} line")

    try:
        async with trio.open_nursery() as n:
            n.start_soon(pump)
            started = await until("worker_started", 2)
            ports = {m["port"] for m in await until("listening", 2)}
            assert len(ports) == 1
            port = ports.pop()
            a = await Client.connect("127.0.0.1", port)
            a.start(n)
            created = await a.call("create", game="crazy-eights", seats=2, bots=1)
            clients = []
            for _ in range(6):  # connections land on both workers; each knows the session
                c = await Client.connect("127.0.0.1", port)
                c.start(n)
                clients.append(c)
                page = await c.call("sessions")
                assert [s["session"] for s in page["sessions"]] == [created["session"]]
            os.kill(started[0]["pid"], signal.SIGKILL)  # a worker dies: it is started again
            again = await until("worker_started")
            assert again[0]["worker"] == started[0]["worker"]
            assert (await until("listening"))[0]["port"] == port
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                assert await proc.wait() == 0
            n.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _worker_argv() -> list[str]:
    return [sys.executable, "-m", "tools.cli", "serve", "--reuse-port", "--port", "0"]


def _read_until(stream, event: str) -> dict:
    """The first JSON log line of ``event`` on a worker's stderr (blocking; the test's own
    timeout guards it)."""
    for raw in stream:
        try:
            msg = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if msg.get("event") == event:
            return msg
    raise AssertionError(f"the worker ended without a {event} line")


def test_a_worker_outlives_the_thread_that_started_it(tmp_path) -> None:
    """trio starts processes from a worker thread that ends after 10 idle seconds; a worker
    must not be tied to that thread (PR_SET_PDEATHSIG was: every worker stopped 10 s after
    its start). Here the starting thread ends at once, and the worker still serves."""
    import threading

    argv = _worker_argv() + ["--data-dir", str(tmp_path), "--log-format", "json"]
    started: list[subprocess.Popen[bytes]] = []
    t = threading.Thread(
        target=lambda: started.append(subprocess.Popen(argv, **workers.spawn_options()))  # type: ignore[call-overload]
    )
    t.start()
    t.join()  # the thread that started the worker is gone
    proc = started[0]
    try:
        port = _read_until(proc.stderr, "listening")["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b'{"id":1,"op":"ping"}\n')
            assert orjson.loads(s.makefile("rb").readline())["ok"] is True
        assert proc.poll() is None
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def test_a_worker_stops_when_its_supervisor_dies(tmp_path) -> None:
    """A worker whose supervisor is SIGKILLed stops by itself, cleanly."""
    argv = _worker_argv() + ["--data-dir", str(tmp_path), "--log-format", "json"]
    middle = (
        "import subprocess, sys; from host.net import workers; "
        f"p = subprocess.Popen({argv!r}, env=workers.worker_env(__import__('os').getpid())); "
        "print(p.pid, flush=True); p.wait()"
    )
    sup = subprocess.Popen(
        [sys.executable, "-c", middle], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert sup.stdout is not None and sup.stderr is not None
        int(sup.stdout.readline())
        _read_until(sup.stderr, "listening")  # the worker's log comes through our pipe
        sup.kill()  # the supervisor dies; the worker keeps our pipe open until it stops
        assert _read_until(sup.stderr, "stopped")["event"] == "stopped"
    finally:
        sup.kill()
        sup.wait()


def _free_ports(n: int) -> int:
    """A port P such that P .. P + n - 1 were free a moment ago."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            for p in range(base, base + n):
                with socket.socket() as t:
                    t.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base
    raise AssertionError("no run of free ports")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def _scrape(port: int) -> str:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = b""
        while data := await stream.receive_some(65536):
            got += data
    return got.partition(b"\r\n\r\n")[2].decode()


def test_ctrl_c_on_the_terminal_stops_every_worker_and_exits_0(pg_store_url: str) -> None:
    """``serve --workers 2`` on a terminal (a pseudo-terminal here, its controlling one): one
    log format on it (the workers' lines too are the console's, not JSON), each worker serves
    its own metrics port, and Ctrl-C (the tty's interrupt character) stops both workers; the
    supervisor exits 0 within the shutdown time."""
    base = _free_ports(2)
    argv = [sys.executable, "-m", "tools.cli", "serve", "--workers", "2", "--port", "0"]
    argv += ["--store", pg_store_url, "--metrics", str(base)]
    master, slave = pty.openpty()

    def controlling_tty() -> None:  # after setsid: the pty becomes this session's terminal
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=controlling_tty,
        env={**os.environ, "COLUMNS": "200", "TERM": "xterm"},
    )
    os.close(slave)
    out = b""

    def read_until(pattern: bytes, count: int, seconds: float) -> None:
        nonlocal out
        end = time.monotonic() + seconds
        while out.count(pattern) < count:
            assert time.monotonic() < end, f"no {pattern!r} x{count} in {out.decode()[-3000:]}"
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    out += os.read(master, 65536)
                except OSError:  # the terminal's other side closed: everything is read
                    return

    try:
        read_until(b"listening_metrics", 2, 90)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.decode(errors="replace"))  # no colours
        lines = [line for line in text.splitlines() if line.strip()]
        assert not [line for line in lines if line.lstrip().startswith("{")], text
        pids = [int(p) for p in re.findall(r"worker_started .*?pid=(\d+)", text)]
        assert len(pids) == 2, text
        assert "worker=" in text  # the workers' own lines say which worker wrote them

        async def both() -> list[str]:
            return [await _scrape(base), await _scrape(base + 1)]

        pages = trio.run(both)
        workers_seen = set()
        for page in pages:
            for family in text_string_to_metric_families(page):
                if family.name == "gamehost_host_info":
                    workers_seen |= {s.labels["worker"] for s in family.samples}
        assert workers_seen == {"0", "1"}
        t0 = time.monotonic()
        os.write(master, b"\x03")  # Ctrl-C
        assert proc.wait(timeout=60) == 0, out.decode()[-3000:]
        took = time.monotonic() - t0
        assert took < 30, took  # within the shutdown time (each worker: 5 s of grace at most)
        read_until(b"\n", 10**9, 2)
        assert all(_gone(pid) for pid in pids)
        assert b"workers_killed" not in out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)


@pytest.mark.parametrize("how", ["SIGINT to the group", "SIGTERM"])
def test_a_signal_stops_every_worker_and_exits_0(pg_store_url: str, how: str) -> None:
    """SIGINT to the supervisor's process group (what a Ctrl-C sends), or SIGTERM to the
    supervisor (what a service manager sends): exit status 0, both workers gone."""
    import time

    argv = [sys.executable, "-m", "tools.cli", "serve", "--workers", "2", "--port", "0"]
    argv += ["--store", pg_store_url, "--log-format", "json"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    pids, listening = [], 0
    try:
        for raw in proc.stderr:
            msg = orjson.loads(raw)
            if msg["event"] == "worker_started":
                pids.append(msg["pid"])
            listening += msg["event"] == "listening"
            if listening == 2:
                break
        assert len(pids) == 2
        t0 = time.monotonic()
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, rest.decode()[-3000:]
        assert time.monotonic() - t0 < 30
        events = [orjson.loads(line)["event"] for line in rest.splitlines() if line.strip()]
        assert events.count("stopped") == 3  # each worker's host, then the supervisor
        assert "workers_killed" not in events
        assert all(_gone(pid) for pid in pids)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_with_workers_the_metrics_port_must_be_a_number(pg_store_url: str, capsys) -> None:
    argv = ["serve", "--workers", "2", "--port", "0", "--store", pg_store_url, "--metrics", "0"]
    assert main(argv) == 2
    assert "--metrics needs a port number" in capsys.readouterr().err
