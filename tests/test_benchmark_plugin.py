"""A benchmark from another installed package (entry point group ``cafe.benchmarks``) brings its
own facts (default judge, prediction keys, export format, headline breakdown, correctness rule)
and works with run, export, score, judge, report and leaderboard add without any cafe module
knowing its name."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import numpy as np
from runner_helpers import CLI, HIGH, LOW, subprocess_env, write_dist

from cafe.audio import write_wav

PLUGIN = '''
import json
from pathlib import Path

from cafe.benchmarks.base import Benchmark, ExportFormat, LoadedBenchmark
from cafe.records import Event, Sample


class Chirp(Benchmark):
    """JSONL: id, question, choices, answer, wav (relative), kind (sound/music/speech)."""

    name = "chirp"
    breakdowns = {"kind": lambda s: s.meta.get("kind")}
    default_judge = "rule"  # samples carry their ground-truth events
    prediction_keys = ("chirp_answer",)
    export_format = ExportFormat("chirp_answer", "wav")
    modality_breakdown = "kind"

    def is_correct(self, prediction, answer, choices):
        return prediction == answer  # case-sensitive: stricter than the official rule

    def load(self, data=None, version=None):
        path = Path(data)
        samples = []
        for line in path.read_text().splitlines():
            row = json.loads(line)
            samples.append(Sample(
                id=row["id"], bench="chirp", version="c1", question=row["question"],
                choices=row["choices"], answer=row["answer"],
                audio=[str(path.parent / row["wav"])],
                meta={"kind": row["kind"], "wav": row["wav"]},
                events=[Event(0.0, 0.5, "tone", required=True)],
            ))
        return LoadedBenchmark(samples, "c1", str(path), "sha-chirp")
'''


def _plugin(site: Path) -> None:
    (site / "cafe_chirp").mkdir(parents=True)
    (site / "cafe_chirp" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "cafe_chirp-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cafe-chirp\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cafe.benchmarks]\nchirp = cafe_chirp:Chirp\n")


def _bench(root: Path) -> Path:
    """Three items; c2 is labelled high but its clip is low, so a listening model misses it."""
    root.mkdir(parents=True)
    t = np.arange(8000) / 16000
    rows = []
    for i, (label, freq, kind) in enumerate(
        [(HIGH, 880, "sound"), (LOW, 220, "music"), (HIGH, 220, "speech")]
    ):
        write_wav(root / f"c{i}.wav", 0.5 * np.sin(2 * np.pi * freq * t))
        rows.append({"id": f"c{i}", "question": "High or low?", "choices": [HIGH, LOW],
                     "answer": label, "wav": f"c{i}.wav", "kind": kind})  # fmt: skip
    meta = root / "chirp.jsonl"
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return meta


def test_plugin_benchmark_through_every_command(tmp_path: Path) -> None:
    site = write_dist(tmp_path / "site")  # the listening "tone" adapter
    _plugin(site)
    env = subprocess_env(site, tmp_path / "cache")
    meta = _bench(tmp_path / "data")
    run_dir = tmp_path / "run"

    def cafe(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([*CLI, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    cafe("run", "--model", "tone", "--bench", "chirp", "--data", str(meta), "--out",
         str(run_dir), "--no-progress")  # fmt: skip
    metrics = json.loads((run_dir / "metrics.json").read_text())
    acc = metrics["accuracy"]
    assert acc["total"] == {"correct": 2, "total": 3, "acc": 66.67}
    assert acc["breakdowns"]["kind"]["speech"] == {"correct": 0, "total": 1, "acc": 0.0}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["judge"]["name"] == "rule"  # the benchmark's default judge ran
    # each output perceives "[0.00, 0.50]: a steady … tone": the one required event, matched
    assert metrics["cafe"]["judge"]["judge"] == "rule-v1"
    assert metrics["cafe"]["counts"]["matched"] == 3 and metrics["cafe"]["counts"]["n_tgt"] == 3

    out = tmp_path / "export.json"
    cafe("export", str(run_dir), "--out", str(out))
    items = json.loads(out.read_text())
    assert [i["chirp_answer"] for i in items] == [HIGH, LOW, LOW]
    assert [i["wav"] for i in items] == ["c0.wav", "c1.wav", "c2.wav"]

    # the benchmark's prediction key and its own (case-sensitive) rule: "HIGH TONE" is wrong
    # here although the official MMAU / MMAR rule would accept it
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps({"id": "c0", "chirp_answer": "HIGH TONE"}) + "\n"
        + json.dumps({"id": "c1", "chirp_answer": LOW}) + "\n"
        + json.dumps({"id": "c2", "model_output": HIGH}) + "\n"  # not the benchmark's key
    )  # fmt: skip
    scored = json.loads(
        cafe(
            "score", "--bench", "chirp", "--meta", str(meta), "--predictions", str(preds), "--json"
        ).stdout  # fmt: skip
    )
    assert scored["total"] == {"correct": 1, "total": 3, "acc": 33.33}
    assert scored["unanswered"] == 1

    cafe("judge", str(run_dir), "--judge", "rule", "--no-progress")
    cafe("report", str(run_dir), "--no-figures")
    assert (run_dir / "report" / "summary.md").exists()

    board = tmp_path / "lb.yaml"
    cafe("leaderboard", "add", str(run_dir), "--leaderboard", str(board))
    import yaml

    row = yaml.safe_load(board.read_text())["rows"][-1]
    assert row["benchmark"] == "chirp" and row["model"] == "tone"
    # the headline breakdown's isolated subsets become the sound / music / speech columns
    assert (row["metrics"]["sound"], row["metrics"]["music"], row["metrics"]["speech"]) == (
        100.0, 100.0, 0.0
    )  # fmt: skip
