"""``gamehost serve``: run the host (the CLI's other commands live in ``tools``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import trio

from host import logs
from host.registry import load_registry
from host.server import HostConfig, run_host


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``serve`` sub-command."""
    p = sub.add_parser("serve", help="run the game host (TCP, JSON lines)")
    p.add_argument("--port", type=int, default=7878, help="TCP port (0: any free port)")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    p.add_argument("--data-dir", type=Path, default=Path("data"), help="where session logs go")
    p.add_argument("--fsync", choices=["always", "batch", "never"], default="batch")
    p.add_argument("--bot-delay", type=float, default=0.0, help="seconds a host bot waits")
    p.add_argument(
        "--turn-timeout",
        type=float,
        default=120.0,
        help="seconds a player may take to act before the host plays the bot's choice for them"
        " (0: no timer; a create may set its own)",
    )
    p.add_argument(
        "--abandon-after",
        type=float,
        default=600.0,
        help="seconds a session may have no connection attached before the host ends it as"
        " abandoned (0: never)",
    )
    p.add_argument("--max-sessions", type=int, default=10_000, help="live sessions at most")
    p.add_argument(
        "--max-records", type=int, default=500_000, help="records at most in one session"
    )
    p.add_argument("--log-format", choices=["auto", "json", "console"], default="auto")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=serve_main)


def serve_main(args: argparse.Namespace) -> int:
    """Run the host until SIGINT/SIGTERM; exit status 0 after a clean shutdown."""
    logs.configure({"auto": None, "json": True, "console": False}[args.log_format], args.log_level)
    config = HostConfig(
        data_dir=args.data_dir,
        port=args.port,
        bind=args.bind,
        fsync=args.fsync,
        bot_delay=args.bot_delay,
        turn_timeout=args.turn_timeout or None,
        max_sessions=args.max_sessions,
        max_records=args.max_records,
        abandon_after=args.abandon_after or None,
    )
    trio.run(run_host, config, load_registry())
    return 0
