"""``gamehost serve --workers N``: N host processes on one machine sharing one port.

One host process runs on one trio thread, so it uses one core. With a store several hosts can
share (PostgreSQL: see ``host.store.feed``), ``--workers N`` starts N host processes that listen
on the same address and port with ``SO_REUSEPORT``: the kernel spreads new connections over them,
and each serves any session. Each worker is a host of its own on the database: it drives the
sessions it owns (rendezvous hashing over the hosts the database lists, workers and other
machines' hosts alike) and creates sessions under ids it owns; a session whose seats are all
held from one other worker is driven there instead (the kernel may send a table's creator and
its players to different workers); and a worker keeps another's session in memory only while
one of its own connections uses it. Two workers so do about half the work each rather than all
of it twice (see ``host.store.feed``).

The parent process only supervises: it picks the port (with ``--port 0`` it binds a socket of
its own with ``SO_REUSEPORT`` to get a free port, and keeps it, not listening, so that no other
program takes the port while a worker restarts), starts the workers (``gamehost serve`` with the
same arguments plus ``--workers 1 --port P --reuse-port``), relays their log lines to its own
stderr whole (two workers' lines never interleave), forwards SIGTERM and SIGINT to them and
waits for them. A worker that exits by itself is started again after a delay doubling from
:data:`RESTART_DELAY` to :data:`RESTART_DELAY_MAX` seconds; one that exits with status 2 (a bad
flag, an unreachable store: it would fail again) stops the whole host with status 2. A worker
stops itself (SIGTERM to itself, so it shuts down cleanly) once its supervisor is gone
(:func:`watch_supervisor`: the supervisor's pid is in its environment, ``GAMEHOST_SUPERVISOR``).
Not ``PR_SET_PDEATHSIG``: that signal follows the *thread* that forked, and trio forks from a
worker thread that ends after 10 idle seconds, which stopped every worker 10 s after its start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import structlog
import trio

__all__ = [
    "RESTART_DELAY",
    "RESTART_DELAY_MAX",
    "reserve_port",
    "reuse_port_listeners",
    "supervise",
]

log = structlog.get_logger("gamehost.workers")

RESTART_DELAY = 0.5
"""Seconds before a worker that exited by itself is started again (doubling while it keeps
exiting soon after its start)."""
RESTART_DELAY_MAX = 30.0
"""The longest delay before a worker is started again, seconds."""
STOP_TIMEOUT = 30.0
"""Seconds the workers get to stop after SIGTERM before they are SIGKILLed."""


async def reuse_port_listeners(
    bind: str, port: int, backlog: int = 1024
) -> list[trio.SocketListener]:
    """Listening sockets on ``bind``:``port`` with ``SO_REUSEPORT`` (and ``SO_REUSEADDR``) set
    before ``bind``, so several processes can listen on one port (one per address family
    ``bind`` resolves to).

    Raises:
        OSError: the address cannot be resolved or bound (in use without ``SO_REUSEPORT``, not
            an address of this machine).
    """
    infos = await trio.socket.getaddrinfo(
        bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    listeners: list[trio.SocketListener] = []
    try:
        for family, kind, proto, _, sockaddr in infos:
            sock = trio.socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                await sock.bind(sockaddr)
                sock.listen(backlog)
            except BaseException:
                sock.close()
                raise
            listeners.append(trio.SocketListener(sock))
    except BaseException:
        for listener in listeners:
            await listener.aclose()
        raise
    return listeners


def reserve_port(bind: str, port: int) -> socket.socket:
    """A bound, not listening socket with ``SO_REUSEPORT`` on ``bind``:``port`` (0: a free
    port; read it with ``getsockname``), so workers can listen on that port and nothing else
    takes it meanwhile.

    Raises:
        OSError: as ``bind``.
    """
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((bind, port))
    except BaseException:
        sock.close()
        raise
    return sock


SUPERVISOR_ENV = "GAMEHOST_SUPERVISOR"
"""The environment variable that gives a worker its supervisor's pid."""


def worker_env(supervisor: int) -> dict[str, str]:
    """The environment of a worker of the supervisor with pid ``supervisor``."""
    return {**os.environ, SUPERVISOR_ENV: str(supervisor)}


def spawn_options() -> dict[str, object]:
    """How the supervisor starts a worker (``subprocess.Popen`` keyword arguments): no stdin,
    its log piped to the supervisor, the supervisor's pid in its environment."""
    return {"stdin": subprocess.DEVNULL, "stderr": subprocess.PIPE, "env": worker_env(os.getpid())}


