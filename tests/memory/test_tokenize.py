"""The tokenizer (SPEC §3) and the auto-recall query (SPEC §5); its normalisation of text
other than ASCII (``fold``, #47), the same for rows and queries."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from chazbot.memory.tokenize import (
    STOPWORDS,
    auto_recall_query,
    document_text,
    fold,
    tokenize,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("ops_note_a", ["ops", "note"]),
        ("snake_case_name", ["snake", "case", "name"]),
        ("Deploy on FRIDAY!", ["deploy", "on", "friday"]),
        ("it's a well-known e-mail, isn't it?", ["it", "well", "known", "mail", "isn", "it"]),
        ("a.b.c x,y;z", []),
        ("Grüße aus Köln", ["grüße", "aus", "köln"]),
        ("東京 タワー", ["東京", "タワー"]),
        ("東 is one char", ["東", "is", "one", "char"]),
        ("é e ß s", ["é", "ß"]),  # 2 UTF-8 bytes is enough, 1 is not
        ("v2 7 42 3.14", ["v2", "42", "14"]),
        ("deploy 🚀 now 👍🏽", ["deploy", "now"]),
        ("rocket🚀ship", ["rocket", "ship"]),
        ("dup dup DUP", ["dup", "dup", "dup"]),
        ("tab\tnew\nline", ["tab", "new", "line"]),
        ("", []),
        ("Ωmega ΣΊΣΥΦΟΣ", ["ωmega", "σίσυφος"]),
        ("١٢٣ arabic digits", ["١٢٣", "arabic", "digits"]),
        # #47: NFKC, then combining marks dropped: "é" composed or not is one word
        ("Gru\u0308ße aus Ko\u0308ln", ["grüße", "aus", "köln"]),
        ("cafe\u0301 café", ["café", "café"]),
        ("İstanbul", ["istanbul"]),
        ("ﬃx Ｆｕｌｌ", ["ffix", "full"]),
        ("w1\u0301w2 zalgo" + "\u0301" * 40, ["w1w2", "zalgó"]),
        ("\u0301\u0302\u20dd" * 50, []),  # marks alone are no word
        ("नमस्ते दुनिया", ["नमसत", "दनय"]),  # one word each, not one per letter
    ],
)
def test_tokenize_cases(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_document_text_joins_key_value_tags() -> None:
    assert document_text("ops_note_a", "deploy on monday", []) == "ops_note_a deploy on monday "
    assert document_text("k", "v", ["ops", "Prod"]) == "k v ops Prod"
    assert tokenize(document_text("ops_note_b", "deploy on friday", [])) == [
        "ops",
        "note",
        "deploy",
        "on",
        "friday",
    ]


@given(st.text())
@example("İstanbul ǅ ﬃ ΐ")  # lowercasing that changes length or makes combining marks
def test_tokens_are_lowercase_alnum_and_at_least_two_bytes(text: str) -> None:
    for tok in tokenize(text):
        assert tok == tok.lower()
        assert tok.isalnum()
        assert len(tok.encode("utf-8")) >= 2
        assert tok in fold(text)


@given(st.text())
@example("ops_note_a Grüße 東京 🚀 x")
def test_tokenize_is_idempotent_on_its_output(text: str) -> None:
    tokens = tokenize(text)
    assert tokenize(" ".join(tokens)) == tokens


@given(st.lists(st.text(alphabet="abcXYZé_- 1", max_size=12), max_size=6))
def test_tokenize_distributes_over_whitespace_joins(parts: list[str]) -> None:
    joined: list[str] = []
    for part in parts:
        joined += tokenize(part)
    assert tokenize(" ".join(parts)) == joined


def test_stopwords_are_lowercase_tokens() -> None:
    assert {"the", "and", "is", "don", "ll"} <= STOPWORDS
    for word in STOPWORDS:
        assert tokenize(word) == [word]


def test_auto_recall_query_drops_stopwords_keeps_first_distinct() -> None:
    messages = ["The deploy is on Friday", "What about THE deploy? ops_note says Friday"]
    assert auto_recall_query(messages) == ["deploy", "friday", "ops", "note", "says"]


def test_auto_recall_query_limits_distinct_tokens() -> None:
    words = [f"word{i}" for i in range(30)]
    assert auto_recall_query([" ".join(words)]) == words[:10]
    assert auto_recall_query([" ".join(words)], max_tokens=3) == words[:3]
    assert auto_recall_query(["alpha alpha beta alpha gamma"], max_tokens=2) == ["alpha", "beta"]
    assert auto_recall_query(["alpha"], max_tokens=0) == []


def test_auto_recall_query_of_only_stopwords_is_empty() -> None:
    assert auto_recall_query(["Is it the same, or is it not?", "", "I am"]) == []
    assert auto_recall_query([]) == []


def test_auto_recall_query_joins_messages_with_a_separator() -> None:
    assert auto_recall_query(["deploy", "friday"]) == ["deploy", "friday"]
