"""Independent transcriptions of the official scorers of SAKURA and MMAU-Pro, used only by the
tests to check cafe item for item:
- SAKURA: ckyang1124/SAKURA @ a1fdb146f638fe4740c20a31ba6da868f2cb2313, evaluation/llm_judge.py
  (extract_judgement) and evaluation/calculate_acc.py;
- MMAU-Pro: sonalkum/MMAUPro @ 960e93a415e2267e987ae242516e21030a7d45dc,
  evaluate_mmau_pro_comprehensive.py (evaluate_aif_sample, extract_scores_from_evaluation,
  calculate_weighted_performance and main's per-path inputs).
Written from reading those scripts; deliberately not sharing code with cafe. The one part not
transcribed: nltk's punkt sentence splitter (a test passes its own sentence counter)."""

from __future__ import annotations

import re

import numpy as np


# ---- SAKURA
def sakura_extract_judgement(text):
    match = re.search(r"Explanation: (.*?)\nJudgement: (.*?)(?:\n\n|$)", text, re.DOTALL)
    if match:
        return {"Explanation": match.group(1), "Judgement": match.group(2)}
    return {"Explanation": "No extracted explanation", "Judgement": "No extracted judgement"}


def sakura_calculate_acc(judgements):
    """calculate_acc.py over {"results": {wav: {"Judgement": ...}}} -> (correct, total)."""
    correct = total = 0
    for k in judgements["results"]:
        if judgements["results"][k]["Judgement"].lower().strip() == "correct":
            correct += 1
        total += 1
    return correct, total


# ---- MMAU-Pro
def _letters(text, keep):
    return re.sub(keep, "", text).lower()


#: the identifiers whose check is a count within a bound, alike for the three counts
_BOUNDED = re.compile(
    r"^(Number Words|Number Sentences|All-capital Words) \((at least|at most|range)\)$"
)


def _within(count, bound, kw):
    if bound == "at least":
        return count >= kw.get("N", 0)
    if bound == "at most":
        return count <= kw.get("N", 0)
    return kw.get("N1", 0) <= count <= kw.get("N2", 999)


def mmau_pro_aif(response, task_identifier, kwargs, question, sentences):
    """evaluate_aif_sample; ``sentences``: the sentence counter (nltk's sent_tokenize there)."""
    kw = kwargs or {}
    t = task_identifier

    def caps(text):
        return len([w for w in text.split() if w.isupper()])

    counters = {"Number Words": lambda r: len(r.split()), "Number Sentences": sentences,
                "All-capital Words": caps}  # fmt: skip
    bounded = _BOUNDED.match(t) if isinstance(t, str) else None
    if bounded:
        return _within(counters[bounded.group(1)](response), bounded.group(2), kw)
    if t == "Include Keywords":
        return all(k.lower() in response.lower() for k in kw.get("keywords", "").split(", "))
    if t == "Keyword Frequency":
        pattern = r"\b" + re.escape(kw.get("keyword", "").lower()) + r"\b"
        return len(re.findall(pattern, response.lower())) == kw.get("N", 0)
    if t == "Forbidden Words":
        words = kw.get("forbidden_words", "").split(", ")
        return not any(w.lower() in response.lower() for w in words)
    if t == "Number Paragraphs":
        return len([p for p in response.split("***") if p.strip()]) == kw.get("N", 0)
    if t == "Postscript":
        marker = _letters(kw.get("postscript_marker", ""), r"[^a-zA-Z]")
        return marker in _letters(response, r"[^a-zA-Z]")
    if t == "Number Placeholder":
        return len(re.findall(r"\[[^\]]+\]", response)) >= kw.get("N", 0)
    if t == "Number Bullets":
        return len(re.findall(r"(?:^|\n)\s*\*\s+", response)) == kw.get("N", 0)
    if t == "Title":
        return bool(re.search(r"<<[^>]+>>", response))
    if t == "Minimum Number Highlighted Section":
        return len(re.findall(r"\*([^*]+)\*", response)) >= kw.get("N", 0)
    if t == "Multiple Sections":
        splitter = re.escape(kw.get("section_splitter", ""))
        parts = re.split(rf"\s*{splitter}\s*", response.strip())
        return len([s for s in parts if s.strip()]) == kw.get("N", 0)
    if t == "Repeat Prompt":
        return response.strip().lower().startswith(question.strip().lower())
    if t == "Two Responses":
        parts = response.split("******")
        return len(parts) == 2 and parts[0].lower().strip() != parts[1].lower().strip()
    if t == "All Uppercase":
        return response.isupper()
    if t == "All Lowercase":
        return response.islower()
    if t == "Start Checker":
        phrase = _letters(kw.get("start_phrase", ""), r"[^a-zA-Z ]")
        return _letters(response, r"[^a-zA-Z ]").startswith(phrase)
    if t == "End Checker":
        phrase = _letters(kw.get("end_phrase", ""), r"[^a-zA-Z ]")
        return _letters(response, r"[^a-zA-Z ]").endswith(phrase)
    if t == "Quotation":
        s = response.strip()
        return s.startswith('"') and s.endswith('"')
    if t == "No Commas":
        return "," not in response
    return False


