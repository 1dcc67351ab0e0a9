"""Answers a turn gives without asking the model: what ``words.intent`` finds (#17).

- the intro ("what can you do?", "help"): what the bot remembers, how to see and forget it,
  how to address it in a group, the ``help`` pointer;
- "what do you know about me?": the person's own rows this room may see;
- "forget …" (models without tools): the person's own rows that best match the words, hidden
  as ``/memory forget-mine`` would (never anyone else's), answered with what was forgotten;
- "remember that …" (models without tools): one row said by the person.

And the honest answer of a model without tools, asked about the person with nothing
recalled: that it does not know yet, never an invented fact (the embedded 0.5B model answered
"What is my cat's name?" with the dog's name).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from chazbot.agent.answering import choose_row, fits, read_question
from chazbot.agent.capture import Said, message_row, speaker_name
from chazbot.agent.grounding import FUNCTION, POSSESSIVES, QUESTION, evidence, supports
from chazbot.agent.lexicon import reply
from chazbot.agent.undo import UNDO_MINUTES, UndoSlots
from chazbot.agent.words import Intent, as_said_to_them, language, told
from chazbot.memory.rows import MemoryRow, said_text
from chazbot.memory.tokenize import auto_recall_query, document_text, tokenize

if TYPE_CHECKING:
    from chazbot.agent.session import Session
    from chazbot.memory.audience import Audience
    from chazbot.memory.scope import MemoryScope

PLAIN_WORDS = FUNCTION | QUESTION | POSSESSIVES
"""Words that name nothing to forget, in the five languages ("wo *ich* geboren *bin*": "ich"
found every row told in German)."""
FORGET_RATIO = 0.8
"""Rows scoring at least this share of the best match are forgotten with it: "forget my
sister" takes both sister rows; "forget my manager's name" not the sister's name row."""
FORGET_CANDIDATES = 20
ATTRIBUTE_WORDS = frozenset(
    [
        "name",
        "names",
        "named",
        "called",
        "thing",
        "things",
        "stuff",
        "fact",
        "facts",
        "info",
        "information",
        "detail",
        "details",
        "favourite",
        "favorite",
        "live",
        "lives",
    ]
)
"""Dropped from what to forget when other words remain: in "forget my manager's name" the
manager is what names the row (with another person's manager row about, BM25 gave "name"
the higher idf and picked the sister's name)."""
ABOUT_SHOWN = 10
DONT_KNOW = reply("en", "dont_know")
"""The English "I don't know" (``dont_know`` answers in the language asked in)."""


def dont_know(question: str) -> str:
    """ "I don't know" in the language of ``question`` (``words.language``: the one guess of
    the language, as the acknowledgement makes it), English when none is told apart."""
    return reply(language(question), "dont_know")


def unsupported(question: str, shown: Sequence[MemoryRow], memory: MemoryScope, sender: str) -> str:
    """The reply when the model's answer about the person stood on nothing it was shown
    (``grounding.grounded``): when exactly one shown row *the person said* answers the
    question (``grounding.supports``: its subject and predicate), their own words from it,
    turned to them ("You told me: your father works as a carpenter."), in the language asked
    in; otherwise "I don't know". A small model often paraphrases the right row into words
    the row does not have ("His job is to make furniture."): the row itself is what they
    said. Another person's row is never quoted as theirs."""
    speaker = _speaker(memory, sender)
    whom = read_question(question)  # "What does Ben do?" is not answered by the asker's job
    said = {
        said_text(r.value).strip()
        for r in shown
        if (r.origin.speaker == speaker if r.origin is not None else speaker is None)
        and supports(evidence(r), question)
        and fits(evidence(r), whom)
    }
    if len(said) != 1:
        return dont_know(question)
    (text,) = said
    words = as_said_to_them(text.rstrip(" .!"), language(text))
    if words.startswith(("Your ", "You ")):
        words = words[0].lower() + words[1:]
    return reply(language(question), "you_said", what=words)


def false_friend(row: MemoryRow, question: str) -> bool:
    """Whether ``row`` shares words with ``question`` only through attribute words: "What is
    my cat's name?" and "My sister's name is Ada" share "name", and a small model asked the
    first with the second beside it answered "Ada". Rows that share no word at all came from
    the vector ranker and stand or fall by its floor; a row that answers the question
    (``grounding.supports``) is kept whatever words it shares."""
    asked_words = set(auto_recall_query([question], 10))
    shared = asked_words & set(tokenize(f"{row.key} {row.value}"))
    if not shared or not shared <= ATTRIBUTE_WORDS:
        return False
    # a row the answer check would stand on is no false friend: "I live in Utrecht" for
    # "Which city do I live in?" shares only "live", and is the answer
    return not supports(evidence(row), question)


def intro(agent: str, prefix: str, lang: str = "en") -> str:
    """What the bot is and how to use it, in ``lang`` (``lexicon.REPLIES``, "intro")."""
    return reply(lang, "intro", agent=agent, prefix=prefix, bare=prefix.strip())


def _speaker(memory: MemoryScope, sender: str) -> str | None:
    """Whose rows are the person's: their MXID, or the operator's (None) in the terminal."""
    return sender if memory.hearing.origin is not None else None


def _alone(memory: MemoryScope, sender: str) -> bool:
    audience = memory.hearing.audience
    return audience is None or audience.full or audience.only(sender)


async def about_me(memory: MemoryScope, sender: str, lang: str = "en") -> str:
    """The person's own rows this room may see, newest first, in ``lang``."""
    view = await memory.engine.view(memory.db)
    everywhere = _alone(memory, sender)
    rows = view.rows_by(_speaker(memory, sender), None if everywhere else memory.hearing.audience)
    if not rows:
        return reply(lang, "told_nothing" if everywhere else "told_nothing_here")
    lines = [f"- {_plain(r)}" for r in rows[:ABOUT_SHOWN]]
    if len(rows) > ABOUT_SHOWN:
        head = reply(lang, "told_newest", shown=ABOUT_SHOWN, total=len(rows))
    else:
        head = reply(lang, "told")
    return head + "\n" + "\n".join(lines)


def _plain(row: MemoryRow) -> str:
    """A row's value without the "speaker (date): " that captured rows start with."""
    return said_text(row.value)


async def forget_words(
    memory: MemoryScope, sender: str, what: str, undo: UndoSlots | None = None, lang: str = "en"
) -> str:
    """Hide the person's own rows that best match ``what`` ("" for all of them); what was
    hidden goes to ``undo`` for a while (``agent.undo``). Rows that share a word with ``what``
    go first; without one, the rows it names by meaning (``forget_by_meaning``): one clearly,
    or several listed to choose from (``undo.offer``), never "nothing kept" while a row of
    theirs is near by meaning."""
    speaker = _speaker(memory, sender)
    everywhere = _alone(memory, sender)
    view = await memory.engine.view(memory.db)
    audience = None if everywhere else memory.hearing.audience
    if not what:
        rows = view.rows_by(speaker, audience)
    else:
        words = [w for w in auto_recall_query([what], 10) if w not in PLAIN_WORDS]
        words = [w for w in words if w not in ATTRIBUTE_WORDS] or words
        found = view.search(" ".join(words), (), FORGET_CANDIDATES, None, audience)
        named = read_question(what)  # whose: "où j'habite" is not "ma mère habite"
        mine = [
            r
            for r in found
            if r.bm25 is not None
            and (r.row.origin.speaker if r.row.origin is not None else None) == speaker
            and says_any(r.row, words)
            and fits(evidence(r.row), named)
        ]
        best = max((r.score for r in mine), default=0.0)
        rows = [r.row for r in mine if r.score >= FORGET_RATIO * best]
        # no words to search by ("forget 5 from your memory": digits of one byte are no
        # token): the row whose key the words end with
        rows = rows or keyed(view.rows_by(speaker, audience), what)
        if not rows:
            rows, listed = await forget_by_meaning(memory, speaker, what, audience)
            if listed:
                if undo is not None:
                    undo.offer(sender, memory.db, listed, lang)
                return which_one(listed, lang)
    return await _forget(memory, sender, rows, undo, lang, what)


async def _forget(
    memory: MemoryScope,
    sender: str,
    rows: list[MemoryRow],
    undo: UndoSlots | None,
    lang: str,
    what: str = "",
) -> str:
    if not rows:
        return reply(lang, "none", what=what) if what else reply(lang, "none_at_all")
    await memory.engine.forget_rows(memory.db, memory.key, rows, memory.hearing.origin)
    if undo is not None:
        undo.put(sender, memory.db, rows)
    return reply(lang, "forgotten", what=_listed(rows), minutes=UNDO_MINUTES)


FORGET_MARGIN = 0.02
"""A forget by meaning takes the nearest row alone when it is nearer ``what`` than the next
row of the person's by this much (cosine); otherwise the near ones are listed."""
FORGET_LISTED = 4


async def forget_by_meaning(
    memory: MemoryScope, speaker: str | None, what: str, audience: Audience | None
) -> tuple[list[MemoryRow], list[MemoryRow]]:
    """The person's rows ``what`` names by meaning, across languages: (rows to forget, rows
    to list and ask about). A row whose subject and attribute fit ``what`` read as a question
    (``answering.fits``: "wie mein Hund heißt" → the dog's name) is named alone when it is the
    only one or the clear nearest by cosine; otherwise the near rows are listed."""
    engine = memory.engine
    view = await engine.view(memory.db)
    vector = await engine.query_vector(what)
    if vector is None:
        return [], []
    floor = engine.similarity_floor(None)
    found = view.search(what, (), FORGET_CANDIDATES, vector, audience, None, engine.ranking)
    mine = [
        (r.row, r.cosine if r.cosine is not None else 0.0)
        for r in found
        if (r.row.origin.speaker if r.row.origin is not None else None) == speaker
    ]
    mine.sort(key=lambda rc: rc[1], reverse=True)
    q = read_question(what)
    # the row a question of the same words would be answered from (its subject, its kind,
    # the five languages' words for what it names: "hoe mijn papegaai heet" and "Unser
    # Papagei Kiwi …"): one place decides both (#45)
    chosen = await choose_row(memory, q, asker=speaker, only_asker=True)
    if chosen is not None:
        return [chosen], []
    fitting = [(row, cos) for row, cos in mine if fits(evidence(row), q)]
    if not fitting:  # nothing fits what it names: the near ones are listed, none forgotten
        near = [row for row, cos in mine if floor is None or cos >= floor]
        return [], near[:FORGET_LISTED]
    by_words = [row for row, _ in fitting if supports(evidence(row), what)]
    if len(by_words) == 1:  # "welche Sprachen ich spreche" and "Ik spreek … Japans"
        return by_words, []
    rest = [cos for row, cos in mine if row is not fitting[0][0]]
    if len(fitting) == 1 or not rest or fitting[0][1] - max(rest) >= FORGET_MARGIN:
        return [fitting[0][0]], []
    return [], [row for row, _ in fitting[:FORGET_LISTED]]


def which_one(rows: Sequence[MemoryRow], lang: str) -> str:
    """The numbered list of rows a forget could mean, and the question which."""
    lines = [f"{i}. {_plain(row)}" for i, row in enumerate(rows, 1)]
    return reply(lang, "which", rows="\n".join(lines))


_CHOICE = re.compile(r"^\W*(\d{1,2})\W*$")


async def choose_forget(
    memory: MemoryScope, sender: str, text: str, undo: UndoSlots, lang: str = "en"
) -> str | None:
    """The person's answer to ``which_one`` (a number of the list): that row forgotten;
    None when no list waits for them or ``text`` is no number of it."""
    match = _CHOICE.match(text)
    if match is None or not undo.offered(sender):
        return None
    offer = undo.chosen(sender)
    index = int(match.group(1)) - 1
    if offer is None or offer.db != memory.db or not 0 <= index < len(offer.rows):
        return None
    return await _forget(memory, sender, [offer.rows[index]], undo, offer.lang)


async def forget_last(
    memory: MemoryScope, sender: str, session: Session, undo: UndoSlots, lang: str = "en"
) -> str:
    """ "Forget what I just said": the rows captured from the person's previous message in
    this room (capture names them by the message's place in the history)."""
    said = [m for m in await session.history(40) if m.role == "user" and m.sender == sender]
    if len(said) < 2:
        return reply(lang, "none_last")
    source = hashlib.sha256(f"{session.db}:{said[-2].n}".encode()).hexdigest()[:8]
    view = await memory.engine.view(memory.db)
    audience = None if _alone(memory, sender) else memory.hearing.audience
    rows = [
        r for r in view.rows_by(_speaker(memory, sender), audience) if r.key.endswith("/" + source)
    ]
    if not rows:
        return reply(lang, "none_last")
    return await _forget(memory, sender, rows, undo, lang)


def keyed(rows: Sequence[MemoryRow], what: str) -> list[MemoryRow]:
    """Those of ``rows`` whose key ``what`` names: all of it, or its last words ("my 5",
    "the key 5"), the longest that is a key, compared case-insensitively."""
    by_key: dict[str, list[MemoryRow]] = {}
    for row in rows:
        by_key.setdefault(row.key.casefold(), []).append(row)
    words = what.split()
    for start in range(len(words)):
        found = by_key.get(" ".join(words[start:]).casefold())
        if found:
            return found
    return []


def says_any(row: MemoryRow, words: list[str]) -> bool:
    """Whether the row itself (key, value, tags: SPEC §3's document) has one of ``words``:
    recall also finds a told row by its teller and its day (``view.indexed_tokens``), which
    must not make "forget what I said about May" hide everything said in May."""
    own = set(tokenize(document_text(row.key, row.value, row.tags)))
    return any(w in own for w in words)


def _listed(rows: list[MemoryRow] | tuple[MemoryRow, ...]) -> str:
    shown = "; ".join(f'"{_plain(r)}"' for r in rows[:3])
    return shown + (f" (+{len(rows) - 3})" if len(rows) > 3 else "")


async def undo_forget(memory: MemoryScope, sender: str, undo: UndoSlots, lang: str = "en") -> str:
    """Bring back what ``sender`` forgot last in this room, if the window is still open."""
    found = undo.take(sender, memory.db)  # another agent's rows stay for its own undo
    if found is None:
        return reply(lang, "nothing_to_undo")
    rows = found.rows_in(memory.db)
    await restore_rows(memory, rows)
    # told only what the room may hear now (someone may have come in since the forget)
    heard = memory.hearing.audience
    told = [r for r in rows if heard is None or heard.sees(r.origin, r.scope)]
    kept = len(rows) - len(told)
    what = " ".join(filter(None, [_listed(told) if told else "", f"(+{kept})" if kept else ""]))
    return reply(lang, "undone", what=what)


async def restore_rows(memory: MemoryScope, rows: tuple[MemoryRow, ...]) -> None:
    """Write ``rows`` again as they were (key, value, tags, provenance, scope); their
    vectors come later, in the background, as captured rows' do."""
    for row in rows:
        await memory.engine.remember(
            memory.db,
            memory.key,
            row.key,
            row.value,
            list(row.tags),
            None,
            row.origin,
            row.scope,
            vector_later=True,
        )


async def remember_words(
    memory: MemoryScope, sender: str, what: str, session_db: str, lang: str = "en"
) -> str:
    """Keep ``what`` as a row the person said (as message capture shapes one)."""
    when = datetime.now(UTC)
    source = hashlib.sha256(f"{session_db}:{when.timestamp()}:{what}".encode()).hexdigest()[:8]
    said = Said(speaker_name(sender), when, what, None, source)
    key, value, tags = message_row(said)
    await memory.remember(key, value, tags)
    return reply(lang, "remembered", what=as_said_to_them(what.rstrip(".!"), lang))


NOTED = "Noted: {fact}."
"""The acknowledgement of a told fact (#40) in English: the fact in the listener's words,
nothing added; in the person's language it is ``lexicon.REPLIES[lang]["remembered"]``."""


def acknowledgement(text: str, names: tuple[str, ...] = ()) -> str | None:
    """ "Noted: your cat is called Miso." for a message that tells a fact to keep, for every
    model (a small one elaborated: "Miso is a domesticated cat from the United States"), in
    the language it was told in ("Notiert: dein Hund heißt Rex."), or None when the message
    is anything else (the model answers it)."""
    fact = told(text, names)
    return None if fact is None else reply(language(text), "remembered", what=fact)


async def answer(
    found: Intent,
    memory: MemoryScope,
    agent: str,
    sender: str,
    tools: frozenset[str],
    session: Session,
) -> str | None:
    """The reply to ``found`` without the model, or None when the model should answer:
    ``tools`` are the tools the model may call (a forget or remember in words is the
    model's when it has that tool; otherwise, whatever the model, it is answered here).
    Commands it names are written as where ``memory`` is heard (``hearing.prefix``)."""
    if found.kind == "intro":
        return intro(agent, memory.hearing.prefix, found.lang)
    if found.kind == "about_me":
        return await about_me(memory, sender, found.lang)
    if found.kind == "undo":
        return await undo_forget(memory, sender, session.undo, found.lang)
    if found.kind == "forget_last":
        return await forget_last(memory, sender, session, session.undo, found.lang)
    if found.kind == "choose":
        return await choose_forget(memory, sender, found.what, session.undo, found.lang)
    if found.kind in tools:
        return None  # a model given the forget (remember) tool does it by calling it
    if found.kind == "forget":
        return await forget_words(memory, sender, found.what, session.undo, found.lang)
    return await remember_words(memory, sender, found.what, session.db, found.lang)


__all__ = [
    "DONT_KNOW",
    "NOTED",
    "about_me",
    "acknowledgement",
    "answer",
    "choose_forget",
    "dont_know",
    "false_friend",
    "forget_by_meaning",
    "forget_last",
    "forget_words",
    "intro",
    "remember_words",
    "restore_rows",
    "undo_forget",
    "unsupported",
    "which_one",
]
