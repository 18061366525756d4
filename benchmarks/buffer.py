"""Short-term buffer benchmark: tiermem beside promptise, LangChain and LlamaIndex.

Measures, in one run and on the same texts (``f"message {i} about topic {i % 17}"``,
roles alternating user/assistant):

- µs per append at 100 / 1k / 10k / 100k messages appended (fresh buffer each time);
- µs to read the last 50 messages and to build the formatted context handed to an
  LLM, at two history lengths (a read that costs O(history) shows up as a ratio);
- ms to serialize 1,000 messages to JSON and to restore them;
- peak traced memory (tracemalloc) while appending the largest size;
- µs per ``Memory.add`` (the facade most users call: validation, the session's buffer and
  the queue to the long-term store, with the embedded default), beside ``BufferMemory``'s
  append: the README quotes each with its own figure.

Each peer runs in its own virtualenv (see ``peers.py``) and tiermem in a fresh
interpreter on this checkout's ``src``, so every subject starts from the same state.

    python benchmarks/buffer.py                 # full run, all peers
    python benchmarks/buffer.py --quick         # seconds: tiny sizes
    python benchmarks/buffer.py --peers none    # tiermem only, no install

Writes benchmarks/results/buffer.json (``--out`` to change). Everything above the
``main`` section uses only the standard library: this file is also loaded inside
the peers' virtualenvs to run the measurements there.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import platform
import signal
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from _common import reproduce_command, write_json

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WINDOW = 50  # messages kept by the count-window buffers, and read by "last 50"
TOKEN_WINDOW = 2000  # tokens kept by the token-window buffers and context builders
T = TypeVar("T")


def text_of(i: int) -> str:
    """The i-th message text, the same for every subject."""
    return f"message {i} about topic {i % 17}"


def role_of(i: int) -> str:
    """Roles alternate, starting with the user."""
    return "user" if i % 2 == 0 else "assistant"


# --------------------------------------------------------------------------------------
# Subjects: one class per library usage measured. Each imports its library lazily, so
# this module loads in any virtualenv; only the subject being measured must be present.
# --------------------------------------------------------------------------------------


class Subject:
    """How one library is used for each measured operation.

    ``windowed`` is the buffer as an application would configure it (a 50-message
    or 2,000-token window where the library has one); ``archive`` keeps at least
    ``n`` messages, for serialization.
    """

    label = ""
    dist = ""  # distribution whose version is reported
    peer: str | None = None  # virtualenv it runs in; None for tiermem

    def windowed(self) -> Any:
        raise NotImplementedError

    def archive(self, n: int) -> Any:
        return self.windowed()

    def fill(self, buf: Any, roles: Sequence[str], texts: Sequence[str]) -> None:
        raise NotImplementedError

    def last50(self, buf: Any) -> list[Any]:
        raise NotImplementedError

    def context(self, buf: Any) -> list[Any]:
        raise NotImplementedError

    def dump(self, buf: Any) -> str:
        raise NotImplementedError

    def load(self, data: str) -> Any:
        raise NotImplementedError

    def count(self, buf: Any) -> int:
        raise NotImplementedError


class _DictBuffer(Subject):
    """promptise's ConversationBuffer API (also tiermem's drop-in of it)."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls

    def windowed(self) -> Any:
        return self.cls(max_messages=WINDOW)

    def archive(self, n: int) -> Any:
        return self.cls(max_messages=n)

    def fill(self, buf: Any, roles: Sequence[str], texts: Sequence[str]) -> None:
        for role, text in zip(roles, texts, strict=True):
            buf.append({"role": role, "content": text})

    def last50(self, buf: Any) -> list[Any]:
        return list(buf.get_messages()[-WINDOW:])

    def context(self, buf: Any) -> list[Any]:
        return list(buf.get_messages())

    def dump(self, buf: Any) -> str:
        return json.dumps(buf.to_dict())

    def load(self, data: str) -> Any:
        return self.cls.from_dict(json.loads(data))

    def count(self, buf: Any) -> int:
        return len(buf)


