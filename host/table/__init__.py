"""What a table decides, with no I/O: the engine (log records in, state out), the table
core, what a viewer may see of a record, the freshness rule, the commands."""
