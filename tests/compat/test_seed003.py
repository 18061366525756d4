"""Seed 003 (promptise ConversationBuffer): every example, imports changed only.

``from promptise.runtime.conversation import ConversationBuffer`` becomes
``from tiermem import ConversationBuffer``.
"""

from __future__ import annotations


def test_intro_example() -> None:
    from tiermem import ConversationBuffer

    buffer = ConversationBuffer(max_messages=50)
    buffer.append({"role": "user", "content": "Hello!"})
    buffer.append({"role": "assistant", "content": "Hi there!"})

    # Next invocation sees the previous exchange
    history = buffer.get_messages()
    # [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi there!"}]
    assert history == [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi there!"},
    ]


def test_basic_usage_adding_reading_replacing_clearing() -> None:
    from tiermem import ConversationBuffer

    buffer = ConversationBuffer(max_messages=100)

    # Add a single message
    buffer.append({"role": "user", "content": "Check the pipeline status."})

    # Add multiple messages at once
    buffer.extend(
        [
            {"role": "assistant", "content": "Pipeline is healthy. No anomalies."},
            {"role": "user", "content": "What about the error rate?"},
        ]
    )

    # Get all messages as a list copy (oldest first)
    messages = buffer.get_messages()

    # Check message count
    print(len(buffer))  # 3
    assert len(buffer) == 3

    buffer.set_messages(messages)
    assert buffer.get_messages() == messages

    buffer.clear()
    assert len(buffer) == 0


async def test_async_safe_operations() -> None:
    from tiermem import ConversationBuffer

    buffer = ConversationBuffer(max_messages=100)
    buffer.append({"role": "user", "content": "Hello!"})

    # Thread-safe read
    snapshot = await buffer.async_snapshot()

    # Thread-safe replace
    await buffer.async_replace([{"role": "user", "content": "Fresh start"}])

    # Thread-safe append
    await buffer.async_append({"role": "assistant", "content": "Ready."})

    assert snapshot == [{"role": "user", "content": "Hello!"}]
    assert buffer.get_messages() == [
        {"role": "user", "content": "Fresh start"},
        {"role": "assistant", "content": "Ready."},
    ]


def test_automatic_eviction() -> None:
    from tiermem import ConversationBuffer

    buffer = ConversationBuffer(max_messages=3)

    buffer.append({"role": "user", "content": "Message 1"})
    buffer.append({"role": "user", "content": "Message 2"})
    buffer.append({"role": "user", "content": "Message 3"})
    buffer.append({"role": "user", "content": "Message 4"})  # Evicts Message 1

    messages = buffer.get_messages()
    assert len(messages) == 3
    assert messages[0]["content"] == "Message 2"


def test_serialization() -> None:
    from tiermem import ConversationBuffer

    buffer = ConversationBuffer(max_messages=100)
    buffer.append({"role": "user", "content": "Hello!"})

    # Save
    data = buffer.to_dict()
    # {"max_messages": 100, "messages": [...]}

    # Restore
    restored = ConversationBuffer.from_dict(data)

    assert data["max_messages"] == 100 and data["messages"] == [
        {"role": "user", "content": "Hello!"}
    ]
    assert restored.get_messages() == buffer.get_messages()


def test_max_messages_zero_disables_buffering() -> None:
    from tiermem import ConversationBuffer

    buffer = ConversationBuffer(max_messages=0)
    buffer.append({"role": "user", "content": "Hello!"})
    assert len(buffer) == 0
