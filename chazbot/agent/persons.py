"""Who someone is, in English, German, French, Spanish and Dutch (#45, the who side of SPEC §5d):
the words for relatives, the people around someone and their animals, with the forms people
use ("hubby", "frangin", "Schwiegereltern", "zoontje", "hermanita", "mis suegros"), and a
lookup that takes a word in any of its inflected forms (plurals, feminines, diminutives,
possessive "s", German and Dutch compounds: "Lieblingstante", "Arbeitskollegin").

Data for ``concepts`` (each group one concept, so "frangin" matches "brother" and "Bruder"),
``question`` (whether a possessed noun is someone: "mein *Schwager*", not "mein *Job*") and
``grounding`` (matching a row's words to whom a question asks about). Lowercase, whole
tokens as ``memory.tokenize`` cuts them; a hyphened word ("belle-mère") is also one token
here, matched whole.
"""

from __future__ import annotations


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


KIN: dict[str, frozenset[str]] = {
    "son": _set(
        "son sons sonny sohn söhne sohnemann söhnchen fils fiston hijo hijito zoon zonen zoontje"
    ),
    "daughter": _set(
        "daughter daughters tochter töchter töchterchen fille filles fifille hija hijas hijita "
        "dochter dochters dochtertje"
    ),
    "child": _set(
        "child children kid kids kiddo kiddos youngest eldest oldest kinder kinds "
        "nachwuchs jüngste jüngster jüngstes älteste ältester ältestes enfant enfants gamin "
        "gamins gamine gamines gosse gosses môme mômes marmots aîné aînée cadet cadette niño "
        "niños niña niñas crío críos cría peque peques kinderen kindje kindjes kroost koters "
        "jongste oudste"
    ),
    "baby": _set("baby babies babys bébé bébés bebé bebés"),
    "wife": _set(
        "wife wifey wives missus frau ehefrau gattin femme épouse esposa mujer señora vrouw "
        "echtgenote vrouwtje"
    ),
    "husband": _set(
        "husband hubby husbands mann ehemann gatte göttergatte mari époux marido esposo "
        "echtgenoot man manlief"
    ),
    "partner": _set(
        "partner partners spouse boyfriend girlfriend fiancé fiancée fiance fiancee partnerin "
        "lebensgefährte lebensgefährtin verlobter verlobte partenaire conjoint conjointe "
        "compagnon compagne chéri chérie copain copine pareja novio novia prometido prometida "
        "vriendje "
        "vriendinnetje verloofde"
    ),
    "mother": _set(
        "mother mothers mum mom mommy mummy mama mami mutter mutti mère maman madre "
        "mamá mamita moeder mam mams moeke"
    ),
    "father": _set(
        "father fathers dad daddy vater papa vati père padre papá papito vader pappa paps"
    ),
    "parents": _set("parents folks eltern padres ouders"),
    "sister": _set(
        "sister sisters sis schwester schwestern schwesterchen sœur sœurs soeur soeurs "
        "sœurette frangine frangines hermana hermanas hermanita zus zussen zusje zuster"
    ),
    "brother": _set(
        "brother brothers bro bruder brüder brüderchen frère frères frérot frangin frangins "
        "hermano hermanito broer broers broertje"
    ),
    "family": _set("family families familie familien famille familles familia familias gezin"),
    "siblings": _set("sibling siblings geschwister fratrie hermanos broers-en-zussen"),
    "grandmother": _set(
        "grandmother grandmothers grandma grandmas granny nanna oma omi omas "
        "großmutter grossmutter grand-mère grand-mères mamie mémé mamy abuela abuelita "
        "abuelas yaya grootmoeder omaatje"
    ),
    "grandfather": _set(
        "grandfather grandfathers grandpa grandpas gramps grandad granddad opa opi opas "
        "großvater grossvater grand-père grand-pères papy pépé abuelo abuelito yayo "
        "grootvader opaatje"
    ),
    "grandparents": _set(
        "grandparents grandparent großeltern grosseltern grands-parents abuelos abuelitos "
        "grootouders opa-en-oma"
    ),
    "grandchild": _set(
        "grandchild grandchildren grandkid grandkids grandson grandsons granddaughter "
        "granddaughters enkel enkelin enkelkind enkelkinder enkelsohn enkeltochter "
        "petit-fils petite-fille petits-enfants petits-fils petites-filles nieto nieta "
        "nietos nietas kleinkind kleinkinderen kleinzoon kleindochter"
    ),
    "uncle": _set("uncle uncles onkel tonton oncle tío tio tíos oom ooms"),
    "aunt": _set("aunt aunts auntie aunty tante tanten tata tatie tantine tía tia tías tita"),
    "niece": _set("niece nieces nichte nichten nièce nièces sobrina sobrinas nichtje"),
    "nephew": _set("nephew nephews neffe neffen neveu neveux sobrino sobrinos neef neefje"),
    "cousin": _set(
        "cousin cousins cousine cousines cousinen vetter vettern primo prima primos primas neef"
    ),
    "mother-in-law": _set(
        "mother-in-law mothers-in-law schwiegermutter schwiegermama belle-mère belle-doche "
        "suegra schoonmoeder schoonmama"
    ),
    "father-in-law": _set(
        "father-in-law fathers-in-law schwiegervater schwiegerpapa beau-père suegro "
        "schoonvader schoonpapa"
    ),
    "parents-in-law": _set(
        "in-laws parents-in-law inlaws schwiegereltern beaux-parents suegros schoonouders"
    ),
    "brother-in-law": _set(
        "brother-in-law brothers-in-law schwager beau-frère beaux-frères cuñado cuñados zwager"
    ),
    "sister-in-law": _set(
        "sister-in-law sisters-in-law schwägerin belle-sœur belle-soeur belles-sœurs cuñada "
        "cuñadas schoonzus schoonzuster"
    ),
    "son-in-law": _set("son-in-law schwiegersohn gendre beau-fils yerno schoonzoon"),
    "daughter-in-law": _set("daughter-in-law schwiegertochter belle-fille bru nuera schoondochter"),
    "stepmother": _set(
        "stepmother stepmom stepmum step-mother stiefmutter belle-mère marâtre madrastra "
        "stiefmoeder"
    ),
    "stepfather": _set("stepfather stepdad step-father stiefvater beau-père padrastro stiefvader"),
    "stepson": _set("stepson step-son stiefsohn beau-fils hijastro stiefzoon"),
    "stepdaughter": _set(
        "stepdaughter step-daughter stieftochter belle-fille hijastra stiefdochter"
    ),
    "stepbrother": _set(
        "stepbrother step-brother half-brother halfbrother stiefbruder halbbruder demi-frère "
        "hermanastro medio-hermano stiefbroer halfbroer"
    ),
    "stepsister": _set(
        "stepsister step-sister half-sister halfsister stiefschwester halbschwester demi-sœur "
        "demi-soeur hermanastra media-hermana stiefzus halfzus"
    ),
    "godparent": _set(
        "godmother godfather godparent godparents patin paten patentante patenonkel "
        "marraine parrain madrina padrino peettante peetoom"
    ),
    "godchild": _set(
        "godchild godson goddaughter patenkind filleul filleule ahijado ahijada petekind"
    ),
    "twins": _set(
        "twins twin zwillinge zwilling jumeaux jumelles jumeau gemelos gemelas mellizos tweeling"
    ),
    "neighbour": _set(
        "neighbour neighbor neighbours neighbors nachbar nachbarin nachbarn voisin voisine "
        "voisins voisines vecino vecina vecinos vecinas buurman buurvrouw buren buurjongen "
        "buurmeisje"
    ),
    "friend": _set(
        "friend friends buddy pal bestie bff freund freundin freunde freundinnen kumpel "
        "ami amie amis amies copain copine copains copines pote potes amigo amiga amigos "
        "amigas colega vriend vriendin vrienden"
    ),
    "colleague": _set(
        "colleague colleagues coworker coworkers co-worker workmate kollege kollegin kollegen "
        "collègue collègues compañero compañera compañeros colega colegas collega collega's "
        "collegaatje"
    ),
    "flatmate": _set(
        "flatmate flatmates roommate roommates housemate mitbewohner mitbewohnerin "
        "colocataire coloc colocs compañero-de-piso huisgenoot huisgenote huisgenoten"
    ),
}
"""The people a row may be about besides its teller ("my *brother*", "mijn *schoonouders*"),
by relation, each in the five languages and the forms people use."""

