"""Where session logs live: the store interface, the file store (the embedded default), the
in-memory store, PostgreSQL, and the feed of notices and leases for many hosts."""
