"""The sans-io wire protocol v1: line framing, messages, one cattrs converter, error codes."""
