"""gamehost: the trio host, its sessions, event store, plugin registry and CLI pieces."""

__version__ = "0.1.0"
