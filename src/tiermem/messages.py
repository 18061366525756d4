"""Message: the unit of conversation memory, and its OpenAI / Anthropic formats.

A :class:`Message` carries every field of the MARSYS message (seed 004) and survives a
dict or JSON round trip without loss: ids, tool calls, agent calls, structured data and
dict content all come back as they went in. It also reads like the dicts of seed 000
(``msg["content"]``), so code written against those buffers keeps working.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import count
from typing import Any, Union

from tiermem.errors import (
    InvalidRoleError,
    InvalidSizeError,
    InvalidTypeError,
    SerializationError,
    refuse_unknown,
    shown,
)

ROLES = frozenset({"user", "assistant", "system", "tool", "agent_call", "agent_response"})
"""Roles a message may have."""

Content = Union[str, dict[str, Any], list[Any], None]  # noqa: UP007 (runtime alias, 3.10)

_ID_PREFIX = "msg_" + os.urandom(6).hex()
_ID_COUNTER = count(1)
_OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FIELDS = (
    "role",
    "content",
    "message_id",
    "name",
    "tool_calls",
    "tool_call_id",
    "agent_calls",
    "structured_data",
    "images",
    "metadata",
    "timestamp",
)


EXTRA_FIELDS = frozenset(_FIELDS) - {"role", "content", "metadata"}
"""Message fields an ``add``-style call takes as keyword arguments."""


def check_fields(fields: Mapping[str, Any], name: str = "message") -> None:
    """Refuse keyword arguments that are not message fields (a typo would be lost)."""
    refuse_unknown(fields, EXTRA_FIELDS, name, "a message field")


def generate_id() -> str:
    """Return a process-unique message id (random per-process prefix plus a counter).

    Cheaper than ``uuid4`` on the append path, and still unique across processes
    with overwhelming probability (48 random bits per process).
    """
    return f"{_ID_PREFIX}_{next(_ID_COUNTER):x}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _check_optional_list(field_name: str, value: Any, item_type: type) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, item_type) for v in value):
        raise InvalidTypeError(
            field_name,
            f"expected a list of {item_type.__name__}, got {type(value).__name__}",
            "pass a list or None",
        )


def _check_tool_calls(tool_calls: Any) -> None:
    _check_optional_list("tool_calls", tool_calls, dict)
    for call in tool_calls or ():
        function = call.get("function")
        if not call.get("id") or not isinstance(function, dict) or not function.get("name"):
            raise InvalidTypeError(
                "tool_calls",
                f"each tool call needs an 'id' and a 'function' with a 'name', got {call!r}",
                'use the OpenAI shape {"id": ..., "type": "function", "function": '
                '{"name": ..., "arguments": "..."}}',
            )


def _check_json(value: Any, name: str) -> None:
    """Structured content must be JSON (it is rendered, counted and stored as JSON)."""
    try:
        json.dumps(value, allow_nan=False)
    except RecursionError:
        raise InvalidTypeError(name, "is nested too deeply", "flatten it") from None
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(
            name, f"is not JSON: {exc}", "use str, numbers, bools, None, lists and dicts"
        ) from None


def _parse_timestamp(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, timezone.utc)
        except (OverflowError, ValueError, OSError):
            raise InvalidSizeError(
                "timestamp",
                f"{shown(value) if isinstance(value, int) else repr(value)} epoch seconds is "
                "not a time Python can represent",
                "pass seconds since 1970 within years 1000 to 9998",
            ) from None
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidTypeError(
        "timestamp",
        f"cannot read {value!r} as a time",
        "pass a datetime, an ISO-8601 string or epoch seconds",
    )


@dataclass(eq=True, slots=True)
class Message:
    """One conversation message (seed 004's fields).

    Args:
        role: one of :data:`ROLES`.
        content: text, a dict (structured response) or a list of content parts.
        message_id: unique id; generated when absent.
        name: tool or agent name.
        tool_calls: OpenAI-shaped tool calls made by an assistant message.
        tool_call_id: the call a ``tool`` message answers.
        agent_calls: calls to other agents made by this message.
        structured_data: a structured (dict) payload beside the text.
        images: image URLs or data URLs, for vision models.
        metadata: free-form JSON-compatible data (``user_id``, ``caller``, ...).
        timestamp: when it was said; now (UTC) when absent.
    """

    role: str
    content: Content = None
    message_id: str = field(default_factory=generate_id)
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    agent_calls: list[dict[str, Any]] | None = None
    structured_data: dict[str, Any] | None = None
    images: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=_now)
    _token_cache: tuple[str, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidRoleError(
                "role",
                f"unknown role {self.role!r}",
                f"use one of {', '.join(sorted(ROLES))}",
            )
        content = self.content
        if not (content is None or isinstance(content, (str, dict, list))):
            raise InvalidTypeError(
                "content",
                f"expected str, dict, list of parts or None, got {type(content).__name__}",
                "convert the value to text first",
            )
        if isinstance(content, (dict, list)):
            _check_json(content, "content")
        if type(self.metadata) is not dict:
            if not isinstance(self.metadata, Mapping):
                raise InvalidTypeError(
                    "metadata",
                    f"expected a dict, got {type(self.metadata).__name__}",
                    "pass metadata as a dict, e.g. {'user_id': 'u1'}",
                )
            self.metadata = dict(self.metadata)
        if self.tool_calls is not None:
            _check_tool_calls(self.tool_calls)
        if self.agent_calls is not None:
            _check_optional_list("agent_calls", self.agent_calls, dict)
        if self.images is not None:
            _check_optional_list("images", self.images, str)
        if self.structured_data is not None and not isinstance(self.structured_data, dict):
            raise InvalidTypeError("structured_data", "expected a dict", "pass a dict or None")
        for name in ("message_id", "name", "tool_call_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidTypeError(name, f"expected str, got {type(value).__name__}")
        if not self.message_id:
            raise InvalidTypeError("message_id", "must not be empty", "omit it to generate one")
        if type(self.timestamp) is not datetime:
            self.timestamp = _parse_timestamp(self.timestamp)

    # -- text -------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The content as plain text: dicts as JSON, text parts joined."""
        return content_text(self.content)

    # -- dict-like reading (seed 000 code indexes messages like dicts) ---------------

    def __getitem__(self, key: str) -> Any:
        if key == "timestamp":
            return self.timestamp.isoformat()
        if key in _FIELDS:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """Return field ``key`` (as :meth:`__getitem__`) or ``default``."""
        try:
            value = self[key]
        except KeyError:
            return default
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return key in _FIELDS and (key == "metadata" or getattr(self, str(key)) is not None)

    def keys(self) -> Iterator[str]:
        """The fields that hold a value, as :meth:`to_dict` writes them."""
        return iter(self.to_dict())

    # -- lossless dict / JSON -----------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict holding every field; fields that are None are left out."""
        data: dict[str, Any] = {"role": self.role, "content": copy_json(self.content)}
        data["message_id"] = self.message_id
        for name in ("name", "tool_calls", "tool_call_id", "agent_calls", "structured_data"):
            value = getattr(self, name)
            if value is not None:
                data[name] = copy_json(value)
        if self.images is not None:
            data["images"] = list(self.images)
        data["metadata"] = copy_json(self.metadata)
        data["timestamp"] = self.timestamp.isoformat()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Rebuild a message written by :meth:`to_dict` (``id`` is read as ``message_id``)."""
        if not isinstance(data, Mapping):
            raise SerializationError(
                "message", f"expected a dict, got {type(data).__name__}", "pass to_dict() output"
            )
        values = dict(data)
        if "id" in values and "message_id" not in values:
            values["message_id"] = values.pop("id")
        unknown = set(values) - set(_FIELDS)
        if unknown:
            raise SerializationError(
                f"message.{sorted(unknown)[0]}",
                "unknown field",
                f"known fields are {', '.join(_FIELDS)}",
            )
        if "role" not in values:
            raise SerializationError("message.role", "missing", "every message needs a role")
        if values.get("metadata") is None:
            values.pop("metadata", None)
        if values.get("message_id") is None:
            values.pop("message_id", None)
        if values.get("timestamp") is None:
            values.pop("timestamp", None)
        return cls(**values)

    def to_json(self) -> str:
        """Serialize to a JSON string (lossless)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Message:
        """Parse a message written by :meth:`to_json`."""
        return cls.from_dict(parse_json(text, "message"))

    # -- provider formats -----------------------------------------------------------

    def to_openai(self) -> dict[str, Any]:
        """This message in the OpenAI chat format.

        ``agent_call`` becomes a user message prefixed with its caller, ``agent_response``
        becomes an assistant message, tool results keep their ``tool_call_id``.
        """
        role = self.role
        if role == "agent_call":
            caller = self.metadata.get("caller") or self.name or "agent"
            return {"role": "user", "content": f"[Request from {caller}]: {self.text}"}
        if role == "tool":
            out: dict[str, Any] = {"role": "tool", "content": self.text}
            if self.tool_call_id is not None:
                out["tool_call_id"] = self.tool_call_id
            return out
        out = {"role": "assistant" if role == "agent_response" else role}
        out["content"] = self._openai_content()
        if self.name and _OPENAI_NAME.match(self.name):
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = copy_json(self.tool_calls)
        return out

    to_llm_dict = to_openai

    def _openai_content(self) -> Any:
        if isinstance(self.content, list):
            parts = copy_json(self.content)
        elif self.content is None or self.content == "":
            parts = None if self.tool_calls else ""
        else:
            parts = self.text
        if not self.images:
            return parts
        items: list[Any] = []
        if isinstance(parts, list):
            items = parts
        elif parts:
            items = [{"type": "text", "text": parts}]
        items += [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
        return items

    @classmethod
    def from_openai(cls, data: Mapping[str, Any], **fields: Any) -> Message:
        """Build a message from an OpenAI chat-format dict (``developer`` reads as ``system``).

        Extra keyword arguments set other fields (``metadata``, ``timestamp``...).
        """
        if not isinstance(data, Mapping):
            raise InvalidTypeError(
                "message", f"expected a dict, got {type(data).__name__}", "pass an OpenAI message"
            )
        role = data.get("role")
        if role == "developer":
            role = "system"
        content = data.get("content")
        images: list[str] | None = None
        if isinstance(content, list):
            images = [
                p["image_url"]["url"]
                for p in content
                if isinstance(p, dict) and p.get("type") == "image_url"
            ] or None
            if images:
                content = [
                    p for p in content if not (isinstance(p, dict) and p.get("type") == "image_url")
                ]
                texts = [p.get("text", "") for p in content if isinstance(p, dict)]
                if len(texts) == len(content):
                    content = "\n".join(texts)
        return cls(
            role=role,  # type: ignore[arg-type]  # validated in __post_init__
            content=content,
            name=data.get("name"),
            tool_calls=copy_json(data.get("tool_calls")),
            tool_call_id=data.get("tool_call_id"),
            images=images,
            **fields,
        )


def content_text(content: Content) -> str:
    """Plain text of any message content: dicts as JSON, text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False, sort_keys=True)
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("content"), str):
            texts.append(part["content"])
    return "\n".join(texts)


def speaker(message: Message) -> str:
    """Who said ``message``: its name, else ``metadata["speaker"]``, else its role."""
    return str(message.name or message.metadata.get("speaker") or message.role)


def transcript_line(message: Message) -> str:
    """The text stored and indexed for a message: ``"{speaker}: {text}"``.

    The speaker (its name, else its role) is part of the text so that keyword and vector
    search can match questions that name who said something.
    """
    return f"{speaker(message)}: {message.text}"


def summary_message(summary: str) -> dict[str, Any]:
    """The system message that carries a running summary (seed 000's wording)."""
    return {"role": "system", "content": f"Previous conversation summary: {summary}"}


def tool_groups(messages: list[Message]) -> list[list[Message]]:
    """Split messages into units that must stay together: a tool call with its results."""
    groups: list[list[Message]] = []
    owner: dict[str, list[Message]] = {}
    for message in messages:
        target = owner.get(message.tool_call_id or "") if message.role == "tool" else None
        if target is not None:
            target.append(message)
            continue
        group = [message]
        groups.append(group)
        for call in message.tool_calls or ():
            owner[call["id"]] = group
    return groups


def to_openai_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat format."""
    return [m.to_openai() for m in messages]


def from_openai_messages(messages: Iterable[Mapping[str, Any]], **fields: Any) -> list[Message]:
    """Convert OpenAI chat-format dicts to messages."""
    return [Message.from_openai(m, **fields) for m in messages]


def messages_from_dicts(raw: Iterable[Any], field_name: str = "messages") -> list[Message]:
    """Rebuild messages written by :meth:`Message.to_dict`, as saved buffers hold them.

    Raises:
        SerializationError: an item is not a message dict; names it as ``field_name[i]``.
    """
    messages = []
    for i, item in enumerate(raw):
        try:
            messages.append(Message.from_dict(item))
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"{field_name}[{i}]", str(exc)) from None
    return messages


def to_anthropic_messages(
    messages: Iterable[Message],
) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert messages to the Anthropic Messages format.

    Returns ``(system, messages)``: system messages are joined into the separate
    ``system`` parameter; assistant tool calls become ``tool_use`` blocks and tool
    results become ``tool_result`` blocks in a user turn; consecutive turns of the
    same role are merged, as the API requires alternation.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system.append(message.text)
            continue
        role, blocks = _anthropic_turn(message)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), out


def _anthropic_turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        result = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        return "user", [{**result, "content": message.text}]
    openai = message.to_openai()
    role = openai["role"]
    blocks: list[dict[str, Any]] = []
    content = openai.get("content")
    if isinstance(content, str) and content:
        blocks.append({"type": "text", "text": content})
    elif isinstance(content, list):
        blocks.extend(_anthropic_part(p) for p in content)
    for call in message.tool_calls or ():
        function = call["function"]
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": _tool_arguments(function.get("arguments")),
            }
        )
    if not blocks:
        blocks.append({"type": "text", "text": ""})
    return role, blocks


def _anthropic_part(part: Any) -> dict[str, Any]:
    if isinstance(part, dict) and part.get("type") == "image_url":
        url = part["image_url"]["url"]
        match = re.match(r"data:(?P<mt>[\w/+.-]+);base64,(?P<data>.*)", url, re.S)
        if match:
            source = {"type": "base64", "media_type": match["mt"], "data": match["data"]}
        else:
            source = {"type": "url", "url": url}
        return {"type": "image", "source": source}
    if isinstance(part, dict) and part.get("type") == "text":
        return {"type": "text", "text": part.get("text", "")}
    return {"type": "text", "text": content_text([part])}


def _tool_arguments(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return arguments
    if not arguments:
        return {}
    try:
        return json.loads(arguments)
    except (TypeError, ValueError):
        return {"arguments": arguments}


def copy_json(value: Any) -> Any:
    """Copy a JSON-shaped value (dicts and lists are copied, scalars shared)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def parse_json(text: str | bytes, what: str) -> Any:
    if not isinstance(text, (str, bytes, bytearray)):
        raise SerializationError(what, f"expected JSON text, got {type(text).__name__}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerializationError(
            what, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise SerializationError(what, "is nested too deeply", "flatten the data") from None
    except UnicodeDecodeError as exc:
        raise SerializationError(what, f"not UTF-8 text: {exc.reason}") from None
