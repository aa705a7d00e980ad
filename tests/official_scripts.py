"""Independent transcriptions of the official evaluation scripts' logic, used only by the tests
to check `cafe.benchmarks.scoring` item for item:
- MMAU: Sakshi113/MMAU evaluation.py (reads a JSON list, prediction under `model_output`,
  skips items without the key, counts by task, difficulty and sub-category);
- MMAR: ddlBoJack/MMAR code/evaluation.py (JSON list if the name ends in "json", JSON lines if it
  ends in "jsonl", prediction under `answer_prediction`, skips items without the key, counts by
  modality, category (layer) and sub-category).
Written from reading those scripts; deliberately not sharing code with cafe."""

from __future__ import annotations

import json
import re


def _words(text):
    return set(re.findall(r"\b\w+\b", text.lower()))


def official_match(answer, prediction, choices):
    said = _words(prediction)
    truth = _words(answer)
    if len(said) == 0:
        return False
    wrong = set()
    for c in choices:
        cw = _words(c)
        if cw != truth:
            wrong.update(cw - truth)
    return truth.issubset(said) and said.isdisjoint(wrong)


def _evaluate(items, key, groups):
    correct = total = 0
    per = {g: {} for g in groups}
    matches = {}
    for item in items:
        if key not in item:  # the scripts skip these silently
            continue
        hit = official_match(item["answer"], item[key], item["choices"])
        matches[item["id"]] = hit
        for g in groups:
            v = item.get(g)
            if v is None:
                continue
            cell = per[g].setdefault(v, [0, 0])
            cell[0] += int(hit)
            cell[1] += 1
        correct += int(hit)
        total += 1
    return {"correct": correct, "total": total, "groups": per, "matches": matches}


def mmau_evaluate(path):
    with open(path) as f:
        items = json.load(f)
    return _evaluate(items, "model_output", ("task", "difficulty", "sub-category"))


def mmar_evaluate(path):
    path = str(path)
    with open(path) as f:
        if path.endswith("jsonl"):
            items = [json.loads(line.strip()) for line in f]
        else:
            items = json.load(f)
    return _evaluate(items, "answer_prediction", ("modality", "category", "sub-category"))
