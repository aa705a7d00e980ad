"""The judge spec: one frozen value that says everything deciding a judge's replies (the judge
side's RunSpec). Every judge call's cache key derives from it (``JudgeSpec.call_key``), and it is
stored beside the judgements it made and compared whole on resume: judgements made under another
spec are judged again, never mixed.

The endpoint's identity is the protocol (``kind``), the served model and whose servers answer
(``endpoint``: "service" or "named"): a self-hosted model is never taken for the service's model
of the same name. How calls are made (URLs, how many servers, concurrency, batch, timeouts, keys)
is left out on purpose: it does not change a reply, so re-sharding keeps the cache keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cafe.cache import make_key
from cafe.execution import resume

R = TypeVar("R")


@dataclass(frozen=True)
class JudgeSpec:
    task: str  # cafe-extraction | answer-extraction | caption | mmar-rubric | ...
    kind: str  # the judge kind / client protocol (rule, openai, gemini, openai-compatible)
    model: str | None  # the served judge model (None for the rule judge)
    template_hash: str
    endpoint: str | None = "service"  # "service" | "named" | None (no server: the rule judge)
    thinking: bool = False
    max_tokens: int | None = None  # the reply budget, thinking budget included
    temperature: float | None = 0.0
    seed: int | None = None
    raters: int = 1
    trim: int = 0
    retries: int = 0

    #: fields that change the judgements but not what one call replies (rater r's attempt a is
    #: the same request whatever the number of raters, the trim or the retries allowed): in the
    #: spec, so judgements made under others are redone, but not in a call's cache key, so the
    #: calls both protocols share are paid once
    PROTOCOL = ("raters", "trim", "retries")

    @staticmethod
    def endpoint_of(endpoints: Any) -> str:
        return "named" if endpoints else "service"

    @property
    def identity(self) -> str:  # the rule judge: its kind, which carries its version
        return f"{self.kind}:{self.model}" if self.model else self.kind

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeSpec:
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, Mapping) or set(data) - names or "task" not in data:
            raise ValueError("not a judge spec of this cafe")
        return cls(**{k: v for k, v in data.items() if k in names})

    def call_fields(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_dict().items() if k not in self.PROTOCOL}

    def call_key(self, **request: Any) -> str:
        """One call's cache key: the call fields plus the request (prompt, audio, rater…)."""
        return make_key(judge=self.call_fields(), **request)


#: how resume's notes name a judge spec, and what becomes of another spec's judgements
SPEC_NAME, REDONE = "judge spec", "judged again"


def normalized(data: Any) -> dict[str, Any] | None:
    """A stored spec with this cafe's defaults filled; None: damaged or foreign (another spec)."""
    try:
        return JudgeSpec.from_dict(data).to_dict()
    except (ValueError, TypeError):
        return None


def resume_records(
    records: Path,
    spec: JudgeSpec,
    read: Callable[[Path], Sequence[R]],
    legacy_ok: Callable[[R], bool],
    *,
    write: bool = True,
) -> list[R]:
    """The records of ``records`` this judge spec may keep (cafe.execution.resume); a folder
    from before judge specs keeps those ``legacy_ok`` accepts (same identity and template)."""
    return resume(records, spec.to_dict(), read, write=write, legacy_ok=legacy_ok,
                  normalize=normalized, spec_name=SPEC_NAME, redone=REDONE)  # fmt: skip
