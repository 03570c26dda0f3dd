"""The documentation stays true to the tree: every file it names exists, the README stays short.

The docs site itself is built with ``mkdocs build --strict`` by .ci/run (it needs the ``docs``
extra); these checks need nothing but the files, so they run with every test run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

# The README is read by newcomers in five minutes; everything else lives in docs/ (issue 14).
README_LIMIT = 20 * 1024
# A path into the packages, as prose and comments write them: `channels/_core/stream.py`.
PACKAGE_PATH = re.compile(r"(?<![\w/.])((?:channels|bridge)/[\w/]*\.py)\b")
# Comments point at the project's own documents (docs/design.md, the docs pages) or at primary
# sources (RFCs, the MCP spec, the SDKs' files), never at notes outside the repository.
OUTSIDE_REFERENCE = re.compile(
    r"(?<![\w/])DESIGN\.md|reliability-anchors|mcp-spec-digest|layout-lessons|style-anchors|peers\.md|shared/reference"
)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def texts() -> list[Path]:
    roots = [
        "README.md",
        "CHANGELOG.md",
        "docs",
        "bridge",
        "channels",
        "tests",
        "bench",
        "examples",
        "deploy",
    ]
    found: list[Path] = []
    for root in roots:
        path = REPO / root
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        found += [
            p
            for p in candidates
            if p.is_file() and p.suffix in {".md", ".py", ".toml", ".yaml", ".yml"} and ".node" not in p.parts
        ]
    return found


def test_the_readme_is_a_five_minute_read() -> None:
    assert len((REPO / "README.md").read_bytes()) <= README_LIMIT


def test_every_package_file_the_docs_comments_and_tests_name_exists() -> None:
    missing = sorted(
        f"{path.relative_to(REPO)}: {name}"
        for path in texts()
        if path.name != "CHANGELOG.md"  # the changelog tells of files that were moved away
        for name in PACKAGE_PATH.findall(path.read_text(errors="replace"))
        if not (REPO / name).exists()
    )
    assert missing == []


def test_nothing_points_at_a_document_outside_the_repository() -> None:
    outside = sorted(
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in texts()
        if path != Path(__file__)
        for match in OUTSIDE_REFERENCE.finditer(path.read_text(errors="replace"))
    )
    assert outside == []


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md", "bench/README.md", "deploy/README.md"])
def test_every_relative_link_of_the_top_level_pages_reaches_a_file(page: str) -> None:
    source = REPO / page
    broken = [
        target
        for target in LINK.findall(source.read_text())
        if "://" not in target and not (source.parent / target).exists()
    ]
    assert broken == []
