"""The version of a set cafe generates (synth, spoken): "n<N>-seed<S>", parsed and bounded.
Below cafe.benchmarks.generated (whose GeneratedBenchmark.load reads it) and the sets' own
packages, so neither imports the other for it."""

from __future__ import annotations

import re

from cafe.errors import CafeUsageError

_VERSION_RE = re.compile(r"^n(\d+)-seed(\d+)$")
#: the largest set generated on demand (~5 GB of clips) and the largest seed numpy takes
MAX_N = 100_000
MAX_SEED = 2**32 - 1


def parse_version(bench: str, version: str | None, n: int, seed: int) -> tuple[int, int]:
    """(N, S) of a generated benchmark's version "n<N>-seed<S>" ((n, seed) when None), bounded:
    an absurd N would start generating clips for hours."""
    if not version:
        return n, seed
    example = f"n<N>-seed<S>, e.g. n{n}-seed0"
    m = _VERSION_RE.match(version)
    if not m:
        raise CafeUsageError(f"{bench} version {version!r}: use {example}")
    n, seed = int(m.group(1)), int(m.group(2))
    if not (1 <= n <= MAX_N and seed <= MAX_SEED):
        raise CafeUsageError(
            f"{bench} version {version!r}: N must be 1 to {MAX_N} items and S a seed "
            f"from 0 to {MAX_SEED} ({example})"
        )
    return n, seed
