"""The sync wire format (``chazbot.sync.wire``): what each body accepts, and how a body that
does not fit is refused (one line naming the field, never pydantic's report)."""

from __future__ import annotations

import json

import pytest

from chazbot.errors import InputError
from chazbot.ledger import KeyPair
from chazbot.sync import SyncClient, wire

DB = "sha256:" + "ab" * 32
ID = "sha256:" + "cd" * 32


def refusal(model: type[wire.WireModel], body: bytes, **context: int) -> str:
    with pytest.raises(InputError) as caught:
        wire.parse(model, body, context or None)
    message = str(caught.value)
    assert message and "\n" not in message and "validation error" not in message, message
    assert "pydantic" not in message and "Input should" not in message, message
    return message


@pytest.mark.parametrize(
    ("model", "body", "says"),
    [
        (wire.EntriesRequest, b"not json", "body is not valid JSON"),
        (wire.EntriesRequest, b"\xff\xfe", "body is not valid JSON"),
        (wire.EntriesRequest, b"[1]", "body must be a JSON object"),
        (wire.EntriesRequest, b'{"after": -1}', "after must be an integer from 0 to"),
        (wire.EntriesRequest, b'{"after": true}', "after must be an integer"),
        (wire.EntriesRequest, b'{"after": 1.0}', "after must be an integer"),
        (wire.EntriesRequest, b'{"after": 4611686018427387905}', "after must be"),
        (wire.EntriesRequest, b'{"limit": 0}', "limit must be an integer from 1 to 1000"),
        (wire.EntriesRequest, b'{"limit": 1001}', "limit must be an integer from 1 to 1000"),
        (wire.EntriesRequest, b'{"wait": "x"}', "wait must be a number of seconds from 0 to 60"),
        (wire.EntriesRequest, b'{"wait": NaN}', "wait must be a number of seconds"),
        (wire.EntriesRequest, b'{"wait": 1e999}', "wait must be a number of seconds"),
        (wire.EntriesRequest, b'{"wait": 61}', "wait must be a number of seconds"),
        (wire.HaveRequest, b"{}", "ids must be a list of at most 1000 entry ids"),
        (wire.HaveRequest, b'{"ids": ["sha256:xyz"]}', "ids must be a list of at most 1000"),
        (wire.HaveRequest, json.dumps({"ids": [ID] * 1001}).encode(), "ids must be a list"),
        (wire.PushRequest, b'{"entries": "x"}', "entries must be a list of at most 1000 base64"),
        (wire.PushRequest, b'{"entries": ["%%%"]}', "an entry is not valid base64"),
        (wire.PushRequest, b'{"entries": [1]}', "an entry must be a base64 string"),
        (wire.AccessRequest, b'{"permission": "god"}', "permission must be one of: read, write"),
        (wire.AccessRequest, b"{}", "permission must be one of"),
    ],
)
def test_a_request_that_does_not_fit_gets_one_line(
    model: type[wire.WireModel], body: bytes, says: str
) -> None:
    assert says in refusal(model, body)


def test_requests_as_sent_are_read_back() -> None:
    assert wire.parse(wire.EntriesRequest, b"") == wire.EntriesRequest()  # empty body = {}
    ask = wire.parse(wire.EntriesRequest, b'{"after": 5, "limit": 10, "wait": 2, "new": 1}')
    assert (ask.after, ask.limit, ask.wait) == (5, 10, 2.0)  # an unknown field is ignored
    push = wire.PushRequest(entries=[b"\x00raw", b""])
    assert wire.parse(wire.PushRequest, push.model_dump_json().encode()) == push
    assert json.loads(push.model_dump_json()) == {"entries": ["AHJhdw==", ""]}
    assert wire.parse(wire.AccessRequest, b'{"permission": "admin"}').permission == "admin"


def test_a_huge_list_is_refused_by_its_length_before_its_items() -> None:
    """8 MiB of tiny items: refused for the count, so no validator ran per item (pydantic's
    own JSON path validates every item before the length)."""
    body = b'{"entries": [' + b",".join([b"1"] * 2_700_000) + b"]}"
    assert "at most 1000" in refusal(wire.PushRequest, body)  # not "must be a base64 string"
    assert "at most 1000" in refusal(wire.EntriesAnswer, body)
    # an id list stops at its first bad id (tips have no count bound but the answer's size)
    tips = {
        "db": DB,
        "tips": ["x"] * 200_000,
        "count": 0,
        "max_seq": 0,
        "log": "",
        "permission": "",
    }
    assert (
        refusal(wire.HeadsAnswer, json.dumps(tips).encode()) == "tips must be a list of entry ids"
    )


