"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakeserver import FakeServer


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A running :class:`FakeServer` (OpenAI + Anthropic protocols) on 127.0.0.1."""
    with FakeServer() as server:
        yield server
