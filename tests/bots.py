"""The test bots now live in the plugin kit (:mod:`host.testing.bots`); kept for old imports."""

from host.testing.bots import Mixed, RandomLegal

__all__ = ["Mixed", "RandomLegal"]
