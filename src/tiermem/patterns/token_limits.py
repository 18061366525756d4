"""Token-limit helpers of seed 004: trim a conversation to a budget, or summarize its past.

:func:`manage_token_limit` counts with tiermem's token counter (exact tiktoken by
default) where the seed estimated ``len(text) // 4``, counts what the model is really
sent (role overhead, names, tool-call arguments), and never separates a tool call from
its results. :func:`summarize_memory` accepts the seed's summarizer agent (an object
whose ``run(prompt)`` returns something with ``.content``), an :class:`~tiermem.llm.LLM`,
or any tiermem :class:`~tiermem.summaries.summarize.Summarizer`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.llm.base import LLM
from tiermem.messages import Message, summary_message, tool_groups
from tiermem.patterns.conversation import check_message
from tiermem.summaries.summarize import Summarizer
from tiermem.tokens import TokenCounter, get_token_counter

SUMMARY_PROMPT = """
    Summarize this conversation, preserving key information:

    {conversation}

    Provide a concise summary focusing on:
    1. Main topics discussed
    2. Key decisions made
    3. Important facts mentioned
    """
"""Seed 004's prompt, sent to a summarizer agent or LLM."""


def _messages_of(memory: Any) -> list[Message]:
    """The messages of a ConversationMemory, BufferMemory or list, with a running summary
    (if the memory has one) first as a system message."""
    if isinstance(memory, Sequence) and not isinstance(memory, (str, bytes)):
        return [check_message(m, f"memory[{i}]") for i, m in enumerate(memory)]
    get_messages = getattr(memory, "get_messages", None)
    if not callable(get_messages):
        raise InvalidTypeError(
            "memory",
            f"expected a ConversationMemory, BufferMemory or list of Messages, "
            f"got {type(memory).__name__}",
        )
    messages = list(get_messages())
    summary = getattr(memory, "summary", None)
    if isinstance(summary, str) and summary:
        messages.insert(0, Message.from_openai(summary_message(summary)))
    return messages


def _counter_of(memory: Any, token_counter: TokenCounter | None) -> TokenCounter:
    if token_counter is not None:
        return token_counter
    buffer = getattr(memory, "buffer", memory)
    counter = getattr(buffer, "token_counter", None)
    return counter if isinstance(counter, TokenCounter) else get_token_counter()


def manage_token_limit(
    memory: Any,
    max_tokens: int = 4000,
    preserve_system: bool = True,
    *,
    token_counter: TokenCounter | None = None,
) -> list[Message]:
    """The messages to send so the conversation fits ``max_tokens`` (seed 004).

    System messages (and the memory's running summary) come first and are kept whole
    when ``preserve_system`` is true, even if they alone exceed the budget; then the
    newest other messages, in order, while they fit. A tool call and its results are
    kept or dropped together. The memory itself is not changed.

    Args:
        memory: a :class:`ConversationMemory`, a :class:`~tiermem.BufferMemory` or a list
            of :class:`~tiermem.Message`.
        max_tokens: the budget, counted as the OpenAI chat format is billed.
        preserve_system: keep system messages (False: they are dropped).
        token_counter: default: the memory's counter, else tiermem's default.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise InvalidSizeError("max_tokens", f"must be an int >= 0, got {max_tokens!r}")
    messages = _messages_of(memory)
    counter = _counter_of(memory, token_counter)
    system = [m for m in messages if m.role == "system"] if preserve_system else []
    others = [m for m in messages if m.role != "system"]
    used = sum(counter.count_message(m) for m in system)
    kept: list[Message] = []
    for group in reversed(tool_groups(others)):
        cost = sum(counter.count_message(m) for m in group)
        if used + cost > max_tokens:
            break
        used += cost
        kept[:0] = group
    return system + kept


async def summarize_memory(memory: Any, summarizer: Any, chunk_size: int = 20) -> str:
    """Replace all but the newest ``chunk_size`` messages by a summary (seed 004).

    The summary becomes a system message ``Previous conversation summary: ...`` before
    the kept messages. A tool call is never separated from its results (the kept part
    grows to include the whole group). If the summarizer fails, the memory is unchanged.

    Args:
        memory: a :class:`ConversationMemory` (anything with ``get_messages``, ``clear``
            and ``add_message(Message)``).
        summarizer: an agent whose ``run(prompt)`` returns an object with ``.content``
            (or a string), an :class:`~tiermem.llm.LLM`, or a tiermem ``Summarizer``.
        chunk_size: messages kept verbatim.

    Returns:
        The summary text; ``""`` when the memory holds ``chunk_size`` messages or fewer.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 0:
        raise InvalidSizeError("chunk_size", f"must be an int >= 0, got {chunk_size!r}")
    messages = list(memory.get_messages())
    if len(messages) <= chunk_size:
        return ""
    split = _split_point(messages, len(messages) - chunk_size)
    to_summarize, recent = messages[:split], messages[split:]
    if not to_summarize:
        return ""
    summary = await _summarize(summarizer, to_summarize)
    memory.clear()
    memory.add_message(Message(role="system", content=f"Previous conversation summary: {summary}"))
    for message in recent:
        memory.add_message(message)
    return summary


def _split_point(messages: list[Message], split: int) -> int:
    """Move ``split`` back to the start of the tool group it falls in."""
    start = 0
    for group in tool_groups(messages):
        end = start + len(group)
        if start < split < end:
            return start
        start = end
    return split


async def _summarize(summarizer: Any, messages: list[Message]) -> str:
    """Run whichever summarizer shape was given; returns its text."""
    if isinstance(summarizer, Summarizer):
        return await summarizer.asummarize(messages)
    conversation = "\n".join(f"{m.role}: {m.content}" for m in messages)
    prompt = SUMMARY_PROMPT.format(conversation=conversation)
    if isinstance(summarizer, LLM):
        return (await summarizer.acomplete(prompt)).text.strip()
    run = getattr(summarizer, "run", None)
    if not callable(run):
        raise InvalidTypeError(
            "summarizer",
            f"{type(summarizer).__name__} has neither run(prompt), acomplete() nor asummarize()",
            "pass an Agent, an LLM or a tiermem Summarizer",
        )
    result = run(prompt)
    if inspect.isawaitable(result):
        result = await result
    content = getattr(result, "content", result)
    if not isinstance(content, str):
        raise InvalidTypeError(
            "summarizer.run()", f"returned {type(content).__name__} content, expected text"
        )
    return content


__all__ = ["SUMMARY_PROMPT", "manage_token_limit", "summarize_memory"]
