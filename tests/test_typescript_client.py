"""The TypeScript client (clients/typescript) on real servers: its behaviour suite
(``node --test``, the cases tests/conformance/test_faces.py runs on the Python faces)
against a real ``tiermem serve`` on SQLite and on PostgreSQL + pgvector, its transport
tests, and the checks that keep it the same contract as the Python client: the same
operations, the same error classes, and types generated from the server's current
OpenAPI document. Skipped only where node or npm is missing."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from liveserver import serve_process
from tiermem import errors
from tiermem.api import MemoryAPI, operations

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clients" / "typescript"
sys.path.insert(0, str(PACKAGE / "scripts"))
from built import ensure_built  # noqa: E402

CONFIG = "memory:\n  buffer: {size: 8, summary_batch: 4}\n  facts: {enabled: True}\n"

pytestmark = pytest.mark.skipif(
    not (shutil.which("node") and shutil.which("npm")), reason="node and npm are not installed"
)


def run(
    *argv: str, cwd: Path = PACKAGE, env: dict[str, str] | None = None, timeout: float = 600
) -> str:
    """Run a command in the package; its output (the test fails with it when it fails)."""
    done = subprocess.run(
        argv, cwd=cwd, env=env or os.environ.copy(), capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{' '.join(argv)}:\n{_failures(done.stdout)}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def _failures(tap: str) -> str:
    """The failed tests of ``node --test``'s TAP output, each with its error (else the
    output's end)."""
    lines = tap.splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith("not ok")]
    return "\n".join("\n".join(lines[i : i + 30]) for i in failed) or tap[-6000:]


