"""Long messages (issue 34): ``memory.max_message_chars`` is the ceiling of what ``add``
keeps whole, not the embedder's limit; ``remember`` keeps the embedder's (a memory is
embedded whole); ``get_message`` reads a message back whole, in every retention and
durability; an archive carries a long message through export and import; a server takes
a body that holds one message at the ceiling."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.client import MemoryClient
from tiermem.config.model import TiermemConfig
from tiermem.errors import ConfigError, ContentTooLargeError, MessageNotFoundError
from tiermem.memory import Memory
from tiermem.server import create_app
from tiermem.server.body import DEFAULT_MAX_BODY, body_limit
from tiermem.stores.validate import MAX_MESSAGE_CHARS, MAX_STORED_CHARS

SMALL = {"memory": {"max_message_chars": 1000}}


def test_the_ceiling_is_a_setting_with_the_stores_default() -> None:
    assert TiermemConfig().memory.max_message_chars == MAX_MESSAGE_CHARS == 4_000_000
    assert TiermemConfig.load({"memory": {"max_message_chars": MAX_STORED_CHARS}})
    for bad in (0, MAX_STORED_CHARS + 1):
        with pytest.raises(ConfigError) as raised:
            TiermemConfig.load({"memory": {"max_message_chars": bad}})
        assert raised.value.field == "memory.max_message_chars"


def test_add_keeps_what_the_setting_allows_whatever_the_embedder_takes(tmp_path: Path) -> None:
    embedder = HashEmbedder(32, max_chars=100)  # the embedder's limit is not the message's
    with Memory(str(tmp_path / "m.db"), config=SMALL, embedder=embedder) as memory:
        fits = memory.add("user", "é" * 1000, "u", "s")
        assert memory.get_message(fits.message_id, user_id="u").content == "é" * 1000
        with pytest.raises(ContentTooLargeError) as raised:
            memory.add_messages(
                [{"role": "user", "content": c} for c in ("ok", "x" * 1001)], "u", "s"
            )
        error = raised.value
        assert error.field == "messages[1].content"
        assert "1,001 characters" in error.problem and "1,000" in error.problem
        assert "memory.max_message_chars" in error.hint
        assert [m.message_id for m in memory.history("u", "s")] == [fits.message_id]


def test_a_memory_keeps_the_embedders_ceiling_on_every_write(tmp_path: Path) -> None:
    embedder = HashEmbedder(32, max_chars=500)
    with Memory(str(tmp_path / "m.db"), embedder=embedder) as memory:
        kept = memory.remember("z" * 500, "u")
        calls = [
            (lambda: memory.remember("z" * 501, "u"), "content"),
            (lambda: memory.remember_many([{"content": "z" * 501}], "u"), "memories[0].content"),
            (lambda: memory.update_memory(kept, "u", content="z" * 501), "content"),
        ]
        for call, field in calls:
            with pytest.raises(ContentTooLargeError) as raised:
                call()
            assert raised.value.field == field
            assert "501 characters, the maximum is 500" in raised.value.problem
            assert "add a long text as a message" in raised.value.hint
        assert [r.content for r in memory.list_memories("u")] == ["z" * 500]


@pytest.mark.parametrize("retention", ["session", "single_run"])
def test_get_message_in_process_finds_what_a_buffer_holds(tmp_path: Path, retention: str) -> None:
    config = {"memory": {"retention": retention}}
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32)) as memory:
        said = memory.add("user", "kept in this process", "u", "s")
        assert memory.get_message(said.message_id, user_id="u").to_dict() == said.to_dict()
        found = asyncio.run(memory.aget_message(said.message_id, user_id="u"))
        assert found.content == "kept in this process"
        with pytest.raises(MessageNotFoundError):
            memory.get_message(said.message_id, user_id="someone else")


def test_get_message_waits_for_messages_queued_in_process(tmp_path: Path) -> None:
    config = {"memory": {"durability": "memory"}}
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32)) as memory:
        said = memory.add("user", "queued, then written", "u", "s")
        assert memory.get_message(said.message_id, user_id="u").content == "queued, then written"
        again = memory.add("user", "queued again", "u", "s")
        found = asyncio.run(memory.aget_message(again.message_id, user_id="u"))
        assert found.content == "queued again"


def test_an_archive_carries_a_long_message_whole(tmp_path: Path) -> None:
    text = "".join(f"paragraph {i}: the log says ERROR.\n\n" for i in range(60_000))
    assert len(text) > 1_500_000
    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        said = memory.add("user", text, "u", "s")
        assert memory.flush(60)
        archive = list(memory.export("u"))
        assert memory.import_archive(archive, "copy")["messages"] == 1
        assert memory.get_message(said.message_id, user_id="copy").content == text


def test_a_server_takes_a_body_with_one_message_at_the_ceiling(tmp_path: Path) -> None:
    assert body_limit(MAX_MESSAGE_CHARS) == 4 * MAX_MESSAGE_CHARS + DEFAULT_MAX_BODY
    with Memory(str(tmp_path / "m.db"), config=SMALL, embedder=HashEmbedder(32)) as memory:
        app = create_app(memory, keys=str(tmp_path / "keys.db"))
        with live_server(app) as url, MemoryClient(url) as client:
            said = client.add("user", "🚀" * 1000, "u", "s")  # 4 bytes a character
            assert client.get_message(said.message_id, user_id="u").content == "🚀" * 1000
            with pytest.raises(ContentTooLargeError) as raised:
                client.add("user", "🚀" * 1001, "u", "s")
            assert raised.value.field == "message.content"  # not the body's limit
            assert "memory.max_message_chars" in raised.value.hint
            with pytest.raises(ContentTooLargeError) as body:  # over the body's limit
                client.add("user", "🚀" * (body_limit(1000) // 4 + 1), "u", "s")
            assert body.value.field == "body"
