"""TiermemAutogenMemory against the real autogen-core."""

from __future__ import annotations

import pytest
from autogen_core.memory import Memory as AutogenMemory
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import AssistantMessage, SystemMessage, UserMessage

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, MissingUserError
from tiermem.integrations.autogen import TiermemAutogenMemory
from tiermem.memory import Memory


def text(value: str, **metadata: object) -> MemoryContent:
    return MemoryContent(content=value, mime_type=MemoryMimeType.TEXT, metadata=metadata or None)


async def test_add_query_and_update_context(memory: Memory) -> None:
    ana = TiermemAutogenMemory(memory, "ana")
    assert isinstance(ana, AutogenMemory)
    await ana.add(text("Ana's dog is a greyhound named Pixel.", topic="pets"))
    await ana.add(text("Ana works as a nurse in Porto."))
    await ana.add(
        MemoryContent(content={"city": "Porto", "floor": 3}, mime_type=MemoryMimeType.JSON)
    )

    found = await ana.query("what is the name of my dog?")
    assert found.results[0].content == "Ana's dog is a greyhound named Pixel."
    assert found.results[0].metadata["topic"] == "pets" and "score" in found.results[0].metadata
    as_json = await ana.query(
        MemoryContent(content="floor Porto", mime_type=MemoryMimeType.TEXT), k=1
    )
    assert len(as_json.results) == 1
    json_hit = [r for r in (await ana.query("floor", k=3)).results if isinstance(r.content, dict)]
    assert json_hit[0].content == {"city": "Porto", "floor": 3}
    assert json_hit[0].mime_type == "application/json"

    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content="Hi!", source="user"))
    await context.add_message(AssistantMessage(content="Hello.", source="assistant"))
    await context.add_message(UserMessage(content="What is my dog called?", source="user"))
    result = await ana.update_context(context)
    messages = await context.get_messages()
    assert isinstance(messages[-1], SystemMessage) and "Pixel" in messages[-1].content
    assert result.memories.results[0].content == "Ana's dog is a greyhound named Pixel."


async def test_scope_clear_and_close(memory: Memory) -> None:
    memory.add("user", "I parked on level 4.", "ana", session_id="s")
    memory.flush()
    ana = TiermemAutogenMemory(memory, "ana")
    await ana.add(text("Ana parks at the north garage."))
    assert [r.content for r in (await ana.query("parked level")).results] == [
        "Ana parks at the north garage."
    ]
    everything = TiermemAutogenMemory(memory, "ana", search_all=True)
    assert any(
        "level 4" in str(r.content) for r in (await everything.query("parked level")).results
    )
    await ana.clear()
    assert (await ana.query("garage")).results == []
    assert memory.store.index.count("ana") == 1  # the conversation stays
    await ana.close()
    with pytest.raises(RuntimeError):
        await ana.add(text("after close"))
    assert memory.search("level", "ana")  # the shared Memory is still open


async def test_users_are_isolated(memory: Memory) -> None:
    ana = TiermemAutogenMemory(memory, "ana")
    bob = TiermemAutogenMemory(memory, "bob", search_all=True)
    await ana.add(text("Ana's safe code is 7788."))
    assert (await bob.query("safe code 7788")).results == []
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content="safe code?", source="bob"))
    assert (await bob.update_context(context)).memories.results == []
    assert len(await context.get_messages()) == 1
    await bob.clear()
    assert len((await ana.query("safe code")).results) == 1


async def test_bad_input_gets_typed_errors(memory: Memory) -> None:
    with pytest.raises(MissingUserError):
        TiermemAutogenMemory(memory, "")
    with pytest.raises(InvalidSizeError):
        TiermemAutogenMemory(memory, "ana", k=0)
    with pytest.raises(InputError):
        TiermemAutogenMemory(memory, "ana", memory_type="secret")
    ana = TiermemAutogenMemory(memory, "ana")
    with pytest.raises(InvalidTypeError):
        await ana.add("plain string")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        await ana.add(MemoryContent(content=b"\x89PNG", mime_type=MemoryMimeType.BINARY))
    with pytest.raises(InvalidTypeError):
        await ana.add(text("x", blob=b"bytes"))
    with pytest.raises(InputError):
        await ana.add(text("   "))
    with pytest.raises(InvalidTypeError):
        await ana.query(MemoryContent(content={"a": 1}, mime_type=MemoryMimeType.JSON))
    with pytest.raises(InputError):
        await ana.query("x", top_k=3)
    with pytest.raises(InvalidSizeError):
        await ana.query("x", k=-1)
    with pytest.raises(InvalidTypeError):
        await ana.update_context([UserMessage(content="hi", source="u")])  # type: ignore[arg-type]
    assert memory.store.index.count("ana") == 0


async def test_a_text_the_user_already_had_joins_and_survives_clear(memory: Memory) -> None:
    memory.remember("Ana likes tea.", "ana", "preference")
    ana = TiermemAutogenMemory(memory, "ana")
    await ana.add(text("Ana likes tea.", origin="chat"))
    found = (await ana.query("tea")).results
    assert [r.content for r in found] == ["Ana likes tea."] and found[0].metadata[
        "origin"
    ] == "chat"
    await ana.clear()
    assert (await ana.query("tea")).results == []
    (kept,) = memory.store.index.list("ana")
    assert kept.content == "Ana likes tea." and kept.memory_type == "preference"
    assert not any(k.startswith("autogen") for k in kept.metadata)
