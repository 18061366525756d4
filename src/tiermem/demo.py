"""The ``tiermem demo`` walk-through, on a sample conversation written for it."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from tiermem.buffer import BufferMemory
from tiermem.messages import Message

SAMPLE_CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Hi! I'm Maya Okafor, I run a small bakery in Lisbon."},
    {"role": "assistant", "content": "Nice to meet you, Maya. How can I help the bakery?"},
    {"role": "user", "content": "I want to plan a sourdough workshop on 14 March for 12 people."},
    {"role": "assistant", "content": "Great. Do you have a budget in mind for the workshop?"},
    {"role": "user", "content": "About 450 euros. I prefer local flour from Moinho Velho."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "price_flour", "arguments": '{"kg": 15}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"kg": 15, "price_eur": 38.5}'},
    {"role": "assistant", "content": "15 kg of Moinho Velho flour costs 38.50 euros."},
    {"role": "user", "content": "Perfect. Also, my partner Joana is allergic to walnuts."},
    {"role": "assistant", "content": "Noted: no walnuts in the workshop recipes."},
    {"role": "user", "content": "Can you remind me what flour I preferred?"},
]


def _describe(message: Message) -> str:
    if message.tool_calls:
        return "(calls " + ", ".join(c["function"]["name"] for c in message.tool_calls) + ")"
    return message.text


def run_demo(buffer_size: int = 5, max_tokens: int = 120, console: Console | None = None) -> None:
    """Show a buffer filling, evicting in tool-call groups, and formatting context."""
    console = console or Console()
    buffer = BufferMemory(buffer_size=buffer_size)
    evicted: list[Message] = []
    buffer.add_eviction_consumer(evicted.extend)
    console.print(
        Panel.fit(
            f"[bold]tiermem demo[/]: a buffer of {buffer_size} messages. Messages that leave it "
            "go to its eviction consumers (the summarizer, the long-term archive) - never lost."
        )
    )
    table = Table("#", "role", "content", "in buffer", "evicted so far", title="Filling the buffer")
    for i, raw in enumerate(SAMPLE_CONVERSATION, 1):
        buffer.add(Message.from_openai(raw, metadata={"user_id": "maya"}))
        text = _describe(Message.from_openai(raw))
        table.add_row(str(i), raw["role"], text[:60], str(len(buffer)), str(len(evicted)))
    console.print(table)
    console.print(
        "[dim]The assistant tool call and its result left together: eviction never "
        "separates a call from its result.[/]"
    )
    kept = Table("role", "content", "tokens", title="Recent window (get_recent)")
    counter = buffer.token_counter
    for message in buffer.get_recent(buffer_size):
        kept.add_row(message.role, _describe(message)[:70], str(counter.count_message(message)))
    console.print(kept)
    console.print(f"Buffer tokens ({counter.name}): [bold]{buffer.tokens}[/]")
    context = buffer.get_context(max_tokens=max_tokens)
    console.print(
        Panel(
            "\n".join(f"[cyan]{m['role']:>9}[/] {str(m.get('content'))[:80]}" for m in context),
            title=f"Context within {max_tokens} tokens (OpenAI format)",
        )
    )
    console.print(
        f"Evicted messages handed to consumers, in order: {len(evicted)} - first: "
        f"[italic]{evicted[0].text[:60] if evicted else '-'}[/]"
    )
