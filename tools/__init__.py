"""User-facing tools: the ``gamehost`` CLI, terminal client, replay debugger, bench and demo."""
