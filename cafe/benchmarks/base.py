"""The benchmark contract: load samples (with their problems reported, never raised per item) and
name the breakdowns that scoring reports."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cafe.records import Problem, Sample
from cafe.registry import Registry


@dataclass
class LoadedBenchmark:
    samples: list[Sample]  # items with Sample.error set are recorded as failed, not run
    version: str
    source: str  # file or folder it came from
    sha256: str | None = None  # of the metadata file, identifies the version
    problems: list[Problem] = field(default_factory=list)


def by_meta(*keys: str) -> dict[str, Callable[[Sample], Any]]:
    """Breakdowns that each read one Sample.meta field of the same name."""
    return {k: (lambda s, k=k: s.meta.get(k)) for k in keys}


class Benchmark(ABC):
    name: str = ""
    #: breakdown name -> function of a Sample giving its value (or list of values)
    breakdowns: dict[str, Callable[[Sample], Any]] = {}
    #: whether items carry answers (MMAU test does not: predictions and export only)
    #: folder the metadata's audio paths are relative to and must stay inside (--audio-root);
    #: None: the metadata file's own folder
    audio_root: str | None = None

    @abstractmethod
    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark: ...


BENCHMARKS: Registry[type[Benchmark]] = Registry("benchmark", entry_point_group="cafe.benchmarks")
