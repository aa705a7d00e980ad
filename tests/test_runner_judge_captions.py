"""`cafe run --judge openai-compatible --captions FILE`: the inline LLM judge gets each item's
caption from the captions file (benchmarks such as MMAR carry none) and the run ends with CAFE
metrics counted from the judge's replies."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.runner.cli import run_command
from cafe.testing.loopback import OpenAILoopback

register()


def test_inline_llm_judge_reads_captions_file(tmp_path: Path) -> None:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW])
    ids = [json.loads(x)["id"] for x in meta.read_text().splitlines()]
    caps = tmp_path / "caps.jsonl"
    caps.write_text(
        "".join(json.dumps({"sample_id": i, "caption": f"CAPTION-OF-{i}"}) + "\n" for i in ids)
    )
    # every item: 1 matched, 1 hallucinated, 0 misused, 0 neutral, 1 missed
    reply = {
        "required_events": ["tone", "hum"],
        "all_caption_events": ["tone", "hum"],
        "all_reasoning_events": ["tone", "bark"],
        "matched_events": ["tone"],
        "error_matched": ["bark"],
        "error_use": [],
        "neutral_events": [],
        "missed_events": ["hum"],
    }
    with OpenAILoopback(reply=lambda body: json.dumps(reply)) as judge:
        result = CliRunner().invoke(
            run_command,
            [
                "--model", "tone", "--bench", "tone", "--data", str(meta),
                "--out", str(tmp_path / "run"), "--quiet",
                "--judge", "openai-compatible", "--judge-model", "judge-x",
                "--judge-endpoint", judge.url, "--captions", str(caps),
            ],
        )  # fmt: skip
        prompts = [json.dumps(b["messages"]) for b in judge.requests]
    assert result.exit_code == 0, result.output
    assert len(prompts) == 2
    for i in ids:
        assert sum(f"CAPTION-OF-{i}" in p for p in prompts) == 1
    cafe = json.loads((tmp_path / "run" / "metrics.json").read_text())["cafe"]
    # pooled over 2 items: N_pred = 2 mat + 2 hal = 4, N_tgt = 2 mat + 2 miss = 4
    assert cafe["acc_per"] == 50.0
    assert cafe["err_per"] == 50.0
    assert cafe["err_use"] == 0.0
    assert cafe["err_omit"] == 50.0
