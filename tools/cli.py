"""The ``gamehost`` command: ``serve``, ``play``, ``replay``, ``bench``, ``demo``."""

from __future__ import annotations

import argparse
import os
import sys

from host.cli import add_serve_parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gamehost`` console script."""
    from tools import bench, chaos, demo, play, replay

    parser = argparse.ArgumentParser(prog="gamehost", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(sub)
    play.add_parser(sub)
    replay.add_parser(sub)
    bench.add_parser(sub)
    demo.add_parser(sub)
    chaos.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
