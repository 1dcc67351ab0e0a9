"""A forget only heard waits for a typed yes (#47), pure: what is held, who may answer it,
in which words, and for how long."""

from __future__ import annotations

from chazbot.agent.spoken import CONFIRM_MINUTES, MAX_PENDING, SpokenForgets, asks_to_forget

ALICE, BOB = "@alice:example.org", "@bob:example.org"


class Heard(SpokenForgets):
    """A voice note's transcript as the Matrix transport hands it over."""

    def heard(self, room: str, person: str, said: str) -> str | None:
        return self.ask(room, person, said, asks_to_forget(said))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_forget_heard_is_held_until_its_person_types_yes() -> None:
    spoken = Heard(Clock())
    for said in ("forget everything", "Please forget my manager's name.", "vergiss alles"):
        question = spoken.heard("!r", ALICE, said)
        assert question is not None and "\n" not in question, said
        assert spoken.answer("!r", BOB, "yes") is None  # not Bob's to answer
        assert spoken.answer("!other", ALICE, "yes") is None  # nor in another room
        assert spoken.answer("!r", ALICE, "Yes!") == ("yes", said)
        assert spoken.answer("!r", ALICE, "yes") is None  # once
    # anything but a forget goes on as typed words
    assert spoken.heard("!r", ALICE, "remind me tomorrow at 9 to call Ines") is None
    assert spoken.heard("!r", ALICE, "what do you know about me?") is None
    assert spoken.heard("!r", ALICE, "forget everything " + "." * 3000) is None  # as a turn


def test_yes_and_no_in_each_language_and_anything_else_drops_it() -> None:
    spoken = Heard(Clock())
    for said, yes, no in (
        ("forget everything", "yes", "no"),
        ("vergiss alles", "Ja.", "nein"),
        ("oublie tout", "oui", "non"),
        ("olvida todo", "sí", "no"),
        ("vergeet alles", "ja", "nee"),
    ):
        asked = spoken.heard("!r", ALICE, said)
        assert asked is not None
        assert spoken.answer("!r", ALICE, yes) == ("yes", said)
        spoken.heard("!r", ALICE, said)
        found = spoken.answer("!r", ALICE, no)
        assert found is not None and found[0] == "no"
    spoken.heard("!r", ALICE, "forget everything")
    assert spoken.answer("!r", ALICE, "yes, and what's the weather?") is None  # dropped
    assert spoken.answer("!r", ALICE, "yes") is None
    spoken.heard("!r", ALICE, "forget everything")
    assert spoken.heard("!r", ALICE, "remind me at 9") is None  # a new voice note drops it
    assert spoken.answer("!r", ALICE, "yes") is None


def test_a_held_forget_expires_and_the_store_is_bounded() -> None:
    clock = Clock()
    spoken = Heard(clock)
    spoken.heard("!r", ALICE, "forget everything")
    clock.now += CONFIRM_MINUTES * 60 + 1
    assert spoken.answer("!r", ALICE, "yes") is None
    for n in range(MAX_PENDING + 1):
        spoken.heard(f"!r{n}", ALICE, "forget everything")
    assert spoken.answer("!r0", ALICE, "yes") is None  # the oldest made room
    assert spoken.answer(f"!r{MAX_PENDING}", ALICE, "yes") == ("yes", "forget everything")
