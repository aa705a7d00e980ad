"""Failures are classified: an adapter exception is recorded once (traceback in run.log, one
line per item), not retried by a re-run until --retry-failed; missing audio is retried once the
file appears; a model that cannot load leaves no new folder (a resumed one: status "failed");
a run where most items fail says why (distinct reasons with counts) and exits non-zero."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.failures import reason_key, summary_lines
from cafe.runner.cli import run_command

register()


def _run(meta: Path, out: Path, *extra: str):
    return CliRunner().invoke(
        run_command,
        ["--model", "tone", "--bench", "tone", "--data", str(meta), "--out", str(out),
         "--no-cache", "--quiet", "--batch-size", "1", "--judge", "none", *extra],
    )  # fmt: skip


def _preds(out: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    return {r["sample_id"]: r for r in rows}  # last write wins, as the store reads it


def test_adapter_exception_is_logged_once_and_not_retried_until_asked(tmp_path):
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    out = tmp_path / "r"
    bug = tmp_path / "bug.txt"
    bug.write_text("t1 t2")
    first = _run(meta, out, "-o", f"bug_file={bug}")
    assert first.exit_code == 0, first.output  # 2 of 4 failed: not most
    preds = _preds(out)
    for sid in ("t1", "t2"):
        p = preds[sid]
        assert p["sections"]["failure"] == "adapter" and "\n" not in p["error"]
        assert p["error"].startswith(f"adapter error: KeyError: 'adapter bug on {sid}'")
        assert "run.log" in p["error"]
    log = (out / "run.log").read_text()
    assert log.count("Traceback (most recent call last)") == 1  # the same bug: logged once
    assert "runner_helpers.py" in log and "raise KeyError" in log
    assert "2 of 4 items failed" in first.output and "--retry-failed" in first.output
    assert "Traceback" not in first.output

    bug.unlink()  # the adapter is fixed
    again = _run(meta, out, "-o", f"bug_file={bug}")  # a plain re-run: adapter errors stay
    assert "0 new predictions (nothing left to run, no model loaded)" in again.output
    fixed = _run(meta, out, "-o", f"bug_file={bug}", "--retry-failed")  # asked to retry them
    assert "2 new predictions" in fixed.output
    assert {p["parse_status"] for p in _preds(out).values()} == {"ok"}


def test_missing_audio_is_retried_once_the_file_appears(tmp_path):
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH])
    shutil.move(tmp_path / "b" / "t1.wav", tmp_path / "t1.wav")
    out = tmp_path / "r"
    first = _run(meta, out)
    assert _preds(out)["t1"]["sections"]["failure"] == "audio"
    assert "add or fix the files and run the same command again" in first.output
    unchanged = _run(meta, out)  # nothing changed: nothing to do, no model loaded
    assert "0 new predictions (nothing left to run, no model loaded)" in unchanged.output
    shutil.move(tmp_path / "t1.wav", tmp_path / "b" / "t1.wav")
    added = _run(meta, out)
    assert "1 new predictions (model loaded)" in added.output
    assert _preds(out)["t1"]["parse_status"] == "ok" and _preds(out)["t1"]["correct"]


def test_a_folder_without_audio_exits_non_zero_with_counted_reasons(tmp_path):
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW])
    for i in range(4):
        (tmp_path / "b" / f"t{i}.wav").unlink()
    out = tmp_path / "r"
    r = _run(meta, out)
    assert r.exit_code == 1
    assert "4 of 4 items failed (1 distinct reason(s)):" in r.output
    assert "4 x " in r.output and "file not found" in r.output
    assert "Traceback" not in r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == {"predictions": 4, "failed": 4}


def test_a_model_that_cannot_load_leaves_no_folder(tmp_path):
    meta = write_tone_bench(tmp_path / "b", [HIGH])
    out = tmp_path / "r"
    r = CliRunner().invoke(
        run_command,
        ["--model", "qwen2-audio", "--checkpoint", str(tmp_path / "no-such-weights"),
         "--bench", "tone", "--data", str(meta), "--out", str(out), "--quiet"],
    )  # fmt: skip
    assert r.exit_code == 1 and "cannot load model" in r.output and "Traceback" not in r.output
    # issue 21: weights that are not there are found before the run folder is made, so a failed
    # load leaves none behind (a load failing later still marks its manifest "failed")
    assert "no such folder" in r.output and not out.exists()


def test_reason_key_groups_what_varies_per_item():
    a = "/d/t3.wav: sample t3: field audio: cannot decode audio (Error opening '/d/t3.wav')"
    b = "/d/t4.wav: sample t4: field audio: cannot decode audio (Error opening '/d/t4.wav')"
    assert reason_key(a, "t3") == reason_key(b, "t4")
    lines = summary_lines("items", [(a, "t3"), (b, "t4"), ("HTTP 500 after 6 attempt(s)", "t5")], 9)
    assert lines[0] == "3 of 9 items failed (2 distinct reason(s)):"
    assert lines[1] == f"  2 x {a}" and lines[2] == "  1 x sample t5: HTTP 500 after 6 attempt(s)"


def test_a_broken_adapter_module_names_the_module_and_the_missing_package(tmp_path, monkeypatch):
    import pytest

    from cafe.registry import EntryImportError, Registry

    (tmp_path / "needs_pkg.py").write_text("import no_such_package_xyz\nclass A: pass\n")
    (tmp_path / "has_bug.py").write_text("class A:\n    pass\nundefined_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry = Registry("adapter")
    reg.add_lazy("needs", "needs_pkg:A")
    reg.add_lazy("buggy", "has_bug:A")
    with pytest.raises(EntryImportError) as e:
        reg.get("needs")
    assert str(e.value) == (
        "adapter 'needs': cannot import module needs_pkg (missing package "
        "'no_such_package_xyz'; install it (or the extra that provides it))"
    )
    with pytest.raises(EntryImportError, match=r"cannot import module has_bug \(NameError: "
                       r"name 'undefined_name' is not defined at .*has_bug.py:3\)"):  # fmt: skip
        reg.get("buggy")


def test_a_checkpoint_whose_adapter_module_is_broken_says_so(tmp_path, monkeypatch):
    from cafe.adapters import ADAPTERS

    (tmp_path / "broken_adapter_mod.py").write_text("import missing_engine_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ADAPTERS.add_lazy("broken-x", "broken_adapter_mod:Adapter")
    try:
        ckpt = tmp_path / "ckpt"
        ckpt.mkdir()
        (ckpt / "config.json").write_text('{"model_type": "broken_x"}')
        r = CliRunner().invoke(run_command, ["--model", str(ckpt), "--quiet"])
    finally:
        ADAPTERS._lazy.pop("broken-x", None)
    assert r.exit_code == 1 and "no adapter declares 'broken_x'" in r.output
    assert "broken_adapter_mod (missing package 'missing_engine_pkg'" in r.output
    assert "Traceback" not in r.output
