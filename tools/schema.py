"""``gamehost schema [--game ID | --protocol]``: print JSON Schema (draft 2020-12).

Each installed game's published contract, generated from the game's own types
(:mod:`host.plugins.contract`): options, actions, events as a seat, as a spectator and as logged,
and the view as a seat and as a spectator. Without ``--game`` it prints ``{"games": {id:
contract, ...}}`` for every installed game. An unknown game id prints one ``error:`` line naming
the installed ones and exits 2.

With ``--protocol``: the wire protocol's schema instead, every request, reply (each op's
result), push and error, generated from the message types (:func:`protocol.schema.protocol_schema`).
"""

from __future__ import annotations

import argparse
import json
import sys

from host.plugins.contract import game_schema
from protocol.schema import protocol_schema
from tools.plugins import add_plugin_option, registry_of

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``schema`` sub-command."""
    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of each game's options, actions, events and view"
        " (--protocol: of every request, reply, push and error)",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--game", metavar="ID", help="one game (default: every installed game)")
    which.add_argument(
        "--protocol",
        action="store_true",
        help="the wire protocol's messages instead: every request, reply, push and error",
    )
    add_plugin_option(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the schema; exit status 2 for an unknown game."""
    if getattr(args, "protocol", False):
        print(json.dumps(protocol_schema(), indent=2))
        return 0
    registry = registry_of(args, "schema")
    if registry is None:
        return 2
    games = registry.games
    if args.game is not None:
        game = games.get(args.game)
        if game is None:
            known = ", ".join(sorted(games)) or "none"
            print(
                f"gamehost schema: error: no game {args.game!r}; installed: {known}",
                file=sys.stderr,
            )
            return 2
        out = game_schema(game)
    else:
        out = {"games": {gid: game_schema(games[gid]) for gid in sorted(games)}}
    print(json.dumps(out, indent=2))
    return 0
