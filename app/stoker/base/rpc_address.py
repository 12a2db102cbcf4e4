"""How an RPC worker's address is written and checked (`HOST:PORT`): a Settings value.

It lives in base because the settings store (stoker/base/store.py) validates the workers
it keeps; what an engine does with a worker is stoker/engines/rpc.py. Values only: no
sockets, no files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_PORT = 50052  # rpc-server's own default


@dataclass(frozen=True)
class RpcWorker:
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_worker(text: str) -> RpcWorker:
    """`HOST:PORT` (an IPv6 host in brackets) -> RpcWorker; ValueError with one sentence."""
    raw = (text or "").strip()
    m = re.fullmatch(r"\[(?P<h6>[0-9a-fA-F:.]+)\]:(?P<p6>\d+)|(?P<h>[A-Za-z0-9_.-]+):(?P<p>\d+)", raw)
    if not m:
        raise ValueError(f"{raw!r} is not an RPC worker address; write HOST:PORT, e.g. 192.168.1.20:50052")
    host = m["h6"] or m["h"]
    port = int(m["p6"] or m["p"])
    if not 0 < port < 65536:
        raise ValueError(f"{raw!r} has port {port}; give a port from 1 to 65535")
    return RpcWorker(host, port)


def parse_workers(items: str | Iterable[str] | None) -> tuple[RpcWorker, ...]:
    """A comma list (`--rpc a:1,b:2`) or a list of strings (Settings' rpc_workers), no repeats."""
    if isinstance(items, str):
        items = [p for p in items.split(",") if p.strip()]
    out: list[RpcWorker] = []
    for item in items or ():
        w = parse_worker(str(item))
        if w not in out:
            out.append(w)
    return tuple(out)
