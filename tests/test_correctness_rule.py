"""One correctness rule: the official match on the model's answer text is the headline; the
choice-mapped figure is reported beside it, labelled. A model answering with bare letters scores
0 under the headline and its letter accuracy under the lenient figure; `cafe export` plus an
independent transcription of the official script reproduces the headline item for item."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from official_scripts import mmau_evaluate

from cafe.benchmarks.export import export_run
from cafe.benchmarks.string_match import output_is_correct
from cafe.records import Completion, Sample
from cafe.runner.main import run_with
from cafe.runner.score import score_completion


def _preds(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "predictions.jsonl").open()]


def _samples(run_dir: Path) -> dict[str, dict]:
    return {d["id"]: d for d in map(json.loads, (run_dir / "samples.jsonl").open())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("rule")
    kw = dict(version="n20-seed0", judge="none", progress=False, cache=False)
    plain = run_with("random", "synth", out=root / "plain", **kw)
    letters = run_with("random", "synth", out=root / "letters", options={"letters": True}, **kw)
    return plain, letters


def test_bare_letters_score_zero_officially_and_their_letter_accuracy_leniently(runs):
    plain, letters = runs
    preds, samples = _preds(letters.run_dir), _samples(letters.run_dir)
    assert all(p["answer_text"].startswith("(") and len(p["answer_text"]) == 3 for p in preds)
    # by hand: the letter's option is right when choices[letter] == answer
    hand = sum(
        samples[p["sample_id"]]["choices"][ord(p["answer_text"][1]) - ord("A")]
        == samples[p["sample_id"]]["answer"]
        for p in preds
    )
    acc = letters.metrics["accuracy"]
    assert acc["total"] == {"correct": 0, "total": 20, "acc": 0.0}  # a bare "(B)" is wrong
    assert acc["lenient"]["total"]["correct"] == hand
    assert acc["parse_status"]["ok"] == 20
    assert "official" in acc["rule"] and "lenient" in acc["lenient"]["label"]
    # the same seeded picks written as option text: the headline equals the letters' lenient one
    assert plain.metrics["accuracy"]["total"]["correct"] == hand
    assert 0 < hand < 20


def test_export_and_the_official_script_reproduce_the_headline_item_for_item(runs, tmp_path):
    for result in runs:
        out = tmp_path / f"{result.run_dir.name}.json"
        export_run(result.run_dir, "mmau", out)
        official = mmau_evaluate(str(out))
        ours = {p["sample_id"]: p["correct"] for p in _preds(result.run_dir)}
        assert official["matches"] == ours
        assert official["correct"] == result.metrics["accuracy"]["total"]["correct"]


def test_an_answer_naming_a_distractor_is_wrong_officially_and_right_leniently():
    s = Sample("x", "mmau", "v", "What?", ["dog barking", "cat meowing"], "dog barking", [])
    comp = Completion("x", 0, "<answer>dog barking, not cat</answer>")
    base = {"model": "m", "prompt_style": "larm", "template_hash": "h"}
    from cafe.benchmarks.mmau import MMAU

    p = score_completion(s, comp, base, len, MMAU().is_correct)
    # official: "cat" is a distractor token -> wrong; mapped: only "dog barking" is named whole
    assert p.answer_text == "dog barking, not cat" and p.correct is False
    assert p.answer == "dog barking" and p.correct_lenient is True
    # the difficulty filter and the GRPO accuracy reward read a whole output the same way
    assert output_is_correct(comp.text, s.answer, s.choices) is False
    assert output_is_correct("<answer>(A)</answer>", s.answer, s.choices) is False
    assert output_is_correct("<answer>Dog barking.</answer>", s.answer, s.choices) is True


def test_grpo_accuracy_reward_uses_the_rule_on_the_answer_text():
    import asyncio

    from cafe.training.grpo import make_reward_func
    from cafe.training.reward_judge import OfflineRewardJudge

    logged: dict[str, float] = {}
    asyncio.run(
        make_reward_func(OfflineRewardJudge())(
            prompts=[[{"role": "user", "content": "q"}]] * 2,
            completions=[
                [{"role": "assistant", "content": f"<answer>{a}</answer>"}]
                for a in ("(A)", "dog barking")
            ],  # fmt: skip
            answer=["dog barking"] * 2,
            choices=[["dog barking", "cat meowing"]] * 2,
            log_metric=lambda k, v: logged.__setitem__(k, v),
        )
    )
    assert logged["mpar2/acc"] == 0.5  # the bare letter earns no accuracy reward


def test_option_temperature_zero_overrides_a_sampling_card(tmp_path):
    """`-o temperature=0` sets the decoding of a card that samples (the paper's cards do): it
    goes into the run's generation settings, not to the adapter as an option."""
    res = run_with("random", "synth", version="n20-seed0", judge="none", progress=False,
                   cache=False, out=tmp_path / "r",
                   options={"temperature": 0, "do_sample": False})  # fmt: skip
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    text = json.dumps(manifest)
    assert '"temperature": 0' in text and '"do_sample": false' in text
    assert "temperature" not in json.dumps(manifest.get("adapter_options") or {})
