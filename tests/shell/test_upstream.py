"""The one way the gateway sends a request to an engine (stoker/gateway/upstream.py
send_to_engine): a kept-alive connection the engine closed while it idled is asked again on a
fresh one, and a dead engine is still a failure.

The engine side is a raw asyncio server, so the test decides exactly when a connection ends:
llama-server's HTTP library closes an idle kept-alive connection after 5 s, and a request
that goes out on it at that moment gets no answer at all (aiohttp's ServerDisconnectedError).
The requests are POSTs, as the gateway's are: aiohttp itself asks again only for idempotent
methods (a GET here would pass without send_to_engine).
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from aiohttp import ClientConnectorError, ClientOSError, ClientSession, ServerDisconnectedError, TCPConnector

from stoker.gateway.upstream import send_to_engine

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok"


async def _read_request(reader: asyncio.StreamReader, body: bool = True) -> bool:
    """One request: its head, and with `body` its Content-Length bytes. False when the peer
    closed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if body:
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    await reader.readexactly(int(line.split(b":", 1)[1]))
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    return True


class Engine:
    """Answers the first request on each connection, then drops the connection when the next
    one arrives on it, unanswered: the race of an idle close and a reuse, made certain.
    With `answer=False` it drops every request unanswered: an engine that died. With
    `reset=True` the drop is a reset (RST, by SO_LINGER 0), as the kernel sends when
    llama-server's HTTP library closes a connection with a request's bytes still unread."""

    def __init__(self, answer: bool = True, reset: bool = False) -> None:
        self.answer = answer
        self.reset = reset
        self.connections = 0
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = 0
        while True:
            if self.reset and answered:
                # the next request's head, then a reset instead of an answer
                if not await _read_request(reader, body=False):
                    break
                self.requests += 1
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
            if not await _read_request(reader):
                break
            self.requests += 1
            if not self.answer or answered:
                break
            writer.write(ANSWER)
            await writer.drain()
            answered += 1
        writer.close()


async def _serve(engine: Engine) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(engine.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/health"


async def _two_requests(use_retry: bool, reset: bool = False) -> tuple[list[str], Engine]:
    engine = Engine(reset=reset)
    server, url = await _serve(engine)
    got: list[str] = []
    body = b'{"messages": []}' * 64
    try:
        async with ClientSession(connector=TCPConnector(limit=0)) as session:
            for _ in range(2):
                if use_retry:
                    resp = await send_to_engine(session, "POST", url, data=body)
                else:
                    resp = await session.request("POST", url, data=body)
                got.append(await resp.text())
                resp.release()  # back to the pool, so the second request reuses it
    finally:
        server.close()
        await server.wait_closed()
    return got, engine


def test_a_reused_connection_the_engine_dropped_fails_without_the_retry() -> None:
    """The edge is real: without send_to_engine the second request on the kept-alive
    connection gets no answer (this is what the gateway turned into a 502)."""
    with pytest.raises(ServerDisconnectedError):
        asyncio.run(_two_requests(use_retry=False))


def test_send_to_engine_asks_again_on_a_fresh_connection() -> None:
    got, engine = asyncio.run(_two_requests(use_retry=True))
    assert got == ["ok", "ok"]
    # the dropped request, then the same request again on a second connection
    assert engine.connections == 2 and engine.requests == 3


def test_a_reused_connection_the_engine_reset_fails_without_the_retry() -> None:
    """The soak's last unexplained 502 (issue 25): the engine reset the kept-alive connection
    a chat went out on, and aiohttp raised ClientOSError (a reset, or "Can not write request
    body"), which send_to_engine did not ask again for."""
    with pytest.raises(ClientOSError) as caught:
        asyncio.run(_two_requests(use_retry=False, reset=True))
    assert not isinstance(caught.value, ClientConnectorError)


def test_send_to_engine_asks_again_after_a_reset_on_a_reused_connection() -> None:
    got, engine = asyncio.run(_two_requests(use_retry=True, reset=True))
    assert got == ["ok", "ok"]
    assert engine.connections == 2 and engine.requests == 3


def test_an_engine_that_answers_nothing_is_still_a_failure_after_three_tries() -> None:
    async def go() -> Engine:
        engine = Engine(answer=False)
        server, url = await _serve(engine)
        try:
            async with ClientSession() as session:
                with pytest.raises(ServerDisconnectedError):
                    await send_to_engine(session, "POST", url)
        finally:
            server.close()
            await server.wait_closed()
        return engine

    engine = asyncio.run(go())
    assert engine.requests == 3


def test_a_refused_connection_is_not_asked_again() -> None:
    """A port nobody listens on (an engine gone) fails at once: only a dropped kept-alive
    connection is worth a second try."""
    async def go() -> None:
        server, url = await _serve(Engine())
        server.close()
        await server.wait_closed()
        async with ClientSession() as session:
            with pytest.raises(ClientConnectorError):
                await send_to_engine(session, "POST", url)

    asyncio.run(go())
