"""Where a relay's busy time goes: the shares of a profile's samples, by the code the sample was in.

Run from the repository root, on collapsed stacks written by ``bench/profile.py ROW --out X.txt``::

    python bench/shares.py /tmp/unix.txt /tmp/ws.txt   # a Markdown table, one column per file

Each sample is put down to the frame it was taken in (the leaf of its stack), sorted by the first of
:data:`CATEGORIES` whose test the frame's function and file pass. Samples of the event loop waiting
in ``epoll`` are idle: the table gives them apart, as a share of all samples, and every other share
is of the busy samples. A leaf frame says where the time went, not on whose behalf: a write's
system call counts as a write whichever layer asked for it.
"""

from __future__ import annotations

import argparse
import collections
import re
from collections.abc import Callable
from pathlib import Path

IDLE = "idle"
Test = Callable[[str, str], bool]  # (function, file path with a leading "/") -> whether it is this category


def _json_decode(function: str, path: str) -> bool:
    return path.endswith(("jsonrpc.py", "lines.py", "guard.py")) or "/json/" in path or "/_mcp/params" in path


def _writes(function: str, path: str) -> bool:
    return (
        (path.endswith("fdio.py") and "write" in function)
        or "send_all" in function
        or ("_unix_pipes.py" in path and "send" in function)
    )


def _reads(function: str, path: str) -> bool:
    return (
        (path.endswith("fdio.py") and ("read" in function or "receive" in function))
        or "_nonblocking_helper" in function
        or "receive_some" in function
    )


CATEGORIES: tuple[tuple[str, Test], ...] = (
    (IDLE, lambda function, path: "get_events" in function and "_io_epoll" in path),
    ("JSON encode", lambda function, path: path.endswith("jsonrpc.py") and function.startswith("encode")),
    ("JSON decode and checks", _json_decode),
    ("writes (syscalls)", _writes),
    ("reads (syscalls)", _reads),
    ("line framing", lambda function, path: path.endswith("framing.py")),
    ("WebSocket frames", lambda function, path: "/_ws/" in path or "/websockets/" in path),
    (
        "HTTP parsing and responses",
        lambda function, path: any(part in path for part in ("/_http/", "httptools", "/h11/", "/_mcp/")),
    ),
    (
        "relay and shared-child bookkeeping",
        lambda function, path: any(
            part in path for part in ("/bridge/_relay/", "/bridge/_shared/", "/bridge/_daemon/")
        ),
    ),
    ("channels (streams, locks)", lambda function, path: "/channels/" in path),
    ("trio's scheduling", lambda function, path: "/trio/" in path or "/outcome/" in path),
    ("other", lambda function, path: True),
)
# py-spy's raw format names a frame "function (path/to/file.py:line)"; the line is optional.
_FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")


def category(frame: str) -> str:
    """The category of one frame as py-spy names it."""
    match = _FRAME.match(frame)
    function, path = (match[1], "/" + match[2]) if match else (frame, "")
    return next(name for name, test in CATEGORIES if test(function, path))


def shares(lines: list[str]) -> tuple[dict[str, float], float]:
    """Collapsed stacks (``frame;frame;... COUNT`` per line) -> (busy share per category in %, idle %).

    Raises:
        ValueError: a line is not a stack and a count, or the profile has no busy sample.
    """
    samples: collections.Counter[str] = collections.Counter()
    for line in lines:
        if not line.strip():
            continue
        stack, count = line.rstrip("\n").rsplit(" ", 1)
        samples[category(stack.split(";")[-1])] += int(count)
    busy = sum(count for name, count in samples.items() if name != IDLE)
    if busy == 0:
        raise ValueError("the profile has no busy sample")
    table = {name: 100 * samples[name] / busy for name, _ in CATEGORIES if name != IDLE}
    return table, 100 * samples[IDLE] / (busy + samples[IDLE])


def table(columns: dict[str, tuple[dict[str, float], float]]) -> str:
    """A Markdown table of :func:`shares` results, one column per profile."""
    rows = ["| share of busy time | " + " | ".join(columns) + " |", "|---|" + "--:|" * len(columns)]
    for name, _ in CATEGORIES[1:]:
        rows.append(f"| {name} | " + " | ".join(f"{busy[name]:.0f} %" for busy, _ in columns.values()) + " |")
    rows.append(
        "| (idle, of all samples) | " + " | ".join(f"{idle:.0f} %" for _, idle in columns.values()) + " |"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "profiles", nargs="+", type=Path, help="collapsed stacks from bench/profile.py --out X.txt"
    )
    args = parser.parse_args()
    print(table({path.stem: shares(path.read_text().splitlines()) for path in args.profiles}))


if __name__ == "__main__":
    main()