def python_env() -> dict[str, str]:
    """The environment of a Node process that may start Python: this interpreter, this
    checkout's tiermem, offline."""
    return {
        **os.environ,
        "PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture(scope="module")
def package() -> Path:
    """The package built from its sources (its locked dev dependencies installed once)."""
    ensure_built()
    return PACKAGE


@contextmanager
def serving(folder: Path, *argv: str) -> Iterator[str]:
    """``tiermem serve`` on a free loopback port until the block ends; its URL."""
    config = folder / "tiermem.yaml"
    if not config.exists():
        config.write_text(CONFIG)
    command = [sys.executable, "-m", "tiermem.cli", "serve", *argv, "--config", str(config)]
    with serve_process(command, python_env(), seconds=180, stdout=subprocess.DEVNULL) as (url, _):
        yield url


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """One ``tiermem serve`` per engine, started on first use; its URL by engine."""
    urls: dict[str, str] = {}
    with ExitStack() as stack:

        def url(engine: str) -> str:
            if engine not in urls:
                folder = tmp_path_factory.mktemp(f"ts-{engine}")
                if engine == "sqlite":
                    argv: tuple[str, ...] = ("--db", str(folder / "memory.db"))
                else:
                    store = _database_uri()
                    (folder / "tiermem.yaml").write_text(
                        CONFIG + "  persistent:\n    provider: postgresql\n"
                        f"    connection_string: '{store}'\n    connect_timeout: 30\n"
                    )
                    argv = ()
                urls[engine] = stack.enter_context(serving(folder, *argv))
            return urls[engine]

        yield url


def _database_uri() -> str:
    """A new database on the test PostgreSQL, as the ``postgresql://`` URI a
    configuration file takes."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    from conformance.conftest import fresh_database

    parts = conninfo_to_dict(fresh_database("typescript"))
    user = quote(str(parts.pop("user", "")))
    password = parts.pop("password", None)
    login = f"{user}:{quote(str(password))}@" if password else f"{user}@"
    dbname = quote(str(parts.pop("dbname")))
    return f"postgresql://{login}/{dbname}?{urlencode(parts)}"


@pytest.mark.slow  # a tiermem serve with the embedding model
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_behaviour_suite_passes_on_a_real_server(
    package: Path, servers: Callable[[str], str], engine: str
) -> None:
    env = {**python_env(), "TIERMEM_URL": servers(engine)}
    out = run("node", "--test", "test/contract.test.mjs", env=env)
    assert re.search(r"^# fail 0$", out, re.M) and re.search(r"^# pass [1-9]\d+$", out, re.M)


def test_retries_typed_errors_and_checks_before_sending(package: Path) -> None:
    out = run("node", "--test", "test/transport.test.mjs")
    assert re.search(r"^# fail 0$", out, re.M)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_every_operation_of_the_contract_is_a_method(package: Path) -> None:
    script = (
        'import { MemoryClient } from "./dist/index.js";'
        "console.log(Object.getOwnPropertyNames(MemoryClient.prototype).join(' '))"
    )
    methods = set(run("node", "--input-type=module", "-e", script).split()) - {"constructor"}
    assert methods == {_camel(name) for name in operations(MemoryAPI)}


def test_every_error_class_of_python_has_its_namesake(package: Path) -> None:
    """The same classes, each under the same parent (Python's first base)."""
    script = (
        'import * as tiermem from "./dist/index.js";'
        "const parents = Object.fromEntries(tiermem.ERROR_NAMES.map("
        "(n) => [n, Object.getPrototypeOf(tiermem[n]).name]));"
        "console.log(JSON.stringify(parents))"
    )
    typescript = json.loads(run("node", "--input-type=module", "-e", script))
    python = {
        name: value.__bases__[0].__name__
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.TiermemError)
    }
    assert typescript == {**python, "TiermemError": "Error"}


def test_the_generated_types_are_the_servers_current_document(
    package: Path, tmp_path: Path
) -> None:
    fresh = tmp_path / "openapi.ts"
    run("node", "scripts/generate.mjs", str(fresh), env=python_env())
    committed = PACKAGE / "src" / "generated" / "openapi.ts"
    assert fresh.read_text() == committed.read_text(), (
        "the server's OpenAPI document changed: run `npm run generate` in clients/typescript "
        "and commit src/generated/openapi.ts"
    )


@pytest.mark.slow  # npm installs the build tools into a clean copy
def test_the_package_installs_from_the_repository(tmp_path: Path) -> None:
    """As docs/client-typescript.md says: ``npm ci`` in a clean copy of the package builds
    ``dist/`` (its ``prepare``), and ``npm install <folder>`` puts it in an application."""
    clean = tmp_path / "typescript"
    clean.mkdir()
    for name in ("package.json", "package-lock.json", "tsconfig.json"):
        shutil.copy(PACKAGE / name, clean / name)
    for folder in ("src", "scripts"):
        shutil.copytree(PACKAGE / folder, clean / folder)
    run("npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", cwd=clean)
    assert (clean / "dist" / "index.d.ts").is_file()
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}')
    run("npm", "install", "--no-audit", "--no-fund", str(clean), cwd=app)
    script = (
        'import { MemoryClient, InvalidRoleError } from "tiermem";'
        'const m = new MemoryClient("http://127.0.0.1:9");'
        'await m.add("robot", "hi", "ana")'
        ".catch((e) => console.log(e instanceof InvalidRoleError, e.field));"
    )
    assert run("node", "--input-type=module", "-e", script, cwd=app).strip() == "true role"


EXAMPLES = PACKAGE / "examples"


@pytest.fixture(scope="module")
def examples(package: Path) -> Path:
    """The examples' folder, with their locked dependencies (the OpenAI SDK, LangGraph.js's
    checkpoint package, and this client from the repository)."""
    if not (EXAMPLES / "node_modules").is_dir():
        run("npm", "ci", "--no-audit", "--no-fund", cwd=EXAMPLES)
    return EXAMPLES


