"""Enough file descriptors for the connections the daemon is configured to serve.

A connection whose child is its own holds :data:`PER_CONNECTION` descriptors in the daemon: its
socket, the child's stdin, stdout and stderr pipes, and the child's pidfd (measured: 250 more
with 50 clients connected over Unix, WebSocket or HTTP; one each with a shared child). Most Linux
systems give a process a soft ``RLIMIT_NOFILE`` of 1024 (systemd's default for services, and
most login shells'), kept low for programs that still use select(2), whose ``fd_set`` ends at
1024; the hard limit is far higher (systemd's default 524288). At ``--max-connections``' default
of 256, a bridge needs about 1,350: left at 1024, the connections past about 190 would wait in
the listen queue while the accept loop waits for a free descriptor.

An HTTP address also holds up to 512 TCP connections of its own (its sessions, and their
children, are connections), one descriptor each.

So, as systemd's documentation asks of a program that does not use select(2) (trio waits with
epoll) and as Go's runtime has done for every program since 1.19, the command line raises the soft
limit at start-up, and again when a reload adds servers, to what its servers need
(:func:`descriptors_needed`), never past the hard limit and never lower than it was. Where the hard
limit is too low, it logs a WARNING that says how many connections fit and what to raise, and
serves within it. Children inherit the raised soft limit (Go gives them the old one back; Python's
``subprocess`` can only do that in a ``preexec_fn``, which is unsafe in a process that starts
children from threads, as trio does); a server using select(2) would notice only past 1024
descriptors of its own. A program embedding the library keeps its own limit.

:func:`raised_limit` decides (sans-IO); :func:`ensure_descriptors` reads, sets and logs.
"""

from __future__ import annotations

import logging
import resource

logger = logging.getLogger("bridge")

# Descriptors the daemon holds per connection with a child of its own (see above).
PER_CONNECTION = 5
# An HTTP address's TCP connections at once (channels/_http/server/front.py MAX_CONNECTIONS), one
# descriptor each: they come and go beside its sessions, which count as connections.
HTTP_SLOTS = 512
# Every HTTP address kind, a socket-activated one (http+fd) included: each has those slots.
# (bridge/_cli/serve.py's HTTP_SCHEMES are the network ones, those --cors-origin and its kin need.)
HTTP_LISTENER_SCHEMES = frozenset({"http", "https", "http+fd"})
# Besides its connections: 15 held with no client (measured: stdio, epoll, trio's wake-up pair,
# the listeners, the example server's pipes), the admin endpoint's, log files, children being
# started and connections being refused at --max-connections; rounded up generously.
RESERVE = 64


def descriptors_needed(connections: int, http_addresses: int = 0) -> int:
    """The soft limit for ``connections`` connections with a child each and ``http_addresses``."""
    return RESERVE + PER_CONNECTION * connections + HTTP_SLOTS * http_addresses


def connections_within(limit: int, http_addresses: int = 0) -> int:
    """How many connections with a child each fit under a descriptor limit of ``limit``."""
    return max(0, (limit - RESERVE - HTTP_SLOTS * http_addresses) // PER_CONNECTION)


def raised_limit(soft: int, hard: int, needed: int) -> int | None:
    """The soft limit to set for ``needed`` descriptors, or ``None`` to leave ``soft`` as it is.

    Never lower than ``soft``, never higher than ``hard`` (``RLIM_INFINITY``: no ceiling).
    """
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    ceiling = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    return ceiling if ceiling > soft else None


def ensure_descriptors(connections: int, http_addresses: int = 0) -> None:
    """Raise the soft ``RLIMIT_NOFILE`` for ``connections`` and ``http_addresses``, or warn."""
    needed = descriptors_needed(connections, http_addresses)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = raised_limit(soft, hard, needed)
    if new is not None:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (OSError, ValueError) as exc:  # a sandbox that forbids it: the warning below says what fits
            logger.debug("could not raise the file descriptor limit to %d: %s", new, exc)
        else:
            logger.info(
                "file descriptor limit raised from %d to %d for %d connections", soft, new, connections
            )
            soft = new
    if soft != resource.RLIM_INFINITY and soft < needed:
        logger.warning(
            "the file descriptor limit (%d, hard limit %s) leaves room for about %d of the %d connections "
            "--max-connections allows, each with a child of its own (beside %d per HTTP address); raise it "
            "(LimitNOFILE= in a systemd unit, ulimit -n in a shell) to %d, or lower --max-connections",
            soft,
            "unlimited" if hard == resource.RLIM_INFINITY else hard,
            connections_within(soft, http_addresses),
            connections,
            HTTP_SLOTS,
            needed,
        )
