"""Bad input: every broken item is recorded as failed with a one-line reason naming file,
sample id and field, the run goes on, and --strict stops at the first with a nonzero exit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.runner.cli import run_command
from cafe.runner.main import run_with

register()


def _broken_bench(root: Path) -> Path:
    meta = write_tone_bench(root, [HIGH, HIGH, HIGH, HIGH, HIGH, HIGH, LOW, HIGH, HIGH, HIGH])
    rows = [json.loads(x) for x in meta.read_text().splitlines()]
    rows[1]["audio"] = "nope.wav"  # missing
    (root / "t2.wav").write_bytes(b"")  # empty
    (root / "t3.wav").write_bytes(bytes(range(256)) * 8)  # corrupt
    (root / "t4.wav").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 500)  # not audio at all
    t = np.arange(22050) / 44100  # 44.1 kHz stereo: resampled and downmixed, runs normally
    tone = 0.5 * np.sin(2 * np.pi * 880 * t)
    sf.write(root / "t5.wav", np.stack([tone, tone], axis=1), 44100)
    t8 = np.arange(4000) / 8000  # 8 kHz low tone
    sf.write(root / "t6.wav", 0.5 * np.sin(2 * np.pi * 220 * t8), 8000)
    rows[7]["answer"] = "medium tone"  # not among its choices
    rows[8]["id"] = "t0"  # duplicate id
    rows[9]["dimension"] = 3  # malformed metadata
    lines = [json.dumps(r) for r in rows] + ["{not json"]
    meta.write_text("\n".join(lines) + "\n")
    return meta


def test_bad_items_fail_with_reasons_and_the_run_goes_on(tmp_path: Path) -> None:
    meta = _broken_bench(tmp_path / "b")
    out = tmp_path / "r"
    result = CliRunner().invoke(
        run_command,
        ["--model", "tone", "--bench", "tone", "--data", str(meta), "--out", str(out),
         "--no-cache", "--quiet"],
    )  # fmt: skip
    # every item was processed, but 6 of 9 failed: the command says so and exits non-zero
    assert result.exit_code == 1, result.output
    assert "6 of 9 items failed (5 distinct reason(s)):" in result.output
    assert "2 x " in result.output  # the two undecodable clips are one reason, counted twice
    assert "Traceback" not in result.output
    preds = {
        p["sample_id"]: p
        for p in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())
    }
    assert sorted(preds) == ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t9"]
    root = tmp_path / "b"
    expected_errors = {
        "t1": f"{root / 'nope.wav'}: sample t1: field audio: file not found",
        "t2": f"{root / 't2.wav'}: sample t2: field audio: file is empty",
        "t7": f"{meta}: sample t7: field answer: answer 'medium tone' is not among the choices",
        "t9": f"{meta}: sample t9: field dimension: must be a string",
    }
    for sid, err in expected_errors.items():
        assert preds[sid]["error"] == err and preds[sid]["parse_status"] == "failed"
    for sid in ("t3", "t4"):
        assert preds[sid]["error"].startswith(
            f"{root / (sid + '.wav')}: sample {sid}: field audio:"
        )
        assert "cannot decode audio" in preds[sid]["error"]
        assert "\n" not in preds[sid]["error"]
    assert preds["t5"]["correct"] and preds["t6"]["correct"] and preds["t0"]["correct"]
    acc = json.loads((out / "metrics.json").read_text())["accuracy"]
    # 9 items: 3 right, 6 failed (all in the denominator)
    assert acc["total"] == {"correct": 3, "total": 9, "acc": 33.33}
    assert acc["failed"] == 6 and acc["unanswered"] == 6
    warnings = result.stderr if hasattr(result, "stderr") else result.output
    assert f"warning: {meta}: sample t0: field id: duplicate id; later copy skipped" in warnings
    assert f"warning: {meta}: line 11: not valid JSON" in warnings
    # audio found bad while running is reported on the console too, one line per item
    assert f"error: {root / 'nope.wav'}: sample t1: field audio: file not found\n" in warnings
    assert f"error: {root / 't2.wav'}: sample t2: field audio: file is empty\n" in warnings
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["bench"]["problems"]) == 4  # bad line, dimension, duplicate, answer


def test_strict_stops_at_the_first_bad_input(tmp_path: Path) -> None:
    meta = _broken_bench(tmp_path / "b")
    args = ["--model", "tone", "--bench", "tone", "--data", str(meta), "--no-cache", "--quiet"]
    result = CliRunner().invoke(run_command, [*args, "--out", str(tmp_path / "r"), "--strict"])
    assert result.exit_code == 1
    assert f"--strict: {meta}: sample t9: field dimension: must be a string" in result.output
    assert not (tmp_path / "r" / "predictions.jsonl").exists()


def test_strict_stops_on_bad_audio_found_while_running(tmp_path: Path) -> None:
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    (tmp_path / "b" / "t2.wav").write_bytes(b"")
    log = tmp_path / "calls.log"
    try:
        run_with("tone", "tone", data=str(meta), out=tmp_path / "r", progress=False, cache=False,
            strict=True, batch_size=1, options={"log": str(log)})  # fmt: skip
    except Exception as e:
        assert type(e).__name__ == "RunError"
        assert (
            str(e)
            == f"--strict: {tmp_path / 'b' / 't2.wav'}: sample t2: field audio: file is empty"
        )
    else:
        raise AssertionError("--strict did not stop")
    lines = (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()
    assert all(json.loads(x)["sample_id"] != "t2" for x in lines)
