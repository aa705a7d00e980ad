"""VoiceBench's ifeval evaluator (src/evaluator/ifeval.py, Google's IFEval checks in
instruction_following_eval/): each row's instructions (``instruction_id_list`` with ``kwargs``)
checked strictly on the response and loosely (any of eight variants: first / last line dropped,
``*`` removed); prompt level (every instruction followed) and instruction level; the final
figure is the mean of the four. A row's response is looked up by its prompt, so where a prompt
occurs twice the last row's response serves both, as the official reader keeps it; an empty
response follows nothing.

Checks here are ours, written from the official ones. Five official checks need the
``official`` extra (langdetect: language:response_language, change_case:english_capital,
change_case:english_lowercase; nltk's Punkt: length_constraints:number_sentences,
change_case:capital_word_frequency through nltk's word_tokenize). Without it, a file using any
of them gets no IFEval figure, the instructions named, never a figure over fewer checks.
langdetect draws random samples and the official code leaves it unseeded (a borderline text may
read differently from run to run); cafe seeds it with 0 (``DetectorFactory.seed``), so a figure
is recomputable from the run folder; on a text of clear language the seed changes nothing."""

from __future__ import annotations

import collections
import functools
import json
import re
import statistics
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from cafe.benchmarks.sentences import count_sentences, punkt_nltk, word_tokens
from cafe.benchmarks.voicebench.figure import Figure, RowError

LESS, AT_LEAST = "less than", "at least"
YES_NO_MAYBE = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
#: what brings the checks of NEEDS_EXTRA (below)
EXTRA = "pip install 'cafe-audio-eval[official]'"

Check = Callable[[str, dict[str, Any]], bool]


def _compare(n: int, kw: dict[str, Any], count_key: str, relation_key: str) -> bool:
    relation = kw.get(relation_key)
    if relation not in (LESS, AT_LEAST):
        raise RowError(f"{relation_key} {relation!r} is neither {LESS!r} nor {AT_LEAST!r}")
    return n < kw[count_key] if relation == LESS else n >= kw[count_key]


