"""The MCP tools through the official SDK's own client: over streamable HTTP at /mcp on
a real server (with and without keys) and over stdio from `tiermem mcp`."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app
from tiermem.server.mcp import build_server
from tiermem.server.tenants import SEPARATOR

TOOLS = {
    "add_memory",
    "search_memory",
    "get_context",
    "get_message",
    "list_memories",
    "list_facts",
    "fact_history",
    "forget_memory",
}
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
        assert all(0 < r["score"] < 1 for r in found["results"])  # relevance, not rrf
        assert found["results"][0]["evidence"]["keyword_rank"] == 1
        assert found["results"][0]["evidence"]["keywords"] == 1.0
        least = found["results"][0]["score"]  # issue 35, item 4: min_score leaves the rest out
        kept = await call(ann, "search_memory", query="peanuts allergy", min_score=least)
        assert [r["id"] for r in kept["results"]] == [added["id"]]
        bad = await ann.call_tool("search_memory", {"query": "peanuts", "min_score": 1.5})
        assert bad.is_error and "min_score" in str(bad.content)
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
    assert memory.store.index.count("ann") == 1 and memory.store.index.count("bob") == 0
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
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            error = refused.json()["error"]  # a JSON-RPC error, so MCP clients show it
            assert error["data"]["error"] == "AuthenticationError"
            assert error["message"].startswith("AuthenticationError: ")
        for given in (None, "tm_unknown_secret"):  # the text reaches the MCP client
            with pytest.raises(BaseException) as raised:
                async with http_client(url, "ann", given):
                    pass
            assert re.match(r"AuthenticationError: .*key", str(mcp_error(raised.value)))
        async with http_client(url, "ann", key) as ann:
            await call(ann, "add_memory", content="Works at Acme")
    assert (
        memory.store.index.count(f"acme{SEPARATOR}ann") == 1
        and memory.store.index.count("ann") == 0
    )
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
        assert [r.content for r in memory.store.index.list("carol")] == [
            "Carol's daughter is called Mia"
        ]


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


def mcp_error(exc: BaseException) -> MCPError:
    """The MCPError an exception (group, from the client's task group) holds."""
    if isinstance(exc, MCPError):
        return exc
    inner = getattr(exc, "exceptions", None)  # an exception group
    assert inner, exc
    return mcp_error(inner[0])


NAMES_A_USER = re.compile(
    r"user|tenant|owner|account|customer|person|people|principal|identity|namespace|who",
    re.IGNORECASE,
)


def user_naming_properties(schema: dict[str, Any]) -> list[str]:
    """Every property (at any depth) whose name, title or description names a user."""
    found = []
    for name, prop in schema.get("properties", {}).items():
        text = " ".join(str(prop.get(k, "")) for k in ("title", "description"))
        if NAMES_A_USER.search(name) or NAMES_A_USER.search(text):
            found.append(name)
        found += [f"{name}.{n}" for n in user_naming_properties(prop)]
    return found


async def test_no_tool_offers_a_way_to_name_a_user(served: tuple[str, Memory]) -> None:
    url, memory = served
    fixed = build_server(lambda request: (memory, "ann"))  # stdio's fixed-user server
    async with http_client(url, "ann") as over_http, Client(fixed) as in_process:
        for client in (over_http, in_process):
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            for tool in tools:
                assert user_naming_properties(tool.input_schema) == [], tool.name
                for extra in ("user", "user_id", "tenant", "owner"):
                    arguments = {"content": "x", "query": "x", "memory_id": "x", extra: "bob"}
                    known = set(tool.input_schema["properties"])
                    given = {k: v for k, v in arguments.items() if k in known or k == extra}
                    refused = await client.call_tool(tool.name, given)
                    assert refused.is_error, (tool.name, extra)
                    assert refused.content[0].text.startswith(f"InputError: {extra}: ")
    assert memory.store.index.count("bob") == 0 and memory.store.index.count("ann") == 0


TYPED = re.compile(r"^(InputError|InvalidTypeError|InvalidSizeError): (\w+): \S")


@pytest.mark.parametrize(
    "tool, arguments, field",
    [
        ("search_memory", {"query": "x", "k": 0}, "k"),
        ("search_memory", {"query": "x", "k": 51}, "k"),
        ("search_memory", {"query": "x", "k": "many"}, "k"),
        ("list_memories", {"limit": 0}, "limit"),
        ("list_memories", {"limit": 201}, "limit"),
        ("list_memories", {"memory_type": "note"}, "memory_type"),
        ("add_memory", {"content": "x", "memory_type": "note"}, "memory_type"),
        ("add_memory", {"content": "x", "importance": 3}, "importance"),
        ("add_memory", {}, "content"),
        ("get_context", {"query": "x", "max_tokens": 0}, "max_tokens"),
        ("get_message", {}, "message_id"),
        ("get_message", {"message_id": 42}, "message_id"),
        ("get_message", {"message_id": ""}, "message_id"),
    ],
)
async def test_every_tool_error_is_typed(
    served: tuple[str, Memory], tool: str, arguments: dict[str, Any], field: str
) -> None:
    url, _ = served
    async with http_client(url, "ann") as ann:
        refused = await ann.call_tool(tool, arguments)
    assert refused.is_error
    text = refused.content[0].text
    match = TYPED.match(text)
    assert match and match.group(2) == field, text
    assert "pydantic" not in text and "validation error" not in text


@pytest.mark.parametrize("mode", ["library", "url"])
async def test_every_tool_works_in_both_modes(tmp_path: Path, mode: str) -> None:
    """`tiermem mcp` over a local store and `tiermem mcp --url` over a server (the
    MemoryClient): the same tools, the same answers."""
    from tiermem.client import MemoryClient

    config = {"memory": {"facts": {"enabled": True}}}
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32)) as memory:
        memory.add("user", "My name is Ines and I live in Porto.", "ines", "s")
        memory.extract_facts("ines", "s")
        with live_server(create_app(memory)) as url, MemoryClient(url) as client:
            face: Any = memory if mode == "library" else client
            async with Client(build_server(lambda request: (face, "ines"))) as ines:
                assert {t.name for t in (await ines.list_tools()).tools} == TOOLS
                added = await call(ines, "add_memory", content="Ines plays padel", importance=0.7)
                listed = await call(ines, "list_memories")
                assert added["id"] in {m["id"] for m in listed["memories"]}
                typed = await call(ines, "list_memories", memory_type="fact", limit=5)
                assert all(m["memory_type"] == "fact" for m in typed["memories"])
                found = await call(ines, "search_memory", query="padel", k=3)
                assert found["results"][0]["id"] == added["id"]
                context = await call(ines, "get_context", query="padel", max_tokens=200)
                assert "padel" in context["context"]
                facts = (await call(ines, "list_facts"))["facts"]
                assert facts and any("Porto" in f["content"] for f in facts)
                versions = await call(ines, "fact_history", memory_id=facts[0]["id"])
                assert versions["versions"][-1]["id"] == facts[0]["id"]
                assert versions["versions"][-1]["valid_until"] is None
                said = memory.history("ines", "s")[0]
                whole = (await call(ines, "get_message", message_id=said.message_id))["message"]
                assert (whole["content"], whole["session_id"]) == (said.content, "s")
                assert whole["message_id"] == said.message_id
                missing = await ines.call_tool("get_message", {"message_id": "nope"})
                assert missing.content[0].text.startswith("MessageNotFoundError: ")
                refused = await ines.call_tool("fact_history", {"memory_id": "nope"})
                assert refused.is_error and refused.content[0].text.startswith("InputError: ")
                gone = await call(ines, "forget_memory", memory_id=added["id"])
                assert gone["deleted"] is True
                after = (await call(ines, "search_memory", query="padel"))["results"]
                assert added["id"] not in {r["id"] for r in after}


