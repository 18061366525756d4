"""The ``tiermem demo`` walk-through: a multi-session conversation written for it.

It imports three sessions of a conversation with their own dates, stores two facts, and
shows each tier: the buffer and what left it (summaries), the long-term store, the user
synopsis, and the context the planner builds, explained, for a few questions.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

USER = "maya"

SESSIONS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "2025-03-02T10:00:00+00:00",
        [
            ("Maya", "Hi! I'm Maya Okafor, I run a small bakery called Forno Azul in Lisbon."),
            ("assistant", "Nice to meet you, Maya. How can I help Forno Azul?"),
            ("Maya", "I want to plan a sourdough workshop for 12 people on 14 March."),
            ("assistant", "Great idea. Do you have a budget in mind for the workshop?"),
            ("Maya", "About 450 euros. I prefer local flour from Moinho Velho."),
            ("assistant", "Moinho Velho it is. I will keep the budget at 450 euros."),
        ],
    ),
    (
        "2025-03-09T16:30:00+00:00",
        [
            ("Maya", "Quick update: 9 people signed up for the workshop so far."),
            ("assistant", "That's a good start with a week to go."),
            ("Maya", "My partner Joana is allergic to walnuts, so no walnut bread please."),
            ("assistant", "Noted: no walnuts in any of the workshop recipes."),
            ("Maya", "We also need aprons. Joana found a supplier in Porto for 6 euros each."),
            ("assistant", "Twelve aprons at 6 euros is 72 euros, within the budget."),
        ],
    ),
    (
        "2025-03-15T09:00:00+00:00",
        [
            ("Maya", "The workshop went really well yesterday, all 12 seats were taken!"),
            ("assistant", "Congratulations! What did people enjoy most?"),
            ("Maya", "The shaping session. Next I'm thinking about a croissant class in May."),
            ("assistant", "A croissant class in May sounds like a natural next step."),
            ("Maya", "Can you remind me what flour I preferred and who is allergic to what?"),
        ],
    ),
]

FACTS = [
    ("Maya Okafor owns the bakery Forno Azul in Lisbon.", "fact", 0.9),
    ("Maya prefers local flour from Moinho Velho.", "preference", 0.8),
    ("Joana, Maya's partner, is allergic to walnuts.", "fact", 0.9),
]

QUESTIONS = [
    "Which flour does Maya prefer, and who has an allergy?",
    "How many people came to the sourdough workshop?",
    "What happened in March 2025?",
]

CONFIG = {"memory": {"buffer": {"size": 6, "summary_batch": 3}}}


def run_demo(db: str | None = None, max_tokens: int = 500, console: Console | None = None) -> None:
    """Import the sample conversation and show every tier and the explained context."""
    from tiermem.memory import Memory

    console = console or Console()
    folder = None if db else tempfile.TemporaryDirectory(prefix="tiermem-demo-")
    path = str(Path(folder.name) / "demo.db") if folder is not None else str(db)
    console.print(
        Panel.fit(
            "[bold]tiermem demo[/]: one user, three sessions over two weeks, on the embedded "
            f"default (SQLite at {path}, local MiniLM embeddings, offline summaries)."
        )
    )
    try:
        with Memory(path, config=CONFIG) as memory:
            _import(memory, console)
            _show_buffer(memory, console)
            _show_store(memory, console)
            for question in QUESTIONS:
                _show_context(memory, question, max_tokens, console)
        console.print(
            "Next: [bold]tiermem serve[/] puts this memory behind an HTTP API, MCP at /mcp "
            "and an inspector at /ui (pip install 'tiermem\\[server]'; docs/server.md)."
        )
    finally:
        if folder is not None:
            folder.cleanup()


def _import(memory: Any, console: Console) -> None:
    with console.status("loading the local embedding model..."):
        memory.embedder.embed(["warm up"])
    start = time.perf_counter()
    added = 0
    for when, turns in SESSIONS:
        messages = [
            {
                "role": "assistant" if speaker == "assistant" else "user",
                "content": text,
                "name": None if speaker == "assistant" else speaker,
                "timestamp": when,
            }
            for speaker, text in turns
        ]
        added += len(memory.add_messages(messages, USER, session_id="s1"))
    for text, memory_type, importance in FACTS:
        memory.remember(text, USER, memory_type, importance)
    appended = time.perf_counter() - start
    with console.status("embedding and archiving in the background..."):
        memory.flush()
    console.print(
        f"Imported {added} messages from 3 sessions and remembered {len(FACTS)} facts in "
        f"{appended * 1000:.0f} ms (facts are embedded at once; messages off the hot path, "
        f"all archived after {time.perf_counter() - start:.1f} s)."
    )


def _show_buffer(memory: Any, console: Console) -> None:
    buffer = memory.buffers.get(USER, "s1")
    table = Table("role", "content", title=f"Buffer: the {len(buffer)} most recent messages")
    for message in buffer.messages:
        table.add_row(message.name or message.role, message.text[:80])
    console.print(table)
    console.print(
        Panel(
            buffer.summary or "-",
            title=f"Running summary of the {buffer.evicted_count} messages that left the buffer "
            f"({len(buffer.summaries)} batch summaries in the ring)",
        )
    )


def _show_store(memory: Any, console: Console) -> None:
    stats = memory.store.stats(USER)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(stats.by_type.items()))
    console.print(f"Long-term store: {stats.count} memories ({kinds}) - nothing said is lost.")
    synopsis = memory.synopsis(USER)
    console.print(Panel(synopsis.render() or "-", title="User synopsis (offline, cached)"))


def _show_context(memory: Any, question: str, max_tokens: int, console: Console) -> None:
    start = time.perf_counter()
    context = memory.get_context(question, USER, "s1", max_tokens=max_tokens)
    took = (time.perf_counter() - start) * 1000
    console.print(
        Panel(
            context.explain(),
            title=f"get_context({question!r}, max_tokens={max_tokens}) in {took:.0f} ms",
        ),
        markup=False,
        highlight=False,
    )