def _need(kw: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The official check draws a random value for a missing argument: refuse the row instead."""
    missing = [k for k in keys if k not in kw]
    if missing:
        raise RowError(
            f"kwargs lack {', '.join(missing)} (the official check draws them at random)"
        )
    return kw


def _postscript(text: str, kw: dict[str, Any]) -> bool:
    marker = str(_need(kw, "postscript_marker")["postscript_marker"]).strip()
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    return bool(re.findall(pattern, text.lower(), flags=re.MULTILINE))


def _json(text: str, kw: dict[str, Any]) -> bool:
    body = text.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        body = body.removeprefix(prefix)
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _highlights(text: str, kw: dict[str, Any]) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", text)
              if h.removeprefix("**").removesuffix("**").strip()]  # fmt: skip
    return len(single) + len(double) >= _need(kw, "num_highlights")["num_highlights"]


def _bullets(text: str, kw: dict[str, Any]) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == _need(kw, "num_bullets")["num_bullets"]


def _title(text: str, kw: dict[str, Any]) -> bool:
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", text))


def _end(text: str, kw: dict[str, Any]) -> bool:
    phrase = str(_need(kw, "end_phrase")["end_phrase"]).strip().lower()
    return text.strip().strip('"').lower().endswith(phrase)


def _quoted(text: str, kw: dict[str, Any]) -> bool:
    t = text.strip()
    return len(t) > 1 and t[0] == '"' and t[-1] == '"'


def _keywords(text: str, kw: dict[str, Any]) -> bool:
    return all(re.search(k, text, flags=re.I) for k in _need(kw, "keywords")["keywords"])


def _forbidden(text: str, kw: dict[str, Any]) -> bool:
    words = set(_need(kw, "forbidden_words")["forbidden_words"])
    return not any(re.search(r"\b" + w + r"\b", text, flags=re.I) for w in words)


def _keyword_frequency(text: str, kw: dict[str, Any]) -> bool:
    keyword = str(_need(kw, "keyword", "frequency", "relation")["keyword"]).strip()
    return _compare(len(re.findall(keyword, text, flags=re.I)), kw, "frequency", "relation")


def _letter_frequency(text: str, kw: dict[str, Any]) -> bool:
    letter = str(_need(kw, "letter", "let_frequency", "let_relation")["letter"]).strip().lower()
    n = collections.Counter(text.lower())[letter]
    if kw["let_relation"] == LESS:  # the official check reads any other relation as "at least"
        return n < kw["let_frequency"]
    return n >= kw["let_frequency"]


def _words(text: str, kw: dict[str, Any]) -> bool:
    _need(kw, "num_words", "relation")
    return _compare(len(re.findall(r"\w+", text)), kw, "num_words", "relation")


def _paragraphs(text: str, kw: dict[str, Any]) -> bool:
    """Paragraphs split by a *** divider; an empty one only at either end is not counted."""
    parts = re.split(r"\s?\*\*\*\s?", text)
    inner = parts[1:-1]
    if any(not p.strip() for p in inner):
        return False
    n = len(parts) - (not parts[0].strip()) - (len(parts) > 1 and not parts[-1].strip())
    return n == _need(kw, "num_paragraphs")["num_paragraphs"]


def _nth_first_word(text: str, kw: dict[str, Any]) -> bool:
    _need(kw, "num_paragraphs", "nth_paragraph", "first_word")
    want, nth = kw["num_paragraphs"], kw["nth_paragraph"]
    if not 0 < nth <= want:
        raise RowError(f"nth_paragraph {nth} outside 1..{want} (the official check draws one)")
    parts = re.split(r"\n\n", text)
    n = sum(bool(p.strip()) for p in parts)
    if nth > n or not parts[nth - 1].strip():
        return False
    word = parts[nth - 1].strip().split()[0].strip().lstrip("'").lstrip('"')
    first = re.split(r"[.,?!'\"]", word)[0].lower()
    return n == want and first == str(kw["first_word"]).lower()


def _sections(text: str, kw: dict[str, Any]) -> bool:
    splitter = str(_need(kw, "section_spliter", "num_sections")["section_spliter"]).strip()
    return len(re.split(r"\s?" + splitter + r"\s?\d+\s?", text)) - 1 >= kw["num_sections"]


def _two_responses(text: str, kw: dict[str, Any]) -> bool:
    parts = text.split("******")
    if any(not p.strip() for p in parts[1:-1]):
        return False
    valid = [p for p in parts if p.strip()]
    return len(valid) == 2 and valid[0].strip() != valid[1].strip()


def _repeat_prompt(text: str, kw: dict[str, Any]) -> bool:
    repeat = str(_need(kw, "prompt_to_repeat")["prompt_to_repeat"])
    return text.strip().lower().startswith(repeat.strip().lower())


CHECKS: dict[str, Check] = {
    "punctuation:no_comma": lambda t, kw: "," not in t,
    "startend:quotation": _quoted,
    "startend:end_checker": _end,
    "detectable_format:title": _title,
    "detectable_format:json_format": _json,
    "detectable_format:number_bullet_lists": _bullets,
    "detectable_format:number_highlighted_sections": _highlights,
    "detectable_format:constrained_response": lambda t, kw: any(
        o in t.strip() for o in YES_NO_MAYBE
    ),
    "detectable_content:postscript": _postscript,
    "detectable_content:number_placeholders": lambda t, kw: (
        len(re.findall(r"\[.*?\]", t)) >= _need(kw, "num_placeholders")["num_placeholders"]
    ),
    "keywords:existence": _keywords,
    "keywords:forbidden_words": _forbidden,
    "keywords:frequency": _keyword_frequency,
    "keywords:letter_frequency": _letter_frequency,
    "length_constraints:number_words": _words,
    "length_constraints:number_paragraphs": _paragraphs,
    "length_constraints:nth_paragraph_first_word": _nth_first_word,
    "detectable_format:multiple_sections": _sections,
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": _repeat_prompt,
}


@functools.lru_cache(maxsize=1)
def _langdetect() -> ModuleType | None:
    try:
        import langdetect
    except ImportError:
        return None
    langdetect.DetectorFactory.seed = 0  # the module's note: recomputable figures
    return langdetect


def _detected_is(text: str, language: str) -> bool:
    """langdetect reads ``language``; a text it finds no feature in counts as followed (the
    official check's choice)."""
    langdetect = _langdetect()
    try:
        return langdetect.detect(text) == language
    except langdetect.LangDetectException:
        return True


def _number_sentences(text: str, kw: dict[str, Any]) -> bool:
    if _need(kw, "num_sentences", "relation")["num_sentences"] < 0:
        raise RowError("num_sentences is negative (the official check draws one)")
    return _compare(count_sentences(text), kw, "num_sentences", "relation")


def _capital_words(text: str, kw: dict[str, Any]) -> bool:
    _need(kw, "capital_frequency", "capital_relation")
    n = sum(w.isupper() for w in word_tokens(text))
    return _compare(n, kw, "capital_frequency", "capital_relation")


#: checks that need the official extra: the check and the package it needs
NEEDS_EXTRA: dict[str, tuple[Check, str]] = {
    "language:response_language": (
        lambda t, kw: _detected_is(t, _need(kw, "language")["language"]),
        "langdetect",
    ),
    "change_case:english_capital": (
        lambda t, kw: t.isupper() and _detected_is(t, "en"),
        "langdetect",
    ),
    "change_case:english_lowercase": (
        lambda t, kw: t.islower() and _detected_is(t, "en"),
        "langdetect",
    ),
    "length_constraints:number_sentences": (_number_sentences, "nltk"),
    "change_case:capital_word_frequency": (_capital_words, "nltk"),
}


def checks() -> dict[str, Check]:
    """The checks this install runs: CHECKS, and the extra's where its packages import."""
    have = {"langdetect": _langdetect() is not None, "nltk": punkt_nltk() is not None}
    return {**CHECKS, **{i: c for i, (c, need) in NEEDS_EXTRA.items() if have[need]}}


def _clean(response: str) -> str:
    if response.startswith(("<1>", "<2>", "<3>")):
        response = response[3:].strip()
    if response.endswith("<|user|>"):
        response = response[:-8].strip()
    return response


def loose_variants(response: str) -> list[str]:
    """The response and the seven relaxed forms the loose reading also accepts."""
    lines = response.split("\n")
    cut = ["\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(),
           "\n".join(lines[1:-1]).strip()]  # fmt: skip
    return [response, response.replace("*", ""), *cut, *(c.replace("*", "") for c in cut)]


def follows(text: str, ident: str, kw: dict[str, Any], run: dict[str, Check]) -> bool:
    return bool(text.strip()) and run[ident](text, kw)


def row_results(
    row: dict[str, Any], response: str, run: dict[str, Check]
) -> tuple[list[bool], list[bool]]:
    """(strict, loose) per instruction of a row, by the checks in ``run``."""
    idents, kwargs = row.get("instruction_id_list"), row.get("kwargs")
    if not isinstance(idents, list) or not isinstance(kwargs, list) or len(kwargs) < len(idents):
        raise RowError("instruction_id_list / kwargs missing or of different lengths")
    strict, loose = [], []
    variants = loose_variants(response)
    for ident, kw in zip(idents, kwargs, strict=False):
        kw = {k: v for k, v in (kw or {}).items() if v}  # the official reader drops empty ones
        strict.append(follows(response, ident, kw, run))
        loose.append(any(follows(v, ident, kw, run) for v in variants))
    return strict, loose


def ifeval_figure(subset: str, rows: Sequence[dict[str, Any]]) -> Figure:
    """The official 'final' (mean of strict / loose, prompt / instruction level) in percent."""
    run = checks()
    unknown = sorted({str(i) for r in rows for i in (r.get("instruction_id_list") or [])
                      if str(i) not in run})  # fmt: skip
    if unknown:
        why = "; ".join(
            f"{i} (needs {NEEDS_EXTRA[i][1]}: {EXTRA})" if i in NEEDS_EXTRA
            else f"{i} (not an IFEval instruction)" for i in unknown
        )  # fmt: skip
        return Figure(
            subset, "ifeval", None, len(rows), {}, f"instructions cafe cannot check: {why}"
        )
    by_prompt = {}
    for r in rows:
        if isinstance(r.get("response"), str):
            by_prompt[r.get("prompt")] = _clean(r["response"])
    levels: dict[str, list[list[bool]]] = {"strict": [], "loose": []}
    kept: list[str] = []
    for i, row in enumerate(rows):
        try:
            if row.get("prompt") not in by_prompt:
                raise RowError("no response")
            strict, loose = row_results(row, by_prompt[row["prompt"]], run)
        except RowError as e:
            kept.append(f"{row.get('key', f'row {i + 1}')}: {e}")
            continue
        levels["strict"].append(strict)
        levels["loose"].append(loose)
    if not levels["strict"]:
        return Figure(subset, "ifeval", None, len(rows), {}, "no scorable row", kept)
    parts: dict[str, float] = {}
    for name, results in levels.items():
        parts[f"{name}-prompt"] = 100 * statistics.fmean(all(r) for r in results)
        flat = [x for r in results for x in r]
        parts[f"{name}-instruction"] = 100 * sum(flat) / len(flat)
    return Figure(subset, "ifeval", statistics.fmean(parts.values()), len(rows), parts, None, kept)
