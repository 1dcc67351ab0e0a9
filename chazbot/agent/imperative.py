"""Whether a message only asks the bot to do something (#45, "what is kept"): "Write me a
short poem", "Nimm die Nüsse aus dem Rezept raus", "Fais-moi une liste de courses",
"Cuéntame un chiste", "Maak de lijst korter". Such a message tells nothing of the person, and
capture does not keep it as a thing they said.

A sentence is a command when, past greetings, fillers and the bot's name, it opens with an
imperative of one of the five languages (``IMPERATIVES``; French and Spanish with the
pronoun they carry: "Raconte-*moi*", "Escríbe*me*") and names nothing of the person but as
the one served ("me", "mir", "moi", "mij"). A message is only that when each of its
sentences is a command, a question or small talk, and one at least is a command. A
sentence that tells anything ("I just moved", "Let me tell you, my garden …") keeps it.
"""

from __future__ import annotations

import re
import unicodedata

from chazbot.agent.reading import small_talk, split_words
from chazbot.agent.request_words import READ


def _ws(text: str) -> frozenset[str]:
    return frozenset(w.strip() for w in text.split(",") if w.strip())


IMPERATIVES = _ws(
    # English
    "write, tell, translate, summarize, summarise, make, give, show, find, explain, list, "
    "plan, draft, create, send, check, book, search, compose, describe, suggest, recommend, "
    "fix, add, calculate, convert, answer, take, put, turn, pick, order, schedule, sort, "
    "count, repeat, reply, rewrite, shorten, correct, proofread, generate, teach, organize, "
    "organise, prepare, format, edit, improve, simplify, expand, outline, brainstorm, remove, "
    "delete, erase, scratch, drop, replace, swap, cut, move, rename, update, change, set, "
    # German
    "schreib, schreibe, erzähl, erzähle, übersetz, übersetze, mach, mache, gib, zeig, zeige, "
    "such, suche, finde, erklär, erkläre, plane, nenn, nenne, fass, stell, setz, schick, "
    "schicke, bring, nimm, lösch, lösche, entfern, entferne, füg, füge, ändere, änder, "
    "korrigiere, formuliere, vergleiche, berechne, rechne, empfiehl, schlag, organisier, "
    "organisiere, bereite, hilf, lies, buche, streich, streiche, kürze, kürz, ergänze, "
    "erstelle, erstell, entwirf, tausch, tausche, ersetze, ersetz, "
    # French
    "écris, raconte, traduis, fais, donne, montre, cherche, trouve, explique, planifie, "
    "organise, propose, envoie, ajoute, enlève, retire, supprime, mets, rends, résume, "
    "calcule, compare, corrige, reformule, prépare, réserve, modifie, crée, rédige, suggère, "
    "recommande, choisis, convertis, vérifie, remplace, raccourcis, efface, "
    # Spanish
    "escribe, cuenta, traduce, haz, muestra, busca, encuentra, explica, planea, planifica, "
    "organiza, propón, envía, manda, añade, quita, elimina, borra, pon, resume, calcula, "
    "compara, corrige, reformula, prepara, reserva, cambia, crea, redacta, sugiere, "
    "recomienda, elige, convierte, revisa, reemplaza, acorta, dame, dime, "
    # Dutch
    "schrijf, vertel, vertaal, maak, geef, toon, zoek, vind, plan, organiseer, stel, stuur, "
    "voeg, haal, verwijder, zet, vat, bereken, vergelijk, verbeter, herschrijf, noem, boek, "
    "verander, wijzig, bedenk, kies, controleer, vervang, kort, schrap"
)
"""Imperatives that ask the bot to do something, in the five languages (no word that is
another language's common word: "da", "leg", "dis" are left out)."""
SMALL_TALK_COMMANDS = _ws(
    "take care, take it from me, look, listen, wait, guess what, tell me about it, tell me more, "
    "make sure, imagine that, show me what you've got"
)
"""Openings that are conversation, not a task ("Take care!", "Tell me more!")."""
_SERVED = _ws("me, mir, mich, moi, nous, uns, mij, ons, nos, us")
_PERSON = frozenset(w for lang in READ for w in lang.person) - _SERVED
_FILLER = tuple(sorted({f for lang in READ for f in lang.filler}, key=len, reverse=True))
_CLITIC = re.compile(r"(?:melo|mela|selo|sela|me|nos|lo|la|los|las|le|les)$")
_SENTENCES = re.compile(r"[^.!?¿¡]+[.!?]*|[¿¡][^.!?]*[.!?]*")


def _plain(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


_PLAIN_IMPERATIVES = frozenset(_plain(w) for w in IMPERATIVES)


def _imperative(word: str) -> bool:
    """``word`` an imperative, with a pronoun joined ("raconte-moi", "escríbeme")."""
    base = word.split("-")[0]
    if base in IMPERATIVES:
        return True
    plain = _plain(base)
    stripped = _CLITIC.sub("", plain)
    return stripped != plain and len(stripped) >= 2 and stripped in _PLAIN_IMPERATIVES


def _skip(words: list[str], names: frozenset[str]) -> int:
    at = 0
    while at < len(words):
        if words[at] in names or words[at] in (",", "!", ":"):
            at += 1
            continue
        for filler in _FILLER:
            parts = filler.split()
            if words[at : at + len(parts)] == parts:
                at += len(parts)
                break
        else:
            break
    return at


def command(sentence: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether one sentence asks the bot to do something and tells nothing (see the module)."""
    words = split_words(sentence)
    at = _skip(words, names)
    if at >= len(words) or not _imperative(words[at]):
        return False
    if any(words[at : at + len(s.split())] == s.split() for s in SMALL_TALK_COMMANDS):
        return False
    return not any(w in _PERSON or w.split("'")[0] + "'" in _PERSON for w in words[at + 1 :])


def only_commands(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether every sentence of ``text`` is a command, a question or small talk, one at
    least a command or a question ("¿Te acuerdas del cumpleaños de Ana? Gracias.")."""
    lowered = frozenset(n.lower() for n in names)
    sentences = [s.strip() for s in _SENTENCES.findall(text) if split_words(s)]
    asked = 0
    for sentence in sentences:
        if command(sentence, lowered) or sentence.rstrip()[-1:] == "?":
            asked += 1
        elif not small_talk(sentence, names):
            return False
    return asked > 0


__all__ = ["IMPERATIVES", "SMALL_TALK_COMMANDS", "command", "only_commands"]
