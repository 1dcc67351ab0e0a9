"""A forget only heard is asked about before it is done (#47).

A voice message's transcript is handled like typed words (``transports.matrix.media``), but
a transcript can be misheard, and a voice note can carry someone else's words: "forget
everything" in one hid all of a person's rows. So a request to forget that was only heard
(``words.intent`` finds ``forget``) is held, per person in one room, and the bot asks; the
person's next typed message to the bot (commands aside: ``memory mine`` may be looked at
first) answers: "yes" (in any language of ``lexicon``) does it, as if
it had been typed; "no" says nothing was forgotten; anything else, a new voice message, or
``CONFIRM_MINUTES`` passing, drops it. Held in memory only, bounded; pure apart from the
clock passed in.
"""

from __future__ import annotations

import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from chazbot.agent.turn.quick import WORDS_MAX_CHARS
from chazbot.agent.words import Intent, intent
from chazbot.reminders.when import asks_for_reminder

CONFIRM_MINUTES = 10
MAX_PENDING = 256
"""Forgets waiting for a yes, over all rooms and people (the oldest is dropped first)."""

ANSWERS = {
    "en": ("yes y yep yeah ok okay sure confirm", "no n nope cancel stop dont"),
    "de": ("ja jawohl mach los", "nein abbrechen stopp"),
    "fr": ("oui d'accord confirme", "non annule annuler"),
    "es": ("sí si vale adelante confirmo", "no cancela cancelar"),
    "nl": ("ja oké oke prima", "nee annuleer stop"),
}
"""Per language, the words that answer yes and no (a whole message of one of them)."""
YES = frozenset(w for yes, _ in ANSWERS.values() for w in yes.split())
NO = frozenset(w for _, no in ANSWERS.values() for w in no.split())
ASK = {
    "en": "I act on a forget only when you type it: answer “yes” within {minutes} minutes to "
    "forget, anything else keeps it all.",
    "de": "Vergessen tue ich nur, was du tippst: antworte in den nächsten {minutes} Minuten "
    "„ja“, um es zu vergessen; alles andere behält es.",
    "fr": "Je n'oublie que sur un message écrit : réponds « oui » dans les {minutes} minutes "
    "pour oublier, toute autre réponse garde tout.",
    "es": "Solo olvido lo que escribes: responde «sí» en los próximos {minutes} minutos para "
    "olvidarlo; cualquier otra cosa lo conserva.",
    "nl": "Ik vergeet alleen wat je typt: antwoord binnen {minutes} minuten „ja” om het te "
    "vergeten; al het andere houdt het.",
}
KEPT = {
    "en": "OK: nothing forgotten.",
    "de": "OK: nichts vergessen.",
    "fr": "D'accord : rien n'est oublié.",
    "es": "Vale: no he olvidado nada.",
    "nl": "Oké: niets vergeten.",
}


@dataclass(frozen=True)
class Held:
    """A forget heard in a voice message, waiting for its person's typed answer."""

    said: str
    lang: str
    until: float


def asks_to_forget(said: str) -> Intent | None:
    """The forget that ``said`` asks for, read as a turn reads typed words (a reminder first;
    no request in words past ``WORDS_MAX_CHARS``), else None. Pure and slow on hostile text:
    run it off the event loop."""
    if len(said) > WORDS_MAX_CHARS or asks_for_reminder(said) is not None:
        return None
    found = intent(said)
    return found if found is not None and found.kind == "forget" else None


def _plain(text: str) -> str:
    """``text`` lowercased, its outer punctuation and spaces dropped, apostrophes straight."""
    folded = unicodedata.normalize("NFC", text).replace("\u2019", "'").lower()
    return " ".join(folded.strip(" \t\n.!?¡¿,;:…\"'“”„«»").split()).replace("don't", "dont")


class SpokenForgets:
    """Per (room, person), the forget last heard there and not yet answered."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: OrderedDict[tuple[str, str], Held] = OrderedDict()

    def ask(self, room: str, person: str, said: str, found: Intent | None) -> str | None:
        """For a transcript ``said`` by ``person`` in ``room`` that asks to forget (``found``,
        from ``asks_to_forget``): the question to ask (it is held until answered), else
        None. Any earlier one is dropped."""
        self._held.pop((room, person), None)
        if found is None or found.kind != "forget":
            return None
        while len(self._held) >= MAX_PENDING:
            self._held.popitem(last=False)
        lang = found.lang if found.lang in ASK else "en"
        self._held[(room, person)] = Held(said, lang, self._clock() + CONFIRM_MINUTES * 60)
        return ASK[lang].format(minutes=CONFIRM_MINUTES)

    def answer(
        self, room: str, person: str, typed: str
    ) -> tuple[Literal["yes"], str] | tuple[Literal["no"], str] | None:
        """What ``typed`` (the person's next typed message in ``room``) does to a held
        forget: ``("yes", the transcript to act on)``, ``("no", the line to answer)``, or
        None (nothing held, expired, or another message: it is dropped either way)."""
        held = self._held.pop((room, person), None)
        if held is None or held.until < self._clock():
            return None
        word = _plain(typed)
        if word in YES:
            return "yes", held.said
        if word in NO:
            return "no", KEPT[held.lang]
        return None


__all__ = [
    "ANSWERS",
    "ASK",
    "CONFIRM_MINUTES",
    "KEPT",
    "MAX_PENDING",
    "Held",
    "SpokenForgets",
    "asks_to_forget",
]