async def test_get_message_reads_a_long_message_whole(served: tuple[str, Memory]) -> None:
    """Issue 34: a 1,000,000-character message added over REST is read whole by the
    get_message tool, for its user only; a memory too long to embed whole is refused
    with the typed error naming its field."""
    url, _ = served
    text = "".join(
        f"line {i}: ERROR «timeout» after 30 s\n\n```\ncode {i}\n```\n" for i in range(30_000)
    )
    text = text[:1_000_000]
    body = {"user_id": "ann", "session_id": "s", "messages": [{"role": "user", "content": text}]}
    async with httpx2.AsyncClient() as http:
        answer = await http.post(url + "/v1/messages", json=body, timeout=60)
    assert answer.status_code == 201, answer.text
    (message_id,) = answer.json()["ids"]
    async with http_client(url, "ann") as ann:
        whole = (await call(ann, "get_message", message_id=message_id))["message"]
        assert whole["content"] == text and whole["role"] == "user"
        assert whole["session_id"] == "s" and "user_id" not in str(whole.get("metadata", {}))
        long = await ann.call_tool("add_memory", {"content": "y" * 200_001})
        assert long.is_error
        assert long.content[0].text.startswith("ContentTooLargeError: content: has 200001")
    async with http_client(url, "bob") as bob:
        refused = await bob.call_tool("get_message", {"message_id": message_id})
        assert refused.is_error and "MessageNotFoundError" in refused.content[0].text
        assert "ERROR" not in refused.content[0].text


class DownEmbedder(HashEmbedder):
    """A local embedder that can be switched off: it raises ConnectionError, as a user's
    own class does when its service is unreachable."""

    down = False

    def embed(self, texts: Any) -> Any:
        if self.down:
            raise ConnectionError("[Errno 111] Connection refused")
        return super().embed(texts)


async def test_the_embedder_down_over_mcp(tmp_path: Path) -> None:
    """Issue 35, item 2, on MCP: get_context answers from keyword search and says so
    (``degraded``); search_memory is the typed error the library and the clients raise."""
    embedder = DownEmbedder(32)
    memory = Memory(str(tmp_path / "memory.db"), embedder=embedder)
    with live_server(create_app(memory)) as url:
        async with http_client(url, "ann") as ann:
            await call(ann, "add_memory", content="Is allergic to peanuts", importance=0.9)
            context = await call(ann, "get_context", query="peanuts", max_tokens=300)
            assert "degraded" not in context
            embedder.down = True
            context = await call(ann, "get_context", query="peanuts", max_tokens=300)
            assert "allergic to peanuts" in context["context"]
            assert context["degraded"][0].startswith("embedder: ProviderUnavailableError")
            failed = await ann.call_tool("search_memory", {"query": "peanuts"})
            assert failed.is_error and "ProviderUnavailableError" in str(failed.content)
    memory.close()
