"""CAFE judges: event extraction by an LLM judge, the rule judge for synth, captions.

``JUDGES`` maps a judge name to a Judge subclass, constructed as ``cls(kind=name, model=...,
endpoints=..., template=..., cache=..., **options)``; built-ins are lazy so `import cafe` pulls no
client library."""

from __future__ import annotations

from typing import Any

from cafe.judge.base import Judge
from cafe.registry import Registry

JUDGES: Registry[type[Judge]] = Registry("judge", entry_point_group="cafe.judges", base=Judge)

JUDGES.add_lazy("rule", "cafe.judge.rule:RuleJudge")
for _kind in ("openai-compatible", "openai", "gemini"):  # one LLM judge for every chat protocol
    JUDGES.add_lazy(_kind, "cafe.judge.extraction:LLMJudge")


def build_judge(name: str, **options: Any) -> Any:
    return JUDGES.get(name)(kind=name, **options)


__all__ = ["JUDGES", "build_judge"]
