"""``--plugin MODULE`` for the tools that read logs (``replay``, ``check``, ``schema``): the
installed games and those of the modules named, as ``gamehost serve --plugin`` loads them."""

from __future__ import annotations

import argparse
import sys

from host.plugins.registry import PluginError, Registry, registry_with


def add_plugin_option(p: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--plugin MODULE`` option to a sub-command's parser."""
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="also load the game plugin in this importable module, as serve --plugin does"
        " (a game that is not installed); repeatable",
    )


def registry_of(args: argparse.Namespace, command: str) -> Registry | None:
    """The registry with ``args.plugin``'s modules; None after printing one ``gamehost
    <command>: error: --plugin: ...`` line (the caller exits with status 2)."""
    try:
        return registry_with(getattr(args, "plugin", None) or [])
    except PluginError as exc:
        print(f"gamehost {command}: error: --plugin: {exc}", file=sys.stderr)
        return None
