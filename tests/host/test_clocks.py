"""Hosts sharing a database keep time by the database server's clock, so timers counted from
records one host wrote run alike on another whose own clock is off."""

from __future__ import annotations

import types

import pytest
from structlog.testing import capture_logs

from host.net.server import CLOCK_SKEW_WARN, _keep_time_by
from host.store.pg import PostgresStore


class _Skewed:
    """A store whose database clock is ``offset`` seconds ahead of this process's."""

    def __init__(self, offset: float | None) -> None:
        self.offset = offset

    def clock_offset(self) -> float:
        if self.offset is None:
            raise OSError("no database")
        return self.offset


@pytest.mark.parametrize("offset", [20.0, -20.0, 0.2])
async def test_a_host_takes_the_databases_clock_and_warns_when_its_own_is_off(offset) -> None:
    host = types.SimpleNamespace(clock_base=1000.0)
    with capture_logs() as logs:
        await _keep_time_by(host, _Skewed(offset))  # type: ignore[arg-type]
    assert host.clock_base == pytest.approx(1000.0 + offset)
    events = {e["event"]: e for e in logs}
    if abs(offset) > CLOCK_SKEW_WARN:
        assert events["clock_skew"]["log_level"] == "warning"
        assert events["clock_skew"]["database_ahead_seconds"] == offset
    else:
        assert "clock_skew" not in events


async def test_files_keep_the_hosts_clock_and_an_unreachable_database_changes_nothing() -> None:
    host = types.SimpleNamespace(clock_base=1000.0)
    await _keep_time_by(host, object())  # type: ignore[arg-type]
    with capture_logs() as logs:
        await _keep_time_by(host, _Skewed(None))  # type: ignore[arg-type]
    assert host.clock_base == 1000.0
    assert [e["event"] for e in logs] == ["clock_offset_unknown"]


def test_the_offset_from_a_database_on_this_machine_is_small(pg_store_url: str) -> None:
    store = PostgresStore(pg_store_url)
    try:
        assert abs(store.clock_offset()) < 0.5
    finally:
        store._conns.close()
