"""One send per response (server/writes.py): the writes of one pass of the event loop go
out joined, in order, before a close; a streamed body still goes out pass by pass; and
``tiermem serve``'s protocol answers real requests (every test on a live server runs on it,
tests/liveserver.py)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app
from tiermem.server.writes import _JoinedWrites


class Recording(asyncio.Transport):
    """A transport that records what reaches it (a socket's view of the writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes | str] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.sent.append(bytes(data))

    def close(self) -> None:
        self.sent.append("close")
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.sent.append("abort")
        self.closing = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def test_the_writes_of_one_pass_are_one_send_in_order() -> None:
    async def run() -> list[bytes | str]:
        real = Recording()
        joined = _JoinedWrites(real, asyncio.get_running_loop())
        joined.write(b"HTTP/1.1 200 OK\r\n\r\n")
        joined.write(memoryview(b"{}"))
        assert real.sent == [] and joined.get_write_buffer_size() == 21
        await asyncio.sleep(0)
        joined.write(b"chunk 1")  # a streamed body: the next pass's writes
        await asyncio.sleep(0)
        joined.writelines([b"chunk ", b"2"])
        joined.close()  # what is held goes out before the close
        await asyncio.sleep(0)
        assert joined.get_extra_info("peername") == ("127.0.0.1", 1)
        return real.sent

    sent = asyncio.run(run())
    assert sent == [b"HTTP/1.1 200 OK\r\n\r\n{}", b"chunk 1", b"chunk 2", "close"]


def test_an_abort_drops_what_is_held() -> None:
    async def run() -> list[bytes | str]:
        real = Recording()
        joined = _JoinedWrites(real, asyncio.get_running_loop())
        joined.write(b"held")
        joined.abort()
        await asyncio.sleep(0)
        return real.sent

    assert asyncio.run(run()) == ["abort"]


def test_a_served_answer_arrives_whole_with_keep_alive(tmp_path: Any) -> None:
    """Through the protocol on a socket: a read after the request holds the whole answer,
    and the connection answers a second request."""
    from embedders import HashEmbedder

    with (
        Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory,
        live_server(create_app(memory, mcp=False)) as url,
    ):
        host, port = url.removeprefix("http://").split(":")
        body = b'{"user_id": "ana", "query": "dog?"}'
        request = (
            b"POST /v1/context HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            for _ in range(2):
                conn.sendall(request)
                answer = conn.recv(1 << 16)
                head, _, rest = answer.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                assert len(rest) == length and rest.startswith(b'{"query":"dog?"')
