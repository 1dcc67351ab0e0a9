"""The Matrix transport's pure rules: routing, mentions, globs, reply shape, splitting."""

from __future__ import annotations

import json

import pytest

from chazbot.transports.matrix.rules import (
    MAX_CONTENT_BYTES,
    Me,
    Request,
    is_edit,
    is_mentioned,
    matches_any,
    notice_contents,
    relation,
    render_markdown,
    route,
    split_message,
    strip_mention,
    strip_reply_fallback,
    text_contents,
    transaction_id,
)

ME = Me("@chaz:example.org", ("Chaz Bot",))
WORDS = frozenset({"memory", "help", "agent", "agents", "clear", "pubkey", "sharing"})


def msg(body: str, **extra: object) -> dict[str, object]:
    return {"msgtype": "m.text", "body": body, **extra}


def r(content: dict[str, object], dm: bool = False) -> Request | None:
    return route(content, me=ME, prefix="!chaz", is_dm=dm, command_words=WORDS)


def test_globs() -> None:
    assert matches_any("@alice:example.org", ["@*:example.org"])
    assert not matches_any("@alice:evil.org", ["@*:example.org"])
    assert matches_any("@bob:x", ["@alice:x", "@b?b:x"])
    assert not matches_any("@Alice:example.org", ["@alice:example.org"])
    assert not matches_any("@alice:example.org", [])


def test_dm_answers_everything_group_only_prefix_or_mention() -> None:
    assert r(msg("hello there"), dm=True) == Request("chat", "hello there")
    assert r(msg("hello there")) is None
    assert r(msg("!chaz memory list")) == Request("command", "memory list")
    assert r(msg("!chaz memory list"), dm=True) == Request("command", "memory list")
    assert r(msg("!CHAZ Memory list")) == Request("command", "Memory list")
    assert r(msg("!chaz what is up?")) == Request("chat", "what is up?")
    assert r(msg("!chaz")) == Request("command", "help")
    assert r(msg("!chazzy memory list")) is None
    assert r(msg("!chaz agent bob")) == Request("command", "agent bob")


def test_mentions() -> None:
    ping = msg("hey you", **{"m.mentions": {"user_ids": ["@chaz:example.org"]}})
    assert r(ping) == Request("chat", "hey you")
    # m.mentions is authoritative: present but empty means nobody, even if the name is there
    assert r(msg("chaz is nice", **{"m.mentions": {}})) is None
    assert r(msg("@chaz:example.org: what now")) == Request("chat", "what now")
    assert r(msg("chaz, remember the sky is blue")) == Request("chat", "remember the sky is blue")
    assert r(msg("Chaz Bot: hi")) == Request("chat", "hi")
    assert r(msg("chazbot is a different word")) is None
    pill = msg(
        "Chaz Bot: hi",
        format="org.matrix.custom.html",
        formatted_body='<a href="https://matrix.to/#/%40chaz%3Aexample.org">Chaz Bot</a>: hi',
    )
    assert is_mentioned({**pill, "body": "hi"}, ME)
    assert r(pill) == Request("chat", "hi")
    assert r(msg("@chaz:example.org !chaz memory list")) == Request("command", "memory list")


def test_strip_mention_and_reply_fallback() -> None:
    assert strip_mention("@chaz: hello", ME) == "hello"
    assert strip_mention("hello chaz", ME) == "hello chaz"
    content = msg(
        "> <@bob:x> earlier\n> more\n\nthe answer",
        **{"m.relates_to": {"m.in_reply_to": {"event_id": "$e"}}},
    )
    assert strip_reply_fallback(str(content["body"]), content) == "the answer"
    assert strip_reply_fallback("> quote\n\ntext", msg("x")) == "> quote\n\ntext"


def test_edits_are_not_answered() -> None:
    assert is_edit(msg("* fixed", **{"m.relates_to": {"rel_type": "m.replace", "event_id": "$e"}}))
    assert not is_edit(msg("new"))


def test_relation_thread_or_reply() -> None:
    assert relation(msg("x"), "$e") == {"m.in_reply_to": {"event_id": "$e"}}
    threaded = msg("x", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}})
    assert relation(threaded, "$e") == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$e"},
    }


def test_reply_contents() -> None:
    [notice] = notice_contents("Banks:\n- a", "$e", msg("x"), "@alice:x")
    assert notice["msgtype"] == "m.notice" and notice["body"] == "Banks:\n- a"
    assert notice["m.relates_to"] == {"m.in_reply_to": {"event_id": "$e"}}
    [text] = text_contents("**bold** and `code`", "$e", msg("x"), "@alice:x")
    assert text["msgtype"] == "m.text"
    assert text["format"] == "org.matrix.custom.html"
    assert "<strong>bold</strong>" in text["formatted_body"]
    assert "<code>code</code>" in text["formatted_body"]


def test_markdown_escapes_raw_html() -> None:
    html = render_markdown(
        'hi <script>alert(1)</script> <img src=x onerror="y">\n\n<div>block</div>'
    )
    assert "<script>" not in html and "<img" not in html and "<div>" not in html
    assert "&lt;script&gt;" in html
    assert "<pre><code" in render_markdown("```python\nx = 1\n```")


def test_split_short_text_is_one_part() -> None:
    assert split_message("hello") == ["hello"]


def test_split_at_paragraphs_then_lines() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 30 for i in range(40)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    parts = split_message(text, 500)
    assert len(parts) > 1
    assert all(len(p) <= 500 for p in parts)
    assert "\n\n".join(parts) == text  # cut exactly at paragraph ends
    lines = "\n".join(f"line {i}" for i in range(500))
    parts = split_message(lines, 300)
    assert all(len(p) <= 300 for p in parts)
    assert "\n".join(parts) == lines


def test_split_hard_and_keeps_fences() -> None:
    blob = "x" * 2500
    parts = split_message(blob, 1000)
    assert "".join(parts) == blob and all(len(p) <= 1000 for p in parts)
    code = "```python\n" + "\n".join(f"print({i})" for i in range(300)) + "\n```"
    parts = split_message("intro\n\n" + code, 400)
    assert len(parts) > 2
    for part in parts[1:]:
        assert part.count("```") % 2 == 0, part  # every part's fences are balanced
    assert parts[1].startswith("```python")


@pytest.mark.parametrize("char", ["a", "é", "漢"])
def test_big_replies_fit_in_an_event(char: str) -> None:
    text = (char * 70 + "\n") * 1000
    parts = text_contents(text, "$e", msg("x"), "@a:x")
    assert len(parts) > 1
    for content in parts:
        assert len(json.dumps(content, ensure_ascii=False).encode()) <= MAX_CONTENT_BYTES
    assert "".join(c["body"].replace("\n", "") for c in parts) == text.replace("\n", "")


def test_transaction_ids_are_stable() -> None:
    assert transaction_id("$a", 0) == transaction_id("$a", 0)
    assert transaction_id("$a", 0) != transaction_id("$a", 1)
    assert transaction_id("$a", 0) != transaction_id("$b", 0)
