"""Play a whole session in memory, every seat a bot: for tests, property tests and benchmarks.

Pure: no trio, no files. The records it returns are exactly what the host would write to the
event log for the same seed and bot choices, so they can be checked with :meth:`Engine.verify`.
"""

from __future__ import annotations

from typing import Any

import orjson

from host.game import Game
from host.table.engine import Engine, Record, SessionState


class DidNotEnd(RuntimeError):
    """A local playout passed its action budget without the game ending."""


def play_local(
    game: Game,
    options: dict[str, Any] | None = None,
    seats: int | None = None,
    seed: bytes = b"\x00" * 32,
    max_actions: int = 100_000,
    engine: Engine | None = None,
) -> tuple[SessionState, list[Record]]:
    """Play one session to its end with bots in every seat.

    Args:
        game: the game.
        options: the ``create`` options object (validated as the host would).
        seats: how many seats (default: the game's minimum).
        seed: the session seed.
        max_actions: the budget of bot actions.
        engine: reuse an engine (and its codec).

    Returns:
        The final state and every record, header first.

    Raises:
        OptionError: a bad option. DidNotEnd: the budget ran out. GameFault: the game faulted
            (see :meth:`Engine.bot_step`).
    """
    engine = engine or Engine(game)
    n = seats if seats is not None else game.info.min_seats
    opts = engine.codec.options_from_wire(options or {}, n)
    header = engine.header("local", opts, n, range(n), seed)
    records = [header]
    state = engine.initial(header)
    for seat in range(n):
        new, state = engine.seat_step(state, seat, f"bot{seat}", True, None)
        records += new
    for _ in range(max_actions):
        seat = engine.bot_seat(state)
        if seat is None:
            break
        new, state = engine.bot_step(state, seat)
        records += new
    if not state.ended:
        raise DidNotEnd(f"{game.info.id}: no end after {max_actions} actions")
    return state, records


def roundtrip(records: list[Record]) -> list[Record]:
    """The records as the host would read them back from its log (through JSON, no ``obj``)."""
    return [Record.from_json(orjson.loads(orjson.dumps(r.to_json()))) for r in records]
