"""The commands of ``mcp-bridge``: ``serve`` (the default), ``connect`` and ``check-config``.

:func:`dispatch` runs the one a command line names: it parses, configures logging, runs the
command under trio, and turns what escapes into an exit code (:mod:`.exits`): a crash loop, a
setting that cannot work, or any other failure. :func:`.main.main` imports this module only once
it knows the command line asks for more than ``--version``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from channels import AddressError, ListenError, parse_address

from .._child.restarts import CrashLoop
from .._errors import ChildStartError, ConfigError
from .._ops.descriptors import HTTP_LISTENER_SCHEMES, ensure_descriptors
from .._ops.heap import Heap, give_back_freed_memory
from .._ops.logs import configure_logging
from .._ops.memory import (
    collect_garbage_less_often,
    collect_old_garbage,
    collect_start_up_garbage,
    forget_generated_sources,
)
from .._ops.plan import FleetPlan
from .exits import EXIT_CONFIG, EXIT_CRASH_LOOP, EXIT_FAILURE
from .serve import check_config, serve, servers_to_run
from .serve_parser import serve_parser

logger = logging.getLogger("bridge")


def dispatch(args: list[str]) -> int:
    """Run the command ``args`` (``sys.argv[1:]``) names; returns the exit code."""
    if args[:1] == ["connect"]:
        return _connect(args[1:])
    if args[:1] == ["check-config"]:
        return check_config(args[1:])
    if args[:1] == ["serve"]:
        args = args[1:]
    return _serve(args)


def _connect(args: Sequence[str]) -> int:
    """``mcp-bridge connect ADDRESS [options]``."""
    # Imported here: a bridge that serves never loads the client command.
    from .connect import run_connect
    from .connect_parser import build_connect_options, connect_parser

    options = connect_parser().parse_args(args)
    configure_logging(options.log_level, options.log_format)
    try:
        address = parse_address(options.address)
        connect_options = build_connect_options(options)
    except (AddressError, ConfigError) as exc:
        logger.error("%s", exc)
        return EXIT_CONFIG
    return trio.run(run_connect, address, connect_options)


def _serve(args: list[str]) -> int:
    """``mcp-bridge [serve] [options] -- COMMAND [ARGS...]``, or with ``--config FILE``."""
    command: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, command = args[:split], args[split + 1 :]
    parser = serve_parser()
    options = parser.parse_args(args)
    heap = Heap.configure()
    collect_garbage_less_often()
    if options.config is None and not options.listen:
        parser.error("one of --listen ADDRESS (with a command after '--') or --config FILE is required")
    configure_logging(options.log_level, options.log_format)
    try:
        configs, reread = servers_to_run(options, command)
        ensure_descriptors(*_descriptor_budget(configs))
        if reread is not None:
            reread = functools.partial(_reread_with_descriptors, reread)
        admin = None
        if options.admin is not None:
            # The admin endpoint's HTTP (h11) loads only with --admin.
            from .._ops.admin import admin_address

            admin = admin_address(options.admin)
        forget_generated_sources()  # the command line's modules are imported (rooms loaded later keep theirs)
        collect_start_up_garbage()
        return trio.run(_serve_tended, heap, functools.partial(serve, configs, options.tap, admin, reread))
    except Exception as exc:
        return _report(exc)


async def _serve_tended(heap: Heap | None, serving: Callable[[], Awaitable[int]]) -> int:
    """``serving()`` (the daemon), with tasks beside it that free old cycles and give memory back.

    Its old cyclic garbage is collected once a period, and ``heap``'s freed memory given back.
    System tasks: trio cancels them once ``serving`` returns or raises, whatever that was.
    """
    trio.lowlevel.spawn_system_task(collect_old_garbage, name="collect-old-garbage")
    if heap is not None:
        trio.lowlevel.spawn_system_task(give_back_freed_memory, heap.free_bytes, heap.trim, name="heap-trim")
    return await serving()


def _descriptor_budget(plan: FleetPlan) -> tuple[int, int]:
    """The connections the plan's servers may serve at once, and the HTTP addresses it listens on.

    The first is the sum of each server's ``--max-connections``; the second counts each server's
    own HTTP addresses and the shared HTTP listeners.
    """
    servers = plan.servers.values()
    schemes = [address.scheme for config in servers for address in config.listen]
    schemes += [listener.url.partition(":")[0] for listener in plan.listeners.values()]
    return sum(config.limits.max_connections for config in servers), sum(
        s in HTTP_LISTENER_SCHEMES for s in schemes
    )


def _reread_with_descriptors(reread: Callable[[], FleetPlan]) -> FleetPlan:
    """``reread()``, with the file descriptor limit raised for the servers it brings (SIGHUP)."""
    plan = reread()
    ensure_descriptors(*_descriptor_budget(plan))
    return plan


def _report(exc: Exception) -> int:
    """Log what stopped ``serve``, and return its exit code.

    A crash loop is one line (exit 75); settings that cannot work are one line each (exit 78);
    anything else is a failure, logged with its traceback (exit 1).
    """
    leaves = list(_leaves(exc))
    if any(isinstance(leaf, CrashLoop) for leaf in leaves):
        logger.error("%s", next(leaf for leaf in leaves if isinstance(leaf, CrashLoop)))
        return EXIT_CRASH_LOOP
    if all(isinstance(leaf, (ListenError, ConfigError, ChildStartError)) for leaf in leaves):
        for leaf in leaves:
            logger.error("%s", leaf)
        return EXIT_CONFIG
    logger.error("mcp-bridge failed", exc_info=exc)
    return EXIT_FAILURE


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; trio wraps what escapes a nursery."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


__all__ = ["dispatch"]
