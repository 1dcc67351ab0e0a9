"""Agents from chat (#27): ``/agent new|set|reset|show|delete|reload`` and ``/agents`` through
``peer.command``, on a real state dir and the stand-in LLM over loopback HTTP.

The Matrix side (a real Synapse, a restart of ``chazbot run``) is ``test_agents_matrix.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

import chazbot
from chazbot.agent import local_llm
from chazbot.agent.definition import MAX_PROMPT_CHARS, NAME_FIELD, SETTINGS, merge, stored_ops
from chazbot.agent.recall import CONFIG_STORE
from chazbot.commands import TREE
from chazbot.config import AgentConfig, Config, LLMConfig, load_config
from chazbot.peer import Peer
from tests.support.standin_llm import StandinLLM, message_text
from tests.support.waits import wait_until

BASE_MODEL = "base-model"  # the config's default; the stand-in lists only its model_name


def config(tmp_path: Path, llm: StandinLLM, **kw: Any) -> Config:
    return Config(
        state_dir=tmp_path / "state",
        llm=llm.config(model=BASE_MODEL),
        embedding=None,
        **kw,
    )


@asynccontextmanager
async def reloadable(state: Path, path: Path) -> AsyncIterator[Peer]:
    """The peer in ``state`` with the config file ``path``, which a reload reads again (as
    ``chazbot run`` opens it)."""
    cfg = load_config(path).model_copy(update={"state_dir": state})
    peer = await Peer.open(cfg, config_loader=lambda: load_config(path))
    try:
        yield peer
    finally:
        await peer.close()


def config_file(tmp_path: Path, llm: StandinLLM) -> dict[str, Any]:
    """A config.yaml's data for a peer whose config ``/agent reload`` re-reads."""
    return {
        "state_dir": str(tmp_path / "state"),
        "sync_listen": "",
        "http_listen": "",
        "embedding": None,
        "llm": llm.client_settings(model=BASE_MODEL),
        "agents": [{"name": "chaz"}],
    }


@pytest.fixture
async def peer(tmp_path: Path, standin_llm: StandinLLM) -> AsyncIterator[Peer]:
    async with chazbot.open(tmp_path / "state", config(tmp_path, standin_llm)) as p:
        yield p


def system_prompt(request: dict[str, Any]) -> str:
    return message_text(request["messages"][0])


async def stored(peer: Peer, name: str) -> dict[str, Any]:
    return await peer.ledger.fields(peer.agent(name).db, CONFIG_STORE)


