"""CAFE judges: event extraction by an LLM judge, the rule judge for synth, captions.

``JUDGES`` maps a judge name to a Judge subclass, constructed as ``cls(kind=name, model=...,
endpoints=..., template=..., cache=..., **options)``; built-ins are lazy so `import cafe` pulls no
client library."""

from __future__ import annotations

from typing import Any

from cafe.judge.base import Judge
from cafe.registry import Registry

JUDGES: Registry[type[Judge]] = Registry("judge", entry_point_group="cafe.judges", base=Judge)

for _name, _target in {
    "rule": "cafe.judge.rule:RuleJudge",
    "openai-compatible": "cafe.judge.extraction:LLMJudge",
    "openai": "cafe.judge.extraction:LLMJudge",
    "gemini": "cafe.judge.extraction:LLMJudge",
}.items():
    JUDGES.add_lazy(_name, _target)


def build_judge(name: str, **options: Any) -> Any:
    """The judge registered as ``name``, constructed with ``kind=name`` and ``options``."""
    return JUDGES.get(name)(kind=name, **options)


__all__ = ["JUDGES", "build_judge"]
