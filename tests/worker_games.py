"""Games that misbehave only inside the host's heavy-work processes (``host.net.heavy``): a
plugin *module*, so that a worker process can import it by name. Each is the toy game (High
Card) under its own id; its ``evolve`` works in the host itself and misbehaves in any other
process, told apart by the host's pid in ``$GAMEHOST_TEST_HOST_PID`` (set it before the host
starts its workers)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import attrs

from host.game import hookimpl
from host.plugins.budget import SIGNAL
from tests.toy import HighCard, State

HOST_PID = "GAMEHOST_TEST_HOST_PID"


def in_worker() -> bool:
    """This process is not the host's (a heavy-work process)."""
    host = os.environ.get(HOST_PID)
    return host is not None and host != str(os.getpid())


class LoopsInWorkers(HighCard):
    """``evolve`` loops for ever in a worker process (the worker's budget stops it)."""

    info = attrs.evolve(HighCard.info, id="loops-in-workers", title="Loops in workers")

    def evolve(self, state: State, event: Any) -> State:
        while in_worker():
            pass
        return super().evolve(state, event)


class BlocksInWorkers(HighCard):
    """``evolve`` blocks the budget's signal and sleeps for an hour in a worker process: what
    a budget cannot stop (as one long call into C), so only the host's watch of the worker's
    progress can."""

    info = attrs.evolve(HighCard.info, id="blocks-in-workers", title="Blocks in workers")

    def evolve(self, state: State, event: Any) -> State:
        if in_worker():
            signal.pthread_sigmask(signal.SIG_BLOCK, [SIGNAL])
            time.sleep(3600)
        return super().evolve(state, event)


class RedactLoopsInWorkers(HighCard):
    """``redact`` loops for ever in a worker process (a ``log`` page made there: the worker's
    budget stops it)."""

    info = attrs.evolve(HighCard.info, id="redact-loops-in-workers", title="Redact loops")

    def redact(self, event: Any, viewer: Any) -> Any:
        while in_worker():
            pass
        return super().redact(event, viewer)


class ViewLoopsInWorkers(HighCard):
    """``view`` loops for ever in a worker process (a ``replay`` answered there)."""

    info = attrs.evolve(HighCard.info, id="view-loops-in-workers", title="View loops")

    def view(self, state: State, viewer: Any) -> Any:
        while in_worker():
            pass
        return super().view(state, viewer)


@hookimpl
def gamehost_register_games() -> list[Any]:
    return [LoopsInWorkers(), BlocksInWorkers(), RedactLoopsInWorkers(), ViewLoopsInWorkers()]