@pytest.mark.slow  # a tiermem serve with the embedding model
def test_the_chat_example_answers_from_memory_with_the_openai_sdk(
    examples: Path, servers: Callable[[str], str]
) -> None:
    from fakeserver import FakeServer

    user = f"chat-{uuid.uuid4().hex[:8]}"
    with FakeServer() as llm:
        env = {
            **os.environ,
            "TIERMEM_URL": servers("sqlite"),
            "OPENAI_BASE_URL": llm.openai_url,
            "OPENAI_API_KEY": "test-key",
            "CHAT_USER": user,
            "CHAT_SESSION": "s1",
        }
        done = subprocess.run(
            ["node", "chat.mjs"],
            cwd=examples,
            env=env,
            input="My cat is called Miso.\nWhat is my cat called?\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        replies = [line for line in done.stdout.splitlines() if line.startswith("assistant: ")]
        assert replies == [
            "assistant: reply: My cat is called Miso.",
            "assistant: reply: What is my cat called?",
        ]
        chats = [r.json for r in llm.requests if r.path.endswith("/chat/completions")]
        assert len(chats) == 2 and chats[0]["model"] == "gpt-4o-mini"
        second = json.dumps(chats[1]["messages"])
        assert "Miso" in second and "peanuts" in second  # the first turn and the preference


@pytest.mark.slow  # a tiermem serve with the embedding model
def test_the_langgraph_example_keeps_its_store_in_tiermem(
    examples: Path, servers: Callable[[str], str]
) -> None:
    from tiermem.client import MemoryClient

    user = f"leo-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TIERMEM_URL": servers("sqlite"), "CHAT_USER": user}
    out = run("node", "langgraph.mjs", cwd=examples, env=env, timeout=120)
    assert out.splitlines() == [
        "get: Leo drinks his coffee black",
        out.splitlines()[1],
        "filter: 2025",
        f'namespaces: [["{user}","preference"],["{user}","trips"]]',
        "context holds the cello: true",
        "after delete: null",
    ]
    assert out.splitlines()[1].startswith("search: Leo plays the cello on Sundays (score ")
    with MemoryClient(servers("sqlite")) as memory:  # the items are the user's memories
        contents = sorted(r.content for r in memory.list_memories(user))
    assert contents == [
        "preference/music: Leo plays the cello on Sundays",
        "trips/2025: Leo hiked in the Dolomites",
    ]


DOC = ROOT / "docs" / "client-typescript.md"
DOC_URL = "http://127.0.0.1:8765"


@pytest.mark.slow  # a tiermem serve with the embedding model
def test_the_docs_example_runs_as_written(examples: Path, servers: Callable[[str], str]) -> None:
    (code,) = re.findall(r"```js\n(.*?)```", DOC.read_text(), re.S)
    assert DOC_URL in code
    served = code.replace(DOC_URL, servers("sqlite"))
    out = run("node", "--input-type=module", "-e", served, cwd=examples, timeout=120).splitlines()
    assert out[0].endswith("preference Prefers tea over coffee") or "Eva" in out[0]
    assert any(line.startswith("true [") for line in out)
    assert "true role use one of agent_call, agent_response, assistant, system, tool, user" in out
    assert out[-1] == "end" and "message" in out and "memory" in out