class Promptise(_DictBuffer):
    label = "promptise ConversationBuffer(50)"
    dist = "promptise"
    peer = "promptise"

    def __init__(self) -> None:
        from promptise.runtime.conversation import ConversationBuffer

        super().__init__(ConversationBuffer)


class TiermemConversation(_DictBuffer):
    label = "tiermem ConversationBuffer(50)"
    dist = "tiermem"

    def __init__(self) -> None:
        from tiermem.buffer.memory import ConversationBuffer

        super().__init__(ConversationBuffer)


class _TiermemMemory(Subject):
    """tiermem BufferMemory: add_message with its token count."""

    dist = "tiermem"

    def __init__(self) -> None:
        from tiermem.buffer.memory import BufferMemory

        self.cls = BufferMemory

    def archive(self, n: int) -> Any:
        return self.cls(buffer_size=n)

    def fill(self, buf: Any, roles: Sequence[str], texts: Sequence[str]) -> None:
        for role, text in zip(roles, texts, strict=True):
            buf.add_message(role, text)

    def last50(self, buf: Any) -> list[Any]:
        return list(buf.get_recent(WINDOW))

    def context(self, buf: Any) -> list[Any]:
        return list(buf.get_formatted_messages())

    def dump(self, buf: Any) -> str:
        return str(buf.to_json())

    def load(self, data: str) -> Any:
        return self.cls.from_json(data)

    def count(self, buf: Any) -> int:
        return len(buf.get_messages())


class TiermemMemoryCount(_TiermemMemory):
    label = "tiermem BufferMemory(50)"

    def windowed(self) -> Any:
        return self.cls(buffer_size=WINDOW)


class TiermemMemoryTokens(_TiermemMemory):
    label = f"tiermem BufferMemory({TOKEN_WINDOW} tokens)"

    def windowed(self) -> Any:
        return self.cls(buffer_size=None, max_tokens=TOKEN_WINDOW)


class LangChain(Subject):
    """InMemoryChatMessageHistory holds everything; trim_messages makes the window."""

    label = "LangChain InMemoryChatMessageHistory + trim_messages"
    dist = "langchain-core"
    peer = "langchain"

    def __init__(self) -> None:
        import warnings

        from langchain_core import messages
        from langchain_core.chat_history import InMemoryChatMessageHistory

        warnings.filterwarnings("ignore")  # InMemoryChatMessageHistory is deprecated in 1.6.4
        self.history_cls = InMemoryChatMessageHistory
        self.m = messages

    def windowed(self) -> Any:
        return self.history_cls()

    def fill(self, buf: Any, roles: Sequence[str], texts: Sequence[str]) -> None:
        human, ai = self.m.HumanMessage, self.m.AIMessage
        for role, text in zip(roles, texts, strict=True):
            buf.add_message(human(content=text) if role == "user" else ai(content=text))

    def last50(self, buf: Any) -> list[Any]:
        return list(buf.messages[-WINDOW:])

    def context(self, buf: Any) -> list[Any]:
        return list(
            self.m.trim_messages(
                buf.messages,
                max_tokens=TOKEN_WINDOW,
                token_counter=self.m.utils.count_tokens_approximately,
                strategy="last",
                start_on="human",
            )
        )

    def dump(self, buf: Any) -> str:
        return json.dumps(self.m.messages_to_dict(buf.messages))

    def load(self, data: str) -> Any:
        return self.history_cls(messages=self.m.messages_from_dict(json.loads(data)))

    def count(self, buf: Any) -> int:
        return len(buf.messages)


