"""``gamehost serve``: run the host (the CLI's other commands live in ``tools``)."""

from __future__ import annotations

import argparse
import errno
import gc
import math
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio

from host import logs
from host.plugins.registry import PluginError, Registry, registry_with

if TYPE_CHECKING:
    from host.net.server import HostConfig

# The host itself (host.net.server and what it imports, a third of a second) is imported by the
# functions that run it, not here: the tools import this module for its argument types, and
# `gamehost replay` or `check` should not pay for a server they do not start.

log = structlog.get_logger("gamehost.server")

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def port_number(text: str) -> int:
    """An argparse ``type``: a TCP port, 0..65535 (0: any free port).

    Raises:
        argparse.ArgumentTypeError: not an integer, or out of range (argparse turns it into a
            one-line ``error:`` and exit status 2).
    """
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, not {value}")
    return value


def count(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (a count). Raises ``ArgumentTypeError`` otherwise."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer >= 0. Raises ``ArgumentTypeError`` otherwise."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds >= 0. Raises ``ArgumentTypeError``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"seconds must be a finite number >= 0, not {text}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds > 0. Raises ``ArgumentTypeError``."""
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("seconds must be more than 0")
    return value


def bind_address(text: str) -> str:
    """An argparse ``type``: an address or host name this machine can resolve.

    Raises:
        argparse.ArgumentTypeError: the name does not resolve.
    """
    try:
        socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise argparse.ArgumentTypeError(f"cannot resolve {text!r}: {exc}") from None
    return text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _timeout(text: str) -> float | None:
    """A timeout flag: seconds (see :func:`seconds`); 0 means none (None)."""
    return seconds(text) or None


def _rate(text: str) -> float:
    """A rate flag: a finite number per second, more than 0."""
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


MIN_OUTBOX_BYTES = 256 * 1024
"""The smallest ``--outbox-bytes``: a few replies of the largest line a client may send."""


def _outbox_bytes(text: str) -> int:
    """``--outbox-bytes``: an integer of at least :data:`MIN_OUTBOX_BYTES` (smaller budgets would
    drop every client on its first large reply)."""
    value = _int(text)
    if value < MIN_OUTBOX_BYTES:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_OUTBOX_BYTES} bytes, not {value}")
    return value


