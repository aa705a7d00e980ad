"""Cross-version check (issue 42): a run folder written by an earlier cafe (OLD, a checkout of an
earlier commit) is read, re-judged, resumed and judged again by this checkout. Prints the judge
calls each stage sent (the old folder's items: 0, the 4 items the resume adds: 4) and fails
loudly where a figure or a file differs.

    git worktree add --detach /tmp/old e023d67
    python perf/old_folder.py /tmp/old [WORK_DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NEW = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(NEW))

from cafe.testing.loopback import OpenAILoopback  # noqa: E402

#: the extraction judge's reply for every item: matched 1, hallucinated 1, neutral 1, missed 1
EXTRACTION = {"required_events": ["dog", "bell"], "all_caption_events": ["dog", "bell", "rain"],
              "all_reasoning_events": ["dog", "horn", "rain"], "matched_events": ["dog"],
              "error_matched": ["horn"], "error_use": [], "neutral_events": ["rain"],
              "missed_events": ["bell"]}  # fmt: skip
CAFE_KEYS = ("acc_per", "err_per", "err_use", "err_omit", "judgements")


def reply(body: dict) -> str:
    """The CAFE judge's JSON, or option A for the answer-extraction judge."""
    return json.dumps(EXTRACTION) if "matched_events" in json.dumps(body) else "A"


def main() -> None:
    old = Path(sys.argv[1]).resolve()
    work = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="old-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    run_dir, cache = work / "run", work / "judge.sqlite"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CAFE_CACHE": str(work / "cache"),
           "CAFE_ENDPOINT_API_KEY": "loopback"}  # fmt: skip

    def cafe(checkout: Path, *args: object) -> str:
        r = subprocess.run([sys.executable, "-m", "cafe.cli", *map(str, args)],
                           env={**env, "PYTHONPATH": str(checkout)}, capture_output=True,
                           text=True, cwd=work)  # fmt: skip
        if r.returncode:
            sys.exit(f"{checkout}: cafe {args[0]} exited {r.returncode}:\n{r.stderr[-3000:]}")
        return r.stdout

    def files() -> list[str]:
        return sorted(p.name for p in run_dir.iterdir() if not p.name.startswith("."))

    def cafe_section() -> dict:
        return json.loads((run_dir / "metrics.json").read_text())["cafe"]

    with OpenAILoopback(reply=reply) as srv:
        judge = ["--judge", "openai-compatible", "--judge-model", "jm", "--judge-endpoint",
                 srv.url, "--cache", cache]  # fmt: skip
        cafe(old, "run", "--limit", 12, "--out", run_dir, "--judge", "none", "--no-progress")
        cafe(old, "judge", run_dir, *judge, "--no-progress")
        cafe(old, "decay", run_dir)
        cafe(old, "judge-accuracy", run_dir, *judge)
        sent, before, layout = len(srv.requests), cafe_section(), files()
        print(f"old {old.name}: 12 items, {sent} judge calls sent")

        cafe(NEW, "judge", run_dir, *judge, "--no-progress")
        cafe(NEW, "decay", run_dir)
        again = cafe_section()
        differ = [k for k in CAFE_KEYS if again[k] != before[k]]
        if differ or files() != layout:
            sys.exit(f"the old folder reads otherwise: {differ} {set(files()) ^ set(layout)}")
        print(
            f"new, the old folder re-judged: {len(srv.requests) - sent} calls sent; "
            f"{', '.join(CAFE_KEYS)} and the files as before"
        )

        cafe(NEW, "run", "--limit", 16, "--out", run_dir, "--judge", "none", "--no-progress")
        sent = len(srv.requests)
        cafe(NEW, "judge", run_dir, *judge, "--no-progress")
        judged = len(srv.requests) - sent
        cafe(NEW, "judge-accuracy", run_dir, *judge)
        answered = len(srv.requests) - sent - judged
        print(
            f"new, resumed to 16 items: {judged} CAFE judge calls and {answered} answer-judge "
            "calls sent (4 each expected)"
        )
        if (judged, answered) != (4, 4):
            sys.exit("the resume did not keep the old folder's judgements")


if __name__ == "__main__":
    main()
