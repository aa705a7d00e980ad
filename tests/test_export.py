"""Export of a run folder into the official scripts' input, checked by running the transcribed
official scripts on the export and comparing with our accuracy section."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner
from official_scripts import mmar_evaluate, mmau_evaluate

from cafe.benchmarks.cli import export_command
from cafe.benchmarks.export import export_run
from cafe.benchmarks.mmar import MMAR
from cafe.benchmarks.mmau import MMAU
from cafe.benchmarks.scoring import accuracy_section
from cafe.records import Prediction
from cafe.store import PREDICTIONS, RunStore


def _make_run(tmp_path, bench, loaded):
    """A run folder as the runner writes it: manifest, samples.jsonl, predictions.jsonl with two
    runs mixing right, wrong, unparsed and failed items."""
    store = RunStore(tmp_path / f"run-{bench.name}").create()
    store.write_manifest({"bench": {"name": bench.name, "version": loaded.version}})
    store.write_samples(loaded.samples)
    preds = []
    for i, s in enumerate(loaded.samples):
        other = next(c for c in s.choices if c.strip() != s.answer.strip())
        for run in (0, 1):
            kind = (i + run) % 5
            answer = {0: s.answer, 1: other, 2: None, 3: s.answer, 4: s.answer.upper()}[kind]
            error = "audio: file not found" if kind == 3 else None
            preds.append(
                Prediction(s.id, run, "m", "lalm", "h", f"raw {i}", answer=answer, error=error)
            )
    with store.writer(PREDICTIONS) as w:
        w.write_many(preds)
    return store, preds


def _run_only(preds, run):
    return [p for p in preds if p.run_index == run]


def test_mmau_export_matches_official_script(shared_data, tmp_path):
    path = os.path.join(shared_data, "mmau", "mmau-test-mini.json")
    bench = MMAU()
    loaded = bench.load(path)
    store, preds = _make_run(tmp_path, bench, loaded)
    out = tmp_path / "mmau_run1.json"
    counts = export_run(store.root, "mmau", out, run_index=1)
    assert counts == {"items": 1000, "answered": 600, "unanswered": 400}
    exported = json.loads(out.read_text())
    raw = json.load(open(path))
    # the metadata items as published (list-valued categories restored) plus model_output
    assert [{k: v for k, v in e.items() if k != "model_output"} for e in exported] == raw
    official = mmau_evaluate(out)
    ours = accuracy_section(loaded.samples, _run_only(preds, 1), bench.breakdowns)
    assert official["total"] == 1000 and official["correct"] == ours["total"]["correct"]
    for task, (corr, tot) in official["groups"]["task"].items():
        assert ours["breakdowns"]["task"][task] == {
            "correct": corr,
            "total": tot,
            "acc": round(100 * corr / tot, 2),
        }
    # leaving unanswered items out reproduces the official scripts' own denominator
    export_run(store.root, "mmau", out, run_index=1, skip_unanswered=True)
    official = mmau_evaluate(out)
    assert (official["correct"], official["total"]) == (
        ours["official_denominator"]["correct"],
        ours["official_denominator"]["total"],
    )


def test_mmar_export_cli_jsonl(shared_data, tmp_path):
    path = os.path.join(shared_data, "mmar", "MMAR-meta.jsonl")
    bench = MMAR()
    loaded = bench.load(path)
    loaded.samples = loaded.samples[:200]  # v2 items carry long rubrics: keep the test quick
    store, preds = _make_run(tmp_path, bench, loaded)
    out = tmp_path / "export" / "mmar.jsonl"
    res = CliRunner().invoke(
        export_command, [str(store.root), "--out", str(out)]
    )  # format from manifest
    assert res.exit_code == 0, res.output
    assert "wrote 200 items" in res.output
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    raw = [json.loads(line) for line in open(path)][:200]
    assert [{k: v for k, v in e.items() if k != "answer_prediction"} for e in exported] == raw
    assert list(exported[0])[:5] == ["id", "audio_path", "question", "choices", "answer"]
    official = mmar_evaluate(out)
    ours = accuracy_section(loaded.samples, _run_only(preds, 0), bench.breakdowns)
    assert (official["correct"], official["total"]) == (ours["total"]["correct"], 200)
    for layer, (corr, tot) in official["groups"]["category"].items():
        assert ours["breakdowns"]["category"][layer]["correct"] == corr
        assert ours["breakdowns"]["category"][layer]["total"] == tot
    # the raw output instead of the extracted answer
    res = CliRunner().invoke(
        export_command,
        [str(store.root), "--bench", "mmar", "--out", str(out), "--field", "raw"],
    )
    assert res.exit_code == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert first["answer_prediction"] == "raw 0"


def test_export_errors_are_one_line(tmp_path):
    store = RunStore(tmp_path / "empty").create()
    res = CliRunner().invoke(export_command, [str(store.root), "--out", str(tmp_path / "x.json")])
    assert res.exit_code != 0 and "--bench" in res.output
    res = CliRunner().invoke(
        export_command, [str(store.root), "--bench", "mmau", "--out", str(tmp_path / "x.json")]
    )
    assert res.exit_code != 0 and "no samples.jsonl" in res.output