def store_spec(text: str) -> str:
    """argparse type of ``--store``: a ``postgresql://`` / ``postgres://`` URL libpq can parse,
    or a data dir path."""
    if "://" not in text:
        return text
    from host.store.pg import check_url

    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _public_url(text: str) -> str:
    """``--public-url``: an ``http://`` or ``https://`` URL with a host name."""
    from host.net.web import origin_of

    try:
        origin_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``serve`` sub-command."""
    p = sub.add_parser(
        "serve",
        help="run the game host (TCP, JSON lines)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,  # --help shows every default
    )
    p.add_argument("--port", type=port_number, default=7878, help="TCP port (0: any free port)")
    p.add_argument("--bind", type=bind_address, default="127.0.0.1", help="address to listen on")
    p.add_argument("--data-dir", type=Path, default=Path("data"), help="where session logs go")
    p.add_argument(
        "--store",
        type=store_spec,
        default=os.environ.get("GAMEHOST_STORE") or None,
        metavar="URL",
        help="where session logs go: postgresql://user@host:port/dbname (many hosts share it;"
        " run `gamehost db init` first) or a data dir (default: $GAMEHOST_STORE, else --data-dir)",
    )
    p.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    p.add_argument("--bot-delay", type=seconds, default=0.0, help="seconds a host bot waits")
    p.add_argument(
        "--turn-timeout",
        type=_timeout,
        default=120.0,
        help="seconds a player may take to act before the host plays the bot's choice for them"
        " (0: no timer; a create may set its own)",
    )
    p.add_argument(
        "--abandon-after",
        type=_timeout,
        default=600.0,
        help="seconds a session may have no connection attached before the host ends it as"
        " abandoned (0: never)",
    )
    p.add_argument(
        "--linger",
        type=seconds,
        default=60.0,
        help="seconds a finished session stays in memory once idle (then its log answers);"
        " with a shared --store also an unfinished one this host neither drives nor serves",
    )
    p.add_argument(
        "--game-time",
        type=seconds,
        default=0.5,
        help="CPU seconds one step into a game's code may use before the game is stopped and"
        " its session ends as game_error (0: no limit; a step that blocks is stopped after"
        " about 1 s blocked)",
    )
    p.add_argument(
        "--game-memory",
        type=int,
        default=256,
        metavar="MIB",
        help="MiB the host's memory may grow in one step into a game's code before it is"
        " stopped the same way (0: no limit)",
    )
    p.add_argument(
        "--game-hang",
        type=_timeout,
        default=30.0,
        metavar="SECONDS",
        help="a step into a game's code that cannot be interrupted (one long call into C, a game"
        " that ignores its interruption) ends the host process after this long; its next start"
        " ends that session (0: never; see --supervise)",
    )
    p.add_argument(
        "--max-memory",
        type=non_negative_int,
        default=2048,
        metavar="MIB",
        help="MiB of resident memory past which the host stops game steps that grow it and"
        " refuses new sessions (0: no bound)",
    )
    p.add_argument(
        "--supervise",
        action="store_true",
        help="run the host as a child process that is started again whenever it exits by itself"
        " (a game ended it; as --workers does)",
    )
    p.add_argument("--max-sessions", type=count, default=10_000, help="live sessions at most")
    p.add_argument(
        "--max-records", type=count, default=500_000, help="records at most in one session"
    )
    p.add_argument(
        "--max-connections",
        type=count,
        default=None,
        help="open connections at most (default: what the descriptor limit leaves after the"
        " store's open-file cache and a reserve, at most 10,000)",
    )
    p.add_argument(
        "--max-connections-per-address",
        type=non_negative_int,
        default=64,
        metavar="N",
        help="open connections (TCP and WebSocket) one peer address may hold; an IPv6 /64 is"
        " one address; loopback exempt unless --address-limit-loopback (0: no limit)",
    )
    p.add_argument(
        "--max-http-requests",
        type=count,
        default=64,
        metavar="N",
        help="HTTP requests being read or answered at once (a WebSocket until its handshake"
        " is done)",
    )
    p.add_argument(
        "--max-http-requests-per-address",
        type=count,
        default=8,
        metavar="N",
        help="of those, requests from one peer address (loopback exempt unless"
        " --address-limit-loopback); when all are taken, an address holding fewer than the"
        " busiest takes that one's oldest",
    )
    p.add_argument(
        "--address-limit-loopback",
        action="store_true",
        help="hold loopback peers to the per-address connection and HTTP limits too (off: local"
        " tools, and a reverse proxy on this machine, are not limited per address)",
    )
    p.add_argument(
        "--idle-timeout",
        type=_timeout,
        default=300.0,
        help="seconds a connection that plays or watches no session may stay silent (0: for ever)",
    )
    p.add_argument(
        "--line-timeout",
        type=_timeout,
        default=30.0,
        help="seconds a begun line may take to end (0: any)",
    )
    p.add_argument(
        "--keepalive",
        type=_timeout,
        default=30.0,
        metavar="SECONDS",
        help="TCP keepalive on every connection: seconds without traffic before the first probe"
        " (then one every 10 s at most; 3 lost probes end it), so a dead network path is found"
        " (0: off)",
    )
    p.add_argument(
        "--ping-after",
        type=_timeout,
        default=30.0,
        metavar="SECONDS",
        help="seconds a connection that plays or watches a session may stay silent before the"
        " host pings it (a WebSocket Ping frame in a browser; 0: no pings)",
    )
    p.add_argument(
        "--ping-timeout",
        type=_timeout,
        default=30.0,
        metavar="SECONDS",
        help="seconds a pinged connection has to send anything before it is closed as"
        " unresponsive, so a frozen or vanished client does not hold its seat (0: no pings)",
    )
    p.add_argument(
        "--outbox-bytes",
        type=_outbox_bytes,
        default=8 * 1024 * 1024,
        help="bytes queued to a connection at most before it is dropped as too slow",
    )
    p.add_argument(
        "--create-burst",
        type=count,
        default=20,
        help="creates a peer address may make at once",
    )
    p.add_argument(
        "--create-rate", type=_rate, default=0.5, help="creates per second a peer address regains"
    )
    p.add_argument(
        "--create-limit-loopback",
        action="store_true",
        help="apply the create rate to loopback peers too (off: local tools create freely)",
    )
    p.add_argument(
        "--max-unstarted",
        type=non_negative_int,
        default=10,
        help="sessions one connection (and, unless loopback, one peer address) may have created"
        " that have not started",
    )
    p.add_argument(
        "--workers",
        type=count,
        default=1,
        help="host processes sharing the port (SO_REUSEPORT); more than 1 needs a PostgreSQL"
        " --store",
    )
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # a worker
    p.add_argument(
        "--http",
        type=port_number,
        default=None,
        metavar="PORT",
        help="also serve the web client and the protocol over a WebSocket (/ws) on this port"
        " (0: any free port; default: no HTTP)",
    )
    p.add_argument(
        "--http-bind", type=bind_address, default="127.0.0.1", help="address the HTTP port binds"
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an origin (scheme://host[:port]) whose pages may open the WebSocket, besides"
        " --public-url's and the host's own pages on a loopback name (repeatable)",
    )
    p.add_argument(
        "--public-url",
        type=_public_url,
        default=None,
        metavar="URL",
        help="the URL browsers open the web client at (https://cards.example): its pages may"
        " open the WebSocket, and behind a reverse proxy a loopback --http-bind accepts its"
        " name; needed when the pages are reached by a name that is not loopback",
    )
    p.add_argument(
        "--metrics",
        type=port_number,
        default=None,
        metavar="PORT",
        help="serve the host's metrics in the Prometheus text format at /metrics on this port"
        " (0: any free port; default: no metrics listener); with --workers N, worker i listens"
        " on PORT + i",
    )
    p.add_argument(
        "--metrics-bind",
        type=bind_address,
        default="127.0.0.1",
        help="address the metrics port binds",
    )
    p.add_argument(
        "--admin-token",
        default=os.environ.get("GAMEHOST_ADMIN_TOKEN") or None,
        metavar="TOKEN",
        help="the token the admin view (/admin.html on the --http port, and /metrics there)"
        " asks for; without one it answers requests from this machine only (default:"
        " $GAMEHOST_ADMIN_TOKEN)",
    )
    p.add_argument(
        "--debug-replay",
        action="store_true",
        help="let the replay ops show any seat's view and the full truth of live sessions, and"
        " fork them (shows hidden cards to anyone: for development only)",
    )
    p.add_argument(
        "--heavy-workers",
        type=int,
        default=2,
        metavar="N",
        help="worker processes for heavy jobs (a long log's first replay, verify, loading a"
        " long unfinished log), at most N at once; 0: on the event loop, a stretch at a time"
        " (default 2)",
    )
    p.add_argument(
        "--gc",
        choices=["tuned", "default"],
        default="tuned",
        help="the cyclic garbage collector: tuned (higher thresholds, what start-up and loading"
        " made frozen) or the interpreter's defaults; collections are timed either way and"
        " logged at exit (gc_pauses)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="also load the game plugin in this importable module (one with a"
        " gamehost_register_games hook), besides the installed ones; repeatable",
    )
    p.add_argument("--log-format", choices=["auto", "json", "console"], default="auto")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    p.set_defaults(func=serve_main)


def serve_main(args: argparse.Namespace) -> int:
    """Run the host until SIGINT/SIGTERM; exit status 0 after a clean shutdown.

    A worker of ``serve --workers`` ignores SIGINT: Ctrl-C reaches every process of the
    terminal's group, and its supervisor, which gets it too, stops the workers with SIGTERM."""
    from host.net import collector, workers
    from host.net.server import HostConfig

    worker = workers.worker_index()
    logs.configure(
        {"auto": None, "json": True, "console": False}[args.log_format],
        args.log_level,
        None if worker is None else {"worker": worker},
    )
    if args.workers > 1:
        return _serve_workers(args)
    if args.supervise and worker is None:
        return _serve_supervised(args)
    workers.watch_supervisor()  # a worker of serve --workers stops when its supervisor is gone
    if worker is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    store = args.store if args.store and "://" in args.store else None
    config = HostConfig(
        data_dir=Path(args.store) if args.store and store is None else args.data_dir,
        store=store,
        port=args.port,
        bind=args.bind,
        fsync=args.fsync,
        bot_delay=args.bot_delay,
        turn_timeout=args.turn_timeout,
        max_sessions=args.max_sessions,
        max_records=args.max_records,
        max_connections=args.max_connections,
        max_connections_per_address=args.max_connections_per_address,
        max_http_requests=args.max_http_requests,
        max_http_requests_per_address=args.max_http_requests_per_address,
        address_limit_loopback=args.address_limit_loopback,
        idle_timeout=args.idle_timeout,
        line_timeout=args.line_timeout,
        keepalive=args.keepalive,
        ping_after=args.ping_after,
        ping_timeout=args.ping_timeout,
        outbox_bytes=args.outbox_bytes,
        create_burst=args.create_burst,
        create_rate=args.create_rate,
        create_limit_loopback=args.create_limit_loopback,
        max_unstarted=args.max_unstarted,
        abandon_after=args.abandon_after,
        linger=args.linger,
        game_time=args.game_time,
        game_memory=args.game_memory,
        game_hang=args.game_hang,
        max_memory=args.max_memory,
        reuse_port=args.reuse_port,
        http_port=args.http,
        http_bind=args.http_bind,
        allow_origins=tuple(args.allow_origin),
        public_url=args.public_url,
        debug_replay=args.debug_replay,
        heavy_workers=max(args.heavy_workers, 0),
        metrics_port=args.metrics,
        metrics_bind=args.metrics_bind,
        admin_token=args.admin_token,
        worker=workers.worker_index(),
    )
    try:
        registry = registry_with(args.plugin)
    except PluginError as exc:  # one line and exit status 2, as for a bad flag
        print(f"gamehost serve: error: --plugin: {exc}", file=sys.stderr)
        return 2
    try:
        collector.tune(args.gc)
        trio.run(_serve, config, registry, args.gc == "tuned")
        if worker is not None:  # stopped: a second SIGTERM must not cut the exit short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except (OSError, BaseExceptionGroup) as exc:
        cause = _first_os_error(exc)
        if cause is None:
            raise
        # a port in use, an address not here, a data dir that is a file or not ours, another
        # host on the same data dir: one line and exit status 2, as for a bad flag
        print(f"gamehost serve: error: {_describe(cause, args)}", file=sys.stderr)
        return 2
    return 0