class LlamaIndex(Subject):
    """ChatMemoryBuffer keeps everything in its chat store; get() applies the token limit."""

    label = f"LlamaIndex ChatMemoryBuffer({TOKEN_WINDOW} tokens)"
    dist = "llama-index-core"
    peer = "llamaindex"

    def __init__(self) -> None:
        from llama_index.core.llms import ChatMessage
        from llama_index.core.memory import ChatMemoryBuffer

        self.cls = ChatMemoryBuffer
        self.message = ChatMessage

    def windowed(self) -> Any:
        return self.cls.from_defaults(token_limit=TOKEN_WINDOW)

    def fill(self, buf: Any, roles: Sequence[str], texts: Sequence[str]) -> None:
        message = self.message
        for role, text in zip(roles, texts, strict=True):
            buf.put(message(role=role, content=text))

    def last50(self, buf: Any) -> list[Any]:
        return list(buf.get_all()[-WINDOW:])

    def context(self, buf: Any) -> list[Any]:
        return list(buf.get())

    def dump(self, buf: Any) -> str:
        return str(buf.to_string())

    def load(self, data: str) -> Any:
        return self.cls.from_string(data)

    def count(self, buf: Any) -> int:
        return len(buf.get_all())


SUBJECTS: dict[str, type[Subject]] = {
    "promptise": Promptise,
    "tiermem-conversation": TiermemConversation,
    "tiermem-count": TiermemMemoryCount,
    "tiermem-tokens": TiermemMemoryTokens,
    "langchain": LangChain,
    "llamaindex": LlamaIndex,
}
TIERMEM_KEYS = ("tiermem-conversation", "tiermem-count", "tiermem-tokens")
PEER_KEYS = ("promptise", "langchain", "llamaindex")


# --------------------------------------------------------------------------------------
# Measurement (runs inside the subject's interpreter)
# --------------------------------------------------------------------------------------


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so no library's ``except Exception`` eats it."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _Timeout


def time_appends(subject: Subject, n: int, samples: int, batch_appends: int) -> dict[str, Any]:
    """µs per append of ``n`` messages into fresh windowed buffers: best and median sample.

    A sample fills ``max(1, batch_appends // n)`` fresh buffers (made before the clock
    starts) so that every sample, whatever ``n``, spans about the same number of
    appends: the garbage collector's periodic passes and a cold cache then weigh the
    same on 100 messages as on 100,000, and the growth ratio compares like with like.
    """
    roles = [role_of(i) for i in range(n)]
    texts = [text_of(i) for i in range(n)]
    per_sample = max(1, batch_appends // n)
    subject.fill(subject.windowed(), roles, texts)  # warm-up, not timed
    results = []
    for _ in range(samples):
        buffers = [subject.windowed() for _ in range(per_sample)]
        gc.collect()
        start = time.perf_counter_ns()
        for buf in buffers:
            subject.fill(buf, roles, texts)
        results.append((time.perf_counter_ns() - start) / (n * per_sample) / 1000)
        del buffers
    return {
        "best": min(results),
        "median": statistics.median(results),
        "samples": samples,
        "buffers_per_sample": per_sample,
    }


def time_call(
    fn: Callable[[], T], timeout: float, rounds: int
) -> tuple[dict[str, float], T | None]:
    """µs per call of ``fn`` (best and median of ``rounds`` batches of ~10 ms), first result.

    The first call is timed alone under a ``timeout`` alarm, so a quadratic read
    on a long history is reported as a timeout (and no result) instead of stalling
    the run. A first call slower than 0.2 s is reported as is.
    """
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        start = time.perf_counter_ns()
        result = fn()
        once = (time.perf_counter_ns() - start) / 1000
    except _Timeout:
        return {"timeout_s": timeout}, None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if once > 200_000:
        return {"best": once, "median": once, "calls": 1}, result
    number = max(1, int(10_000 / max(once, 0.01)))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter_ns() - start) / number / 1000)
    stats = {"best": min(samples), "median": statistics.median(samples), "calls": number * rounds}
    return stats, result


def _content(item: Any) -> Any:
    return item["content"] if isinstance(item, dict) else item.content


