"""The plugin kit: what a game's own tests import to check it against the host's contract.

- :func:`check_game` (:mod:`host.testing.check`): one call that plays the game with host bots
  and checks determinism, bounded playouts that pass replay verification, legal actions that
  ``decide`` accepts, registered actions and events that round-trip through the codec, an
  optional invariant hook, the game's text members (no text names a card ``redact`` hid), and
  the randomized no-leak property (hypothesis). Raises :class:`GameCheckFailed` naming the
  fault. :func:`cards_in_text` finds the cards a text names (``8S`` or ``8♠``).
- :class:`RandomLegal`, :class:`Mixed` (:mod:`host.testing.bots`): wrappers that make host bots
  play uniformly random legal actions (or half of them) instead of the game's ``bot_action``.
- :func:`start_host`, :func:`registry_of`, :class:`RunningHost` (:mod:`host.testing.hosting`):
  a real host on 127.0.0.1 port 0 inside a test's trio nursery, for tests over TCP.
- :mod:`host.testing.pytest_plugin`: the same as pytest fixtures (``game_host``).

Needs the test extra (``pip install 'gamehost[test]'``: hypothesis, pytest, pytest-trio).
"""

from host.testing.bots import Mixed, RandomLegal
from host.testing.check import (
    CARD,
    GameCheckFailed,
    Playout,
    cards_in_text,
    check_game,
    check_no_leak,
    play,
)
from host.testing.hosting import RunningHost, installed_registry, registry_of, start_host

__all__ = [
    "CARD",
    "GameCheckFailed",
    "Mixed",
    "Playout",
    "RandomLegal",
    "RunningHost",
    "cards_in_text",
    "check_game",
    "check_no_leak",
    "installed_registry",
    "play",
    "registry_of",
    "start_host",
]
