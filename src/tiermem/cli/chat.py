"""``tiermem chat``: talk to the configured chat model, with tiermem memory, from a shell.

Reads one message per line from standard input and prints each reply. The conversation
goes through an :class:`~tiermem.agent.Agent` backed by a :class:`~tiermem.Memory`
(SQLite file, local embeddings), or only a buffer with ``--buffer-only``.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from tiermem.errors import ProviderError

NO_MODEL = """No chat model is configured, so there is nothing to chat with.
Configure one in a tiermem YAML file and pass it with --config:

  llm:
    models:
      - chat: openai/gpt-4o-mini        # or anthropic/claude-3-5-haiku-latest
    api_key: ${OPENAI_API_KEY}          # or set OPENAI_API_KEY / ANTHROPIC_API_KEY
    # base_url: http://localhost:11434/v1   # Ollama, vLLM, llama.cpp server...

or name the model directly: tiermem chat --model openai/gpt-4o-mini"""

QUIT = frozenset({"exit", "quit", ":q"})


def add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``tiermem chat`` (for the CLI's subparser)."""
    parser.add_argument("--config", help="tiermem YAML configuration file")
    parser.add_argument("--model", help="chat model, e.g. openai/gpt-4o-mini (overrides config)")
    parser.add_argument("--user", default="default", help="user id of the conversation")
    parser.add_argument("--session", default=None, help="session id of the conversation")
    parser.add_argument("--system", default=None, help="system message of the agent")
    parser.add_argument("--db", default=None, help="SQLite file of the long-term memory")
    parser.add_argument(
        "--buffer-only",
        action="store_true",
        help="keep the conversation in a buffer only (no store, no embedding model)",
    )


def run_chat(args: argparse.Namespace, stdin: IO[str] | None = None, console: Any = None) -> int:
    """Run ``tiermem chat``; returns the exit code (2 when no chat model is configured)."""
    from rich.console import Console

    from tiermem.agent import Agent
    from tiermem.config.model import TiermemConfig
    from tiermem.llm import get_llm

    out = console or Console()
    config = TiermemConfig.load(args.config)
    model = args.model or config.chat_model
    if not model:
        # soft_wrap: a narrow terminal wraps the YAML as it shows it, rich adds no line break
        Console(stderr=True).print(NO_MODEL, markup=False, highlight=False, soft_wrap=True)
        return 2
    llm = get_llm(model, **config.llm.provider_options())
    memory: Any = None
    try:
        agent = _agent(Agent, llm, args, config)
        memory = agent.memory if not args.buffer_only else None
        for line in stdin or sys.stdin:
            text = line.strip()
            if not text:
                continue
            if text.lower() in QUIT:
                break
            try:
                reply = agent.chat(text)
            except ProviderError as exc:
                out.print(f"[bold red]error:[/] {exc}")
                continue
            out.print(f"[bold cyan]{agent.name}:[/] ", end="")
            out.print(reply, markup=False, highlight=False)
    finally:
        if memory is not None:
            memory.close()
        llm.close()
    return 0


def _agent(agent_cls: Any, llm: Any, args: argparse.Namespace, config: Any) -> Any:
    if args.buffer_only:
        from tiermem.buffer.memory import BufferMemory

        buffer = BufferMemory(buffer_size=config.memory.buffer.size)
        return agent_cls("assistant", llm, args.system, buffer_memory=buffer)
    from tiermem.embeddings import get_embedder
    from tiermem.memory import Memory

    name = config.embedding_model
    options = {} if name.startswith("local/") else config.llm.provider_options()
    memory = Memory(args.db, embedder=get_embedder(name, **options))
    return agent_cls(
        "assistant", llm, args.system, memory=memory, user_id=args.user, session_id=args.session
    )


__all__ = ["NO_MODEL", "add_chat_arguments", "run_chat"]
