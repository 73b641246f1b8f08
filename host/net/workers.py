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
same arguments plus ``--workers 1 --port P --reuse-port``, the log format it chose for its own
stderr, and with ``--metrics M`` worker ``i``'s ``--metrics M + i``: each worker serves its own
metrics), relays their log lines to its own stderr whole (two workers' lines never interleave,
and they are in the parent's format: one format per terminal), and on SIGTERM or SIGINT sends
each worker SIGTERM and waits for them, exiting 0 once all stopped cleanly.

A worker ignores SIGINT and runs in a process group of its own: a Ctrl-C on the terminal
reaches the supervisor only, which stops the workers with SIGTERM. A second SIGINT or SIGTERM
to the parent while they stop kills them at once (exit status 1), as :data:`STOP_TIMEOUT`
seconds without their stop do. A worker still starting when SIGTERM comes (before its host
catches the signal) dies of it: that counts as stopped, it had nothing to finish.

A worker that exits by itself is started again after a delay doubling from
:data:`RESTART_DELAY` to :data:`RESTART_DELAY_MAX` seconds; one that exits with status 2 before
it listens (a bad flag, an unreachable store: it would fail again) stops the whole host with
status 2 (once it has logged ``listening``, status 2 is a crash like any other: a game's
``os._exit(2)`` must not stop the host). ``serve --supervise`` runs one host process under this
supervisor (the file store too), so a host the hang watchdog or a game ended
(:mod:`host.plugins.budget`, :mod:`host.net.marker`) is started again. A worker
stops itself (SIGTERM to itself, so it shuts down cleanly) once its supervisor is gone
(:func:`watch_supervisor`: the supervisor's pid is in its environment, ``GAMEHOST_SUPERVISOR``).
Not ``PR_SET_PDEATHSIG``: that signal follows the *thread* that forked, and trio forks from a
worker thread that ends after 10 idle seconds, which stopped every worker 10 s after its start.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

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
WORKER_ENV = "GAMEHOST_WORKER"
"""The environment variable that gives a worker its index (0 .. N - 1)."""


def worker_index() -> int | None:
    """This process's index under ``serve --workers`` (:data:`WORKER_ENV`), or None when it is
    no worker."""
    value = os.environ.get(WORKER_ENV, "")
    if not value.isdigit() or not os.environ.get(SUPERVISOR_ENV, "").isdigit():
        return None
    return int(value)


def worker_env(supervisor: int, index: int | None = None) -> dict[str, str]:
    """The environment of worker ``index`` of the supervisor with pid ``supervisor`` (with the
    supervisor's choice of log colours, :data:`host.logs.COLOR_ENV`)."""
    from host import logs

    env = {**os.environ, SUPERVISOR_ENV: str(supervisor)}
    env[logs.COLOR_ENV] = "1" if logs.colors() else "0"
    if index is not None:
        env[WORKER_ENV] = str(index)
    return env


def spawn_options(index: int | None = None) -> dict[str, object]:
    """How the supervisor starts worker ``index`` (``subprocess.Popen`` keyword arguments): no
    stdin, its log piped to the supervisor, the supervisor's pid and the worker's index in its
    environment, in a process group of its own (a Ctrl-C on the terminal, or a signal to the
    supervisor's group, reaches the supervisor only, which stops the workers with SIGTERM)."""
    return {
        "stdin": subprocess.DEVNULL,
        "stderr": subprocess.PIPE,
        "env": worker_env(os.getpid(), index),
        "process_group": 0,
    }


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


_LISTENING = re.compile(rb'(^|[\s"])listening([\s"]|$)', re.MULTILINE)
"""The host's ``listening`` log line (JSON or console)."""


async def _relay(proc: trio.Process, listening: Callable[[], None] | None = None) -> None:
    """Copy a worker's stderr (its log) to ours in whole lines, so the workers' lines never
    interleave mid-line; returns at its end of file. ``listening`` is called once the worker
    has logged that it listens."""
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
            if listening is not None and _LISTENING.search(rest, 0, cut):
                listening()
                listening = None
            out.write(rest[:cut])
            out.flush()
            rest = rest[cut:]
    if rest:
        out.write(rest + b"\n")
        out.flush()


async def supervise(argv: list[str], workers: int, argvs: list[list[str]] | None = None) -> int:
    """Run ``workers`` processes of ``argv`` (a ``gamehost serve`` command line for one worker;
    ``argvs``: one per worker instead) until SIGTERM or SIGINT, which stops each with SIGTERM;
    restart any that exits by itself.

    Returns:
        The exit status: 0 once every worker stopped cleanly after the signal; 2 if a worker
        exited with status 2 (it cannot start: a bad flag or store); else 1.
    """
    stopping = trio.Event()
    status = 0
    team = [_Worker(i, argvs[i] if argvs else argv) for i in range(workers)]

    async def run(w: _Worker, nursery: trio.Nursery) -> None:
        nonlocal status
        delay = RESTART_DELAY
        while not stopping.is_set():
            w.starts += 1
            w.proc = await trio.lowlevel.open_process(w.argv, **spawn_options(w.index))  # type: ignore[arg-type]
            log.info("worker_started", worker=w.index, pid=w.proc.pid, starts=w.starts)
            started = trio.current_time()
            up = False

            def listening() -> None:
                nonlocal up
                up = True

            await _relay(w.proc, listening)
            code = await w.proc.wait()
            if stopping.is_set():
                # -SIGTERM: the worker was still starting (one that runs catches SIGTERM and
                # exits 0); it had nothing to finish
                if code not in (0, -signal.SIGTERM):
                    status = max(status, 1)
                return
            log.error("worker_exited", worker=w.index, pid=w.proc.pid, status=code)
            if code == 2 and not up:  # it could not start: it would fail again
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

    def kill_all(why: str) -> None:
        nonlocal status
        alive = [w for w in team if w.proc is not None and w.proc.returncode is None]
        if alive:
            log.error("workers_killed", why=why, workers=[w.index for w in alive])
            status = max(status, 1)
        for w in alive:
            w.proc.kill()  # type: ignore[union-attr]

    async def signals(nursery: trio.Nursery) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
            async for sig in sigs:
                name = signal.Signals(sig).name
                if stopping.is_set():  # a second signal while they stop: no more waiting
                    log.warning("signal_again", signal=name)
                    kill_all(f"a second {name}")
                    continue
                log.info("signal", signal=name, workers=workers)
                stopping.set()
                for w in team:
                    if w.proc is not None and w.proc.returncode is None:
                        w.proc.send_signal(signal.SIGTERM)
                nursery.start_soon(deadline)

    async def deadline() -> None:
        await trio.sleep(STOP_TIMEOUT)
        kill_all(f"not stopped after {STOP_TIMEOUT:g} s")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(signals, nursery)
        async with trio.open_nursery() as team_nursery:
            for w in team:
                team_nursery.start_soon(run, w, team_nursery)
        nursery.cancel_scope.cancel()
    log.info("stopped", workers=workers, status=status)
    return status


def main(
    argv: list[str],
    workers: int,
    bind: str,
    port: int,
    *,
    metrics: int | None = None,
    log_json: bool | None = None,
) -> int:
    """Reserve the port, then :func:`supervise` ``workers`` copies of ``argv`` with
    ``--workers 1 --port P --reuse-port`` appended (and ``--log-format`` as ``log_json`` says,
    when given; with ``metrics`` M, worker i's ``--metrics M + i``); the exit status."""
    reserved = reserve_port(bind, port)
    try:
        port = reserved.getsockname()[1]
        child = [sys.executable, "-m", "tools.cli", *argv]
        child += ["--workers", "1", "--port", str(port), "--reuse-port"]
        if log_json is not None:
            child += ["--log-format", "json" if log_json else "console"]
        argvs = [
            child if metrics is None else [*child, "--metrics", str(metrics + i)]
            for i in range(workers)
        ]
        return trio.run(supervise, argvs[0], workers, argvs)
    finally:
        reserved.close()
