"""Append latency of BufferMemory with an LLM summarizer whose endpoint takes 500 ms per call.

Three buffers of the same size receive the same messages:

* no summarizer: the floor;
* no summarizer, evicted messages kept: the floor plus the cost of holding on to what
  left the window (as an archive does; a summarizer that is behind must do the same);
* LLM summarizer, background (tiermem's default): evicted batches are queued and
  summarized by a worker; an append never waits on the LLM;
* LLM summarizer, sync mode: the append that completes a batch waits for the LLM
  (what a blocking design such as tinygent's does on every prune).

The LLM is the test suite's fake OpenAI server (tests/fakeserver.py) on 127.0.0.1,
answering every chat completion after ``--delay`` seconds.

Run: python benchmarks/summarize_latency.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from _common import nearest_rank, reproduce_command, rich_table, write_json
from tiermem.buffer.memory import BufferMemory
from tiermem.llm import OpenAIModel
from tiermem.summaries.summarize import MemorySummarizer
from tiermem.summaries.worker import SummaryPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakeserver import FakeServer

RESULTS = Path(__file__).parent / "results" / "summarize_latency.json"


def texts(n: int) -> list[tuple[str, str]]:
    """Alternating user / assistant turns of everyday length."""
    return [
        ("user" if i % 2 == 0 else "assistant", f"Turn {i}: I moved to Lisbon in {2000 + i % 25}.")
        for i in range(n)
    ]


def time_appends(buffer: BufferMemory, turns: list[tuple[str, str]]) -> list[float]:
    """Seconds taken by each ``add_message``."""
    clock = time.perf_counter
    samples = []
    for role, content in turns:
        start = clock()
        buffer.add_message(role, content)
        samples.append(clock() - start)
    return samples


def summarize_samples(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "appends": len(samples),
        "mean_us": 1e6 * statistics.fmean(samples),
        "p50_us": 1e6 * nearest_rank(ordered, 0.5),
        "p99_us": 1e6 * nearest_rank(ordered, 0.99),
        "max_us": 1e6 * ordered[-1],
        "total_s": sum(samples),
    }


def median_round(rounds: list[list[float]]) -> dict[str, float]:
    """Statistics of the round whose mean is the median (damps noise from other processes)."""
    stats = sorted((summarize_samples(r) for r in rounds), key=lambda row: row["mean_us"])
    return stats[len(stats) // 2]


def run(
    appends: int, sync_appends: int, buffer_size: int, delay: float, rounds: int
) -> dict[str, Any]:
    turns = texts(appends)
    with FakeServer(delay=delay) as server:

        def llm_buffer(mode: str) -> BufferMemory:
            llm = OpenAIModel("bench", base_url=server.openai_url, api_key="k", timeout=30)
            policy = SummaryPolicy(batch_size=min(10, buffer_size), mode=mode)  # type: ignore[arg-type]
            return BufferMemory(
                buffer_size=buffer_size, summarizer=MemorySummarizer(llm), summary_policy=policy
            )

        def keeping_buffer() -> BufferMemory:
            buffer = BufferMemory(buffer_size=buffer_size)
            buffer.add_eviction_consumer([].extend)
            return buffer

        time_appends(BufferMemory(buffer_size=buffer_size), turns[: min(1000, appends)])  # warm-up
        samples: dict[str, list[list[float]]] = {
            "no summarizer": [],
            "no summarizer, evicted messages kept": [],
            "LLM summarizer, background (default)": [],
        }
        calls = queued = 0
        for _ in range(rounds):
            samples["no summarizer"].append(
                time_appends(BufferMemory(buffer_size=buffer_size), turns)
            )
            samples["no summarizer, evicted messages kept"].append(
                time_appends(keeping_buffer(), turns)
            )
            background = llm_buffer("background")
            before = len(server.requests)
            samples["LLM summarizer, background (default)"].append(time_appends(background, turns))
            assert background.summarization is not None
            queued = background.summarization.pending_messages
            calls = len(server.requests) - before
            background.clear()  # drop the backlog; only the batch in flight finishes
            background.flush(timeout=60)
        rows = {name: median_round(r) for name, r in samples.items()}
        rows["LLM summarizer, sync mode"] = summarize_samples(
            time_appends(llm_buffer("sync"), turns[:sync_appends])
        )
    base = rows["no summarizer"]
    for row in rows.values():
        row["mean_ratio"] = row["mean_us"] / base["mean_us"]
        row["p50_ratio"] = row["p50_us"] / base["p50_us"]
        row["p99_ratio"] = row["p99_us"] / base["p99_us"]
    return {
        "appends": appends,
        "sync_appends": sync_appends,
        "buffer_size": buffer_size,
        "llm_delay_s": delay,
        "rounds": rounds,
        "background_llm_calls_during_run": calls,
        "background_pending_messages_at_end": queued,
        "rows": rows,
    }


def report(result: dict[str, Any], command: str) -> None:
    console = Console(width=max(Console().width, 110))
    table = rich_table(
        f"BufferMemory.add_message latency, buffer_size={result['buffer_size']}, "
        f"LLM endpoint {result['llm_delay_s'] * 1000:.0f} ms per call",
        ("buffer", "appends", "mean µs", "p50 µs", "p99 µs", "max µs", "mean", "p50", "p99"),
    )
    for name, row in result["rows"].items():
        table.add_row(
            name,
            f"{row['appends']:.0f}",
            f"{row['mean_us']:.2f}",
            f"{row['p50_us']:.2f}",
            f"{row['p99_us']:.2f}",
            f"{row['max_us']:.0f}",
            f"{row['mean_ratio']:.2f}x",
            f"{row['p50_ratio']:.2f}x",
            f"{row['p99_ratio']:.2f}x",
        )
    console.print(table)
    console.print(
        f"background: {result['background_llm_calls_during_run']} LLM calls answered during the "
        f"run, {result['background_pending_messages_at_end']} evicted messages still queued "
        "(summarized later, or by the offline fallback when the queue exceeds max_pending)."
    )
    console.print(
        f"ratios are against 'no summarizer'; median of {result['rounds']} rounds "
        "(sync mode: one round)."
    )
    console.print(f"reproduce: {command}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20_000, help="messages appended")
    parser.add_argument(
        "--sync-appends", type=int, default=80, help="appends in sync mode (3 batches)"
    )
    parser.add_argument("--buffer-size", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per LLM call")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per buffer (median kept)")
    parser.add_argument(
        "--quick", action="store_true", help="2,000 appends, one sync batch, 100 ms LLM"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON results file")
    args = parser.parse_args(argv)
    if args.quick:
        args.appends, args.sync_appends, args.delay = 2_000, args.buffer_size + 10, 0.1
        args.rounds = 1
    if min(args.appends, args.sync_appends, args.buffer_size, args.rounds) < 1 or args.delay < 0:
        parser.error(
            "--appends, --sync-appends, --buffer-size, --rounds must be >= 1, --delay >= 0"
        )
    result = run(args.appends, args.sync_appends, args.buffer_size, args.delay, args.rounds)
    command = reproduce_command(__file__, argv)
    result["command"] = command
    write_json(args.out, result)
    report(result, command)


if __name__ == "__main__":
    main()