SAME_ERRORS: list[tuple[str, Callable[[Any, str], Any], tuple[str, ...]]] = [
    # (TypeScript call on m and u, the Python client's call, what may differ: the hint
    # names an argument in each language's spelling)
    ('m.add("robot", "hi", u)', lambda m, u: m.add("robot", "hi", u), ()),
    ('m.add("user", "hi", "")', lambda m, u: m.add("user", "hi", ""), ()),
    ('m.addMessages({ role: "user" }, u)', lambda m, u: m.add_messages({"role": "user"}, u), ()),
    (
        'm.add("user", "hi", u, null, { bogus: 1 })',
        lambda m, u: m.add("user", "hi", u, bogus=1),
        ("hint",),
    ),
    ('m.add("user", 42, u)', lambda m, u: m.add("user", 42, u), ()),
    ('m.remember("x", u, "fact", 2.5)', lambda m, u: m.remember("x", u, importance=2.5), ()),
    ('m.remember("x", u, "fact", NaN)', lambda m, u: m.remember("x", u, importance=math.nan), ()),
    ('m.remember("x", u, "gossip")', lambda m, u: m.remember("x", u, "gossip"), ()),
    ('m.remember("   ", u)', lambda m, u: m.remember("   ", u), ()),
    ('m.search("tea", u, 0)', lambda m, u: m.search("tea", u, k=0), ()),
    (
        'm.search("tea", u, 10, { user_id: "x" })',
        lambda m, u: m.search("tea", u, filters={"user_id": "x"}),
        (),
    ),
    (
        'm.search("tea", u, 10, { bogus: 1 })',
        lambda m, u: m.search("tea", u, filters={"bogus": 1}),
        (),
    ),
    (
        'm.search("tea", u, 10, null, { minScore: 1.5 })',
        lambda m, u: m.search("tea", u, min_score=1.5),
        (),
    ),
    (
        'm.search("tea", u, 10, null, { minScore: "1" })',
        lambda m, u: m.search("tea", u, min_score="1"),
        (),
    ),
    (
        'm.search("tea", u, 10, null, { mode: "fuzzy" })',
        lambda m, u: m.search("tea", u, mode="fuzzy"),
        (),
    ),
    (
        "m.listMemories(u, { metadata: { n: NaN } })",
        lambda m, u: m.list_memories(u, metadata={"n": math.nan}),
        (),
    ),
    (
        'm.search("tea", u, 10, { metadata: { n: { a: 1 } } })',
        lambda m, u: m.search("tea", u, filters={"metadata": {"n": {"a": 1}}}),
        (),
    ),
    (
        'm.search("tea", u, 10, { memory_type: ["fact", "gossip"] })',
        lambda m, u: m.search("tea", u, filters={"memory_type": ["fact", "gossip"]}),
        (),
    ),
    ('m.getContext("tea", u, null, 0)', lambda m, u: m.get_context("tea", u, max_tokens=0), ()),
    ('m.getContext("tea", u, null, 2.5)', lambda m, u: m.get_context("tea", u, max_tokens=2.5), ()),
    ('m.forget("not-a-uuid", u)', lambda m, u: m.forget("not-a-uuid", u), ()),
    ("m.listMemories(u, { offset: -1 })", lambda m, u: m.list_memories(u, offset=-1), ()),
    ("m.listMemories(u, { limit: 0 })", lambda m, u: m.list_memories(u, limit=0), ()),
    (
        'm.listMemories(u, { memoryType: "gossip" })',
        lambda m, u: m.list_memories(u, memory_type="gossip"),
        (),
    ),
    ('m.getMessage("", u)', lambda m, u: m.get_message("", user_id=u), ()),
    ("m.getMessage(42, u)", lambda m, u: m.get_message(42, user_id=u), ()),
    ('m.getMessage("no-such-id", u)', lambda m, u: m.get_message("no-such-id", user_id=u), ()),
    ('m.recent(u, "s", 0)', lambda m, u: m.recent(u, "s", limit=0), ()),
    ('m.history(u, "x".repeat(300))', lambda m, u: m.history(u, "x" * 300), ()),
    ("m.facts(u, { current: 1 })", lambda m, u: m.facts(u, current=1), ()),
    ("m.failed(u, 0)", lambda m, u: m.failed(u, limit=0), ()),
    ("m.forgetMessages(u, 42)", lambda m, u: m.forget_messages(u, 42), ()),
    (
        "m.updateMemory(crypto.randomUUID(), u)",
        lambda m, u: m.update_memory(str(uuid.uuid4()), u),
        (),
    ),
    ('m.factHistory("nope", u)', lambda m, u: m.fact_history("nope", u), ()),
    ("m.users(0)", lambda m, u: m.users(limit=0), ()),
    ("m.users(100, 5)", lambda m, u: m.users(after=5), ()),
    ("m.flush(-1)", lambda m, u: m.flush(-1), ()),
    ("m.flush(NaN)", lambda m, u: m.flush(math.nan), ()),
    ('m.importArchive(["{}"])', lambda m, u: m.import_archive(["{}"]), ("hint",)),
    ('m.importArchive(["{}"], u)', lambda m, u: m.import_archive(["{}"], u), ()),
]


