"""schemathesis against the server's own OpenAPI schema, on a real server: for every
operation, generated requests (valid and invalid) never get a 5xx, and every answer
matches the schema (status codes, content types, bodies).

``positive_data_acceptance`` is left out: the schema states types, and the library's
validators refuse more than types can say (an empty or blank user id, a message without
a role, unknown message fields); those refusals are typed 422s, checked here like all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    memory = Memory(str(tmp_path_factory.mktemp("schema") / "memory.db"), embedder=HashEmbedder(32))
    app = create_app(memory, admin_key="schemathesis-admin")
    key = app.state.service.keys.create("fuzz")[1]
    with live_server(app) as url:
        memory.remember("a memory to find", "user")
        yield url, key
    memory.close()


@pytest.fixture(scope="module")
def api_schema(served: tuple[str, str]) -> Any:
    url, _ = served
    return schemathesis.openapi.from_url(url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_api_conforms_to_its_schema(case: Any, served: tuple[str, str]) -> None:
    _, key = served
    case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"}, excluded_checks=[positive_data_acceptance]
    )
