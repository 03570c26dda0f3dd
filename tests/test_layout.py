"""The layout keeps its promises: rooms import only the rooms below them, no module is a maze.

Each subpackage's docstring states what it may import (docs/design.md §2); ``ROOMS`` below is the
same rule in a form a test can check, so that a change to one without the other fails here.
Imports are read from the source (``ast``), so the check costs nothing and imports nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO

PACKAGES = ("channels", "bridge")
# Module length: a module that needs scrolling through is a room that wants splitting (issue 14).
MAX_LINES = 400
# The benchmark's and the examples' scripts are no rooms, but they are read the same way: the same
# length limit holds for them (their own git-ignored venvs and node modules are not theirs).
SCRIPT_FOLDERS = ("bench", "examples")

# Which rooms each room may import at run time (type-only imports are checked separately).
# A room is a subpackage, or one of the top-level modules every room shares.
ROOMS: dict[str, set[str]] = {
    "channels._core": set(),
    "channels._sockets": {"channels._core"},
    "channels._oauth": {"channels._core"},
    "channels._ws": {"channels._core", "channels._sockets", "channels._oauth"},
    "channels._mcp": {"channels._core"},
    "channels._http": {"channels._core", "channels._sockets", "channels._mcp", "channels._oauth"},
    "channels.testing": {"channels"},
    "bridge._version": set(),
    "bridge._errors": {"channels"},
    "bridge._limits": {"bridge._errors"},
    "bridge._child": {"channels", "bridge._errors", "bridge._limits"},
    "bridge._relay": {"channels", "bridge._errors", "bridge._limits", "bridge._child"},
    "bridge._shared": {
        "channels",
        "bridge._version",
        "bridge._errors",
        "bridge._limits",
        "bridge._child",
        "bridge._relay",
    },
    "bridge._daemon": {
        "channels",
        "bridge._errors",
        "bridge._limits",
        "bridge._child",
        "bridge._relay",
        "bridge._shared",
    },
    "bridge._ops": {
        "channels",
        "bridge._version",
        "bridge._errors",
        "bridge._limits",
        "bridge._child",
        "bridge._relay",
        "bridge._shared",
        "bridge._daemon",
    },
    "bridge._cli": {"channels", "bridge"},
    "bridge.example_server": set(),
}
# The public faces: a package top imports its rooms; nothing else counts as a room of its own.
TOPS = {"channels", "bridge", "bridge.__main__"}


def modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


MODULES = dict(modules())
SCRIPTS = {
    str(path.relative_to(REPO)): path
    for folder in SCRIPT_FOLDERS
    for path in sorted((REPO / folder).rglob("*.py"))
    if not any(part.startswith(".") for part in path.relative_to(REPO).parts)
}


def room_of(module: str) -> str:
    for room in sorted(ROOMS, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return module


def imports_of(module: str, *, type_only: bool) -> set[str]:
    """The project modules ``module`` imports: at run time, or under ``TYPE_CHECKING`` only."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for inner in child.body:
                    visit_one(inner, True)
                for inner in child.orelse:
                    visit_one(inner, guarded)
            else:
                visit_one(child, guarded)

    def visit_one(node: ast.AST, guarded: bool) -> None:
        if guarded == type_only:
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                for candidate in (target, *(f"{target}.{alias.name}" for alias in node.names)):
                    if candidate in MODULES:
                        found.add(candidate)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in MODULES)
        visit(node, guarded)

    visit(ast.parse(path.read_text()), False)
    found.discard(module)
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            strong(node)
    return found


def test_no_module_imports_another_that_imports_it_back_at_run_time() -> None:
    edges = {module: imports_of(module, type_only=False) for module in MODULES}
    assert cycles(edges) == []


def test_even_counting_type_only_imports_no_module_takes_part_in_an_import_circle() -> None:
    edges = {
        module: imports_of(module, type_only=False) | imports_of(module, type_only=True) for module in MODULES
    }
    assert cycles(edges) == []


def test_channels_never_imports_bridge() -> None:
    offenders = {
        module: sorted(
            target for target in imports_of(module, type_only=False) if target.startswith("bridge")
        )
        for module in MODULES
        if module.startswith("channels")
    }
    assert {module: targets for module, targets in offenders.items() if targets} == {}


def test_each_room_imports_only_the_rooms_its_docstring_allows() -> None:
    breaches = []
    for module in MODULES:
        if module in TOPS:
            continue
        room = room_of(module)
        assert room in ROOMS, f"{module} lives in no room of ROOMS: add its room and its import rule"
        for target in imports_of(module, type_only=False):
            other = room_of(target)
            if other == room or target in ROOMS.get(room, set()):
                continue
            if any(target == allowed or target.startswith(allowed + ".") for allowed in ROOMS[room]):
                continue
            breaches.append(f"{module} imports {target}")
    assert breaches == []


def test_every_room_says_what_lives_in_it_and_what_it_may_import() -> None:
    silent = []
    for module, path in MODULES.items():
        if path.name != "__init__.py" or module in PACKAGES:
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "Import rule" not in docstring:
            silent.append(module)
    assert silent == []


def test_the_sans_io_modules_import_no_trio() -> None:
    # A module whose docstring says it is sans-IO must be usable without an event loop.
    with_trio, checked = [], []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        docstring = ast.get_docstring(tree) or ""
        first_line = docstring.split("\n")[0]
        if not re.search(r"\bsans-IO\b", first_line, re.IGNORECASE) or path.name == "__init__.py":
            continue
        checked.append(module)
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name == "trio" or name.startswith("trio.") for name in names):
                with_trio.append(module)
    assert len(checked) >= 10, checked  # framing, JSON-RPC, tokens, the MCP rules, the router...
    assert with_trio == []


@pytest.mark.parametrize("module", [*sorted(MODULES), *sorted(SCRIPTS)])
def test_no_module_is_longer_than_a_reader_can_hold(module: str) -> None:
    lines = len({**MODULES, **SCRIPTS}[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines"


def test_the_tests_mirror_the_source_tree() -> None:
    # tests/channels/core holds the tests of channels/_core, tests/bridge/cli those of bridge/_cli.
    strays = []
    for package in PACKAGES:
        for folder in sorted((REPO / "tests" / package).rglob("*")):
            if not folder.is_dir() or folder.name == "__pycache__":
                continue
            parts = folder.relative_to(REPO / "tests" / package).parts
            source = (REPO / package / f"_{parts[0]}").joinpath(*parts[1:])
            if not source.is_dir():
                strays.append(str(folder.relative_to(REPO)))
    assert strays == []
