"""The scrubber's throughput (cafe.redaction.scrub_text) on hostile shapes: 50 MB without a
space, made of the characters each pattern scans (URL scheme characters, ``user:pass``
fragments, query pairs, credential-like names before ``=``), and a plain model-output text.
Every pattern must be linear: the figure per shape is MB/s, and a quadratic pattern would not
finish. Prints one line per shape.

    PYTHONPATH=. python perf/scrub_throughput.py [--mb 50]
"""

from __future__ import annotations

import argparse
import time

from cafe.redaction import scrub_text

SHAPES = {
    "scheme characters": "a+b.c-d",  # the old userinfo pattern's quadratic case (with an @)
    "user:pass fragments": "a:b@",
    "query pairs": "?a=b&c_key=d;",
    "credential names": "x_api_key=",
    "url with userinfo": "http://u:p@h/",
    "model output": "The dog barks twice, then a bell rings at 1.5 s. ",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0)
    args = ap.parse_args()
    n = int(args.mb * 1_000_000)
    for name, unit in SHAPES.items():
        text = (unit * (n // len(unit) + 1))[: n - 4] + "@h:="  # every pattern gets to run
        t0 = time.perf_counter()
        out = scrub_text(text, secrets=[])
        dt = time.perf_counter() - t0
        print(
            f"{name:22s} {args.mb:.0f} MB in {dt:6.2f} s: {args.mb / dt:7.1f} MB/s "
            f"(output {len(out) / 1e6:.1f} MB)"
        )


if __name__ == "__main__":
    main()