async def _serve(config: HostConfig, registry: Registry, tuned: bool) -> None:
    """:func:`run_host` until it stops. With ``tuned`` (:func:`host.net.collector.tune` was
    called), once the sessions in the store are loaded what loading made is frozen, and the
    collector's full collections are looked after (:class:`host.net.collector.Collector`).
    Logs the collector's pauses (``gc_pauses``) at the end."""
    from host.net import collector
    from host.net.server import run_host

    try:
        async with trio.open_nursery() as nursery:

            async def host_then_stop(task_status: trio.TaskStatus[Any]) -> None:
                await run_host(config, registry, task_status=task_status)
                nursery.cancel_scope.cancel()

            host, _ = await nursery.start(host_then_stop)
            if tuned:
                full = collector.watch(lambda: len(host.sessions) + len(host.connections))
                await host.loaded.wait()
                took = collector.freeze()
                log.info("gc_frozen", objects=gc.get_freeze_count(), seconds=round(took, 4))
                await full.run()
    finally:
        log.info("gc_pauses", **collector.pauses.summary())


def _serve_workers(args: argparse.Namespace) -> int:
    """``--workers N`` (N > 1): supervise N worker processes (``host.net.workers``); the file
    store serves one process only, so it is refused (exit status 2)."""
    store = getattr(args, "store", None) or ""
    if not store.startswith(("postgresql://", "postgres://")):
        print(
            "gamehost serve: error: --workers above 1 needs a PostgreSQL --store (the file"
            " store serves one process)",
            file=sys.stderr,
        )
        return 2
    if getattr(args, "http", None) == 0:
        print(
            "gamehost serve: error: with --workers, --http needs a port number (0 would give"
            " each worker a port of its own)",
            file=sys.stderr,
        )
        return 2
    metrics = getattr(args, "metrics", None)
    if metrics == 0 or (metrics is not None and metrics + args.workers - 1 > 65535):
        print(
            "gamehost serve: error: with --workers N, --metrics needs a port number P such that"
            " P .. P + N - 1 are ports (worker i listens on P + i)",
            file=sys.stderr,
        )
        return 2
    from host.net import workers
    from host.store import open_store

    try:
        open_store(store).check()  # one error line here, not one per worker
        return workers.main(
            args.argv, args.workers, args.bind, args.port, metrics=metrics, log_json=logs.is_json()
        )
    except OSError as exc:
        print(f"gamehost serve: error: {_describe(exc, args)}", file=sys.stderr)
        return 2


def _serve_supervised(args: argparse.Namespace) -> int:
    """``--supervise``: one host process under the supervisor of ``--workers``
    (``host.net.workers``), started again whenever it exits by itself."""
    from host.net import workers

    try:
        return workers.main(
            args.argv,
            1,
            args.bind,
            args.port,
            metrics=getattr(args, "metrics", None),
            log_json=logs.is_json(),
        )
    except OSError as exc:
        print(f"gamehost serve: error: {_describe(exc, args)}", file=sys.stderr)
        return 2


def _first_os_error(exc: BaseException) -> OSError | None:
    """The first ``OSError`` in ``exc`` or the exception groups it holds, else None."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_os_error(inner)
            if found is not None:
                return found
    return None


def _describe(exc: OSError, args: argparse.Namespace) -> str:
    from host.net.server import ListenError

    if isinstance(exc, ListenError):  # names the listener already
        return str(exc.strerror)
    if exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):  # a listener
        where = f"{args.bind} port {args.port}"
        if getattr(args, "http", None) is not None:
            where += f" (or the --http listener, {args.http_bind} port {args.http})"
        return f"cannot listen on {where}: {exc.strerror or exc}"
    return str(exc) or type(exc).__name__