PEOPLE: dict[str, frozenset[str]] = {
    "boss": _set(
        "boss manager supervisor chefin vorgesetzter vorgesetzte patron patronne jefe "
        "jefa baas leidinggevende"
    ),
    "landlord": _set(
        "landlord landlady vermieter vermieterin propriétaire proprio casero casera huisbaas "
        "verhuurder"
    ),
    "doctor": _set("doctor gp arzt ärztin hausarzt médecin toubib médico dokter huisarts"),
    "dentist": _set("dentist zahnarzt zahnärztin dentiste dentista tandarts"),
    "teacher": _set(
        "teacher lehrer lehrerin professeur prof maîtresse instit profesor profesora maestro "
        "maestra leraar lerares juf meester"
    ),
    "coach": _set("coach trainer trainerin entraîneur entraîneuse entrenador entrenadora"),
    "therapist": _set("therapist therapeut therapeutin thérapeute psy terapeuta psicólogo"),
    "lawyer": _set("lawyer anwalt anwältin avocat avocate abogado abogada advocaat"),
    "hairdresser": _set(
        "hairdresser barber friseur friseurin coiffeur coiffeuse peluquero peluquera kapper"
    ),
    "babysitter": _set("babysitter nanny sitter nounou niñera canguro oppas"),
    "vet": _set("vet tierarzt tierärztin vétérinaire véto veterinario dierenarts"),
    "mentor": _set("mentor mentorin mentore tutor tutora"),
}
"""Other people one speaks of as "my …" (not relatives: "mein Chef", "ma coiffeuse")."""

