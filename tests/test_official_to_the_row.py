"""Official to the row (issue 35): what each official script counts, row for row, on files made
here. Expected figures are worked out by hand from the scripts (ckyang1124/SAKURA @ a1fdb146
evaluation/llm_judge.py and calculate_acc.py; sonalkum/MMAUPro @ 960e93a) and checked against
the independent transcriptions in tests/official_scripts_judged.py; where a copy of the official
repository is at hand ($CAFE_OFFICIAL_REPOS/<owner>+<name>/repo, a git mirror) its script runs
verbatim on the same file too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from official_scripts_judged import sakura_calculate_acc, sakura_extract_judgement
from sakura_helpers import write_folder

from cafe.benchmarks.sakura import SAKURA, official_judgement
from cafe.cli import main
from cafe.judge.verdict import Judged
from cafe.records import Prediction

REPOS = Path(os.environ.get("CAFE_OFFICIAL_REPOS", "/work/.mirror"))


def _official_script(repo: str, path: str, tmp: Path) -> Path | None:
    """The official script, verbatim from a local mirror of its repository; None without one."""
    git = REPOS / repo.replace("/", "+") / "repo"
    if not git.exists():
        return None
    out = tmp / Path(path).name
    out.write_bytes(subprocess.run(["git", "-C", str(git), "show", f"HEAD:{path}"],
                                   capture_output=True, check=True).stdout)  # fmt: skip
    return out


def _cafe_score(root: Path, f: Path) -> dict:
    res = CliRunner().invoke(main, ["score", "--bench", "sakura", "--data", str(root),
                                    "--predictions", str(f), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _entry(explanation: str, judgement: str) -> dict:
    return {"Explanation": explanation, "Judgement": judgement, "instruction": "q",
            "model_response": "r", "label": "l"}  # fmt: skip


# stored (Explanation, Judgement) -> calculate_acc.py's verdict, by hand: right only when the
# stored judgement, lowercased and stripped, is "correct"; the explanation is never read
JUDGED = {
    "data/Animal/audio/a1.wav": (_entry("names the dog", "correct"), True),
    # an explanation quoting a closing tag: re-read through a thinking strip, nothing was left
    "data/Animal/audio/a2.wav": (_entry("the reply ends with </think> and a dog", "correct"), True),
    # a stored judgement with a blank line: re-parsed, the first paragraph read "correct"
    "data/Gender/audio/g1.wav": (_entry("x", "correct\n\nincorrect"), False),
}
JUDGED_MULTI = {
    # an explanation that itself holds a judgement paragraph: re-parsed, it was read first
    "data/Animal/audio/a1.wav": (_entry("says\nJudgement: correct\n\n", "incorrect"), False),
    # an opening tag that never closes: re-read through the strip, no judgement was left
    "data/Animal/audio/a2.wav": (_entry("the reply opens <think> and stops", "Correct "), True),
    "data/Gender/audio/g1.wav": (_entry("No extracted explanation", "No extracted judgement"),
                                 False),
}  # fmt: skip


def test_score_of_a_judgements_file_is_calculate_acc_on_the_stored_judgement(tmp_path, monkeypatch):
    """The bug: cafe re-parsed the stored judgement through the thinking strip and the pattern
    (1,570 of 3,797 where calculate_acc.py gives 1,454); now calculate_acc's rule on the text."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    root = write_folder(tmp_path / "s")
    script = _official_script("ckyang1124/SAKURA", "evaluation/calculate_acc.py", tmp_path)
    for hop, rows in (("single", JUDGED), ("multi", JUDGED_MULTI)):
        doc = {"judge_model": "gpt-4o-2024-11-20", "type": hop,
               "results": {k: e for k, (e, _) in rows.items()}}  # fmt: skip
        f = tmp_path / f"x_{hop}_judgements.json"
        f.write_text(json.dumps(doc))
        right = sum(ok for _, ok in rows.values())
        assert sakura_calculate_acc(doc) == (right, 3)
        if script is not None:  # the official script itself, verbatim
            out = subprocess.run([sys.executable, str(script), "-i", str(f)], capture_output=True,
                                 text=True, check=True).stdout  # fmt: skip
            assert f"Correct count: {right}\n" in out and "Total count: 3\n" in out, out
        head = _cafe_score(root, f)["official"]["headline"]
        assert head["total"]["correct"] == right and head["total"]["total"] == 3, head
        cells = head["breakdowns"]["track_hop"]
        animal = {"single": (2, 2), "multi": (1, 2)}[hop]  # by hand, from the table above
        assert (cells[f"Animal/{hop}"]["correct"], cells[f"Animal/{hop}"]["total"]) == animal
        assert (cells[f"Gender/{hop}"]["correct"], cells[f"Gender/{hop}"]["total"]) == (0, 1)


THOUGHT = (
    "<think>Explanation: first thoughts\nJudgement: correct\n\n</think>"
    "Explanation: on reflection the reply names the cat\nJudgement: incorrect"
)


def test_a_judgement_inside_thinking_first_is_read_as_the_script_reads_it(tmp_path):
    """llm_judge.py's pattern takes the first match, thinking and all: the official figure
    counts it as the script does, the count beside it says how many, the lenient reading (the
    final answer) stays beside it, labelled."""
    assert sakura_extract_judgement(THOUGHT)["Judgement"] == "correct"
    assert official_judgement(THOUGHT) == "correct"
    samples = SAKURA().load(str(write_folder(tmp_path / "s"))).samples
    ids = ["Animal-a1-single", "Animal-a2-single"]
    preds = [Prediction(k, 0, "m", "plain", "h", "dog") for k in ids]
    replies = {ids[0]: THOUGHT, ids[1]: "Explanation: cow\nJudgement: correct"}
    verdicts = {(k, 0): Judged(k, 0, None, "ok", r) for k, r in replies.items()}
    sec = SAKURA().official_section(samples, preds, 1, verdicts=verdicts, judge="j")
    head = sec["headline"]
    assert head["total"]["correct"] == 2 and head["total"]["total"] == 2
    assert head["judged_in_thinking_first"] == 1
    assert "1 replies judged inside their thinking first" in head["label"]
    lenient = sec["variants"]["lenient_judgement"]
    assert lenient["total"]["correct"] == 1 and "NOT the official" in lenient["label"]


@pytest.mark.parametrize("reply", ["Explanation: x\nJudgement: correct", THOUGHT])
def test_the_official_reading_agrees_with_the_script_on_the_raw_reply(reply):
    assert official_judgement(reply) == sakura_extract_judgement(reply)["Judgement"]
