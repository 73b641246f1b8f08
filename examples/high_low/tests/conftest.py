"""The plugin kit's pytest fixtures (``game_host``), serving this package's game."""

import pytest
from high_low import HighLow

from host.testing import registry_of

pytest_plugins = ["host.testing.pytest_plugin"]


@pytest.fixture
def gamehost_registry():
    """Only High-Low (the kit's default is every installed game)."""
    return registry_of(HighLow())
