"""Seed 000 (MUXI BufferMemory): the buffer, access, partitioning and serialization examples.

Each test body is the seed's code with only the import line changed
(``from muxi.core.memory.buffer import BufferMemory`` -> ``from tiermem import BufferMemory``),
followed by assertions of what the seed says happens.
"""

from __future__ import annotations


def test_buffer_management() -> None:
    from tiermem import BufferMemory

    # Create a buffer with size 5
    buffer = BufferMemory(buffer_size=5)

    # Add messages
    buffer.add_message("user", "Hello, my name is Alice.")
    buffer.add_message("assistant", "Hello Alice! How can I help you today?")

    # When buffer exceeds capacity, oldest messages are removed
    for i in range(10):
        buffer.add_message("user", f"Message {i}")

    # Buffer now contains only the 5 most recent messages
    assert [m["content"] for m in buffer.get_messages()] == [f"Message {i}" for i in range(5, 10)]


def test_accessing_messages() -> None:
    from tiermem import BufferMemory

    buffer = BufferMemory(buffer_size=5)
    buffer.add_message("user", "Hello, my name is Alice.")
    buffer.add_message("assistant", "Hello Alice! How can I help you today?")

    # Get all messages
    all_messages = buffer.get_messages()

    # Get messages formatted for LLM consumption
    formatted_messages = buffer.get_formatted_messages()

    # Get messages with summary (if available)
    context_messages = buffer.get_context()

    assert len(all_messages) == 2
    assert formatted_messages == [
        {"role": "user", "content": "Hello, my name is Alice."},
        {"role": "assistant", "content": "Hello Alice! How can I help you today?"},
    ]
    assert context_messages == formatted_messages


def test_user_specific_partitioning() -> None:
    from tiermem import BufferMemory

    # Create buffer
    buffer = BufferMemory(buffer_size=5)

    # Add messages for different users
    buffer.add_message("user", "I'm Alice", metadata={"user_id": "user1"})
    buffer.add_message("assistant", "Hello Alice!", metadata={"user_id": "user1"})

    buffer.add_message("user", "I'm Bob", metadata={"user_id": "user2"})
    buffer.add_message("assistant", "Hello Bob!", metadata={"user_id": "user2"})

    # Get messages for a specific user
    alice_messages = buffer.get_messages(filter_metadata={"user_id": "user1"})
    bob_messages = buffer.get_messages(filter_metadata={"user_id": "user2"})

    assert [m["content"] for m in alice_messages] == ["I'm Alice", "Hello Alice!"]
    assert [m["content"] for m in bob_messages] == ["I'm Bob", "Hello Bob!"]
    assert all(m["metadata"]["user_id"] == "user2" for m in bob_messages)


def test_serialization_and_persistence() -> None:
    from tiermem import BufferMemory

    buffer = BufferMemory(buffer_size=5)
    buffer.add_message("user", "I'm Alice", metadata={"user_id": "user1"})

    # Serialize to JSON
    json_data = buffer.to_json()

    # Load from JSON
    new_buffer = BufferMemory.from_json(json_data)

    assert new_buffer.buffer_size == 5
    assert new_buffer.get_messages() == buffer.get_messages()
    assert new_buffer.summary is None