def mmau_pro_scores(text):
    """extract_scores_from_evaluation -> the overall score."""
    scores = {}
    patterns = {
        "correctness": r"CORRECTNESS:\s*(\d+)",
        "relevance": r"RELEVANCE:\s*(\d+)",
        "completeness": r"COMPLETENESS:\s*(\d+)",
        "clarity": r"CLARITY:\s*(\d+)",
        "overall": r"OVERALL:\s*(\d+(?:\.\d+)?)",
    }
    for name, pattern in patterns.items():
        m = re.search(pattern, text, re.IGNORECASE)
        scores[name] = float(m.group(1)) if m else 3.0
    if scores["overall"] == 3.0:
        four = ["correctness", "relevance", "completeness", "clarity"]
        scores["overall"] = float(np.mean([scores[k] for k in four]))
    return scores["overall"]


def mmau_pro_overall(rows, judge_reply, nearest, sentences):
    """main() on rows (dicts with the parquet's columns and model_output): the weighted overall
    and the per-category scores. ``judge_reply(question, answer, output)`` stands in for Qwen,
    ``nearest(output, choices)`` for NV-Embed."""
    results = {}
    open_rows = [r for r in rows if r["category"] == "open"]
    if open_rows:
        overall = [
            mmau_pro_scores(judge_reply(r["question"], r["answer"], r.get("model_output") or ""))
            for r in open_rows
        ]
        results["open"] = (float(np.mean(overall)) / 5.0, len(open_rows))
    aif = [r for r in rows if r["category"] == "instruction following"]
    if aif:
        ok = [
            mmau_pro_aif(
                str(r.get("model_output")),
                r.get("task_identifier"),
                r.get("kwargs"),
                r.get("question", ""),
                sentences,
            )  # fmt: skip
            for r in aif
        ]
        results["instruction following"] = (float(np.mean([float(x) for x in ok])), len(aif))
    closed = [
        r for r in rows
        if r["category"] not in ("open", "instruction following")
        and r.get("choices") is not None and len(r["choices"]) > 1
    ]  # fmt: skip
    for cat in dict.fromkeys(r["category"] for r in closed):
        mine = [r for r in closed if r["category"] == cat]
        hits = [nearest(r.get("model_output") or "", list(r["choices"])) == r["answer"]
                for r in mine]  # fmt: skip
        results[cat] = (float(np.mean(hits)), len(mine))
    total = sum(n for _, n in results.values())
    weighted = sum(score * n for score, n in results.values()) / total if total else 0.0
    return weighted, {k: v[0] for k, v in results.items()}
