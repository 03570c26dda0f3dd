"""TLS (``tls:HOST:PORT``, and the TLS under ``wss://``): certificates made at test time by trustme,
client certificates (mTLS) as authentication, and a listener no failed handshake can take down."""

from __future__ import annotations

import logging
import random
import signal
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio
import trustme
from commands import connect
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from bridge import Daemon
from channels import (
    ConnectError,
    ConnectOptions,
    ListenError,
    ListenOptions,
    TlsAddress,
    parse_address,
)

from conftest import (
    TlsFiles,
    bridge_argv,
    bridge_process,
    call,
    channel_pair,
    example_server,
    poll,
    result_text,
    running_bridge,
)

TIMEOUT = 20
EXIT_OK = 0
RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset (RST)


def port_of(address: str) -> int:
    """The port of ``tls:HOST:PORT``, ``wss://HOST:PORT/PATH`` or ``https://HOST:PORT/PATH``."""
    return int(address.split(":")[-1].split("/")[0])


async def test_a_tls_listener_serves_an_mcp_session_through_the_bridge(tls_files: TlsFiles) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["tls:127.0.0.1:0"], listen_options=tls_files.listen_options()
        ) as daemon:
            [address] = daemon.addresses
            assert address.startswith("tls:127.0.0.1:")
            async with parse_address(address).connect(tls_files.connect_options()) as channel:
                await channel.send(call("a:1", "echo", text="over TLS"))
                reply = await channel.receive()
                assert reply["id"] == "a:1" and result_text(reply) == "over TLS"


async def test_large_messages_over_a_tls_listener_arrive_whole_when_the_socket_fills_mid_write(
    tls_files: TlsFiles,
) -> None:
    # A reply larger than the socket takes at once: OpenSSL keeps part of the record and must be
    # given the same buffer again, so the rest cannot be written in smaller pieces.
    text = "x" * (2 << 20)  # under the 4 MiB default limit, far over a socket buffer
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["tls:127.0.0.1:0"], listen_options=tls_files.listen_options()
        ) as daemon:
            [address] = daemon.addresses
            async with parse_address(address).connect(tls_files.connect_options()) as channel:
                for number in range(3):
                    await channel.send(call(f"big:{number}", "echo", text=text))
                    reply = await channel.receive()
                    assert reply["id"] == f"big:{number}" and result_text(reply) == text


async def test_a_client_that_does_not_trust_the_servers_certificate_cannot_connect(
    tls_files: TlsFiles,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["tls:127.0.0.1:0"], listen_options=tls_files.listen_options()
        ) as daemon:
            address = parse_address(daemon.addresses[0])
            with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                async with address.connect(ConnectOptions(tls_ca=tls_files.other_ca)):
                    pass
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            assert daemon.statistics().children == 0