def warm_up_reads(subject: Subject) -> None:
    """Call each read once on a short history, so lazy imports and first-call setup
    inside a library are not charged to the first timed read (some take 0.4 s)."""
    buf = subject.windowed()
    subject.fill(buf, [role_of(i) for i in range(100)], [text_of(i) for i in range(100)])
    subject.last50(buf)
    subject.context(buf)


def time_reads(subject: Subject, history: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """Last-50 and formatted-context reads after ``history`` appends."""
    buf = subject.windowed()
    subject.fill(buf, [role_of(i) for i in range(history)], [text_of(i) for i in range(history)])
    out: dict[str, Any] = {}
    for name, read in (("last50", subject.last50), ("context", subject.context)):
        stats, result = time_call(partial(read, buf), cfg["read_timeout"], cfg["rounds"])
        out[name] = stats
        if result is not None:
            out[name]["messages"] = len(result)
            out[name]["newest_ok"] = bool(result) and _content(result[-1]) == text_of(history - 1)
    return out


def time_serialization(subject: Subject, n: int, rounds: int) -> dict[str, Any]:
    """Dump ``n`` messages to a JSON string and restore them; checks the round trip."""
    buf = subject.archive(n)
    subject.fill(buf, [role_of(i) for i in range(n)], [text_of(i) for i in range(n)])
    dump, data = time_call(partial(subject.dump, buf), 600, rounds)
    load, restored = time_call(partial(subject.load, data or ""), 600, rounds)
    return {
        "dump": dump,
        "load": load,
        "bytes": len(data or ""),
        "restored": subject.count(restored) if restored is not None else 0,
    }


def peak_memory(subject: Subject, n: int) -> dict[str, int]:
    """Peak and retained traced bytes while appending ``n`` messages (texts pre-built)."""
    roles = [role_of(i) for i in range(n)]
    texts = [text_of(i) for i in range(n)]
    gc.collect()
    tracemalloc.start()
    try:
        buf = subject.windowed()
        subject.fill(buf, roles, texts)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"peak_bytes": peak, "retained_bytes": current}


def _version(subject: Subject) -> str:
    try:
        return importlib.metadata.version(subject.dist)
    except importlib.metadata.PackageNotFoundError:
        module = sys.modules.get(subject.dist.replace("-", "_"))
        return str(getattr(module, "__version__", "unknown"))


