"""The inspector page (/ui) in headless Chromium (Debian's chromium driven by Playwright):
users -> sessions -> transcript, memory search, the explained context, work figures, and
deletes that ask first. Screenshots go to test-artifacts/ui/."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = Path(__file__).parents[1] / "test-artifacts" / "ui"

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason="apt-get install -y chromium"
)


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[tuple[str, Memory]]:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    app = create_app(memory)
    with live_server(app) as url:
        from tiermem.client import MemoryClient

        with MemoryClient(url) as client:  # through the API, so the server knows the users
            client.add_messages(
                [
                    {"role": "user", "content": "We land in Lisbon on Friday"},
                    {"role": "assistant", "content": "I booked the hotel near the river"},
                    {"role": "user", "content": "Remind me to buy green tea there"},
                ],
                "ann",
                "trip",
            )
            client.remember("prefers green tea over coffee", "ann", "preference", 0.9)
            client.remember("<b>not bold</b> is plain text", "ann")
            client.remember("owns a bicycle", "bob")
            client.flush(10)
        memory.remember("writes with the library, not the server", "carl")  # never noted
        yield url, memory
    memory.close()


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield page
        browser.close()


def test_inspector_load_search_context_delete(seeded: tuple[str, Memory], page: Any) -> None:
    url, memory = seeded
    page.goto(url + "/ui")
    users = page.locator("#users li")
    users.filter(has_text="carl").wait_for()
    assert sorted(users.all_inner_texts()) == ["ann", "bob", "carl"]  # the store's users
    assert "queued in this process: 0" in page.locator("#work").inner_text()

    users.filter(has_text="ann").locator("button").click()
    page.locator("#sessions li", has_text="trip · 3 messages").locator("button").click()
    page.locator("#transcript li").nth(2).wait_for()
    assert page.locator("#transcript li").all_inner_texts() == [
        "user: We land in Lisbon on Friday",
        "assistant: I booked the hotel near the river",
        "user: Remind me to buy green tea there",
    ]
    assert "5 memories" in page.locator("#stats").inner_text()
    page.locator("#user-work", has_text="3 done").wait_for()
    assert "0 pending" in page.locator("#user-work").inner_text()
    assert "0 failed" in page.locator("#user-work").inner_text()
    page.screenshot(path=str(SHOTS / "1-transcript.png"), full_page=True)

    page.fill("#search-input", "green tea")
    page.click("#search-form button[type=submit]")
    first = page.locator("#memories tbody tr").first
    first.filter(has_text="green tea").wait_for()
    score, sim = (float(first.locator("td").nth(i).inner_text()) for i in (0, 1))
    assert 0 < score <= 1 and -1 <= sim <= 1  # a relevance, and the evidence beside it
    assert page.locator("#memories tbody tr", has_text="bicycle").count() == 0  # bob's
    assert page.locator("#memories b").count() == 0  # stored text is never markup
    page.screenshot(path=str(SHOTS / "2-search.png"), full_page=True)

    page.fill("#context-query", "what does ann drink")
    page.fill("#context-budget", "300")
    page.fill("#context-session", "trip")
    page.click("#context-form button[type=submit]")
    page.locator("#context-items tbody tr").first.wait_for()
    total = page.locator("#context-total").inner_text()
    assert total.endswith("items") and "of 300 tokens" in total
    rows = page.locator("#context-items tbody tr")
    sections = {rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())}
    assert "recent" in sections and sections <= {"synopsis", "summary", "retrieved", "recent"}
    assert all(rows.nth(i).locator("td").nth(5).inner_text().isdigit() for i in range(rows.count()))
    header = page.locator("#context-items thead th").all_inner_texts()
    assert header[:5] == ["section", "source", "score", "sim", "kw"]
    page.screenshot(path=str(SHOTS / "3-context.png"), full_page=True)

    page.fill("#context-query", "green tea")
    page.fill("#context-session", "")
    page.click("#context-form button[type=submit]")
    retrieved = page.locator("#context-items tbody tr", has_text="prefers green tea")
    retrieved.wait_for()
    sim, kw = (float(retrieved.locator("td").nth(i).inner_text()) for i in (3, 4))
    assert 0 < sim <= 1 and kw == 1.0  # the evidence explain() shows

    page.fill("#context-budget", "0")
    page.click("#context-form button[type=submit]")
    error = page.locator("#context-error", has_text="InvalidSizeError: max_tokens")
    error.wait_for()
    assert page.locator("#context-items tbody tr").count() == 0  # no stale answer
    assert page.locator("#context-total").inner_text() == ""
    assert page.locator("#error").is_hidden()  # not in the banner at the top
    form, box = page.locator("#context-form").bounding_box(), error.bounding_box()
    assert form and box and 0 <= box["y"] - (form["y"] + form["height"]) < 40  # beside it
    error.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "3b-context-error.png"))

    page.click("#load-synopsis")
    page.locator("#synopsis-identity").wait_for()
    synopsis = page.locator("#synopsis").inner_text()
    assert "green tea" in synopsis and "identity" in synopsis
    page.screenshot(path=str(SHOTS / "3c-synopsis.png"), full_page=True)

    tea = page.locator("#memories tbody tr", has_text="prefers green tea")
    tea_id = tea.get_attribute("data-id")
    page.once("dialog", lambda dialog: dialog.dismiss())
    tea.locator("button").click()
    assert memory.store.index.get("ann", tea_id) is not None  # dismissed: nothing deleted
    page.once("dialog", lambda dialog: dialog.accept())
    tea.locator("button").click()
    page.locator("#memories tbody tr", has_text="prefers green tea").wait_for(state="detached")
    assert memory.store.index.get("ann", tea_id) is None
    page.screenshot(path=str(SHOTS / "4-deleted-memory.png"), full_page=True)

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-user")
    users.filter(has_text="ann").wait_for(state="detached")
    assert memory.store.index.count("ann") == 0 and memory.store.index.count("bob") == 1
    page.screenshot(path=str(SHOTS / "5-deleted-user.png"), full_page=True)


def test_inspector_says_what_to_do_first(tmp_path: Path, page: Any) -> None:
    """An empty store: the page says how to add a memory (a curl and a Python snippet
    for this very server, which run as shown), then to pick the user, who then opens."""
    import subprocess
    import sys

    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    with live_server(create_app(memory)) as url:
        page.goto(url + "/ui")
        page.locator("#welcome-empty").wait_for(timeout=10_000)
        assert "No memories here yet" in page.locator("#welcome").inner_text()
        assert page.locator("#welcome-pick").is_hidden() and page.locator("#user-view").is_hidden()
        page.screenshot(path=str(SHOTS / "0-empty.png"), full_page=True)

        curl = page.locator("#welcome-curl").inner_text()
        assert curl.startswith(f"curl -X POST {url}/v1/messages")
        done = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and '"ids"' in done.stdout, done.stdout + done.stderr
        snippet = page.locator("#welcome-python").inner_text()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
        done = subprocess.run(
            [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, done.stderr

        page.click("#refresh-users")
        page.locator("#users li", has_text="ana").wait_for()
        page.locator("#welcome-pick").wait_for()
        assert page.locator("#welcome-empty").is_hidden()
        page.locator("#users li", has_text="ana").locator("button").click()
        page.locator("#sessions li", has_text="s1 · 2 messages").wait_for()
        assert page.locator("#welcome").is_hidden()
    memory.close()


def test_inspector_asks_for_a_key_when_keys_exist(tmp_path: Path, page: Any) -> None:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    app = create_app(memory)
    key = app.state.service.keys.create("acme")[1]
    with live_server(app) as url:
        page.goto(url + "/ui")
        page.locator("#error", has_text="AuthenticationError").wait_for()
        page.locator("#welcome-key").wait_for()  # says where the key goes
        page.fill("#api-key", key)
        page.click("#key-form button")
        page.locator("#error").wait_for(state="hidden")
        page.locator("#welcome-empty").wait_for()  # the tenant has no users yet
        assert (
            "Authorization: Bearer $TIERMEM_API_KEY" in page.locator("#welcome-curl").inner_text()
        )
        page.fill("#user-input", "zoe")
        page.click("#user-form button")
        page.locator("#stats", has_text="0 memories").wait_for()
        page.screenshot(path=str(SHOTS / "6-keyed.png"), full_page=True)
    memory.close()


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_api_reference_works_offline(tmp_path: Path, path: str) -> None:
    """/docs and /redoc show every route with no network beyond the server itself."""
    import httpx
    from playwright.sync_api import sync_playwright

    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    offline = [*FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
    with live_server(create_app(memory)) as url, sync_playwright() as p:
        spec = httpx.get(url + "/openapi.json").json()
        operations = sum(
            1
            for item in spec["paths"].values()
            for m in item
            if m in {"get", "post", "patch", "delete"}
        )
        browser = p.chromium.launch(executable_path=CHROMIUM, args=offline)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        elsewhere: list[str] = []
        page.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(url)
                else (elsewhere.append(route.request.url), route.abort())[1]
            ),
        )
        page.goto(url + path)
        page.locator("#routes article").nth(operations - 1).wait_for()
        assert page.locator("#routes article").count() == operations
        messages = page.locator("#routes article", has_text="POST /v1/messages")
        assert "user_id" in messages.inner_text() and "201" in messages.inner_text()
        assert page.locator("#toc li").count() == operations
        assert page.locator("#error").is_hidden() and elsewhere == []
        page.screenshot(path=str(SHOTS / f"7-api-reference{path.replace('/', '-')}.png"))
        browser.close()
    memory.close()