def watch_supervisor(interval: float = 0.5) -> threading.Thread | None:
    """In a worker (``GAMEHOST_SUPERVISOR`` set): a daemon thread that sends this process
    SIGTERM once its parent is no longer that supervisor (it died and the worker was
    re-parented), checked every ``interval`` seconds. None when not a worker."""
    value = os.environ.get(SUPERVISOR_ENV, "")
    if not value.isdigit():
        return None
    supervisor = int(value)

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="gamehost-supervisor-watch", daemon=True)
    thread.start()
    return thread


class _Worker:
    def __init__(self, index: int, argv: list[str]) -> None:
        self.index = index
        self.argv = argv
        self.proc: trio.Process | None = None
        self.starts = 0


async def _relay(proc: trio.Process) -> None:
    """Copy a worker's stderr (its log) to ours in whole lines, so the workers' lines never
    interleave mid-line; returns at its end of file."""
    assert proc.stderr is not None
    out = sys.stderr.buffer
    rest = b""
    while True:
        try:
            chunk = await proc.stderr.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            chunk = b""
        if not chunk:
            break
        rest += chunk
        cut = rest.rfind(b"\n") + 1
        if cut:
            out.write(rest[:cut])
            out.flush()
            rest = rest[cut:]
    if rest:
        out.write(rest + b"\n")
        out.flush()


async def supervise(argv: list[str], workers: int) -> int:
    """Run ``workers`` processes of ``argv`` (a ``gamehost serve`` command line for one worker)
    until SIGTERM or SIGINT, forwarded to each; restart any that exits by itself.

    Returns:
        The exit status: 0 once every worker stopped cleanly after the signal; 2 if a worker
        exited with status 2 (it cannot start: a bad flag or store); else 1.
    """
    stopping = trio.Event()
    status = 0
    team = [_Worker(i, argv) for i in range(workers)]

    async def run(w: _Worker, nursery: trio.Nursery) -> None:
        nonlocal status
        delay = RESTART_DELAY
        while not stopping.is_set():
            w.starts += 1
            w.proc = await trio.lowlevel.open_process(w.argv, **spawn_options())  # type: ignore[arg-type]
            log.info("worker_started", worker=w.index, pid=w.proc.pid, starts=w.starts)
            started = trio.current_time()
            await _relay(w.proc)
            code = await w.proc.wait()
            if stopping.is_set():
                if code != 0:
                    status = max(status, 1)
                return
            log.error("worker_exited", worker=w.index, pid=w.proc.pid, status=code)
            if code == 2:
                status = 2
                stopping.set()
                for other in team:
                    if other.proc is not None and other.proc.returncode is None:
                        other.proc.send_signal(signal.SIGTERM)
                return
            if trio.current_time() - started > RESTART_DELAY_MAX:
                delay = RESTART_DELAY
            with trio.move_on_after(delay):
                await stopping.wait()
            delay = min(RESTART_DELAY_MAX, delay * 2)

    async def signals(nursery: trio.Nursery) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
            async for sig in sigs:
                log.info("signal", signal=signal.Signals(sig).name, workers=workers)
                stopping.set()
                for w in team:
                    if w.proc is not None and w.proc.returncode is None:
                        w.proc.send_signal(signal.SIGTERM)
                with trio.move_on_after(STOP_TIMEOUT) as waited:
                    for w in team:
                        if w.proc is not None:
                            await w.proc.wait()
                if waited.cancelled_caught:
                    log.error("workers_killed", after=STOP_TIMEOUT)
                    for w in team:
                        if w.proc is not None and w.proc.returncode is None:
                            w.proc.kill()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(signals, nursery)
        async with trio.open_nursery() as team_nursery:
            for w in team:
                team_nursery.start_soon(run, w, team_nursery)
        nursery.cancel_scope.cancel()
    log.info("stopped", workers=workers, status=status)
    return status


def main(argv: list[str], workers: int, bind: str, port: int) -> int:
    """Reserve the port, then :func:`supervise` ``workers`` copies of ``argv`` with
    ``--workers 1 --port P --reuse-port`` appended; the exit status."""
    reserved = reserve_port(bind, port)
    try:
        port = reserved.getsockname()[1]
        child = [sys.executable, "-m", "tools.cli", *argv]
        child += ["--workers", "1", "--port", str(port), "--reuse-port"]
        return trio.run(supervise, child, workers)
    finally:
        reserved.close()
