"""Summaries: the summarizers (:mod:`.summarize`), the pipeline that summarizes evicted
messages in batches (:mod:`.worker`) and ``BufferSummaryChatMemory`` (:mod:`.chat`).

The names below are imported on first use: the buffer imports the summarizers, and
``BufferSummaryChatMemory`` stands on the buffer.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Summarizer": "tiermem.summaries.summarize",
    "MemorySummarizer": "tiermem.summaries.summarize",
    "ExtractiveSummarizer": "tiermem.summaries.summarize",
    "SummaryPolicy": "tiermem.summaries.worker",
    "BufferSummaryChatMemory": "tiermem.summaries.chat",
    "chat_message": "tiermem.summaries.chat",
    "human_message": "tiermem.summaries.chat",
    "plan_message": "tiermem.summaries.chat",
    "reasoning_message": "tiermem.summaries.chat",
    "system_message": "tiermem.summaries.chat",
}

if TYPE_CHECKING:
    from tiermem.summaries.chat import (
        BufferSummaryChatMemory,
        chat_message,
        human_message,
        plan_message,
        reasoning_message,
        system_message,
    )
    from tiermem.summaries.summarize import ExtractiveSummarizer, MemorySummarizer, Summarizer
    from tiermem.summaries.worker import SummaryPolicy

__all__ = [
    "BufferSummaryChatMemory",
    "ExtractiveSummarizer",
    "MemorySummarizer",
    "Summarizer",
    "SummaryPolicy",
    "chat_message",
    "human_message",
    "plan_message",
    "reasoning_message",
    "system_message",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tiermem.summaries' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
