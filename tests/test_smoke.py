"""`cafe train smoke` end to end at a reduced scale: tiny model, synth data through the offline
pipeline, 40 SFT steps (the loss must fall), one GRPO step (its reward mean/std are reported), a
merged checkpoint scored by `cafe run` before/after with a format-ok rate counted from the run."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import torch
import trl  # noqa: F401  (needed installed: fail, never skip)
import yaml


def test_smoke_end_to_end(tmp_path, monkeypatch, capsys):
    from cafe.training.grpo import load_policy
    from cafe.training.recipes import load_recipe
    from cafe.training.smoke import run_smoke

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    recipe = load_recipe("smoke")
    recipe["sft"]["max_steps"] = 40
    recipe["grpo"]["max_steps"] = 1
    lines: list[str] = []
    out = run_smoke(tmp_path / "w", limit=2, recipe=recipe, echo=lines.append)
    console = capsys.readouterr().out  # what the trainers printed themselves

    text = "\n".join(lines)
    print(text)
    for stage in ("clips", "questions", "question_filter", "difficulty", "pools", "cot_filter"):
        assert f"[data] {stage}" in text
    assert "[smoke] SFT loss: first" in text and "[smoke] GRPO step 1: reward mean" in text
    assert "before" in text and "after" in text and "format %" in text
    # SFT learns: full fine-tuning at a high LR on 4 concise targets (6.5 -> ~0.5 in 40 steps)
    losses = out["sft_loss"]
    assert len(losses) == 40
    assert losses[-1] < 0.5 * losses[0]
    ok_train, n_train = out["sft_train_format_ok"]
    assert n_train == 4 and 0 <= ok_train <= n_train
    assert f"training prompts: {ok_train}/4 in the strict MPAR² format" in text
    # GRPO: TRL's reward mean/std for the one step, read back from its log history
    (step,) = out["grpo_steps"]
    assert step["reward"] >= 0 and step["reward_std"] >= 0
    # the recipe scripts 2 of each group's 4 completions (ScriptedRollouts): the reference chain
    # (format 1, right answer: reward >= gamma + delta = 1.6) and the chain without tags (format
    # 0, no sections: reward <= gamma = 1.5). Rewards differ by construction, whatever the tiny
    # policy samples, so the std and the policy gradient are non-zero; format's mean over the 4
    # lies in [1/4, 3/4] (the two sampled ones count 0 or 1 each)
    assert recipe["scripted_rollouts"] == 2 and recipe["grpo"]["num_generations"] == 4
    assert 0.25 <= step["mpar2/format"] <= 0.75
    assert step["reward_std"] > 0 and step["grad_norm"] > 0
    assert "[smoke] GRPO groups: 2 of 4 completions scripted" in text
    # TRL's per-step dicts are in the trainers' log files, not in the summary
    assert "'loss'" not in console and "'reward_std'" not in console, console[-500:]
    for ckpt in (tmp_path / "w" / "sft", out["checkpoint"]):
        logged = [json.loads(x) for x in (Path(f"{ckpt}.trainer") / "log.jsonl").open()]
        assert logged and all("step" in x for x in logged)
    assert sum("reward_std" in x for x in logged) == 1  # the one GRPO step
    assert step["completions/mean_length"] > 16  # room for MPAR² tags (was capped at 16)
    for name in ("before", "after"):
        run_dir = tmp_path / "w" / "runs" / name
        preds = (run_dir / "predictions.jsonl").read_text().splitlines()
        assert len(preds) == 2  # every item accounted for
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["accuracy"]["total"]["total"] == 2
        assert out[name]["acc"] == metrics["accuracy"]["total"]["acc"]
        ok = sum(json.loads(p)["sections"]["format_ok"] for p in preds)
        assert out[name]["format_ok_rate"] == 100.0 * ok / 2
    # the merged checkpoint loads like any checkpoint, and training changed its weights
    final, _ = load_policy(out["checkpoint"])
    base, _ = load_policy(tmp_path / "w" / "base")
    assert not any("lora" in n for n, _ in final.named_parameters())
    assert any(
        not torch.equal(a, b)
        for (_, a), (_, b) in zip(final.named_parameters(), base.named_parameters(), strict=True)
    )
    # `cafe run --model CHECKPOINT` resolved each folder to the Qwen2-Audio adapter; the trained
    # one runs as itself, under the card `cafe train` wrote beside its weights
    for name, folder in (("before", tmp_path / "w" / "base"), ("after", out["checkpoint"])):
        manifest = json.loads((tmp_path / "w" / "runs" / name / "manifest.json").read_text())
        assert manifest["checkpoint"]["path"] == str(folder)
        assert manifest["model"]["adapter"] == "qwen2-audio"
    before = json.loads((tmp_path / "w" / "runs" / "before" / "manifest.json").read_text())
    assert before["model"]["name"] == "qwen2-audio-7b-instruct" and before["model"]["trained"] == {}
    after = json.loads((tmp_path / "w" / "runs" / "after" / "manifest.json").read_text())
    card = after["model"]
    assert (card["name"], card["group"], card["prompt_style"]) == ("smoke-grpo", "MPAR²", "mpar2")
    trained = card["trained"]
    sft_dir, data_dir = tmp_path / "w" / "sft", tmp_path / "w" / "data"
    assert trained["stage"] == "grpo" and trained["base_model"] == str(sft_dir)
    assert trained["base_card"] == "smoke-sft" and trained["recipe"] == "smoke"
    rl_rows = Path(trained["data"])
    assert rl_rows.is_file() and data_dir in rl_rows.parents
    assert trained["data_sha256"] == hashlib.sha256(rl_rows.read_bytes()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", trained["recipe_sha256"])
    assert after["spec"]["model"] == "smoke-grpo"
    after_preds = (tmp_path / "w" / "runs" / "after" / "predictions.jsonl").open()
    assert {json.loads(x)["model"] for x in after_preds} == {"smoke-grpo"}
    # the leaderboard row and the report name it, in its own group
    from cafe.reports.leaderboard import row_from_run

    row = row_from_run(tmp_path / "w" / "runs" / "after")
    assert (row.model, row.group) == ("smoke-grpo", "MPAR²")
    sft_card = yaml.safe_load((sft_dir / "cafe-card.yaml").read_text())
    assert sft_card["name"] == "smoke-sft" and sft_card["trained"]["base_model"] == str(
        tmp_path / "w" / "base"
    )


def test_concise_cot_is_mpar2_format_with_one_line_per_source():
    from cafe.parsing import parse_sections
    from cafe.training.data.rules import write_cot

    clip = {
        "events": [
            {"label": "tone", "onset": 2.04, "offset": 2.12},
            {"label": "noise_burst", "onset": 0.26, "offset": 1.81},
            {"label": "tone", "onset": 0.37, "offset": 0.45},
        ]
    }
    q = {"answer_text": "two", "dimension": "counting"}
    s = parse_sections(write_cot(clip, q, "concise"))
    assert s.format_ok and s.answer == "two"
    # each source once, at its first occurrence, chronological, 1-decimal times
    assert s.perception == "1. [0.3, 1.8]: a noise burst\n2. [0.4, 0.5]: a tone"
    assert s.steps == ["Sub-question: which option fits the noise burst? Answer: two"]
    full = parse_sections(write_cot(clip, q))
    assert full.format_ok and len(full.perception_events) == 3 and len(full.steps) == 3
