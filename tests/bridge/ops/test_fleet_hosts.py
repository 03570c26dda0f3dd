"""The fleet's shared listeners: opened before the servers, kept across reloads while their own
settings stay, re-opened when they change; a mounted server that fails is reported, per server, in
``/readyz``, ``STATUS=`` and the index, and the others go on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import httpx2
import trio
from commands import get, http

from bridge import ChildSpec, ServeConfig
from bridge._ops.admin import serve_admin
from bridge._ops.fleet import Fleet
from bridge._ops.plan import FleetPlan, Mount, SharedListener
from channels import ListenOptions, TcpAddress

from conftest import example_server

TIMEOUT = 20
PUBLIC = SharedListener(url="http://127.0.0.1:0", options=ListenOptions())


def fleet_plan(
    names: list[str], listener: SharedListener = PUBLIC, unavailable: tuple[str, ...] = ()
) -> FleetPlan:
    servers = {
        name: ServeConfig(
            listen=(), child=ChildSpec(argv=list(example_server()), name=name), child_mode="per-connection"
        )
        for name in names
    }
    mounts = {name: (Mount("public", None, ListenOptions()),) for name in names}
    why = {name: "command 'x' not found in PATH" for name in unavailable}
    return FleetPlan(servers, {"public": listener}, mounts, why)


@asynccontextmanager
async def running(plan: FleetPlan) -> AsyncIterator[Fleet]:
    fleet = Fleet(None, False, plan=plan)
    async with trio.open_nursery() as nursery:
        fleet._nursery = nursery
        await fleet.start_all(trio.Event())
        try:
            yield fleet
        finally:
            fleet.stop()
            await fleet.wait_stopped()
            await fleet.hosts.aclose()
            nursery.cancel_scope.cancel()


async def test_a_reload_keeps_a_shared_listener_whose_settings_stay_and_reopens_one_whose_settings_change() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with running(fleet_plan(["alpha"])) as fleet:
            host = fleet.hosts.mapping()["public"]
            alpha = fleet.current[0]
            await fleet.reload(fleet_plan(["alpha", "beta"]))
            assert fleet.hosts.mapping()["public"] is host  # the same socket
            assert fleet.current[0] is alpha  # the same daemon, its sessions untouched
            assert [daemon.config.child.name for daemon in fleet.current] == ["alpha", "beta"]
            await fleet.reload(fleet_plan(["alpha", "beta"], attrs.evolve(PUBLIC, index=False)))
            assert fleet.hosts.mapping()["public"] is not host  # re-opened...
            assert alpha.stopped and alpha not in fleet.current  # ...and its servers restarted on it
            async with httpx2.AsyncClient() as client:
                address = fleet.hosts.mapping()["public"].address
                assert (await client.get(f"{address}/servers")).status_code == 404  # index = false


async def test_a_failed_mounted_server_is_named_in_status_readyz_and_the_index_and_the_others_stay_ready() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with running(fleet_plan(["alpha", "broken"], unavailable=("broken",))) as fleet:
            assert fleet.describe() == "alpha: serving 0 clients, 0 children (per-connection); broken: failed"
            assert fleet.healthy()  # the watchdog would restart the others with it
            async with trio.open_nursery() as nursery:
                [admin] = await nursery.start(
                    lambda task_status: serve_admin(
                        fleet.current,
                        TcpAddress("127.0.0.1", 0),
                        failed=fleet.failed,
                        task_status=task_status,
                    )
                )
                port = int(admin.rsplit(":", 1)[1])
                status, _, body = await http(port, get("/readyz"))
                assert status == 503
                assert body.splitlines() == [
                    "alpha: serving 0 clients, 0 children (per-connection)",
                    "broken: failed: command 'x' not found in PATH",
                ]
                assert (await http(port, get("/readyz/alpha")))[0] == 200
                assert (await http(port, get("/readyz/broken")))[0] == 503
                assert (await http(port, get("/readyz/nobody")))[0] == 404
                nursery.cancel_scope.cancel()
            async with httpx2.AsyncClient() as client:
                address = fleet.hosts.mapping()["public"].address
                index = (await client.get(f"{address}/servers")).json()["servers"]
                assert [(entry["name"], entry["state"]) for entry in index] == [
                    ("alpha", "serving"),
                    ("broken", "failed"),
                ]
                refused = await client.post(f"{address}/servers/broken/mcp", json={})
                assert refused.status_code == 503  # held, not served: not the 404 of an unknown path
            await fleet.reload(fleet_plan(["alpha", "broken"]))  # the command is there now
            assert fleet.failed == {} and len(fleet.current) == 2