async def test_a_failed_tls_handshake_never_takes_down_the_listener(tls_files: TlsFiles) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["tls:127.0.0.1:0"], listen_options=tls_files.listen_options()
        ) as daemon:
            host, _, port = daemon.addresses[0].removeprefix("tls:").rpartition(":")
            plain = await trio.open_tcp_stream(host, int(port))
            await plain.send_all(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')  # not TLS
            while await plain.receive_some(100):  # perhaps a TLS alert, then the close
                pass
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            await plain.aclose()
            async with parse_address(daemon.addresses[0]).connect(tls_files.connect_options()) as channel:
                await channel.send(call(1, "echo", text="still serving"))
                assert result_text(await channel.receive()) == "still serving"


async def test_a_silent_client_is_cut_at_the_tls_handshake_deadline(tls_files: TlsFiles) -> None:
    with trio.fail_after(TIMEOUT):
        options = tls_files.listen_options(handshake_timeout=0.3)
        async with running_bridge(example_server(), ["tls:127.0.0.1:0"], listen_options=options) as daemon:
            host, _, port = daemon.addresses[0].removeprefix("tls:").rpartition(":")
            silent = await trio.open_tcp_stream(host, int(port))
            assert await silent.receive_some(100) == b""  # closed, having said nothing
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            await silent.aclose()


async def test_mtls_serves_only_clients_with_a_certificate_from_the_client_ca(
    tls_files: TlsFiles, caplog
) -> None:
    caplog.set_level(logging.INFO)
    options = tls_files.listen_options(tls_client_ca=tls_files.ca)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tls:127.0.0.1:0"], listen_options=options) as daemon:
            address = parse_address(daemon.addresses[0])
            refused = [
                tls_files.connect_options(),  # no certificate
                tls_files.connect_options(
                    tls_cert=tls_files.other_client_cert, tls_key=tls_files.other_client_key
                ),
            ]
            for connect_options in refused:
                # TLS 1.3 finishes the client's side of the handshake before the server checks the
                # certificate, so the refusal shows on the first read.
                with pytest.raises((ConnectError, trio.BrokenResourceError, trio.EndOfChannel)):
                    async with address.connect(connect_options) as channel:
                        await channel.send(call(1, "echo", text="let me in"))
                        await channel.receive()
            await poll(lambda: daemon.statistics().handshakes_failed == 2)
            assert daemon.statistics().children == 0
            alice = tls_files.connect_options(tls_cert=tls_files.client_cert, tls_key=tls_files.client_key)
            async with address.connect(alice) as channel:
                await channel.send(call(1, "echo", text="alice"))
                assert result_text(await channel.receive()) == "alice"
    assert ",CN=alice'" in caplog.text  # the subject is in the connection's log line


async def test_the_client_certificate_subject_is_on_the_channels_peer(tls_files: TlsFiles) -> None:
    options = tls_files.listen_options(tls_client_ca=tls_files.ca)
    with trio.fail_after(TIMEOUT):
        [listener] = await TlsAddress("127.0.0.1", 0).listen(options)
        async with listener:
            connect_options = tls_files.connect_options(
                tls_cert=tls_files.client_cert, tls_key=tls_files.client_key
            )
            async with channel_pair(listener, connect_options) as (_client, server):
                assert server.peer.transport == "tls"
                assert server.peer.certificate is not None
                assert server.peer.certificate.endswith(",CN=alice")


async def test_a_non_loopback_tls_bind_is_allowed_when_clients_need_certificates(tls_files: TlsFiles) -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(ListenError, match="--tls-client-ca"):
            await TlsAddress("0.0.0.0", 0).listen(tls_files.listen_options())
        listeners = await TlsAddress("0.0.0.0", 0).listen(
            tls_files.listen_options(tls_client_ca=tls_files.ca)
        )
        for listener in listeners:
            await listener.aclose()


async def test_a_tls_listener_without_a_certificate_is_refused_naming_the_flags() -> None:
    with pytest.raises(ListenError, match="--tls-cert PATH and --tls-key PATH"):
        await TlsAddress("127.0.0.1", 0).listen(ListenOptions())


async def test_an_unloadable_certificate_is_named_with_its_flag(tls_files: TlsFiles, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(ListenError, match=f"--tls-cert {bogus}"):
        await TlsAddress("127.0.0.1", 0).listen(
            ListenOptions(tls_cert=str(bogus), tls_key=tls_files.server_key)
        )
    with pytest.raises(ListenError, match=r"--tls-client-ca .*missing"):
        await TlsAddress("127.0.0.1", 0).listen(
            tls_files.listen_options(tls_client_ca=str(tmp_path / "missing"))
        )


async def test_connect_relays_stdio_over_tls_and_exits_0_after_the_last_reply(tls_files: TlsFiles) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["tls:127.0.0.1:0"], listen_options=tls_files.listen_options()
        ) as daemon:
            async with connect(daemon.addresses[0], "--tls-ca", tls_files.ca) as client:
                assert result_text(await client.call_echo(1, "tls")) == "tls"
                # TLS cannot half-close: connect waits for the reply still due, then closes.
                await client.send(call(2, "sleep", seconds=0.3))
                await client.close_stdin()
                replies = await client.receive_until_eof()
                assert [reply["id"] for reply in replies] == [2]
                assert await client.exit_code() == EXIT_OK


def _connect_and_reset(port: int, times: int) -> None:
    pause = random.Random(port)
    for _ in range(times):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
            time.sleep(pause.uniform(0, 0.0005))  # the load's shape: resets around the accept


@pytest.mark.parametrize("address", ["tls:127.0.0.1:0", "wss://127.0.0.1:0/mcp", "https://127.0.0.1:0/mcp"])
async def test_connections_reset_while_being_accepted_never_take_down_a_tls_listener(
    tls_files: TlsFiles, address: str
) -> None:
    # A reset can land between the accept and OpenSSL taking the socket over, which then fails;
    # four threads resetting connections as fast as they can hit that window within a second.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [address], listen_options=tls_files.listen_options()
        ) as daemon:
            port = port_of(daemon.addresses[0])
            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(trio.to_thread.run_sync, _connect_and_reset, port, 300)
            context = ssl.create_default_context(cafile=tls_files.ca)

            def handshake() -> str | None:
                with socket.create_connection(("127.0.0.1", port)) as raw:
                    with context.wrap_socket(raw, server_hostname="127.0.0.1") as secure:
                        return secure.version()

            assert await trio.to_thread.run_sync(handshake) is not None


# -- renewed certificates: SIGHUP ----------------------------------------------------------------


