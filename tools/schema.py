"""``gamehost schema [--game ID]``: print each installed game's published contract as JSON Schema.

The schema is generated from the game's own types (:mod:`host.plugins.contract`): options, actions,
events as a seat, as a spectator and as logged, and the view as a seat and as a spectator.
Without ``--game`` it prints ``{"games": {id: contract, ...}}`` for every installed game.
An unknown game id prints one ``error:`` line naming the installed ones and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from host.plugins.contract import game_schema
from host.plugins.registry import load_registry

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``schema`` sub-command."""
    p = sub.add_parser(
        "schema", help="print the JSON Schema of each game's options, actions, events and view"
    )
    p.add_argument("--game", metavar="ID", help="one game (default: every installed game)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the schema; exit status 2 for an unknown game."""
    games = load_registry().games
    if args.game is not None:
        game = games.get(args.game)
        if game is None:
            known = ", ".join(sorted(games)) or "none"
            print(f"error: no game {args.game!r}; installed: {known}", file=sys.stderr)
            return 2
        out = game_schema(game)
    else:
        out = {"games": {gid: game_schema(games[gid]) for gid in sorted(games)}}
    print(json.dumps(out, indent=2))
    return 0
