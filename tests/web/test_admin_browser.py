"""The admin view in a real browser (headless Chromium, as tests/web/test_browser.py drives it):
a live session is listed with who holds its seats, the operator ends it, its player is told,
its log ends with the admin's record and ``gamehost replay --verify`` passes."""

from __future__ import annotations

import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.web import test_browser as web
from tools.client import Client

pytestmark = web.pytestmark
browser = web.browser  # the module's one Chromium
css, wait_for = web.css, web.wait_for
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def host() -> Iterator[web.RunningHost]:
    with tempfile.TemporaryDirectory() as d:
        running = web.RunningHost(Path(d))
        yield running
        running.stop()


class Player(threading.Thread):
    """A client in a thread of its own: creates a Crazy Eights table with a bot, takes seat 0,
    and stays connected until the session ends; its pushes go to :attr:`pushes`."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.session: queue.Queue[str] = queue.Queue()
        self.pushes: queue.Queue[dict[str, Any]] = queue.Queue()

    def run(self) -> None:
        async def play() -> None:
            async with await Client.connect("127.0.0.1", self.port) as c:
                made = await c.call("create", game="crazy-eights", seats=2, bots=1)
                await c.call("join", session=made["session"], name="ann")
                self.session.put(made["session"])
                while (p := await c.next_push()) is not None:
                    self.pushes.put(p)
                    if p["push"] == "ended":
                        break

        trio.run(play)

    def ended(self, timeout: float = 30) -> dict[str, Any]:
        while True:
            p = self.pushes.get(timeout=timeout)
            if p["push"] == "ended":
                return p


def test_the_operator_sees_a_session_and_ends_it_and_its_log_verifies(host, browser):
    d = browser
    player = Player(host.port)
    player.start()
    sid = player.session.get(timeout=30)
    d.get(host.base + "/admin.html")
    row = wait_for(d, lambda d: css(d, f'tr[data-session="{sid}"]'), "the session listed")[0]
    seats = row.find_element("css selector", "td.holders").text
    assert "0: ann — connected from 127.0.0.1:" in seats, seats
    assert "1: bot1 — host bot" in seats, seats
    assert row.find_element("css selector", "td.state").text == "playing"
    wait_for(d, lambda d: css(d, "#m-sessions")[0].text == "1", "the metrics at a glance")
    assert css(d, "#m-connections")[0].text.startswith("1 / ")
    row.find_element("css selector", "button.end").click()
    confirm = wait_for(d, lambda d: css(d, f'tr[data-session="{sid}"] button.confirm-end'), "ask")
    confirm[0].click()
    status = wait_for(d, lambda d: css(d, "#status-ok"), "the end confirmed")[0]
    assert f"Ended session {sid}" in status.text
    ended = player.ended()
    assert (ended["outcome"], ended["aborted"]) == (None, "admin")
    wait_for(
        d,
        lambda d: [r for r in css(d, f'tr[data-session="{sid}"] td.state') if r.text == "ended"],
        "the list to show it ended",
    )
    records = host.records(sid)
    assert records[-1].type == "ended" and records[-1].seq == ended["seq"]
    assert records[-1].data["aborted"] == "admin" and records[-1].data["outcome"] is None
    log = host.data_dir / "sessions" / f"{sid}.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", "replay", "--verify", str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok: {sid}.jsonl: ")
    timeline = subprocess.run(
        [sys.executable, "-m", "tools.cli", "replay", "--raw", str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert timeline.stdout.splitlines()[-1].split()[2:] == ["ended", "outcome", "null"]
    # the debugger loads the log page by page and says how far it got, then hides the bar
    d.get(f"{host.base}/debug.html#{sid}")
    last = str(records[-1].seq)
    wait_for(d, lambda d: css(d, "#last")[0].text == last, "the whole timeline")
    wait_for(d, lambda d: not css(d, "#loading")[0].is_displayed(), "the loading bar gone")
    count = f"{len(records):,}"
    said = d.execute_script("return document.getElementById('load-text').textContent")
    assert said == f"loading records: {count} of {count}", said


def test_with_an_admin_token_the_page_asks_for_it(browser):
    with tempfile.TemporaryDirectory() as tmp:
        guarded = web.RunningHost(Path(tmp), "--admin-token", "opensesame")
        try:
            d = browser
            d.get(guarded.base + "/admin.html")
            wait_for(d, lambda d: css(d, "#status-error"), "the request for the token")
            assert css(d, "#login")[0].is_displayed()
            field = css(d, "#token")[0]
            field.send_keys("opensesame")
            css(d, "#use-token")[0].click()
            wait_for(d, lambda d: not css(d, "#login")[0].is_displayed(), "the token taken")
            wait_for(d, lambda d: "No live session." in css(d, "#sessions")[0].text, "the list")
            assert css(d, "#m-sessions")[0].text == "0"
        finally:
            guarded.stop()
