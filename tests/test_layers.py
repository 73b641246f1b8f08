"""The layers hold (docs/architecture.md, "Layers"): imports point down only.

- nothing under ``host/`` imports ``tools`` (the CLI imports the host, never the reverse);
- ``host/table/`` (every module in it, whatever files it holds) is pure: it imports neither
  ``trio`` nor anything of ``host.store`` or ``host.net``.

Imports are read from each module's syntax tree (every ``import`` statement, at module level or
inside a function), so a docstring or comment that names a module is no import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOST = ROOT / "host"
TABLE = HOST / "table"


def module_name(path: Path) -> str:
    """``host/table/engine.py`` -> ``host.table.engine`` (a package's ``__init__`` is the
    package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for each module the source imports: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module), relative imports
    resolved against ``module`` (the importing module's dotted name)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def imports_of(path: Path) -> list[tuple[int, str]]:
    return list(
        imported(path.read_text(), module_name(path), is_package=path.name == "__init__.py")
    )


HOST_MODULES = sorted(HOST.rglob("*.py"))
TABLE_MODULES = sorted(TABLE.glob("*.py"))


def test_the_tree_holds_the_modules_the_rules_are_about():
    names = {module_name(p) for p in HOST_MODULES}
    assert {"host.table.engine", "host.table.history", "host.net.replayops"} <= names
    assert {p.name for p in TABLE_MODULES} >= {"__init__.py", "engine.py", "history.py"}


@pytest.mark.parametrize("path", HOST_MODULES, ids=lambda p: module_name(p))
def test_no_host_module_imports_tools(path: Path):
    bad = [(line, name) for line, name in imports_of(path) if under(name, "tools")]
    assert not bad, f"{path.relative_to(ROOT)} imports tools/ (lines, modules): {bad}"


@pytest.mark.parametrize("path", TABLE_MODULES, ids=lambda p: module_name(p))
def test_host_table_is_pure(path: Path):
    bad = [
        (line, name)
        for line, name in imports_of(path)
        if any(under(name, p) for p in ("trio", "host.store", "host.net"))
    ]
    assert not bad, f"{path.relative_to(ROOT)} imports I/O (lines, modules): {bad}"


def test_the_import_reader_finds_every_kind_of_import_and_no_docstring():
    source = '''"""This module does not `import tools` nor `from host.net import server`."""
import trio.lowlevel
from host import store
from ..net import session
from . import engine

def later():
    from tools.replay import load  # inside a function: still an import
    # import host.net.web (a comment)
    return "from tools import cli"
'''
    found = [name for _, name in imported(source, "host.table.core")]
    assert found == [
        "trio.lowlevel",
        "host",
        "host.store",
        "host.net",
        "host.net.session",
        "host.table",
        "host.table.engine",
        "tools.replay",
        "tools.replay.load",
    ]
    assert [under(n, "tools") for n in ("tools", "tools.cli", "toolsy", "host.tools")] == [
        True,
        True,
        False,
        False,
    ]
