"""What can go wrong between the gateway and an engine, as one tuple both handlers catch.

The gateway's forwarder, its Ollama routes and its image route all send a request to an
engine and read its answer; a crash of that engine must end in the 502 or the stream's final
error event, never in a traceback from aiohttp's "Error handling request". `send_to_engine`
is the one way they send it. Must not catch anything that comes from the client's side of
the request.
"""

from __future__ import annotations

from typing import Any

from aiohttp import ClientError, ClientResponse, ClientSession, ServerDisconnectedError
from aiohttp.http_exceptions import HttpProcessingError

# Everything aiohttp's client may raise while it sends a request to an engine or reads the
# answer's body: ClientError holds ClientPayloadError (ContentLengthError and
# TransferEncodingError come wrapped in it), ServerDisconnectedError, ClientConnectionResetError,
# ClientOSError and ClientResponseError; HttpProcessingError is its parser's own (a malformed
# answer), OSError a bare socket error, TimeoutError a connect or read timeout.
UPSTREAM_ERRORS: tuple[type[BaseException], ...] = (ClientError, HttpProcessingError, OSError, TimeoutError)


async def send_to_engine(session: ClientSession, method: str, url: str, **kwargs: Any) -> ClientResponse:
    """The request to the engine. A kept-alive connection that the engine closed while it
    idled fails at once, with no answer (seen on a loaded machine: the second of two chats a
    moment apart got a 502): asked again, it goes out on a fresh connection. A dead engine
    refuses that one too, so a crash is still a crash."""
    for _ in range(2):
        try:
            return await session.request(method, url, **kwargs)
        except ServerDisconnectedError:
            pass
    return await session.request(method, url, **kwargs)