async def test_new_agent_is_listed_answers_with_its_prompt_and_model_and_survives_a_restart(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(tmp_path, standin_llm)
    async with chazbot.open(tmp_path / "state", cfg) as peer:
        r = await peer.command(
            '/agent new pirate system_prompt="You\'re a pirate. Say arr." '
            "model=standin-model capture=off default_memory_banks=sea-notes"
        )
        assert r.ok, r.text
        assert r.text.startswith("Made agent pirate, model standin-model"), r.text
        listed = (await peer.command("/agents")).text
        assert "- pirate: model standin-model, capture off, defined in chat" in listed
        assert f"- chaz (this session): model {BASE_MODEL} (the backend's default)" in listed
        assert "defined in config.yaml" in listed
        # the default bank was made and granted
        assert "sea-notes" in (await peer.command("/memory list")).text

        assert (await peer.command("/agent pirate", session="deck")).ok
        result = await peer.chat("hello there", session="deck")
        assert result.ok, result.text
        asked = standin_llm.last_request
        assert asked["model"] == "standin-model"
        assert system_prompt(asked).startswith("You're a pirate. Say arr.")

        fields = await stored(peer, "pirate")
        assert fields[NAME_FIELD] == "pirate"
        assert fields[SETTINGS["system_prompt"]] == "You're a pirate. Say arr."
        # /agent set takes the rest of the line as typed: apostrophes, two lines
        r = await peer.command("/agent set pirate system_prompt You're a parrot.\nSquawk.")
        assert r.ok, r.text
        assert peer.agent("pirate").config.system_prompt == "You're a parrot.\nSquawk."
    async with chazbot.open(tmp_path / "state", cfg) as peer:  # a restart
        agent = peer.agent("pirate")
        assert agent.config.system_prompt == "You're a parrot.\nSquawk."
        assert agent.config.model == "standin-model" and agent.config.capture == "off"
        assert agent.config.default_memory_banks == ["sea-notes"]
        result = await peer.chat("ahoy", session="deck")  # the room still has pirate
        assert result.ok and system_prompt(standin_llm.last_request).startswith("You're a parrot")
        shown = (await peer.command("/agent show pirate")).text
        assert shown.startswith("pirate: defined in chat; DB sha256:"), shown
        assert "- model [chat]: standin-model" in shown
        assert "- memory_audience [default]: room" in shown


async def test_bad_input_is_one_line_and_changes_nothing(
    peer: Peer, standin_llm: StandinLLM
) -> None:
    assert (await peer.command("/agent new parrot system_prompt=Hi")).ok
    before_fields = await stored(peer, "parrot")
    before_agents = sorted(peer.agents)
    before_hosted = [h.name for h in await peer.registry.all("agent")]
    bad = {
        "/agent new gull colour=grey": "unknown agent setting 'colour'",
        "/agent new gull model=gpt-9": "the chat backend has no model 'gpt-9'; it offers: "
        "standin-model",
        "/agent new gull allowed_tools=remember,fly": "no tool named fly",
        "/agent new gull capture=sometimes": "capture:",
        "/agent new gull system_prompt": "expected key=value",
        '/agent new gull system_prompt="unclosed': "cannot parse the settings",
        "/agent new 'bad name'": "bad agent name",
        "/agent new reload": "is a word of the agent command",
        "/agent new parrot": "exists already",
        "/agent new chaz": "exists already",
        "/agent set parrot colour grey": "key must be one of",
        "/agent set parrot model gpt-9": "no model 'gpt-9'",
        "/agent set parrot system_prompt " + "x" * (MAX_PROMPT_CHARS + 1): "at most 8,000",
        "/agent set parrot memory_audience everyone": "memory_audience:",
        "/agent set parrot default_memory_banks bad/name": "bad bank name",
        "/agent set parrot default_memory_banks notes,chaz": "'chaz' is an agent's name",
        "/agent new gull default_memory_banks=chaz": "'chaz' is an agent's name",
        "/agent set parrot system_prompt": "missing <value>",
        "/agent set nobody model standin-model": "no agent named 'nobody'",
        "/agent reset parrot colour": "key must be one of",
        "/agent show nobody": "no agent named 'nobody'",
    }
    for text, why in bad.items():
        r = await peer.command(text)
        assert not r.ok, text
        assert why in r.text, (text, r.text)
        assert "\n" not in r.text, (text, r.text)
    assert await stored(peer, "parrot") == before_fields
    assert sorted(peer.agents) == before_agents
    assert [h.name for h in await peer.registry.all("agent")] == before_hosted
    assert (await peer.command("/memory new reef")).ok
    r = await peer.command("/agent new reef")
    assert not r.ok and "is a bank's name" in r.text


async def test_a_model_is_checked_against_the_backends_list(
    peer: Peer, standin_llm: StandinLLM
) -> None:
    asked = standin_llm.models_requests
    r = await peer.command("/agent set chaz model standin-model")
    assert r.ok and r.text == "chaz.model is set.", r.text
    assert standin_llm.models_requests == asked + 1
    await peer.chat("hi")
    assert standin_llm.last_request["model"] == "standin-model"
    r = await peer.command("/agent reset chaz model")
    assert r.ok and r.text == "chaz.model now comes from default.", r.text
    await peer.chat("hi again")
    assert standin_llm.last_request["model"] == BASE_MODEL


async def test_chat_settings_win_over_config_yaml_and_reset_gives_it_back(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(
        tmp_path,
        standin_llm,
        agents=[AgentConfig(name="ava", system_prompt="You are Ava, from the file.")],
    )
    async with chazbot.open(tmp_path / "state", cfg) as peer:
        shown = (await peer.command("/agent show ava")).text
        assert "- system_prompt [config.yaml]: You are Ava, from the file." in shown
        assert (await peer.command("/agent set ava system_prompt You are Ava, from chat.")).ok
        shown = (await peer.command("/agent show ava")).text
        assert "- system_prompt [chat, over config.yaml]: You are Ava, from chat." in shown
        assert "defined in config.yaml + chat (system_prompt)" in shown
        listed = (await peer.command("/agents")).text
        assert "defined in config.yaml + chat (system_prompt)" in listed
        await peer.chat("hello")
        assert system_prompt(standin_llm.last_request).startswith("You are Ava, from chat.")
    async with chazbot.open(tmp_path / "state", cfg) as peer:
        assert peer.agent("ava").config.system_prompt == "You are Ava, from chat."
        r = await peer.command("/agent reset ava system_prompt")
        assert r.ok and r.text == "ava.system_prompt now comes from config.yaml.", r.text
        assert peer.agent("ava").config.system_prompt == "You are Ava, from the file."


async def test_a_non_admin_is_refused_every_verb(peer: Peer) -> None:
    assert (await peer.command("/agent new parrot")).ok
    before = await stored(peer, "parrot")
    for text in (
        "/agent new gull",
        "/agent set parrot system_prompt hacked",
        "/agent reset parrot system_prompt",
        "/agent show parrot",
        "/agent delete parrot",
        "/agent reload",
    ):
        r = await peer.command(text, is_admin=False)
        assert not r.ok and r.text.startswith("only admins may use /agent "), (text, r.text)
    assert await stored(peer, "parrot") == before
    assert "gull" not in peer.agents and "parrot" in peer.agents
    # listing stays open to everyone
    assert "- parrot: model" in (await peer.command("/agents", is_admin=False)).text


async def test_reload_applies_a_config_edit_and_a_bad_edit_changes_nothing(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    data = config_file(tmp_path, standin_llm)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    async with chazbot.open(tmp_path / "state", load_config(path)) as peer:
        r = await peer.command("/agent reload")
        assert not r.ok and "works in a running service" in r.text
    async with reloadable(tmp_path / "state", path) as peer:
        assert (await peer.command("/agent new parrot")).ok
        r = await peer.command("/agent reload")
        assert r.ok and r.text == "Config reloaded: 2 agents; nothing changed.", r.text

        data["agents"] = [
            {"name": "chaz", "default_memory_banks": ["team-notes"]},
            {"name": "sage", "system_prompt": "You are Sage."},
        ]
        path.write_text(yaml.safe_dump(data))
        r = await peer.command("/agent reload")
        assert r.ok, r.text
        assert "added sage" in r.text
        assert "updated chaz (default_memory_banks)" in r.text
        assert "default banks granted chaz→team-notes" in r.text
        assert "team-notes (write)" in (await peer.command("/agent", agent="chaz")).text
        assert sorted(peer.agents) == ["chaz", "parrot", "sage"]  # parrot is from chat
        r = await peer.command("/agent reload")  # idempotent
        assert r.text == "Config reloaded: 3 agents; nothing changed.", r.text

        data["agents"][1]["capture"] = "sometimes"
        path.write_text(yaml.safe_dump(data))
        config_before, agents_before = peer.config, dict(peer.agents)
        r = await peer.command("/agent reload")
        assert not r.ok and "agents[1].capture: Input should be" in r.text, r.text
        assert "\n" not in r.text
        assert peer.config is config_before and peer.agents == agents_before


async def test_delete_keeps_what_the_agent_knew_and_config_yaml_brings_it_back(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(tmp_path, standin_llm)
    async with chazbot.open(tmp_path / "state", cfg) as peer:
        assert (await peer.command('/agent new parrot system_prompt="You are Polly."')).ok
        parrot = peer.agent("parrot")
        await parrot.remember("cracker", "Polly likes crackers")
        assert (await peer.command("/agent parrot", session="deck")).ok
        r = await peer.command("/agent delete PARROT")
        assert r.ok, r.text
        assert r.text.startswith(
            "Deleted agent parrot: it no longer answers, and rooms that used it now get chaz. "
            f"Its DB {parrot.db[:19]}…"
        ), r.text
        assert "name it in config.yaml's agents and /agent reload" in r.text
        assert "parrot" not in peer.agents
        assert "parrot" not in (await peer.command("/agents")).text
        # the room that had chosen it is answered by the first agent, with its own prompt
        result = await peer.chat("hello", session="deck")
        assert result.ok and not system_prompt(standin_llm.last_request).startswith("You are P")
        r = await peer.command("/agent parrot", session="deck")
        assert not r.ok and "no agent named 'parrot'" in r.text, r.text
        # its name stays taken: a new agent would not get its DB or key
        r = await peer.command("/agent new parrot")
        assert not r.ok and "was hosted here before (its DB is kept)" in r.text, r.text
    async with chazbot.open(tmp_path / "state", cfg) as peer:  # a restart: still retired
        assert "parrot" not in peer.agents
    back = cfg.model_copy(update={"agents": [*cfg.agents, AgentConfig(name="parrot")]})
    async with chazbot.open(tmp_path / "state", back) as peer:
        again = peer.agent("parrot")
        assert again.db == parrot.db
        assert again.config.system_prompt == "You are Polly."  # its stored settings too
        assert [h.value for h in await again.recall("cracker")] == ["Polly likes crackers"]


async def test_delete_refuses_config_agents_room_agents_and_strangers_and_writes_nothing(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    data = config_file(tmp_path, standin_llm)
    data["matrix"] = {"homeserver_url": "http://127.0.0.1:1", "user_id": "@bot:example.org"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    async with reloadable(tmp_path / "state", path) as peer:
        r = await peer.command("/agent delete chaz")
        assert not r.ok and r.text == (
            "chaz is defined in config.yaml: remove it there, then reload the config"
        ), r.text
        r = await peer.command("/agent delete nobody")
        assert not r.ok and "no agent named 'nobody'; agents here: chaz" in r.text, r.text
        # matrix.room_agents may name an agent made in chat, and then it cannot go
        assert (await peer.command("/agent new parrot")).ok
        data["matrix"]["room_agents"] = {"!deck-*:example.org": ["parrot"]}
        path.write_text(yaml.safe_dump(data))
        r = await peer.command("/agent reload")
        assert r.ok, r.text
        assert [a.name for a in peer.hosting.allowed_agents("matrix:!deck-1:example.org")] == [
            "parrot"
        ]
        before = await stored(peer, "parrot")
        r = await peer.command("/agent delete parrot")
        assert not r.ok and r.text == (
            "matrix.room_agents names parrot (for !deck-*:example.org): take it out there first"
        ), r.text
        assert await stored(peer, "parrot") == before and "parrot" in peer.agents
        # a name that is no agent at all is the config's error, and the reload changes nothing
        data["matrix"]["room_agents"] = {"*": ["nobody"]}
        path.write_text(yaml.safe_dump(data))
        config_before = peer.config
        r = await peer.command("/agent reload")
        assert not r.ok and r.text == (
            "matrix.room_agents['*'] names no agent of config.yaml or made in chat: nobody"
        ), r.text
        assert peer.config is config_before
    # and at start
    from chazbot.errors import ConfigError

    with pytest.raises(ConfigError, match=r"room_agents\['\*'\] names no agent .*: nobody"):
        async with chazbot.open(tmp_path / "state", load_config(path)):
            pass


async def test_a_setting_written_to_the_agents_db_any_way_applies_at_once(
    peer: Peer, standin_llm: StandinLLM
) -> None:
    """Not only ``/agent set``: a change that reaches the agent's DB otherwise (by sync from
    another peer holding its key, or a direct write) is its definition from then on."""
    assert (await peer.command("/agent new parrot")).ok
    parrot = peer.agent("parrot")
    ops = stored_ops({"system_prompt": "You are Polly, synced."})
    await peer.ledger.write(parrot.db, parrot.key, {CONFIG_STORE: ops})

    async def redefined() -> bool:
        return parrot.config.system_prompt == "You are Polly, synced."

    await wait_until(redefined)
    assert (await peer.command("/agent parrot", session="deck")).ok
    assert (await peer.chat("hello", session="deck")).ok
    assert system_prompt(standin_llm.last_request).startswith("You are Polly, synced.")
    shown = (await peer.command("/agent show parrot")).text
    assert "- system_prompt [chat]: You are Polly, synced." in shown, shown


def test_merge_chat_over_file_over_defaults_and_bad_stored_values_are_ignored() -> None:
    file = AgentConfig(name="ava", system_prompt="file", capture="off")
    fields = {
        SETTINGS["system_prompt"]: "chat",
        SETTINGS["memory_audience"]: "everyone",  # not valid: ignored, not fatal
        SETTINGS["model"]: None,  # unset
    }
    found = merge("ava", file, fields)
    assert found.config.system_prompt == "chat" and found.config.capture == "off"
    assert found.config.memory_audience == "room" and found.config.model is None
    assert found.sources["system_prompt"] == "chat" and found.sources["capture"] == "config.yaml"
    assert found.sources["model"] == "default"
    assert found.overridden == ("system_prompt",) and found.ignored == ("memory_audience",)
    assert not found.in_chat and found.origin == "config.yaml + chat (system_prompt)"


def test_agent_verbs_are_their_own_commands() -> None:
    for verb in ("new", "set", "reset", "show", "delete", "reload"):
        command, args = TREE.parse(f"/agent {verb}x")  # an agent's name, not a verb
        assert command.path == ("agent",) and args == {"name": f"{verb}x"}, verb
    command, args = TREE.parse("/agent set a system_prompt Don't  panic")
    assert command.path == ("agent", "set") and args["value"] == "Don't  panic"
    command, args = TREE.parse("/agent reload")
    assert command.path == ("agent", "reload")


@pytest.mark.skipif(not local_llm.local_available(), reason="the local extra is not installed")
async def test_with_the_embedded_backend_an_agent_gets_its_own_gguf(tmp_path: Path) -> None:
    models = tmp_path / "state" / "models"
    models.mkdir(parents=True)
    gguf = models / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(28))  # the header is what is checked before a load
    cfg = Config(state_dir=tmp_path / "state", llm=LLMConfig(backend="local"), embedding=None)
    async with chazbot.open(tmp_path / "state", cfg) as peer:
        r = await peer.command("/agent new gull model=missing.gguf")
        assert not r.ok and "not one this peer offers" in r.text and "gull" not in peer.agents
        (models / "text.gguf").write_text("not a model")
        r = await peer.command("/agent new gull model=text.gguf")
        assert not r.ok and "is not a GGUF file" in r.text, r.text
        r = await peer.command("/agent new tiny model=tiny.gguf")
        assert r.ok, r.text
        own = peer.models.llm_for(peer.agent("tiny"))
        assert isinstance(own, local_llm.LocalChat) and own.source.file == gguf
        assert own is peer.models.llm_for(peer.agent("tiny"))  # made once
        assert peer.models.llm_for(peer.agent("chaz")) is peer.models.llm


@pytest.mark.skipif(not local_llm.local_available(), reason="the local extra is not installed")
async def test_chat_admins_pick_only_models_the_operator_allowed(tmp_path: Path) -> None:
    """No URL from chat (the host would fetch it), no path outside the models directory (a
    probe of what exists): one error, the same whether the path exists or not."""
    from aiohttp import web

    hits: list[str] = []

    async def gguf(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(body=b"GGUF" + bytes(28))

    app = web.Application()
    app.router.add_get("/{name}", gguf)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(b"GGUF" + bytes(28))
    allowed = tmp_path / "allowed.gguf"
    allowed.write_bytes(b"GGUF" + bytes(28))
    llm = LLMConfig(backend="local", chat_models={"small": str(allowed)})
    cfg = Config(state_dir=tmp_path / "state", llm=llm, embedding=None)
    try:
        async with chazbot.open(tmp_path / "state", cfg) as peer:
            answers = {}
            for model in (
                f"http://127.0.0.1:{port}/a.gguf",
                f"https://127.0.0.1:{port}/b.gguf",
                str(outside),
                str(tmp_path / "missing.gguf"),
                "/etc/passwd",
                "../../outside.gguf",
                "models/../../outside.gguf",
                "~/x.gguf",
            ):
                r = await peer.command(f"/agent set chaz model {model}")
                assert not r.ok, (model, r.text)
                answers[model] = r.text.replace(model[:80], "<model>")
                assert "\n" not in r.text.strip() and "small" in r.text, r.text
            assert len(set(answers.values())) == 1, answers  # nothing says what exists
            assert peer.agent("chaz").config.model is None
            peer.models.llm_for(peer.agent("chaz"))
            assert hits == []  # nothing was fetched
            r = await peer.command("/agent set chaz model small")
            assert r.ok, r.text
            own = peer.models.llm_for(peer.agent("chaz"))
            assert isinstance(own, local_llm.LocalChat) and own.source.file == allowed
            r = await peer.command("/agent new gull model=qwen2.5-coder-0.5b")
            assert r.ok, r.text
    finally:
        await runner.cleanup()


@pytest.mark.skipif(not local_llm.local_available(), reason="the local extra is not installed")
async def test_a_url_stored_from_chat_before_is_not_fetched(tmp_path: Path) -> None:
    """A definition stored by an older version (``/agent set … model https://…``) is not
    loaded: the peer's own model answers instead."""
    cfg = Config(state_dir=tmp_path / "state", llm=LLMConfig(backend="local"), embedding=None)
    async with chazbot.open(tmp_path / "state", cfg) as peer:
        url = "https://127.0.0.1:9/evil.gguf"
        ops = stored_ops({"model": url})
        chaz = peer.agent("chaz")
        await peer.ledger.write(chaz.db, chaz.key, {CONFIG_STORE: ops})

        async def redefined() -> bool:
            return peer.agent("chaz").config.model == url

        await wait_until(redefined)
        assert peer.models.llm_for(peer.agent("chaz")) is peer.models.llm


def test_chat_models_in_the_config_are_checked(tmp_path: Path) -> None:
    from chazbot.config import parse_config
    from chazbot.errors import ConfigError

    base = {"state_dir": str(tmp_path), "llm": {"backend": "local"}}
    ok = parse_config({**base, "llm": {"backend": "local", "chat_models": {"m": "x.gguf"}}})
    assert ok.llm is not None and ok.llm.chat_models == {"m": "x.gguf"}
    for models, said_ in (
        ({"bad\n": "x.gguf"}, "bad name"),
        ({"x.gguf": "y.gguf"}, "bad name"),
        ({"m": " "}, "needs a built-in"),
        ({"m": "http://example.org/m.gguf"}, "plain http"),
    ):
        with pytest.raises(ConfigError, match=said_):
            parse_config({**base, "llm": {"backend": "local", "chat_models": models}})
