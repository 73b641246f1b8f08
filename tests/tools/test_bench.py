"""``gamehost bench``: its figures are present and consistent with each other (never their speed),
the baseline server writes what it is told to, and the measuring helpers."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import orjson
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from host.net.collector import DEFAULT_THRESHOLDS, THRESHOLDS
from host.plugins.registry import load_registry
from tools.baseline import Baseline
from tools.bench import CountingStream, Counts, _progress, cpu_seconds, percentile
from tools.client import Client

REGISTRY = load_registry()
needs_crazy_eights = pytest.mark.skipif(
    "crazy-eights" not in REGISTRY.games, reason="the crazy-eights plugin is not installed"
)


def bench_json(*flags: str) -> dict:
    """Run ``gamehost bench ... --json`` as a user would; its one JSON object."""
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "bench", "--json", *flags],
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return orjson.loads(lines[0])


def assert_ordered_percentiles(r: dict, prefix: str) -> None:
    p50, p99, p999 = (r[f"{prefix}_{p}_ms"] for p in ("p50", "p99", "p999"))
    assert 0 < p50 <= p99 <= p999


def assert_host_figures(r: dict, sessions: int, seconds: float) -> None:
    assert r["sessions"] == sessions
    assert r["seconds"] >= seconds
    assert r["actions"] > 0 and r["client_actions"] > 0
    assert r["actions_per_s"] == pytest.approx(r["actions"] / r["seconds"])
    assert r["sessions_started"] >= sessions
    assert_ordered_percentiles(r, "rtt")
    assert r["host_cpu_s"] > 0
    assert r["host_cpu_per_action_ms"] == pytest.approx(r["host_cpu_s"] * 1000 / r["actions"])
    assert r["host_peak_rss_mib"] > 0
    assert r["load_cpu_s"] > 0
    # every action is at least one line to some client, each line a JSON object and a newline
    assert r["lines_per_action"] >= 1
    assert r["bytes_per_line"] > len(b"{}\n")
    assert r["request_bytes"] > len(b'{"id":1,"op":"act"}\n')
    # the host's collector, from its gc_pauses line at exit (tuned by default)
    assert len(r["gc_collections"]) == len(r["gc_longest_ms"]) == 3
    assert r["gc_max_ms"] == max(r["gc_longest_ms"]) and r["gc_cpu_max_ms"] >= 0
    assert r["gc_total_ms"] >= r["gc_max_ms"]
    assert r["gc_thresholds"] == list(THRESHOLDS) and r["gc_frozen"] > 0


def assert_baseline_figures(r: dict) -> None:
    assert r["baseline_seconds"] >= r["seconds"] or r["baseline_seconds"] >= 1
    assert r["baseline_requests"] > 0
    assert r["baseline_requests_per_s"] == pytest.approx(
        r["baseline_requests"] / r["baseline_seconds"]
    )
    assert_ordered_percentiles(r, "baseline_rtt")
    assert r["baseline_cpu_s"] > 0
    assert r["baseline_cpu_per_request_ms"] == pytest.approx(
        r["baseline_cpu_s"] * 1000 / r["baseline_requests"]
    )
    assert r["baseline_peak_rss_mib"] > 0
    assert r["baseline_load_cpu_s"] > 0
    # the baseline wrote what the host wrote per action: as many lines, as large, and was sent
    # requests as large (join replies and rounding make the small difference)
    assert r["baseline_lines_per_request"] == pytest.approx(r["lines_per_action"], rel=0.05)
    assert r["baseline_bytes_per_line"] == pytest.approx(r["bytes_per_line"], rel=0.05)
    assert r["baseline_request_bytes"] == pytest.approx(r["request_bytes"], rel=0.05)
    # the ratios are the quotients of the figures reported
    assert r["throughput_ratio"] == pytest.approx(r["actions_per_s"] / r["baseline_requests_per_s"])
    assert r["cpu_ratio"] == pytest.approx(
        r["host_cpu_per_action_ms"] / r["baseline_cpu_per_request_ms"]
    )


@needs_crazy_eights
def test_bench_baseline_reports_the_host_the_baseline_and_their_ratios():
    r = bench_json("--sessions", "2", "--seconds", "1", "--baseline")
    assert_host_figures(r, sessions=2, seconds=1)
    assert not r["all_clients"] and r["clients_per_table"] == 1
    # host bots play the other three seats: more actions than the clients' own
    assert r["actions"] > r["client_actions"]
    assert_baseline_figures(r)


@needs_crazy_eights
def test_bench_all_clients_plays_every_seat_over_tcp():
    r = bench_json("--sessions", "2", "--seconds", "1", "--all-clients", "--baseline")
    assert_host_figures(r, sessions=2, seconds=1)
    assert r["all_clients"] and r["clients_per_table"] == r["seats"] == 4
    # every action is a client's: the actions seen and the clients' acts agree, up to the one
    # act per table in flight when the run stopped
    assert abs(r["actions"] - r["client_actions"]) <= r["sessions"]
    # an action is pushed to all four seats: at least four lines per action
    assert r["lines_per_action"] >= 4
    assert_baseline_figures(r)


@needs_crazy_eights
def test_bench_of_a_host_with_the_interpreters_collector_reports_its_pauses_too():
    r = bench_json("--sessions", "2", "--seconds", "1", "--serve-arg=--gc=default")
    assert r["gc_thresholds"] == list(DEFAULT_THRESHOLDS)
    assert sum(r["gc_collections"]) > 0 and r["gc_max_ms"] == max(r["gc_longest_ms"])


@needs_crazy_eights
def test_bench_without_seconds_plays_each_session_to_its_end():
    r = bench_json("--sessions", "2")
    assert r["sessions_started"] == r["sessions_ended"] == 2
    assert "baseline_requests" not in r and "throughput_ratio" not in r
    assert_ordered_percentiles(r, "rtt")


@needs_crazy_eights
def test_bench_hosts_on_one_database_report_each_hosts_share(pg_store_url):
    r = bench_json("--sessions", "4", "--seconds", "1", "--store", pg_store_url, "--hosts", "2")
    assert_host_figures(r, sessions=4, seconds=1)
    assert r["hosts"] == 2 and r["store"] == "postgresql"
    assert sum(r["hosts_actions"]) == r["actions"] and all(n > 0 for n in r["hosts_actions"])
    assert sum(r["hosts_cpu_s"]) == pytest.approx(r["host_cpu_s"])
    for cpu, n, per in zip(
        r["hosts_cpu_s"], r["hosts_actions"], r["hosts_cpu_per_action_ms"], strict=True
    ):
        assert per == pytest.approx(cpu * 1000 / n)


@needs_crazy_eights
def test_bench_workers_measure_every_process(pg_store_url):
    r = bench_json("--sessions", "4", "--seconds", "1", "--store", pg_store_url, "--workers", "2")
    assert_host_figures(r, sessions=4, seconds=1)
    assert r["workers"] == 2
    assert len(r["processes_cpu_s"]) == 3  # the supervisor and its two workers
    assert sum(r["processes_cpu_s"]) == pytest.approx(r["host_cpu_s"])


def test_bench_refuses_hosts_without_a_shared_store(capsys):
    from tools.cli import main

    assert main(["bench", "--hosts", "2"]) == 2
    assert "--store" in capsys.readouterr().err


def test_bench_refuses_a_non_positive_duration(capsys):
    from tools.cli import main

    assert main(["bench", "--seconds", "0"]) == 2
    assert "--seconds" in capsys.readouterr().err


@given(st.lists(st.floats(0, 1e3), min_size=1, max_size=200))
def test_percentile_is_nearest_rank_and_ordered(values):
    ordered = sorted(values)
    p50, p99, p999 = (percentile(ordered, q) for q in (0.5, 0.99, 0.999))
    assert p50 <= p99 <= p999 <= ordered[-1]
    for q, p in ((0.5, p50), (0.99, p99), (0.999, p999)):
        # at least a fraction q of the values are <= p, and fewer than q are < p
        assert sum(v <= p for v in ordered) >= q * len(ordered)
        assert sum(v < p for v in ordered) < q * len(ordered)


def test_percentile_of_nothing_is_none():
    assert percentile([], 0.5) is None


def test_cpu_seconds_reads_this_process_user_and_system_time():
    x = 0
    for i in range(2_000_000):  # burn some CPU so both readings are well above zero
        x += i
    before = os.times()
    mine = cpu_seconds(os.getpid())
    after = os.times()
    assert mine is not None
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert before.user + before.system - tick <= mine <= after.user + after.system + tick


def test_cpu_seconds_of_a_finished_process_is_none():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: its /proc entry is gone
    assert cpu_seconds(proc.pid) is None


async def _baseline_clients(nursery: trio.Nursery, server: Baseline, n: int, counts: Counts):
    listeners = await nursery.start(trio.serve_tcp, server.serve, 0)
    port = listeners[0].socket.getsockname()[1]
    clients = []
    for _ in range(n):
        c = Client(CountingStream(await trio.open_tcp_stream("127.0.0.1", port), counts))
        c.start(nursery)
        clients.append(c)
    return clients


async def test_baseline_writes_the_lines_it_is_told_to_the_tables_connections():
    counts = Counts()
    server = Baseline(lines=3.5, line_bytes=120)
    async with trio.open_nursery() as nursery:
        a, b, other = await _baseline_clients(nursery, server, 3, counts)
        for c in (a, b):
            assert await c.call("join", table="t1") == {}
        assert await other.call("join", table="t2") == {}
        joined = counts.lines_in
        for c in (a, b, a, b):
            reply = await c.request("act", table="t1", pad="x" * 50)
            assert reply["ok"] is True
        # 4 requests x 3.5 lines: 14 lines, 4 of them replies; the 10 pushes go to a and b only
        pushes: list[dict] = []
        got_all = trio.Event()

        async def collect(c: Client) -> None:
            while (p := await c.next_push()) is not None:
                pushes.append(p)
                if len(pushes) == 10:
                    got_all.set()

        for c in (a, b, other):
            nursery.start_soon(collect, c)
        with trio.fail_after(30):
            await got_all.wait()
        assert counts.lines_in - joined == 14
        assert all(p == {"push": "event", "table": "t1", "pad": p["pad"]} for p in pushes)
        sizes = {len(orjson.dumps(p)) + 1 for p in pushes}
        assert sizes == {120}
        assert server.requests == 4
        nursery.cancel_scope.cancel()


async def test_baseline_answers_bad_requests_with_an_error_and_goes_on():
    counts = Counts()
    server = Baseline(lines=1, line_bytes=60)
    async with trio.open_nursery() as nursery:
        (c,) = await _baseline_clients(nursery, server, 1, counts)
        await c.send_raw(b"not json\n")
        assert (await c.request("act", table="nowhere"))["ok"] is False
        assert (await c.request("dance", table="t"))["ok"] is False
        assert await c.call("join", table="t") == {}
        assert (await c.request("act", table="t"))["ok"] is True
        assert server.requests == 1
        nursery.cancel_scope.cancel()


async def test_progress_bar_shows_on_a_terminal_after_its_delay(autojump_clock):
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    done = [0.0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: _progress(
                "host", 10, lambda: done[0], lambda: f"{done[0]:.0f} actions", console=console
            )
        )
        await trio.sleep(1)
        assert out.getvalue() == ""  # not before the delay: short runs show no bar
        done[0] = 7
        await trio.sleep(2)
        assert "host" in out.getvalue() and "7 actions" in out.getvalue()
        nursery.cancel_scope.cancel()


async def test_progress_bar_is_silent_off_a_terminal(autojump_clock):
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with trio.move_on_after(10):
        await _progress("host", 10, lambda: 1.0, lambda: "", console=console)
    assert out.getvalue() == ""


@needs_crazy_eights
def test_bench_view_pushes_show_their_cost_in_lines_per_action():
    """With ``--view-pushes`` every client gets one more line per change (its view): with four
    client seats, about four more lines per action than the same load without."""
    plain = bench_json("--sessions", "2", "--seconds", "1", "--all-clients")
    views = bench_json("--sessions", "2", "--seconds", "1", "--all-clients", "--view-pushes")
    assert views["view_pushes"] and not plain["view_pushes"]
    assert views["lines_per_action"] - plain["lines_per_action"] > 3


@needs_crazy_eights
def test_bench_text_pushes_show_their_cost_in_bytes_per_line():
    """With ``--text-pushes`` every event push carries its text: the same lines per action as
    without, each longer."""
    plain = bench_json("--sessions", "2", "--seconds", "1", "--all-clients")
    text = bench_json("--sessions", "2", "--seconds", "1", "--all-clients", "--text-pushes")
    assert text["text_pushes"] and not plain["text_pushes"]
    assert abs(text["lines_per_action"] - plain["lines_per_action"]) < 1
    assert text["bytes_per_line"] > plain["bytes_per_line"] + 10


@needs_crazy_eights
def test_the_stall_bench_reports_its_figures_for_a_small_log():
    r = bench_json("--stall", "--records", "1500", "--seconds", "2", "--heavy-workers", "1")
    assert r["records"] == 1500 and r["heavy_workers"] == 1
    for phase in ("quiet", "loaded"):
        assert r[phase]["ping_n"] > 0 and r[phase]["ping_p99_ms"] >= r[phase]["ping_p50_ms"]
        assert r[phase]["floor_n"] > 0 and r[phase]["floor_p99_ms"] >= r[phase]["floor_p50_ms"]
    loaded = r["loaded"]
    assert r["ping_p99_over_floor"] == round(loaded["ping_p99_ms"] / loaded["floor_p99_ms"], 2)
    assert loaded["page_s"]["n"] >= 1  # pages answered while the rest ran
    assert set(loaded["broken_tables"]) <= {"stall-loop", "stall-hog"}
    assert r["workers"] >= 0 and r["peak_rss_mib"] > 0 and r["first_answer_s"] > 0


@needs_crazy_eights
def test_the_stall_bench_runs_only_the_loads_it_is_asked_for():
    r = bench_json("--stall", "--records", "800", "--seconds", "1", "--stall-load", "pages")
    loaded = r["loaded"]
    assert r["loads"] == ["pages"] and loaded["page_s"]["n"] >= 1
    assert loaded["replay_s"]["n"] == 0 and loaded["verify_s"]["n"] == 0
    assert loaded["broken_tables"] == {}
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "bench", "--stall", "--stall-load", "pages,x"],
        capture_output=True,
    )
    assert done.returncode != 0 and b"--stall-load" in done.stderr


def test_bench_idle_reports_the_memory_each_idle_connection_costs_host_and_bare_server():
    r = bench_json("--idle", "50")
    assert r["idle_connections"] == 50
    for prefix in ("idle", "bare_idle"):
        before, after = r[f"{prefix}_rss_before_mib"], r[f"{prefix}_rss_after_mib"]
        assert before > 0 and after > 0
        # the figure is the growth over the connections opened, in KiB
        assert r[f"{prefix}_kib_per_connection"] == pytest.approx((after - before) * 1024 / 50)
        assert r[f"{prefix}_open_s"] > 0


def test_bench_idle_refuses_fewer_than_one_connection():
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "bench", "--idle", "0"], capture_output=True
    )
    assert done.returncode != 0 and b"--idle must be at least 1" in done.stderr
