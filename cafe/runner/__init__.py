"""The run in stages (DESIGN.md "the one data flow"):

- spec.py     RunSpec: the frozen identity of a run, compared whole on resume; RunRequest: what
              one run() call asks for (the inputs of the spec, the folder, per-call knobs)
- plan.py     model, prompt and benchmark resolved and checked; folder, spec, pending pairs
- execute.py  requests -> completions: batches, threads, async adapters, the call cache
- score.py    completion -> Prediction by the benchmark's own correctness rule
- main.py     run(request): the stages in order, the manifest kept in step, then the judge
- cli.py      `cafe run`
The summary the command prints lives in cafe/reports/summary.py; model resolution in
cafe/adapters/resolve.py."""

from __future__ import annotations

from cafe.runner.spec import RunError, RunSpec

__all__ = ["RunError", "RunSpec"]