ANIMALS: dict[str, frozenset[str]] = {
    "dog": _set(
        "dog dogs doggo puppy pup hund hunde hündin welpe chien chienne chiot perro "
        "perra perrito perrita cachorro hond honden hondje pup puppy"
    ),
    "cat": _set(
        "cat cats kitten katze kater kätzchen chat chatte chaton gato gata "
        "gatito gatita kat katten poes poesje kitten"
    ),
    "horse": _set("horse horses pony pferd pferde pony cheval chevaux poney caballo yegua paard"),
    "parrot": _set(
        "parrot parrots papagei papageien perroquet perroquets loro loros papegaai papegaaien"
    ),
    "tortoise": _set(
        "tortoise tortoises turtle turtles schildkröte schildkröten tortue tortues tortuga "
        "tortugas schildpad schildpadden"
    ),
    "rabbit": _set("rabbit rabbits kaninchen hase lapin lapins conejo conejos konijn konijnen"),
    "bird": _set("bird birds vogel vögel oiseau oiseaux pájaro pájaros ave vogels"),
    "hamster": _set("hamster hamsters hámster"),
    "fish": _set("fish goldfish fisch goldfisch poisson poissons pez peces vissen goudvis"),
    "guinea pig": _set("guinea-pig meerschweinchen cobaye cobaya cavia"),
    "pet": _set("pet pets haustier haustiere animal animaux mascota mascotas huisdier huisdieren"),
}
"""Animals one speaks of as someone ("mein Kater", "notre chien"); not the pet names
("Minou", "Kitty", "Bunny"), which are names a row gives."""

SOMEONE = _set(
    "person someone guy girl boy woman man lady lad kind chef mann frau junge mädchen kerl typ "
    "mec gars garçon nana chico chica hombre jongen meisje vent"
)
"""Words that are someone but name no relation of their own ("mein *Kind*", "my *guy*",
"mein *Chef*": English "kind" and "chef" are no relatives to match a row's words by)."""

