"""The ``tiermem demo`` walk-through: a multi-session conversation written for it.

It imports three conversations with their own dates into one session, stores three facts,
and shows each tier as ``Memory``'s public methods read it: the newest messages and the
running summary of the older ones (from the transcript), the long-term store, the user
synopsis, and the context the planner builds, explained, for a few questions. It reads
well at 80 columns (piped output): long contents end in an ellipsis.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Column, Table

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

LEGEND = (
    "\nHow to read a context: [bold]section[/] is where an item sits in the prompt (recent: "
    "the newest messages, always offered; retrieved: memories chosen for the question; "
    "summary, synopsis). [bold]score[/] ranks the candidates of one question (the best is 1). "
    "[bold]sim[/] is the cosine similarity of its meaning to the question (-1 to 1), [bold]kw[/] "
    "the share of the question's keywords it contains (0 to 1); '-' where not measured. "
    "[bold]tok[/] is what it costs of the budget. Context.explain() prints the same."
)

CONFIG = {"memory": {"buffer": {"size": 6, "summary_batch": 3}}}


def run_demo(db: str | None = None, max_tokens: int = 500, console: Console | None = None) -> None:
    """Import the sample conversation and show every tier and the explained context."""
    from tiermem.memory import Memory

    console = console or Console()
    folder = None if db else tempfile.TemporaryDirectory(prefix="tiermem-demo-")
    path = str(Path(folder.name) / "demo.db") if folder is not None else str(db)
    console.print(
        Panel.fit(
            "[bold]tiermem demo[/]: one user, three conversations over two weeks in session s1, "
            f"on the embedded default (SQLite at {path}, local MiniLM embeddings, offline "
            "summaries)."
        )
    )
    try:
        with Memory(path, config=CONFIG) as memory:
            _import(memory, console)
            _show_buffer(memory, console)
            _show_store(memory, console)
            console.print(LEGEND, highlight=False)
            for question in QUESTIONS:
                _show_context(memory, question, max_tokens, console)
        console.print(_next_step(db), highlight=False)
    finally:
        if folder is not None:
            folder.cleanup()


def _next_step(db: str | None) -> str:
    """What to run next: serve this database if it is kept, else how to keep one."""
    serve = "puts a memory behind an HTTP API, MCP at /mcp and an inspector at /ui"
    extra = "pip install 'tiermem\\[server]'; docs/server.md"
    if db is not None:
        return f"Next: [bold]tiermem serve --db {escape(db)}[/] {serve} ({extra})."
    return (
        "The demo's database was temporary and is deleted now; "
        "[bold]tiermem demo --db demo.db[/] keeps it. "
        f"Next: [bold]tiermem serve --db demo.db[/] {serve} ({extra})."
    )


def _import(memory: Any, console: Console) -> None:
    with console.status("loading the local embedding model..."):
        memory.search("warm up", USER, k=1)  # the first query loads the model
    held = sum(s.messages for s in memory.sessions(USER) if s.session_id == "s1")
    if held:  # a --db kept from an earlier run: show it, do not add the conversation twice
        console.print(
            f"{escape(str(memory.location))} already holds the demo's conversation ({held} "
            "messages): shown as it is, not imported again.",
            highlight=False,
        )
        return
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
        f"Imported {added} messages of 3 conversations and remembered {len(FACTS)} facts in "
        f"{appended * 1000:.0f} ms (facts are embedded at once; messages off the hot path, "
        f"all archived after {time.perf_counter() - start:.1f} s)."
    )


def _show_buffer(memory: Any, console: Console) -> None:
    """The session's newest messages and the running summary of the older ones, read
    from the transcript as every process sharing the store reads them."""
    size = memory.config.memory.buffer.size
    recent = memory.recent(USER, "s1", limit=size)
    total = sum(s.messages for s in memory.sessions(USER) if s.session_id == "s1")
    table = Table(
        Column("who", no_wrap=True),
        Column("content", no_wrap=True, overflow="ellipsis", ratio=1),
        title=f"Buffer: the {len(recent)} most recent of {total} messages",
        box=box.SIMPLE,
        expand=True,
    )
    for message in recent:
        table.add_row(message.name or message.role, message.text)
    console.print(table)
    summary = memory.session_summary(USER, "s1")
    title = f"Running summary of the {total - len(recent)} older messages"
    console.print(Panel(summary or "-", title=title))


def _show_store(memory: Any, console: Console) -> None:
    stats = memory.stats(USER)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(stats.by_type.items()))
    console.print(f"Long-term store: {stats.count} memories ({kinds}) - nothing said is lost.")
    synopsis = memory.synopsis(USER)
    console.print(Panel(synopsis.render() or "-", title="User synopsis (offline, cached)"))


def _show_context(memory: Any, question: str, max_tokens: int, console: Console) -> None:
    """The context of ``question``, one line per item (``Context.explain()`` in a table
    that fits the terminal: long contents end in an ellipsis instead of wrapping)."""
    start = time.perf_counter()
    context = memory.get_context(question, USER, "s1", max_tokens=max_tokens)
    took = (time.perf_counter() - start) * 1000
    console.print(
        f"\n[bold]get_context[/]({escape(repr(question))}, max_tokens={max_tokens}): "
        f"{context.total_tokens}/{max_tokens} tokens in {took:.0f} ms",
        highlight=False,
    )
    table = Table(
        "section",
        Column("score", justify="right"),
        Column("sim", justify="right"),
        Column("kw", justify="right"),
        Column("tok", justify="right"),
        Column("content", no_wrap=True, overflow="ellipsis", ratio=1),
        box=box.SIMPLE,
        expand=True,
    )
    for item in context.items:
        table.add_row(
            item.section,
            f"{item.score:.2f}",
            "-" if item.similarity is None else f"{item.similarity:.2f}",
            "-" if item.keywords is None else f"{item.keywords:.2f}",
            str(item.tokens),
            escape(item.content),
        )
    console.print(table)
