"""A peer beside the host in ``gamehost bench --peer boardgameio``: another game server, measured
minutes apart on the same machine, playing the same Crazy Eights.

The peer is `boardgame.io <https://boardgame.io>`_ (version :data:`BOARDGAMEIO`, its own Node.js
server with the library's in-memory storage, so it keeps nothing on disk). Its Crazy Eights is
``tools/peer_js/boardgameio/crazy_eights.js``, the rules of the ``crazy-eights`` plugin with its
default options (docs/rules/crazy-eights.md): the same deal, the same moves (draw whenever, pass
only when nothing can be drawn or played), the same scoring to 50 points per player. The load
(``load.js``) is the library's own client over its socket.io transport, one per seat, each
answering its turn with a random legal move, a new match whenever one ends — as ``bench
--all-clients`` plays the host, every seat a client.

Nothing here is installed by the project's setup: on first use the package is installed with
``npm`` (the npm registry must be reachable) into a cache folder (``--peer-cache``, by default
``$XDG_CACHE_HOME/gamehost/peers``, else ``~/.cache/gamehost/peers``), about 40 MB. Node.js 18 or
newer is needed (its built-in ``fetch``).

The figures, read as the host's are: the server process's CPU time from ``/proc`` over the
measured stretch (the matches made and joined before it starts), divided by the moves made;
the round trip of a move (sent → the state that holds it reached the next mover) p50 / p99;
the server's peak resident memory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

__all__ = ["BOARDGAMEIO", "PEERS", "cache_dir", "install", "run_peer", "summary"]

BOARDGAMEIO = "0.50.2"
"""The boardgame.io release the peer runs (pinned: figures compare across runs)."""

PEERS = {"boardgameio": ("boardgame.io", BOARDGAMEIO)}
"""Peer name → (npm package, version)."""

SOURCES = Path(__file__).with_name("peer_js")
"""The peers' JavaScript, one folder per peer."""

INSTALL_TIMEOUT = 600.0
"""Seconds ``npm install`` may take."""

START_TIMEOUT = 60.0
"""Seconds a peer server may take to listen, and its load to make and join its matches."""


def cache_dir(given: str | None = None) -> Path:
    """The folder peers are installed in: ``given``, else ``$XDG_CACHE_HOME/gamehost/peers``,
    else ``~/.cache/gamehost/peers``."""
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gamehost" / "peers"


