"""The MCP tools through the official SDK's own client: over streamable HTTP at /mcp on
a real server (with and without keys) and over stdio from `tiermem mcp`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app
from tiermem.server.tenants import SEPARATOR

TOOLS = {"add_memory", "search_memory", "get_context", "list_memories", "forget_memory"}
ADMIN = "mcp-admin-key"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Memory]]:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    with live_server(create_app(memory)) as url:
        yield url, memory
    memory.close()


def http_client(url: str, user: str, key: str | None = None) -> Client:
    headers = {"X-Tiermem-User": user}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return Client(
        streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(headers=headers))
    )


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def test_tools_over_http(served: tuple[str, Memory]) -> None:
    url, memory = served
    async with http_client(url, "ann") as ann:
        tools = {t.name: t for t in (await ann.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():  # the model never chooses the user
            assert "user_id" not in tool.input_schema.get("properties", {})
            assert tool.description
        added = await call(ann, "add_memory", content="Is allergic to peanuts", importance=0.9)
        await call(ann, "add_memory", content="Prefers window seats", memory_type="preference")
        found = await call(ann, "search_memory", query="peanuts allergy", k=3)
        assert found["results"][0]["id"] == added["id"]
        listed = await call(ann, "list_memories", memory_type="preference")
        assert [m["content"] for m in listed["memories"]] == ["Prefers window seats"]
        context = await call(ann, "get_context", query="what can ann eat", max_tokens=300)
        assert "peanuts" in context["context"] and context["total_tokens"] <= 300
        assert {"section", "source", "score", "tokens"} <= set(context["items"][0])
        bad = await ann.call_tool("add_memory", {"content": "x", "importance": 3})
        assert bad.is_error and "importance" in str(bad.content)
    async with http_client(url, "bob") as bob:
        assert (await call(bob, "search_memory", query="peanuts"))["results"] == []
        assert (await call(bob, "forget_memory", memory_id=added["id"]))["deleted"] is False
    async with http_client(url, "ann") as ann:
        assert (await call(ann, "forget_memory", memory_id=added["id"]))["deleted"] is True
    assert memory.store.count("ann") == 1 and memory.store.count("bob") == 0
    async with httpx2.AsyncClient() as http:  # DNS rebinding: a foreign Host is refused
        foreign = await http.post(
            url + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Host": "evil.example.com", "X-Tiermem-User": "ann"},
        )
        assert foreign.status_code in (403, 421)


async def test_http_needs_a_key_once_keys_exist(tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    app = create_app(memory, admin_key=ADMIN)
    with live_server(app) as url:
        key = app.state.service.keys.create("acme")[1]
        async with httpx2.AsyncClient() as http:
            refused = await http.post(
                url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            )
            assert refused.status_code == 401 and refused.json()["error"] == "AuthenticationError"
        async with http_client(url, "ann", key) as ann:
            await call(ann, "add_memory", content="Works at Acme")
    assert memory.store.count(f"acme{SEPARATOR}ann") == 1 and memory.store.count("ann") == 0
    memory.close()


@pytest.mark.slow  # `tiermem mcp` loads the packaged MiniLM model
async def test_tools_over_stdio(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tiermem.cli", "mcp", "--db", db, "--user", "carol"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
    )
    async with Client(params) as carol:
        assert {t.name for t in (await carol.list_tools()).tools} == TOOLS
        added = await call(carol, "add_memory", content="Carol's daughter is called Mia")
        found = await call(carol, "search_memory", query="what is the name of her child")
        assert found["results"][0]["id"] == added["id"]
    with Memory(db) as memory:
        assert [r.content for r in memory.store.list("carol")] == ["Carol's daughter is called Mia"]


async def test_forget_memory_takes_the_fact_out_of_every_context(
    served: tuple[str, Memory],
) -> None:
    url, _memory = served
    async with http_client(url, "cleo") as cleo:
        added = await call(cleo, "add_memory", content="Cleo's PIN is 4321", importance=0.9)
        await call(cleo, "add_memory", content="Cleo likes jazz", memory_type="preference")
        for query in ("what is my PIN", "tell me about me"):  # the synopsis caches it
            assert "4321" in (await call(cleo, "get_context", query=query))["context"]
        assert (await call(cleo, "forget_memory", memory_id=added["id"]))["deleted"] is True
        held = [
            query
            for query in ("what is my PIN", "tell me about me", "4321", "Cleo")
            if "4321" in (await call(cleo, "get_context", query=query))["context"]
            or "4321" in str(await call(cleo, "search_memory", query=query))
        ]
        assert held == []
        assert "jazz" in (await call(cleo, "get_context", query="music"))["context"]
