"""The protocol client the tools use (``play``, ``demo``, ``bench``, ``chaos``): its home is
:mod:`host.net.client`, so the host's plugin kit can hand it to tests without importing
``tools/``; the names are re-exported here for the tools and tests that import them from here."""

from __future__ import annotations

from host.net.client import PING_ID, Client, HostError

__all__ = ["PING_ID", "Client", "HostError"]
