"""TiermemConfig: defaults, sources, interpolation, secrets and the errors users see."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from tiermem.config.model import MASK, TiermemConfig, check_config, default_sqlite_path
from tiermem.errors import ConfigError, InputError

SECRET = "postgresql://app:hunter2-s3cr3t@db.internal:5432/tiermem"
PG_YAML = """
memory:
  persistent:
    provider: postgresql
    connection_string: ${{ secrets.POSTGRES_URI }}
"""


def load(source: Any, **env: str) -> TiermemConfig:
    return TiermemConfig.load(source, environ=env)


def error(source: Any, **env: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(source, **env)
    return info.value


# -- defaults and sources --------------------------------------------------------------


def test_defaults_are_the_embedded_setup() -> None:
    config = TiermemConfig()
    assert config == load(None) == load({}) == load("") == load("# only a comment\n")
    assert config.memory.persistent.provider == "sqlite"
    assert config.memory.persistent.path == default_sqlite_path()
    assert str(config.memory.persistent.path).startswith(
        platformdirs.user_data_dir("tiermem", appauthor=False)
    )
    assert config.embedding_model == "local/all-MiniLM-L6-v2"
    assert config.chat_model is None
    assert config.memory.buffer.summarizer == "auto"
    assert config.memory.synopsis.backend == "memory"
    assert (config.memory.synopsis.identity_ttl, config.memory.synopsis.context_ttl) == (
        604800,
        3600,
    )
    assert config.memory.retention == "persistent"
    planner = config.memory.planner
    assert (planner.max_tokens, planner.recent_messages, planner.k) == (4000, 6, 200)
    assert planner.diversity == 0.3
    assert planner.order == ["synopsis", "summary", "retrieved", "recent"]
    assert planner.shares.model_dump() == {
        "synopsis": 0.1,
        "summary": 0.1,
        "retrieved": 1.0,
        "recent": 0.2,
    }
    assert planner.weights.model_dump() == {
        "similarity": 0.9,
        "recency": 0.05,
        "importance": 0.05,
        "keyword": 1.0,
        "session": 0.3,
        "temporal": 1.0,
        "neighbour": 0.5,
        "question": 0.3,
        "reply": 1.0,
        "when": 0.5,
        "speaker": 0.2,
        "generic": 0.2,
        "assistant": 0.3,
    }
    assert planner.floor.enabled is False  # on long histories it leaves evidence out
    assert (planner.standing, planner.standing_similarity) == (8, 0.15)
    assert config.memory.passages.enabled and config.memory.passages.over == 2000
    assert config.memory.buffer.summary_batch == 10


def test_file_path_text_and_dict_sources_agree(tmp_path: Path) -> None:
    text = "memory:\n  buffer:\n    size: 20\n  retention: session\n"
    file = tmp_path / "tiermem.yaml"
    file.write_text(text)
    configs = [
        load(file),
        load(str(file)),
        load(text),
        load({"memory": {"buffer": {"size": 20}, "retention": "session"}}),
    ]
    assert all(c == configs[0] for c in configs)
    assert configs[0].memory.buffer.size == 20 and configs[0].memory.retention == "session"


def test_empty_sections_mean_defaults() -> None:
    config = load("memory:\n  synopsis:\n  buffer:\nllm:\n  models:\n")
    assert config == TiermemConfig()


def test_sqlite_path_expands_home() -> None:
    config = load({"memory": {"persistent": {"path": "~/data/mem.db"}}})
    assert config.memory.persistent.path == Path.home() / "data" / "mem.db"


def test_unreadable_sources(tmp_path: Path) -> None:
    assert error(str(tmp_path / "missing.yaml")).field == "path"
    assert error(tmp_path / "nothere.yml").field == "path"
    bad = error("memory:\n  buffer: {size: 5\n")
    assert bad.field == "yaml" and "line" in str(bad)
    assert "not a mapping" in str(error("- memory\n- llm\n"))
    assert error(42).field == "source"


# -- interpolation ---------------------------------------------------------------------


def test_environment_variables_are_interpolated_and_coerced() -> None:
    config = load(
        {
            "memory": {
                "buffer": {"size": "${BUF_SIZE}", "vector_search": "${VS:-false}"},
                "synopsis": {"namespace": "app-${ENV_NAME}-v1"},
            },
            "llm": {"base_url": "$${NOT_A_VAR}"},
        },
        BUF_SIZE="64",
        ENV_NAME="prod",
    )
    assert config.memory.buffer.size == 64
    assert config.memory.buffer.vector_search is False
    assert config.memory.synopsis.namespace == "app-prod-v1"
    assert config.llm.base_url == "${NOT_A_VAR}"  # $${ escapes


def test_secrets_file_dotenv_and_yaml(tmp_path: Path) -> None:
    dotenv = tmp_path / "secrets.env"
    dotenv.write_text(
        f"# production secrets\nexport POSTGRES_URI='{SECRET}'\nOPENAI_KEY=sk-abc # trailing comment\n"
    )
    config = TiermemConfig.load(PG_YAML, secrets_file=dotenv, environ={})
    assert config.memory.persistent.connection_string is not None
    assert config.memory.persistent.connection_string.get_secret_value() == SECRET
    yaml_file = tmp_path / "secrets.yaml"
    yaml_file.write_text(f"POSTGRES_URI: {SECRET}\nPORT: 5432\n")
    via_env_var = TiermemConfig.load(PG_YAML, environ={"TIERMEM_SECRETS_FILE": str(yaml_file)})
    assert (
        via_env_var.memory.persistent.connection_string
        == config.memory.persistent.connection_string
    )
    key = TiermemConfig.load({"llm": {"api_key": "${OPENAI_KEY}"}}, secrets_file=dotenv, environ={})
    assert key.llm.api_key is not None and key.llm.api_key.get_secret_value() == "sk-abc"


def test_environment_wins_over_the_secrets_file(tmp_path: Path) -> None:
    file = tmp_path / "s.env"
    file.write_text("POSTGRES_URI=postgresql://from-file/db\n")
    config = TiermemConfig.load(PG_YAML, secrets_file=file, environ={"POSTGRES_URI": SECRET})
    assert config.memory.persistent.connection_string is not None
    assert config.memory.persistent.connection_string.get_secret_value() == SECRET


def test_missing_secret_names_key_and_variable(tmp_path: Path) -> None:
    exc = error(PG_YAML)
    assert exc.field == "memory.persistent.connection_string"
    assert "POSTGRES_URI" in str(exc) and "TIERMEM_SECRETS_FILE" in str(exc)
    file = tmp_path / "s.env"
    file.write_text("OTHER=1\n")
    with pytest.raises(ConfigError, match=r"s\.env"):
        TiermemConfig.load(PG_YAML, secrets_file=file, environ={})
    missing_var = error({"llm": {"models": [{"chat": "${CHAT_MODEL}"}]}})
    assert missing_var.field == "llm.models[0].chat" and "variable CHAT_MODEL" in str(missing_var)


def test_bad_secrets_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="secrets_file"):
        TiermemConfig.load({}, secrets_file=tmp_path / "absent.env", environ={})
    nested = tmp_path / "nested.yaml"
    nested.write_text("a:\n  b: 1\n")
    with pytest.raises(ConfigError, match="neither KEY=VALUE"):
        TiermemConfig.load({}, secrets_file=nested, environ={})


# -- secrets never shown ---------------------------------------------------------------


def test_secrets_stay_out_of_repr_str_dump_report_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        config = load(
            {
                "memory": {
                    "persistent": {
                        "provider": "postgresql",
                        "connection_string": "${{ secrets.PG }}",
                    }
                },
                "llm": {"api_key": "${KEY}", "base_url": "${{ secrets.BASE }}"},
            },
            PG=SECRET,
            KEY="sk-hunter2",
            BASE="https://gateway.example/v1",
        )
    shown = [
        repr(config),
        str(config),
        str(config.model_dump()),
        config.model_dump_json(),
        str(config.report()),
        caplog.text,
    ]
    for text in shown:
        assert "hunter2" not in text
    rows = dict(config.report())
    assert rows["memory.persistent.connection_string"] == MASK
    assert rows["llm.api_key"] == MASK
    # a plain field filled from a secret keeps its value in repr but is masked in the report
    assert rows["llm.base_url"] == MASK and config.llm.base_url == "https://gateway.example/v1"
    assert config.llm.provider_options()["api_key"] == "sk-hunter2"  # asked for explicitly


def test_errors_never_echo_secret_values() -> None:
    exc = error({"llm": {"timeout": "${{ secrets.T }}"}}, T="hunter2")
    assert exc.field == "llm.timeout" and "hunter2" not in str(exc) and "<hidden>" in str(exc)
    exc = error({"llm": {"api_key": ["hunter2"]}})
    assert "hunter2" not in str(exc)


# -- validation errors -----------------------------------------------------------------


def test_wrong_enum_value_names_key_and_allowed_values() -> None:
    exc = error("memory:\n  persistent:\n    provider: mysql\n")
    assert exc.field == "memory.persistent.provider"
    assert "'mysql'" in str(exc) and "'sqlite'" in str(exc) and "'postgresql'" in str(exc)
    assert isinstance(exc, InputError) and isinstance(exc, ValueError)
    assert "'memory'" in str(error({"memory": {"synopsis": {"backend": "memcached"}}}))
    assert error({"memory": {"retention": "forever"}}).field == "memory.retention"
    assert (
        error({"memory": {"planner": {"order": ["recent", "history"]}}}).field
        == "memory.planner.order[1]"
    )
    assert "True" in str(error({"memory": {"persistent": {"user_isolation": False}}}))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"memory": {"buffer": {"size": "lots"}}}, "memory.buffer.size"),
        ({"memory": {"buffer": {"vector_search": "maybe"}}}, "memory.buffer.vector_search"),
        ({"memory": {"buffer": 5}}, "memory.buffer"),
        ({"memory": {"working": {"max_memory_mb": [10]}}}, "memory.working.max_memory_mb"),
        ({"llm": {"models": {"embedding": "local/x"}}}, "llm.models"),
    ],
)
def test_wrong_type_names_the_key(data: dict[str, Any], field: str) -> None:
    exc = error(data)
    assert exc.field == field


def test_unknown_keys_suggest_the_right_one() -> None:
    exc = error("memory:\n  buffer:\n    sise: 50\n")
    assert exc.field == "memory.buffer.sise"
    assert "did you mean 'size'?" in str(exc) and "multiplier" in str(exc)
    assert "did you mean 'memory'?" in str(error({"memroy": {}}))
    assert "did you mean 'identity_ttl'?" in str(
        error({"memory": {"synopsis": {"identity_tll": 5}}})
    )
    far = error({"memory": {"working": {"colour": "blue"}}})
    assert "did you mean" not in str(far) and "max_memory_mb" in str(far)


@pytest.mark.parametrize("ttl", [-1, 0, -604800])
def test_non_positive_ttls_are_rejected(ttl: int) -> None:
    exc = error(f"memory:\n  synopsis:\n    identity_ttl: {ttl}\n")
    assert exc.field == "memory.synopsis.identity_ttl" and "greater than 0" in str(exc)


def test_several_errors_are_reported_together() -> None:
    exc = error({"memory": {"buffer": {"size": 0}, "synopsis": {"context_ttl": -5}}})
    assert "memory.buffer.size" in str(exc) and "memory.synopsis.context_ttl" in str(exc)


def test_each_hint_stands_next_to_its_own_error() -> None:
    exc = error({"memory": {"buffer": {"sise": 3}, "persistent": {"provider": "mongodb"}, "x": 1}})
    parts = str(exc).split("; also ")
    assert len(parts) == 3 == len(exc.problems)
    by_key = {part.split(":", 1)[0]: part for part in parts}
    assert "allowed keys: embedding_model" in by_key["memory.buffer.sise"]
    assert "did you mean 'size'" in by_key["memory.buffer.sise"]
    assert "allowed values: 'sqlite' or 'postgresql'" in by_key["memory.persistent.provider"]
    assert "allowed keys: buffer, durability, facts, " in by_key["memory.x"]
    assert "sqlite" not in by_key["memory.buffer.sise"] + by_key["memory.x"]
    assert exc.field == parts[0].split(":", 1)[0] and exc.hint in parts[0]
    single = error({"memory": {"buffer": {"size": 0}}})
    assert single.problems == ((single.field, single.problem, single.hint),)


def test_cross_field_rules() -> None:
    no_uri = error({"memory": {"persistent": {"provider": "postgresql"}}})
    assert no_uri.field == "memory.persistent.connection_string"
    disabled = load({"memory": {"persistent": {"provider": "postgresql", "enabled": False}}})
    assert disabled.memory.persistent.enabled is False
    stray = error({"memory": {"persistent": {"connection_string": "postgresql://x/y"}}})
    assert stray.field == "memory.persistent.connection_string" and "postgresql" in str(stray)
    assert error({"memory": {"buffer": {"size": 5}}}).field == "memory.buffer.summary_batch"
    assert "less than or equal to 1" in str(
        error({"memory": {"planner": {"shares": {"synopsis": 1.5}}}})
    )
    assert "at least 4" in str(error({"memory": {"planner": {"order": ["recent"]}}}))
    twice = ["recent", "recent", "summary", "synopsis"]
    assert "more than once" in str(error({"memory": {"planner": {"order": twice}}}))
    zero = {"similarity": 0, "recency": 0, "importance": 0}
    assert "positive" in str(error({"memory": {"planner": {"weights": zero}}}))


# -- models and precedence -------------------------------------------------------------


def test_embedding_model_precedence() -> None:
    both = {
        "memory": {"buffer": {"embedding_model": "openai/text-embedding-3-small"}},
        "llm": {"models": [{"embedding": "local/all-mpnet-base-v2"}]},
    }
    assert load(both).embedding_model == "local/all-mpnet-base-v2"
    del both["llm"]
    assert load(both).embedding_model == "openai/text-embedding-3-small"
    assert load({}).embedding_model == "local/all-MiniLM-L6-v2"


def test_chat_model_and_provider_options() -> None:
    config = load(
        {
            "llm": {
                "models": [{"embedding": "local/all-MiniLM-L6-v2"}, {"chat": "openai/gpt-4o-mini"}],
                "base_url": "http://127.0.0.1:11434/v1",
                "timeout": 5,
                "max_retries": 0,
            }
        }
    )
    assert config.chat_model == "openai/gpt-4o-mini"
    assert config.llm.provider_options() == {
        "timeout": 5.0,
        "max_retries": 0,
        "base_url": "http://127.0.0.1:11434/v1",
    }


@pytest.mark.parametrize(
    ("models", "needle"),
    [
        ([{"chat": "openai/a"}, {"chat": "anthropic/b"}], "more than one chat"),
        ([{}], "names no model"),
        ([{"embedding": "huggingface/minilm"}], "provider in local, openai"),
        ([{"chat": "gpt-4o-mini"}], "provider in anthropic, openai"),
        ([{"chat": "openai/x", "temperature": 0}], "unknown key"),
    ],
)
def test_bad_model_entries(models: list[dict[str, Any]], needle: str) -> None:
    exc = error({"llm": {"models": models}})
    assert exc.field.startswith("llm.models") and needle in str(exc)


# -- config check ----------------------------------------------------------------------


def test_check_config_reports_every_key_with_secrets_masked(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(PG_YAML)
    rows = check_config(file, environ={"POSTGRES_URI": SECRET})
    table = dict(rows)
    assert table["memory.persistent.provider"] == "postgresql"
    assert table["memory.persistent.connection_string"] == MASK
    assert table["memory.synopsis.identity_ttl"] == "604800"
    assert table["(effective) embedding model"] == "local/all-MiniLM-L6-v2"
    assert table["(effective) chat model"] == "none (offline)"
    assert all("hunter2" not in value for _, value in rows)
    assert len(rows) == len(table) > 35  # every key, once
    with pytest.raises(ConfigError, match="not a file"):
        check_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="POSTGRES_URI"):
        check_config(file, environ={})


def test_docs_yaml_examples_load() -> None:
    import re

    text = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        config = load(block, POSTGRES_URI=SECRET)
        assert config.chat_model == "openai/gpt-4o-mini"
    synopsis_doc = (Path(__file__).parents[1] / "docs" / "synopsis.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", synopsis_doc, re.S):
        assert load(block, REDIS_URL="redis://127.0.0.1:6379/0").memory.synopsis.backend == "redis"


def test_durability_names_its_choices() -> None:
    for durability in ("committed", "synced", "async_commit", "memory"):
        assert load({"memory": {"durability": durability}}).memory.durability == durability
    exc = error({"memory": {"durability": "async"}})
    assert exc.field == "memory.durability" and "'async_commit'" in str(exc)


def test_partitions_and_the_read_replica_are_postgresql_settings() -> None:
    persistent = {
        "provider": "postgresql",
        "connection_string": "postgresql://a@h/db",
        "partitions": 16,
        "read_connection_string": "postgresql://a@replica/db",
    }
    config = load({"memory": {"persistent": persistent}}).memory.persistent
    assert config.partitions == 16 and config.replica_wait == 1.0
    assert config.read_connection_string is not None
    assert "a@replica" not in repr(config)  # a secret, masked
    for key, value in (("partitions", 4), ("read_connection_string", "postgresql://r/db")):
        exc = error({"memory": {"persistent": {key: value}}})
        assert exc.field == f"memory.persistent.{key}" and "provider: postgresql" in str(exc)
    exc = error({"memory": {"persistent": {**persistent, "partitions": -1}}})
    assert exc.field == "memory.persistent.partitions"
