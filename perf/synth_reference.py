"""Synth benchmark and reference listener figures: generation speed, reference CPU time per clip
(decode, listen, answer), accuracy of reference and random by difficulty and dimension, and the
reference's accuracy when the audio is shuffled across items (chance if it truly listens).

    PYTHONPATH=. python perf/synth_reference.py [--n 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import defaultdict

from cafe.adapters import ADAPTERS
from cafe.adapters.cards import load_cards
from cafe.adapters.listening import listen
from cafe.adapters.reference import answer, prompt_text, read_question_and_choices
from cafe.audio import load_audio
from cafe.benchmarks.synth import load_folder
from cafe.benchmarks.synth.generator import generate
from cafe.records import Request

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def request(sample, audio: str, style: str) -> Request:
    try:  # the harness's own prompt builder when present
        from cafe.prompts import build_request

        req = build_request(sample, style, 0, 0, {})
        for m in req.messages:
            for p in m["content"] if isinstance(m["content"], list) else []:
                if p.get("type") == "audio":
                    p["path"] = audio
        req.audio = [audio]
        return req
    except ImportError:
        text = f"{sample.question}\nSelect one option from the provided choices:\n" + "\n".join(
            sample.choices
        )
        content = [{"type": "audio", "path": audio}, {"type": "text", "text": text}]
        return Request(
            sample.id, 0, [{"role": "user", "content": content}], [audio], {}, 0, style, "-"
        )


def accuracy(samples, texts) -> dict[str, float]:
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s, t in zip(samples, texts, strict=True):
        m = ANSWER.search(t or "")
        ok = int(bool(m) and m.group(1).strip() == s.answer)
        for key in ("total", s.meta["difficulty"], s.meta["dimension"]):
            acc[key][0] += ok
            acc[key][1] += 1
    return {k: 100.0 * c / n for k, (c, n) in acc.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        generate(tmp, n=args.n, seed=args.seed)
        gen_ms = (time.perf_counter() - t0) * 1000 / args.n
        samples = load_folder(tmp).samples

        t_load = t_listen = t_answer = 0.0
        for s in samples:
            c0 = time.process_time()
            x = load_audio(s.audio[0])
            c1 = time.process_time()
            events = listen(x)
            c2 = time.process_time()
            q, ch = read_question_and_choices(prompt_text(request(s, s.audio[0], "mpar2")))
            answer(q, ch, events)
            c3 = time.process_time()
            t_load, t_listen, t_answer = t_load + c1 - c0, t_listen + c2 - c1, t_answer + c3 - c2

        cards = load_cards()
        results = {}
        for name in ("reference", "random"):
            card = cards[name]
            adapter = ADAPTERS.get(card.adapter)(card)
            reqs = [request(s, s.audio[0], card.prompt_style) for s in samples]
            results[name] = accuracy(samples, [c.text for c in adapter.generate(reqs)])
        card = cards["reference"]
        ref = ADAPTERS.get(card.adapter)(card)
        n = len(samples)
        shuffled = [
            request(s, samples[(i + 1) % n].audio[0], "mpar2") for i, s in enumerate(samples)
        ]
        results["reference, shuffled audio"] = accuracy(
            samples, [c.text for c in ref.generate(shuffled)]
        )

    print(f"synth items: {args.n} (seed {args.seed}); generation {gen_ms:.1f} ms/item")
    print(
        f"reference CPU per clip: decode {t_load * 1000 / n:.2f} ms, listen "
        f"{t_listen * 1000 / n:.2f} ms, read prompt + answer {t_answer * 1000 / n:.2f} ms"
    )
    keys = ["total", "easy", "medium", "hard", "counting", "pitch", "rhythm", "temporal", "timbre"]
    print(f"{'accuracy %':28s}" + "".join(f"{k:>10s}" for k in keys))
    for name, acc in results.items():
        print(f"{name:28s}" + "".join(f"{acc.get(k, 0):10.1f}" for k in keys))


if __name__ == "__main__":
    main()