GROUPS: tuple[frozenset[str], ...] = (*KIN.values(), *PEOPLE.values(), *ANIMALS.values())
WORDS = frozenset(w for group in GROUPS for w in group) | SOMEONE
KIN_WORDS = frozenset(w for group in KIN.values() for w in group)

RANKS = _set(
    "youngest eldest oldest middle jüngste jüngster jüngstes jüngsten älteste ältester "
    "ältestes ältesten mittlere aîné aînée aînés cadet cadette benjamin menor mayor pequeño "
    "pequeña jongste oudste middelste"
)
"""Words that say which of someone's children (or siblings) is meant: "my *youngest*" alone
is a child ("What's my youngest called?"); before a noun they only qualify it ("my *oldest*
friend")."""

CHANGING = (
    "schwieger",
    "stief",
    "groß",
    "gross",
    "urgroß",
    "ur",
    "schoon",
    "groot",
    "over",
    "half",
    "halb",
    "step",
    "grand",
    "great",
    "god",
    "pate",
    "paten",
    "peet",
    "ex",
    "betovergroot",
    "achter",
)
"""A compound's first part that makes another relative ("*Schwieger*mutter", "*stief*vader",
"*Groß*vater"): such a compound is not its last part ("Ma mère" is no mother-in-law)."""

_NOT_HEADS = _set("mann man frau vrouw kind junge typ ami pote mate pal boy girl guy person")
"""Words too common at a compound's end to read it as someone ("Kaufmann", "Hausfrau",
"Einzelkind" aside): they are someone only whole."""

_ENDINGS = (
    ("innen", ""),
    ("innen", "e"),
    ("chen", ""),
    ("tjes", ""),
    ("tje", ""),
    ("jes", ""),
    ("je", ""),
    ("itos", "os"),
    ("itas", "as"),
    ("ito", "o"),
    ("ita", "a"),
    ("'s", ""),
    ("ies", "y"),
    ("es", ""),
    ("en", ""),
    ("in", ""),
    ("in", "e"),
    ("e", ""),
    ("n", ""),
    ("s", ""),
    ("a", "o"),
    ("x", ""),
)
"""Endings a person's word takes (plurals, feminines, diminutives, a possessive "s"):
"Nachbarinnen", "Kollegin", "zusje", "broertje", "hermanita", "Omas", "tantes", "prima"."""


def _inflected(word: str) -> str | None:
    """The table's word ``word`` is a form of, or None."""
    if word in WORDS:
        return word
    for end, base in _ENDINGS:
        short = 3 if end in ("s", "'s") else 4  # "Omas"; not "Oman"
        if word.endswith(end) and len(word) - len(end) >= short:
            stem = word[: -len(end)] + base
            if stem in WORDS:
                return stem
    return None


def person_word(word: str) -> str | None:
    """The word of ``persons`` that ``word`` is, in any of its forms, or None: "frangins" →
    "frangins", "Arbeitskollegin" → "kollege", "hermanita" → "hermanita", "Schwiegermutter"
    → itself; "Schwiegermama" is never "mama" (a compound's first part may change who it is:
    ``CHANGING``)."""
    word = word.lower().replace("\u2019", "'")
    found = _inflected(word)
    if found is not None:
        return found
    for cut in range(3, len(word) - 3):
        head, tail = word[:cut], word[cut:]
        if tail in _NOT_HEADS or len(tail) < 4:
            continue
        found = _inflected(tail)
        if found is None:
            continue
        if head.rstrip("s-").endswith(CHANGING) or head.startswith(CHANGING[:4]):
            return None  # "Schwiegermama", "stiefmoeder": another relative, not "mama"
        return found
    return None


def is_kin(word: str) -> bool:
    """Whether ``word`` is a relative's or a friend's word (``KIN``), in any of its forms."""
    found = person_word(word)
    return found is not None and found in KIN_WORDS


__all__ = [
    "ANIMALS",
    "CHANGING",
    "GROUPS",
    "KIN",
    "KIN_WORDS",
    "PEOPLE",
    "RANKS",
    "SOMEONE",
    "WORDS",
    "is_kin",
    "person_word",
]