def answers() -> list[wire.WireModel]:
    return [
        wire.HeadsAnswer(db=DB, tips=[ID], count=3, max_seq=7, log="l", permission="read"),
        wire.EntriesAnswer(entries=[(3, b"a"), (5, b"b")], next=5, more=True, log="l"),
        wire.HaveAnswer(missing=[ID]),
        wire.PushAnswer(
            accepted=1,
            duplicates=2,
            refused=1,
            rejected=[("?", "entry belongs to another database")],
            tips=[ID],
            max_seq=9,
            log="l",
        ),
        wire.AccessAnswer(status="pending", request=4),
        wire.AccessAnswer(status="granted"),
        wire.ErrorAnswer(error="nope"),
    ]


@pytest.mark.parametrize("answer", answers(), ids=lambda a: type(a).__name__)
def test_answers_round_trip(answer: wire.WireModel) -> None:
    assert wire.parse(type(answer), answer.model_dump_json().encode()) == answer


def test_answers_as_the_wire_has_them() -> None:
    push = json.loads(answers()[3].model_dump_json())
    assert push["rejected"] == [{"id": "?", "reason": "entry belongs to another database"}]
    batch = json.loads(answers()[1].model_dump_json())
    assert batch["entries"] == [[3, "YQ=="], [5, "Yg=="]]
    long = wire.PushAnswer(
        accepted=0,
        duplicates=0,
        refused=1,
        rejected=[("x" * 100, "y" * 400)],
        tips=[],
        max_seq=0,
        log="",
    )
    assert [len(t) for t in long.rejected[0]] == [80, 300]  # cut, as the client always did
    assert wire.ErrorAnswer(error="two\nlines ").error == "two lines"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"entries": [], "next": 0, "more": True}, "more entries announced but none sent"),
        ({"entries": [[1, "YQ=="], [1, "YQ=="]], "next": 1}, "not increasing past the cursor"),
        ({"entries": [[0, "YQ=="]], "next": 0}, "not increasing past the cursor"),
        ({"entries": [[1, "YQ=="], [2, "YQ=="], [3, "YQ=="]], "next": 3}, "at most the limit"),
        ({"entries": [[1, "YQ=="]], "next": 2}, "next/more do not match"),
        ({"entries": [], "next": 5}, "next/more do not match"),
        ({"entries": [[1, "YQ==", 3]], "next": 1}, "an entry is not [seq, base64]"),
        ({"entries": [["1", "YQ=="]], "next": 1}, "seq is not an integer"),
        ({"entries": [], "next": 0, "more": 1}, "more must be true or false"),
        ({"entries": [], "next": 0, "log": "x" * 201}, "log must be a string of at most 200"),
    ],
)
def test_an_entries_answer_is_checked_against_its_request(
    body: dict[str, object], says: str
) -> None:
    full = {"more": False, "log": "l", **body}
    assert says in refusal(wire.EntriesAnswer, json.dumps(full).encode(), after=0, limit=2)


@pytest.mark.parametrize(
    ("model", "body", "says"),
    [
        (wire.HeadsAnswer, {"tips": []}, "db must be a database id"),
        (
            wire.HeadsAnswer,
            {"db": DB, "tips": [ID], "count": -1, "max_seq": 0, "log": "", "permission": ""},
            "count must be a count",
        ),
        (wire.HaveAnswer, {"missing": "x"}, "missing must be a list of at most 1000 entry ids"),
        (
            wire.PushAnswer,
            {"accepted": 0, "duplicates": 0, "refused": 0, "rejected": [3], "tips": []},
            "a refused entry is not {id, reason} strings",
        ),
        (wire.AccessAnswer, {"status": "maybe"}, "status must be granted, pending or rejected"),
        (wire.AccessAnswer, {"status": "pending", "request": -1}, "request must be"),
    ],
)
def test_an_answer_that_does_not_fit_gets_one_line(
    model: type[wire.WireModel], body: dict[str, object], says: str
) -> None:
    assert says in refusal(model, json.dumps(body).encode())


async def test_a_request_out_of_bounds_is_refused_before_it_is_sent() -> None:
    with pytest.raises(InputError, match=r"^after must be an integer from 0 to"):
        wire.build(wire.EntriesRequest, after=-1)
    client = SyncClient(KeyPair.generate(), allow_private_peers=True)
    try:
        with pytest.raises(InputError, match=r"^limit must be an integer from 1 to 1000$"):
            await client.entries("http:127.0.0.1:1", DB, 0, limit=5000)  # nothing listens
        with pytest.raises(InputError, match=r"^permission must be one of: read, write, admin$"):
            await client.access("http:127.0.0.1:1", DB, "owner")
    finally:
        await client.close()
