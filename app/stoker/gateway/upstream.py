"""What can go wrong between the gateway and an engine, as one tuple both handlers catch.

The gateway (server.py) and its image route (images.py) both forward to an engine and read
its answer; a crash of that engine must end in the 502 or the stream's final error event,
never in a traceback from aiohttp's "Error handling request". Must not catch anything that
comes from the client's side of the request.
"""

from __future__ import annotations

from aiohttp import ClientError
from aiohttp.http_exceptions import HttpProcessingError

# Everything aiohttp's client may raise while it sends a request to an engine or reads the
# answer's body: ClientError holds ClientPayloadError (ContentLengthError and
# TransferEncodingError come wrapped in it), ServerDisconnectedError, ClientConnectionResetError,
# ClientOSError and ClientResponseError; HttpProcessingError is its parser's own (a malformed
# answer), OSError a bare socket error, TimeoutError a connect or read timeout.
UPSTREAM_ERRORS: tuple[type[BaseException], ...] = (ClientError, HttpProcessingError, OSError, TimeoutError)
