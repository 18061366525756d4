"""A response's writes sent together: uvicorn's HTTP protocol with the status line and
headers held until the body follows.

uvicorn writes a response's head when the app sends ``http.response.start`` and its body
when the app sends ``http.response.body``: two sends on the socket. The first wakes the
client, which then reads the head and sleeps again until the second; on two cores shared
with other processes each of those wake-ups can cost the server its core and the client
a wait for one (docs/notes/2026-11-28-server.md). Here the writes are held and joined: an
answer goes out in one send as soon as its last part is written, and whatever a pass of
the event loop wrote at its end (a streamed body still goes out chunk by chunk).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _JoinedWrites:
    """A transport whose writes wait for the end of the event loop's pass, then go out
    as one write; everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Send what is held now, as one write (dropped if the connection is closing)."""
        if self._held:
            data = b"".join(self._held)
            self._held.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._held))

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a :class:`_JoinedWrites` transport; a whole answer
    is sent as soon as its last part is written (not after the app's own epilogue)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.joined = _JoinedWrites(transport, self.loop)
        super().connection_made(self.joined)  # type: ignore[arg-type]

    def on_response_complete(self) -> None:
        self.joined.flush()
        super().on_response_complete()