def _python_error(call: Callable[[Any, str], Any], memory: Any, user: str) -> list[Any]:
    try:
        call(memory, user)
    except errors.TiermemError as exc:
        return [
            type(exc).__name__,
            getattr(exc, "field", None),
            getattr(exc, "problem", str(exc)),
            getattr(exc, "hint", ""),
        ]
    raise AssertionError(f"{call} raised nothing")


@pytest.mark.slow  # a tiermem serve with the embedding model
def test_the_same_bad_input_is_the_same_error_as_in_python(
    package: Path, servers: Callable[[str], str]
) -> None:
    """Each call refused by both clients against one server: the same class, field,
    problem and hint, whether the client refuses it before sending or the server does."""
    from tiermem.client import MemoryClient

    url, user = servers("sqlite"), f"same-{uuid.uuid4().hex[:8]}"
    with MemoryClient(url) as memory:
        python = [_python_error(call, memory, user) for _, call, _ in SAME_ERRORS]
    calls = ",\n".join(f"  () => {ts}" for ts, _, _ in SAME_ERRORS)
    script = f"""
import {{ MemoryClient }} from "./dist/index.js";
const m = new MemoryClient({json.dumps(url)});
const u = {json.dumps(user)};
const calls = [
{calls}
];
const found = [];
for (const call of calls) {{
  try {{
    await call();
    found.push(null);
  }} catch (e) {{
    found.push([e.name, e.field, e.problem, e.hint]);
  }}
}}
console.log(JSON.stringify(found));
"""
    typescript = json.loads(run("node", "--input-type=module", "-e", script))
    parts = ("class", "field", "problem", "hint")
    differ = []
    for (ts, _, may_differ), py, js in zip(SAME_ERRORS, python, typescript, strict=True):
        found = js or [None] * 4
        kept = [(p, a, b) for p, a, b in zip(parts, py, found, strict=True) if p not in may_differ]
        if any(a != b for _, a, b in kept):
            differ.append(f"{ts}: python {py} / typescript {js}")
    assert not differ, "\n".join(differ)


@pytest.mark.slow  # a tiermem serve with the embedding model
def test_the_same_user_reads_the_same_from_both_clients(
    package: Path, servers: Callable[[str], str]
) -> None:
    """A user written by the Python client reads the same from the TypeScript one: the
    history, sessions, search hits and scores, the context's items and the stats."""
    from tiermem.client import MemoryClient

    url, user = servers("sqlite"), f"both-{uuid.uuid4().hex[:8]}"
    with MemoryClient(url) as memory:
        memory.add_messages(
            [
                {"role": "user", "content": "My sister Eva moved to Rome last year"},
                {"role": "assistant", "content": "Rome is lovely in spring."},
            ],
            user,
            "s1",
        )
        memory.remember("Prefers tea over coffee", user, "preference", 0.8)
        memory.remember("Works as a nurse in Bergen", user, "fact", metadata={"source": "chat"})
        assert memory.flush(60)
        python = {
            "history": [m.to_dict() for m in memory.history(user, "s1")],
            "sessions": [[s.session_id, s.messages] for s in memory.sessions(user)],
            "search": [[str(h.record.id), h.score] for h in memory.search("tea or coffee", user)],
            "context": [
                [i.section, i.source, i.content, i.score, i.tokens]
                for i in memory.get_context("where does Eva live?", user, "s1", 300).items
            ],
            "stats": [memory.stats(user).count, memory.stats(user).by_type],
        }
    script = f"""
import {{ MemoryClient }} from "./dist/index.js";
const m = new MemoryClient({json.dumps(url)});
const u = {json.dumps(user)};
const context = await m.getContext("where does Eva live?", u, "s1", 300);
const stats = await m.stats(u);
console.log(JSON.stringify({{
  history: await m.history(u, "s1"),
  sessions: (await m.sessions(u)).map((s) => [s.session_id, s.messages]),
  search: (await m.search("tea or coffee", u)).map((h) => [h.memory.id, h.score]),
  context: context.items.map((i) => [i.section, i.source, i.content, i.score, i.tokens]),
  stats: [stats.count, stats.by_type],
}}));
"""
    assert json.loads(run("node", "--input-type=module", "-e", script)) == python