def _installed_version(folder: Path, package: str) -> str | None:
    try:
        meta = orjson.loads((folder / "node_modules" / package / "package.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return meta.get("version") if isinstance(meta, dict) else None


def install(peer: str, cache: Path, say: Callable[[str], None] | None = None) -> Path:
    """Make ``cache/<peer>`` ready to run: the peer's JavaScript copied in (every time, so it
    is the project's), its npm package installed unless that version is there already
    (``say`` is told so first: it takes a while).

    Returns:
        the peer's folder.

    Raises:
        ValueError: an unknown peer. RuntimeError: ``node`` or ``npm`` is missing, the cache
        folder cannot be written, or ``npm install`` failed (its last lines in the message).
    """
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}: one of {', '.join(PEERS)}")
    package, version = PEERS[peer]
    if shutil.which("node") is None:
        raise RuntimeError(f"--peer {peer} needs Node.js: node is not on the PATH")
    folder = cache / peer
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for src in (SOURCES / peer).glob("*.js"):
            shutil.copyfile(src, folder / src.name)
        if _installed_version(folder, package) == version:
            return folder
        if shutil.which("npm") is None:
            raise RuntimeError(
                f"--peer {peer} needs npm to install {package}: it is not on the PATH"
            )
        # whatever is there is not that version (or is damaged): installed afresh
        shutil.rmtree(folder / "node_modules", ignore_errors=True)
        (folder / "package-lock.json").unlink(missing_ok=True)
        manifest = {"private": True, "dependencies": {package: version}}
        (folder / "package.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    except OSError as exc:
        raise RuntimeError(
            f"cannot use {folder} for --peer {peer}: {exc.strerror or exc}; give --peer-cache DIR"
            " (a folder you can write)"
        ) from exc
    if say is not None:
        say(f"installing {package} {version} with npm into {folder} (first use, about 40 MB)")
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(
            f"npm install {package}@{version} in {folder} took more than {INSTALL_TIMEOUT:.0f} s"
        ) from exc
    if done.returncode != 0 or _installed_version(folder, package) != version:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise RuntimeError(f"npm install {package}@{version} in {folder} failed: {tail}")
    return folder


def _start(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start the peer's ``server.js`` on a free port; the process and its port."""
    from tools.bench import _drain_in_thread, listening_port

    proc = subprocess.Popen(
        ["node", "server.js", "0"],
        cwd=folder,
        stdout=subprocess.DEVNULL,  # the library logs its routes there
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    timer = threading.Timer(START_TIMEOUT, proc.kill)
    timer.start()
    try:
        for line in proc.stderr:
            port = listening_port(line)
            if port is not None:
                _drain_in_thread(proc)
                return proc, port
    finally:
        timer.cancel()
    proc.wait()
    raise RuntimeError(
        f"the {folder.name} server exited (status {proc.returncode}) before it listened"
    )


def run_peer(
    peer: str, folder: Path, tables: int, seats: int, seconds: float, seed: int = 1
) -> dict[str, Any]:
    """Measure ``peer``, installed in ``folder`` (:func:`install`): ``tables`` matches of
    ``seats`` seats at once for ``seconds`` seconds, every seat a client.

    Returns:
        ``peer``, ``peer_version``, ``peer_moves``, ``peer_seconds``, ``peer_moves_per_s``,
        ``peer_matches`` (started), ``peer_matches_ended`` (played to a winner), ``peer_cpu_s``,
        ``peer_cpu_per_move_ms`` (the server's), ``peer_load_cpu_s`` (the load's),
        ``peer_rtt_p50_ms`` / ``p99`` / ``p999``, ``peer_peak_rss_mib``.

    Raises:
        ValueError: an unknown peer, or out-of-range numbers. RuntimeError: it could not be
        started, or its load did not report.
    """
    from tools.bench import _stop, cpu_seconds, peak_rss_mib

    if tables < 1 or not 2 <= seats <= 5 or not seconds > 0:
        raise ValueError("--peer plays 2-5 seats, at least one table, for more than 0 seconds")
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}: one of {', '.join(PEERS)}")
    server, port = _start(folder)
    try:
        load = subprocess.Popen(
            ["node", "load.js", str(port), str(tables), repr(seconds), str(seats), str(seed)],
            cwd=folder,
            stdout=subprocess.PIPE,
        )
        assert load.stdout is not None
        timer = threading.Timer(seconds + START_TIMEOUT, load.kill)
        timer.start()
        try:
            first = load.stdout.readline()
            cpu0, t0 = cpu_seconds(server.pid), time.monotonic()
            last = load.stdout.readline()
            cpu1, wall = cpu_seconds(server.pid), time.monotonic() - t0
            load_cpu = cpu_seconds(load.pid)  # read before it exits, just after its report
            load.wait()
        finally:
            timer.cancel()
            if load.poll() is None:
                load.kill()
                load.wait()
        try:
            started, figures = orjson.loads(first), orjson.loads(last)
        except orjson.JSONDecodeError:
            started, figures = None, None
        if not isinstance(started, dict) or not isinstance(figures, dict):
            raise RuntimeError(f"the {peer} load did not report (exit status {load.returncode})")
        moves = int(figures.get("moves") or 0)
        cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        return {
            "peer": peer,
            "peer_version": PEERS[peer][1],
            "peer_moves": moves,
            "peer_seconds": wall,
            "peer_moves_per_s": moves / wall if wall > 0 else None,
            "peer_matches": figures.get("matches"),
            "peer_matches_ended": figures.get("ended"),
            "peer_cpu_s": cpu,
            "peer_cpu_per_move_ms": None if cpu is None or not moves else cpu * 1000 / moves,
            "peer_load_cpu_s": load_cpu,
            "peer_rtt_p50_ms": figures.get("rtt_p50_ms"),
            "peer_rtt_p99_ms": figures.get("rtt_p99_ms"),
            "peer_rtt_p999_ms": figures.get("rtt_p999_ms"),
            "peer_peak_rss_mib": peak_rss_mib(server.pid),
        }
    finally:
        _stop(server)


def summary(r: dict[str, Any]) -> list[str]:
    """The peer's lines of ``bench``'s summary."""
    if "peer_error" in r:
        return [f"peer: not measured: {r['peer_error']}"]

    def ms(v: float | None) -> str:
        return "?" if v is None else f"{v:.2f} ms"

    lines = [
        f"peer {PEERS[r['peer']][0]} {r['peer_version']} (in memory, every seat a client):"
        f" {r['peer_moves']} moves in {r['peer_seconds']:.2f} s ="
        f" {r['peer_moves_per_s'] or 0:.0f} moves/s; server CPU {ms(r['peer_cpu_per_move_ms'])}"
        f" per move; move round trip p50 {ms(r['peer_rtt_p50_ms'])}, p99"
        f" {ms(r['peer_rtt_p99_ms'])}; server peak RSS "
        + ("?" if r.get("peer_peak_rss_mib") is None else f"{r['peer_peak_rss_mib']:.0f} MiB")
    ]
    ratio = r.get("cpu_per_move_vs_peer")
    if ratio is not None:
        lines.append(f"host CPU per move / peer's: {ratio:.2f}x")
    return lines
