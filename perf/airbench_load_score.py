"""AIR-Bench load + score cost per item beside MMAR's, measured in the same process (issue 23: it
should stay within the MMAR figure per item).

Writes N AIR-Bench foundation-shaped rows (Foundation_meta.json: path, question, choice_a..d,
answer_gt, task_name, dataset_name, uniq_id; 19 tasks) and a predictions file of seeded random
letters, then times `cafe score`'s work (cafe.benchmarks.scoring.score_file: load, match by id,
the accuracy section and the official letter-rule section). The same for MMAR: the real
MMAR-meta.jsonl where $CAFE_TEST_DATA has it, else N MMAR-shaped rows. Clips are not needed to
load or score. Prints ms per item for each, the best of --repeat, and the chance figures.

    PYTHONPATH=. python perf/airbench_load_score.py            # N = 20000
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path

import click

TASKS = [f"Task{i:02d}" for i in range(19)]
ANIMALS = ["dog", "cat", "cow", "owl"]


def air_rows(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        task = TASKS[i % len(TASKS)]
        choices = [f"{a} {i % 97}" for a in ANIMALS]
        rows.append({"path": f"clip{i}.wav", "question": f"Which animal is heard in clip {i}?",
                     **{f"choice_{x}": c for x, c in zip("abcd", choices, strict=True)},
                     "answer_gt": choices[rng.randrange(4)], "task_name": task,
                     "dataset_name": f"DS{i % 3}", "uniq_id": str(i)})  # fmt: skip
    return rows


def mmar_rows(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        choices = [f"{a} {i % 97}" for a in ANIMALS]
        rows.append({"id": f"mmar{i}", "audio_path": f"./audio/mmar{i}.wav",
                     "question": f"Which animal is heard in clip {i}?", "choices": choices,
                     "answer": choices[rng.randrange(4)], "modality": "sound",
                     "category": "Perception Layer", "sub-category": "Counting",
                     "language": None})  # fmt: skip
    return rows


def timed(bench: str, data: Path, preds: Path, repeat: int) -> tuple[float, dict, int]:
    from cafe.benchmarks.scoring import score_file

    best = float("inf")
    section: dict = {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        section, _ = score_file(bench, str(data), str(preds))
        best = min(best, time.perf_counter() - t0)
    return best, section, section["total"]["total"]


@click.command()
@click.option("--n", default=20000, show_default=True, help="AIR-Bench rows.")
@click.option("--repeat", default=3, show_default=True, help="Best of this many.")
def main(n: int, repeat: int) -> None:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        air = root / "air" / "Foundation_meta.json"
        air.parent.mkdir()
        air.write_text(json.dumps(air_rows(n, rng)))
        air_preds = root / "air_preds.jsonl"
        air_preds.write_text("".join(json.dumps({"id": str(i), "response": rng.choice("ABCD")})
                                     + "\n" for i in range(n)))  # fmt: skip
        real = Path(os.environ.get("CAFE_TEST_DATA", "/nonexistent")) / "mmar" / "MMAR-meta.jsonl"
        if real.is_file():
            mmar, label = real, f"MMAR (real {real.name})"
            ids = [json.loads(x)["id"] for x in real.read_text().splitlines() if x.strip()]
            choices = {json.loads(x)["id"]: json.loads(x)["choices"]
                       for x in real.read_text().splitlines() if x.strip()}  # fmt: skip
        else:
            rows = mmar_rows(n, rng)
            mmar = root / "mmar" / "MMAR-meta.jsonl"
            mmar.parent.mkdir()
            mmar.write_text("".join(json.dumps(r) + "\n" for r in rows))
            label, ids = f"MMAR-shaped ({n} rows)", [r["id"] for r in rows]
            choices = {r["id"]: r["choices"] for r in rows}
        mmar_preds = root / "mmar_preds.jsonl"
        mmar_preds.write_text("".join(
            json.dumps({"id": i, "answer_prediction": rng.choice(choices[i])}) + "\n"
            for i in ids))  # fmt: skip

        t_air, sec_air, n_air = timed("airbench", air, air_preds, repeat)
        t_mmar, sec_mmar, n_mmar = timed("mmar", mmar, mmar_preds, repeat)
    per_air = 1000 * t_air / n_air
    per_mmar = 1000 * t_mmar / n_mmar
    print(f"AIR-Bench ({n_air} rows): load + score {t_air:.2f} s = {per_air:.3f} ms/item")
    print(f"{label} ({n_mmar} items): load + score {t_mmar:.2f} s = {per_mmar:.3f} ms/item")
    print(f"ratio AIR-Bench / MMAR per item: {per_air / per_mmar:.2f} "
          f"({'within' if per_air <= per_mmar else 'ABOVE'} the MMAR figure)")  # fmt: skip
    head = sec_air["official"]["headline"]
    print(
        f"AIR-Bench random letters, official rule: {head['total']['acc']:.2f} "
        f"(task-row average {head['average']['tasks']}; format failures {head['dropped']})"
    )
    print(f"MMAR random choice text, official string match: {sec_mmar['total']['acc']:.2f}")


if __name__ == "__main__":
    main()
