"""CPU per judgement of `judge_run` (the CAFE judge on the engine, through the one caller)
against a loopback judge in another process with no latency: the pipeline's own cost, which a
loaded machine changes far less than it changes wall time (issue 42's before/after check).
Prints figures; asserts nothing.

    PYTHONPATH=. python perf/judge_cpu.py [ITEMS]     # default 960, three repetitions
"""

from __future__ import annotations

import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import judge_throughput as jt  # noqa: E402  (its loopback judge process and run folder)

from cafe.steps.cafe_judge import judge_run  # noqa: E402


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 960
    srv = jt.JudgeServer(0.0)
    per = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            store = jt.build(Path(tmp) / "run", n)
            c0 = cpu_s()
            judge_run(store.root, "openai-compatible", "judge-m", [srv.url], 32, progress=False,
                      cache=Path(tmp) / "c.sqlite")  # fmt: skip
            per.append((cpu_s() - c0) / n * 1000)
    srv.requests()
    print(f"{n} judgements: judge_run CPU per judgement (ms), 3 repetitions: "
          + ", ".join(f"{v:.2f}" for v in per))  # fmt: skip


if __name__ == "__main__":
    main()
