"""LLM providers: ``complete(messages) -> Completion`` over OpenAI-compatible and Anthropic APIs."""

from tiermem.llm.anthropic import AnthropicModel
from tiermem.llm.base import LLM, Completion, HttpChatModel, MessagesInput, Usage, to_chat_messages
from tiermem.llm.factory import get_llm
from tiermem.llm.openai import OpenAIModel

__all__ = [
    "LLM",
    "AnthropicModel",
    "Completion",
    "HttpChatModel",
    "MessagesInput",
    "OpenAIModel",
    "Usage",
    "get_llm",
    "to_chat_messages",
]
