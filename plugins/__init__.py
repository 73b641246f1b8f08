"""The built-in games, registered through the ``gamehost`` entry-point group like any other game."""
