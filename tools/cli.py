"""The ``gamehost`` command: ``serve``, ``play``, ``replay``, ``check``, ``bench``, ``demo``,
``chaos``, ``db init``, ``export``, ``import``, ``schema``.

``gamehost`` alone prints this help and exits 0; ``gamehost --version`` prints the host's version
and each installed game's id and version. A bad option or value is refused with one
``gamehost <command>: error: ...`` line (no usage: ``--help`` prints that) and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib import metadata
from typing import NoReturn

from host.cli import add_serve_parser

TOOLS = ("play", "replay", "check", "bench", "demo", "chaos", "db", "schema")
"""The commands beside ``serve``, each the module ``tools.<name>`` with an ``add_parser``, in
the order ``gamehost --help`` lists them."""


def version_text() -> str:
    """``gamehost <version>`` then one line per installed game: ``  <id> <version>  <title>``."""
    try:
        host = metadata.version("gamehost")
    except metadata.PackageNotFoundError:
        host = "unknown (not installed)"
    lines = [f"gamehost {host}"]
    try:
        from host.plugins.registry import load_registry

        games = load_registry().games
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the host's version
        lines.append(f"  (the games could not be loaded: {type(exc).__name__}: {exc})")
        return "\n".join(lines)
    for gid in sorted(games):
        info = games[gid].info
        lines.append(f"  {gid} {info.version}  {info.title}")
    return "\n".join(lines)


class _Version(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_text())
        parser.exit(0)


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusal is one line, ``<prog>: error: <message>``, and exit
    status 2 (argparse's own prints the whole usage first, 20 lines for ``serve``). Its
    sub-commands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gamehost`` console script."""
    given = list(sys.argv[1:] if argv is None else argv)
    parser = Parser(prog="gamehost", description="An event-sourced host for turn-based games.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_serve_parser(sub)
    if given[:1] != ["serve"]:  # a host starts without importing the tools (a faster start)
        # a tool's command imports that tool alone (`gamehost replay` starts in half the time);
        # anything else (--help, a typo) lists them all
        names = given[:1] if given[:1] and given[0] in TOOLS else TOOLS
        for name in names:
            importlib.import_module(f"tools.{name}").add_parser(sub)
    args = parser.parse_args(given)
    args.argv = given  # as given (serve --workers)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
