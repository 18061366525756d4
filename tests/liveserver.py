"""A real uvicorn server on a free loopback port, in a thread of the test process, with
``tiermem serve``'s HTTP protocol (one send per response); and a ``tiermem serve``
process on one (:func:`serve_process`)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from tiermem.server.writes import JoinedWritesProtocol


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 until the block ends; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        http=JoinedWritesProtocol,  # as tiermem serve
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


@contextmanager
def serve_process(
    command: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    seconds: float = 120.0,
    stdout: int = subprocess.PIPE,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``command`` (``tiermem serve`` and its flags but the port) on a free loopback port
    until the block ends, then stopped with SIGTERM: its URL and process, once it
    answers ``/healthz`` (its stderr is a pipe, for what it says on start)."""
    port = free_port()
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + seconds
        while True:
            assert server.poll() is None, f"tiermem serve ended: {server.communicate()[1][-3000:]}"
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "tiermem serve did not answer /healthz"
            time.sleep(0.2)
        yield url, server
    finally:
        server.terminate()
        server.communicate(timeout=60)
