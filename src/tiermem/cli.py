"""The ``tiermem`` command: the library's operations from a shell, with rich output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tiermem import __version__
from tiermem.errors import TiermemError

Command = Callable[[argparse.Namespace], int]


def _cmd_demo(args: argparse.Namespace) -> int:
    from tiermem.demo import run_demo

    run_demo(buffer_size=args.buffer_size, max_tokens=args.max_tokens)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="tiermem", description="Tiered memory for LLM agents.")
    parser.add_argument("--version", action="version", version=f"tiermem {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="walk through the memory tiers on a sample conversation"
    )
    demo.add_argument("--buffer-size", type=int, default=5, help="messages the buffer keeps")
    demo.add_argument("--max-tokens", type=int, default=120, help="context budget to show")
    demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tiermem`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except TiermemError as exc:
        from rich.console import Console

        Console(stderr=True).print(f"[bold red]error:[/] {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
