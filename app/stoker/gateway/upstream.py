"""What can go wrong between the gateway and an engine, as one tuple both handlers catch.

The gateway's forwarder, its Ollama routes and its image route all send a request to an
engine and read its answer; a crash of that engine must end in the 502 or the stream's final
error event, never in a traceback from aiohttp's "Error handling request". `send_to_engine`
is the one way they send it. Must not catch anything that comes from the client's side of
the request.
"""

from __future__ import annotations

from typing import Any

from aiohttp import (
    ClientConnectorError,
    ClientError,
    ClientOSError,
    ClientResponse,
    ClientSession,
    ServerDisconnectedError,
)
from aiohttp.http_exceptions import HttpProcessingError

# Everything aiohttp's client may raise while it sends a request to an engine or reads the
# answer's body: ClientError holds ClientPayloadError (ContentLengthError and
# TransferEncodingError come wrapped in it), ServerDisconnectedError, ClientConnectionResetError,
# ClientOSError and ClientResponseError; HttpProcessingError is its parser's own (a malformed
# answer), OSError a bare socket error, TimeoutError a connect or read timeout.
UPSTREAM_ERRORS: tuple[type[BaseException], ...] = (ClientError, HttpProcessingError, OSError, TimeoutError)


def _dropped_before_answering(exc: ClientError) -> bool:
    """The connection the request went out on ended before any answer: closed (no answer at
    all) or reset, or the body could not be written. Not a refused or failed connect: that is
    an engine gone, and asking again would only fail again."""
    if isinstance(exc, ClientConnectorError):
        return False
    return isinstance(exc, (ServerDisconnectedError, ClientOSError))


async def send_to_engine(session: ClientSession, method: str, url: str, **kwargs: Any) -> ClientResponse:
    """The request to the engine. A kept-alive connection that the engine closed while it
    idled fails at once, with no answer (seen on a loaded machine: the second of two chats a
    moment apart got a 502), or with a reset or a failed body write (the soak's last
    unexplained 502, issue 25): asked again, it goes out on a fresh connection, as a browser
    resends a request that a reused connection lost before any byte of the answer. An engine
    that dropped a request it had read has crashed: it refuses the fresh connection, so a
    crash is still a crash and nothing runs twice."""
    for _ in range(2):
        try:
            return await session.request(method, url, **kwargs)
        except ClientError as exc:
            if not _dropped_before_answering(exc):
                raise
    return await session.request(method, url, **kwargs)
