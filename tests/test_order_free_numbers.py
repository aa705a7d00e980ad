"""Order-free numbers: every statistic (bootstrap intervals included) is the same for the same
records whatever the order of their file's lines (a resumed or interrupted run appends them in
another order than an uninterrupted one). Records are put in one order (sample id, run index)
before any resampling or sum."""

from __future__ import annotations

import json
import random

from click.testing import CliRunner

from cafe.metrics.cafe import cafe_section
from cafe.metrics.rubric import rubric_section
from cafe.records import Judgement, RubricScore

EVENTS = ["dog", "rain", "bell", "car", "bird", "door"]


def _judgements(n: int = 40, runs: int = 2) -> list[Judgement]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        for r in range(runs):
            pick = lambda k: rng.sample(EVENTS, rng.randint(0, k))  # noqa: E731
            out.append(Judgement(
                f"s{i:02d}", r, "j", "h", "{}", required_events=pick(3),
                all_caption_events=pick(4), all_reasoning_events=pick(4),
                matched_events=pick(3), error_matched=pick(2), error_use=pick(2),
                missed_events=pick(2),
            ))  # fmt: skip
    return out


def _shuffled(xs: list, seed: int) -> list:
    ys = list(xs)
    random.Random(seed).shuffle(ys)
    return ys


def test_cafe_section_is_the_same_for_shuffled_judgements():
    js = _judgements()
    base = json.dumps(cafe_section(js), sort_keys=True)
    for mode in ("micro", "macro"):
        want = json.dumps(cafe_section(js, mode=mode), sort_keys=True)
        for seed in range(3):  # before: the intervals moved with the order (63.999 vs 64.382)
            got = json.dumps(cafe_section(_shuffled(js, seed), mode=mode), sort_keys=True)
            assert got == want, mode
    assert json.loads(base)["ci95"]["acc_per"] is not None  # there is an interval to compare


def test_rubric_section_is_the_same_for_shuffled_records():
    rng = random.Random(3)
    recs = [RubricScore(f"s{i:02d}", r, "j", "h", "ok", True, rng.random())
            for i in range(40) for r in range(2)]  # fmt: skip
    want = json.dumps(rubric_section(recs, []), sort_keys=True)
    for seed in range(3):
        assert json.dumps(rubric_section(_shuffled(recs, seed), []), sort_keys=True) == want


def test_cafe_judge_metrics_are_byte_identical_after_shuffling_judgement_lines(
    tmp_path, monkeypatch
):
    """The whole path: judge a run, shuffle its judgement lines, judge again (nothing left to
    judge: the section is recomputed from the file): metrics.json's cafe section is the same
    bytes."""
    from test_judge_pipeline import VOCAB, build_run

    from cafe.steps.cli import judge_command

    monkeypatch.setattr("cafe.judge.rule.default_vocabulary", lambda: dict(VOCAB))
    store = build_run(tmp_path / "run", n=30)
    args = [str(store.root), "--judge", "rule", "--no-progress", "--cache",
            str(tmp_path / "c.sqlite")]  # fmt: skip
    first = CliRunner().invoke(judge_command, args)
    assert first.exit_code == 0, first.output
    metrics = store.root / "metrics.json"
    stats = (
        "acc_per",
        "err_per",
        "err_use",
        "err_omit",
        "counts",
        "judgements",
        "runs",
        "ci95",
        "pooled",
        "breakdowns",
        "reasoning_accuracy",
    )  # not what one call did

    def numbers() -> dict:
        section = json.loads(metrics.read_text())["cafe"]
        return {k: section[k] for k in stats}

    before = json.dumps(numbers(), sort_keys=True)
    for judged in store.root.glob("judgements*.jsonl"):  # the judge's file and its copy
        if judged.is_symlink():
            continue
        lines = judged.read_text().splitlines()
        assert len(lines) == 31  # 30 items, and the second run of s0 (its prediction failed)
        judged.write_text("\n".join(_shuffled(lines, 1)) + "\n")
    second = CliRunner().invoke(judge_command, args)
    assert second.exit_code == 0, second.output
    after = json.dumps(numbers(), sort_keys=True)
    assert after == before
