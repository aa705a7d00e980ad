"""The slowed writer of the timing audit (issue 29): with ``CAFE_TEST_SLOW_WRITES=SECONDS`` every
durable write of a run folder (a JSONL batch, a whole-file replace) waits that long first, so
generation and judging run far ahead of the writes. A test that passes only where the writes keep
up rests on timing. conftest installs it in the test process; sitecustomize.py in the cafe
subprocesses tests start (runner_helpers.subprocess_env puts tests/ on their path)."""

from __future__ import annotations

import os
import time
from typing import Any


def install() -> None:
    delay = float(os.environ.get("CAFE_TEST_SLOW_WRITES") or 0)
    if delay <= 0:
        return
    from cafe import safe_files, store

    if getattr(store.JsonlWriter.write_many, "slowed", False):
        return
    real_write_many, real_replace = store.JsonlWriter.write_many, store.replace_file

    def write_many(self: Any, records: Any) -> None:
        time.sleep(delay)
        real_write_many(self, records)

    def replace_file(path: Any, write: Any) -> None:
        time.sleep(delay)
        real_replace(path, write)

    write_many.slowed = True  # type: ignore[attr-defined]
    store.JsonlWriter.write_many = write_many  # type: ignore[method-assign]
    # the writer's home and the store, which imported it by name: both reach the slowed one
    safe_files.replace_file = store.replace_file = replace_file
