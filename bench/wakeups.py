"""What a wake-up costs on this machine: round trips between two processes, with no relay at all.

Run from the repository root::

    python bench/wakeups.py [--round-trips 20000] [--runs 3] [--kinds blocking,epoll,trio]

A forked peer writes a byte to a pipe and waits for one back, ``--round-trips`` times; this
process answers each, in one of three ways:

* ``blocking``: ``os.read`` on a blocking pipe, then ``os.write``: the kernel's own wake-up;
* ``epoll``: a loop of ``epoll.poll``, ``os.read``, ``os.write``, as socat's ``select`` loop does;
* ``trio``: one trio task that waits with ``trio.lowlevel.wait_readable`` and reads and writes the
  pipes itself, the path each of the bridge's two task steps per round trip takes
  (``channels/_core/fdio.py``), with nothing done per message.

Prints the median wall time per round trip over ``--runs`` runs of each, in µs. A relay's
sequential round trip is two such wake-ups of the relay (one per direction) on top of the client's
and the server's own, so ``trio`` minus ``epoll`` is what trio's scheduling adds per wake-up, and
``epoll`` itself what any relay pays for being woken.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import time
from collections.abc import Callable

import trio

KINDS = ("blocking", "epoll", "trio")


def _answer_blocking(incoming: int, outgoing: int, count: int) -> None:
    for _ in range(count):
        os.read(incoming, 1)
        os.write(outgoing, b"y")


def _answer_epoll(incoming: int, outgoing: int, count: int) -> None:
    os.set_blocking(incoming, False)
    with select.epoll() as epoll:
        epoll.register(incoming, select.EPOLLIN)
        for _ in range(count):
            epoll.poll()
            os.read(incoming, 1)
            os.write(outgoing, b"y")


def _answer_trio(incoming: int, outgoing: int, count: int) -> None:
    os.set_blocking(incoming, False)

    async def answer() -> None:
        for _ in range(count):
            await trio.lowlevel.wait_readable(incoming)
            os.read(incoming, 1)
            os.write(outgoing, b"y")

    trio.run(answer)


ANSWER: dict[str, Callable[[int, int, int], None]] = {
    "blocking": _answer_blocking,
    "epoll": _answer_epoll,
    "trio": _answer_trio,
}


def round_trip_us(kind: str, count: int) -> float:
    """Microseconds per round trip, ``count`` of them, answered the ``kind`` way."""
    to_us, from_peer = os.pipe()
    to_peer, from_us = os.pipe()
    peer = os.fork()
    if peer == 0:  # the peer: ping, wait for the pong, and leave without any clean-up of ours
        try:
            for _ in range(count):
                os.write(from_peer, b"x")
                os.read(to_peer, 1)
        finally:
            os._exit(0)
    os.close(from_peer)
    os.close(to_peer)
    try:
        started = time.perf_counter()
        ANSWER[kind](to_us, from_us, count)
        elapsed = time.perf_counter() - started
    finally:
        os.close(to_us)
        os.close(from_us)
        os.waitpid(peer, 0)
    return elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round-trips", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="a subset (one, to count its instructions with valgrind)"
    )
    options = parser.parse_args()
    kinds = options.kinds.split(",")
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"--kinds: {', '.join(sorted(unknown))} (choose from {', '.join(KINDS)})")
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(options.runs):  # alternating, so that a slow spell of the machine hits each
        for kind in kinds:
            times[kind].append(round_trip_us(kind, options.round_trips))
    print("| answered by | µs per round trip (median) | runs |")
    print("|---|--:|---|")
    for kind in kinds:
        runs = ", ".join(f"{value:.1f}" for value in times[kind])
        print(f"| {kind} | {statistics.median(times[kind]):.1f} | {runs} |")


if __name__ == "__main__":
    main()