def measure_subject(key: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Every measurement for one subject; an exception is reported, not raised."""
    try:
        subject = SUBJECTS[key]()
        appends = {
            str(n): time_appends(subject, n, cfg["samples"][str(n)], cfg["batch_appends"])
            for n in cfg["sizes"]
        }
        warm_up_reads(subject)
        return {
            "version": _version(subject),
            "append": appends,
            "reads": {str(h): time_reads(subject, h, cfg) for h in cfg["histories"]},
            "serialization": time_serialization(subject, cfg["serial_n"], cfg["rounds"]),
            "memory": peak_memory(subject, max(cfg["sizes"])),
        }
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def measure(keys: Sequence[str], cfg: dict[str, Any]) -> dict[str, Any]:
    """Measure several subjects in this interpreter (the entry point of the snippet)."""
    return {key: measure_subject(key, cfg) for key in keys}


def time_memory_add(n: int, samples: int) -> dict[str, Any]:
    """µs per ``Memory.add`` of ``n`` messages into one session (best and median sample),
    with the embedded default (SQLite file, local model) in a temporary folder; the archive
    embeds and writes in the background meanwhile, as in use."""
    import tempfile

    from tiermem import Memory

    with tempfile.TemporaryDirectory(prefix="tiermem-bench-") as folder:
        memory = Memory(str(Path(folder) / "bench.db"))
        try:
            memory.add("user", "warm up", "bench", "warm-up")
            results = []
            for sample in range(samples):
                start = time.perf_counter_ns()
                for i in range(n):
                    memory.add(role_of(i), text_of(i), "bench", f"session-{sample}")
                results.append((time.perf_counter_ns() - start) / n / 1000)
            memory.flush()  # the archive embeds and writes them all (not timed)
        finally:
            memory.close()
    return {"best": min(results), "median": statistics.median(results), "adds": n * samples}


MEMORY_ADD = "tiermem-memory-add"
MEMORY_ADD_SNIPPET = """
import importlib.util, sys
sys.path.insert(0, ARGS["dir"])
spec = importlib.util.spec_from_file_location("tiermem_bench_buffer", ARGS["file"])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
emit(mod.time_memory_add(ARGS["n"], ARGS["samples"]))
"""

# Loads this file by path inside a peer's virtualenv and runs ``measure`` there.
SNIPPET = """
import importlib.util, sys
sys.path.insert(0, ARGS["dir"])
spec = importlib.util.spec_from_file_location("tiermem_bench_buffer", ARGS["file"])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
emit(mod.measure(ARGS["keys"], ARGS["config"]))
"""


# --------------------------------------------------------------------------------------
# main: run every subject, print tables, write JSON
# --------------------------------------------------------------------------------------


def config(quick: bool, read_timeout: float) -> dict[str, Any]:
    """Sizes and repeat counts; ``quick`` keeps the whole run to seconds."""
    if quick:
        return {
            "sizes": [100, 1000],
            "histories": [300, 1000],
            "serial_n": 200,
            "rounds": 2,
            "samples": {"100": 5, "1000": 5},
            "batch_appends": 1000,
            "read_timeout": read_timeout,
        }
    return {
        "sizes": [100, 1_000, 10_000, 100_000],
        "histories": [1_000, 100_000],
        "serial_n": 1_000,
        "rounds": 5,
        # A sample spans >= 10,000 appends; fewer samples where one is 100,000.
        "samples": {"100": 30, "1000": 30, "10000": 30, "100000": 15},
        "batch_appends": 10_000,
        "read_timeout": read_timeout,
    }


def run_all(peer_names: Sequence[str], cfg: dict[str, Any], log: Callable[[str], None]) -> Any:
    """Results per subject key, peers first; unavailable peers carry their reason."""
    from peers import PeerError, PeerUnavailable, ensure_peer, run_python

    args: dict[str, Any] = {"dir": str(HERE), "file": str(Path(__file__).resolve()), "config": cfg}
    results: dict[str, Any] = {}
    for name in peer_names:
        try:
            python = ensure_peer(name, log=log)
            log(f"measuring {name} ...")
            results.update(run_python(python, SNIPPET, {**args, "keys": [name]}, timeout=1800))
        except PeerUnavailable as exc:
            results[name] = {"unavailable": str(exc)}
        except PeerError as exc:
            results[name] = {"error": str(exc)}
    log("measuring tiermem ...")
    try:
        out = run_python(
            sys.executable,
            SNIPPET,
            {**args, "keys": list(TIERMEM_KEYS)},
            pythonpath=[ROOT / "src"],
            timeout=1800,
        )
        results.update(out)
    except PeerError as exc:
        results.update({key: {"error": str(exc)} for key in TIERMEM_KEYS})
    log("measuring tiermem Memory.add ...")
    n, samples = (200, 3) if cfg["sizes"][-1] <= 1000 else (1000, 5)
    try:
        results[MEMORY_ADD] = run_python(
            sys.executable,
            MEMORY_ADD_SNIPPET,
            {**args, "n": n, "samples": samples},
            pythonpath=[ROOT / "src"],
            timeout=1800,
        )
    except PeerError as exc:
        results[MEMORY_ADD] = {"error": str(exc)}
    return results


def _best(cell: dict[str, Any] | None) -> float | None:
    return float(cell["best"]) if cell and "best" in cell else None


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def summarize(results: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """Per measured subject: ratios vs promptise, append growth, context growth, checks.

    ``append_growth`` is µs/append at the largest size over the smallest (1.0 = flat);
    ``context_growth`` is the context read at the longest history over the shortest
    (about 1.0 when it costs O(window), the history ratio when it costs O(history)).
    ``problems`` lists reads that missed the newest message and lossy round trips.
    """
    sizes, histories = [str(n) for n in cfg["sizes"]], [str(h) for h in cfg["histories"]]
    base = results.get("promptise", {})
    summary: dict[str, Any] = {}
    for key, res in results.items():
        if "append" not in res:
            continue
        appends = [_best(res["append"][n]) for n in sizes]
        contexts = [_best(res["reads"][h]["context"]) for h in histories]
        problems = [
            f"{read} @{h} did not end with the newest message"
            for h in histories
            for read in ("last50", "context")
            if "timeout_s" not in res["reads"][h][read] and not res["reads"][h][read]["newest_ok"]
        ]
        if res["serialization"]["restored"] != cfg["serial_n"]:
            problems.append(
                f"restored {res['serialization']['restored']} of {cfg['serial_n']} messages"
            )
        summary[key] = {
            "append_vs_promptise": {
                n: _ratio(a, _best(base.get("append", {}).get(n)))
                for n, a in zip(sizes, appends, strict=True)
            },
            "context_vs_promptise": {
                h: _ratio(c, _best(base.get("reads", {}).get(h, {}).get("context")))
                for h, c in zip(histories, contexts, strict=True)
            },
            "append_growth": _ratio(appends[-1], appends[0]),
            "context_growth": _ratio(contexts[-1], contexts[0]),
            "problems": problems,
        }
    return summary


def goal_lines(summary: dict[str, Any]) -> list[str]:
    """The issue's goals for tiermem's rows, each marked met, missed or n/a."""
    verdict = {None: "n/a", True: "[green]met[/green]", False: "[red]missed[/red]"}
    lines = []
    for key in TIERMEM_KEYS:
        if key not in summary:
            continue
        s = summary[key]
        ratios = [r for r in s["append_vs_promptise"].values() if r is not None]
        worst = max(ratios) if ratios else None
        checks = [
            ("append <= promptise", worst, 1.0),
            ("append flat within 10%", s["append_growth"], 1.10),
            ("context O(window), growth <= 1.5", s["context_growth"], 1.5),
        ]
        marks = [
            f"{name}: {verdict[None if v is None else v <= limit]} ({_fmt(v)})"
            for name, v, limit in checks
        ]
        marks += [f"[red]{problem}[/red]" for problem in s["problems"]]
        lines.append(f"{SUBJECTS[key].label}: " + "; ".join(marks))
    return lines


def _fmt(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def _us(cell: dict[str, Any]) -> str:
    if "timeout_s" in cell:
        return f"> {cell['timeout_s']:.0f} s"
    value = float(cell["best"])
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _ms(cell: dict[str, Any]) -> str:
    return f"> {cell['timeout_s']:.0f} s" if "timeout_s" in cell else f"{cell['best'] / 1000:.2f}"


def print_report(results: dict[str, Any], cfg: dict[str, Any], command: str) -> None:
    """Rich tables: appends and memory; reads and serialization; ratios vs promptise."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 160))
    sizes, histories = [str(n) for n in cfg["sizes"]], [str(h) for h in cfg["histories"]]
    summary = summarize(results, cfg)
    order = [k for k in (*PEER_KEYS, *TIERMEM_KEYS) if k in results]

    appends = Table(title="µs per append (best run) by messages appended; peak traced memory")
    reads = Table(
        title=f"µs per read (best) by history length; JSON round trip of {cfg['serial_n']:,}"
    )
    ratios = Table(title="ratio vs promptise ConversationBuffer (goal for append: <= 1.0)")
    for table in (appends, reads, ratios):
        table.add_column("subject")
    appends.add_column("version")
    for n in sizes:
        appends.add_column(f"{int(n):,}", justify="right")
        ratios.add_column(f"append {int(n):,}", justify="right")
    appends.add_column(f"{int(sizes[-1]):,} / {int(sizes[0]):,}", justify="right")
    appends.add_column(f"peak MiB at {int(sizes[-1]):,}", justify="right")
    for read in ("last 50", "context"):
        for h in histories:
            reads.add_column(f"{read} @{int(h):,}", justify="right")
    for h in histories:
        ratios.add_column(f"context @{int(h):,}", justify="right")
    for name in ("dump ms", "load ms", "JSON KiB"):
        reads.add_column(name, justify="right")

    notes: list[str] = []
    for key in order:
        res, label = results[key], SUBJECTS[key].label
        if key not in summary:
            status = "unavailable" if "unavailable" in res else "error"
            notes.append(f"[red]{label}: {status}[/red]: {res.get(status)}")
            appends.add_row(label, f"[red]{status}[/red]")
            reads.add_row(label, f"[red]{status}[/red]")
            continue
        s, ser = summary[key], res["serialization"]
        appends.add_row(
            label,
            res["version"],
            *[_us(res["append"][n]) for n in sizes],
            _fmt(s["append_growth"]),
            f"{res['memory']['peak_bytes'] / 2**20:.2f}",
        )
        reads.add_row(
            label,
            *[_us(res["reads"][h][read]) for read in ("last50", "context") for h in histories],
            _ms(ser["dump"]),
            _ms(ser["load"]),
            f"{ser['bytes'] / 1024:.0f}",
        )
        ratios.add_row(
            label,
            *[_fmt(r) for r in s["append_vs_promptise"].values()],
            *[_fmt(r) for r in s["context_vs_promptise"].values()],
        )
    console.print(appends, reads)
    if "promptise" in summary:
        console.print(ratios)
    for line in [*notes, *goal_lines(summary)]:
        console.print(line)
    added, appended = results.get(MEMORY_ADD, {}), results.get("tiermem-count", {}).get("append")
    if "best" in added:
        beside = f" (BufferMemory(50) append: {_us(appended[sizes[0]])} µs)" if appended else ""
        console.print(
            f"tiermem Memory.add, embedded default: {added['best']:.1f} µs per message best, "
            f"{added['median']:.1f} median over {added['adds']:,} adds{beside}"
        )
    elif added:
        console.print(f"[red]tiermem Memory.add: error[/red]: {added.get('error')}")
    console.print(f"reproduce: {command}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument(
        "--peers",
        default="all",
        help=f"comma-separated peers among {','.join(PEER_KEYS)}, 'all' or 'none' (default all)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "buffer.json")
    parser.add_argument(
        "--read-timeout", type=float, default=20.0, help="seconds one read may take (default 20)"
    )
    opts = parser.parse_args(argv)
    if opts.peers == "all":
        peer_names: list[str] = list(PEER_KEYS)
    elif opts.peers == "none":
        peer_names = []
    else:
        peer_names = [p.strip() for p in opts.peers.split(",") if p.strip()]
        unknown = sorted(set(peer_names) - set(PEER_KEYS))
        if unknown:
            parser.error(
                f"--peers: unknown {', '.join(unknown)}; choose among {', '.join(PEER_KEYS)}"
            )
    cfg = config(opts.quick, opts.read_timeout)
    command = reproduce_command(__file__, argv)
    results = run_all(peer_names, cfg, lambda msg: print(msg, file=sys.stderr, flush=True))
    print_report(results, cfg, command)
    report = {
        "benchmark": "buffer",
        "command": command,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "config": cfg,
        "results": results,
        "summary": summarize(results, cfg),
    }
    write_json(opts.out, report)
    print(f"wrote {opts.out}")
    failed = [k for k in TIERMEM_KEYS if "error" in results.get(k, {})]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
