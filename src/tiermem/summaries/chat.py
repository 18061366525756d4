"""``BufferSummaryChatMemory``: seed 002's token-limited buffer with a running summary.

tinygent's class of the same name prunes the oldest messages over ``max_token_limit``
into an LLM summary. This one keeps its API (``llm``, ``max_token_limit``,
``return_messages``, ``save_context``, ``load_variables``, ``prune``, ``clear``) on top
of :class:`~tiermem.buffer.memory.BufferMemory`, so saving a message never waits on the LLM,
a failing LLM loses nothing, and ``load_variables`` only reads: tinygent's version
writes the summary into the stored history on every call, so the history grows with
each read.

tinygent's message classes map to tiermem roles (the factories below build them):

========================  ===========  =====================
tinygent                  tiermem role  ``metadata["type"]``
========================  ===========  =====================
``TinyHumanMessage``      user          (none)
``TinyChatMessage``       assistant     (none)
``TinyPlanMessage``       assistant     ``"plan"``
``TinyReasoningMessage``  assistant     ``"reasoning"``
``TinySystemMessage``     system        (none)
``TinySummaryMessage``    system        ``"summary"``
========================  ===========  =====================
"""

from __future__ import annotations

from typing import Any, Protocol

from tiermem.aio.twins import stepped_twin, twin
from tiermem.buffer.memory import BufferMemory
from tiermem.errors import InvalidTypeError
from tiermem.messages import Message
from tiermem.summaries.summarize import (
    ExtractiveSummarizer,
    MemorySummarizer,
    Summarizer,
    message_lines,
)
from tiermem.summaries.worker import SummaryPolicy
from tiermem.tokens import TokenCounter

MEMORY_KEY = "summarized_chat"


class MessageFactory(Protocol):
    """Builds a tiermem message from text, like tinygent's message classes."""

    def __call__(self, content: str, metadata: dict[str, Any] | None = None) -> Message: ...


def _tiny(role: str, kind: str | None) -> MessageFactory:
    def build(content: str, metadata: dict[str, Any] | None = None) -> Message:
        meta = dict(metadata or {})
        if kind is not None:
            meta.setdefault("type", kind)
        return Message(role, content, metadata=meta)

    build.__doc__ = f"A tiermem ``{role}`` message" + (f" of type {kind!r}." if kind else ".")
    return build


human_message = _tiny("user", None)
chat_message = _tiny("assistant", None)
plan_message = _tiny("assistant", "plan")
reasoning_message = _tiny("assistant", "reasoning")
system_message = _tiny("system", None)
summary_message = _tiny("system", "summary")


class BufferSummaryChatMemory:
    """Recent messages within ``max_token_limit`` tokens, older ones in a running summary.

    Args:
        llm: the LLM that writes the summary (any :class:`~tiermem.llm.LLM`, a model
            string, or an object with ``generate``); None uses the offline
            :class:`~tiermem.summaries.summarize.ExtractiveSummarizer`.
        max_token_limit: tokens of recent messages kept verbatim (default 2000).
        return_messages: ``load_variables`` returns messages (True) or one string.
        summarizer: use this summarizer instead of one built from ``llm``.
        summary_policy: batching and retries (default: batches of 10, in the background).
        token_counter: counts the window; default the tiermem counter.
    """

    def __init__(
        self,
        llm: Any = None,
        max_token_limit: int = 2000,
        return_messages: bool = False,
        *,
        summarizer: Summarizer | None = None,
        summary_policy: SummaryPolicy | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        if summarizer is None:
            summarizer = MemorySummarizer(llm) if llm is not None else ExtractiveSummarizer()
        self.llm = llm
        self.max_token_limit = max_token_limit
        self.return_messages = bool(return_messages)
        self._summary_message: Message | None = None
        self.buffer = BufferMemory(
            buffer_size=None,
            max_tokens=max_token_limit,
            summarizer=summarizer,
            summary_policy=summary_policy,
            token_counter=token_counter,
        )

    def save_context(self, message: Message) -> None:
        """Add a message; the oldest leave for the summary when over the token limit."""
        if not isinstance(message, Message):
            raise InvalidTypeError(
                "message",
                f"expected a tiermem Message, got {type(message).__name__}",
                "build one with human_message(...) / chat_message(...) or Message(role, text)",
            )
        self.buffer.add(message)

    asave_context = stepped_twin(save_context)  # O(1) and never awaits the LLM

    def prune(self) -> None:
        """Summarize every message that has left the window, and wait for it."""
        self.buffer.flush()

    aprune = twin(prune)

    def load_variables(self) -> dict[str, list[Message] | str]:
        """``{"summarized_chat": ...}``: the summary (if any) then the recent messages.

        Waits for pending summaries so no pruned message is missing; never modifies
        the stored history.
        """
        self.prune()
        return self._variables()

    aload_variables = twin(load_variables)

    def _variables(self) -> dict[str, list[Message] | str]:
        messages = self.buffer.messages
        summary = self.buffer._summary
        if summary:
            if self._summary_message is None or self._summary_message.content != summary:
                self._summary_message = summary_message(summary)
            messages.insert(0, self._summary_message)
        if self.return_messages:
            return {MEMORY_KEY: messages}
        lines = message_lines(messages)
        return {MEMORY_KEY: "\n".join(f"{label}: {text}" for label, text in lines)}

    @property
    def summary(self) -> str | None:
        """The running summary as it stands (never waits on the LLM; :meth:`prune` does)."""
        return self.buffer.summary

    def clear(self) -> None:
        """Forget all messages, the summary and pending summary work."""
        self.buffer.clear()

    def __repr__(self) -> str:
        return (
            f"BufferSummaryChatMemory(messages={len(self.buffer)}, "
            f"max_token_limit={self.max_token_limit})"
        )
