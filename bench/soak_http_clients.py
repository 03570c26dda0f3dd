"""The soak's well-behaved HTTP clients: legacy sessions, or stateless 2026-07-28 POSTs.

A client owns its connections and writes only its configuration's :class:`~soak_tally.Tally`, as
the stream clients of soak_clients.py do, with the same call mix and the same number of requests in
flight. A legacy session is opened with ``initialize``, used until a drawn life ends, then ended
with ``DELETE``; a 2026-07-28 client sends stateless POSTs and cancels by closing a response.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import trio
from soak_clients import (
    CONCURRENCY,
    CONNECTION_LIFE_S,
    INITIALIZED,
    RETRY_S,
    cancelled,
    initialize,
    on_disconnect,
)
from soak_http import MODERN_META, HttpClosed, HttpConn, post
from soak_tally import CANCEL_AFTER_S, Ledger, Tally, draw_call, error_reason, tools_call

SESSION_GONE = {"session-ended", "unknown-session", "child-exited"}  # error reasons: the session is over


async def http_legacy_client(
    host: str, port: int, path: str, tally: Tally, seed: int, stop_at: float
) -> None:
    """Legacy sessions (2025-11-25) one after another until ``stop_at``; DELETE ends each."""
    rng = random.Random(seed)
    ids = itertools.count(1)
    while trio.current_time() < stop_at:
        ledger = Ledger(tally)
        session = await _open_session(host, port, path, ledger, ids)
        if session is None:
            await trio.sleep(RETRY_S)
            continue
        tally.connections += 1
        life_end = min(stop_at, trio.current_time() + rng.uniform(*CONNECTION_LIFE_S))
        gone = trio.Event()
        async with trio.open_nursery() as nursery:
            for _ in range(CONCURRENCY):
                nursery.start_soon(_http_worker, host, port, path, ledger, rng, ids, life_end, session, gone)
        if gone.is_set():
            on_disconnect(tally, "an HTTP session ended")
        else:
            with trio.move_on_after(5):
                conn = await HttpConn.open(host, port)
                try:
                    await conn.exchange("DELETE", path, [("mcp-session-id", session)])
                except HttpClosed as exc:
                    tally.fail(f"DELETE failed: {exc}")
                finally:
                    await conn.aclose()
        ledger.close()


async def http_modern_client(
    host: str, port: int, path: str, tally: Tally, seed: int, stop_at: float
) -> None:
    """Stateless 2026-07-28 POSTs until ``stop_at``; a cancellation closes its response."""
    rng = random.Random(seed)
    ids = itertools.count(1)
    ledger = Ledger(tally)
    tally.connections += 1
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(_http_worker, host, port, path, ledger, rng, ids, stop_at, None, trio.Event())
    ledger.close()


async def _open_session(
    host: str, port: int, path: str, ledger: Ledger, ids: itertools.count[int]
) -> str | None:
    request_id = f"init-{next(ids)}"
    ledger.send(request_id, "initialize", 0.0)
    conn = None
    try:
        conn = await HttpConn.open(host, port)
        with trio.fail_after(30):
            answer = await post(conn, path, initialize(request_id))
            for message in answer.messages:
                ledger.reply(message)
            session = answer.headers.get("mcp-session-id")
            if session is None or answer.status != 200:
                return None
            await post(conn, path, INITIALIZED, session)
            return session
    except (HttpClosed, OSError, trio.TooSlowError) as exc:
        ledger.tally.fail(f"initialize failed: {exc!r}")
        ledger.close()
        return None
    finally:
        if conn is not None:
            await conn.aclose()


async def _http_worker(
    host: str,
    port: int,
    path: str,
    ledger: Ledger,
    rng: random.Random,
    ids: itertools.count[int],
    stop_at: float,
    session: str | None,
    gone: trio.Event,
) -> None:
    tally = ledger.tally
    conn: HttpConn | None = None
    try:
        while trio.current_time() < stop_at and not gone.is_set():
            kind, tool, arguments, work_s = draw_call(rng)
            request_id = next(ids)
            token = f"p{request_id}" if kind in ("sleep", "progress", "cancel") else None
            message = tools_call(request_id, tool, arguments, token)
            if session is None:
                message["params"]["_meta"] = {**message["params"].get("_meta", {}), **MODERN_META}
            record = ledger.send(request_id, kind, work_s)
            if conn is None or not conn.reusable:
                if conn is not None:
                    await conn.aclose()
                conn = await HttpConn.open(host, port)
            try:
                async with trio.open_nursery() as nursery:
                    if kind == "cancel":
                        nursery.start_soon(_cancel, host, port, path, ledger, request_id, session, nursery)
                    with trio.move_on_at(record.bound_at):
                        answer = await post(conn, path, message, session, modern=session is None)
                        nursery.cancel_scope.cancel()
                        for reply in answer.messages:
                            if isinstance(reply, dict) and "method" not in reply:
                                if reply.get("id") is None and "error" in reply:
                                    tally.faults["refusal with id null"] += 1
                                    reply = {**reply, "id": request_id}
                                ledger.reply(reply)
                                if error_reason(reply) in SESSION_GONE and session is not None:
                                    gone.set()
                            else:
                                ledger.notification(reply)
                        if answer.status == 404 and session is not None:
                            gone.set()
            except HttpClosed as exc:
                if not record.cancelled:
                    tally.fail(f"POST {kind} ended without an answer: {exc}")
                await conn.aclose()
                conn = None
            if record.cancelled or not record.done.is_set():
                ledger.pending.pop(request_id, None)  # cancelled (no answer owed) or lost
                if not record.cancelled:
                    tally.lost += 1
                if conn is not None:
                    await conn.aclose()
                    conn = None
    except OSError as exc:
        tally.fail(f"HTTP connect failed: {exc!r}")
    finally:
        if conn is not None:
            await conn.aclose()


async def _cancel(
    host: str,
    port: int,
    path: str,
    ledger: Ledger,
    request_id: Any,
    session: str | None,
    post_nursery: trio.Nursery,
) -> None:
    """Cancel a request after :data:`CANCEL_AFTER_S`: legacy by notification, modern by closing."""
    await trio.sleep(CANCEL_AFTER_S)
    ledger.cancel(request_id)
    if session is None:
        post_nursery.cancel_scope.cancel()  # closing the response is 2026-07-28's cancellation
        return
    conn = await HttpConn.open(host, port)
    try:
        with trio.move_on_after(10):
            await post(conn, path, cancelled(request_id), session)
    except HttpClosed:
        pass
    finally:
        await conn.aclose()
