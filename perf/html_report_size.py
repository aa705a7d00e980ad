"""Size, write time and Chromium's first render of report/index.html for MMAR-shaped runs of
1,000, 10,000 and 30,000 (item, run) units (R runs each, default 3), no embedded audio. The
run folder is built here through RunStore with MMAR-shaped records: a
<think>…</think><answer>…</answer> output of about 2,200 characters (~450 tokens, the length
Qwen2.5-Omni-7B writes on MMAR), parsed sections, an LLM judge's five event lists quoted from
the text and its raw JSON reply, and the accuracy / cafe / decay sections. First render: from
navigation to the item list drawn, in Debian's headless Chromium.

    PYTHONPATH=. python perf/html_report_size.py [--units 1000,10000,30000] [--runs 3] [--figures]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from cafe.records import Judgement, Prediction, Sample
from cafe.reports.html import write_html_report
from cafe.store import PREDICTIONS, SAMPLES, RunStore

MODALITIES = ["sound", "music", "speech", "mix-sound-music", "mix-sound-speech", "mix-music-speech"]
LAYERS = ["Signal", "Perception", "Semantic", "Cultural"]
EVENTS = [
    "a dog barking twice",
    "a car horn in the distance",
    "a woman speaking calmly",
    "rain on a window",
    "a piano playing a minor chord",
    "footsteps on gravel",
    "a crowd cheering",
    "a door slamming",
    "birds chirping",
    "a low hum of an engine",
]
FILLER = (
    "Considering the acoustic evidence step by step, the timbre, the rhythm and the context of "
    "the recording point in the same direction, so the option that matches it best is chosen. "
)


def output_for(rng: random.Random, answer: str) -> tuple[str, list[str]]:
    heard = rng.sample(EVENTS, 4)
    sentences = [f"I can hear {e}." for e in heard]
    body = " ".join(sentences) + " " + FILLER * rng.randint(8, 14)
    return f"<think>{body.strip()}</think>\n<answer>{answer}</answer>", heard


def build_run(root: Path, n: int, runs: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    store = RunStore(root).create()
    store.write_manifest(
        {
            "model": {"name": "Qwen2.5-Omni-7B", "group": "LALM", "adapter": "qwen2.5-omni"},
            "bench": {"name": "mmar", "version": "v1", "n_samples": n, "sha256": "0" * 64},
            "prompt": {"style": "lalm", "template_hash": "a" * 64},
            "runs": runs,
            "seeds": list(range(runs)),
            "generation": {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 2048},
        }
    )
    samples, preds, judgements = [], [], []
    for i in range(n):
        choices = [f"option {c} for question {i}" for c in "ABCD"]
        sid = f"mmar-{i:04d}"
        samples.append(
            Sample(
                id=sid,
                bench="mmar",
                version="v1",
                question=f"Question {i}: what best explains the scene in the recording?",
                choices=choices,
                answer=choices[i % 4],
                audio=[str(root / "audio" / f"{sid}.wav")],
                meta={
                    "modality": MODALITIES[i % len(MODALITIES)],
                    "category": LAYERS[i % len(LAYERS)],
                    "sub-category": f"sub-{i % 16}",
                },
            )
        )
        for r in range(runs):
            pick = choices[rng.randrange(4)]
            text, heard = output_for(rng, pick)
            think = text[len("<think>") : text.index("</think>")]
            preds.append(
                Prediction(
                    sample_id=sid,
                    run_index=r,
                    model="Qwen2.5-Omni-7B",
                    prompt_style="lalm",
                    template_hash="a" * 64,
                    raw_output=text,
                    sections={"think": think, "answer": pick, "format_ok": True},
                    answer=pick,
                    correct=pick == choices[i % 4],
                    reasoning_tokens=len(text.split()),
                    seed=r,
                )
            )
            lists = {
                "matched_events": heard[:2],
                "error_matched": heard[2:3],
                "error_use": [],
                "neutral_events": heard[3:],
                "missed_events": ["a bell ringing"],
            }
            judgements.append(
                Judgement(
                    sample_id=sid,
                    run_index=r,
                    judge="openai-compatible:Qwen/Qwen3-32B",
                    template_hash="j" * 64,
                    raw_reply=json.dumps(lists, indent=1),
                    required_events=heard[:2] + ["a bell ringing"],
                    all_caption_events=heard[:2] + ["a bell ringing", "wind"],
                    all_reasoning_events=heard,
                    **lists,
                )
            )
    for name, records in (
        (SAMPLES, samples),
        (PREDICTIONS, preds),
        ("judgements.jsonl", judgements),
    ):
        with store.writer(name) as w:
            w.write_many(records)
    acc = sum(p.correct for p in preds) / len(preds) * 100
    store.update_metrics(
        "accuracy",
        {
            "total": {"correct": sum(p.correct for p in preds), "total": len(preds), "acc": acc},
            "breakdowns": {
                "modality": {m: {"correct": 1, "total": 2, "acc": 50.0} for m in MODALITIES},
                "category": {c: {"correct": 1, "total": 2, "acc": 50.0} for c in LAYERS},
            },
            "parse_rate": 100.0,
            "unanswered": 0,
            "failed": 0,
        },
    )
    store.update_metrics(
        "cafe",
        {"mode": "micro", "acc_per": 50.0, "err_per": 25.0, "err_use": 0.0, "err_omit": 33.3,
         "ci95": {"acc_per": [48.0, 52.0]}, "judge": {"judge": "openai-compatible:Qwen/Qwen3-32B"}},
    )  # fmt: skip
    return root


def first_render_s(page_path: Path) -> float:
    """Seconds from navigation to the item list drawn (its count line filled) in headless
    Chromium (Debian's, driven by Playwright, as the HTML tests do)."""
    import os
    import shutil

    from playwright.sync_api import sync_playwright

    exe = os.environ.get("CAFE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe)
        try:
            page = browser.new_page()
            t0 = time.perf_counter()
            page.goto(page_path.as_uri(), timeout=600_000)
            page.wait_for_function(
                "() => (document.getElementById('f-count') || {}).textContent", timeout=600_000
            )
            return time.perf_counter() - t0
        finally:
            browser.close()


def measure(units: int, runs: int, figures: bool, browser: bool) -> str:
    items = max(1, units // runs)
    with tempfile.TemporaryDirectory() as tmp:
        root = build_run(Path(tmp) / "run", items, runs)
        t0 = time.perf_counter()
        page = write_html_report(root, draw=figures)
        dt = time.perf_counter() - t0
        size = page.path.stat().st_size
        outputs = items * runs
        line = (
            f"{outputs:>6} (item, run) units ({items} items x {runs} runs): index.html "
            f"{size / 1e6:.2f} MB ({size / outputs / 1e3:.2f} kB per unit), written in {dt:.1f} s"
        )
        if browser:
            line += f", first render in Chromium {first_render_s(page.path):.1f} s"
        return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", default="1000,10000,30000",
                    help="(item, run) units per page, comma-separated")  # fmt: skip
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--figures", action="store_true", help="Also draw the inline SVG figures.")
    ap.add_argument("--no-browser", action="store_true", help="Size and write time only.")
    args = ap.parse_args()
    for units in (int(u) for u in args.units.split(",")):
        print(measure(units, args.runs, args.figures, not args.no_browser), flush=True)


if __name__ == "__main__":
    main()
