"""The ``tiermem`` command: the library's operations from a shell, with rich output.

Every command that touches memory takes ``--config PATH`` (a YAML file, see
docs/configuration.md) and ``--db PATH`` (the SQLite file of the embedded store); the
commands mirror :class:`tiermem.Memory` one to one. A memory has one id everywhere: the
long-term store's UUID, which ``add`` and ``remember`` print, ``search`` shows (whole, or
the shortest prefix of at least 8 characters that no other memory of the user shares) and
``forget --id`` takes (whole or a unique prefix). The library never imports this package.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tiermem._version import __version__
from tiermem.cli.commands import (
    Command,
    cmd_add,
    cmd_chat,
    cmd_config_check,
    cmd_context,
    cmd_copy,
    cmd_demo,
    cmd_doctor,
    cmd_export,
    cmd_forget,
    cmd_import,
    cmd_keys,
    cmd_mcp,
    cmd_migrate,
    cmd_remember,
    cmd_search,
    cmd_serve,
    cmd_stats,
    cmd_synopsis,
    make_console,
)
from tiermem.errors import InvalidSizeError, TiermemError


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Command,
    help: str,
    *,
    memory: bool = True,
) -> argparse.ArgumentParser:
    """Add a subcommand; memory commands get ``--config``, ``--db`` and ``--user``."""
    parser = commands.add_parser(name, help=help)
    if memory:
        parser.add_argument("--config", type=Path, help="YAML configuration")
        parser.add_argument("--db", help="SQLite file of the embedded store")
        parser.add_argument("--user", required=True, help="whose memory (user_id)")
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="tiermem", description="Tiered memory for LLM agents.")
    parser.add_argument("--version", action="version", version=f"tiermem {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = _command(
        commands, "demo", cmd_demo, "walk through the tiers on a sample conversation", memory=False
    )
    demo.add_argument("--db", help="SQLite file to use (default: a temporary one)")
    demo.add_argument("--max-tokens", type=int, default=500, help="context budget to show")

    add = _command(commands, "add", cmd_add, "add one message to a conversation")
    add.add_argument("text")
    add.add_argument("--role", default="user")
    add.add_argument("--name", help="speaker name")
    add.add_argument("--session")

    imp = _command(
        commands, "import", cmd_import, "import a JSON or JSONL history, or restore an archive"
    )
    imp.add_argument("file", type=Path)
    imp.add_argument("--session")

    export = _command(commands, "export", cmd_export, "write a user's archive (JSON Lines)")
    export.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    export.add_argument("--vectors", action="store_true", help="include the embeddings")

    remember = _command(commands, "remember", cmd_remember, "store a fact or preference")
    remember.add_argument("text")
    remember.add_argument("--type", default="fact", help="fact, preference, context, ...")
    remember.add_argument("--importance", type=float, default=0.5)

    search = _command(commands, "search", cmd_search, "search long-term memories")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=10)
    search.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid")
    search.add_argument(
        "--min-score",
        type=float,
        default=0.0,
        help="leave out hits that score less (relevance, 0 to 1; 0.2 is a good start)",
    )
    search.add_argument(
        "--json", action="store_true", help="print the hits as JSON, as the REST API writes them"
    )

    context = _command(commands, "context", cmd_context, "build and explain a prompt's context")
    context.add_argument("query")
    context.add_argument("--session")
    context.add_argument("--max-tokens", type=int)
    context.add_argument("--json", action="store_true", help="print the messages as JSON")

    _command(commands, "synopsis", cmd_synopsis, "show what is known about a user")
    forget = _command(commands, "forget", cmd_forget, "delete a memory or a whole user")
    forget.add_argument("--id", help="the memory to delete: its id, or a unique prefix of it")
    forget.add_argument("--all", action="store_true", help="erase everything of the user")
    _command(commands, "stats", cmd_stats, "figures about a user's memories")
    from tiermem.cli.listing import LISTINGS

    for name, handler, help_text, add_arguments in LISTINGS:  # users, sessions, memories
        add_arguments(_command(commands, name, handler, help_text, memory=False))

    config = commands.add_parser("config", help="configuration tools")
    checks = config.add_subparsers(dest="config_command", metavar="COMMAND")
    check = _command(checks, "check", cmd_config_check, "validate a YAML file", memory=False)
    check.add_argument("path", type=Path)
    check.add_argument("--secrets-file", type=Path)

    migrate = _command(
        commands,
        "migrate-embeddings",
        cmd_migrate,
        "re-embed memories_{from} into memories_{to}",
        memory=False,
    )
    migrate.add_argument("--from-dim", type=int, required=True)
    migrate.add_argument("--to-dim", type=int, required=True)
    migrate.add_argument("--to-model", required=True, help="e.g. local/all-MiniLM-L6-v2")
    migrate.add_argument(
        "--connection-string", required=True, help="postgresql://... or a SQLite file path"
    )
    migrate.add_argument("--batch-size", type=int, default=256)

    copy = _command(
        commands, "copy", cmd_copy, "copy a whole store into another, verified", memory=False
    )
    copy.add_argument("--from", dest="source", required=True, help="SQLite file or postgresql://")
    copy.add_argument("--to", dest="destination", required=True, help="SQLite file or URL")
    copy.add_argument("--dimension", type=int, help="the memories_N table to copy, if several")
    copy.add_argument("--merge", action="store_true", help="copy into a store of other data")
    copy.add_argument("--batch-size", type=int, default=500, help="rows per transaction")
    copy.add_argument(
        "--partitions",
        type=int,
        help="a new PostgreSQL destination's partitions by user (default 16; 0: plain tables)",
    )

    serve = _command(
        commands, "serve", cmd_serve, "serve the HTTP API (tiermem[server])", memory=False
    )
    serve.add_argument("--config", help="YAML configuration (PostgreSQL, Redis...)")
    serve.add_argument("--db", help="SQLite file of the embedded store")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--workers", type=int, default=1, help="worker processes")

    mcp = _command(commands, "mcp", cmd_mcp, "serve a user's memory to an MCP client (stdio)")
    mcp.add_argument(
        "--url", help="use a tiermem server (key in TIERMEM_API_KEY) instead of a local store"
    )

    keys = commands.add_parser("keys", help="API keys of the server (stored hashed)")
    keys_commands = keys.add_subparsers(dest="keys_command", metavar="COMMAND", required=True)
    for name, help_text in (
        ("create", "create a key of a tenant"),
        ("list", "list keys"),
        ("revoke", "revoke a key"),
    ):
        sub = _command(keys_commands, name, cmd_keys, help_text, memory=False)
        sub.add_argument("--config", type=Path, help="YAML configuration")
        sub.add_argument("--db", help="SQLite file of the embedded store")
        if name == "revoke":
            sub.add_argument("id", help="the key's id (tiermem keys list)")
        else:
            sub.add_argument("--tenant", required=name == "create", help="tenant name")
        if name == "create":
            sub.add_argument("--name", help="a label for the key")

    from tiermem.cli.worker import add_worker_arguments, cmd_worker

    worker = _command(
        commands,
        "worker",
        cmd_worker,
        "run the store's claimed work (embedding, summaries, facts) in this process",
        memory=False,
    )
    add_worker_arguments(worker)

    doctor = _command(
        commands, "doctor", cmd_doctor, "check the setup and say what to fix", memory=False
    )
    doctor.add_argument("--config", type=Path, help="YAML configuration")
    doctor.add_argument("--db", help="SQLite file of the embedded store")

    from tiermem.cli.chat import add_chat_arguments

    chat = _command(commands, "chat", cmd_chat, "chat with the configured model", memory=False)
    add_chat_arguments(chat)
    return parser


# Numeric options: their range and an example, checked before a command loads anything.
RANGES: dict[str, tuple[float, float | None, str]] = {
    "max_tokens": (1, None, "2000"),
    "k": (1, None, "10"),
    "importance": (0.0, 1.0, "0.5"),
    "min_score": (0.0, 1.0, "0.2"),
    "from_dim": (1, None, "384"),
    "to_dim": (1, None, "768"),
    "batch_size": (1, None, "256"),
    "port": (1, 65535, "9100"),
    "grace": (0.0, None, "10"),
    "idle": (0.01, None, "0.5"),
    "dimension": (1, None, "384"),
}


def check_arguments(args: argparse.Namespace) -> None:
    """Raise InvalidSizeError for a numeric option out of its range (the library would
    refuse it too, but only after loading the model and the store)."""
    for name, (low, high, example) in RANGES.items():
        value = getattr(args, name, None)
        if value is None or (low <= value and (high is None or value <= high)):
            continue
        option = f"-{name}" if len(name) == 1 else f"--{name.replace('_', '-')}"
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InvalidSizeError(
            option, f"must be {allowed}, got {value}", f"e.g. {option} {example}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tiermem`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        check_arguments(args)
        return handler(args)
    except (TiermemError, OSError) as exc:
        from rich.markup import escape

        make_console(stderr=True).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 1
