"""Config: bad input gives one line naming the key; no file at all gives the defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from chazbot.config import (
    Config,
    EmbeddingConfig,
    MatrixConfig,
    load_config,
    local_embedder_installed,
    parse_config,
)
from chazbot.errors import ConfigError


def error_of(data: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.fixture(autouse=True)
def _no_config_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAZBOT_CONFIG", raising=False)


def test_empty_config_is_the_defaults() -> None:
    empty: tuple[Any, ...] = (None, {})
    for data in empty:
        config = parse_config(data)
        assert [a.name for a in config.agents] == ["chaz"]
        assert config.llm is None and config.matrix is None
        assert config.state_dir == Path("./state")


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"bogus": 1}, "bogus"),
        ({"llm": {"bogus": 1}}, "llm.bogus"),
        ({"agents": [{"name": "a", "foo": 1}]}, "agents[0].foo"),
        ({"agents": [{"name": "a"}, {"name": "b", "foo": 1}]}, "agents[1].foo"),
        ({"logging": {"colour": "red"}}, "logging.colour"),
        (
            {"matrix": {"homeserver_url": "http://x", "user_id": "@a:b", "passwd": "x"}},
            "matrix.passwd",
        ),
    ],
)
def test_unknown_key_is_named_with_its_path(data: Any, path: str) -> None:
    assert error_of(data) == f"config: {path}: unknown key"


@pytest.mark.parametrize(
    ("data", "path", "words"),
    [
        ({"llm": {"timeout_s": "soon"}}, "llm.timeout_s", "number"),
        ({"llm": {"timeout_s": -1}}, "llm.timeout_s", "greater than 0"),
        ({"llm": "gpt"}, "llm", "dictionary"),
        (
            {"agents": [{"name": "a", "max_iterations": "many"}]},
            "agents[0].max_iterations",
            "integer",
        ),
        ({"agents": [{"name": "a", "allowed_tools": [1]}]}, "agents[0].allowed_tools[0]", "string"),
        ({"agents": [{"name": "has space"}]}, "agents[0].name", "pattern"),
        ({"agents": "chaz"}, "agents", "list"),
        ({"agents": []}, "agents", "at least 1"),
        ({"logging": {"level": "LOUD"}}, "logging.level", "DEBUG"),
        ({"matrix": {"homeserver_url": "http://x", "user_id": "bot"}}, "matrix.user_id", "Matrix"),
        ({"matrix": {"user_id": "@a:b"}}, "matrix.homeserver_url", "required"),
        ({"sync_listen": "everywhere"}, "sync_listen", "host:port"),
    ],
)
def test_wrong_value_is_named_with_its_path(data: Any, path: str, words: str) -> None:
    message = error_of(data)
    assert message.startswith(f"config: {path}: ")
    assert words in message


def test_several_errors_are_counted_on_one_line() -> None:
    message = error_of({"llm": {"timeout_s": "x", "max_retries": "y"}})
    assert "(and 1 more)" in message


def test_duplicate_agent_names_refused_case_insensitively() -> None:
    message = error_of({"agents": [{"name": "Chaz"}, {"name": "bob"}, {"name": "chaz"}]})
    assert message.startswith("config: agents: ") and "unique" in message and "chaz" in message


def test_top_level_must_be_a_mapping() -> None:
    assert "mapping" in error_of(["agents"])


def test_env_reference_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAZ_TEST_KEY", "sk-from-env")
    config = parse_config({"llm": {"api_key": "${CHAZ_TEST_KEY}", "model": "m-${CHAZ_TEST_KEY}"}})
    assert config.llm is not None
    assert config.llm.api_key == "sk-from-env" and config.llm.model == "m-sk-from-env"


def test_missing_env_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAZ_TEST_MISSING", raising=False)
    message = error_of({"agents": [{"name": "a", "system_prompt": "${CHAZ_TEST_MISSING}"}]})
    assert "CHAZ_TEST_MISSING" in message
    assert "agents[0].system_prompt" in message


def test_env_default_is_used_only_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAZ_TEST_MODEL", raising=False)
    data = {"llm": {"model": "${CHAZ_TEST_MODEL:-small-model}", "api_base": "${CHAZ_TEST_MODEL:-}"}}
    config = parse_config(data)
    assert config.llm is not None
    assert config.llm.model == "small-model" and config.llm.api_base == ""
    monkeypatch.setenv("CHAZ_TEST_MODEL", "big-model")
    config = parse_config(data)
    assert config.llm is not None and config.llm.model == "big-model"


def test_env_value_is_not_re_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAZ_TEST_OUTER", "${CHAZ_TEST_INNER}")
    monkeypatch.delenv("CHAZ_TEST_INNER", raising=False)
    config = parse_config({"agents": [{"name": "a", "system_prompt": "${CHAZ_TEST_OUTER}"}]})
    assert config.agents[0].system_prompt == "${CHAZ_TEST_INNER}"


# ---- files ----------------------------------------------------------------------------------


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("agents:\n  - name: alice\n  - name: bob\nstate_dir: /var/lib/chaz\n")
    config = load_config(path)
    assert [a.name for a in config.agents] == ["alice", "bob"]
    assert config.state_dir == Path("/var/lib/chaz")


def test_invalid_yaml_gives_a_line_number(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("state_dir: ./s\nagents:\n  - name: [a\nllm: {}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: line 4:")


def test_unknown_key_in_a_file_names_the_file_and_path(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("agents:\n  - name: a\n    colour: red\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: agents[0].colour: unknown key"


def test_missing_env_in_a_file_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAZ_TEST_TOKEN", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text("llm:\n  api_key: ${CHAZ_TEST_TOKEN}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert (
        message.startswith(str(path)) and "CHAZ_TEST_TOKEN" in message and "llm.api_key" in message
    )


def test_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"agents:\n  - name: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "\n" not in str(info.value) and "UTF-8" in str(info.value)


def test_explicit_missing_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(missing)
    monkeypatch.setenv("CHAZBOT_CONFIG", str(missing))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config()


def test_no_file_at_all_is_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config == file_defaults()
    assert [a.name for a in config.agents] == ["chaz"]


def test_default_file_in_cwd_and_env_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text("agents:\n  - name: from-cwd\n")
    assert [a.name for a in load_config().agents] == ["from-cwd"]
    other = tmp_path / "other.yaml"
    other.write_text("agents:\n  - name: from-env\n")
    monkeypatch.setenv("CHAZBOT_CONFIG", str(other))
    assert [a.name for a in load_config().agents] == ["from-env"]


def test_empty_file_is_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# nothing yet\n")
    assert load_config(path) == file_defaults()


def file_defaults() -> Config:
    """What a config file that sets nothing means: hybrid recall when the embedder is here."""
    embedding = EmbeddingConfig(backend="local") if local_embedder_installed() else None
    return Config(embedding=embedding)


def test_embedding_left_out_means_the_local_embedder_when_installed() -> None:
    assert parse_config({}, local_embedder=True).embedding == EmbeddingConfig(backend="local")
    assert parse_config({"embedding": None}, local_embedder=True).embedding is None  # BM25 only
    openai = {"embedding": {"backend": "openai", "model": "m"}}
    chosen = parse_config(openai, local_embedder=True)
    assert chosen.embedding is not None and chosen.embedding.backend == "openai"
    assert parse_config({}, local_embedder=False).embedding is None
    assert Config().embedding is None  # a Config built in Python means what it says


def test_capture_modes_and_yaml_booleans() -> None:
    agents = yaml.safe_load(
        "agents:\n  - {name: a, capture: off}\n  - {name: b, capture: facts}\n  - {name: c}\n"
        "  - {name: d, capture: on}\n"
    )
    cfg = parse_config(agents)
    assert [a.capture for a in cfg.agents] == ["off", "facts", "auto", "auto"]
    with pytest.raises(ConfigError, match=r"agents\[0\]\.capture"):
        parse_config({"agents": [{"name": "a", "capture": "everything"}]})


def test_encryption_follows_the_e2e_extra_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from chazbot.config import sections as c  # where MatrixConfig asks

    def matrix(encryption: bool | None = None) -> MatrixConfig:
        return MatrixConfig(homeserver_url="http://hs", user_id="@bot:hs", encryption=encryption)

    monkeypatch.setattr(c, "e2e_installed", lambda: True)
    assert matrix().encryption is None and matrix().use_encryption
    assert not matrix(encryption=False).use_encryption
    monkeypatch.setattr(c, "e2e_installed", lambda: False)
    assert not matrix().use_encryption
    assert matrix(encryption=True).use_encryption


def test_config_is_frozen() -> None:
    config = parse_config({})
    with pytest.raises(ValueError):
        config.state_dir = Path("/tmp")
