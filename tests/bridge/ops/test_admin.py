"""The admin endpoint: liveness, readiness and Prometheus metrics over HTTP (h11), loopback only."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import trio
import trio.testing
from commands import admin_port, get, http, run_bridge

from bridge import ChildSpec, ServeConfig, open_bridge
from bridge._daemon.statistics import DaemonStatistics
from bridge._ops.admin import serve_admin
from bridge._ops.metrics import render
from bridge._relay.requests import RequestMetrics
from channels import TcpAddress

from conftest import LineClient, bridge_process, call, example_server, poll, resident_bytes, result_text

TIMEOUT = 20


async def test_healthz_readyz_and_metrics_answer_on_the_admin_address(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--admin",
            "tcp:127.0.0.1:0",
            "--name",
            "demo",
            "--child",
            "per-connection",
            "--listen",
            f"unix:{sock_dir}/s.sock",
            "--",
            *example_server(),
        ) as bridge:
            await poll(lambda: any("admin endpoint on" in line for line in bridge.stderr_lines))
            port = admin_port(bridge.stderr_lines)
            assert (await http(port, get("/healthz")))[0] == 200
            status, _, body = await http(port, get("/readyz"))
            assert status == 200 and body.startswith("serving 0 clients")
            client = await LineClient.open(bridge.addresses[0])
            assert result_text(await client.call(1, "echo", text="counted")) == "counted"
            status, headers, metrics = await http(port, get("/metrics"))
            resident = resident_bytes(bridge.process.pid)
            await client.aclose()
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    # The daemon's own metrics, once, after the servers': its version, and its RSS, not the test's.
    assert metrics.count('mcp_bridge_build_info{python="') == 1
    assert metrics.count("# TYPE process_resident_memory_bytes gauge") == 1
    reported = int(re.search(r"^process_resident_memory_bytes (\d+)$", metrics, re.MULTILINE)[1])
    assert abs(reported - resident) < 2 * 1024 * 1024
    assert re.search(r"^process_cpu_seconds_total \d+\.\d+$", metrics, re.MULTILINE)
    assert 'mcp_bridge_up{server="demo"} 1' in metrics
    assert 'mcp_bridge_connections{server="demo"} 1' in metrics
    assert 'mcp_bridge_connections_accepted_total{server="demo",transport="unix"} 1' in metrics
    assert re.search(r'mcp_bridge_received_bytes_total\{server="demo"\} [1-9]', metrics)
    assert "# TYPE mcp_bridge_child_restarts_total counter" in metrics
    assert 'mcp_bridge_requests_total{method_class="tools",server="demo"} 1' in metrics
    assert 'mcp_bridge_request_duration_seconds_count{method_class="tools",server="demo"} 1' in metrics
    assert (
        'mcp_bridge_request_duration_seconds_bucket{le="+Inf",method_class="tools",server="demo"} 1'
        in metrics
    )


async def test_the_admin_endpoint_refuses_other_methods_paths_and_malformed_requests(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--admin", "tcp:127.0.0.1:0", "--listen", f"unix:{sock_dir}/s.sock", "--", *example_server()
        ) as bridge:
            await poll(lambda: any("admin endpoint on" in line for line in bridge.stderr_lines))
            port = admin_port(bridge.stderr_lines)
            post = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
            status, headers, _ = await http(port, post)
            assert (status, headers["allow"]) == (405, "GET, HEAD")
            assert (await http(port, get("/secrets")))[0] == 404
            head = b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            status, headers, body = await http(port, head)
            assert (status, headers["content-length"], body) == (200, "3", "")  # the GET's length
            assert (await http(port, b"NOT HTTP AT ALL\r\n\r\n"))[0] == 400
            client = await LineClient.open(bridge.addresses[0])  # an error reply, counted by code
            await client.send(call(1, "no-such-tool-here"))
            await client.send({"jsonrpc": "2.0", "id": 2, "method": "nonexistent/method"})
            assert (await client.receive())["id"] == 1 and "error" in await client.receive()
            await client.aclose()
            _, _, metrics = await http(port, get("/metrics"))
            assert (
                'mcp_bridge_request_errors_total{code="-32601",method_class="other",server="server"} 1'
                in metrics
            )
            assert (await http(port, get("/healthz")))[0] == 200  # still serving


async def test_an_admin_address_beyond_loopback_is_a_configuration_error(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(
            "--admin", "tcp:0.0.0.0:9100", "--listen", f"unix:{sock_dir}/s.sock", "--", *example_server()
        )
    assert result.returncode == 78
    assert "binds loopback only" in result.stderr.decode()


def test_metrics_render_in_the_prometheus_text_format() -> None:
    stats = DaemonStatistics(
        connections=2,
        connections_total=5,
        connections_refused=1,
        handshakes_failed=1,
        requests_in_flight=3,
        children=2,
        prespawned=0,
        child_garbage_lines=4,
        child_restarts=1,
        bytes_from_clients=10,
        bytes_to_clients=20,
        connections_by_transport={"ws": 3, "tcp": 2},
    )
    requests = RequestMetrics()
    requests.requests["tools"] += 2
    requests.observe("tools", 0.003, None)
    requests.observe("tools", 0.2, -32000)
    text = render(
        attrs.evolve(stats, bytes_to_clients=1_234_567_891), server='a"b', healthy=False, requests=requests
    )
    assert 'mcp_bridge_sent_bytes_total{server="a\\"b"} 1234567891' in text  # every digit
    assert 'mcp_bridge_up{server="a\\"b"} 0' in text
    assert 'mcp_bridge_connections_accepted_total{server="a\\"b",transport="tcp"} 2' in text
    assert (
        'mcp_bridge_request_duration_seconds_bucket{le="0.005",method_class="tools",server="a\\"b"} 1' in text
    )
    assert (
        'mcp_bridge_request_duration_seconds_bucket{le="0.25",method_class="tools",server="a\\"b"} 2' in text
    )
    assert 'mcp_bridge_request_errors_total{code="-32000",method_class="tools",server="a\\"b"} 1' in text
    sample = re.compile(r'mcp_bridge_\w+\{(\w+="(?:[^"\\]|\\.)*",?)*\} [-+\d.e]+')
    assert text.endswith("\n")
    assert all(line.startswith("#") or sample.fullmatch(line) for line in text.splitlines())


async def test_readyz_answers_503_once_a_graceful_stop_has_begun(sock_dir: Path) -> None:
    config = ServeConfig(
        listen=[f"unix:{sock_dir}/s.sock"],
        child=ChildSpec(argv=list(example_server())),
        child_mode="per-connection",
    )
    with trio.fail_after(TIMEOUT):
        async with open_bridge(config) as daemon, trio.open_nursery() as nursery:
            [admin] = await nursery.start(serve_admin, [daemon], TcpAddress("127.0.0.1", 0))
            port = int(admin.rpartition(":")[2])
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call(1, "sleep", seconds=1))
            await poll(lambda: daemon.statistics().requests_in_flight == 1)
            daemon.stop()  # draining: the request in flight may finish, nothing new is taken
            status, _, body = await http(port, get("/readyz"))
            assert (status, body.split(":")[0]) == (503, "stopping")
            assert (await http(port, get("/healthz")))[0] == 200  # alive all the same
            assert result_text(await client.receive()) == "slept"
            await client.aclose()
            nursery.cancel_scope.cancel()


async def test_a_cancellation_naming_an_unhashable_id_does_not_break_a_metered_connection() -> None:
    from bridge._relay.requests import RequestMetrics
    from channels import PeerInfo, StreamChannel

    left, right = trio.testing.memory_stream_pair()
    client = StreamChannel(left, peer=PeerInfo("memory"))
    metered = RequestMetrics().channel(StreamChannel(right, peer=PeerInfo("memory")))
    with trio.fail_after(TIMEOUT):
        await client.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}
        )
        assert (await metered.receive())["params"] == {"requestId": [1]}  # passed on, not raised
        await client.send(call(1, "echo", text="still fine"))
        assert (await metered.receive())["id"] == 1
