"""Message: validation, lossless round trips, and the OpenAI / Anthropic formats."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiermem.errors import InvalidRoleError, InvalidTypeError, SerializationError
from tiermem.messages import (
    ROLES,
    Message,
    from_openai_messages,
    to_anthropic_messages,
    to_openai_messages,
)

CALL = {
    "id": "call_123",
    "type": "function",
    "function": {"name": "analyze_sales", "arguments": '{"quarter": "Q4"}'},
}

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
messages = st.builds(
    Message,
    role=st.sampled_from(sorted(ROLES)),
    content=st.none() | st.text() | st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    name=st.none() | st.text(min_size=1, max_size=10),
    tool_calls=st.none() | st.just([CALL]),
    tool_call_id=st.none() | st.text(min_size=1, max_size=10),
    agent_calls=st.none()
    | st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=2), max_size=2),
    structured_data=st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    images=st.none() | st.lists(st.text(min_size=1, max_size=30), max_size=2),
    metadata=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    timestamp=st.datetimes(timezones=st.just(timezone.utc)),
)


@given(messages)
def test_dict_and_json_round_trips_are_lossless(message: Message) -> None:
    assert Message.from_dict(message.to_dict()) == message
    assert Message.from_json(message.to_json()) == message
    assert json.loads(message.to_json()) == message.to_dict()


def test_fields_that_marsys_loses_survive_json() -> None:
    message = Message(
        role="agent_call",
        content={"task": "summarize", "pages": [1, 2]},
        message_id="m-1",
        tool_call_id="call_9",
        agent_calls=[{"agent_name": "Researcher", "request": "find Q4"}],
        structured_data={"score": 0.9},
        metadata={"caller": "Planner"},
    )
    back = Message.from_json(message.to_json())
    assert back.message_id == "m-1"
    assert back.content == {"task": "summarize", "pages": [1, 2]}
    assert back.agent_calls == message.agent_calls
    assert back.structured_data == {"score": 0.9}
    assert back.tool_call_id == "call_9"
    assert back.timestamp == message.timestamp


def test_ids_are_generated_and_unique() -> None:
    ids = {Message("user", "x").message_id for _ in range(1000)}
    assert len(ids) == 1000


def test_to_dict_returns_copies() -> None:
    message = Message("user", {"a": [1]}, metadata={"tags": ["x"]})
    data = message.to_dict()
    data["content"]["a"].append(2)
    data["metadata"]["tags"].append("y")
    assert message.content == {"a": [1]}
    assert message.metadata == {"tags": ["x"]}


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"role": "robot", "content": "hi"}, InvalidRoleError, "role"),
        ({"role": "user", "content": 42}, InvalidTypeError, "content"),
        ({"role": "user", "content": "x", "metadata": "user1"}, InvalidTypeError, "metadata"),
        ({"role": "user", "content": "x", "images": "a.png"}, InvalidTypeError, "images"),
        ({"role": "assistant", "tool_calls": [{"id": "1"}]}, InvalidTypeError, "tool_calls"),
        ({"role": "user", "content": "x", "timestamp": "yesterday"}, InvalidTypeError, "timestamp"),
        ({"role": "user", "content": "x", "message_id": ""}, InvalidTypeError, "message_id"),
        ({"role": "tool", "content": "x", "tool_call_id": 5}, InvalidTypeError, "tool_call_id"),
    ],
)
def test_bad_fields_raise_typed_errors_naming_the_field(kwargs, error, field) -> None:
    with pytest.raises(error) as info:
        Message(**kwargs)
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        "not a dict",
        {"content": "no role"},
        {"role": "user", "content": "x", "colour": "red"},
        {"role": "user", "content": "x", "timestamp": "not-a-time"},
    ],
)
def test_from_dict_rejects_malformed_data(data) -> None:
    with pytest.raises((SerializationError, InvalidTypeError)):
        Message.from_dict(data)


@pytest.mark.parametrize("text", ['{"role": "user", "content": "x"', "", "[1, 2", b"\xff"])
def test_from_json_rejects_truncated_json(text) -> None:
    with pytest.raises(SerializationError):
        Message.from_json(text)


def test_timestamps_accept_iso_strings_and_epoch_seconds() -> None:
    assert Message("user", "x", timestamp="2024-05-01T10:00:00+00:00").timestamp == datetime(
        2024, 5, 1, 10, tzinfo=timezone.utc
    )
    assert Message("user", "x", timestamp=0).timestamp == datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_dict_style_reading_as_in_seed_000() -> None:
    message = Message("user", "I'm Alice", metadata={"user_id": "user1"})
    assert message["content"] == "I'm Alice"
    assert message["metadata"]["user_id"] == "user1"
    assert isinstance(message["timestamp"], str)
    assert "metadata" in message and "tool_calls" not in message
    assert message.get("name", "none") == "none"
    with pytest.raises(KeyError):
        message["colour"]


class TestOpenAIFormat:
    def test_agent_call_becomes_user_prefixed_with_caller(self) -> None:
        message = Message("agent_call", "Analyze Q4", metadata={"caller": "Planner"})
        assert message.to_openai() == {
            "role": "user",
            "content": "[Request from Planner]: Analyze Q4",
        }

    def test_agent_response_becomes_assistant(self) -> None:
        assert Message("agent_response", "Done", name="Researcher").to_openai() == {
            "role": "assistant",
            "content": "Done",
            "name": "Researcher",
        }

    def test_tool_calls_and_results_keep_their_ids(self) -> None:
        call = Message("assistant", "", tool_calls=[CALL])
        result = Message("tool", '{"total": 1}', tool_call_id="call_123", name="analyze_sales")
        assert to_openai_messages([call, result]) == [
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": '{"total": 1}', "tool_call_id": "call_123"},
        ]

    def test_dict_content_is_sent_as_json_text(self) -> None:
        out = Message("assistant", {"answer": 42}).to_openai()
        assert json.loads(out["content"]) == {"answer": 42}

    def test_images_become_content_parts(self) -> None:
        out = Message("user", "What is this?", images=["https://x/cat.png"]).to_openai()
        assert out["content"] == [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png"}},
        ]

    def test_invalid_openai_names_are_left_out(self) -> None:
        assert "name" not in Message("user", "x", name="Dr. Who").to_openai()

    def test_from_openai_round_trips_chat(self) -> None:
        chat = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi", "name": "alice"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": "42", "tool_call_id": "call_123"},
        ]
        assert to_openai_messages(from_openai_messages(chat)) == chat

    def test_from_openai_reads_developer_as_system_and_image_parts(self) -> None:
        message = Message.from_openai(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                ],
            }
        )
        assert message.content == "look"
        assert message.images == ["data:image/png;base64,AAA"]
        assert Message.from_openai({"role": "developer", "content": "x"}).role == "system"

    def test_from_openai_rejects_unknown_roles(self) -> None:
        with pytest.raises(InvalidRoleError):
            Message.from_openai({"role": "function", "content": "x"})


class TestAnthropicFormat:
    def test_system_is_separated_and_tools_become_blocks(self) -> None:
        system, out = to_anthropic_messages(
            [
                Message("system", "Be brief."),
                Message("user", "Sales?"),
                Message("assistant", "Checking.", tool_calls=[CALL]),
                Message("tool", '{"total": 1}', tool_call_id="call_123"),
                Message("assistant", "Total is 1."),
            ]
        )
        assert system == "Be brief."
        assert out == [
            {"role": "user", "content": [{"type": "text", "text": "Sales?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "call_123",
                        "name": "analyze_sales",
                        "input": {"quarter": "Q4"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_123", "content": '{"total": 1}'}
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Total is 1."}]},
        ]

    def test_consecutive_turns_merge_and_images_convert(self) -> None:
        system, out = to_anthropic_messages(
            [
                Message("user", "one"),
                Message("agent_call", "two", metadata={"caller": "A"}),
                Message("user", "pic", images=["data:image/png;base64,QUJD"]),
            ]
        )
        assert system is None
        assert len(out) == 1 and out[0]["role"] == "user"
        blocks = out[0]["content"]
        assert blocks[1] == {"type": "text", "text": "[Request from A]: two"}
        assert blocks[-1] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
        }
