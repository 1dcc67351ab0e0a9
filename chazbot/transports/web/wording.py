"""The person's pages in the person's language (#45: everywhere the person reads, the bot's
own text is theirs): the language their browser asks for (``Accept-Language``), one of the
five the bot speaks, else English. The admin pages stay in English (``Pages.page`` hands
them ``ENGLISH``).

Only the page's own words are here; what a person said is shown as they said it, and dates
are written by Babel in the page's language (``dated``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from babel.dates import format_skeleton

from chazbot.commands.tree import Meaning
from chazbot.reminders.wording import LANGS

_WORDS: dict[str, tuple[str, str, str, str, str]] = {
    # key: (en, de, fr, es, nl)
    "title_me": (
        "What the bot keeps that you said",
        "Was der Bot von dir behält",
        "Ce que le bot garde de ce que tu as dit",
        "Lo que el bot guarda de lo que dijiste",
        "Wat de bot bewaart van wat je zei",
    ),
    "title_login": ("Sign in", "Anmelden", "Connexion", "Iniciar sesión", "Inloggen"),
    "my_memory": ("My memory", "Mein Gedächtnis", "Ma mémoire", "Mi memoria", "Mijn geheugen"),
    "sign_out": ("Sign out", "Abmelden", "Se déconnecter", "Cerrar sesión", "Uitloggen"),
    "operator": (
        "You signed in as the operator: what you say in the terminal is the operator's, not a "
        "person's. The admin pages are yours.",
        "Du bist als Betreiber angemeldet: Was du im Terminal sagst, gehört dem Betreiber, "
        "keiner Person. Die Admin-Seiten sind deine.",
        "Tu es connecté comme opérateur : ce que tu dis dans le terminal est à l'opérateur, "
        "pas à une personne. Les pages d'administration sont à toi.",
        "Has iniciado sesión como operador: lo que dices en la terminal es del operador, no de "
        "una persona. Las páginas de administración son tuyas.",
        "Je bent ingelogd als beheerder: wat je in de terminal zegt is van de beheerder, niet "
        "van een persoon. De beheerpagina's zijn van jou.",
    ),
    "search_hint": (
        "search your rows",
        "deine Einträge durchsuchen",
        "chercher dans tes lignes",
        "buscar en tus filas",
        "je regels doorzoeken",
    ),
    "search": ("Search", "Suchen", "Chercher", "Buscar", "Zoeken"),
    "rows_one": ("1 row", "1 Eintrag", "1 ligne", "1 fila", "1 regel"),
    "rows_many": ("{n} rows", "{n} Einträge", "{n} lignes", "{n} filas", "{n} regels"),
    "matching": (
        " matching “{q}”",
        " mit „{q}“",
        " contenant « {q} »",
        " con «{q}»",
        " met ‘{q}’",
    ),
    "download": (
        "Download all as JSON",
        "Alles als JSON herunterladen",
        "Tout télécharger en JSON",
        "Descargar todo en JSON",
        "Alles downloaden als JSON",
    ),
    "what_you_said": (
        "What you said",
        "Was du gesagt hast",
        "Ce que tu as dit",
        "Lo que dijiste",
        "Wat je zei",
    ),
    "where": ("Where", "Wo", "Où", "Dónde", "Waar"),
    "when": ("When", "Wann", "Quand", "Cuándo", "Wanneer"),
    "agent": ("Agent", "Agent", "Agent", "Agente", "Agent"),
    "key": ("Key", "Schlüssel", "Clé", "Clave", "Sleutel"),
    "forget": ("Forget", "Vergessen", "Oublier", "Olvidar", "Vergeten"),
    "undo": ("Undo", "Rückgängig", "Annuler", "Deshacer", "Ongedaan maken"),
    "undo_now": (
        "bring it back (for 10 minutes)",
        "zurückholen (10 Minuten lang)",
        "le récupérer (pendant 10 minutes)",
        "recuperarlo (durante 10 minutos)",
        "terughalen (10 minuten lang)",
    ),
    "undo_last": (
        "Undo my last forget",
        "Mein letztes Vergessen rückgängig machen",
        "Annuler mon dernier oubli",
        "Deshacer mi último olvido",
        "Mijn laatste vergeten ongedaan maken",
    ),
    "undo_last_tail": (
        "(for 10 minutes after it)",
        "(10 Minuten lang danach)",
        "(pendant 10 minutes après)",
        "(durante 10 minutos después)",
        "(tot 10 minuten erna)",
    ),
    "your_reminders": (
        "Your reminders",
        "Deine Erinnerungen",
        "Tes rappels",
        "Tus recordatorios",
        "Je herinneringen",
    ),
    "what": ("What", "Was", "Quoi", "Qué", "Wat"),
    "when_next": (
        "When (next, {zone})",
        "Wann (nächstes Mal, {zone})",
        "Quand (prochain, {zone})",
        "Cuándo (próximo, {zone})",
        "Wanneer (volgende, {zone})",
    ),
    "how_often": ("How often", "Wie oft", "Fréquence", "Con qué frecuencia", "Hoe vaak"),
    "cancel": ("Cancel", "Absagen", "Annuler", "Cancelar", "Annuleren"),
    "no_reminders": (
        "No reminders. Say “remind me tomorrow at 9 to …” to the bot.",
        "Keine Erinnerungen. Sag dem Bot „erinnere mich morgen um 9 an …“.",
        "Aucun rappel. Dis au bot « rappelle-moi demain à 9 h de … ».",
        "No hay recordatorios. Dile al bot «recuérdame mañana a las 9 que …».",
        "Geen herinneringen. Zeg tegen de bot ‘herinner me morgen om 9 aan …’.",
    ),
    "forget_all_confirm": (
        "forget everything I said",
        "alles vergessen, was ich gesagt habe",
        "oublier tout ce que j'ai dit",
        "olvidar todo lo que dije",
        "alles vergeten wat ik zei",
    ),
    "forget_all": (
        "Forget all",
        "Alles vergessen",
        "Tout oublier",
        "Olvidar todo",
        "Alles vergeten",
    ),
    "newer": ("« newer", "« neuer", "« plus récent", "« más reciente", "« nieuwer"),
    "older": ("older »", "älter »", "plus ancien »", "más antiguo »", "ouder »"),
    "page_of": (
        "page {page} of {pages}",
        "Seite {page} von {pages}",
        "page {page} sur {pages}",
        "página {page} de {pages}",
        "pagina {page} van {pages}",
    ),
    "dm_with": (
        "your DM with {agent}",
        "deine Direktnachricht mit {agent}",
        "ta conversation privée avec {agent}",
        "tu chat privado con {agent}",
        "je privégesprek met {agent}",
    ),
    "this_page": ("this page", "diese Seite", "cette page", "esta página", "deze pagina"),
    "group_room": (
        "a group room",
        "ein Gruppenraum",
        "un salon de groupe",
        "una sala de grupo",
        "een groepsruimte",
    ),
    "group_room_of": (
        "a group room of {n} people",
        "ein Gruppenraum mit {n} Personen",
        "un salon de groupe de {n} personnes",
        "una sala de grupo de {n} personas",
        "een groepsruimte met {n} mensen",
    ),
    "a_room": ("a room", "ein Raum", "un salon", "una sala", "een ruimte"),
    "terminal": (
        "the terminal (operator)",
        "das Terminal (Betreiber)",
        "le terminal (opérateur)",
        "la terminal (operador)",
        "de terminal (beheerder)",
    ),
    "once": ("once", "einmal", "une fois", "una vez", "eenmalig"),
    "sign_in_text": (
        "This link signs you in once. Continue to see what the bot keeps about you.",
        "Dieser Link meldet dich einmal an. Weiter, um zu sehen, was der Bot über dich behält.",
        "Ce lien te connecte une fois. Continue pour voir ce que le bot garde sur toi.",
        "Este enlace inicia tu sesión una vez. Continúa para ver lo que el bot guarda sobre ti.",
        "Deze link logt je één keer in. Ga verder om te zien wat de bot over je bewaart.",
    ),
    "sign_in": ("Sign in", "Anmelden", "Se connecter", "Entrar", "Inloggen"),
    "signed_out": ("Signed out", "Abgemeldet", "Déconnecté", "Sesión cerrada", "Uitgelogd"),
    "signed_out_text": (
        "You are signed out.",
        "Du bist abgemeldet.",
        "Tu es déconnecté.",
        "Has cerrado la sesión.",
        "Je bent uitgelogd.",
    ),
    # the notices after an action (``Words.flash``): a command's ``Meaning`` by its name, or
    # the page's own
    "forgot_key": (
        "Forgot {key!r} ({rows}).",
        "Vergessen: {key!r} ({rows}).",
        "Oublié : {key!r} ({rows}).",
        "Olvidado: {key!r} ({rows}).",
        "Vergeten: {key!r} ({rows}).",
    ),
    "forgot_all": (
        "Forgot everything you said ({rows}).",
        "Alles vergessen, was du gesagt hast ({rows}).",
        "Tout ce que tu as dit est oublié ({rows}).",
        "Olvidado todo lo que dijiste ({rows}).",
        "Alles vergeten wat je zei ({rows}).",
    ),
    "undo_within": (
        " Undo within {minutes} minutes with “{undo}”.",
        " Innerhalb von {minutes} Minuten mit „{undo}“ zurückholen.",
        " Récupérable pendant {minutes} minutes avec « {undo} ».",
        " Puedes recuperarlo durante {minutes} minutos con «{undo}».",
        " Binnen {minutes} minuten terug te halen met ‘{undo}’.",
    ),
    "cannot_undo": (
        " (Too many undos are pending: this one cannot be undone.)",
        " (Zu viele Rückgängig-Möglichkeiten offen: dies lässt sich nicht rückgängig machen.)",
        " (Trop d'annulations en attente : celle-ci ne peut pas être annulée.)",
        " (Hay demasiados deshacer pendientes: esto no se puede deshacer.)",
        " (Te veel ongedaan maken open: dit kan niet ongedaan worden gemaakt.)",
    ),
    "none_key": (
        "No row {key!r} that you said is kept.",
        "Kein Eintrag {key!r}, den du gesagt hast, ist gespeichert.",
        "Aucune ligne {key!r} de ce que tu as dit n'est gardée.",
        "No se guarda ninguna fila {key!r} de lo que dijiste.",
        "Er is geen regel {key!r} bewaard van wat je zei.",
    ),
    "none_all": (
        "Nothing you said is kept.",
        "Nichts, was du gesagt hast, ist gespeichert.",
        "Rien de ce que tu as dit n'est gardé.",
        "No se guarda nada de lo que dijiste.",
        "Niets van wat je zei is bewaard.",
    ),
    "brought_back": (
        "Brought back {rows}.",
        "Zurückgeholt: {rows}.",
        "Récupéré : {rows}.",
        "Recuperado: {rows}.",
        "Teruggehaald: {rows}.",
    ),
    "nothing_to_undo": (
        "There is nothing of yours to bring back.",
        "Es gibt nichts von dir zurückzuholen.",
        "Il n'y a rien à toi à récupérer.",
        "No hay nada tuyo que recuperar.",
        "Er is niets van jou om terug te halen.",
    ),
    "say_which_row": (
        "Say which row to forget.",
        "Sag, welchen Eintrag du vergessen willst.",
        "Dis quelle ligne oublier.",
        "Di qué fila olvidar.",
        "Zeg welke regel je wilt vergeten.",
    ),
    "tick_to_confirm": (
        "Tick the box to confirm forgetting everything you said.",
        "Setz das Häkchen, um zu bestätigen, dass alles, was du gesagt hast, vergessen wird.",
        "Coche la case pour confirmer l'oubli de tout ce que tu as dit.",
        "Marca la casilla para confirmar que se olvide todo lo que dijiste.",
        "Vink het vakje aan om te bevestigen dat alles wat je zei vergeten wordt.",
    ),
    "cancelled_reminder": (
        "Cancelled the reminder: {what}",
        "Erinnerung abgesagt: {what}",
        "Rappel annulé : {what}",
        "Recordatorio cancelado: {what}",
        "Herinnering geannuleerd: {what}",
    ),
    "no_such_reminder": (
        "No such reminder of yours (already cancelled or delivered?)",
        "Diese Erinnerung hast du nicht (schon abgesagt oder zugestellt?)",
        "Tu n'as pas ce rappel (déjà annulé ou envoyé ?)",
        "No tienes ese recordatorio (¿ya cancelado o enviado?)",
        "Je hebt deze herinnering niet (al geannuleerd of bezorgd?)",
    ),
}
FLASHES = frozenset(
    (
        "forgot_key",
        "forgot_all",
        "none_key",
        "none_all",
        "brought_back",
        "nothing_to_undo",
        "say_which_row",
        "tick_to_confirm",
        "cancelled_reminder",
        "no_such_reminder",
    )
)
"""The notices ``Words.flash`` words from a ``Meaning`` (any other is shown as its English
text)."""


class Words:
    """The page's words in one language: ``words.search`` in a template; ``lang`` for
    ``<html lang>`` and Babel."""

    def __init__(self, lang: str) -> None:
        self.lang = lang if lang in LANGS else "en"
        index = LANGS.index(self.lang)
        self._words = {key: texts[index] for key, texts in _WORDS.items()}

    def __getattr__(self, key: str) -> str:
        try:
            return self.__dict__["_words"][key]  # type: ignore[no-any-return]
        except KeyError:
            raise AttributeError(key) from None

    def rows(self, n: int) -> str:
        return self.rows_one if n == 1 else self.rows_many.format(n=n)

    def flash(self, text: str, meaning: Meaning) -> str:
        """A notice after an action in this language: its ``meaning`` worded here (a
        command's reply and the page's own notices, in the table of the page's words), else
        ``text`` as it came (a reply the page does not word: in English)."""
        if meaning.name not in FLASHES:
            return text
        values: dict[str, object] = dict(meaning.values)
        n = values.get("n")
        if isinstance(n, int):
            values["rows"] = self.rows(n)
        said = self._words[meaning.name].format(**values)
        if "undoable" in values:
            said += (
                self.undo_within.format(minutes=values.get("minutes"), undo=self.undo)
                if values["undoable"]
                else self.cannot_undo
            )
        return said


ENGLISH = Words("en")

FLASH_MAX_CHARS = 4000


@dataclass(frozen=True)
class Flash:
    """The notice a session's next page shows once, after an action: in that page's
    language when the page words its ``meaning`` (``Words.flash``), else ``text``."""

    ok: bool
    meaning: Meaning
    text: str

    def shown(self, words: Words) -> str:
        return cut(words.flash(self.text, self.meaning))

    @property
    def undoable(self) -> bool:
        """A forget that can still be undone: its page offers Undo at once."""
        m = self.meaning
        forgot = m.name in ("forgot_key", "forgot_all")
        return self.ok and forgot and m.values.get("undoable") is True


def cut(text: str) -> str:
    """A notice as kept and shown: at most ``FLASH_MAX_CHARS``."""
    return text if len(text) <= FLASH_MAX_CHARS else text[:FLASH_MAX_CHARS] + "…"


def page_lang(accept_language: str | None) -> str:
    """The first of the five languages an ``Accept-Language`` header asks for, by its
    weights ("de-CH, fr;q=0.8" → "de"), else English; a header of any size or shape costs at
    most 32 entries read and is never an error."""
    if not accept_language:
        return "en"
    best: tuple[float, int, str] | None = None
    for order, part in enumerate(accept_language[:1024].split(",")[:32]):
        tag, _, params = part.strip().partition(";")
        lang = tag.strip().split("-", 1)[0].casefold()
        if lang not in LANGS:
            continue
        weight = 1.0
        name, _, value = params.strip().partition("=")
        if name.strip() == "q":
            try:
                weight = float(value)
            except ValueError:
                continue
        if not 0 < weight <= 1:
            continue
        if best is None or (weight, -order) > (best[0], -best[1]):
            best = (weight, order, lang)
    return best[2] if best is not None else "en"


def dated(moment: datetime, zone: str, lang: str) -> str:
    """A row's time on the page in ``lang``: "8 Dec 2026, 09:00", "8. Dez. 2026, 09:00"."""
    local = moment.astimezone(ZoneInfo(zone))
    day = format_skeleton("yMMMd", local, tzinfo=local.tzinfo, locale=lang)
    return f"{day}, {local:%H:%M}"


__all__ = ["ENGLISH", "FLASHES", "Flash", "Words", "cut", "dated", "page_lang"]
