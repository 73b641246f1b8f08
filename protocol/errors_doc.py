"""``python -m protocol.errors_doc``: print PROTOCOL.md's error table, rendered from
:data:`protocol.messages.ERRORS` (paste it between the table's markers; a test compares them)."""

from __future__ import annotations

from protocol.messages import error_table

if __name__ == "__main__":
    print(error_table(), end="")
