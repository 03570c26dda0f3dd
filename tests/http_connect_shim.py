"""``mcp-bridge connect`` with a stand-in ``http://`` address kind, for end-to-end tests of the HTTP
client before the bridge registers its own.

Usage: ``python tests/http_connect_shim.py connect http://HOST:PORT/PATH [options]``. If ``http``
is already a registered scheme (the bridge's own kind, once it exists), that one is used.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Self

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge._cli import main
from channels import (
    Address,
    ConnectOptions,
    ListenOptions,
    MessageChannel,
    MessageListener,
    address_schemes,
    register_address_kind,
)
from channels._endpoint import Endpoint, parse_endpoint
from channels._httpclient import open_http_client


@attrs.frozen
class StandInHttpAddress(Address):
    """``http://HOST:PORT/PATH``, connect only."""

    scheme = "http"
    endpoint: Endpoint

    @classmethod
    def parse(cls, text: str) -> Self:
        return cls(parse_endpoint(text, cls.scheme, kind="an HTTP address"))

    def __str__(self) -> str:
        return str(self.endpoint)

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        raise NotImplementedError("the stand-in http:// kind only connects")

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        async with open_http_client(self.endpoint, options) as channel:
            yield channel


if "http" not in address_schemes():
    register_address_kind(StandInHttpAddress)

if __name__ == "__main__":
    sys.exit(main())