@attrs.define
class RenewableCertificate:
    """A CA the client trusts, and server certificate files that can be replaced in place."""

    ca: trustme.CA
    cert_path: Path
    key_path: Path

    def issue(self) -> str:
        """Write a new certificate for 127.0.0.1 over the files; return its serial number."""
        issued = self.ca.issue_cert("127.0.0.1")
        self.cert_path.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(str(self.key_path))
        return _serial(issued.cert_chain_pems[0].bytes())

    def served_serial(self, port: int) -> str:
        """The serial number of the certificate a new connection to ``port`` is shown."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        with socket.create_connection(("127.0.0.1", port)) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as secure:
                return _serial(ssl.DER_cert_to_PEM_cert(secure.getpeercert(binary_form=True)).encode())


def _serial(pem: bytes) -> str:
    return format(x509.load_pem_x509_certificate(pem).serial_number, "X")


@pytest.fixture
def renewable(tmp_path: Path) -> RenewableCertificate:
    return RenewableCertificate(trustme.CA(), tmp_path / "cert.pem", tmp_path / "key.pem")


@asynccontextmanager
async def renewable_bridge(renewable: RenewableCertificate) -> AsyncIterator[tuple[Daemon, int]]:
    """The bridge in this process on tls:127.0.0.1:PORT with the renewable files; and PORT."""
    options = ListenOptions(tls_cert=str(renewable.cert_path), tls_key=str(renewable.key_path))
    async with running_bridge(example_server(), ["tls:127.0.0.1:0"], listen_options=options) as daemon:
        yield daemon, port_of(daemon.addresses[0])


async def test_a_renewed_certificate_is_served_to_new_connections_after_a_reload(
    renewable: RenewableCertificate,
) -> None:
    first = renewable.issue()
    with trio.fail_after(TIMEOUT):
        async with renewable_bridge(renewable) as (daemon, port):
            assert await trio.to_thread.run_sync(renewable.served_serial, port) == first
            second = renewable.issue()
            assert daemon.reload_certificates() == 1
            assert await trio.to_thread.run_sync(renewable.served_serial, port) == second
    assert first != second


async def test_a_certificate_file_that_cannot_be_loaded_on_reload_leaves_the_old_one_in_use(
    renewable: RenewableCertificate, caplog: pytest.LogCaptureFixture
) -> None:
    first = renewable.issue()
    with trio.fail_after(TIMEOUT):
        async with renewable_bridge(renewable) as (daemon, port):
            renewable.key_path.write_text("not a key\n")
            assert daemon.reload_certificates() == 1
            assert await trio.to_thread.run_sync(renewable.served_serial, port) == first
    assert any(
        "--tls-key" in record.getMessage() and "stays" in record.getMessage() for record in caplog.records
    )


async def test_sighup_makes_the_command_read_renewed_certificates_for_tls_wss_and_https(
    renewable: RenewableCertificate,
) -> None:
    first = renewable.issue()
    tls_flags = ("--tls-cert", str(renewable.cert_path), "--tls-key", str(renewable.key_path))
    listen = ("tls:127.0.0.1:0", "wss://127.0.0.1:0/mcp", "https://127.0.0.1:0/mcp")
    args = [part for address in listen for part in ("--listen", address)]
    with trio.fail_after(TIMEOUT):
        async with bridge_process(*args, *tls_flags, "--", *example_server(), listeners=3) as bridge:
            ports = [port_of(address) for address in bridge.addresses]
            for port in ports:
                assert await trio.to_thread.run_sync(renewable.served_serial, port) == first
            second = renewable.issue()
            bridge.process.send_signal(signal.SIGHUP)
            await poll(lambda: bridge.log().count("TLS certificate and key read again") == 3)
            for port in ports:
                assert await trio.to_thread.run_sync(renewable.served_serial, port) == second


async def test_a_sighup_while_the_server_is_still_starting_reaches_its_tls_listener(
    renewable: RenewableCertificate, tmp_path: Path
) -> None:
    # The listener is bound before the child's era probe, which this child makes last its whole
    # 5 s (it never answers server/discover): a renewal signalled meanwhile must count.
    first = renewable.issue()
    started = tmp_path / "child-started"
    child = ("sh", "-c", f'touch "{started}" && exec "$@"', "sh", *example_server("--discover-hang"))
    argv = bridge_argv(
        "--listen", "tls:127.0.0.1:0", "--tls-cert", str(renewable.cert_path),
        "--tls-key", str(renewable.key_path), "--", *child,
    )  # fmt: skip
    process = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, start_new_session=True)
    log: list[str] = []

    async def collect() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            log.extend(chunk.decode(errors="replace").splitlines())

    try:
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect)
                await poll(started.exists)
                second = renewable.issue()
                process.send_signal(signal.SIGHUP)
                await poll(lambda: any("listening on" in line for line in log))
                [address] = [line.rsplit("listening on ", 1)[1] for line in log if "listening on" in line]
                port = port_of(address)
                assert await trio.to_thread.run_sync(renewable.served_serial, port) == second
                nursery.cancel_scope.cancel()
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(TIMEOUT):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert first != second


async def test_an_encrypted_key_is_refused_with_its_flag_named_instead_of_prompting_for_a_passphrase(
    renewable: RenewableCertificate,
) -> None:
    renewable.issue()
    key = serialization.load_pem_private_key(renewable.key_path.read_bytes(), None)
    renewable.key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"a passphrase"),
        )
    )
    options = ListenOptions(tls_cert=str(renewable.cert_path), tls_key=str(renewable.key_path))
    with (
        trio.fail_after(TIMEOUT),
        pytest.raises(ListenError, match=r"--tls-key.*cannot ask for its passphrase"),
    ):
        await TlsAddress("127.0.0.1", 0).listen(options)
